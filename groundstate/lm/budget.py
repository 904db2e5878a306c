"""A hosted LM call's ``timeout`` is the budget of the whole call: every attempt, retry and wait included.

DSPy retries a failed call itself (``num_retries`` times, waiting 1, 2, 4, ... seconds between attempts) and hands
every attempt the whole ``timeout``. With ``timeout=5`` and three retries, a server that accepts connections and
never answers held each call for four 5 s attempts plus 7 s of waiting: 27 s, where the user asked for 5.

:func:`call_within_budget` runs the attempts instead, each one a DSPy call with DSPy's own retries turned off
(:func:`single_attempts`), against one deadline set when the call starts:

- the first attempt is the call exactly as it was asked (the whole budget as its ``timeout``, DSPy's cache looked
  up as usual), so cache keys are what they always were;
- a retry happens only for an error DSPy itself deems transient (``dspy.utils.exceptions.is_retryable_lm_error``:
  rate limits, timeouts, 5xx, transport failures), at most ``num_retries`` times, after DSPy's wait (the server's
  ``Retry-After`` when it gives one, else 1, 2, 4, ... s, at most 60 s), and only when the wait leaves time for
  another attempt. It gets what is left of the budget as its ``timeout`` (rounded down to a short list of
  values, :meth:`Budget.on_grid`, since DSPy's native engine keeps a connection pool per distinct timeout), and
  skips DSPy's cache: DSPy makes the ``timeout`` part of the cache key, so an entry stored under a shortened
  timeout could never be found again;
- when an attempt has timed out and the budget leaves no room for another, the call raises
  ``dspy.utils.exceptions.LMTimeoutError`` saying the whole call's budget is spent, after how many attempts, and
  the last attempt's error (its cause); any other failure is raised as the attempt raised it.

What the deadline bounds is what the engine's ``timeout`` bounds, now shared by all attempts: DSPy's native engine
applies it to each wait (for the reply's next bytes, for sending, for a free connection) and keeps its own
10 s connect timeout, so a server trickling a reply byte by byte is not cut off mid-reply. An explicit
``dspy.lm15.Request`` call cannot be given a shorter ``timeout`` (its settings live in the request), so it is
retried only when a whole ``timeout`` still fits in the budget; while DSPy streams a reply, nothing is retried
(a replay would repeat what was already streamed).
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from groundstate.errors import scrub_secrets

MAX_WAIT_S = 60.0
"""The longest wait between two attempts (DSPy's cap)."""
MIN_ATTEMPT_S = 0.05
"""Less budget than this left after a wait: no further attempt (it could only time out)."""

GRID_RATIO = 0.9
"""A retry's timeout is the budget left, rounded down to ``budget * 0.9**k`` (see :meth:`Budget.on_grid`)."""

_SINGLE_ATTEMPT = contextvars.ContextVar("groundstate_lm_single_attempt", default=False)
_MODEL_PREFIX = re.compile(r"^\[[^\]]*\]\s*")


@contextmanager
def single_attempts() -> Iterator[None]:
    """Inside this block (on this thread or task only), :func:`dspy_retries` is 0: each DSPy call is one attempt."""
    token = _SINGLE_ATTEMPT.set(True)
    try:
        yield
    finally:
        _SINGLE_ATTEMPT.reset(token)


def dspy_retries(configured: int) -> int:
    """The retries DSPy itself should make for an LM configured with ``configured``: 0 inside
    :func:`single_attempts` (the attempts are :func:`call_within_budget`'s), else ``configured``."""
    return 0 if _SINGLE_ATTEMPT.get() else configured


def budget_seconds(value: Any) -> float | None:
    """``value`` (an LM's ``timeout``) as a budget in seconds, or ``None`` when it is not a positive finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _seconds(value: Any) -> float | None:
    """A server's ``Retry-After`` hint as seconds (a number or a numeric string), or ``None``."""
    try:
        seconds = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
    except (ValueError, OverflowError):
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _timed_out(exc: BaseException) -> bool:
    from dspy.utils.exceptions import LMTimeoutError  # noqa: PLC0415 (heavy: dspy)

    text = str(exc).lower()
    return isinstance(exc, LMTimeoutError | TimeoutError) or "timed out" in text or "timeout" in text


@dataclass
class Budget:
    """The deadline and the attempts of one LM call (see the module docstring).

    Args:
        seconds: the whole call's budget.
        retries: at most this many attempts after the first.
        shrinkable: whether an attempt can be given a shorter ``timeout`` than ``seconds``.
        model: the LM's model name, for the error.
    """

    seconds: float
    retries: int
    shrinkable: bool = True
    model: str | None = None
    deadline: float = field(init=False)
    attempts: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def attempt_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call keywords of the next attempt: ``kwargs`` for the first, else with the budget left as its
        ``timeout`` and DSPy's cache skipped (module docstring)."""
        if self.attempts == 0 or not self.shrinkable:
            return kwargs
        return {**kwargs, "timeout": self.on_grid(self.deadline - time.monotonic()), "cache": False}

    def on_grid(self, left: float) -> float:
        """The largest ``seconds * GRID_RATIO**k`` (``k >= 1``) that is at most ``left`` (and at least
        :data:`MIN_ATTEMPT_S`): DSPy's native engine keeps one connection pool per distinct ``timeout``, so
        retries take their timeouts from this short list rather than from every possible remainder."""
        left = max(left, MIN_ATTEMPT_S)
        steps = max(1, math.ceil(math.log(self.seconds / left) / -math.log(GRID_RATIO) - 1e-9))
        return max(self.seconds * GRID_RATIO ** steps, MIN_ATTEMPT_S)

    def after_failure(self, exc: Exception) -> float:
        """The seconds to wait before the next attempt, after an attempt raised ``exc``.

        Raises:
            Exception: ``LMTimeoutError`` (caused by ``exc``) when the attempt timed out and the budget has no
                room for another attempt (with ``num_retries=0`` too: the one attempt spent it); else ``exc``
                itself when no attempt follows (not transient, retries used up, or no time left for another).
        """
        from dspy.utils.exceptions import is_retryable_lm_error  # noqa: PLC0415 (heavy: dspy)

        self.attempts += 1
        if not is_retryable_lm_error(exc):
            raise exc
        left = self.deadline - time.monotonic()
        if self.attempts <= self.retries:
            hint = _seconds(getattr(exc, "retry_after", None))
            wait = min(hint if hint is not None else 2.0 ** (self.attempts - 1), MAX_WAIT_S)
            if left - wait >= (MIN_ATTEMPT_S if self.shrinkable else self.seconds):
                return wait
        elif left >= MIN_ATTEMPT_S:
            raise exc  # retries used up, budget left: the last attempt's own error
        if _timed_out(exc):
            raise self.spent(exc) from exc
        raise exc

    def spent(self, exc: BaseException) -> Exception:
        """The error of a call whose budget ran out on a timeout (``exc``: the last attempt's error)."""
        from dspy.utils.exceptions import LMTimeoutError  # noqa: PLC0415 (heavy: dspy)

        lines = str(exc).strip().splitlines()
        last = _MODEL_PREFIX.sub("", lines[0] if lines else type(exc).__name__).split(";")[0].strip()
        last = scrub_secrets(last if len(last) <= 120 else last[:117] + "...")
        plural = "s" if self.attempts != 1 else ""
        return LMTimeoutError(f"timed out: no reply within the whole call's {self.seconds:g}s budget "
                              f"({self.attempts} attempt{plural}, retries included, last: {last})",
                              model=self.model, provider=getattr(exc, "provider", None))


def plan(lm: Any, prompt: Any, kwargs: dict[str, Any], retries: int) -> Budget | None:
    """The :class:`Budget` of a call of ``lm``, or ``None`` when it has no usable ``timeout`` (DSPy's own retries
    then apply, as for any ``dspy.LM``)."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    seconds = budget_seconds(kwargs.get("timeout", dict(getattr(lm, "kwargs", {}) or {}).get("timeout")))
    if seconds is None:
        return None
    streaming = dspy.settings.send_stream is not None
    explicit = "request" in kwargs or not (prompt is None or isinstance(prompt, str))
    return Budget(seconds, 0 if streaming else retries, shrinkable=not explicit, model=getattr(lm, "model", None))


def call_within_budget(lm: Any, attempt: Callable[[dict[str, Any]], Any], prompt: Any, kwargs: dict[str, Any],
                       retries: int) -> Any:
    """``attempt(kwargs)`` (one DSPy call of ``lm``), retried within the call's budget (module docstring).

    Args:
        lm: the LM; its ``timeout`` (or ``kwargs["timeout"]``) is the budget.
        attempt: makes one DSPy call with the given call keywords.
        prompt: the call's prompt (a ``dspy.lm15.Request`` cannot be given a shorter timeout).
        kwargs: the call's keywords.
        retries: the LM's configured ``num_retries``.

    Returns:
        What the first successful attempt returned.
    """
    budget = plan(lm, prompt, kwargs, retries)
    if budget is None:
        return attempt(kwargs)
    with single_attempts():
        while True:
            try:
                return attempt(budget.attempt_kwargs(kwargs))
            except Exception as exc:
                wait = budget.after_failure(exc)
            time.sleep(wait)


async def acall_within_budget(lm: Any, attempt: Callable[[dict[str, Any]], Awaitable[Any]], prompt: Any,
                              kwargs: dict[str, Any], retries: int) -> Any:
    """:func:`call_within_budget` for ``await lm.acall(...)``: the waits do not block the event loop."""
    budget = plan(lm, prompt, kwargs, retries)
    if budget is None:
        return await attempt(kwargs)
    with single_attempts():
        while True:
            try:
                return await attempt(budget.attempt_kwargs(kwargs))
            except Exception as exc:
                wait = budget.after_failure(exc)
            await asyncio.sleep(wait)
