"""``experiment run``: exactly the spec's cells, each through the one durable runner
(:func:`groundstate.eval.task.execute`), under the run settings (threads or Ray, ``shard``, the runs directory).

Every cell is planned before any runs (a cell that cannot be planned stops everything before the first LM call).
Cells that share a run id are run once. A cell's run is resumable as every durable run is: a finished cell finds
its run directory complete and makes no LM call; a partly finished one runs only what is left. A cell that fails
(:class:`~groundstate.eval.runner.RunAborted`: too many failed records) is reported and the other cells still run;
its finished records are kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.eval.cost_cap import check_priced, described_models, program_models
from groundstate.eval.experiments.cells import LMFactory, PlannedCell, plan_cells, resolve_cells, select
from groundstate.eval.experiments.spec import Spec
from groundstate.eval.run_settings import RunSettings


@dataclass
class CellOutcome:
    """What running one cell left: its run id, the summary (``None`` when nothing ran), and why it failed."""

    label: str
    run_id: str
    summary: dict[str, Any] | None
    failed: str | None = None
    reused: bool = False


@dataclass
class ExperimentRun:
    """The outcome of every cell run, in order; ``failed`` names the cells whose run failed."""

    outcomes: list[CellOutcome] = field(default_factory=list)

    @property
    def failed(self) -> dict[str, str]:
        return {o.label: o.failed for o in self.outcomes if o.failed}

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Each cell's summary by label, with ``stopped_reason`` set for a failed cell (what
        :func:`groundstate.cli.output.report_failed_runs` reads)."""
        return {o.label: {**(o.summary or {}), "stopped_reason": o.failed} for o in self.outcomes}


def cell_run_settings(cell: PlannedCell, run: RunSettings) -> RunSettings:
    """The run settings of one cell: Ray workers get the cell's key-free LM settings when the cell uses LMs."""
    if run.backend == "ray" and cell.uses_lms and run.lm_spec is None and run.worker_setup is None:
        _, config = cell.context.lm_pair()
        return run.model_copy(update={"lm_spec": config.worker_spec()})
    return run


def run_cell(cell: PlannedCell, run: RunSettings) -> Any:
    """Execute one planned cell durably; its LMs (when it uses any) are DSPy's LM and adapter for the run.

    Raises:
        RunAborted: the run failed (everything finished is kept).
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    from groundstate.eval.task import execute  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.specs import default_adapter  # noqa: PLC0415 (--help stays light)

    scope: Any = contextlib.nullcontext()
    if cell.uses_lms and cell.context.make_lms is not None:
        lm, _ = cell.context.lm_pair()
        scope = dspy.context(lm=lm, adapter=default_adapter(lm))
    with scope:
        return execute(cell.planned, cell_run_settings(cell, run), cell.context)


def run_experiment(spec: Spec, run: RunSettings, *, lms: LMFactory | None = None,
                   cells: Sequence[str] | None = None, note: Callable[[str], None] | None = None,
                   on_start: Callable[[PlannedCell], None] | None = None) -> ExperimentRun:
    """Run the spec's cells (``cells``: ``--cells`` selectors) and return what each left.

    Args:
        spec: a loaded spec.
        run: the run settings (``out``: the runs directory; threads, Ray, shard, limit).
        lms: an LM factory instead of the spec's LMs (tests give scripted LMs).
        cells: selectors; default every cell.
        note: where the tasks' notes go.
        on_start: called with each cell before it runs (the CLI prints its label).

    Under ``run.max_cost`` one cap covers every cell (:mod:`groundstate.eval.cost_cap`): once it is reached, the cell
    running stops, and the cells after it stop before their first record (each reported as stopped at the cap);
    the same command resumes them all.

    Raises:
        InputError, ConfigError, LMSetupError: a cell that cannot be planned, or (``max_cost``) whose LMs have no
            price (before anything runs).
    """
    from groundstate.eval.runner import RunAborted  # noqa: PLC0415 (--help stays light)

    chosen = select(resolve_cells(spec), cells, spec.dimensions())
    planned = plan_cells(spec, chosen, run, lms=lms, note=note)
    if run.max_cost is not None:  # every cell's LMs priced before the first cell runs (groundstate.eval.cost_cap)
        check_priced(set().union(*(described_models(c.planned.config) | program_models(c.planned.program)
                                   for c in planned)))
    outcome = ExperimentRun()
    done: dict[str, CellOutcome] = {}
    for cell in planned:
        if cell.run_id in done:
            first = done[cell.run_id]
            outcome.outcomes.append(CellOutcome(cell.cell.label, cell.run_id, first.summary, first.failed, True))
            continue
        if on_start is not None:
            on_start(cell)
        try:
            result = run_cell(cell, run)
            summary = result.summary if result is not None else None
            failed = None
        except RunAborted as exc:
            summary, failed = exc.result.summary, str(exc)
        done[cell.run_id] = CellOutcome(cell.cell.label, cell.run_id, summary, failed)
        outcome.outcomes.append(done[cell.run_id])
    return outcome
