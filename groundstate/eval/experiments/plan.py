"""``experiment plan``: per cell and in total, without any LM call, the run id, the records, what is stored
already, and the LM calls, tokens and dollars the cell will cost (:mod:`~groundstate.eval.experiments.counting`).

A cell's run is the run directory named by its planned run id under the runs directory (or, after ``runs merge``
of its shards, ``<run id>-merged``); what is stored is read from that directory's ``config.json`` and
``summary.json`` alone (:func:`~groundstate.eval.runs.run_entry`). Cells that share a run id (a sensitivity
value equal to the spec's own setting) are one run and counted once in the totals.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.eval.experiments.cells import LMFactory, PlannedCell, plan_cells, resolve_cells, select
from groundstate.eval.experiments.counting import ASSUMPTIONS, CellCount, count_cell
from groundstate.eval.experiments.spec import Spec
from groundstate.eval.run_settings import RunSettings


@dataclass
class Stored:
    """What the runs directory holds for a cell: ``state`` (``complete``, ``not run``, or the run's state such as
    ``killed``), ``done``/``selected`` records, and the run directory."""

    state: str
    done: int = 0
    selected: int = 0
    run_dir: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def describe(self) -> str:
        if self.state in ("complete", "not run") or self.state.startswith("two stored runs"):
            return self.state
        return f"{self.done} of {self.selected} done ({self.state})"


def run_dirs_of(out: str | os.PathLike, run_id: str) -> list[Path]:
    """Every stored run directory of a run id: ``<out>/<run id>`` and its merged shards ``<out>/<run id>-merged``,
    those that exist (with a ``config.json``), in that order."""
    from groundstate.paths import child  # noqa: PLC0415 (--help stays light)

    found = []
    for name in (run_id, f"{run_id}-merged"):
        candidate = child(out, name, "run id")
        if os.path.lexists(candidate / "config.json"):
            found.append(candidate)
    return found


def run_dir_of(out: str | os.PathLike, run_id: str) -> Path | None:
    """The stored run directory of a run id: ``<out>/<run id>``, else its merged shards ``<out>/<run id>-merged``;
    ``None`` when neither exists. What ``plan`` reports as stored; a table refuses a cell both claim
    (:func:`groundstate.eval.experiments.table.build_table`)."""
    found = run_dirs_of(out, run_id)
    return found[0] if found else None


def stored(out: str | os.PathLike, run_id: str) -> Stored:
    """What is stored for ``run_id`` under ``out`` (summaries only; see the module docstring). When both the run
    directory and its merged shards exist the state says so and counts nothing as done (the table refuses such a
    cell, :func:`~groundstate.eval.experiments.table.refuse_two_runs`), so the plan never reports one of them as
    the cell's run."""
    from groundstate.eval.runs import run_entry  # noqa: PLC0415 (--help stays light)

    every = run_dirs_of(out, run_id)
    if not every:
        return Stored("not run")
    if len(every) > 1:  # the run and its merged shards: the table refuses the cell, so the plan does not pick one
        return Stored(f"two stored runs ({every[0].name} and {every[1].name}): remove one, the table refuses both")
    found = every[0]
    entry = run_entry(found)
    summary = entry["summary"] or {}
    return Stored(entry["state"], int(summary.get("n_done", 0)), int(summary.get("n_selected", 0)), str(found))


@dataclass
class PlanRow:
    """One cell of a plan: the planned cell, what is stored, and its count."""

    cell: PlannedCell
    stored: Stored
    count: CellCount

    @property
    def label(self) -> str:
        return self.cell.cell.label


@dataclass
class ExperimentPlan:
    """A whole plan: its rows, and the totals over distinct runs (all of them, and those still to run)."""

    spec: Spec
    run: RunSettings
    rows: list[PlanRow]
    assumptions: str = ASSUMPTIONS
    notes: list[str] = field(default_factory=list)

    def distinct(self) -> list[PlanRow]:
        """One row per run id (cells sharing a run are one run)."""
        seen: dict[str, PlanRow] = {}
        for row in self.rows:
            seen.setdefault(row.cell.run_id, row)
        return list(seen.values())

    def totals(self, only_to_run: bool = False) -> dict[str, Any]:
        """Calls, tokens and dollars summed over distinct runs (``only_to_run``: the part not stored yet, a partly
        stored run counting its remaining share). Dollars are ``None`` when any counted model has no price."""
        calls = inp = out = 0
        cost: float | None = 0.0
        runs = 0
        for row in self.distinct():
            share = 1.0
            if only_to_run:
                if row.stored.complete:
                    continue
                if row.stored.selected:
                    share = max(0.0, 1 - row.stored.done / row.stored.selected)
            runs += 1
            calls += round(share * row.count.calls)
            inp += round(share * row.count.input_tokens)
            out += round(share * row.count.output_tokens)
            cost = None if cost is None or (row.count.calls and row.count.cost is None) else \
                cost + share * (row.count.cost or 0.0)
        return {"runs": runs, "calls": calls, "input_tokens": inp, "output_tokens": out, "cost": cost}


def plan_experiment(spec: Spec, run: RunSettings, *, lms: LMFactory | None = None,
                    cells: Sequence[str] | None = None, note: Callable[[str], None] | None = None) -> ExperimentPlan:
    """The plan of ``spec`` under ``run`` (``cells``: ``--cells`` selectors; ``lms``: an LM factory instead of the
    spec's LMs). Nothing is written and no LM is called.

    Raises:
        InputError, ConfigError, LMSetupError: a cell that cannot be planned (one line).
    """
    chosen = select(resolve_cells(spec), cells, spec.dimensions())
    planned = plan_cells(spec, chosen, run, lms=lms, note=note)
    memo: dict[str, Any] = {}
    rows = []
    for cell in planned:
        count = count_cell(cell, run, memo)
        found = stored(cell.planned.out(run), cell.run_id)
        if found.state not in ("complete", "not run") and found.selected < max(found.done, count.records):
            found.selected = max(found.done, count.records)  # a run killed before its first summary
        rows.append(PlanRow(cell, found, count))
    return ExperimentPlan(spec, run, rows)
