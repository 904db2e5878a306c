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

With ``progress`` (a description), the map shows a :class:`~groundstate.eval.progress.RunProgress` display of
items done/total, LM calls, tokens and elapsed time (``--no-progress`` leaves it out): on threads every LM call is
metered as it finishes; on Ray the workers' running tallies are read while items run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from groundstate.concurrency import overrides, serial_map, thread_map
from groundstate.errors import ConfigError, WorkerLostError
from groundstate.eval.progress import RunProgress
from groundstate.eval.ray_backend import RayOptions, execute_on_ray
from groundstate.metering import meter_context


@contextmanager
def listening(listener: Any) -> Iterator[None]:
    """LM calls made in the block (on any thread it starts with DSPy's settings) are told to ``listener`` (a
    :class:`~groundstate.metering.Meter` listener); nothing is metered when it is ``None``."""
    if listener is None:
        yield
        return
    with meter_context() as meter:
        meter.listener = listener
        yield


@dataclass
class MapJob:
    """The worker side of one map: ``fn`` applied to ``(index, item)`` under the worker's DSPy overrides."""

    fn: Callable[[Any], Any]

    def run_record(self, record: tuple[int, Any], values: dict, failed: dict, listener: Any = None) -> dict[str, Any]:
        index, item = record
        with overrides(values), listening(listener):
            try:
                return {"id": str(index), "value": self.fn(item), "exception": None}
            except Exception as exc:  # re-raised on the driver, like the serial loop would
                return {"id": str(index), "value": None, "exception": exc}


def lost_row(record: tuple[int, Any], error: str, failed: dict) -> dict[str, Any]:
    """The row of an item whose worker died (or whose task failed outside ``fn``)."""
    return {"id": str(record[0]), "lost": error.replace("; resume to retry it", "")}


def map_on_ray(fn: Callable[[Any], Any], items: Iterable[Any], options: RayOptions, threads: int = 1,
               what: str = "task", progress: RunProgress | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` on Ray worker actors (see the module docstring); ``what`` names an item in
    errors; ``progress`` hears each item that comes back and the workers' LM-call totals."""
    indexed = list(enumerate(items))
    if not indexed:
        return []
    job = MapJob(fn)
    results: dict[int, dict[str, Any]] = {}
    rows = execute_on_ray(job.run_record, lost_row, indexed, {}, lambda r: str(r[0]), options, threads,
                          listener=progress)
    try:
        for row in rows:
            results[int(row["id"])] = row
            if progress is not None:
                progress.advance("lost" in row or row["exception"] is not None)
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


@dataclass
class Advancing:
    """``fn`` that tells ``progress`` when each item is done (``error`` when ``fn`` raised, which propagates)."""

    fn: Callable[[Any], Any]
    progress: RunProgress

    def __call__(self, item: Any) -> Any:
        try:
            value = self.fn(item)
        except BaseException:
            self.progress.advance(True)
            raise
        self.progress.advance(False)
        return value


def backend_map(backend: str = "threads", threads: int = 1, ray: RayOptions | None = None,
                what: str = "task", progress: str | None = None) -> Callable[[Callable[[Any], Any], Sequence[Any]],
                                                                             list[Any]]:
    """The ``map_fn(fn, items)`` of a backend: ``threads`` (``threads`` threads; 1 runs inline) or ``ray``; with
    ``progress`` (the display's description), each call shows a progress display of its items (``what``s)."""
    if threads < 1:
        raise ConfigError("--threads must be at least 1")
    if backend == "ray":
        options = ray or RayOptions()
        plain = lambda fn, items: map_on_ray(fn, items, options, threads, what)  # noqa: E731
    elif threads == 1:
        plain = serial_map
    else:
        plain = lambda fn, items: thread_map(fn, items, max_workers=threads)  # noqa: E731
    if progress is None:
        return plain

    def shown(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        items = list(items)
        with RunProgress(progress, total=len(items), done=0, enabled=True, unit=f"{what}s") as bar:
            if backend == "ray":
                return map_on_ray(fn, items, options, threads, what, progress=bar)
            with listening(bar):
                return plain(Advancing(fn, bar), items)

    return shown
