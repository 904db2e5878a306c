"""Run independent LM calls concurrently while keeping DSPy's per-thread settings.

DSPy keeps ``dspy.context(...)`` overrides (LM, adapter, callbacks, usage tracker) in a context variable,
which a plain ``ThreadPoolExecutor`` does not carry into its threads. :func:`thread_map` copies the caller's
overrides into every worker, so a program stage that fans out (per-agent extraction, per-fact verification)
uses the same LM and is metered by the same run as its caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_MAX_WORKERS = 8


def _with_overrides(fn: Callable[[T], R], overrides: dict) -> Callable[[T], R]:
    from dspy.dsp.utils.settings import thread_local_overrides

    def run(item: T) -> R:
        token = thread_local_overrides.set({**thread_local_overrides.get(), **overrides})
        try:
            return fn(item)
        finally:
            thread_local_overrides.reset(token)

    return run


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
    from dspy.dsp.utils.settings import thread_local_overrides

    wrapped = _with_overrides(fn, dict(thread_local_overrides.get()))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="groundstate") as pool:
        return list(pool.map(wrapped, items))
