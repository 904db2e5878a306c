"""``--lm-config lm.toml``: one LM per agent role (heterogeneous teams), read and checked from TOML."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.errors import InputError, LMSetupError, strip_userinfo
from groundstate.files import read_toml
from groundstate.lm.embedded import ENGINE_REVISION, RUNTIME_KEY
from groundstate.lm.quantize import DEFAULT_QUANT, SHIPPED
from groundstate.lm.specs import (
    EMBEDDED_SPEC,
    LM_OPTIONS,
    RUNTIME_OPTIONS,
    check_lm_options,
    default_temperature,
    get_lm,
)


@dataclass
class LMConfig:
    """LM settings per agent role, read from a TOML file.

    Example ``lm.toml``::

        [default]
        model = "embedded"
        threads = 1                   # embedded only: CPU threads per decode (part of the run id)
        quant = "q8_0"                # embedded only: tensor type (part of the run id; "shipped": the wheel's file)
        contexts = 2                  # embedded only: decodes at once (not part of the run id)

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

    @classmethod
    def from_options(cls, *, lm_config: str | os.PathLike | None = None, lm: str | None = None,
                     api_base: str | None = None, temperature: float | None = None, max_tokens: int | None = None,
                     timeout: float | None = None, threads: int | None = None,
                     contexts: int | None = None, quant: str | None = None) -> LMConfig:
        """The configuration command-line options describe: the ``lm_config`` file (if any), with ``lm``
        replacing its default model and the other options overriding the default's settings. ``threads``,
        ``contexts`` and ``quant`` (``--lm-threads``, ``--lm-contexts``, ``--lm-quant``) apply to every embedded LM
        of the configuration (the default and the roles) that does not set its own, and are an error when none is
        embedded."""
        config = cls.load(lm_config) if lm_config else cls()
        if lm:
            config.default = {"model": lm}
        extra = {k: v for k, v in {"api_base": api_base, "temperature": temperature, "max_tokens": max_tokens,
                                   "timeout": timeout}.items() if v is not None}
        if extra:
            config.default = {**config.default, **extra}
        config.default.setdefault("model", EMBEDDED_SPEC)
        config._apply_engine_settings({k: v for k, v in {"threads": threads, "contexts": contexts,
                                                         "quant": quant}.items() if v is not None})
        return config

    def _apply_engine_settings(self, settings: dict[str, Any]) -> None:
        if not settings:
            return
        check_lm_options(settings, "--lm-" + "/--lm-".join(settings))
        entries = [self.default, *self.roles.values()]
        embedded = [e for e in entries if e.get("model") == EMBEDDED_SPEC]
        if not embedded:
            raise LMSetupError(f"--lm-{'/--lm-'.join(settings)} apply only to the embedded LM, and no LM of "
                               "this configuration is embedded")
        for entry in embedded:
            own = {"threads" if k == "n_threads" else k for k in entry}
            entry.update({k: v for k, v in settings.items() if k not in own})

    def server_for(self, model: str, api_base: str | None = None) -> dict[str, Any]:
        """The server option of an LM built beside this configuration for another role (the T2 judge, GEPA's
        reflection LM): ``{"api_base": api_base}`` when one is given (``--judge-api-base``,
        ``--reflection-api-base``); else the default LM's ``api_base`` (``--api-base``) when ``model`` has the
        default model's provider (``hosted_vllm/judge`` beside ``hosted_vllm/qwen``: one server for both); else
        nothing, and the provider's own endpoint is used.

        Guarantees: never an ``api_base`` for the embedded LM, and never the default's server for a model of
        another provider (a request, with its key, goes only where the user pointed that provider).
        """
        if model == EMBEDDED_SPEC:
            return {}
        if api_base:
            return {"api_base": api_base}
        default_model, inherited = self.default.get("model"), self.default.get("api_base")
        if inherited and _provider(model) is not None and _provider(model) == _provider(default_model):
            return {"api_base": inherited}
        return {}

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
            # a described entry (rebuilt as a Ray worker does) carries the engine revision: a description, no setting
            options = {k: v for k, v in entry.items() if k not in ("model", RUNTIME_KEY, "revision")}
            self._cache[key] = get_lm(entry["model"], **options, **entry.get(RUNTIME_KEY, {}))
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
        """The settings to store and print (run configs, manifests): no key, and every ``api_base`` without its
        userinfo (``http://user:pass@host`` -> ``http://host``), so run ids, which fingerprint this, are the
        same whoever's password reaches the server (see :func:`~groundstate.lm.specs.describe_lm`). A hosted LM
        that sets no temperature is described with the one it decodes at (:func:`~groundstate.lm.specs.
        default_temperature`), so its decoding is part of the run id; an embedded entry is described as given, with
        the tensor type it asks for (``quant``, default q8_0; left out for ``shipped``) and the engine revision
        (whose outputs differ from earlier releases', so their runs are not resumed as these). The type that
        actually ran (``shipped`` after a fallback) is in the engine's own description
        (:func:`~groundstate.lm.specs.describe_lm`)."""
        return {"default": _decoded(_public(self.default, strip=True)),
                "roles": {k: _decoded(_public(v, strip=True)) for k, v in self.roles.items()}}

    def worker_spec(self) -> dict[str, Any]:
        """:meth:`describe` for building the same LMs in another process (Ray workers): still no key (each
        worker reads its own environment), but every ``api_base`` as given, credentials included, since the
        worker must reach the server. Sent to the workers, never stored or printed."""
        return {"default": _public(self.default), "roles": {k: _public(v) for k, v in self.roles.items()}}


def _provider(model: Any) -> str | None:
    """The LiteLLM provider of a model string (``hosted_vllm`` of ``hosted_vllm/qwen``), ``None`` without one."""
    if not isinstance(model, str) or "/" not in model:
        return None
    return model.split("/", 1)[0].strip().lower() or None


def _role_matches(role: str, pattern: str) -> bool:
    parts = role.split(".")
    return any(fnmatch.fnmatchcase(".".join(parts[:i]), pattern) for i in range(len(parts), 0, -1))


def _decoded(entry: dict[str, Any]) -> dict[str, Any]:
    """A described entry with the temperature a hosted LM decodes at when it sets none (:func:`get_lm`'s default),
    or the tensor type an embedded one asks for (none for ``shipped``) and the engine's
    :data:`~groundstate.lm.embedded.ENGINE_REVISION`."""
    model = entry.get("model")
    if model == EMBEDDED_SPEC:
        quant = entry.get("quant", DEFAULT_QUANT)
        return {**{k: v for k, v in entry.items() if k != "quant"}, **({} if quant == SHIPPED else {"quant": quant}),
                "revision": ENGINE_REVISION}  # outputs differ from earlier releases' (the engine's description)
    if not isinstance(model, str) or entry.get("temperature") is not None:
        return entry
    return {**entry, "temperature": default_temperature(model)}


def _public(entry: dict[str, Any], strip: bool = False) -> dict[str, Any]:
    """``entry`` without keys, its settings that change no output (``contexts``) under :data:`RUNTIME_KEY`, which
    run fingerprints leave out (:meth:`LMConfig.lm_for` reads them back, for Ray workers); ``strip``: its
    ``api_base`` without userinfo."""
    out = {k: v for k, v in entry.items() if "key" not in k.lower() and k not in RUNTIME_OPTIONS}
    if strip and "api_base" in out:
        out["api_base"] = strip_userinfo(out["api_base"])
    runtime = {k: v for k, v in entry.items() if k in RUNTIME_OPTIONS}
    if runtime:
        out[RUNTIME_KEY] = runtime
    return out
