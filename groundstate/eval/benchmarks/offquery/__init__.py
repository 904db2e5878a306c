"""OffQuery data (ReGround's benchmark): the published files (``published``), groundstate's own format and
format detection (``loader``), validation errors, statistics (``stats``), the seeded synthetic generator
(``synthetic``, ``domains``, ``corruption``) and the MediQ builders (``mediq``, ``mediq_rule``, ``mediq_lm``).

Everything yields :class:`~groundstate.records.OffQueryInstance` records; bad input is one line naming the file,
the record and the field.
"""
