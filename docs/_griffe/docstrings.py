"""Griffe extension for the docs build: render groundstate's docstrings as they are written.

groundstate's docstrings are Google style with two habits Griffe's Google parser does not know; this extension
rewrites them in the loaded docstring, before it is parsed (the source files are not changed):

- **Sphinx roles** (``:func:`name```, ``:class:`~pkg.mod.Name```) become *optional* autorefs cross-references: a
  link when the object is rendered somewhere in the site, plain code otherwise (never a broken-reference
  warning). A name without a package path is resolved in the scope of the object whose docstring it is (its
  module's imports included); ``~`` shows only the last component, as in Sphinx.
- **Grouped parameters** (``trainset, valset: ...`` in an ``Args:`` section) become one entry per name, each
  with the shared description, so every name is matched to the signature.
- **reStructuredText literal-block markers**: a paragraph ending in ``::`` ends in ``:`` (the indented block
  after it is a code block in Markdown too).
- **reStructuredText simple tables** (columns framed by ``====  ====`` lines, as in the data-format modules)
  become Markdown tables; a line whose later columns are empty continues the previous row's first cell, and one
  whose first column is empty continues its other cells.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|type):`(?P<target>[^`]+)`")
ARGS_SECTION = re.compile(r"^(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters):\s*$")
GROUPED = re.compile(r"^(?P<indent>\s+)(?P<names>\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)+)"
                     r"(?P<rest>\s*(?:\([^)]*\))?:(?:\s.*)?)$")


RST_BORDER = re.compile(r"^(?P<indent>\s*)=+(?:\s+=+)+\s*$")


def _columns(border: str) -> list[tuple[int, int | None]]:
    """The ``(start, end)`` character span of each column of a simple-table border (the last one open-ended)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", border)]
    return [(start, end if i < len(spans) - 1 else None) for i, (start, end) in enumerate(spans)]


def _cells(line: str, columns: list[tuple[int, int | None]]) -> list[str]:
    return [line[start:end].strip() if end is not None else line[start:].strip() for start, end in columns]


def _markdown_table(rows: list[list[str]], indent: str) -> list[str]:
    def line(cells: list[str]) -> str:
        return indent + "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    header, body = rows[0], rows[1:]
    return [line(header), indent + "|" + "---|" * len(header), *(line(r) for r in body)]


def rst_tables(text: str) -> str:
    """``text`` with every reStructuredText simple table (border, header, border, rows, border) as Markdown."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        top = RST_BORDER.match(lines[i])
        ends = [j for j in range(i + 1, len(lines)) if lines[j].strip() == lines[i].strip()][:2] if top else []
        if len(ends) < 2:
            out.append(lines[i])
            i += 1
            continue
        columns = _columns(lines[i])
        header_end, table_end = ends
        header = [" ".join(part) for part in zip(*(_cells(x, columns) for x in lines[i + 1:header_end]), strict=True)]
        rows: list[list[str]] = []
        for raw in lines[header_end + 1:table_end]:
            if not raw.strip():
                continue
            cells = _cells(raw, columns)
            if rows and not cells[0]:
                rows[-1] = [rows[-1][0], *(f"{a} {b}".strip() for a, b in zip(rows[-1][1:], cells[1:], strict=True))]
            elif rows and not any(cells[1:]):
                rows[-1][0] = f"{rows[-1][0]} {cells[0]}"
            else:
                rows.append(cells)
        if out and out[-1].strip():
            out.append("")
        out.extend(_markdown_table([header, *rows], top["indent"]))
        out.append("")
        i = table_end + 1
    return "\n".join(out)


def _identifier(obj: griffe.Object, name: str) -> str:
    """The full path ``name`` stands for in ``obj``'s scope, or ``name`` itself when it cannot be resolved."""
    head, _, tail = name.partition(".")
    try:
        resolved = obj.resolve(head)
    except (griffe.NameResolutionError, AttributeError, KeyError):
        return name
    return f"{resolved}.{tail}" if tail else resolved


def rewrite_roles(obj: griffe.Object, text: str) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs reference (``<autoref ... optional>``)."""

    def replace(match: re.Match) -> str:
        target = match["target"].strip()
        title = None
        if "<" in target and target.endswith(">"):  # :func:`title <path>`
            title, _, target = target[:-1].partition("<")
            title = title.strip()
        short = target.startswith("~")
        path = target.lstrip("~!.")
        if title is None:
            title = path.rsplit(".", 1)[-1] if short else path
        identifier = _identifier(obj, path)
        return (f'<autoref identifier="{html.escape(identifier)}" optional>'
                f"<code>{html.escape(title)}</code></autoref>")

    return ROLE.sub(replace, text)


def split_grouped_params(text: str) -> str:
    """``text`` with each grouped entry of an arguments section (``a, b: description``) made one entry per name."""
    lines = text.split("\n")
    out: list[str] = []
    in_args, i = False, 0
    while i < len(lines):
        line = lines[i]
        if ARGS_SECTION.match(line):
            in_args = True
        elif line.strip() and not line[:1].isspace():
            in_args = False
        match = GROUPED.match(line) if in_args else None
        if not match:
            out.append(line)
            i += 1
            continue
        indent = len(match["indent"])
        body = [match["rest"]]
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            if not lines[i].strip() and (i + 1 >= len(lines) or
                                         len(lines[i + 1]) - len(lines[i + 1].lstrip()) <= indent):
                break
            body.append(lines[i])
            i += 1
        for name in (n.strip() for n in match["names"].split(",")):
            out.append(match["indent"] + name + body[0])
            out.extend(body[1:])
    return "\n".join(out)


LITERAL_MARKER = re.compile(r"(?<=\S)::$", re.M)


def literal_markers(text: str) -> str:
    """``text`` with each line-final ``::`` after a word (an RST literal-block marker) made a single ``:``."""
    return LITERAL_MARKER.sub(":", text)


class GroundstateDocstrings(griffe.Extension):
    """Rewrite roles, grouped parameters, tables and literal markers in every docstring (see the module docstring)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        obj.docstring.value = literal_markers(rst_tables(split_grouped_params(rewrite_roles(obj, obj.docstring.value))))
