"""A ``dspy.LM`` whose response-cache entries know which server answered.

DSPy's response cache key leaves out ``api_base`` (DSPy ignores ``api_key``, ``api_base`` and ``base_url``
when it hashes a request), so the same command pointed at a second server silently returns the first
server's answers. :class:`KeyedLM` adds the LM's identity (model, ``api_base``, decoding settings; see
:func:`lm_identity`) to the key through ``rollout_id``, the field DSPy documents for telling otherwise
identical requests apart: it is part of the cache key and is never sent to the provider.

``groundstate.lm.get_lm`` builds every hosted LM as a :class:`KeyedLM`; the embedded LM (a custom engine in
this process, with no server address) stays a plain ``dspy.LM``. The class is built on first use, so
importing this module does not import DSPy; ``groundstate.lm.cache.KeyedLM`` resolves it (and lets pickle
find it).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from groundstate.compat import (
    configured_retries,
    quiet_rollout_warning,
    retries_property,
    warn_zero_temperature_rollout,
)
from groundstate.errors import strip_userinfo
from groundstate.lm.budget import acall_within_budget, call_within_budget, dspy_retries
from groundstate.metering import ametered, metered

IDENTITY_ROLLOUT_PREFIX = "groundstate-lm:"
_NOT_IDENTITY = {"api_key", "timeout", "num_retries", "cache", "rollout_id", "prompt_cache", "headers",
                 "extra_headers", "callbacks"}


def lm_identity(lm) -> dict[str, Any]:
    """What makes two LMs give different answers to the same prompt: the model, where it is served
    (``api_base``, without its userinfo: a password changes who may ask, not the answers) and the decoding
    settings. Never the key, the timeout or the retry count."""
    kwargs = {k: strip_userinfo(v) if k in ("api_base", "base_url") else v
              for k, v in dict(getattr(lm, "kwargs", {}) or {}).items() if k not in _NOT_IDENTITY}
    return {"model": getattr(lm, "model", None), "model_type": getattr(lm, "model_type", None), **kwargs}


def is_identity_rollout(rollout_id: Any) -> bool:
    """Whether ``rollout_id`` is one :class:`KeyedLM` sends to key the cache by the LM's identity."""
    return isinstance(rollout_id, str) and rollout_id.startswith(IDENTITY_ROLLOUT_PREFIX)


def identity_hash(lm) -> str:
    """A short stable hash of :func:`lm_identity`."""
    text = json.dumps(lm_identity(lm), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def keyed_lm_class() -> type:
    """The :class:`KeyedLM` class (built on first use, so importing this module does not import DSPy)."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    class KeyedLM(dspy.LM):
        """A ``dspy.LM`` whose response-cache entries are keyed by the LM's identity as well as the request.

        DSPy leaves ``api_base`` out of its cache key, so two servers behind the same model name share
        entries. DSPy's documented way to tell otherwise identical requests apart is ``rollout_id``: it is
        part of the cache key and never sent to the provider. Every call therefore carries the rollout id
        ``groundstate-lm:<identity hash>`` (``...:<id>`` when the caller or a copy of the LM set its own
        rollout id, so distinct samples stay distinct).

        Its ``timeout`` is the budget of the whole call: the attempts, retries (``num_retries``) and waits
        between them all fit in it (:mod:`groundstate.lm.budget`). The meters count the call once
        (:func:`groundstate.metering.metered`), whatever its attempts. Its saved state (``dump_state``, which
        run fingerprints hash through a predictor's state) holds ``api_base`` without userinfo. Everything else
        (engine selection, callbacks, usage, history) is DSPy's own.
        """

        num_retries = retries_property(dspy_retries)  # 0 while one attempt of a call runs: DSPy retries nothing

        def keyed_rollout(self, rollout_id: Any = None) -> str:
            """The rollout id this LM sends for a call whose own rollout id is ``rollout_id``."""
            suffix = "" if rollout_id is None else f":{rollout_id}"
            return f"{IDENTITY_ROLLOUT_PREFIX}{identity_hash(self)}{suffix}"

        def keyed(self, kwargs: dict[str, Any]) -> dict[str, Any]:
            """The call keywords with the identity rollout id (DSPy's warning kept for the caller's own id)."""
            own = kwargs.get("rollout_id", self.kwargs.get("rollout_id"))
            if own is not None:
                warn_zero_temperature_rollout(self, kwargs.get("temperature", self.kwargs.get("temperature")), own)
            return {**kwargs, "rollout_id": self.keyed_rollout(own)}

        @metered
        def __call__(self, prompt=None, *, messages=None, **kwargs):
            def attempt(call_kwargs):
                return dspy.LM.__call__(self, prompt, messages=messages, **self.keyed(call_kwargs))

            return call_within_budget(self, attempt, prompt, kwargs, configured_retries(self))

        @ametered
        async def acall(self, prompt=None, *, messages=None, **kwargs):
            async def attempt(call_kwargs):
                return await dspy.LM.acall(self, prompt, messages=messages, **self.keyed(call_kwargs))

            return await acall_within_budget(self, attempt, prompt, kwargs,
                                             configured_retries(self))

        def dump_state(self):
            state = super().dump_state()
            for key in ("api_base", "base_url"):
                if key in state:
                    state[key] = strip_userinfo(state[key])
            return state

    KeyedLM.__module__ = __name__
    KeyedLM.__qualname__ = "KeyedLM"
    return quiet_rollout_warning(KeyedLM, is_identity_rollout)


def __getattr__(name: str) -> Any:
    """``groundstate.lm.cache.KeyedLM`` (built lazily by :func:`keyed_lm_class`)."""
    if name == "KeyedLM":
        return keyed_lm_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
