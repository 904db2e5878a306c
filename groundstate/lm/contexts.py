"""Where the embedded model runs: cores, memory and the process's pool of llama.cpp contexts.

:func:`context_pool` gives the pool for one model file, context size and thread count; each call borrows one
context (:class:`ContextPool`), so up to its size calls decode at once. :func:`choose_contexts` is the default
size (idle cores per thread, bounded by memory); :data:`DEFAULT_THREADS` is why threads stay fixed.
:mod:`groundstate.lm.embedded` builds its engine on these.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from groundstate.errors import LMSetupError
from groundstate.lm.prefix import MAX_STORE_BYTES, PrefixStore, common_prefix

logger = logging.getLogger(__name__)


DEFAULT_THREADS = 1
"""llama.cpp threads per context unless given: fixed, because greedy outputs depend on the thread count (SmolLM2
gave other tokens on 1 and 2 threads), so a default that followed the machine's load would change answers and
run ids from one start to the next; on a shared machine one thread per decode was also 1.9x-4.0x faster than
two. Parallelism that follows the machine comes from the number of contexts (:func:`choose_contexts`)."""


KV_BYTES_PER_TOKEN = 2 * 30 * 192 * 2
"""SmolLM2-135M's KV cache per token: keys and values, 30 layers, 3 KV heads of 64, f16 (23,040 bytes)."""


CONTEXT_OVERHEAD_BYTES = 64 << 20
"""Per-context memory besides the KV cache (compute buffers, logits, the sampler's arrays), an upper estimate."""


FLASH_ATTENTION = False
"""Contexts run without flash attention: with it, evaluating only a prompt's suffix after a reused prefix gave other
logits than evaluating the whole prompt (up to 0.66 apart on SmolLM2), so greedy outputs depended on which call a
context served before (:mod:`groundstate.lm.prefix`). Earlier versions ran with it (engine revision 1)."""


MEMORY_SHARE = 0.25
"""Share of the available memory the default number of contexts may use."""


def usable_cores() -> int:
    """CPU cores this process may use: its affinity mask, bounded by a cgroup CPU quota if one is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def idle_cores(cores: int | None = None, load: float | None = None) -> int:
    """An estimate of the usable cores that are idle now: ``cores`` minus their share of the 1-minute load
    average (the machine's load spread evenly over all its CPUs), rounded, at least 1."""
    cores = usable_cores() if cores is None else cores
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # pragma: no cover - not Unix
            load = 0.0
    busy = load * cores / max(cores, os.cpu_count() or cores)
    return max(1, min(cores, int(cores - busy + 0.5)))


def kv_cache_bytes(n_ctx: int) -> int:
    """Bytes of one context's KV cache for ``n_ctx`` tokens (:data:`KV_BYTES_PER_TOKEN`)."""
    return KV_BYTES_PER_TOKEN * int(n_ctx)


def available_memory() -> int:
    """Bytes of memory available to new allocations (``MemAvailable``; 4 GiB if it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 << 30


def store_bytes(memory: int | None = None) -> int:
    """Bytes a pool's saved prompt states may take: an eighth of the available memory, at most
    :data:`~groundstate.lm.prefix.MAX_STORE_BYTES`."""
    memory = available_memory() if memory is None else memory
    return min(MAX_STORE_BYTES, memory // 8)


def memory_contexts(n_ctx: int, memory: int | None = None) -> int:
    """How many contexts of ``n_ctx`` tokens fit in :data:`MEMORY_SHARE` of the available memory (at least 1)."""
    memory = available_memory() if memory is None else memory
    return max(1, int(MEMORY_SHARE * memory // (kv_cache_bytes(n_ctx) + CONTEXT_OVERHEAD_BYTES)))


def choose_contexts(threads: int, n_ctx: int, *, idle: int | None = None, memory: int | None = None) -> int:
    """The default number of contexts: as many as the idle cores give ``threads`` each (:func:`idle_cores`: the
    cores this process may use, minus their share of the machine's current load), at most what fits in
    :data:`MEMORY_SHARE` of the available memory (:func:`memory_contexts`), at least 1. Contexts are created
    only when calls overlap, so a sequential caller uses one; their number never changes outputs."""
    idle = idle_cores() if idle is None else idle
    return max(1, min(memory_contexts(n_ctx, memory), idle // max(1, int(threads))))


_NEW_LOCK = threading.Lock()


def new_llama(path: str, n_ctx: int, n_threads: int) -> Any:
    """One llama.cpp context of the model at ``path`` (the weights are memory-mapped, so contexts share them)."""
    try:
        from llama_cpp import Llama  # noqa: PLC0415 (optional extra: local)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise LMSetupError(
            "the embedded LM needs llama-cpp-python: pip install 'groundstate[local]' "
            "(build it with CMAKE_ARGS=-DGGML_NATIVE=OFF; `make demo` does this)"
        ) from exc
    started = time.perf_counter()
    # One load at a time: llama-cpp-python silences a load by pointing the process's stdout/stderr at /dev/null and
    # back, so two overlapping loads could leave them pointing there (a run's output then vanished).
    with _NEW_LOCK:
        model = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                      flash_attn=FLASH_ATTENTION, verbose=False)
    logger.info("loaded %s (%d threads) in %.2fs", path, n_threads, time.perf_counter() - started)
    return model


class ContextPool:
    """Up to ``size`` llama contexts of one model, created when calls overlap, each lent to one caller at a time.

    Args:
        factory: ``() -> Llama``, called for each new context.
        size: the most contexts; :meth:`grow` raises it (engines of the same model share one pool).

    Each context remembers the text of the last prompt it served (:meth:`served`), so :meth:`context` can lend
    the idle one whose prompt shares the longest prefix with the next (:mod:`groundstate.lm.prefix`); the pool's
    :attr:`store` keeps saved prompt states for the same purpose.
    """

    def __init__(self, factory: Any, size: int = 1):
        self._factory = factory
        self.size = max(1, int(size))
        self._idle: list[Any] = []
        self._all: list[Any] = []
        self._texts: dict[int, str] = {}
        self._creating = 0
        self._cond = threading.Condition()
        self._store = None

    def grow(self, size: int) -> None:
        with self._cond:
            self.size = max(self.size, int(size))
            self._cond.notify_all()

    @property
    def store(self):
        """The pool's :class:`~groundstate.lm.prefix.PrefixStore` (made on first use)."""
        with self._cond:
            if self._store is None:
                self._store = PrefixStore(max_bytes=store_bytes())
            return self._store

    @contextmanager
    def context(self, text: str | None = None):
        """Lend a context, waiting for one if all ``size`` are lent; create one if none is idle and fewer than
        ``size`` exist. Among idle contexts: the one whose last prompt shares the longest prefix with ``text``,
        or without ``text`` the most recently returned."""
        llama = self._take(text)
        try:
            yield llama
        finally:
            with self._cond:
                self._idle.append(llama)
                self._cond.notify()

    def served(self, llama: Any, text: str) -> None:
        """Record the prompt text a context now holds ("" when unknown, e.g. after a failed call)."""
        with self._cond:
            self._texts[id(llama)] = text

    def held(self, llama: Any) -> str:
        """The prompt text a context holds, as last recorded by :meth:`served`."""
        with self._cond:
            return self._texts.get(id(llama), "")

    def _take(self, text: str | None = None) -> Any:
        with self._cond:
            while not self._idle and len(self._all) + self._creating >= self.size:
                self._cond.wait()
            if self._idle:
                if text is None or len(self._idle) == 1:
                    return self._idle.pop()
                best = max(range(len(self._idle)),
                           key=lambda i: (common_prefix(self._texts.get(id(self._idle[i]), ""), text), i))
                return self._idle.pop(best)
            self._creating += 1
        try:
            llama = self._factory()
        except BaseException:
            with self._cond:
                self._creating -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._creating -= 1
            self._all.append(llama)
        return llama

    @property
    def created(self) -> int:
        return len(self._all)

    def close(self) -> None:
        with self._cond:
            for llama in self._all:
                try:
                    llama.close()
                except Exception:  # pragma: no cover - best effort at exit
                    pass
            self._all.clear()
            self._idle.clear()
            self._texts.clear()
            if self._store is not None:
                self._store.clear()


_POOLS: dict[tuple[str, int, int], ContextPool] = {}


_LOAD_LOCK = threading.Lock()


def context_pool(path: str, n_ctx: int, n_threads: int, size: int) -> ContextPool:
    """The process's pool of contexts for ``(path, n_ctx, n_threads)``, at least ``size`` large."""
    key = (path, int(n_ctx), int(n_threads))
    with _LOAD_LOCK:
        if key not in _POOLS:
            if not _POOLS:
                atexit.register(_close_models)
            _POOLS[key] = ContextPool(lambda: new_llama(*key), size)
        pool = _POOLS[key]
    pool.grow(size)
    return pool


def _close_models() -> None:
    """Free the models while the interpreter is still whole (llama.cpp's finalizers fail during teardown)."""
    with _LOAD_LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()
