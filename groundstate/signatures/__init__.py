"""The signatures floor: DSPy signatures only, one file per family (verification, state, resolution,
collaboration, deliberation, discussion, judging, generation, travel, checks). A signature's docstring is its
instruction and every field has a ``desc``; free text is bounded so small local models stay parseable.

Signatures import nothing from groundstate except records; they never import a program.
"""
