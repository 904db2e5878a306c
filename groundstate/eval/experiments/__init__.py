"""Experiments as data: a spec (TOML) names every run of one paper table; plan prices it, run executes exactly its
cells, table tabulates exactly its cells beside the paper's published numbers.

- :mod:`~groundstate.eval.experiments.spec`: the spec format (documented there), its pydantic models and the judge
  choices; :mod:`~groundstate.eval.experiments.load`: reading a spec (:func:`load_spec`), what a spec may not name.
- :mod:`~groundstate.eval.experiments.cells`: the cells of a spec, resolved and planned through the one assembly
  path (:func:`groundstate.eval.assemble.assemble`).
- :mod:`~groundstate.eval.experiments.counting`: what a cell will cost, from a dry run with a counting scripted LM.
- :mod:`~groundstate.eval.experiments.execute`: running exactly the spec's cells, durably and resumably.
- :mod:`~groundstate.eval.experiments.readers`: per task, how a cell's runs become the table's numbers
  (:mod:`~groundstate.eval.experiments.dhd_readers`: the DHD analysis of a replay or masking cell).
- :mod:`~groundstate.eval.experiments.table`: the table builder (runs checked against their cells, references,
  averages); :mod:`~groundstate.eval.experiments.render` writes it (Markdown, JSON, PNG).

The shipped specs are package data in :mod:`groundstate.experiments`.
"""
