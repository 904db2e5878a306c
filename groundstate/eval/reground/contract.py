"""What an OffQuery prediction looks like to the metrics, and how a field is read from one.

The prediction contract (a ``dspy.Prediction``, a dict or any object with these attributes):

- ``misleading_agent``: the misleading agent as an index (``2``, ``"2"``), a name (``"Agent 2"``,
  ``"Agent 2 (laboratory)"``), a role (``"laboratory"``), a list of those (several misleading agents), or
  ``None`` / ``"none"`` / ``[]`` for "every agent is reliable". Indices are the 0-based agent indices of the
  instance, the same numbers as in ``AgentEvidence.name`` (``Agent 0``, ``Agent 1``, ...).
- ``state``: the reconstructed information state (a string; a list of strings is read as one fact per line).
- ``answer``: the option letter ``A``-``D``.

T1 is scored in :mod:`~groundstate.eval.reground.t1`, T2 in :mod:`~groundstate.eval.reground.t2` (with the
judges of :mod:`~groundstate.eval.reground.judges`), T3 in :mod:`~groundstate.eval.reground.t3`; all three at
once in :mod:`~groundstate.eval.reground.scores`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

METRICS: tuple[str, ...] = ("t1", "t2", "t3")


MISSING = object()


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` otherwise, ``default`` when absent."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    try:
        return getattr(obj, name)
    except (AttributeError, KeyError):
        return default
