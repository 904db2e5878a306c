"""Mapping a function over items on the chosen backend, in memory (no run directory): ``--backend`` for the
commands whose per-item work is not a durable run (``consilience explore``, ``calibrate``, ``coverage``).

:func:`backend_map` returns a ``map_fn(fn, items) -> list`` with the semantics of ``[fn(x) for x in items]``:
results in input order, and the first exception raised by ``fn`` (lowest item index) propagates unchanged.

- ``threads``: :func:`groundstate.concurrency.thread_map` with ``--threads`` threads (DSPy overrides carried).
- ``ray``: the items go to the same long-lived worker actors as durable runs (:func:`~groundstate.eval.ray_backend.
  execute_on_ray`): ``fn`` is shipped once per worker, every item separately, and both pass the same secret
  check (a payload holding a secret environment variable's value is refused with one line); workers build their
  LMs from the LM specs. Results travel back to this process, which stays the only writer of any file. A worker
  that dies is :class:`~groundstate.errors.WorkerLostError`, one line naming the item and the node: nothing is
  durable here, so the command is simply run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from groundstate.concurrency import overrides, serial_map, thread_map
from groundstate.errors import ConfigError, WorkerLostError
from groundstate.eval.ray_backend import RayOptions, execute_on_ray


@dataclass
class MapJob:
    """The worker side of one map: ``fn`` applied to ``(index, item)`` under the worker's DSPy overrides."""

    fn: Callable[[Any], Any]

    def run_record(self, record: tuple[int, Any], values: dict, failed: dict) -> dict[str, Any]:
        index, item = record
        with overrides(values):
            try:
                return {"id": str(index), "value": self.fn(item), "exception": None}
            except Exception as exc:  # re-raised on the driver, like the serial loop would
                return {"id": str(index), "value": None, "exception": exc}


def lost_row(record: tuple[int, Any], error: str, failed: dict) -> dict[str, Any]:
    """The row of an item whose worker died (or whose task failed outside ``fn``)."""
    return {"id": str(record[0]), "lost": error.replace("; resume to retry it", "")}


def map_on_ray(fn: Callable[[Any], Any], items: Iterable[Any], options: RayOptions, threads: int = 1,
               what: str = "task") -> list[Any]:
    """``[fn(x) for x in items]`` on Ray worker actors (see the module docstring); ``what`` names an item in
    errors."""
    indexed = list(enumerate(items))
    if not indexed:
        return []
    job = MapJob(fn)
    results: dict[int, dict[str, Any]] = {}
    rows = execute_on_ray(job.run_record, lost_row, indexed, {}, lambda r: str(r[0]), options, threads)
    try:
        for row in rows:
            results[int(row["id"])] = row
    finally:
        rows.close()  # cancels whatever is still in flight when a row raised
    for index, _ in indexed:
        row = results[index]
        if "lost" in row:
            detail = row["lost"].removeprefix(f"record {index}: ")
            raise WorkerLostError(f"{what} {index} ({describe(indexed[index][1])}): {detail}; nothing was written, "
                                  "run the command again")
        if row["exception"] is not None:
            raise row["exception"]
    return [results[index]["value"] for index, _ in indexed]


def describe(item: Any) -> str:
    """An item's id if it has one, else its type."""
    rid = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
    return f"id {rid}" if rid is not None else type(item).__name__


def backend_map(backend: str = "threads", threads: int = 1, ray: RayOptions | None = None,
                what: str = "task") -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]:
    """The ``map_fn(fn, items)`` of a backend: ``threads`` (``threads`` threads; 1 runs inline) or ``ray``."""
    if threads < 1:
        raise ConfigError("--threads must be at least 1")
    if backend == "ray":
        options = ray or RayOptions()
        return lambda fn, items: map_on_ray(fn, items, options, threads, what)
    if threads == 1:
        return serial_map
    return lambda fn, items: thread_map(fn, items, max_workers=threads)
