"""Diverse Hypothesis Deliberation's programs: the recruiter, the hypothesizers, the integrator and the
independent solver (``deliberation``), and the answer evaluator with its two modes, an LM judge of the whole
response and rule checks (``evaluator``). Replays, masking and statistics are in :mod:`groundstate.eval.dhd`.

They import signatures, ``programs.common`` and records only.
"""
