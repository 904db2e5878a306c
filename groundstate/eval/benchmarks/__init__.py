"""Benchmark data: loaders, builders and generators, one folder or module per benchmark.

``offquery/`` (published files, groundstate's format, the synthetic generator, MediQ builders), ``hiddenbench.py``,
``travel/`` (the group-travel hidden-profile generator and validator) and ``problems.py`` (SciBench, JEEBench and
JSON Lines problems for DHD). Modules here may import records, programs (the LM builders) and ``eval.io``.
"""
