"""Naming cells: ``axis:key`` selectors (``--cells``, ``--use-run``, ``[runs]``) and the cells references name.

A selector is ``axis:key`` pairs joined by commas (``model:embedded,method:Standard``); the key of a value is
its ``key`` (default its label), and the label itself is accepted too. A selector matches every cell that has
all its pairs; axes it leaves out match anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groundstate.errors import ConfigError, InputError


def parse_selector(text: str, what: str = "cell selector") -> dict[str, str]:
    """``"model:x,method:Standard"`` -> ``{"model": "x", "method": "Standard"}``.

    Raises:
        ConfigError: an empty selector or a pair without ``axis:``.
    """
    pairs: dict[str, str] = {}
    for part in str(text).split(","):
        axis, sep, key = part.strip().partition(":")
        if not sep or not axis.strip() or not key.strip():
            raise ConfigError(f"{what} '{text}': give axis:value pairs joined by commas (for example "
                              "method:Standard,data:healthcare)")
        pairs[axis.strip()] = key.strip()
    return pairs


def matches(selector: Mapping[str, str], keys: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a cell (its ``keys`` and ``labels`` per axis, ``seed`` among them) has every pair of ``selector``."""
    return all(axis in keys and value in (keys[axis], labels.get(axis)) for axis, value in selector.items())


def check_selector(selector: Mapping[str, str], dimensions: list[str], text: str, where: str) -> None:
    """Refuse a selector naming an axis the spec does not have (one line naming ``where``)."""
    for axis in selector:
        if axis not in (*dimensions, "seed"):
            raise ConfigError(f"{where}: '{text}' names no axis '{axis}' (axes: {', '.join(dimensions)})")


def split_use_run(item: str) -> tuple[str, str]:
    """``CELL=RUN`` (``--use-run``) split on its last ``=`` (a sensitivity key holds one).

    Raises:
        ConfigError: no ``=``.
    """
    cell, sep, run = str(item).rpartition("=")
    if not sep or not cell.strip() or not run.strip():
        raise ConfigError(f"--use-run takes CELL=RUN (a cell selector and a run id or directory), got '{item}'")
    return cell.strip(), run.strip()


def check_references(spec: Any) -> None:
    """Every reference names axes of the spec (its values may name cells the spec does not run: those are listed
    under the table), and names every axis that has several values unless it names its average.

    Raises:
        InputError: the first reference that does not, naming the file and the field.
    """
    dims = spec.dimensions()
    values = spec.axis_values()
    for i, reference in enumerate(spec.reference):
        for axis in reference.cell:
            if axis not in dims:
                raise InputError(f"names no axis '{axis}' (axes: {', '.join(dims) or 'none'})", file=spec.source,
                                 field=f"reference[{i}].cell")
        for axis, entries in values.items():
            if len(entries) > 1 and axis not in reference.cell:
                raise InputError(f"must name the axis '{axis}' (it has several values)", file=spec.source,
                                 field=f"reference[{i}].cell")
