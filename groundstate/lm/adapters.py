"""``dspy.JSONAdapter`` with its per-signature work done once per signature instead of once per LM call.

DSPy's ``JSONAdapter`` rebuilds, on every call, a pydantic model of the signature's output fields and its JSON
schema (the ``response_format`` sent with the request), and the system message (field descriptions, field
structure, instructions), which goes through a fresh pydantic ``TypeAdapter`` per field. Both depend only on the
signature, so :class:`CachedJSONAdapter` memoises them, keyed on the signature's *content*:

- the response format on each output field's name, annotation and default, the adapter's
  ``use_native_function_calling`` and the LM's structured-output capabilities (exactly what DSPy builds it from);
  the entry is what DSPy's own ``JSONAdapter`` builds, computed once (:func:`groundstate.compat.
  memoized_json_adapter_class`), so nothing of DSPy's adapter is copied here;
- the system message on the signature's instructions and every field's name, annotation and ``json_schema_extra``
  (description, prefix, field type), plus the adapter class.

A signature changed by ``with_instructions``, ``with_updated_fields``, ``append``, ``delete`` or an optimizer's new
instructions therefore gets its own entry, and two signatures with the same content share one. Demos and inputs are
formatted per call, as before. Each call gets its own copy of the cached schema, so nothing downstream can change
an entry. A signature whose content cannot be hashed (an unhashable annotation or default) is not cached.
Entries are kept in a bounded LRU (:data:`CACHE_SIZE` per kind), so optimizers proposing thousands of
instructions do not grow memory without bound. Prompts and requests are byte-identical to DSPy's own adapter.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any

from groundstate.compat import memoized_json_adapter_class

CACHE_SIZE = 512
"""Entries kept per cache (response formats, system messages)."""


class BoundedCache:
    """A thread-safe LRU of ``key -> value`` holding at most ``size`` entries."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self.entries: OrderedDict[Hashable, Any] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable | None, build: Callable[[], Any]) -> Any:
        """The entry for ``key``, built with ``build()`` on a miss; ``key=None`` always builds (never cached)."""
        if key is None:
            return build()
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)
                self.hits += 1
                return self.entries[key]
        value = build()  # outside the lock: two threads may build the same entry once each, never a wrong one
        with self.lock:
            self.misses += 1
            self.entries[key] = value
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.hits = self.misses = 0


RESPONSE_FORMATS = BoundedCache()
SYSTEM_MESSAGES = BoundedCache()


def _hashable(key: tuple) -> tuple | None:
    try:
        hash(key)
    except TypeError:
        return None
    return key


def system_message_key(adapter: Any, signature: Any) -> tuple | None:
    """What a system message is formatted from (``None``: not hashable, do not cache)."""
    fields = tuple((name, f.annotation, repr(f.json_schema_extra)) for name, f in signature.fields.items())
    return _hashable((type(adapter), signature.instructions, fields))


def json_copy(value: Any) -> Any:
    """A copy of a JSON-like value: new dicts and lists all the way down, the same (immutable) leaves."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def frozen_format(model: type) -> type:
    """``model`` whose ``model_json_schema()`` returns a fresh copy of its schema on every call."""
    schema = model.model_json_schema()
    model.model_json_schema = lambda *args, **kwargs: json_copy(schema)
    return model


def freeze_format(value: Any) -> Any:
    """A response format made safe to share between calls: a structured-output model's schema is computed once and
    copied on every read (:func:`frozen_format`); a plain dict (``{"type": "json_object"}``) is copied for each call
    by :func:`groundstate.compat.memoized_json_adapter_class`."""
    return frozen_format(value) if isinstance(value, type) and hasattr(value, "model_json_schema") else value


@lru_cache(maxsize=1)
def cached_json_adapter_class() -> type:
    """The :class:`CachedJSONAdapter` class (built on first use, so importing this module does not import DSPy)."""
    base = memoized_json_adapter_class(RESPONSE_FORMATS, freeze_format)

    class CachedJSONAdapter(base):
        """``dspy.JSONAdapter`` with the response format and system message memoised per signature."""

        def format_system_message(self, signature) -> str:
            return SYSTEM_MESSAGES.get(system_message_key(self, signature),
                                       lambda: super(CachedJSONAdapter, self).format_system_message(signature))

    CachedJSONAdapter.__module__ = __name__
    CachedJSONAdapter.__qualname__ = "CachedJSONAdapter"
    return CachedJSONAdapter


def json_adapter(**kwargs: Any):
    """A new :class:`CachedJSONAdapter` (``kwargs`` as for ``dspy.JSONAdapter``)."""
    return cached_json_adapter_class()(**kwargs)


def __getattr__(name: str) -> Any:
    """``groundstate.lm.adapters.CachedJSONAdapter`` (built lazily by :func:`cached_json_adapter_class`)."""
    if name == "CachedJSONAdapter":
        return cached_json_adapter_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
