"""What the commands print that several of them share: the summary table of a run, and :func:`cell`, how text
that came from a file reaches a rich table."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from groundstate.errors import one_line
from groundstate.eval.stats import format_ci


def cell(value: Any, limit: int | None = 200) -> Any:
    """``value`` as a rich ``Text`` for a table cell or title: escaped to one safe line
    (:func:`~groundstate.errors.one_line`: no control, bidi or line-separator character) and never parsed as rich
    markup, so a name such as ``[/x]`` from a file is shown as it is instead of raising ``MarkupError``."""
    from rich.text import Text  # noqa: PLC0415 (--help stays light)

    return Text(one_line(value, limit))


def print_summary(result: Any, console: Any = None, config: Mapping[str, Any] | None = None) -> None:
    """A table of a run's scores with 95% intervals, errors, calls and tokens (a ``RunResult`` or a summary).

    A metric is shown over the records it was measured on, with the count of records it failed on beside it; a
    metric measured on none is "not measured (N failed)" (:func:`~groundstate.eval.stats.format_ci`). The run's
    config (``result.config``, or ``config`` for a bare summary) adds what produced the numbers: the LM, its
    decoding and, for a run with a judge, the T2 judge (:func:`~groundstate.eval.metric_spec.scoring_description`;
    "the model under test judges itself (<model>)" when it did). A hidden-profile run names its agents under the
    table, and a title warns when simulated agents ran on design-default support
    (:mod:`groundstate.eval.consilience.provenance`); runs without an LM (simulated agents) get no LM lines.
    """
    from rich.console import Console  # noqa: PLC0415 (--help stays light)
    from rich.table import Table  # noqa: PLC0415 (--help stays light)

    from groundstate.eval.consilience.provenance import (  # noqa: PLC0415 (--help stays light)
        agents_of,
        describe_agents,
        warned_title,
    )
    from groundstate.eval.metric_spec import scoring_description  # noqa: PLC0415 (--help stays light)

    console = console or Console()
    summary = result.summary if hasattr(result, "summary") else result
    config = getattr(result, "config", None) or config
    config = dict(config) if isinstance(config, Mapping) else {}
    agents = agents_of(config)
    caption = describe_agents(agents, config.get("lm")) if agents else ""
    table = Table(title=cell(warned_title(f"run {summary['run_id']}", agents), None),
                  caption=cell(caption, None) if caption else None, caption_justify="left")
    table.add_column("metric")
    table.add_column("mean [95% CI]", justify="right")
    for name, entry in summary["scores"].items():
        table.add_row(cell(name.replace("_", " ")), format_ci(entry))
    unscored = summary.get("n_score_failed") or 0
    table.add_row("records", f"{summary['n_done']}/{summary['n_selected']} ({summary['n_error']} errors"
                  + (f", {unscored} with metrics not measured)" if unscored else ")"))
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
    capped = summary.get("cost_cap") if isinstance(summary.get("cost_cap"), Mapping) else None
    if capped:  # --max-cost: what this command spent (program and judge calls) against the cap
        from groundstate.eval.cost_cap import usd  # noqa: PLC0415 (--help stays light)

        table.add_row("cost cap (--max-cost)", f"{usd(float(capped.get('spent_usd') or 0))} spent by this command of "
                      f"{usd(float(capped.get('max_usd') or 0))}")
    if isinstance(config.get("lm"), Mapping) and config["lm"].get("model"):
        scoring = scoring_description(config)
        roles = scoring.get("roles") or {}
        table.add_row("LM", cell(scoring["lm"] + (" (per-role: " + ", ".join(f"{k} = {v}" for k, v in roles.items())
                                                  + ")" if roles else "")))
        table.add_row("decoding", cell(scoring["decoding"]))
        if scoring["judge"]:
            table.add_row("T2 judge", cell(scoring["judge"]))
    console.print(table)
    if hasattr(result, "run_dir"):
        console.print(cell(f"stored in {result.run_dir}", None))


def report_failed_runs(summaries: Mapping[str, Mapping[str, Any]]) -> int:
    """For a command that ran several durable runs and reported them all: one line on stderr naming each run
    that failed (stopped by ``--max-error-rate``, ended over it, or every record failed) and exit status 1;
    0, and nothing printed, when none did."""
    failed = {name: s.get("stopped_reason") for name, s in summaries.items() if s.get("stopped_reason")}
    if not failed:
        return 0
    print("groundstate: " + one_line("; ".join(f"{name}: {reason}" for name, reason in failed.items()), None)
          + " (finished records kept; run the same command again to resume)", file=sys.stderr)
    return 1
