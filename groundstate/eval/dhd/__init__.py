"""Measuring Diverse Hypothesis Deliberation: the message cache (``cache``), the durable steps generate, replay
and mask (``run``, ``replay``, ``masking``), per-message effects (``effects``: the block effect
``(A + B) / 2 - removal``), the separation rule (``rule``), message values (``values``), the within-block
permutation null (``null``), the per-message within-block permutation tests (``message_tests``), the
problem-level max-statistic BH/BY analysis (``multiplicity``), the hierarchical
bootstrap (``bootstrap``), cross-fitting (``crossfit``), the replay inventory of arms and failed calls
(``completeness``), the generative model of the design (``simulate``), the analysis that ties them together
(``analysis``) and the report's charts (``report``).

It imports the DHD programs (:mod:`groundstate.programs.dhd`) and the runner; statistics come from scipy.
"""
