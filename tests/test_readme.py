"""Every ```python snippet of README.md and of the documentation pages (docs/**/*.md) runs, offline, with the
scripted LM; the Python API pages render the whole public API.

A snippet that cannot run offline says so on a line of its own, ``# needs: hosted LM`` (or ``network``, ...),
and is skipped with that reason; every other snippet must run. ``gs.configure(...)`` is replaced by the
scripted LM, so a snippet that configures the embedded or a hosted model still runs here. A snippet must make
at least one LM call, unless it says ``# no LM call`` on a line of its own (simulated agents, data, runs of a
plain function).
"""

import importlib
import re
from pathlib import Path

import dspy
import pytest

import groundstate
from groundstate.testing import scripted_lm

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NEEDS = re.compile(r"^\s*#\s*needs:\s*(.+?)\s*$", re.M)
NO_LM_CALL = re.compile(r"^\s*#\s*no LM call\b", re.M)
API_REFERENCE = re.compile(r"^:::\s+(\S+)\s*$", re.M)


def pages() -> list[Path]:
    """README.md and every Markdown page of the documentation site."""
    found = sorted(DOCS.rglob("*.md"))
    assert found, "docs/ has no page"
    return [README, *found]


def snippets() -> list[tuple[str, int, str]]:
    """``(page, line, code)`` for every ```python block of :func:`pages` (``line``: the code's first line)."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix()
        found += [(name, text[:m.start()].count("\n") + 2, m.group(1))
                  for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]
    assert any(page == "README.md" for page, _, _ in found), "README.md has no python snippet"
    return found


@pytest.mark.parametrize(("page", "line", "code"), snippets(),
                         ids=[f"{page}:{line}" for page, line, _ in snippets()])
def test_snippet_runs(page, line, code, tmp_path, monkeypatch, capsys):
    need = NEEDS.search(code)
    if need:
        pytest.skip(f"{page} line {line}: needs {need.group(1)}")
    monkeypatch.chdir(tmp_path)
    lm = scripted_lm()

    def configure(spec="embedded", *args, **kwargs):  # the dspy.context below already holds the scripted LM
        return lm

    assert groundstate.configure  # load the lazy attribute, so undoing the patch restores the real function
    monkeypatch.setitem(groundstate.__dict__, "configure", configure)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        exec(compile(code, f"{page}:{line}", "exec"), {"__name__": f"snippet_{line}"})
    if not NO_LM_CALL.search(code):
        assert lm.engine.calls > 0, f"{page} line {line}: the snippet made no LM call (say '# no LM call' if so)"


def resolve(path: str):
    """The object a ``::: path`` line renders (the longest importable module prefix, then attributes)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise AssertionError(f"docs/api: '{path}' names no module")


def test_every_public_name_is_in_the_python_api_pages():
    """Each name of ``groundstate.__all__`` is rendered (``::: module.name``) on one of the docs/api pages."""
    rendered = []
    for page in (DOCS / "api").glob("*.md"):
        rendered += [resolve(path) for path in API_REFERENCE.findall(page.read_text(encoding="utf-8"))]
    missing = [name for name in groundstate.__all__ if name != "__version__"
               and not any(getattr(groundstate, name) is obj for obj in rendered)]
    assert not missing, f"public names missing from docs/api/*.md: {missing}"


def test_every_page_is_in_the_site_navigation():
    """mkdocs --strict refuses a page left out of ``nav``; this says which one without building the site."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"([\w/.-]+\.md)\s*$", nav, re.M))
    missing = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
               if p.relative_to(DOCS).as_posix() not in listed]
    assert not missing, f"pages missing from mkdocs.yml nav: {missing}"


def test_the_readme_links_to_pages_that_exist():
    """README.md is read on GitHub, outside the site's --strict build: its relative links are checked here."""
    text = README.read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert any(t.startswith("docs/") for t in targets)
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
