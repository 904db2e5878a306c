"""Group-travel hidden-profile tasks (Consilience appendix F): ``records``, ``predicates``, the ``statements``
grammar, the ``validator``, conversion to hidden-profile tasks (``convert``), the LM-free ``generator``, the
LM path (``lm_generator``) and the ``vocab`` they draw from.

Modules here import records, each other, and (for the LM path only) the Consilience travel builder program.
"""
