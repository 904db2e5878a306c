"""The classes a saved artifact may name: groundstate's own, plus the ones a user registers in Python.

A saved program, controller or calibrator names its class in ``manifest.json``, and loading builds that class
with the manifest's keyword arguments. Saved artifacts are shared between people, so the name in a manifest
is untrusted input: :func:`resolve` accepts only

- groundstate's own classes, listed here by their import path (:data:`BUILTIN`, with the paths earlier commits
  wrote in :data:`ALIASES`), imported only after the name is found in the list; and
- classes a user registered in this process with :func:`register` (or the ``@groundstate.saveable``
  decorator, which registers the class it decorates), looked up by their path, never imported.

Anything else is refused with one line *before* any import or call. :func:`validate_kwargs` then checks the
manifest's arguments against the class's declared ``__init__`` parameters and their type hints, so a manifest
cannot pass an argument the class does not declare or a value of the wrong type.
"""

from __future__ import annotations

import importlib
import inspect
import threading
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, ValidationError, create_model

from groundstate.errors import ConfigError, one_line

#: What an artifact may hold.
KINDS = ("program", "estimator", "params")

#: groundstate's own classes by import path ("module:qualname") -> kind.
BUILTIN: dict[str, str] = {
    # programs (ReGround and the collaboration baselines, QA, DHD, the LLM controller)
    "groundstate.programs.qa:QuestionAnswering": "program",
    "groundstate.programs.reground.reground:ReGround": "program",
    "groundstate.programs.reground.reground:Verify": "program",
    "groundstate.programs.reground.reground:Reconstruct": "program",
    "groundstate.programs.reground.reground:Resolve": "program",
    "groundstate.programs.reground.statements:VerifyStatements": "program",
    "groundstate.programs.reground.oracle:Oracle": "program",
    "groundstate.programs.reground.standard:StandardCollaboration": "program",
    "groundstate.programs.reground.standard:Confidence": "program",
    "groundstate.programs.reground.baselines:Voting": "program",
    "groundstate.programs.reground.baselines:Robin": "program",
    "groundstate.programs.reground.centralized:Manager": "program",
    "groundstate.programs.reground.centralized:Instructor": "program",
    "groundstate.programs.reground.baselines:SelfReflect": "program",
    "groundstate.programs.dhd.deliberation:Recruiter": "program",
    "groundstate.programs.dhd.deliberation:Hypothesizer": "program",
    "groundstate.programs.dhd.deliberation:Integrator": "program",
    "groundstate.programs.dhd.deliberation:IndependentSolver": "program",
    "groundstate.programs.dhd.deliberation:DiverseHypothesisDeliberation": "program",
    "groundstate.programs.dhd.evaluator:AnswerEvaluator": "program",
    "groundstate.programs.consilience.control:LLMController": "program",
    # scikit-learn-style estimators and parameter objects
    "groundstate.optimizers.controller:MLPActionValue": "estimator",
    "groundstate.optimizers.conformal:RoundwiseConformal": "params",
}

#: Paths that earlier commits of main wrote into saved programs (before classes moved) -> today's path, so those
#: artifacts keep loading. Only paths whose artifacts still fit today's class are kept: checked by saving each
#: class with every commit of main that had it at the old path and loading the result with today's code. Programs
#: whose predictors or arguments changed since (the standard and confidence collaborations, the oracle, the LLM
#: controller's ``transcript_messages``, the DHD evaluator's ``use_judge``) cannot load from those artifacts
#: whatever their path says, so their old paths are not listed.
ALIASES: dict[str, str] = {
    **{f"groundstate.programs.reground:{name}": f"groundstate.programs.reground.reground:{name}"
       for name in ("ReGround", "Verify", "Reconstruct", "Resolve")},
    **{f"groundstate.programs.collaboration:{name}": f"groundstate.programs.reground.baselines:{name}"
       for name in ("Voting", "Robin", "SelfReflect")},
    **{f"groundstate.programs.{old}:{name}": f"groundstate.programs.reground.centralized:{name}"
       for old in ("collaboration", "reground.baselines") for name in ("Manager", "Instructor")},
    "groundstate.programs.reground.reground:VerifyStatements":
        "groundstate.programs.reground.statements:VerifyStatements",
    **{f"groundstate.programs.deliberation:{name}": f"groundstate.programs.dhd.deliberation:{name}"
       for name in ("Recruiter", "Hypothesizer", "Integrator", "IndependentSolver", "DiverseHypothesisDeliberation")},
}

_USER: dict[str, tuple[type, str]] = {}
_LOCK = threading.Lock()


def class_path(obj: Any) -> str:
    """``module:qualname`` of a class or of an instance's class."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def register(cls: type | None = None, *, kind: str = "program"):
    """Allow saved artifacts to name ``cls`` (usable as ``register(MyModule)`` or ``@register(kind=...)``).

    Registration is explicit and per process: loading a manifest that names an unregistered class of yours
    fails until your code has registered it (importing the module that registers it is your decision, never
    the loader's). Returns the class unchanged.

    Raises:
        ConfigError: ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)} (got '{kind}')")

    def add(target: type) -> type:
        if not isinstance(target, type):
            raise ConfigError(f"only classes can be registered, not {type(target).__name__}")
        with _LOCK:
            _USER[class_path(target)] = (target, kind)
        return target

    return add(cls) if cls is not None else add


def is_registered(obj: Any) -> bool:
    """Whether a saved artifact may name ``obj``'s class."""
    path = class_path(obj)
    return path in BUILTIN or path in _USER


def is_known(path: str, kind: str) -> bool:
    """Whether the class path ``path`` is registered (built in or by the user) for ``kind``; nothing is imported."""
    path = canonical(path)
    with _LOCK:
        user = _USER.get(path)
    if user is not None:
        return user[1] == kind
    return BUILTIN.get(path) == kind


def canonical(path: str) -> str:
    """Today's path for a class path (earlier versions' paths are mapped through :data:`ALIASES`)."""
    return ALIASES.get(path, path)


def resolve(path: Any, kind: str, source: str = "the artifact") -> type:
    """The registered class a manifest names, refused with one line unless it is registered for ``kind``.

    Args:
        path: the ``module:qualname`` string from the manifest.
        kind: what the artifact must hold (``program``, ``estimator``, ``params``).
        source: where the name came from (named in errors).

    Raises:
        ConfigError: the name is not a string, is not registered, or is registered for another kind.
    """
    if not isinstance(path, str):
        raise ConfigError(f"{source}: the class must be named by a string (got {type(path).__name__})")
    path = canonical(path)
    with _LOCK:
        user = _USER.get(path)
    if user is not None:
        cls, registered_kind = user
    elif path in BUILTIN:
        registered_kind = BUILTIN[path]
        if registered_kind != kind:
            raise ConfigError(f"{source}: class '{path}' is a {registered_kind}, not a {kind}")
        module, _, qualname = path.partition(":")
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        cls = obj
    else:
        raise ConfigError(f"{source}: refusing to load class '{one_line(path, 120)}': it is not one of "
                          "groundstate's classes and was not registered with groundstate.register() in this "
                          "process; nothing was imported")
    if registered_kind != kind:
        raise ConfigError(f"{source}: class '{path}' is a {registered_kind}, not a {kind}")
    return cls


def init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The named ``__init__`` parameters of ``cls`` (without ``self``, ``*args`` and ``**kwargs``)."""
    init = inspect.unwrap(cls.__init__)
    params = list(inspect.signature(init).parameters.values())[1:]
    return {p.name: p for p in params
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}


def validate_kwargs(cls: type, kwargs: Any, source: str = "the artifact") -> dict[str, Any]:
    """Check saved build arguments against ``cls.__init__``'s declared parameters and type hints.

    Returns the arguments converted to the declared types (a JSON list becomes a tuple where a tuple is
    declared, for example). A parameter the saved arguments lack takes the value in the class's
    ``legacy_kwargs`` mapping when it has one there: a parameter added later whose default changed behaviour
    names the value that rebuilds what manifests written before it were built with (a saved program records
    every argument, so manifests written since are unaffected); otherwise the parameter's default applies.

    Raises:
        ConfigError: not an object, an undeclared or missing argument, or a value of the wrong type.
    """
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"{source}: the build arguments must be a JSON object (got {type(kwargs).__name__})")
    params = init_parameters(cls)
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ConfigError(f"{source}: {cls.__name__} takes no argument '{one_line(unknown[0], 80)}' "
                          f"(it takes: {', '.join(params) or 'none'})")
    try:
        hints = typing.get_type_hints(inspect.unwrap(cls.__init__))
    except Exception:  # unresolvable annotations: fall back to checking names only
        hints = {}
    fields: dict[str, Any] = {}
    for name, param in params.items():
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (hints.get(name, Any), default)
    model = create_model(f"{cls.__name__}Arguments", __config__=ConfigDict(extra="forbid",
                                                                           arbitrary_types_allowed=True), **fields)
    try:
        validated = model.model_validate(dict(kwargs))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
        raise ConfigError(f"{source}: argument '{one_line(where, 80)}' of {cls.__name__}: "
                          f"{one_line(first.get('msg', 'invalid'), 160)}") from None
    legacy = {k: v for k, v in (getattr(cls, "legacy_kwargs", None) or {}).items() if k in params and k not in kwargs}
    return {**legacy, **{name: getattr(validated, name) for name in kwargs}}
