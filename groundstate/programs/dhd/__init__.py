"""Diverse Hypothesis Deliberation's programs: the recruiter, the hypothesizers, the integrator and the
independent solver (``deliberation``), how a message is shown to the integrator (``views``), and the answer
evaluator with its two modes, an LM judge of the whole response and rule checks (``evaluator``), which read final
answers with ``answers``. Replays, masking and statistics are in :mod:`groundstate.eval.dhd`.

They import signatures, ``programs.common`` and records only.
"""
