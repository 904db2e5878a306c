"""Counting LM calls and tokens across every thread a piece of groundstate work starts, and nowhere else.

A :class:`Meter` counts calls (cache hits included) and the calls that raised, and is the usage tracker (it sums
the tokens the LM reports; DSPy's cache hits report none, and neither do failed calls, so
``cached = calls - reached the model - failed``). DSPy copies the usage tracker into worker threads with
``deepcopy``, which returns the meter itself, so calls made on any thread are counted once.

Metering is scoped to groundstate's own work: the runner's records (:meth:`groundstate.eval.runner.Runner.run`)
and :func:`meter_context` blocks (``tune`` uses one). Only while such a block is open somewhere in the process
are ``BaseLM.__call__`` and ``BaseLM.acall`` wrapped (:func:`metered_lm_calls`, through
:func:`groundstate.compat.lm_call_patch`); the wrapper counts a call only when the call's own DSPy settings
carry meters (``dspy.settings`` key :data:`METER_KEY`, set by :func:`meter_overrides`) and otherwise just calls
DSPy, so what the host program calls on its other threads meanwhile is not counted; when the last block closes,
DSPy's methods are back as they were. A host program's DSPy calls outside groundstate's work never run
groundstate code.

Why a wrapper and not a DSPy callback: a callback, once installed, makes DSPy inspect the arguments of every
module, adapter and LM call (``dspy.utils.callback.with_callbacks``), which cost the runner 1.06 ms per LM call
(1.76x ``dspy.Evaluate``, issue 18); DSPy's usage tracker alone hears only the calls that reached the model
(neither cache hits nor failures). Every LM, whichever object a program calls, is counted once per public
call, failed when the call raised. A hosted LM's retries are attempts inside its one public call
(:mod:`groundstate.lm.budget`), so a call that needed a retry is still one call (:func:`metered`).

A meter can also tell a listener about each LM call as it finishes (``meter.listener``, an object with
``on_lm_call(failed: bool)`` and ``on_lm_usage(input_tokens, output_tokens)``; the durable runner's progress
display is one), so long records show calls and tokens while they run. The listener is called outside the
meter's lock, from whichever thread made the call, and must be thread-safe and cheap.

A meter can carry a spending cap (:func:`cap_meter`, what ``tune``'s ``max_cost`` uses): from the moment its priced
spend reaches the cap, every LM call counted by it is refused before it is made, with
:class:`~groundstate.errors.CostCapReached` (the call is not counted: it never ran); calls already on their way
when it is reached finish, so the spend passes the cap by at most what the calls in flight cost. The spend is
summed as calls report their usage, so checking it costs nothing per call.

Dollar cost (:meth:`Meter.cost_usd`) is priced from LiteLLM's model map (``litellm.cost_per_token`` on each
call's reported tokens, keyed by the LM's model name). It is ``None``, never a pretended 0, when any model the
work called has no price there (the embedded model, scripted LMs, most local servers), so a partly priced
record is not under-reported. Calls DSPy's cache answered are *excluded*: they report no usage and bill
nothing in this run (their count is ``cached_calls``), so a record answered wholly from cache costs 0.0.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache, wraps
from typing import Any

from groundstate.compat import lm_call_patch, quiet_litellm
from groundstate.errors import ConfigError, CostCapReached, scrub_secrets

METER_KEY = "groundstate_meters"
"""The ``dspy.settings`` key holding the meters in force (a tuple, innermost last): see the module docstring."""


@lru_cache(maxsize=1)
def meter_class() -> type:
    from dspy.utils.usage_tracker import UsageTracker  # noqa: PLC0415 (heavy: dspy)

    class Meter(UsageTracker):
        """LM calls, failed calls (the LM hook) and billed tokens (usage tracker) of one piece of work."""

        def __init__(self):
            UsageTracker.__init__(self)
            self.lock = threading.Lock()
            self.calls = 0
            self.failed = 0
            self.first_error: str | None = None  # the first failed call's exception, secrets scrubbed
            self.listener = None  # told of each finished call (see the module docstring)
            self.models: set[str] = set()  # the model names of every call (cache hits included)
            self.cap_usd: float | None = None  # refuse calls once ``spent_usd`` reaches this (cap_meter)
            self.spent_usd = 0.0  # priced dollars so far, summed as usage arrives (only while capped)

        def __deepcopy__(self, memo):
            return self

        def add_usage(self, lm, usage_entry):
            with self.lock:
                UsageTracker.add_usage(self, lm, usage_entry)
            if self.cap_usd is not None and usage_entry and model_price(lm) is not None:
                entry = dict(usage_entry)
                dollars = call_cost(lm, int(entry.get("prompt_tokens") or entry.get("input_tokens") or 0),
                                    int(entry.get("completion_tokens") or entry.get("output_tokens") or 0))
                with self.lock:
                    self.spent_usd += dollars
            if self.listener is not None and usage_entry:
                entry = dict(usage_entry)
                self.listener.on_lm_usage(int(entry.get("prompt_tokens") or entry.get("input_tokens") or 0),
                                          int(entry.get("completion_tokens") or entry.get("output_tokens") or 0))

        def on_lm_start(self, call_id, instance, inputs):
            with self.lock:
                self.calls += 1
                model = getattr(instance, "model", None)
                if isinstance(model, str):
                    self.models.add(model)

        def on_lm_end(self, call_id, outputs, exception=None):
            if exception is not None:
                with self.lock:
                    self.failed += 1
                    if self.first_error is None:
                        self.first_error = scrub_secrets(f"{type(exception).__name__}: {exception}")
            if self.listener is not None:
                self.listener.on_lm_call(exception is not None)

        def cached(self) -> int:
            """Calls DSPy's cache answered: neither failed nor reported usage."""
            with self.lock:
                reached = sum(len(v) for v in self.usage_data.values())
                return max(0, self.calls - reached - self.failed)

        def reached_model(self) -> int:
            """Calls that reported usage, i.e. reached the model (DSPy's cache hits report none)."""
            with self.lock:
                return sum(len(v) for v in self.usage_data.values())

        def tokens(self) -> tuple[int, int]:
            """``(input_tokens, output_tokens)`` so far."""
            with self.lock:
                entries = [e for v in self.usage_data.values() for e in v]
            inp = sum(int(e.get("prompt_tokens") or e.get("input_tokens") or 0) for e in entries)
            out = sum(int(e.get("completion_tokens") or e.get("output_tokens") or 0) for e in entries)
            return inp, out

        def reused_tokens(self) -> int | None:
            """Input tokens the LM reported serving from a cache (``prompt_tokens_details.cached_tokens``: the
            embedded engine's reused prefixes, a provider's prompt cache), or ``None`` if no call reported any."""
            with self.lock:
                entries = [e for v in self.usage_data.values() for e in v]
            counts = [(e.get("prompt_tokens_details") or {}).get("cached_tokens") for e in entries]
            counts = [int(c) for c in counts if isinstance(c, int | float)]
            return sum(counts) if counts else None

        def cost_usd(self) -> float | None:
            """Dollars billed so far, or ``None`` if any model called has no LiteLLM price (module docstring)."""
            with self.lock:
                models = set(self.models) | set(self.usage_data)
                entries = [(m, e) for m, v in self.usage_data.items() for e in v]
            if not models or any(model_price(m) is None for m in models):
                return None
            total = 0.0
            for model, e in entries:
                inp = int(e.get("prompt_tokens") or e.get("input_tokens") or 0)
                out = int(e.get("completion_tokens") or e.get("output_tokens") or 0)
                total += call_cost(model, inp, out)
            return total

    return Meter


_COUNTING = contextvars.ContextVar("groundstate_metered_lm_call", default=False)


def metered(call: Callable) -> Callable:
    """``call`` (an LM class's ``__call__``) counted by the meters in force, once per public call.

    A call made while another LM call is being counted on the same thread or task is part of that call (an
    attempt of :class:`~groundstate.lm.cache.KeyedLM`, which retries within one call's budget, or an LM that
    delegates to another) and is not counted again. With no meter in force, ``call`` runs as it is.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    @wraps(call)
    def metered_call(self, *args, **kwargs):
        meters = dspy.settings.get(METER_KEY)
        if not meters or _COUNTING.get():
            return call(self, *args, **kwargs)
        _refuse_over_cap(meters)
        token = _COUNTING.set(True)
        _started(meters, self)
        try:
            result = call(self, *args, **kwargs)
        except BaseException as exc:
            _ended(meters, exc)
            raise
        finally:
            _COUNTING.reset(token)
        _ended(meters, None)
        return result

    return metered_call


def ametered(acall: Callable) -> Callable:
    """:func:`metered` for an LM class's ``async acall``."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    @wraps(acall)
    async def metered_acall(self, *args, **kwargs):
        meters = dspy.settings.get(METER_KEY)
        if not meters or _COUNTING.get():
            return await acall(self, *args, **kwargs)
        _refuse_over_cap(meters)
        token = _COUNTING.set(True)
        _started(meters, self)
        try:
            result = await acall(self, *args, **kwargs)
        except BaseException as exc:
            _ended(meters, exc)
            raise
        finally:
            _COUNTING.reset(token)
        _ended(meters, None)
        return result

    return metered_acall


@lru_cache(maxsize=1)
def _lm_call_patch():
    return lm_call_patch(metered, ametered)


@contextmanager
def metered_lm_calls() -> Iterator[None]:
    """While this block is open, DSPy LM calls whose settings carry meters (:func:`meter_overrides`) are counted.

    Guarantees: ``BaseLM.__call__``/``acall`` are wrapped only while at least one such block is open in the
    process (blocks nest and may overlap across threads); a call without meters in its settings runs DSPy's own
    code unchanged; after the last block closes, DSPy's methods are the originals again.
    """
    with _lm_call_patch().active():
        yield


def cap_meter(meter, max_usd: float | None):
    """Give ``meter`` a spending cap of ``max_usd`` dollars (``None``: no cap) and return it: once its priced spend
    (LiteLLM's prices of the usage its calls report) reaches the cap, each further call it counts raises
    :class:`~groundstate.errors.CostCapReached` before reaching the LM. The caller checks beforehand that every
    model it will call has a price (:func:`model_price`); an unpriced call adds nothing to the spend."""
    meter.cap_usd = max_usd
    return meter


def _refuse_over_cap(meters: tuple) -> None:
    for meter in meters:
        cap = getattr(meter, "cap_usd", None)
        if cap is not None and meter.spent_usd >= cap:
            raise CostCapReached(f"LM call refused: the priced spend ${meter.spent_usd:.3g} reached --max-cost "
                                 f"${cap:.3g}")


def _started(meters: tuple, lm) -> None:
    for meter in meters:
        meter.on_lm_start(None, lm, None)


def _ended(meters: tuple, exception: BaseException | None) -> None:
    for meter in meters:
        meter.on_lm_end(None, None, exception)


@lru_cache(maxsize=256)
def model_price(model: str) -> tuple[float, float] | None:
    """``(dollars per input token, per output token)`` of ``model`` in LiteLLM's map, or ``None`` if unpriced."""
    try:
        litellm = quiet_litellm()
        return tuple(float(x) for x in litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1))
    except Exception:
        return None


def model_name(lm: Any) -> str:
    """The model name an LM is priced by (its ``model``, else its class name)."""
    return str(getattr(lm, "model", None) or type(lm).__name__)


def program_models(program: Any, default_lm: Any = None) -> set[str]:
    """The model names ``program``'s predictors call: each predictor's own LM, else ``default_lm``; a program that
    is not a DSPy module (or ``None``) is taken to call ``default_lm``."""
    try:
        lms: Iterable[Any] = [getattr(p, "lm", None) or default_lm for _, p in program.named_predictors()]
    except Exception:  # not a dspy.Module: a plain callable, which may call the default LM
        lms = [default_lm]
    return {model_name(lm) for lm in lms if lm is not None}


def check_priced(models: Iterable[str]) -> None:
    """Refuse (one line) a cost cap on work that calls a model with no price in LiteLLM's map: it could not be kept.

    Raises:
        ConfigError: naming the first unpriced model.
    """
    unpriced = sorted(m for m in set(models) if model_price(m) is None)
    if unpriced:
        raise ConfigError(f"--max-cost needs a price for every LM the work calls, and '{unpriced[0]}' has none in "
                          "LiteLLM's cost map (the embedded model, scripted LMs and most local servers have none): "
                          "a spend that cannot be priced cannot be capped; drop --max-cost or use a priced model")


def call_cost(model: str, input_tokens: int, output_tokens: int) -> float:
    """One priced call's dollars (LiteLLM's ``cost_per_token``, which handles tiered prices)."""
    import litellm  # noqa: PLC0415 (heavy: litellm)

    prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=input_tokens,
                                                completion_tokens=output_tokens)
    return float(prompt) + float(completion)


def new_meter():
    """A fresh :class:`Meter`; it counts calls made inside :func:`metered_lm_calls` with :func:`meter_overrides`."""
    return meter_class()()


def meter_overrides(meter, base: dict | None = None) -> dict:
    """DSPy setting overrides that route calls and usage into ``meter`` (on top of ``base``; no callback)."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    base = dict(base or {})
    meters = tuple(base.get(METER_KEY, dspy.settings.get(METER_KEY)) or ())
    return {**base, METER_KEY: (*meters, meter), "usage_tracker": meter, "track_usage": True}


@contextmanager
def meter_context(meter=None) -> Iterator:
    """``with meter_context() as meter:`` counts every LM call made inside the block (on any thread it starts), into
    a new meter or the ``meter`` given."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    meter = meter if meter is not None else new_meter()
    with metered_lm_calls(), dspy.context(**meter_overrides(meter)):
        yield meter
