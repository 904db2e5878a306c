"""The evaluation floor: the durable runner and its run directories, data I/O, splits, statistics, reports, the
task registry, and one wing per system (``reground/``, ``consilience/``, ``dhd/``) plus ``benchmarks/``.

It may import every floor above it (plumbing, signatures, programs, optimizers), never ``cli``. Every command that
runs LM work over many records goes through :func:`~groundstate.eval.runner.durable_run` from here.
"""
