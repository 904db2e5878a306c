"""Saved artifacts: optimized programs, trained controllers and calibrators, each a directory with a manifest.

Every artifact directory holds ``manifest.json`` (what it is, how it was made, with which versions) and its
parameters, never a pickle:

- ``dspy-program``: ``program.json`` (DSPy's JSON state: instructions and demos; per-predictor LMs are left
  out, the manifest describes them) and a manifest naming the program class and the keyword arguments it
  was built with (programs decorated with :func:`~groundstate.programs.common.saveable`), plus its module
  tree (``modules``: sub-module path -> class and arguments, see :mod:`groundstate.optimizers.program_tree`).
  Loading looks the class up in :mod:`groundstate.registry` (groundstate's own classes and the ones a user
  registered; anything else is refused before any import), checks the arguments against the class's declared
  parameters, builds it, rebuilds the stages the user swapped or added (their classes looked up the same
  way) and loads the state.
- ``sklearn``: ``model.skops`` (scikit-learn estimators through ``skops.io``) plus the manifest; the
  scikit-learn version must match. Before anything is built, every type the file names that skops does not
  trust by itself is checked against an exact list (:data:`SKOPS_TYPES`, the types groundstate's own saved
  controllers hold, plus the exact classes a user registered as estimators); one other type refuses the file.
- ``params``: ``params.json`` for estimators that describe themselves with ``to_params()`` and rebuild with
  ``from_params(params)`` (the conformal calibrator); the class must be registered, like a program's.

Every file is read through :mod:`groundstate.files`, so a missing, truncated, binary or malformed artifact is
one line naming the file, never a traceback.

:func:`load` also reads the state file DSPy's own ``program.save("x.json")`` writes, into a program the caller
builds (``load("x.json", program=ReGround())``); DSPy's pickles (``.pkl``, ``save_program=True``) are refused.
Per-predictor LMs in any loaded state are ignored (the configured LM is used).

:func:`load` reads any of them. A saved artifact never contains an API key: keys are never written by
DSPy's state, and the written files are checked against the key-like variables of the environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dspy
from pydantic import ValidationError

import groundstate
from groundstate import files, registry
from groundstate.errors import ConfigError, GroundstateError, InputError, one_line, secret_values
from groundstate.optimizers import manifests, program_tree
from groundstate.paths import check_entry
from groundstate.schema import from_validation, validate

FORMAT = 1
MANIFEST = "manifest.json"
PROGRAM_STATE = "program.json"
SKLEARN_MODEL = "model.skops"
PARAMS = "params.json"


def versions() -> dict[str, str]:
    out = {"groundstate": groundstate.__version__, "dspy": dspy.__version__, "python": platform.python_version()}
    try:
        import sklearn  # noqa: PLC0415 (heavy: scikit-learn)

        out["scikit-learn"] = sklearn.__version__
    except ImportError:  # pragma: no cover - scikit-learn is a core dependency
        pass
    return out


def _minor(version: Any) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", str(version))[:2])


def _check_no_secrets(directory: Path) -> None:
    secrets = secret_values()  # the environment's keys and the registered ones (passwords of LM URLs)
    for path in directory.iterdir():
        # only regular files are read (through the reading layer): a FIFO or a link to a device is never opened
        if path.suffix in (".json", ".md", ".txt") and not path.is_symlink() and path.is_file():
            text = files.read_text(path)
            if any(secret in text for secret in secrets):
                path.unlink()
                raise ConfigError(f"{path} would contain an API key from the environment; nothing was saved there")


def _prepare(directory: Path, *names: str) -> None:
    """Make an artifact directory and check, before anything is written, that each file the save writes there (and
    the manifest) is absent or a regular file: a symlink would send the write elsewhere, a FIFO would block it."""
    for name in (*names, MANIFEST):
        check_entry(directory / name, "artifact files")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make the artifact directory ({exc.strerror or exc})", file=str(directory)) from None


def _dump_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        raise ConfigError(f"{path}: cannot save NaN or infinite values (JSON has no such numbers)") from None
    tmp.unlink(missing_ok=True)  # a stale (or planted) temporary file: never written through
    tmp.write_text(text + "\n", encoding="utf-8")
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
    """The manifest of a ``kind`` artifact, checked for kind and version compatibility, then against the kind's
    model (:mod:`groundstate.optimizers.manifests`)."""
    manifest = read_manifest(directory)
    if manifest.get("kind") != kind:
        raise ConfigError(f"{directory} holds a '{one_line(manifest.get('kind'), 80)}' artifact, not {what}")
    check_compatible(manifest, directory)
    validate(manifests.MODELS[kind], manifest, file=directory / MANIFEST)
    return manifest


def read_manifest(directory: str | Path) -> dict[str, Any]:
    """The manifest of an artifact directory, checked against :class:`~groundstate.optimizers.manifests.Manifest`
    (``format``, ``kind`` and ``versions`` of the right types; a kind's own fields are checked by its loader).

    Raises:
        InputError: no manifest, or an unreadable one (not UTF-8, not JSON, not an object, a field of the wrong
            type), in one line naming the file and the field.
    """
    directory = Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise InputError("not a saved groundstate artifact (no such directory)", file=str(directory))
    if not path.is_file():
        raise InputError("not a saved groundstate artifact (no manifest.json)", file=str(directory))
    manifest = files.read_json(path, max_bytes=64 * 1024**2)
    validate(manifests.Manifest, manifest, file=path)
    return manifest


def _section(manifest: Mapping[str, Any], key: str, directory: Path) -> dict[str, Any]:
    """``manifest[key]``, which must be an object naming a ``class`` (see :class:`~.manifests.ClassEntry`)."""
    validate(manifests.ClassEntry, manifest.get(key), file=directory / MANIFEST, loc=(key,))
    return manifest[key]


def check_compatible(manifest: Mapping[str, Any], directory: str | Path) -> None:
    """Refuse an artifact from an incompatible format or library version (one clear line).

    Raises:
        InputError: ``versions`` is not an object of package -> version.
        ConfigError: a different artifact format, groundstate major version, DSPy minor version (programs) or
            scikit-learn minor version (sklearn estimators).
    """
    saved = validate(manifests.Versions, manifest.get("versions", {}), file=Path(directory) / MANIFEST,
                     loc=("versions",)).root
    here = versions()
    if manifest.get("format") != FORMAT:
        raise ConfigError(f"{directory}: artifact format {one_line(manifest.get('format'), 40)} is not supported (this "
                          f"version reads format {FORMAT}); re-create it with this version")
    checks = [("groundstate", 1)]
    if manifest.get("kind") == "dspy-program":
        checks.append(("dspy", 2))
    if manifest.get("kind") == "sklearn":
        checks.append(("scikit-learn", 2))
    for package, parts in checks:
        if package in saved and _minor(saved[package])[:parts] != _minor(here.get(package, "0"))[:parts]:
            raise ConfigError(f"{directory}: saved with {package} {one_line(saved[package], 40)}, incompatible with "
                              f"the installed {here.get(package)}; re-create the artifact with this version")


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
                          "groundstate.saveable to save it")
    if not registry.is_registered(program):
        raise ConfigError(f"{type(program).__name__} is not registered, so it could not be loaded again; decorate "
                          "it with groundstate.saveable (or call groundstate.register on it)")
    try:
        json.dumps(kwargs)
    except TypeError as exc:
        raise ConfigError(f"{type(program).__name__}'s build arguments are not JSON ({exc})") from None
    program_tree.check_rebuildable(program, type(program)(**kwargs))
    modules = program_tree.tree_for_manifest(program)
    try:
        json.dumps(modules)
    except TypeError as exc:
        raise ConfigError(f"the build arguments of a stage of {type(program).__name__} are not JSON ({exc})") from None
    _prepare(directory, PROGRAM_STATE)
    program.save(str(directory / PROGRAM_STATE))
    state = files.read_json(directory / PROGRAM_STATE, max_bytes=256 * 1024**2)
    for entry in state.values():
        if isinstance(entry, dict) and "lm" in entry:
            entry["lm"] = None  # LM-agnostic: the manifest describes the LMs, the loader's configuration picks them
    (directory / PROGRAM_STATE).write_text(json.dumps(state, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return _finish(directory, "dspy-program", {"program": {"class": registry.class_path(program), "kwargs": kwargs},
                                           "modules": modules},
                   manifest)


def _program_state(directory: Path) -> dict[str, Any]:
    path = directory / PROGRAM_STATE
    if not path.is_file():
        raise InputError("the saved program has no program.json (incomplete artifact)", file=str(directory))
    state = files.read_json(path, max_bytes=256 * 1024**2)
    if not isinstance(state, dict):
        raise InputError(f"must be a JSON object of predictor states (got a JSON {type(state).__name__})",
                         file=str(path))
    return state


def build_saved(directory: str | Path, manifest: Mapping[str, Any] | None = None) -> Any:
    """The saved program's class built with its saved arguments, without its saved state (the "before" of an
    optimization). The class must be registered (see :mod:`groundstate.registry`)."""
    directory = Path(directory)
    manifest = manifest if manifest is not None else _manifest_of(directory, "dspy-program", "a program")
    section = _section(manifest, "program", directory)
    source = str(directory / MANIFEST)
    cls = registry.resolve(section["class"], "program", source)
    kwargs = registry.validate_kwargs(cls, section.get("kwargs", {}), source)
    try:
        return cls(**kwargs)
    except GroundstateError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {cls.__name__} cannot be built from the saved arguments ({exc})") from None


def load_program(directory: str | Path, allow_custom: bool = False, program: Any = None) -> Any:
    """Rebuild a saved program: look its class up in the registry, build it with the saved (validated)
    arguments, rebuild the stages that were swapped or added (registered classes only), load its state.

    Args:
        directory: the artifact directory.
        allow_custom: no longer supported (it imported any class a manifest named); register your classes with
            :func:`groundstate.register` or ``@groundstate.saveable`` instead.
        program: load the saved state into this program instead of building the manifest's classes.

    Raises:
        InputError: a missing or unreadable manifest or state file.
        ConfigError: an unregistered class, wrong arguments, incompatible versions, or a state that does not fit
            the program.
    """
    _no_custom(allow_custom)
    directory = Path(directory)
    manifest = _manifest_of(directory, "dspy-program", "a program")
    if program is None:
        program = program_tree.rebuild(build_saved(directory, manifest), manifest.get("modules"),
                                       str(directory / MANIFEST))
    return program_tree.load_state_into(program, _program_state(directory), str(directory / PROGRAM_STATE))


def _no_custom(allow_custom: bool) -> None:
    if allow_custom:
        raise ConfigError("allow_custom is no longer supported (it imported whatever a manifest named); register "
                          "your classes with groundstate.register(cls) or @groundstate.saveable instead")


# ---------------------------------------------------------------------------------------------------------
# scikit-learn estimators and parameter files
# ---------------------------------------------------------------------------------------------------------


def save_sklearn(estimator: Any, directory: str | Path, **manifest: Any) -> Path:
    """Save a scikit-learn estimator with ``skops.io`` plus a manifest."""
    import skops.io as sio  # noqa: PLC0415 (heavy: skops)

    directory = Path(directory)
    _prepare(directory, SKLEARN_MODEL)
    sio.dump(estimator, directory / SKLEARN_MODEL)
    return _finish(directory, "sklearn", {"estimator": {"class": registry.class_path(estimator)}}, manifest)


#: The exact types, beyond the ones ``skops`` trusts by itself (scikit-learn's estimators, NumPy's arrays, dtypes and
#: ufuncs, plain containers), that a controller saved by this version holds. Derived with
#: ``skops.io.get_untrusted_types`` on freshly saved :class:`~groundstate.optimizers.controller.MLPActionValue`
#: models of every configuration (``tests/optimizers/test_skops_allow_list.py`` re-derives it and fails when a
#: saved model needs a type that is not here). Exact names only: a module prefix such as ``numpy.`` admits
#: functions like ``numpy.testing._private.utils.runstring``, which calls ``exec``.
SKOPS_TYPES = frozenset({
    "groundstate.optimizers.controller.MLPActionValue",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
})
#: Largest ``model.skops`` read, and the largest total its members may unpack to (a zip bomb is refused unread).
MAX_SKOPS_BYTES = 256 * 1024**2


def _trusted(type_name: str) -> bool:
    """Whether a type a skops file names may be constructed: :data:`SKOPS_TYPES`, or the exact class of an
    estimator the user registered (``groundstate.register(cls, kind="estimator")``)."""
    if type_name in SKOPS_TYPES:
        return True
    module, _, name = type_name.rpartition(".")
    return bool(module) and registry.is_known(f"{module}:{name}", "estimator")


def _check_skops_archive(path: Path) -> None:
    """Refuse a ``model.skops`` that is not a regular file, is too large, or unpacks to too much."""
    files.check_regular(path, MAX_SKOPS_BYTES)
    with zipfile.ZipFile(path) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > MAX_SKOPS_BYTES:
        raise InputError(f"unpacks to {unpacked} bytes, over the {MAX_SKOPS_BYTES}-byte limit; nothing was loaded",
                         file=str(path))


def load_sklearn(directory: str | Path) -> Any:
    """Load an estimator saved by :func:`save_sklearn`, trusting only scikit-learn's and NumPy's types, plain
    containers, and groundstate's registered estimators (any other type in the file is refused)."""
    import skops.io as sio  # noqa: PLC0415 (heavy: skops)

    directory = Path(directory)
    manifest = _manifest_of(directory, "sklearn", "a scikit-learn model")
    path = directory / SKLEARN_MODEL
    if not path.is_file():
        raise InputError("the saved model has no model.skops (incomplete artifact)", file=str(directory))
    try:
        _check_skops_archive(path)
        # get_untrusted_types only reads the file's schema: nothing it names is imported or called
        untrusted = sio.get_untrusted_types(file=path)
        refused = [t for t in untrusted if not _trusted(t)]
        if refused:
            raise ConfigError(f"{path}: refusing to load type '{one_line(refused[0], 120)}'"
                              + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
                              + ": it is not one of the types groundstate's saved controllers hold; nothing was "
                              "loaded")
        model = sio.load(path, trusted=untrusted)
    except GroundstateError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, KeyError, TypeError, AttributeError, EOFError) as exc:
        raise InputError(f"not a readable skops model ({type(exc).__name__}: {one_line(exc, 120)})",
                         file=str(path)) from None
    expected = (manifest.get("estimator") or {}).get("class") if isinstance(manifest.get("estimator"), dict) else None
    if isinstance(expected, str) and registry.canonical(expected) != registry.class_path(model):
        raise ConfigError(f"{path} holds a {registry.class_path(model)}, but the manifest says {expected}")
    return model


def save_params(obj: Any, directory: str | Path, **manifest: Any) -> Path:
    """Save an object that has ``to_params() -> dict`` (JSON) and a classmethod ``from_params``."""
    directory = Path(directory)
    if not registry.is_known(registry.class_path(obj), "params"):
        raise ConfigError(f"{type(obj).__name__} is not registered, so it could not be loaded again; call "
                          "groundstate.register(cls, kind='params') on its class")
    _prepare(directory, PARAMS)
    _dump_json(directory / PARAMS, obj.to_params())
    return _finish(directory, "params", {"object": {"class": registry.class_path(obj)}}, manifest)


def load_params(directory: str | Path, allow_custom: bool = False) -> Any:
    """Rebuild a parameter object (the conformal calibrator) saved by :func:`save_params`; its class must be
    registered. A malformed parameter file is one line naming it."""
    _no_custom(allow_custom)
    directory = Path(directory)
    manifest = _manifest_of(directory, "params", "a parameter file")
    section = _section(manifest, "object", directory)
    cls = registry.resolve(section["class"], "params", str(directory / MANIFEST))
    path = directory / PARAMS
    if not path.is_file():
        raise InputError("the saved object has no params.json (incomplete artifact)", file=str(directory))
    params = files.read_json(path, max_bytes=64 * 1024**2)
    if not isinstance(params, dict):
        raise InputError(f"must be a JSON object (got a JSON {type(params).__name__})", file=str(path))
    try:
        return cls.from_params(params)
    except GroundstateError:
        raise
    except ValidationError as exc:  # a class that checks its parameters with a pydantic model (the calibrator)
        raise from_validation(exc, path) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"does not describe a {cls.__name__} ({type(exc).__name__}: {one_line(exc, 160)})",
                         file=str(path)) from None


def load(directory: str | Path, allow_custom: bool = False, program: Any = None) -> Any:
    """Load any saved groundstate artifact (program, scikit-learn model or parameter object), or a DSPy state file.

    Args:
        directory: a groundstate artifact directory, or a ``.json`` state file written by DSPy's
            ``program.save(path)``.
        allow_custom: no longer supported (see :func:`load_program`).
        program: the program to load a DSPy state file into (required for one: the file does not name its
            class); for a saved groundstate program, load its state into this program instead of building the
            manifest's classes.

    Raises:
        InputError: a missing or unreadable artifact. ConfigError: an unregistered class, a pickle, incompatible
            versions, or a state that does not fit.
    """
    path = Path(directory)
    if path.is_file() or (path.is_dir() and not (path / MANIFEST).exists() and (path / "program.pkl").exists()):
        _no_custom(allow_custom)
        return program_tree.load_dspy_file(path / "program.pkl" if path.is_dir() else path, program)
    kind = read_manifest(directory).get("kind")
    if program is not None and kind != "dspy-program":
        raise ConfigError(f"{directory} holds a '{kind}' artifact; program= applies to saved programs only")
    if kind == "dspy-program":
        return load_program(directory, allow_custom, program)
    if kind == "sklearn":
        return load_sklearn(directory)
    if kind == "params":
        return load_params(directory, allow_custom)
    raise ConfigError(f"{directory}: unknown artifact kind '{kind}'")
