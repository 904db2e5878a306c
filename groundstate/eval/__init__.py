"""The evaluation floor: the durable runner and its run directories, data I/O, splits, statistics, reports, the
typed settings (``settings.py``, ``run_settings.py``), the task registry, and one wing per system (``reground/``,
``consilience/``, ``dhd/``) plus ``benchmarks/``.

It may import every floor above it (plumbing, signatures, programs, optimizers), never ``cli``. Every durable run
is assembled from typed settings by :mod:`~groundstate.eval.assemble` (a task's plan) and executed by
:func:`~groundstate.eval.runner.durable_run`.
"""
