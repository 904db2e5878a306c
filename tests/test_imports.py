"""Imports sit at the top of their module; one inside a function says why (issue 23, "cut what is not earned").

ruff's PLC0415 (enabled for groundstate/ in pyproject.toml) fails lint on an import inside a function unless the
line carries ``# noqa: PLC0415 (<reason>)``. These tests keep the reasons honest: every such noqa names one of the
four reasons an import may stay inside a function, and a bare ``# noqa`` cannot switch the rule off unexplained.

The reasons:

- ``heavy: <package>``: importing the package would add tens to hundreds of ms (measured with
  ``python -X importtime``) to importing the module, which does not otherwise load it (dspy, scipy, scikit-learn,
  skops, datasets, pyarrow, pandas, litellm);
- ``optional extra: <extra>``: the package comes with an optional extra of pyproject.toml (``local``, ``plot``,
  ``ray``, ``trace``) and may not be installed;
- ``cycle: <a><-><b>``: the import would close an import cycle between two modules;
- ``--help stays light``: the module is imported by every ``groundstate`` command (``--help`` included) and the
  imported module is not, so the import waits for the command that needs it.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "groundstate"
HEAVY = ("dspy", "scipy", "scikit-learn", "skops", "datasets", "pyarrow", "pandas", "litellm")
EXTRAS = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
REASON = re.compile(r"# noqa: PLC0415 \((?P<reason>heavy: (?P<heavy>[\w-]+)|optional extra: (?P<extra>[\w-]+)"
                    r"|cycle: [\w.]+<->[\w.]+|--help stays light)\)")


def _comments(source: str) -> dict[int, str]:
    """The comment on each line of ``source`` (by line number)."""
    return {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


def unexplained(source: str) -> list[str]:
    """What is wrong with the function-level imports of ``source`` and its PLC0415 noqa comments: a noqa without
    one of the allowed reasons (or naming a package or extra that is not one), a blanket ``# noqa`` on an import
    inside a function, or a PLC0415 noqa on an import at the top of the module (a reason for nothing)."""
    comments = _comments(source)
    problems = []
    nested: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            nested |= {sub.lineno for sub in ast.walk(node) if isinstance(sub, ast.Import | ast.ImportFrom)}
    for line, comment in sorted(comments.items()):
        if "PLC0415" in comment:
            match = REASON.search(comment)
            if match is None:
                problems.append(f"line {line}: {comment!r} gives no allowed reason")
            elif match["heavy"] and match["heavy"] not in HEAVY:
                problems.append(f"line {line}: {match['heavy']!r} is not one of the heavy packages {HEAVY}")
            elif match["extra"] and match["extra"] not in EXTRAS:
                problems.append(f"line {line}: {match['extra']!r} is not an optional extra {EXTRAS}")
            elif line not in nested:
                problems.append(f"line {line}: a PLC0415 reason on an import that is not inside a function")
        elif line in nested and re.search(r"#\s*noqa(?!:)", comment, re.I):
            problems.append(f"line {line}: a blanket {comment!r} on an import inside a function")
    return problems


def test_every_import_inside_a_function_says_why():
    found = {str(path.relative_to(ROOT)): unexplained(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}
    bad = [f"{path} {problem}" for path, problems in found.items() for problem in problems]
    assert not bad, "\n".join(bad)


def test_the_check_refuses_a_bare_or_made_up_reason():
    source = ("import os  # noqa: PLC0415 (heavy: dspy)\n\n\n"
              "def f():\n"
              "    import json  # noqa: PLC0415\n"
              "    import csv  # noqa: PLC0415 (it is nicer here)\n"
              "    import sys  # noqa\n"
              "    import dspy  # noqa: PLC0415 (heavy: numpy)\n"
              "    import ray  # noqa: PLC0415 (optional extra: rays)\n"
              "    import scipy  # noqa: PLC0415 (heavy: scipy)\n"
              "    from a import b  # noqa: PLC0415 (cycle: a<->c)\n"
              "    import rich  # noqa: PLC0415 (--help stays light)\n"
              "    import matplotlib  # noqa: PLC0415 (optional extra: plot)\n"
              "    return os, json, csv, sys, dspy, ray, scipy, b, rich, matplotlib\n")
    problems = unexplained(source)
    assert [p.split(":")[0] for p in problems] == ["line 1", "line 5", "line 6", "line 7", "line 8", "line 9"]


def test_lint_enforces_the_rule_on_the_package():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert "PLC0415" in lint["select"]
    ignored = {pattern for pattern, codes in lint.get("per-file-ignores", {}).items() if "PLC0415" in codes}
    assert not any(pattern.startswith("groundstate") for pattern in ignored), ignored
