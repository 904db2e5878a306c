"""Measuring Diverse Hypothesis Deliberation: the message cache (``cache``), the durable steps generate, replay
and mask (``run``, ``replay``, ``masking``), per-message effects (``effects``), message values and the
permutation null (``values``), the hierarchical bootstrap (``bootstrap``), cross-fitting (``crossfit``), the
analysis that ties them together (``analysis``) and the report's charts (``report``).

It imports the DHD programs (:mod:`groundstate.programs.dhd`) and the runner; statistics come from scipy.
"""
