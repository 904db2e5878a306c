"""Run independent LM calls concurrently while keeping DSPy's per-thread settings.

DSPy keeps ``dspy.context(...)`` overrides (LM, adapter, callbacks, usage tracker) in a context variable,
which a plain ``ThreadPoolExecutor`` does not carry into its threads. :func:`thread_map` copies the caller's
overrides into every worker, so a program stage that fans out (per-agent extraction, per-fact verification)
uses the same LM and is metered by the same run as its caller. Each worker also runs in a copy of the caller's
context variables, so a tracer's current span (``mlflow.dspy.autolog()``) parents the workers' calls.

DSPy exposes those overrides only through a private context variable; this module is the one place that
touches it (:func:`current_overrides`, :func:`overrides`), so a DSPy change needs one fix here.
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
    """A copy of the ``dspy.context`` overrides in force on this thread (to hand to worker threads)."""
    from dspy.dsp.utils.settings import thread_local_overrides

    return dict(thread_local_overrides.get())


@contextmanager
def overrides(values: dict[str, Any]) -> Iterator[None]:
    """Apply DSPy setting overrides on this thread (on top of the ones in force), like ``dspy.context``, but
    usable on any thread, including workers that did not inherit the caller's context."""
    from dspy.dsp.utils.settings import thread_local_overrides

    token = thread_local_overrides.set({**thread_local_overrides.get(), **values})
    try:
        yield
    finally:
        thread_local_overrides.reset(token)


def _with_overrides(fn: Callable[[T], R], values: dict) -> Callable[[T], R]:
    def run(item: T) -> R:
        with overrides(values):
            return fn(item)

    return run


def serial_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``: the default ``map_fn`` of the loops that accept one (``--backend`` maps are
    built in :mod:`groundstate.eval.task_map`)."""
    return [fn(item) for item in items]


def thread_map(fn: Callable[[T], R], items: Iterable[T], max_workers: int | None = None) -> list[R]:
    """``[fn(x) for x in items]`` computed on threads, in order; the first exception propagates.

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
    wrapped = _with_overrides(fn, current_overrides())
    contexts = [contextvars.copy_context() for _ in items]  # one each: a tracer's current span (MLflow) nests
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="groundstate") as pool:
        return list(pool.map(lambda context, item: context.run(wrapped, item), contexts, items))
