"""Every ```python snippet of README.md runs, offline, with the scripted LM.

A snippet that cannot run offline says so on a line of its own, ``# needs: hosted LM`` (or ``network``, ...),
and is skipped with that reason; every other snippet must run. ``gs.configure(...)`` is replaced by the
scripted LM, so a snippet that configures the embedded or a hosted model still runs here.
"""

import re
from pathlib import Path

import dspy
import pytest

import groundstate
from groundstate.testing import scripted_lm

README = Path(__file__).resolve().parents[1] / "README.md"
NEEDS = re.compile(r"^\s*#\s*needs:\s*(.+?)\s*$", re.M)


def snippets() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    found = [(text[:m.start()].count("\n") + 2, m.group(1))
             for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]
    assert found, "README.md has no python snippet"
    return found


@pytest.mark.parametrize(("line", "code"), snippets(), ids=lambda v: f"line{v}" if isinstance(v, int) else "")
def test_readme_snippet_runs(line, code, tmp_path, monkeypatch, capsys):
    need = NEEDS.search(code)
    if need:
        pytest.skip(f"README.md line {line}: needs {need.group(1)}")
    monkeypatch.chdir(tmp_path)
    lm = scripted_lm()

    def configure(spec="embedded", *args, **kwargs):  # the dspy.context below already holds the scripted LM
        return lm

    monkeypatch.setattr(groundstate, "configure", configure, raising=False)
    monkeypatch.setitem(groundstate.__dict__, "configure", configure)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        exec(compile(code, f"README.md:{line}", "exec"), {"__name__": f"readme_line_{line}"})
    assert lm.engine.calls > 0  # the snippet really ran programs on the LM
