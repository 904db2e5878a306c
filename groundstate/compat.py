"""The one module that reaches into DSPy's private names or undocumented behaviour, or changes a library's classes.

Everything groundstate needs from DSPy beyond its public API is here, one numbered entry each, saying what it
relies on, why groundstate needs it and which version it was checked against. ``tests/test_compat.py`` has one
test per entry that fails when the pinned library changes that behaviour, so an upgrade is one file to review.
No other module of groundstate names a private attribute of DSPy, LiteLLM or llama-cpp-python, assigns to an
attribute of one of their classes or modules, overrides their private methods or reads their private context
variables (``tests/test_layers.py`` checks).

Checked against dspy 3.4.1 (``pyproject.toml`` allows ``>=3.4,<3.5``) and litellm 1.110.2. Nothing private of
LiteLLM or of llama-cpp-python 0.3.36 is used: the provider list is ``litellm.provider_list`` and the embedded
engine samples with llama-cpp-python's own chain.

Entries:

1. :class:`ScopedPatch`: replace methods of a DSPy class only while groundstate work runs (metering and the
   eviction of a failed call's cache entries; measured: a DSPy callback instead cost the runner 1.06 ms per LM
   call, 1.76x ``dspy.Evaluate``, issue 18), never for the life of the process.
2. :func:`lm_call_patch`: every DSPy LM call goes through ``BaseLM.__call__`` or ``BaseLM.acall``.
3. :func:`predictor_cache_patch`, :func:`forget_cache_entry`: predictor calls go through ``Predict.forward`` /
   ``aforward``; DSPy's response cache reads and writes through ``Cache.get`` / ``put``, keyed by
   ``Cache.cache_key``, in a memory tier guarded by ``Cache._lock`` and a disk tier.
4. :func:`memoized_json_adapter_class`: ``JSONAdapter._prepare_response_format`` chooses the response format
   from the signature's output fields and the LM's capabilities only.
5. :func:`quiet_rollout_warning`, :func:`warn_zero_temperature_rollout`: ``LM._warn_zero_temp_rollout``.
6. :func:`retries_property`, :func:`configured_retries`: DSPy reads ``lm.num_retries`` on every call.
7. :func:`set_compiled`, :func:`is_compiled`: ``Module._compiled`` hides a sub-module from optimizers.
8. :func:`wrap_lm_forward`: a ``forward`` set on an LM instance is what DSPy calls to reach the model.
9. :func:`quiet_litellm`: LiteLLM's documented ``suppress_debug_info`` switch, which DSPy itself sets.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

logger = logging.getLogger(__name__)

CHECKED_VERSIONS = {"dspy": "3.4.1", "litellm": "1.110.2"}
"""The library versions every entry was checked against (``tests/test_compat.py`` runs the checks)."""


# -- 1. Methods replaced for the duration of a scope ------------------------------------------------------------
class ScopedPatch:
    """Methods of a library class replaced while at least one :meth:`active` block is open anywhere in the process.

    On entering the first block, each ``owner.<name>`` becomes ``wrap(original)``; on leaving the last one the
    originals are put back, so once groundstate's work is over the class is exactly as the library left it. The
    wrappers must pass calls through untouched unless the call itself belongs to groundstate work (a DSPy
    setting only groundstate's blocks set), because while a block is open other threads of the host program call
    the same class. A wrapper someone else installed on top of ours is never removed: ours then stays beneath it
    (passing calls through) and is not installed twice.

    Args:
        owner: the class whose methods are replaced (each must be defined on ``owner`` itself).
        wrappers: ``{method name: wrap}``, ``wrap(original) -> replacement``.
    """

    def __init__(self, owner: type, wrappers: dict[str, Callable[[Callable], Callable]]):
        missing = [name for name in wrappers if name not in vars(owner)]
        if missing:
            raise TypeError(f"{owner.__qualname__} no longer defines {missing}: see groundstate.compat")
        self.owner, self.wrappers = owner, dict(wrappers)
        self.lock = threading.Lock()
        self.depth = 0
        self.originals: dict[str, Any] = {}
        self.installed: dict[str, Any] = {}

    @property
    def is_installed(self) -> bool:
        """Whether the replacements are in place now."""
        return bool(self.installed)

    @contextmanager
    def active(self) -> Iterator[None]:
        """Keep the replacements in place for the duration of the block (see the class docstring)."""
        with self.lock:
            if self.depth == 0 and not self.installed:
                for name, wrap in self.wrappers.items():
                    self.originals[name] = vars(self.owner)[name]
                    self.installed[name] = wrap(self.originals[name])
                    setattr(self.owner, name, self.installed[name])
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    self._remove()

    def _remove(self) -> None:
        covered = [name for name, ours in self.installed.items() if vars(self.owner).get(name) is not ours]
        if covered:
            logger.debug("%s.%s was wrapped again by other code; groundstate's wrapper stays beneath it",
                         self.owner.__qualname__, covered)
            return
        for name, original in self.originals.items():
            setattr(self.owner, name, original)
        self.installed.clear()
        self.originals.clear()


# -- 2. LM calls -------------------------------------------------------------------------------------------------
def lm_call_patch(wrap_call: Callable[[Callable], Callable], wrap_acall: Callable[[Callable], Callable]) -> ScopedPatch:
    """A :class:`ScopedPatch` of ``dspy.BaseLM.__call__`` and ``BaseLM.acall``.

    Relies on (dspy 3.4.1): every public LM call (``lm(...)``, ``await lm.acall(...)``, what adapters make) runs
    ``BaseLM.__call__`` / ``acall``, whatever the LM class (``dspy.LM``, ``DummyLM``, user subclasses that do not
    override them; groundstate's :class:`~groundstate.lm.cache.KeyedLM` overrides them and calls them per
    attempt). Why: the meter must count every LM call of a run, cache hits and failed calls included, which
    DSPy's usage tracker does not see (it hears only calls that reached the model); DSPy's callbacks see them
    but cost 1.06 ms per call (issue 18).
    """
    from dspy.clients.base_lm import BaseLM  # noqa: PLC0415 (heavy: dspy)

    return ScopedPatch(BaseLM, {"__call__": wrap_call, "acall": wrap_acall})


# -- 3. Predictor calls and DSPy's response cache ------------------------------------------------------------------
def predictor_cache_patch(wrap_forward: Callable[[Callable], Callable], wrap_aforward: Callable[[Callable], Callable],
                          wrap_get: Callable[[Callable], Callable], wrap_put: Callable[[Callable], Callable]
                          ) -> tuple[ScopedPatch, ScopedPatch]:
    """:class:`ScopedPatch` es of ``dspy.Predict.forward``/``aforward`` and of DSPy's ``Cache.get``/``put``.

    Relies on (dspy 3.4.1): every predictor call runs ``Predict.forward`` (``aforward`` for ``acall``), which
    raises when the LM call fails or its reply cannot be parsed; LM calls read DSPy's response cache with
    ``Cache.get(request, ignored_args_for_cache_key)`` and write it with ``Cache.put(request, value,
    ignored_args_for_cache_key, ...)``. Why: DSPy caches a reply before the adapter parses it, so an unparseable
    reply would be replayed to every retry (:mod:`groundstate.lm.failed_calls`); DSPy has no hook that tells
    which cache entries one predictor call touched.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)
    from dspy.clients.cache import Cache  # noqa: PLC0415 (heavy: dspy)

    return (ScopedPatch(dspy.Predict, {"forward": wrap_forward, "aforward": wrap_aforward}),
            ScopedPatch(Cache, {"get": wrap_get, "put": wrap_put}))


def cache_key(cache: Any, request: Any, ignored: Any) -> str:
    """The key DSPy's ``Cache`` files ``request`` under (``Cache.cache_key``, public but undocumented)."""
    return cache.cache_key(request, ignored)


def forget_cache_entry(cache: Any, key: str) -> None:
    """Delete ``key`` from a DSPy ``Cache``'s memory and disk tiers (a missing key is fine).

    Relies on (dspy 3.4.1): ``Cache.memory_cache`` (a mapping guarded by the private ``Cache._lock``) and
    ``Cache.disk_cache`` (a ``diskcache`` store with ``delete``). DSPy has no public way to delete one entry.
    """
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


# -- 4. The JSON adapter's response format -------------------------------------------------------------------------
_ABSENT = object()


def response_format_inputs(adapter: Any, lm: Any, signature: Any) -> tuple | None:
    """Everything ``JSONAdapter._prepare_response_format`` reads, as a hashable key (``None``: not hashable).

    Relies on (dspy 3.4.1): the method reads only whether ``"response_format"`` is in ``lm.supported_params``,
    ``lm.supports_response_schema``, the adapter's ``use_native_function_calling``, and each output field's name,
    annotation and default (tool calls, open-ended mappings and the structured-output model come from those).
    """
    fields = tuple((name, f.annotation, getattr(f, "default", ...)) for name, f in signature.output_fields.items())
    key = ("response_format" in lm.supported_params, bool(lm.supports_response_schema),
           bool(adapter.use_native_function_calling), fields)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def memoized_json_adapter_class(formats: Any, freeze: Callable[[Any], Any]) -> type:
    """``dspy.JSONAdapter`` whose response format is DSPy's own, built once per :func:`response_format_inputs`.

    Relies on (dspy 3.4.1): ``JSONAdapter.__call__`` and ``acall`` call ``self._prepare_response_format(lm,
    lm_kwargs, signature)`` once per call, which sets ``lm_kwargs["response_format"]`` (or leaves it alone when the
    LM takes none). Why: DSPy rebuilds a pydantic model and its JSON schema on every call, about 40% of a
    zero-latency call (issue 18); DSPy's own method builds the entry, so nothing is copied from DSPy.

    Args:
        formats: ``get(key, build)``, e.g. :class:`groundstate.lm.adapters.BoundedCache` (``key=None``: build).
        freeze: applied once to each format DSPy builds before it is shared between calls.
    """
    from dspy.adapters.json_adapter import JSONAdapter  # noqa: PLC0415 (heavy: dspy)

    class MemoizedFormatJSONAdapter(JSONAdapter):
        def _prepare_response_format(self, lm, lm_kwargs, signature):
            def build():
                scratch: dict[str, Any] = {}
                JSONAdapter._prepare_response_format(self, lm, scratch, signature)
                return freeze(scratch["response_format"]) if "response_format" in scratch else _ABSENT

            value = formats.get(response_format_inputs(self, lm, signature), build)
            if value is not _ABSENT:
                lm_kwargs["response_format"] = copy.deepcopy(value) if isinstance(value, dict) else value

    MemoizedFormatJSONAdapter.__module__ = __name__
    return MemoizedFormatJSONAdapter


# -- 5. DSPy's warning about a rollout id at temperature 0 -----------------------------------------------------------
def warn_zero_temperature_rollout(lm: Any, temperature: Any, rollout_id: Any) -> None:
    """DSPy's own warning (once per LM) that ``rollout_id`` makes no difference at temperature 0.

    Relies on (dspy 3.4.1): ``dspy.LM._warn_zero_temp_rollout(temperature, rollout_id)``.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    dspy.LM._warn_zero_temp_rollout(lm, temperature, rollout_id)


def quiet_rollout_warning(cls: type, is_own: Callable[[Any], bool]) -> type:
    """Make DSPy skip its rollout-id warning on ``cls`` (a ``dspy.LM`` subclass) for ids ``is_own`` accepts.

    Relies on (dspy 3.4.1): DSPy calls ``lm._warn_zero_temp_rollout(temperature, rollout_id)`` when an LM is
    built and before every call. Why: :class:`~groundstate.lm.cache.KeyedLM` puts the LM's identity in the cache
    key through ``rollout_id`` (DSPy's documented way to tell identical requests apart), which is not a request
    for distinct samples; the warning is kept for a rollout id the caller set (the LM warns about it itself).
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    def _warn_zero_temp_rollout(self, temperature, rollout_id):
        if not is_own(rollout_id):
            dspy.LM._warn_zero_temp_rollout(self, temperature, rollout_id)

    cls._warn_zero_temp_rollout = _warn_zero_temp_rollout
    return cls


# -- 6. Retries read on every call -----------------------------------------------------------------------------------
_RETRIES = "_configured_retries"


def retries_property(effective: Callable[[int], int]) -> property:
    """A ``num_retries`` property for a ``dspy.LM`` subclass: ``effective(configured)`` when DSPy reads it.

    Relies on (dspy 3.4.1): ``BaseLM.__init__`` assigns ``self.num_retries``, and DSPy reads ``lm.num_retries``
    at the start of every call (``dspy.clients.execution.execute``: ``1 + num_retries`` attempts of a retryable
    error). Why: :class:`~groundstate.lm.cache.KeyedLM` runs a call's attempts itself, under one time budget
    (:mod:`groundstate.lm.budget`); DSPy has no per-call retry setting, so inside an attempt the property reads 0.
    The configured value is :func:`configured_retries`.
    """
    def get(self) -> int:
        return effective(configured_retries(self))

    def set(self, value: int) -> None:
        self.__dict__[_RETRIES] = value

    return property(get, set, doc="The configured retries as DSPy should see them now (see groundstate.compat).")


def configured_retries(lm: Any) -> int:
    """The ``num_retries`` an LM with :func:`retries_property` was configured with (DSPy's default 3)."""
    return lm.__dict__.get(_RETRIES, 3)


# -- 7. Compiled modules ---------------------------------------------------------------------------------------------
def set_compiled(module: Any, value: bool) -> None:
    """Mark a ``dspy.Module`` compiled (``True``) or not.

    Relies on (dspy 3.4.1): ``Module.named_parameters`` (and so ``named_predictors`` and every optimizer) skips a
    sub-module whose ``_compiled`` is true; optimizers set it on what they return. DSPy has no public way to
    freeze part of a program (:func:`groundstate.optimizers.targets.frozen_except`).
    """
    module._compiled = bool(value)


def is_compiled(module: Any) -> bool:
    """Whether a ``dspy.Module`` is marked compiled (see :func:`set_compiled`)."""
    return bool(getattr(module, "_compiled", False))


# -- 8. An LM instance's forward -------------------------------------------------------------------------------------
def wrap_lm_forward(lm: Any, wrap: Callable[[Callable], Callable]) -> Any:
    """Make ``lm`` (one instance) reach its model through ``wrap(lm.forward)``; return ``lm``.

    Relies on (dspy 3.4.1): ``BaseLM.__call__`` calls a ``forward`` set on the instance. DSPy then treats the LM
    as a legacy LM (a ``DeprecationWarning`` per call; the legacy interface is to go in DSPy 3.5), and the
    instance's original ``forward`` still uses DSPy's cache and retries, so a cache hit also passes through
    ``wrap``. Why: the Ray backend's ``--max-inflight`` holds a cluster-wide permit around each request of a
    worker's LM, whatever its class.
    """
    lm.forward = functools.wraps(lm.forward)(wrap(lm.forward))
    return lm


# -- 9. LiteLLM's debug output -----------------------------------------------------------------------------------------
def quiet_litellm() -> Any:
    """``litellm`` with its debug hints off (``litellm.suppress_debug_info = True``); returns the module.

    Relies on (litellm 1.110.2): the documented module-level switch. Why: pricing a model LiteLLM does not know
    (:func:`groundstate.metering.model_price`) otherwise prints a "Provider List" banner to stdout. DSPy 3.4.1 sets
    the same switch the first time it uses LiteLLM (``dspy.clients._litellm``), so a DSPy program already runs with
    it; this is the only process-wide setting groundstate changes.
    """
    import litellm  # noqa: PLC0415 (heavy: litellm)

    litellm.suppress_debug_info = True
    return litellm
