"""The optimizers floor: what fits a program to data. ``tune`` (DSPy's optimizers within a budget, metric-agnostic
like DSPy's teleprompters: it takes a metric callable), ``targets`` (which predictors may change), ``artifacts``
(saving and safely loading programs, estimators and calibrators), the MLP controller (``controller``), the
round-wise conformal calibrator (``conformal``) and Consilience exploration, training and calibration
(``consilience``).

It may import the plumbing modules, signatures and programs, never ``eval`` or ``cli``.
"""
