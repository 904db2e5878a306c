"""Evaluating Consilience and the reference protocols: task data and exploration files (``data``), durable runs
of protocols and controllers (``evaluate``), held-out conformal coverage (``coverage``) and the discussion
metrics of §4.2 (``metrics``).

It imports the Consilience programs and the fitted calibrators from ``optimizers``; training and calibration
themselves are in :mod:`groundstate.optimizers.consilience`.
"""
