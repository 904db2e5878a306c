"""LM specs -> ``dspy.LM``: ``embedded`` or any LiteLLM model string, with checked settings.

Any spec other than ``embedded`` is a LiteLLM model string (``openai/gpt-4o-mini``, ``ollama_chat/qwen3:8b``,
``hosted_vllm/<model>`` with ``api_base``). Keys come only from the environment; nothing here writes one.
Such an LM is a :class:`~groundstate.lm.cache.KeyedLM`, and:

- every call gives up after ``timeout`` seconds (default :data:`DEFAULT_TIMEOUT_S`, 120 s; ``--lm-timeout``
  or ``timeout`` in an LM config), so a server that accepts a connection and never answers fails that call
  instead of stalling it for DSPy's 600 s default. It is the budget of the whole call, its retries
  (``num_retries``) and the waits between them included (:mod:`groundstate.lm.budget`). The embedded LM runs
  in-process and ignores ``timeout``;
- an ``api_base`` with credentials (``http://user:pass@host/v1``) is used as given for the calls (through
  LiteLLM, which sends them as HTTP Basic auth; DSPy's native engine would read ``user:pass@`` as part of the
  host name), its password becomes a secret that :func:`~groundstate.errors.scrub_secrets` removes, and it is
  described without them (:func:`describe_lm`);
- DSPy's response cache is keyed by the LM's identity (model, ``api_base``, decoding settings), which DSPy
  itself leaves out of the key, so the same command pointed at another server never gets the first
  server's answers back;
- its decoding is the papers' unless told otherwise: temperature 0 (:func:`default_temperature`) when neither
  ``temperature`` nor an LM config sets one, where the provider's own default would apply (OpenAI's is 1.0). The
  temperature is in :func:`describe_lm`'s description, so it is part of every run id. A program that sets its own
  temperature per call (DHD's stages and judge) still wins: a call's ``config`` overrides the LM's default.

Settings are checked when they are read (types and ranges, see :func:`check_lm_options`), with one line
naming the file, the section and the field.
"""

from __future__ import annotations

import re
from typing import Any

from groundstate.errors import LMSetupError, register_url_secrets, strip_userinfo
from groundstate.lm.embedded import EMBEDDED_MODEL_NAME, AsyncEmbeddedEngine, EmbeddedEngine
from groundstate.lm.quantize import QUANT_TYPES

EMBEDDED_SPEC = "embedded"


# Options a spec may carry in an LM config file or on the command line.
LM_OPTIONS = {"temperature", "max_tokens", "api_base", "api_version", "cache", "num_retries", "timeout", "top_p",
              "model_path", "n_ctx", "threads", "contexts", "n_threads", "max_string_length", "max_items", "seed",
              "quant", "reuse"}


EMBEDDED_ONLY_OPTIONS = {"model_path", "n_ctx", "threads", "contexts", "n_threads", "max_string_length",
                         "max_items", "seed", "quant", "reuse"}
"""Settings only the embedded LM takes (``n_threads`` is the earlier name of ``threads``)."""


RUNTIME_OPTIONS = {"contexts", "reuse"}
"""Settings that change how fast an LM answers, never what: described apart, outside run fingerprints."""


DEFAULT_TIMEOUT_S = 120.0
"""Seconds a hosted LM call may take before it fails (DSPy's own default is 600)."""


PAPER_TEMPERATURE = 0.0
"""The decoding the papers report (ReGround: temperature 0): the default temperature of a hosted LM."""


_FIXED_TEMPERATURE_FAMILIES = re.compile(
    r"^(?:o[1345](?:-(?:mini|nano|pro))?(?:-\d{4}-\d{2}-\d{2})?|gpt-5(?:\.\d+)*(?!-chat)(?:-.*)?)$")
"""OpenAI's reasoning families (o1, o3, o4-mini, gpt-5, ... but not gpt-5-chat), the rule DSPy 3.4's ``dspy.LM``
applies: they accept only temperature 1."""


def default_temperature(spec: str) -> float:
    """The temperature a hosted LM ``spec`` decodes at when none is given: :data:`PAPER_TEMPERATURE` (0), except
    for OpenAI's reasoning models, which accept only 1.0 (so 1.0 is what they get, and what is recorded)."""
    family = str(spec).rsplit("/", 1)[-1].lower()
    return 1.0 if _FIXED_TEMPERATURE_FAMILIES.match(family) else PAPER_TEMPERATURE


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
    "threads": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "contexts": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "n_threads": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "max_string_length": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "max_items": (lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "seed": (_is_int, "an integer"),
    "cache": (lambda v: isinstance(v, bool), "true or false"),
    "api_base": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string (a URL)"),
    "api_version": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string"),
    "model_path": (lambda v: isinstance(v, str) and bool(v.strip()), "a non-empty string (a file path)"),
    "quant": (lambda v: isinstance(v, str) and v in QUANT_TYPES, "one of " + ", ".join(QUANT_TYPES)),
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


def _known_providers() -> set[str]:
    """LiteLLM's provider prefixes (``litellm.provider_list``; LiteLLM is a dependency of DSPy on Python < 3.15)."""
    try:
        import litellm  # noqa: PLC0415 (heavy: litellm)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise LMSetupError(f"hosted LM specs need LiteLLM to check the provider prefix: pip install litellm ({exc})") \
            from exc
    return {getattr(p, "value", str(p)) for p in litellm.provider_list}


def get_lm(spec: str = EMBEDDED_SPEC, **options: Any):
    """Build a ``dspy.LM`` from a spec.

    Args:
        spec: ``"embedded"`` or a LiteLLM model string ``provider/model``.
        **options: ``temperature`` (default 0, the papers' decoding, for every LM: the embedded one decodes
            greedily, a hosted one gets :func:`default_temperature` instead of its provider's default),
            ``max_tokens``, ``api_base``, ``cache``, ``num_retries``, ``timeout``
            (seconds per call, retries included, default :data:`DEFAULT_TIMEOUT_S`; ignored by ``embedded``,
            which is local);
            for ``embedded`` also ``model_path``, ``n_ctx``, ``threads`` (CPU threads per llama.cpp context;
            ``n_threads`` is its earlier name), ``contexts`` (requests decoded at once), ``max_string_length``,
            ``max_items``, ``seed``, ``quant`` (the tensor type: ``shipped``, ``q8_0``, ``q4_0`` or ``f16``,
            :mod:`groundstate.lm.quantize`). ``threads`` defaults to 1; ``contexts`` to what the idle cores and the
            memory allow (:func:`~groundstate.lm.embedded.choose_contexts`); ``quant`` to q8_0.

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
    import dspy  # noqa: PLC0415 (heavy: dspy)

    if spec == EMBEDDED_SPEC:
        options.pop("timeout", None)  # the embedded model runs in this process: nothing to wait for
        engine_opts = {k: options.pop(k) for k in list(options) if k in EMBEDDED_ONLY_OPTIONS}
        if "n_threads" in engine_opts:
            if "threads" in engine_opts:
                raise LMSetupError("give 'threads' or its earlier name 'n_threads' for the embedded LM, not both")
            engine_opts["threads"] = engine_opts.pop("n_threads")
        for key in ("api_base", "api_version"):
            if key in options:
                raise LMSetupError(f"option '{key}' does not apply to the embedded LM")
        engine = EmbeddedEngine(**engine_opts)
        engine.resolved_path()  # fail now, with a clear message, if the model file is missing (and make its copy)
        options.setdefault("temperature", 0.0)
        options.setdefault("max_tokens", 512)
        return dspy.LM(EMBEDDED_MODEL_NAME, engine=engine, async_engine=AsyncEmbeddedEngine(engine), **options)

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
    bad = set(options) & EMBEDDED_ONLY_OPTIONS
    if bad:
        raise LMSetupError(f"option(s) {sorted(bad)} apply only to the embedded LM, not '{spec}'")
    options.setdefault("timeout", DEFAULT_TIMEOUT_S)
    if options.get("temperature") is None:
        options["temperature"] = default_temperature(spec)  # the papers' decoding, not the provider's default
    if has_userinfo(options.get("api_base")):
        register_url_secrets(options["api_base"])  # scrubbed from error text, logs and results from now on
        options["engine"] = "litellm"  # DSPy's native engine reads user:pass@ as part of the host name
    from groundstate.lm.cache import keyed_lm_class  # noqa: PLC0415 (--help stays light)

    return keyed_lm_class()(spec, **options)


def default_adapter(lm):
    """The adapter groundstate uses with ``lm``: a cached ``JSONAdapter`` for the embedded LM, else DSPy's default."""
    if is_embedded(lm):
        from groundstate.lm.adapters import json_adapter  # noqa: PLC0415 (--help stays light)

        return json_adapter()
    return None


def is_embedded(lm) -> bool:
    return getattr(lm, "model", None) == EMBEDDED_MODEL_NAME


def configure(spec: str = EMBEDDED_SPEC, **options: Any):
    """Build the LM for ``spec`` and make it (and its default adapter) DSPy's global default; return it."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    lm = get_lm(spec, **options)
    dspy.configure(lm=lm, adapter=default_adapter(lm))
    return lm


def has_userinfo(url: Any) -> bool:
    """Whether ``url`` (an ``api_base``) carries credentials: ``scheme://user:pass@host``."""
    return isinstance(url, str) and strip_userinfo(url) != url


def describe_lm(lm) -> dict[str, Any]:
    """A JSON-able description of an LM for run configs and manifests: never an API key, and ``api_base``
    without its userinfo (``http://user:pass@host/v1`` is described as ``http://host/v1``).

    Run ids are fingerprints of configs holding this description, so they see the URL without its
    credentials: the password changes who may call the server, never its answers, and two people reaching the
    same server with their own passwords share a run id (and can resume or merge each other's runs), while
    two different servers still differ by host, port or path. The embedded engine's number of contexts sits
    under ``engine.runtime``: recorded, but not part of a run's fingerprint (a context gives the same greedy
    outputs as any other); its threads (``n_threads``) and tensor type (``quant``, the one that runs) are, since
    greedy outputs depend on them."""
    if lm is None:
        return {"model": None}
    kwargs = {k: strip_userinfo(v) if k == "api_base" else v for k, v in dict(getattr(lm, "kwargs", {}) or {}).items()
              if k in {"temperature", "max_tokens", "api_base", "top_p", "api_version"}}
    out: dict[str, Any] = {"model": getattr(lm, "model", type(lm).__name__), **kwargs}
    engine = getattr(lm, "engine", None)
    if isinstance(engine, EmbeddedEngine):
        out["engine"] = engine.describe()  # its contexts are recorded, not fingerprinted
    return out
