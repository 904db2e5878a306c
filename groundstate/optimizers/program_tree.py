"""A saved program's module tree, and DSPy's own state files: what :mod:`groundstate.optimizers.artifacts` needs
to save and reload composed pipelines.

A saved program's manifest lists its module tree under ``modules``: every sub-module reachable through
attributes (``verify``, ``verify.extract``, ``resolve``, ...), each with its class path and, for
:func:`~groundstate.programs.common.saveable` classes, its build arguments. Loading builds the root class, then
walks the saved paths from the shallowest: wherever the freshly built program holds a module of another
class than the saved one (a stage the user swapped, ``rg.resolve = MyResolve()``) or none at all (a stage the
user added), it builds the saved class and puts it there. Every class built this way is looked up in
:mod:`groundstate.registry` exactly like the root (refused with one line, before any import or call, unless it
is groundstate's or registered), and its arguments are checked against its declared parameters.

Not covered: modules held inside lists, tuples or dicts (they are whatever the parent's ``__init__`` builds;
swapping one is refused at save), and swapping in DSPy's own modules (``dspy.ChainOfThought(...)``), whose
signature argument is not data a manifest can carry: wrap them in a registered module of your own instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dspy

from groundstate import files, registry
from groundstate.errors import ConfigError, GroundstateError, InputError, one_line

logger = logging.getLogger(__name__)

_SEGMENT = re.compile(r"^(?!__)[A-Za-z_][A-Za-z0-9_]*$")

#: The keys DSPy's ``Predict.dump_state`` writes; anything else in a predictor's saved state is dropped.
PREDICTOR_KEYS = frozenset({"traces", "train", "demos", "signature", "fields", "lm", "extended_signature"})


def module_tree(program: dspy.Module) -> dict[str, dict[str, Any]]:
    """``path -> {"class": module:qualname[, "kwargs": build arguments]}`` for every sub-module reachable
    through attributes (breadth first; a module reachable at several paths is listed at the first)."""
    out: dict[str, dict[str, Any]] = {}
    seen = {id(program)}
    queue: list[tuple[str, dspy.Module]] = [("", program)]
    while queue:
        prefix, module = queue.pop(0)
        for name, value in module.__dict__.items():
            if not isinstance(value, dspy.Module) or id(value) in seen:
                continue
            seen.add(id(value))
            path = f"{prefix}.{name}" if prefix else name
            entry: dict[str, Any] = {"class": registry.class_path(value)}
            kwargs = getattr(value, "init_kwargs", None)
            if isinstance(kwargs, dict):
                entry["kwargs"] = kwargs
            out[path] = entry
            queue.append((path, value))
    return out


def _at(root: dspy.Module, path: str, source: str) -> tuple[dspy.Module, str, Any]:
    """``(parent, attribute, current value or None)`` for a saved module path (checked: attribute names only)."""
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{source}: a module path must be a non-empty string (got {one_line(path, 80)})")
    *parents, name = path.split(".")
    for segment in (*parents, name):
        if not _SEGMENT.match(segment):
            raise ConfigError(f"{source}: module path '{one_line(path, 120)}' is not a chain of attribute names")
    parent: Any = root
    for segment in parents:
        parent = parent.__dict__.get(segment)
        if not isinstance(parent, dspy.Module):
            raise ConfigError(f"{source}: module path '{one_line(path, 120)}' does not lead through modules")
    current = parent.__dict__.get(name)
    if current is None and hasattr(parent, name):
        raise ConfigError(f"{source}: '{one_line(path, 120)}' names an attribute of {type(parent).__name__} that "
                          "is not a module; refusing to replace it")
    if current is not None and not isinstance(current, dspy.Module):
        raise ConfigError(f"{source}: '{one_line(path, 120)}' is not a module of the program; refusing to replace it")
    return parent, name, current


def _rebuild_arguments(module: Any) -> dict[str, Any] | None:
    """The build arguments a swapped-in module can be rebuilt with, or ``None`` if it cannot be."""
    kwargs = getattr(module, "init_kwargs", None)
    if isinstance(kwargs, dict):
        return kwargs
    return {} if not registry.init_parameters(type(module)) else None


def check_rebuildable(program: dspy.Module, fresh: dspy.Module) -> None:
    """Refuse to save a program whose swapped or added stages could not be rebuilt on load.

    ``fresh`` is the root class built again from its arguments; this is a dry run of :func:`rebuild` on it:
    every path where ``fresh`` (with the stages already put back) holds a module of another class than
    ``program`` must hold, in ``program``, a registered class whose arguments are known.

    Raises:
        ConfigError: one line naming the stage and what to do.
    """
    tree = module_tree(program)
    for path in sorted(tree, key=lambda p: (p.count("."), p)):
        parent, name, current = _at(fresh, path, "the program")
        if current is not None and registry.class_path(current) == tree[path]["class"]:
            continue
        module = _get(program, path)
        label = type(module).__name__
        if not registry.is_known(tree[path]["class"], "program"):
            raise ConfigError(f"stage '{path}' is a {label}, which is not registered, so the program could not be "
                              "loaded again; decorate its class with groundstate.saveable (or call "
                              "groundstate.register on it)")
        kwargs = _rebuild_arguments(module)
        if kwargs is None:
            raise ConfigError(f"stage '{path}' is a {label}, whose build arguments are not recorded; decorate its "
                              "class with groundstate.saveable")
        setattr(parent, name, type(module)(**kwargs))


def _get(root: dspy.Module, path: str) -> Any:
    obj: Any = root
    for segment in path.split("."):
        obj = obj.__dict__[segment]
    return obj


def tree_for_manifest(program: dspy.Module) -> dict[str, dict[str, Any]]:
    """:func:`module_tree` with the arguments a swapped-in no-argument module is rebuilt with filled in."""
    tree = module_tree(program)
    for path, entry in tree.items():
        if "kwargs" not in entry and registry.is_known(entry["class"], "program"):
            kwargs = _rebuild_arguments(_get(program, path))
            if kwargs is not None:
                entry["kwargs"] = kwargs
    return tree


def rebuild(program: dspy.Module, modules: Any, source: str) -> dspy.Module:
    """Put the saved classes back where the freshly built ``program`` differs from the saved module tree.

    Raises:
        ConfigError: a malformed tree, an unregistered class (refused before any import or call), wrong
            arguments, or a path that is not a module attribute.
    """
    if modules is None:
        return program
    if not isinstance(modules, Mapping):
        raise ConfigError(f"{source}: 'modules' must be an object of module path -> class")
    for path in sorted(modules, key=lambda p: (str(p).count("."), str(p))):
        entry = modules[path]
        if not isinstance(entry, Mapping) or "class" not in entry:
            raise ConfigError(f"{source}: module '{one_line(path, 120)}' needs an object with its 'class'")
        parent, name, current = _at(program, path, source)
        if current is not None and registry.class_path(current) == registry.canonical(str(entry["class"])):
            continue
        where = f"{source} (module '{path}')"
        cls = registry.resolve(entry["class"], "program", where)
        kwargs = registry.validate_kwargs(cls, entry.get("kwargs", {}), where)
        try:
            module = cls(**kwargs)
        except GroundstateError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {cls.__name__} cannot be built from the saved arguments ({exc})") from None
        setattr(parent, name, module)
    return program


def clean_state(state: dict[str, Any], source: str) -> dict[str, Any]:
    """A saved state with per-predictor LMs removed (LMs come from the loader's configuration, never from a file)
    and with only the keys DSPy's predictors write; DSPy's ``metadata`` entry is dropped."""
    out: dict[str, Any] = {}
    dropped_lm = False
    for name, entry in state.items():
        if name == "metadata":
            continue
        if isinstance(entry, dict):
            entry = {k: v for k, v in entry.items() if k in PREDICTOR_KEYS}
            if entry.get("lm") is not None:
                dropped_lm = True
            entry["lm"] = None
        out[name] = entry
    if dropped_lm:
        logger.warning("%s: per-predictor LMs in the saved state were ignored; the configured LM is used", source)
    return out


def load_state_into(program: Any, state: dict[str, Any], source: str) -> Any:
    """``program.load_state(clean_state(state))``, a state that does not fit being one line naming ``source``."""
    if not isinstance(program, dspy.Module):
        raise ConfigError(f"program must be a dspy.Module to load {source} into (got {type(program).__name__})")
    try:
        program.load_state(clean_state(state, source))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ConfigError(f"{source}: the saved state does not fit {type(program).__name__} "
                          f"({type(exc).__name__}: {one_line(exc, 160)})") from None
    return program


def load_dspy_file(path: Path, program: Any) -> Any:
    """Load a state file written by DSPy's ``program.save("x.json")`` into ``program`` (the file does not name
    its program class, so the caller builds it). DSPy's pickle formats (``.pkl``, ``save_program=True``) are
    refused: loading them runs arbitrary code.

    Raises:
        InputError: an unreadable file. ConfigError: a pickle, no ``program``, or a state that does not fit.
    """
    if path.suffix == ".pkl" or path.name == "program.pkl":
        raise ConfigError(f"{path} is a pickle, which can run arbitrary code when loaded; groundstate never loads "
                          "pickles: save the state with program.save('program.json') and load that")
    if program is None:
        raise ConfigError(f"{path} is a DSPy state file, which does not name its program class; pass the program to "
                          "load it into, e.g. gs.load(path, program=gs.ReGround())")
    state = files.read_json(path, max_bytes=256 * 1024**2)
    if not isinstance(state, dict):
        raise InputError(f"must be a JSON object of predictor states (got a JSON {type(state).__name__})",
                         file=str(path))
    saved = ((state.get("metadata") or {}).get("dependency_versions") or {}) if isinstance(
        state.get("metadata"), dict) else {}
    if isinstance(saved, dict) and saved.get("dspy") not in (None, dspy.__version__):
        logger.warning("%s was saved with dspy %s; dspy %s is installed", path, saved.get("dspy"), dspy.__version__)
    return load_state_into(program, state, str(path))
