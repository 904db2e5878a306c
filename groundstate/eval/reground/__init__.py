"""Measuring ReGround and the collaboration baselines on OffQuery: the prediction contract (``contract``),
T1 (``t1``), T2 with its judges (``t2``, ``judges``), T3 (``t3``), all three per instance (``scores``), the DSPy
and GEPA metrics built from them (``metrics``), judge agreement (``agreement``), the runnable tasks (``tasks``),
``compare`` and ``optimize`` (tuning against T1/T2/T3 and evaluating the saved program).

It imports the ReGround programs and the optimizers; nothing on a lower floor imports it.
"""
