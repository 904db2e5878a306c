"""A predictor call that fails leaves nothing in DSPy's response cache, so a retry asks the LM again.

DSPy stores an LM's reply in its response cache as soon as the reply arrives, before the adapter parses it. A
reply the adapter cannot parse (prose where fields were asked for, broken JSON) therefore stays cached, and
every retry of the same request (a resumed run, a re-scored record) is answered with the same unusable reply
without reaching the LM: "failed records are retried" would not hold.

:func:`install_failed_call_eviction` (once per process; the runner and the LM judge call it) wraps
``dspy.Predict.forward`` and ``aforward``: while a predictor call runs, every response-cache entry it reads
or writes is noted, and when the call raises, those entries are deleted from DSPy's memory and disk caches.
A predictor call that succeeds keeps its entries, so a retry is answered from the cache for every call that
worked and asks the LM again only for the calls that failed. What counts as failed is exactly what raised out
of the predictor: an unparseable reply (after DSPy's own JSON fallback), a call that errored, a timeout. A
reply that parsed but that the program later rejects is not a failed call and stays cached.

The request is re-asked unchanged (same messages, same decoding settings), so a retry stays deterministic in
what it sends; only the cache is bypassed for the entries that led to the failure. Like
:func:`groundstate.metering.install_lm_hook`, this wraps DSPy's classes rather than installing a DSPy
callback, which would make DSPy inspect the arguments of every call.
"""

from __future__ import annotations

import contextvars
import logging
from contextlib import nullcontext
from functools import lru_cache, wraps
from typing import Any

logger = logging.getLogger(__name__)

_TOUCHED: contextvars.ContextVar[list | None] = contextvars.ContextVar("groundstate_touched_cache", default=None)
"""The cache entries the innermost running predictor call read or wrote: ``[(cache, key), ...]`` or ``None``."""


def _note(cache: Any, request: Any, ignored: Any) -> None:
    touched = _TOUCHED.get()
    if touched is None:
        return
    try:
        touched.append((cache, cache.cache_key(request, ignored)))
    except Exception:  # a request DSPy itself cannot key is not cached either
        logger.debug("could not key a cache request; nothing to forget")


def forget(cache: Any, key: str) -> None:
    """Delete ``key`` from a DSPy ``Cache``'s memory and disk tiers (a missing key is fine)."""
    with getattr(cache, "_lock", None) or nullcontext():
        memory = getattr(cache, "memory_cache", None)
        if memory is not None:
            memory.pop(key, None)
    disk = getattr(cache, "disk_cache", None)
    if disk is None:
        return
    try:
        if hasattr(disk, "delete"):
            disk.delete(key)
        else:
            disk.pop(key, None)
    except Exception:  # pragma: no cover - a disk cache that cannot delete keeps its entry; the retry replays it
        logger.warning("could not delete a failed call's entry from DSPy's disk cache")


def _forget_all(touched: list) -> None:
    for cache, key in touched:
        forget(cache, key)
    if touched:
        logger.debug("forgot %d cache entries of a failed predictor call", len(touched))


@lru_cache(maxsize=1)
def install_failed_call_eviction() -> None:
    """Wrap DSPy's response cache and ``Predict.forward``/``aforward`` once per process (see the module docstring).

    Guarantees, once installed: after a ``dspy.Predict`` call (or anything built on one: ``ChainOfThought``,
    every groundstate program) raises an ``Exception``, no response-cache entry that call read or wrote is
    left in ``dspy.cache``; a call that returns leaves the cache as DSPy left it. Calls outside a predictor
    (``lm(...)`` directly) are not affected.
    """
    import dspy
    from dspy.clients.cache import Cache

    get, put = Cache.get, Cache.put
    forward, aforward = dspy.Predict.forward, dspy.Predict.aforward

    @wraps(get)
    def noting_get(self, request, ignored_args_for_cache_key=None):
        value = get(self, request, ignored_args_for_cache_key)
        if value is not None:
            _note(self, request, ignored_args_for_cache_key)
        return value

    @wraps(put)
    def noting_put(self, request, value, ignored_args_for_cache_key=None, *args, **kwargs):
        put(self, request, value, ignored_args_for_cache_key, *args, **kwargs)
        _note(self, request, ignored_args_for_cache_key)

    @wraps(forward)
    def guarded_forward(self, **kwargs):
        token = _TOUCHED.set([])
        try:
            return forward(self, **kwargs)
        except Exception:
            _forget_all(_TOUCHED.get() or [])
            raise
        finally:
            _TOUCHED.reset(token)

    @wraps(aforward)
    async def guarded_aforward(self, **kwargs):
        token = _TOUCHED.set([])
        try:
            return await aforward(self, **kwargs)
        except Exception:
            _forget_all(_TOUCHED.get() or [])
            raise
        finally:
            _TOUCHED.reset(token)

    Cache.get, Cache.put = noting_get, noting_put
    dspy.Predict.forward, dspy.Predict.aforward = guarded_forward, guarded_aforward
