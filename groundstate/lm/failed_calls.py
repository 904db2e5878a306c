"""A predictor call that fails inside groundstate's work leaves nothing in DSPy's response cache.

DSPy stores an LM's reply in its response cache as soon as the reply arrives, before the adapter parses it. A
reply the adapter cannot parse (prose where fields were asked for, broken JSON) therefore stays cached, and
every retry of the same request (a resumed run, a re-scored record) is answered with the same unusable reply
without reaching the LM: "failed records are retried" would not hold.

Inside a :func:`failed_call_eviction` block (the runner enters one per record, the LM judge one per judgement),
every response-cache entry a ``dspy.Predict`` call reads or writes is noted, and when the predictor call raises,
those entries are deleted from DSPy's memory and disk caches. A predictor call that succeeds keeps its entries,
so a retry is answered from the cache for every call that worked and asks the LM again only for the calls that
failed. What counts as failed is exactly what raised out of the predictor: an unparseable reply (after DSPy's
own JSON fallback), a call that errored, a timeout. A reply that parsed but that the program later rejects is
not a failed call and stays cached.

The request is re-asked unchanged (same messages, same decoding settings), so a retry stays deterministic in
what it sends; only the cache is bypassed for the entries that led to the failure.

Scope: ``Predict.forward``/``aforward`` and DSPy's ``Cache.get``/``put`` are wrapped only while at least one
block is open in the process (:class:`groundstate.compat.ScopedPatch`), and the wrappers act only on calls whose
DSPy settings carry :data:`EVICT_KEY` (set by the block and carried into the threads it starts, by
:func:`groundstate.concurrency.thread_map` and DSPy's own executors alike). Predictor calls the host program
makes meanwhile on its other threads pass straight to DSPy, and after the last block closes DSPy's classes are
as they were. Like :mod:`groundstate.metering`, this wraps DSPy's classes rather than installing a DSPy callback,
which would make DSPy inspect the arguments of every call.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import lru_cache, wraps
from typing import Any

from groundstate.compat import cache_key, forget_cache_entry, predictor_cache_patch

logger = logging.getLogger(__name__)

EVICT_KEY = "groundstate_evict_failed_calls"
"""The ``dspy.settings`` key that marks a call as groundstate work whose failed predictor calls are evicted."""

_TOUCHED: contextvars.ContextVar[list | None] = contextvars.ContextVar("groundstate_touched_cache", default=None)
"""The cache entries the innermost running predictor call read or wrote: ``[(cache, key), ...]`` or ``None``."""


def _note(cache: Any, request: Any, ignored: Any) -> None:
    touched = _TOUCHED.get()
    if touched is None:
        return
    try:
        touched.append((cache, cache_key(cache, request, ignored)))
    except Exception:  # a request DSPy itself cannot key is not cached either
        logger.debug("could not key a cache request; nothing to forget")


def forget(cache: Any, key: str) -> None:
    """Delete ``key`` from a DSPy ``Cache``'s memory and disk tiers (a missing key is fine)."""
    forget_cache_entry(cache, key)


def _forget_all(touched: list) -> None:
    for cache, key in touched:
        forget(cache, key)
    if touched:
        logger.debug("forgot %d cache entries of a failed predictor call", len(touched))


def _evicting() -> bool:
    import dspy  # noqa: PLC0415 (heavy: dspy)

    return bool(dspy.settings.get(EVICT_KEY))


def _noting_get(get):
    @wraps(get)
    def noting_get(self, request, ignored_args_for_cache_key=None):
        value = get(self, request, ignored_args_for_cache_key)
        if value is not None:
            _note(self, request, ignored_args_for_cache_key)
        return value

    return noting_get


def _noting_put(put):
    @wraps(put)
    def noting_put(self, request, value, ignored_args_for_cache_key=None, *args, **kwargs):
        put(self, request, value, ignored_args_for_cache_key, *args, **kwargs)
        _note(self, request, ignored_args_for_cache_key)

    return noting_put


def _guarded_forward(forward):
    @wraps(forward)
    def guarded_forward(self, **kwargs):
        if not _evicting():
            return forward(self, **kwargs)
        token = _TOUCHED.set([])
        try:
            return forward(self, **kwargs)
        except Exception:
            _forget_all(_TOUCHED.get() or [])
            raise
        finally:
            _TOUCHED.reset(token)

    return guarded_forward


def _guarded_aforward(aforward):
    @wraps(aforward)
    async def guarded_aforward(self, **kwargs):
        if not _evicting():
            return await aforward(self, **kwargs)
        token = _TOUCHED.set([])
        try:
            return await aforward(self, **kwargs)
        except Exception:
            _forget_all(_TOUCHED.get() or [])
            raise
        finally:
            _TOUCHED.reset(token)

    return guarded_aforward


@lru_cache(maxsize=1)
def _patches():
    return predictor_cache_patch(_guarded_forward, _guarded_aforward, _noting_get, _noting_put)


@contextmanager
def eviction_wrappers() -> Iterator[None]:
    """Keep DSPy's predictor and cache methods wrapped for the block without marking any call for eviction (only
    :func:`failed_call_eviction` does): a long run enters this once, so its records do not wrap and unwrap DSPy's
    classes one by one."""
    with ExitStack() as stack:
        for patch in _patches():
            stack.enter_context(patch.active())
        yield


@contextmanager
def failed_call_eviction() -> Iterator[None]:
    """Evict the response-cache entries of every predictor call that fails inside this block (module docstring).

    Guarantees: after a ``dspy.Predict`` call made inside the block (on this thread or any thread the block's
    work starts; ``ChainOfThought`` and every groundstate program are built on ``Predict``) raises an
    ``Exception``, no response-cache entry that call read or wrote is left in ``dspy.cache``; a call that returns
    leaves the cache as DSPy left it. Calls outside a predictor (``lm(...)`` directly) and calls outside the
    block are not affected. Blocks nest and may overlap across threads.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    with eviction_wrappers(), dspy.context(**{EVICT_KEY: True}):
        yield
