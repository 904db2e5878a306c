"""What a durable run hands back (:class:`RunResult`), how it fails or stops (:class:`RunAborted`,
:class:`CostCapStopped`), and how it chooses records and their inputs (:func:`select_records`,
:func:`program_inputs`); :mod:`groundstate.eval.runner` runs them and re-exports these names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundstate.eval.identity import record_id, shard_of


class RunAborted(RuntimeError):
    """The run failed: it stopped early (error share over ``max_error_rate``), or it ended with its error share over
    ``max_error_rate`` or with every record failed. Everything finished is kept on disk (``result``)."""

    def __init__(self, message: str, result: RunResult):
        super().__init__(message)
        self.result = result


class CostCapStopped(RunAborted):
    """The run stopped at the cost cap (``--max-cost``): no new record started once the priced spend reached it;
    everything finished is kept on disk (``result``), and the same command resumes."""


def select_records(records: Sequence[Any], limit: int | None = None,
                   shard: tuple[int, int] | None = None) -> list[Any]:
    """The records a run covers: the first ``limit`` records, then this shard's share of them."""
    chosen = list(records)[: limit if limit is not None else None]
    if shard is not None:
        i, n = shard
        chosen = [r for r in chosen if shard_of(record_id(r), n) == i]
    return chosen


@dataclass
class RunResult:
    """What a finished (or stopped) run left on disk, and its summary."""

    run_id: str
    run_dir: Path
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    skipped: int = 0
    stopped_reason: str | None = None
    outcome: Any = None  # what the task made of the finished run (DHD: counts, the masking table)

    def row(self, rid: str) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["id"] == rid), None)


def program_inputs(record: Any, inputs: Any = None) -> dict[str, Any]:
    """The program's keyword arguments for ``record``, as the durable runner makes them: ``inputs(record)`` when
    the run gives an ``inputs`` function, else the record's own ``inputs()``, else its fields without ``id``."""
    if inputs is not None:
        return inputs(record)
    if hasattr(record, "inputs") and callable(record.inputs):
        return dict(record.inputs())
    data = dict(record) if isinstance(record, dict) else record.model_dump()
    data.pop("id", None)
    return data
