"""Scripted LMs for tests and benchmarks: deterministic, fast, and observable.

:class:`ScriptedEngine` is a DSPy 3.4 engine (``complete(Request) -> Response``) whose answers come from a
Python function. It records every request it receives (so tests can assert who saw what, in which order),
can sleep to imitate latency, and can fail on chosen inputs. When the responder returns nothing for a
request that carries a JSON schema, the engine fills the schema with placeholder values, so any
program runs end to end with no real model.

    lm = scripted_lm(lambda req: {"answer": "B"} if "Question 1" in req.text else None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        ...
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groundstate.lm.embedded import EmbeddedEngine

SCRIPTED_MODEL_NAME = "scripted/engine"


@dataclass
class ScriptedRequest:
    """What the responder sees: the chat messages, their joined text and the JSON schema (if any). Once answered,
    the request also holds the ``reply`` text and the ``input_tokens``/``output_tokens`` the engine reported."""

    messages: list[dict[str, str]]
    schema: dict | None
    index: int
    reply: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages)

    @property
    def user(self) -> str:
        """The last user message (DSPy puts the current inputs there)."""
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "system"), "")

    @property
    def output_fields(self) -> list[str]:
        return list((self.schema or {}).get("properties", {}))

    def field(self, name: str) -> str | None:
        """The value of input field ``name`` in the last user message (``None`` if absent)."""
        end = r"(?=\n\n\[\[ ## |\n\nRespond with |\Z)"
        match = re.search(r"\[\[ ## " + re.escape(name) + r" ## \]\]\n(.*?)" + end, self.user, re.S)
        return match.group(1).strip() if match else None


Responder = Callable[[ScriptedRequest], "dict[str, Any] | str | BaseException | None"]


def fill_schema(schema: dict, root: dict | None = None) -> Any:
    """A valid placeholder instance of a (pydantic-generated) JSON schema: first enum value, empty strings..."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return fill_schema(root.get("$defs", {}).get(name, {}), root)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return fill_schema(options[0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: fill_schema(v, root) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill_schema(schema.get("items", {"type": "string"}), root)] if schema.get("minItems", 0) else []
    if kind == "string":
        return "x"
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return False
    return None


CHARS_PER_TOKEN = 4
"""Characters per token when a :class:`ScriptedEngine` estimates usage from the text."""


class ScriptedEngine:
    """A DSPy engine that answers from a Python function.

    Args:
        responder: ``ScriptedRequest -> dict | str | Exception | None``. A dict is the output fields; a str is
            the raw completion; an exception instance is raised (a failing LM); ``None`` fills the schema.
        sleep: seconds to wait per call (imitates latency; calls do not hold a lock, so they overlap).
        input_tokens, output_tokens: usage reported per call; ``None`` estimates it from the text instead
            (:data:`CHARS_PER_TOKEN` characters per token, the usual rule of thumb for English with GPT-style
            tokenizers), which is what token-budget benchmarks with a scripted LM need.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "seed"})

    def __init__(self, responder: Responder | None = None, sleep: float = 0.0, input_tokens: int | None = 10,
                 output_tokens: int | None = 5, reused_tokens: int | None = None):
        self.responder = responder or (lambda request: None)
        self.reused_tokens = reused_tokens  # input tokens each call reports served from a cache (None: not reported)
        self.sleep = sleep
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        self.requests: list[ScriptedRequest] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.requests)

    def complete(self, request):
        from dspy.lm15 import Message, Response, Usage  # noqa: PLC0415 (heavy: dspy)

        messages = EmbeddedEngine._messages(request)
        fmt = request.config.response_format or {}
        schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
        with self._lock:
            scripted = ScriptedRequest(messages, schema, len(self.requests))
            self.requests.append(scripted)
        if self.sleep:
            time.sleep(self.sleep)
        answer = self.responder(scripted)
        if isinstance(answer, BaseException):
            raise answer
        if answer is None:
            answer = fill_schema(schema) if schema else {}
        if isinstance(answer, dict):
            if schema is not None or request.config.response_format is not None:
                filled = fill_schema(schema) if schema else {}
                text = json.dumps({**filled, **answer})
            else:
                text = "\n\n".join(f"[[ ## {k} ## ]]\n{_chat_value(v)}" for k, v in answer.items())
                text += "\n\n[[ ## completed ## ]]"
        else:
            text = str(answer)
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        inp = self.input_tokens if self.input_tokens is not None else -(-prompt_chars // CHARS_PER_TOKEN)
        out = self.output_tokens if self.output_tokens is not None else -(-len(text) // CHARS_PER_TOKEN)
        scripted.reply, scripted.input_tokens, scripted.output_tokens = text, inp, out
        return Response(id=None, model=SCRIPTED_MODEL_NAME, message=Message.assistant(text), finish_reason="stop",
                        usage=Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=self.reused_tokens))

    def stream(self, request):
        from dspy.lm15 import response_to_events  # noqa: PLC0415 (heavy: dspy)

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


class AsyncScriptedEngine:
    """The async counterpart of a :class:`ScriptedEngine` (``dspy.LM(..., async_engine=...)``), so
    ``await program.acall(...)`` runs on a scripted LM: the same responder, request log and usage."""

    def __init__(self, engine: ScriptedEngine):
        self.engine = engine

    async def complete(self, request):
        if self.engine.sleep:
            await asyncio.sleep(0)  # let other coroutines start before this call's (thread-free) sleep
        return self.engine.complete(request)

    async def stream(self, request):
        for event in self.engine.stream(request):
            yield event

    async def aclose(self) -> None:
        pass

    def close(self) -> None:
        pass


def _chat_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def scripted_lm(responder: Responder | None = None, *, sleep: float = 0.0, cache: bool = False,
                model: str = SCRIPTED_MODEL_NAME, **kwargs: Any):
    """A ``dspy.LM`` over a :class:`ScriptedEngine` (DSPy's cache off by default, so every call reaches it).

    The engine is available as ``lm.engine`` (its ``requests`` list records every call); an
    :class:`AsyncScriptedEngine` over it serves ``acall``. ``model`` is the LM's model name (a priced LiteLLM
    name such as ``openai/gpt-4o-mini`` lets tests check cost accounting; the default has no price).
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    engine = ScriptedEngine(responder, sleep=sleep, **kwargs)
    return dspy.LM(model, engine=engine, async_engine=AsyncScriptedEngine(engine), cache=cache, temperature=0.0,
                   max_tokens=512)
