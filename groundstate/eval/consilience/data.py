"""Consilience data: task-level splits (appendix C.1) and exploration files, checked row by row."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from groundstate.errors import InputError
from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks
from groundstate.eval.io import read_jsonl, require_records
from groundstate.eval.sources import as_source, describe
from groundstate.eval.splits import split_instances
from groundstate.programs.consilience.state import STORED_FEATURES
from groundstate.records import COMM_ACTIONS, HiddenProfileTask


def load_exploration(path: str, allow_empty: bool = False) -> list[dict[str, Any]]:
    """Exploration rows written by ``consilience explore``, each checked: ``features`` a list of
    ``len(STORED_FEATURES)`` finite numbers and ``rewards`` a list of one finite number per communication
    action (rows of earlier versions, with a Vote column or fewer features, are refused with that reason).

    Raises:
        InputError: an unreadable file or a row with a missing, ragged or non-numeric field (one line naming
            the file, the line and the field), or no rows at all.
    """
    rows = read_jsonl(path)
    sizes = {"features": len(STORED_FEATURES), "rewards": len(COMM_ACTIONS)}
    for number, row in enumerate(rows, start=1):
        for key, size in sizes.items():
            value = row.get(key)
            where = {"file": path, "record": f"{number}", "field": key}
            if not isinstance(value, list):
                raise InputError(f"must be a list of {size} numbers (got {_kind(value)})", **where)
            if len(value) != size:
                old = (" (a Vote column: written by an earlier version; explore again)"
                       if key == "rewards" and len(value) == len(COMM_ACTIONS) + 1 else "")
                raise InputError(f"has {len(value)} values, expected {size} (one per "
                                 f"{'stored state feature' if key == 'features' else 'communication action'})"
                                 f"{old}", **where)
            bad = next((i for i, v in enumerate(value)
                        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)), None)
            if bad is not None:
                raise InputError(f"value {bad} is {value[bad]!r}, not a finite number", **where)
    return require_records(rows, path, allow_empty, "exploration rows")


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def split_tasks(tasks: Sequence[HiddenProfileTask], fractions: Sequence[float] = (0.4, 0.3, 0.3),
                seed: int = 0) -> dict[str, list[HiddenProfileTask]]:
    """Task-level ``train`` / ``calibration`` / ``test`` splits (disjoint by task id)."""
    parts = split_instances(tasks, *fractions, seed=seed)
    return {"train": parts["train"], "calibration": parts["val"], "test": parts["test"]}


def load_tasks(path: Any, allow_empty: bool = False) -> tuple[list[HiddenProfileTask], dict[str, Any]]:
    """The tasks in ``path`` (HiddenBench JSON or groundstate JSONL, Parquet, or any source
    :func:`~groundstate.eval.sources.as_source` accepts, normalised once here) and a description of them for the
    run fingerprint (:func:`~groundstate.eval.sources.describe`). No tasks is an error unless ``allow_empty``."""
    source = as_source(path, "tasks")
    tasks = load_hidden_tasks(source, allow_empty=allow_empty)
    return tasks, describe(source, tasks)
