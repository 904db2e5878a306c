"""The experiment specs shipped inside the package: one TOML file per paper table (package data).

``groundstate experiment list`` lists them; ``groundstate experiment plan|run|table NAME`` finds
``groundstate/experiments/NAME.toml`` here; in Python,
``groundstate.experiments.path("NAME")``. The format of a spec, and the code that reads and runs one, live in
:mod:`groundstate.eval.experiments` (this folder holds only the files, so it imports nothing of the library).
"""

from __future__ import annotations

from importlib import resources

SUFFIX = ".toml"


def names() -> list[str]:
    """The names of the shipped specs, sorted (``reground-table1-synthetic``, ...)."""
    root = resources.files(__name__)
    return sorted(p.name[: -len(SUFFIX)] for p in root.iterdir() if p.name.endswith(SUFFIX) and p.is_file())


def path(name: str) -> str:
    """The file of the shipped spec ``name`` (with or without ``.toml``).

    Raises:
        FileNotFoundError: no such shipped spec (the message lists the ones that exist).
    """
    stem = name.removesuffix(SUFFIX)
    if stem in names():
        return str(resources.files(__name__) / f"{stem}{SUFFIX}")
    raise FileNotFoundError(f"no shipped experiment spec named '{name}' (shipped: {', '.join(names()) or 'none'})")
