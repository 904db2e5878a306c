"""Cell readers of the Consilience studies: the runs of ``consilience-features`` (Table 6) and ``consilience-routing``
(Table 8) become the numbers of the paper's tables, computed as ``consilience ablate features`` and ``consilience
routing`` compute them in memory (:mod:`groundstate.eval.consilience.study_tasks` says why the numbers are the
same).

Records are pooled in the data's order (each stores its ``position``; runs of several seeds one after the other),
so means are summed in the order the in-memory commands sum them. A record whose discussion failed is counted in
``failed`` and adds nothing. A stored value that is not what the task writes (a corrupt or hand-edited
``results.jsonl``) is one line naming the file, the record and the field.

- :func:`features_numbers`: ``final_C`` (communication cost) and ``final_J`` (final objective), the means over
  tasks of the collective state each discussion ended in (Table 6's columns besides success).
- :func:`routing_numbers`: per routing policy ``<policy>:mean_dJ``, ``<policy>:normalized_regret``,
  ``<policy>:steps``, ``<policy>:flat_steps`` and ``<policy>:differs_from_round_robin`` (the share of steps whose
  pick is not round-robin's) (:func:`~groundstate.eval.consilience.routing.routing_metrics` of every replayed
  step), and ``router_vs_round_robin_differ``, the action-conditional router's share (the same number, unscoped).

The registered readers (:mod:`groundstate.eval.experiments.readers`) add these to the hidden-profile reader's
numbers (task accuracy with its Wilson interval, vote accuracy pooled over all votes, rounds, words).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from groundstate.errors import InputError


class Step(BaseModel):
    """One replayed round as a routing record stores it (only what the metrics read is checked)."""

    model_config = ConfigDict(extra="allow")

    J: StrictFloat | StrictInt
    outcomes: list[StrictFloat | StrictInt] = Field(min_length=1)
    picks: dict[str, StrictInt]


def _entry(value: float | None, n: int, failed: int, integer: bool = False) -> dict[str, Any]:
    entry = {"mean": value, "low": None, "high": None, "n": n, "failed": failed}
    return {**entry, "integer": True} if integer else entry


def _where(run: Mapping[str, Any]) -> str:
    from groundstate.eval.results import RESULTS  # noqa: PLC0415 (--help stays light)

    return str(Path(str(run.get("dir", "."))) / RESULTS)


def ordered(runs: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[Mapping[str, Any], dict[str, Any]]], int]:
    """``([(run, row), ...], failed)``: the records that finished, each run's in the order of their ``position``
    (runs in the order given), and how many failed.

    Raises:
        InputError: a finished record without a whole-number position.
    """
    done, failed = [], 0
    for run in runs:
        rows = []
        for row in run["rows"]:
            if row.get("error"):
                failed += 1
                continue
            position = (row.get("outputs") or {}).get("position")
            if isinstance(position, bool) or not isinstance(position, int):
                raise InputError("a finished record has no whole-number 'position' (not written by this task)",
                                 file=_where(run), record=str(row.get("id")), field="outputs.position")
            rows.append((position, row))
        done += [(run, row) for _, row in sorted(rows, key=lambda item: item[0])]
    return done, failed


def _number(value: Any, run: Mapping[str, Any], row: Mapping[str, Any], field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"must be a finite number (got {value!r:.40})", file=_where(run), record=str(row.get("id")),
                         field=field)
    return float(value)


def features_numbers(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``final_C`` and ``final_J`` of a ``consilience-features`` cell (see the module docstring)."""
    import numpy as np  # noqa: PLC0415 (--help stays light)

    out: dict[str, dict[str, Any]] = {}
    done, failed = ordered(runs)
    for key, metric in (("C", "final_C"), ("J", "final_J")):
        values = []
        for run, row in done:
            state = row["outputs"].get("final_state")
            if not isinstance(state, dict):
                raise InputError("must be the collective state the discussion ended in (an object)",
                                 file=_where(run), record=str(row.get("id")), field="outputs.final_state")
            values.append(_number(state.get(key), run, row, f"outputs.final_state.{key}"))
        out[metric] = _entry(float(np.mean(values)) if values else None, len(values), failed)
    return out


def routing_numbers(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every routing policy's numbers of a ``consilience-routing`` cell (see the module docstring)."""
    from groundstate.eval.consilience.routing import routing_metrics  # noqa: PLC0415 (--help stays light)
    from groundstate.programs.consilience.control import ROUTERS  # noqa: PLC0415 (--help stays light)
    from groundstate.schema import validate  # noqa: PLC0415 (--help stays light)

    out: dict[str, dict[str, Any]] = {}
    done, failed = ordered(runs)
    steps = []
    for run, row in done:
        stored = row["outputs"].get("steps")
        if not isinstance(stored, list):
            raise InputError("must be the list of replayed steps", file=_where(run), record=str(row.get("id")),
                             field="outputs.steps")
        for i, raw in enumerate(stored):
            step = validate(Step, raw, file=_where(run), record=str(row.get("id")), loc=("outputs", "steps", i))
            bad = next((r for r in ROUTERS if not 0 <= step.picks.get(r, -1) < len(step.outcomes)), None)
            if bad is not None:
                raise InputError(f"the pick of '{bad}' is not one of the {len(step.outcomes)} speakers",
                                 file=_where(run), record=str(row.get("id")), field=f"outputs.steps.{i}.picks")
            steps.append(step.model_dump())
    for router, m in routing_metrics(steps).items():
        varied = m["steps"] - m["flat_steps"]
        out[f"{router}:mean_dJ"] = _entry(m["mean_dJ"], m["steps"], failed)
        out[f"{router}:normalized_regret"] = _entry(m["normalized_regret"], varied, failed)
        out[f"{router}:steps"] = _entry(float(m["steps"]), m["steps"], failed, integer=True)
        out[f"{router}:flat_steps"] = _entry(float(m["flat_steps"]), m["steps"], failed, integer=True)
        out[f"{router}:differs_from_round_robin"] = _entry(m["differs_from_round_robin"], m["steps"], failed)
    out["router_vs_round_robin_differ"] = dict(out["action-conditional:differs_from_round_robin"])
    return out
