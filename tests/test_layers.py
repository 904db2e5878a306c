"""The architecture of DESIGN.md, checked on the source: floors in one order, no import cycles.

Floors: the plumbing modules at the top of the package (records, lm, errors, files, registry, ...) ->
signatures -> programs -> optimizers -> eval -> cli. A module may import only its own floor and the floors above
it. Every import counts, including the ones inside functions (a lazy import is still a dependency), and the
module import graph of the whole package has no cycle.
"""

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "groundstate"
FLOORS = {"signatures": 1, "programs": 2, "optimizers": 3, "eval": 4, "cli": 5}
SYSTEMS = ("reground", "consilience", "dhd")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in ROOT.rglob("*.py")}


def floor(module: str) -> int:
    """0 for the plumbing modules directly under groundstate/, else the floor of the subpackage."""
    parts = module.split(".")
    return FLOORS.get(parts[1], 0) if len(parts) > 1 else 0


def imports_of(module: str) -> set[str]:
    """Every groundstate module ``module`` imports (``from pkg import submodule`` counts as the submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.startswith("groundstate"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("groundstate")}
    return {m for m in found if m in MODULES and m != module}


def test_no_module_imports_a_later_floor():
    violations = [f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
                  for module in MODULES if module != "groundstate" for target in imports_of(module)
                  if floor(target) > floor(module)]
    assert not violations, "\n".join(sorted(violations))


def test_the_module_import_graph_has_no_cycle():
    graph = {module: imports_of(module) for module in MODULES}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_layer_check_catches_a_violation_and_a_cycle():
    """The two checks above can fail: a program importing eval is a violation, and a two-module loop is a cycle."""
    assert floor("groundstate.programs.reground.reground") < floor("groundstate.eval.runner")
    graph = {"a": {"b"}, "b": {"a"}}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        pass
    else:  # pragma: no cover - graphlib always detects this
        raise AssertionError("a two-module loop was not detected")


def test_each_system_has_one_wing_per_floor():
    for system in SYSTEMS:
        for package in ("programs", "eval"):
            assert (ROOT / package / system / "__init__.py").is_file(), f"{package}/{system}/ is missing"
        assert (ROOT / "cli" / f"{system}.py").is_file(), f"cli/{system}.py is missing"
        tests = ROOT.parent / "tests"
        assert (tests / "programs" / system).is_dir() and (tests / "eval" / system).is_dir(), system


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("groundstate"):
                offenders += [f"{module} imports {node.module}.{a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert not offenders, "\n".join(offenders)


def test_argparse_is_imported_only_by_the_cli():
    """Settings are typed data (pydantic models); argparse, the command line's parser, never leaves cli/."""
    users = sorted(module for module, path in MODULES.items() if _imports_module(path, "argparse"))
    outside = [m for m in users if not m.startswith("groundstate.cli")]
    assert not outside, outside
    assert "groundstate.cli.options" in users  # the check sees the modules that do import it


def _imports_module(path: Path, name: str) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == name for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == name:
            return True
    return False


def test_the_task_registry_imports_every_system_task_module():
    """The registry reaches its tasks by plain imports (no module names in strings), so following imports gets
    there, and that adds no cycle (checked above)."""
    imported = imports_of("groundstate.eval.tasks")
    for module in ("groundstate.eval.reground.tasks", "groundstate.eval.qa"):
        assert module in imported, module
    assert "importlib" not in MODULES["groundstate.eval.tasks"].read_text()


LIBRARIES = ("dspy", "litellm", "llama_cpp")
PRIVATE_WITHOUT_UNDERSCORE = {"thread_local_overrides", "main_thread_config"}  # DSPy's settings internals
COMPAT = "groundstate.compat"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") or name in PRIVATE_WITHOUT_UNDERSCORE


def _library_module(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] in LIBRARIES


def _chain(node: ast.AST) -> list[str]:
    """``a.b.c`` as ``["a", "b", "c"]`` (empty when the root is not a plain name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def library_internals(source: str) -> list[str]:
    """What ``source`` does with DSPy, LiteLLM or llama-cpp-python that only groundstate.compat may do: import a
    private name or module, read a private attribute, assign to an attribute of a library class or module, or
    override a private method of a library class."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> dotted library path
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library_module(alias.name):
                    bound[(alias.asname or alias.name).split(".")[0]] = alias.asname and alias.name or \
                        alias.name.split(".")[0]
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append(f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _library_module(node.module):
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"imports from {node.module}")
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                if _private(alias.name):
                    found.append(f"imports {node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] in bound and any(_private(part) for part in chain[1:]):
                found.append(f"reads {'.'.join(chain)}")
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in (t for group in targets for t in (group.elts if isinstance(group, ast.Tuple) else [group])):
            chain = _chain(target) if isinstance(target, ast.Attribute) else []
            if chain and chain[0] in bound:
                found.append(f"assigns {'.'.join(chain)}")
        if isinstance(node, ast.ClassDef):
            lib_bases = [".".join([bound[c[0]], *c[1:]]) for c in map(_chain, node.bases) if c and c[0] in bound]
            for base in lib_bases:
                resolved = _resolve(base)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name) \
                            and resolved is not None and hasattr(resolved, item.name):
                        found.append(f"overrides {base}.{item.name}")
    return found


def _resolve(dotted: str):
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


def test_only_the_compat_module_touches_library_internals():
    offenders = [f"{module}: {what}" for module, path in MODULES.items() if module != COMPAT
                 for what in library_internals(path.read_text())]
    assert not offenders, "\n".join(offenders)


def test_the_library_internals_check_catches_each_kind():
    source = """
import dspy
from dspy.clients import _litellm
from dspy.dsp.utils.settings import thread_local_overrides
from dspy.clients.base_lm import BaseLM
import litellm


def f():
    dspy.LM._warn_zero_temp_rollout(None, 0, 1)
    BaseLM.__call__ = f
    dspy.Predict.forward, dspy.Predict.aforward = f, f
    litellm.suppress_debug_info = True

    class Quiet(dspy.LM):
        def _warn_zero_temp_rollout(self, temperature, rollout_id):
            pass

        def _own_helper(self):
            pass
"""
    assert sorted(library_internals(source)) == sorted([
        "imports dspy.clients._litellm", "imports dspy.dsp.utils.settings.thread_local_overrides",
        "reads dspy.LM._warn_zero_temp_rollout", "assigns BaseLM.__call__", "assigns dspy.Predict.forward",
        "assigns dspy.Predict.aforward", "assigns litellm.suppress_debug_info",
        "overrides dspy.LM._warn_zero_temp_rollout"])  # not Quiet._own_helper: DSPy's LM has no such method


def test_every_subpackage_says_what_lives_there():
    for path in ROOT.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert len(doc.split()) >= 12 and "TODO" not in doc, f"{path.relative_to(ROOT.parent)} needs a docstring"


def test_no_file_is_much_over_400_lines_unless_it_says_why():
    long = []
    for module, path in MODULES.items():
        lines = path.read_text().count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > 440 and "one file" not in doc:
            long.append(f"{module}: {lines} lines")
    assert not long, "\n".join(long)
