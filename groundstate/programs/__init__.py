"""The programs floor: ``dspy.Module`` s composed from the signatures, one wing per system (``reground/``,
``consilience/``, ``dhd/``), plus ``common`` (what every program shares: ``saveable``, ``as_data``, the plurality
vote, the OffQuery output contract) and ``qa`` (a one-step smoke-test program).

Programs import only the plumbing modules, the signatures and each other; scores are computed outside them.
"""
