"""What an LM call's failure means, in one line: what failed, which LM, how to fix it.

DSPy raises its own exception classes for provider failures (``LMAuthError``, ``LMTimeoutError``,
``LMTransportError``, ``LMServerError``, ...), with messages that run over many lines and may quote a
server's error body, which can echo the request's ``Authorization`` header. :func:`lm_failure` turns any of
them into one :class:`~groundstate.errors.LMCallError` line, with every secret scrubbed
(:func:`~groundstate.errors.scrub_secrets`).
"""

from __future__ import annotations

import re
from typing import Any

from groundstate.errors import LMCallError, scrub_secrets, strip_userinfo

DETAIL_CHARS = 160
_MODEL_PREFIX = re.compile(r"^\[[^\]]*\]\s*")
_CLAUSE_END = re.compile(r"(?<=[.;])\s+(?=[A-Za-z])")


def _detail(exc: BaseException) -> str:
    """The first sentence of the exception's message, without DSPy's ``[model]`` prefix, scrubbed, cut short."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    first = " ".join(_MODEL_PREFIX.sub("", first).split())
    first = _CLAUSE_END.split(first, maxsplit=1)[0].rstrip(".")
    first = scrub_secrets(first)
    return first if len(first) <= DETAIL_CHARS else first[: DETAIL_CHARS - 3] + "..."


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the LM's server could not be reached (the failure a wrong server URL causes)."""
    from dspy.utils import exceptions as dspy_errors  # noqa: PLC0415 (heavy: dspy)

    return isinstance(exc, dspy_errors.LMTransportError | ConnectionError) and not isinstance(
        exc, dspy_errors.LMTimeoutError | TimeoutError)


def _kind(exc: BaseException, timeout: Any, flag: str = "--api-base") -> tuple[str, str]:
    """``(what failed, how to fix it)`` for an exception raised by an LM call; ``flag`` is the option that sets the
    LM's server."""
    from dspy.utils import exceptions as dspy_errors  # noqa: PLC0415 (heavy: dspy)

    text = str(exc).lower()
    wait = f"within {timeout:g}s" if isinstance(timeout, int | float) else "in time"
    if isinstance(exc, dspy_errors.LMAuthError):
        return ("the server refused the API key",
                "set the provider's key variable (e.g. OPENAI_API_KEY) to a valid key")
    if isinstance(exc, dspy_errors.LMTimeoutError | TimeoutError) or "timed out" in text or "timeout" in text:
        return f"no answer {wait}", "check that the server is up and not overloaded, or raise --lm-timeout"
    if isinstance(exc, dspy_errors.LMRateLimitError):
        return "the server is rate limiting requests", "wait and retry, or lower --threads"
    if isinstance(exc, dspy_errors.LMTransportError | ConnectionError):
        return "cannot reach the server", f"check that it is running and that {flag} is its URL"
    if isinstance(exc, dspy_errors.LMServerError):
        return "the server failed (an HTTP 5xx error)", "check the server's logs and retry"
    if isinstance(exc, dspy_errors.AdapterParseError):
        return ("the model's reply did not have the expected fields",
                "use a model that follows instructions better, or check the server's chat template")
    if isinstance(exc, dspy_errors.ContextWindowExceededError):
        return ("the prompt does not fit the model's context window",
                "shorten the inputs, use fewer demos (--max-demos), or use a model with a larger context")
    if isinstance(exc, dspy_errors.LMConfigurationError | dspy_errors.LMInvalidRequestError):
        return "the request was refused", "check the model name and the LM options"
    return ("the reply was not a valid chat completion",
            f"check that {flag} points to an OpenAI-compatible endpoint (usually ending in /v1)")


def lm_failure(exc: BaseException, lm: Any, action: str = "LM call", flag: str = "--api-base") -> LMCallError:
    """A one-line :class:`~groundstate.errors.LMCallError` for ``exc`` raised while calling ``lm``.

    Args:
        exc: what the call raised.
        lm: the ``dspy.LM`` that was called (its model and ``api_base`` are named).
        action: what was being done, for the start of the message (``"lm check"``).
        flag: the option that sets this LM's server, named in the hint (``--judge-api-base`` for the T2 judge,
            ``--reflection-api-base`` for GEPA's reflection LM).
    """
    kwargs = dict(getattr(lm, "kwargs", {}) or {})
    model = getattr(lm, "model", None) or "the LM"
    where = strip_userinfo(kwargs.get("api_base") or kwargs.get("base_url"))  # the server, never its password
    name = f"{model} at {where}" if where else model
    what, fix = _kind(exc, kwargs.get("timeout"), flag)
    return LMCallError(scrub_secrets(f"{action} failed for {name}: {what} ({_detail(exc)}); {fix}"))
