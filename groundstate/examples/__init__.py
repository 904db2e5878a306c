"""Example data sets shipped inside the package, so they work from any working directory.

``--data example:qa`` (or a bare ``qa`` that is not a file) names ``groundstate/examples/qa.jsonl``; in Python,
``groundstate.examples.path("qa")``. The files are package data (``[tool.setuptools.package-data]``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PREFIX = "example:"
SUFFIXES = (".jsonl", ".json")


def names() -> list[str]:
    """The names of the shipped examples (``qa``, ...)."""
    root = resources.files(__name__)
    return sorted(p.name.rsplit(".", 1)[0] for p in root.iterdir() if p.name.endswith(SUFFIXES))


def path(name: str) -> str:
    """The file of the shipped example ``name`` (with or without ``example:``).

    Raises:
        FileNotFoundError: no such example (the message lists the ones that exist).
    """
    name = name.removeprefix(PREFIX)
    for suffix in ("", *SUFFIXES):
        candidate = resources.files(__name__) / f"{name}{suffix}"
        if candidate.is_file() and str(candidate).endswith(SUFFIXES):
            return str(candidate)
    raise FileNotFoundError(f"no example named '{name}' (shipped examples: {', '.join(names()) or 'none'})")


def resolve(value: str | None) -> str | None:
    """``value`` itself when it is an existing file (or ``None``); ``example:NAME``, or a bare ``NAME`` that is
    not a file but names a shipped example, -> that example's path.

    Raises:
        FileNotFoundError: ``example:NAME`` with no such example.
    """
    if value is None or Path(value).exists():
        return value
    if value.startswith(PREFIX):
        return path(value)
    if "/" not in value and "\\" not in value and value.removesuffix(".jsonl") in names():
        return path(value.removesuffix(".jsonl"))
    return value
