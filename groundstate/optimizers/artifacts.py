"""Saved artifacts: optimized programs, trained controllers and calibrators, each a directory with a manifest.

Every artifact directory holds ``manifest.json`` (what it is, how it was made, with which versions) and its
parameters, never a pickle:

- ``dspy-program``: ``program.json`` (DSPy's JSON state: instructions and demos; per-predictor LMs are left
  out, the manifest describes them) and a manifest naming the program class and the keyword arguments it
  was built with (programs decorated with :func:`~groundstate.programs.common.saveable`). Loading imports
  the class, builds it with those arguments and loads the state.
- ``sklearn``: ``model.skops`` (scikit-learn estimators through ``skops.io``, which loads only types it is
  told to trust: here scikit-learn's, NumPy's, SciPy's and groundstate's own) plus the manifest; the
  scikit-learn version must match.
- ``params``: ``params.json`` for estimators that describe themselves with ``to_params()`` and rebuild with
  ``from_params(params)`` (the conformal calibrator).

:func:`load` reads any of them. A saved artifact never contains an API key: keys are never written by
DSPy's state, and the written files are checked against the key-like variables of the environment.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError

FORMAT = 1
MANIFEST = "manifest.json"
PROGRAM_STATE = "program.json"
SKLEARN_MODEL = "model.skops"
PARAMS = "params.json"
_KEY_VARIABLE = re.compile(r"(API_KEY|_TOKEN|_SECRET|ACCESS_KEY)$")


def versions() -> dict[str, str]:
    import dspy

    import groundstate

    out = {"groundstate": groundstate.__version__, "dspy": dspy.__version__, "python": platform.python_version()}
    try:
        import sklearn

        out["scikit-learn"] = sklearn.__version__
    except ImportError:  # pragma: no cover - scikit-learn is a core dependency
        pass
    return out


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def _class_path(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _import_class(path: str, allow_custom: bool) -> type:
    module, _, qualname = path.partition(":")
    if not module.startswith("groundstate.") and not allow_custom:
        raise ConfigError(f"refusing to import '{path}' from a saved artifact; pass allow_custom=True if you trust "
                          "this directory")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"the saved artifact needs '{path}', which cannot be imported ({exc})") from None
    return obj


def _secrets() -> list[str]:
    return [v for k, v in os.environ.items() if _KEY_VARIABLE.search(k) and v and len(v) >= 8]


def _check_no_secrets(directory: Path) -> None:
    secrets = _secrets()
    for path in directory.iterdir():
        if path.suffix in (".json", ".md", ".txt"):
            text = path.read_text(encoding="utf-8")
            if any(secret in text for secret in secrets):
                path.unlink()
                raise ConfigError(f"{path} would contain an API key from the environment; nothing was saved there")


def _dump_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)


def _write_manifest(directory: Path, manifest: Mapping[str, Any]) -> None:
    _dump_json(directory / MANIFEST, manifest)


def _finish(directory: Path, kind: str, described: dict[str, Any], manifest: Mapping[str, Any]) -> Path:
    """Write the manifest of a ``kind`` artifact (with what it holds and the versions) and check for secrets."""
    full = {"format": FORMAT, "kind": kind, "created": _dt.datetime.now(_dt.UTC).isoformat(), **described,
            "versions": versions(), **manifest}
    _write_manifest(directory, full)
    _check_no_secrets(directory)
    return directory


def _manifest_of(directory: Path, kind: str, what: str) -> dict[str, Any]:
    """The manifest of a ``kind`` artifact, checked for kind and version compatibility."""
    manifest = read_manifest(directory)
    if manifest.get("kind") != kind:
        raise ConfigError(f"{directory} holds a '{manifest.get('kind')}' artifact, not {what}")
    check_compatible(manifest, directory)
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of an artifact directory.

    Raises:
        InputError: no manifest, or an unreadable one.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise InputError("not a saved groundstate artifact (no manifest.json)", file=str(directory))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest.json is not valid JSON ({exc.msg})", file=str(path)) from None


def check_compatible(manifest: Mapping[str, Any], directory: str | Path) -> None:
    """Refuse an artifact from an incompatible format or library version (one clear line).

    Raises:
        ConfigError: a different artifact format, groundstate major version, DSPy minor version (programs) or
            scikit-learn minor version (sklearn estimators).
    """
    saved = manifest.get("versions", {})
    here = versions()
    if manifest.get("format") != FORMAT:
        raise ConfigError(f"{directory}: artifact format {manifest.get('format')} is not supported (this version "
                          f"reads format {FORMAT}); re-create it with this version")
    checks = [("groundstate", 1)]
    if manifest.get("kind") == "dspy-program":
        checks.append(("dspy", 2))
    if manifest.get("kind") == "sklearn":
        checks.append(("scikit-learn", 2))
    for package, parts in checks:
        if package in saved and _minor(saved[package])[:parts] != _minor(here.get(package, "0"))[:parts]:
            raise ConfigError(f"{directory}: saved with {package} {saved[package]}, incompatible with the installed "
                              f"{here.get(package)}; re-create the artifact with this version")


# ---------------------------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------------------------


def save_program(program: Any, directory: str | Path, **manifest: Any) -> Path:
    """Save a DSPy program (state + manifest) to ``directory``; extra keyword arguments go into the manifest.

    Raises:
        ConfigError: the program's build arguments are unknown (not :func:`saveable`) or not JSON, or a file
            would contain an API key.
    """
    directory = Path(directory)
    kwargs = getattr(program, "init_kwargs", None)
    if kwargs is None:
        raise ConfigError(f"{type(program).__name__} does not record how it was built; decorate it with "
                          "groundstate.programs.common.saveable to save it")
    try:
        json.dumps(kwargs)
    except TypeError as exc:
        raise ConfigError(f"{type(program).__name__}'s build arguments are not JSON ({exc})") from None
    directory.mkdir(parents=True, exist_ok=True)
    program.save(str(directory / PROGRAM_STATE))
    state = json.loads((directory / PROGRAM_STATE).read_text(encoding="utf-8"))
    for entry in state.values():
        if isinstance(entry, dict) and "lm" in entry:
            entry["lm"] = None  # LM-agnostic: the manifest describes the LMs, the loader's configuration picks them
    (directory / PROGRAM_STATE).write_text(json.dumps(state, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return _finish(directory, "dspy-program", {"program": {"class": _class_path(program), "kwargs": kwargs}},
                   manifest)


def load_program(directory: str | Path, allow_custom: bool = False) -> Any:
    """Rebuild a saved program: import its class, build it with the saved arguments, load its state."""
    directory = Path(directory)
    manifest = _manifest_of(directory, "dspy-program", "a program")
    cls = _import_class(manifest["program"]["class"], allow_custom)
    program = cls(**manifest["program"].get("kwargs", {}))
    program.load(str(directory / PROGRAM_STATE))
    return program


# ---------------------------------------------------------------------------------------------------------
# scikit-learn estimators and parameter files
# ---------------------------------------------------------------------------------------------------------


def save_sklearn(estimator: Any, directory: str | Path, **manifest: Any) -> Path:
    """Save a scikit-learn estimator with ``skops.io`` plus a manifest."""
    import skops.io as sio

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sio.dump(estimator, directory / SKLEARN_MODEL)
    return _finish(directory, "sklearn", {"estimator": {"class": _class_path(estimator)}}, manifest)


_TRUSTED_PREFIXES = ("sklearn.", "numpy.", "builtins.", "collections.", "scipy.", "groundstate.")


def load_sklearn(directory: str | Path) -> Any:
    """Load an estimator saved by :func:`save_sklearn`, trusting only scikit-learn, NumPy, SciPy and groundstate's
    own types (any other type in the file is refused)."""
    import skops.io as sio

    directory = Path(directory)
    _manifest_of(directory, "sklearn", "a scikit-learn model")
    path = directory / SKLEARN_MODEL
    untrusted = sio.get_untrusted_types(file=path)
    refused = [t for t in untrusted if not t.startswith(_TRUSTED_PREFIXES)]
    if refused:
        raise ConfigError(f"{path} contains types that are not scikit-learn's, NumPy's or groundstate's: {refused}")
    return sio.load(path, trusted=untrusted)


def save_params(obj: Any, directory: str | Path, **manifest: Any) -> Path:
    """Save an object that has ``to_params() -> dict`` (JSON) and a classmethod ``from_params``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _dump_json(directory / PARAMS, obj.to_params())
    return _finish(directory, "params", {"object": {"class": _class_path(obj)}}, manifest)


def load_params(directory: str | Path, allow_custom: bool = False) -> Any:
    directory = Path(directory)
    manifest = _manifest_of(directory, "params", "a parameter file")
    cls = _import_class(manifest["object"]["class"], allow_custom)
    return cls.from_params(json.loads((directory / PARAMS).read_text(encoding="utf-8")))


def load(directory: str | Path, allow_custom: bool = False) -> Any:
    """Load any saved groundstate artifact (program, scikit-learn model or parameter object)."""
    kind = read_manifest(directory).get("kind")
    if kind == "dspy-program":
        return load_program(directory, allow_custom)
    if kind == "sklearn":
        return load_sklearn(directory)
    if kind == "params":
        return load_params(directory, allow_custom)
    raise ConfigError(f"{directory}: unknown artifact kind '{kind}'")
