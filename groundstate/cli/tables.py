"""Terminal tables: every table a command prints goes through :func:`print_table` (a rich ``Table``).

Files a command writes (Markdown, JSON) keep their own formats; this is only what a person reads in the
terminal. Headers are written for people (``task accuracy``, not ``task_accuracy`` or ``TASK_ACCURACY``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from groundstate.cli.output import cell
from groundstate.errors import one_line
from groundstate.eval.report import table_cells

WIDTH_OFF_TTY = 220
"""Width of a console that is not a terminal (a pipe, a log file, a test), so tables are not squeezed to 80."""


def human(key: str) -> str:
    """A column key as a header: ``task_accuracy`` or ``TASK_ACCURACY`` -> ``task accuracy``; short symbols such as
    ``K`` or ``W+`` stay as they are."""
    key = str(key)
    text = key.replace("_", " ").strip()
    return text.lower() if "_" in key and text.isupper() else text


def console(width: int | None = None) -> Any:
    """A rich console on stdout, wide enough off a terminal."""
    if width is None and not sys.stdout.isatty():
        width = WIDTH_OFF_TTY
    return Console(width=width)


def print_table(rows: Sequence[Mapping[str, Any] | Sequence[Any]], columns: Sequence[str] | None = None,
                title: str | None = None, out: Any = None, headers: Sequence[str] | None = None,
                caption: str | None = None) -> None:
    """Print ``rows`` as a rich table.

    Args:
        rows: dicts (cells read by ``columns``, default the first row's keys) or sequences of cells.
        columns: the keys to show, in order.
        title: shown above the table.
        out: a rich ``Console`` (default :func:`console`).
        headers: the headers as shown (default ``human(column)``).
        caption: shown under the table (what produced the figures, e.g. the agents), wrapped to its width.
    """
    if columns is None:
        first = rows[0] if rows else {}
        columns = list(first.keys()) if isinstance(first, Mapping) else [str(i) for i in range(len(first))]
    table = Table(title=None if title is None else cell(title, None), title_justify="left",
                  caption=cell(caption, None) if caption else None, caption_justify="left")
    texts = [["-" if c is None else one_line(c, None)
              for c in ([row.get(c) for c in columns] if isinstance(row, Mapping) else list(row))] for row in rows]
    for i, column in enumerate(columns):
        header = headers[i] if headers else human(column)
        # the first column names the row: it keeps its width (up to 40) and the value columns fold instead
        widest = max([len(header), *(len(cells[0]) for cells in texts if cells)]) if i == 0 else None
        table.add_column(cell(header, None), justify="left" if i == 0 else "right", no_wrap=i == 0, overflow="fold",
                         min_width=min(widest, 40) if widest else None)
    for cells in texts:
        table.add_row(*(Text(c) for c in cells))  # file text: never parsed as markup
    (out or console()).print(table)


def print_comparison(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], title: str | None = None,
                     out: Any = None, caption: str | None = None, notes: Sequence[str] = ()) -> None:
    """The comparison table of :func:`groundstate.eval.report.table_cells` (the one ``compare.md`` holds), with
    ``notes`` (the LM, decoding and judge behind it) printed above it and ``caption`` under it."""

    out = out or console()
    for note in notes:
        out.print(cell(note, None))
    header, body = table_cells(rows, metrics)
    print_table(body, columns=header, headers=header, title=title, out=out, caption=caption)
