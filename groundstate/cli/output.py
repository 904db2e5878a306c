"""What the commands print that several of them share: the summary table of a run, and :func:`cell`, how text
that came from a file reaches a rich table."""

from __future__ import annotations

from typing import Any


def cell(value: Any, limit: int | None = 200) -> Any:
    """``value`` as a rich ``Text`` for a table cell or title: escaped to one safe line
    (:func:`~groundstate.errors.one_line`: no control, bidi or line-separator character) and never parsed as rich
    markup, so a name such as ``[/x]`` from a file is shown as it is instead of raising ``MarkupError``."""
    from rich.text import Text

    from groundstate.errors import one_line

    return Text(one_line(value, limit))


def print_summary(result: Any, console: Any = None) -> None:
    """A table of a run's scores with 95% intervals, errors, calls and tokens (a ``RunResult`` or a summary)."""
    from rich.console import Console
    from rich.table import Table

    from groundstate.eval.stats import format_ci

    console = console or Console()
    summary = result.summary if hasattr(result, "summary") else result
    table = Table(title=cell(f"run {summary['run_id']}"))
    table.add_column("metric")
    table.add_column("mean [95% CI]", justify="right")
    for name, entry in summary["scores"].items():
        table.add_row(cell(name.replace("_", " ")), format_ci(entry))
    table.add_row("records", f"{summary['n_done']}/{summary['n_selected']} ({summary['n_error']} errors)")
    cached = summary["lm_calls"].get("cached", 0)
    failed = summary["lm_calls"].get("failed", 0)
    notes = [f"{cached} of {summary['lm_calls']['total']} from cache"] if cached else []
    notes += [f"{failed} of {summary['lm_calls']['total']} failed"] if failed else []
    table.add_row("LM calls / record", f"{summary['lm_calls']['per_record']:.1f}"
                  + (f" ({'; '.join(notes)})" if notes else ""))
    table.add_row("tokens / record", f"{summary['tokens']['per_record']:.0f}")
    table.add_row("tokens total (in/out)", f"{summary['tokens']['input']}/{summary['tokens']['output']}")
    cost = summary.get("cost_usd") or {}
    if cost.get("total") is not None:
        unpriced = cost.get("unpriced_records") or 0
        table.add_row("cost (USD, cache hits excluded)", f"${cost['total']:.4f}"
                      + (f" ({unpriced} records unpriced)" if unpriced else ""))
    judge = ((getattr(result, "config", None) or {}).get("options") or {}).get("judge")
    if judge:
        table.add_row("T2 judge", cell(judge))
    console.print(table)
    if hasattr(result, "run_dir"):
        console.print(cell(f"stored in {result.run_dir}", None))
