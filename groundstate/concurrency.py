"""Run independent LM calls concurrently while keeping DSPy's settings, through DSPy's public API only.

DSPy's ``dspy.context(...)`` overrides (LM, adapter, usage tracker, groundstate's meters) belong to the thread
that set them; a plain ``ThreadPoolExecutor`` does not carry them into its threads. :func:`thread_map` hands every
worker the caller's settings (``dspy.settings.config``, applied with ``dspy.context``), so a program stage that
fans out (per-agent extraction, per-fact verification) uses the same LM and is metered by the same run as its
caller. Each worker also runs in a copy of the caller's context variables, so a tracer's current span
(``mlflow.dspy.autolog()``) parents the workers' calls.

Why not ``dspy.Parallel`` / DSPy's ``ParallelExecutor``: they carry settings too, but they are built for
evaluating many examples, not for one stage's calls, and differ where a program stage needs otherwise: an
exception there becomes a logged result (or cancels the rest after ``max_errors``) where :func:`thread_map`
raises the first one, as ``[fn(x) for x in items]`` would; a call slower than the others is submitted a second
time ("straggler" resubmission), which would make an LM call twice and count and bill it twice; they draw a
progress bar and take over SIGINT on the main thread; and they do not copy the caller's context variables.

Under ``dspy.streamify`` the caller runs on an AnyIO worker thread with a stream in its settings, and DSPy hands
each LM chunk and status message to the stream with ``anyio.from_thread.run``, which a plain pool thread cannot
do; :func:`thread_map` then asks the event loop for its worker threads (:func:`anyio_thread_map`), so a fan-out
streams like the rest of the program.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_MAX_WORKERS = 8


def current_overrides() -> dict[str, Any]:
    """The DSPy settings in force on this thread (``dspy.settings.config``), to hand to worker threads."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    return dict(dspy.settings.config)


@contextmanager
def overrides(values: dict[str, Any]) -> Iterator[None]:
    """Apply DSPy settings on this thread for the block (``dspy.context(**values)``), on any thread, including
    workers that did not inherit the caller's context."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    with dspy.context(**values):
        yield


def serial_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``: the default ``map_fn`` of the loops that accept one (``--backend`` maps are
    built in :mod:`groundstate.eval.task_map`)."""
    return [fn(item) for item in items]


def thread_map(fn: Callable[[T], R], items: Iterable[T], max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]`` computed on threads, in order; the first exception propagates.

    Each item runs once, under the caller's DSPy settings and in a copy of the caller's context variables (see
    the module docstring for what this adds to ``dspy.Parallel``).

    Args:
        fn: the function to apply.
        items: its inputs.
        max_workers: thread count (default: ``min(len(items), 8)``); 1 runs inline.
    """
    items = list(items)
    if not items:
        return []
    workers = min(len(items), max_workers or DEFAULT_MAX_WORKERS)
    if workers <= 1:
        return [fn(item) for item in items]
    values = current_overrides()

    def run(item: T) -> R:
        with overrides(values):
            return fn(item)

    contexts = [contextvars.copy_context() for _ in items]  # one each: a tracer's current span (MLflow) nests
    if values.get("send_stream") is not None and in_anyio_worker():
        return anyio_thread_map(lambda context, item: context.run(run, item), contexts, items, workers)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="groundstate") as pool:
        return list(pool.map(lambda context, item: context.run(run, item), contexts, items))


def in_anyio_worker() -> bool:
    """Whether this thread is an AnyIO worker thread (``anyio.to_thread``, ``dspy.asyncify``): one from which
    ``anyio.from_thread.run`` reaches the event loop that started it."""
    import anyio.from_thread  # noqa: PLC0415 (--help stays light)

    try:
        anyio.from_thread.run_sync(lambda: None)
    except RuntimeError:  # anyio's NoEventLoopError: a plain thread
        return False
    return True


def anyio_thread_map(fn: Callable[..., R], contexts: list[contextvars.Context], items: list[Any],
                     workers: int) -> list[R]:
    """``[fn(context, item) ...]`` on AnyIO worker threads of the event loop this AnyIO worker thread belongs to,
    at most ``workers`` at once, in order; the first exception (in item order) propagates after all finished.

    Why: under ``dspy.streamify`` a program's LM calls hand their chunks and status messages to the stream with
    ``anyio.from_thread.run``, which works only on a thread AnyIO started; a plain pool thread fails every call
    ("Not running inside an AnyIO worker thread"). So when the caller streams, :func:`thread_map` asks the event
    loop to start its workers instead (``anyio.to_thread.run_sync``), and the fan-out streams like the rest.
    """
    import anyio  # noqa: PLC0415 (--help stays light)
    import anyio.from_thread  # noqa: PLC0415 (--help stays light)
    import anyio.to_thread  # noqa: PLC0415 (--help stays light)

    results: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)

    async def gather() -> None:
        limiter = anyio.CapacityLimiter(workers)

        async def one(i: int) -> None:
            try:
                results[i] = await anyio.to_thread.run_sync(fn, contexts[i], items[i], limiter=limiter)
            except Exception as exc:  # kept, so every call finishes as in a pool, then the first is raised
                errors[i] = exc

        async with anyio.create_task_group() as group:
            for i in range(len(items)):
                group.start_soon(one, i)

    anyio.from_thread.run(gather)
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
