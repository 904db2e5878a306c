"""Group-travel hidden-profile tasks (Consilience appendix F): ``records``, ``predicates``, the ``statements``
grammar, the ``validator``, conversion to hidden-profile tasks (``convert``), the LM-free ``generator``, the
LM path (``lm_generator``), the ``vocab`` they draw from, and ``leak``, which measures how often rules that read
only the public plans find the answer.

Modules here import records, each other, and (for the LM path only) the Consilience travel builder program.
"""
