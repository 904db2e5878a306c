"""The dependency order of DESIGN.md: records/lm -> signatures -> programs -> optimizers -> eval -> cli."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "groundstate"
LEVELS = {"errors": 0, "files": 0, "registry": 0, "records": 0, "lm": 0, "lm_cache": 0, "lm_faults": 0,
          "concurrency": 0, "testing": 0, "metering": 0,
          "signatures": 1, "scoring": 1, "simulate": 1, "programs": 2, "optimizers": 3, "eval": 4, "cli": 5}


def level(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "groundstate" or len(parts) == 1:
        return None
    head = parts[1]
    return LEVELS.get(head, LEVELS.get(head.split("_")[0] if head.startswith("cli") else head))


def test_no_module_imports_a_later_layer():
    violations = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        own = level(name)
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                other = level(target)
                if other is not None and other > own:
                    violations.append(f"{name} imports {target}")
    assert not violations, "\n".join(sorted(set(violations)))
