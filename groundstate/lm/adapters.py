"""``dspy.JSONAdapter`` with its per-signature work done once per signature instead of once per LM call.

DSPy's ``JSONAdapter`` rebuilds, on every call, a pydantic model of the signature's output fields and its JSON
schema (the ``response_format`` sent with the request), and the system message (field descriptions, field
structure, instructions), which goes through a fresh pydantic ``TypeAdapter`` per field. Both depend only on the
signature, so :class:`CachedJSONAdapter` memoises them, keyed on the signature's *content*:

- the response format on each output field's name, annotation and default (exactly what DSPy builds it from) and
  the adapter's ``use_native_function_calling``;
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


def response_format_key(signature: Any, native_function_calling: bool) -> tuple | None:
    """What DSPy builds a signature's structured-output model from (``None``: not hashable, do not cache)."""
    fields = tuple((name, f.annotation, getattr(f, "default", ...)) for name, f in signature.output_fields.items())
    return _hashable((bool(native_function_calling), fields))


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


@lru_cache(maxsize=1)
def cached_json_adapter_class() -> type:
    """The :class:`CachedJSONAdapter` class (built on first use, so importing this module does not import DSPy)."""
    import pydantic
    from dspy.adapters import json_adapter as dspy_json

    class CachedJSONAdapter(dspy_json.JSONAdapter):
        """``dspy.JSONAdapter`` with the response format and system message memoised per signature."""

        def _prepare_response_format(self, lm, lm_kwargs, signature):
            # DSPy's JSONAdapter._prepare_response_format, with the structured-output model built once.
            if "response_format" not in lm.supported_params:
                return
            native = self.use_native_function_calling
            has_tool_calls = any(f.annotation == dspy_json.ToolCalls for f in signature.output_fields.values())
            if dspy_json._has_open_ended_mapping(signature) or (not native and has_tool_calls) \
                    or not lm.supports_response_schema:
                lm_kwargs["response_format"] = {"type": "json_object"}
                return
            try:
                format_ = RESPONSE_FORMATS.get(response_format_key(signature, native), lambda: frozen_format(
                    dspy_json._get_structured_outputs_response_format(signature, native)))
            except (ValueError, pydantic.PydanticInvalidForJsonSchema, pydantic.PydanticSchemaGenerationError):
                dspy_json.logger.warning("Failed to build structured output schema; using JSON mode before execution.")
                format_ = {"type": "json_object"}
            lm_kwargs["response_format"] = format_

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
