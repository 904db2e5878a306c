"""Comparison reports: one row per program (or setting), T1/T2/T3 with 95% intervals, tokens and calls.

:func:`comparison_rows` turns run summaries into rows; :func:`markdown_table` renders them;
:func:`write_report` writes ``compare.md``, ``compare.json`` and, when matplotlib is installed,
``compare.png`` (a bar chart of T1/T2/T3 with their intervals and of tokens per instance).
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.eval.stats import format_ci

logger = logging.getLogger(__name__)

METRICS = ("t1", "t2", "t3")
LABELS = {"t1": "T1", "t2": "T2", "t3": "T3", "t2_retention": "T2 retention", "t2_exclusion": "T2 exclusion"}


def label(metric: str) -> str:
    """How a metric is headed in tables and charts (``t2_retention`` -> ``T2 retention``)."""
    return LABELS.get(metric, metric.replace("_", " "))


def comparison_rows(summaries: Mapping[str, Mapping[str, Any]], metrics: Sequence[str] = METRICS,
                    notes: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per named run summary: the metrics' CI entries, tokens and calls per instance, errors."""
    rows = []
    for name, summary in summaries.items():
        scores = summary.get("scores", {})
        rows.append({
            "name": name,
            "n": summary.get("n_done", 0),
            "errors": summary.get("n_error", 0),
            **{m: scores.get(m) for m in metrics},
            "tokens_per_instance": summary.get("tokens", {}).get("per_record", 0.0),
            "calls_per_instance": summary.get("lm_calls", {}).get("per_record", 0.0),
            "cached_calls": summary.get("lm_calls", {}).get("cached", 0),
            "run_id": summary.get("run_id"),
            "note": (notes or {}).get(name, ""),
        })
    return rows


def table_cells(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = METRICS
                ) -> tuple[list[str], list[list[str]]]:
    """The comparison table as text: ``(header, one list of cells per row)``, shared by the Markdown file and
    the terminal table. Tokens of a run served (partly) from DSPy's cache are marked: cached calls bill none."""
    header = ["program", *(label(m) for m in metrics), "tokens/inst.", "calls/inst.", "n", "errors"]
    body = []
    for row in rows:
        name = row["name"] + (f" ({row['note']})" if row.get("note") else "")
        tokens = f"{row['tokens_per_instance']:.0f}"
        if row.get("cached_calls"):
            tokens += f" ({row['cached_calls']} calls cached, not billed)"
        body.append([name, *(format_ci(row.get(m)) for m in metrics), tokens,
                     f"{row['calls_per_instance']:.1f}", str(row["n"]), str(row["errors"])])
    return header, body


def pipe_lines(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown (pipe) table's lines: the header, the rule, one line per row of cells."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(c) + " |" for c in body)]


def markdown_table(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = METRICS,
                   title: str | None = None, subtitle: str = "", notes: Sequence[str] = ()) -> str:
    """A Markdown table: program, each metric as ``mean [low, high]``, tokens/calls per instance, errors; the
    ``subtitle`` (what produced the figures, e.g. the agents) is a line under the title, and ``notes`` (LM,
    decoding, judge) are listed between it and the table."""
    header, body = table_cells(rows, metrics)
    lines = [f"### {title}", ""] if title else []
    lines += [subtitle, ""] if subtitle else []
    if notes:
        lines += [*(f"- {note}" for note in notes), ""]
    return "\n".join([*lines, *pipe_lines(header, body)]) + "\n"


def no_data_note(ax: Any, text: str = "no data") -> None:
    """Say in the middle of a chart panel that it has nothing to show, instead of leaving a blank frame."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")


def mark_unscored(ax: Any, rows: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> None:
    """Write "no data" over each group of bars whose metrics all lack a mean (drawn at 0, which is not a score)."""
    for x, row in enumerate(rows):
        if all((row.get(m) or {}).get("mean") is None for m in metrics):
            ax.text(x, 0.02, "no data", ha="center", va="bottom", color="grey", fontsize=8)


def has_tokens_panel(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the chart gets a tokens panel: some run billed tokens or was served from DSPy's cache. Runs of
    simulated agents call no LM, and an all-zero panel would say nothing."""
    return any(r.get("tokens_per_instance") or r.get("cached_calls") for r in rows)


def legend_above(ax: Any, ncol: int, fontsize: float = 8) -> Any:
    """A legend for ``ax`` centred just above its top edge, outside the axes, so it never covers a bar, an error bar
    or a tick label; pass it to :func:`fit_title` (``legend=``) so the title is placed above it.

    Guarantees: at most ``ncol`` columns, fewer (down to one) while the legend, as the renderer draws it, is wider
    than the axes, so laying the figure out never squeezes the plot to make room for it."""
    renderer = ax.figure.canvas.get_renderer()
    width = ax.get_window_extent(renderer).width
    for columns in range(max(1, ncol), 0, -1):
        legend = ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=columns, fontsize=fontsize,
                           frameon=False)
        if legend.get_window_extent(renderer).width <= width:
            break
    return legend


def fit_title(fig: Any, ax: Any, title: str, subtitle: str = "", legend: Any = None, **kwargs: Any) -> Any:
    """Give ``ax`` the title ``title`` with ``subtitle`` on the line(s) under it, and lay ``fig`` out
    (``tight_layout``).

    Guarantees: the title's lines are wrapped at spaces (a word longer than a line is broken) until the whole
    title's bounding box, as the figure's renderer draws it, lies within the figure's width (tried up to 12 times,
    each after laying the figure out again); the figure grows by the height of every line beyond the first, so
    the plot keeps its height. With ``legend`` (one placed above the axes, :func:`legend_above`) the title's pad is
    the legend's measured height plus a gap, so the title sits above the legend instead of on it. ``kwargs`` go to
    ``ax.set_title`` (``fontsize``, ``pad``).

    Returns:
        The title's matplotlib ``Text``.
    """

    parts = [part for part in (title, subtitle) if part]
    renderer = fig.canvas.get_renderer()
    if legend is not None:  # the legend's top above the axes (in points, whatever the layout) and a gap
        above = legend.get_window_extent(renderer).y1 - ax.get_window_extent(renderer).y1
        kwargs["pad"] = max(0.0, above) * 72 / fig.dpi + 8
    text = ax.set_title("\n".join(parts), **kwargs)
    width = max((len(part) for part in parts), default=0)

    def wrap() -> None:
        nonlocal width
        fig.tight_layout()
        for _ in range(12):
            box, right = text.get_window_extent(renderer), fig.bbox.width
            if box.x0 >= 0 and box.x1 <= right or box.width <= 0:
                return
            centre = (box.x0 + box.x1) / 2
            room = 2 * max(0.0, min(centre, right - centre)) * 0.97
            width = max(8, min(width - 1, int(width * room / box.width)))
            text.set_text("\n".join(textwrap.fill(part, width) for part in parts))
            fig.tight_layout()

    wrap()
    extra = text.get_text().count("\n")
    if extra:
        fig.set_figheight(fig.get_figheight() + extra * 1.2 * text.get_fontsize() / 72)
        wrap()
    return text


def comparison_figure(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str] = METRICS,
                      title: str | None = None, subtitle: str = ""):
    """The comparison chart as a matplotlib figure (``compare.png``: ReGround and its baselines, T1/T2/T3 per
    program at one condition): the metrics with 95% intervals, each measured bar labelled with its value (so a
    measured 0 reads 0.00) and each program with its number of records; "not measured" where a metric has no mean
    (never a bar at 0), "no data" over a program with no metric at all, and a note under the axes when a bar has
    no interval (n < 2). When any run used an LM, a second panel shows tokens per instance (a run served from
    cache is marked "cached"). The legend sits above the axes (never over a bar) and the title (``subtitle``
    under it) is wrapped to fit the figure (:func:`fit_title`)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)

    names = [r["name"] for r in rows]
    tokens_panel = has_tokens_panel(rows)
    if tokens_panel:
        fig, (ax, ax_tokens) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(rows) + 6), 4.2),
                                            gridspec_kw={"width_ratios": [3, 1.4]})
    else:
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows) + 3), 4.2))
    width = 0.8 / max(1, len(metrics))
    x = np.arange(len(rows))
    scored = no_interval = False
    for k, metric in enumerate(metrics):
        means, low_err, high_err = [], [], []
        for row in rows:
            entry = row.get(metric) or {}
            mean = entry.get("mean")
            scored = scored or mean is not None
            means.append(mean if mean is not None else 0.0)
            low, high = entry.get("low"), entry.get("high")
            no_interval = no_interval or (mean is not None and (low is None or high is None))
            # no interval: no whisker at all (a zero-length one would draw a cap that reads as a value)
            low_err.append(max(0.0, (mean or 0) - low) if low is not None else np.nan)
            high_err.append(max(0.0, high - (mean or 0)) if high is not None else np.nan)
        positions = x + (k - (len(metrics) - 1) / 2) * width
        ax.bar(positions, means, width, yerr=[low_err, high_err], capsize=3, label=label(metric))
        for pos, row, mean, up in zip(positions, rows, means, high_err, strict=True):
            entry = row.get(metric) or {}
            if entry.get("mean") is not None:  # the value written over its bar: a measured 0 is seen as 0.00
                ax.text(pos, mean + np.nan_to_num(up) + 0.015, f"{mean:.2f}", ha="center", va="bottom", fontsize=7)
            elif entry.get("failed") or any((row.get(m) or {}).get("mean") is not None for m in metrics):
                # a metric measured on nothing is no bar at 0
                ax.text(pos, 0.02, "not measured", rotation=90, ha="center", va="bottom", color="grey", fontsize=6)
    ax.set_xticks(x, [f"{name}\n(n={row.get('n', 0)})" for name, row in zip(names, rows, strict=True)],
                  rotation=20, ha="right")
    ax.set_ylim(0, 1.15)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("score (95% CI)")
    if no_interval:
        ax.set_xlabel("a bar without whiskers has no interval (fewer than 2 records)", fontsize=7, color="grey")
    legend = None
    if scored:
        legend = legend_above(ax, len(metrics))  # above the axes: never over a bar or its error bar
        mark_unscored(ax, rows, metrics)
    else:
        no_data_note(ax)
    if tokens_panel:
        ax_tokens.bar(x, [r["tokens_per_instance"] for r in rows], color="grey")
        for i, row in enumerate(rows):
            if row.get("cached_calls"):
                ax_tokens.annotate(f"cached, not billed\n({row['cached_calls']} calls)",
                                   (i, row["tokens_per_instance"]), ha="center", va="bottom", fontsize=7)
        ax_tokens.set_xticks(x, names, rotation=20, ha="right")
        ax_tokens.set_title("tokens per instance (cached calls bill none)"
                            if any(r.get("cached_calls") for r in rows) else "tokens per instance", fontsize=9)
        ax_tokens.margins(y=0.25)
    else:
        fig.text(0.99, 0.01, "no LM tokens (simulated agents)", ha="right", va="bottom", fontsize=8, color="grey")
    fit_title(fig, ax, title or "OffQuery", subtitle, legend=legend)
    return fig


def bar_chart(rows: Sequence[Mapping[str, Any]], path: str | Path, metrics: Sequence[str] = METRICS,
              title: str | None = None, subtitle: str = "") -> bool:
    """Write a PNG of :func:`comparison_figure`; ``False`` without matplotlib."""
    try:
        import matplotlib  # noqa: PLC0415 (optional extra: plot)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)
    except ImportError:
        logger.warning("matplotlib is not installed (pip install 'groundstate[plot]'); no chart written")
        return False
    fig = comparison_figure(rows, metrics, title, subtitle)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_report(rows: Sequence[Mapping[str, Any]], out_dir: str | Path, config: Mapping[str, Any] | None = None,
                 metrics: Sequence[str] = METRICS, title: str | None = None, stem: str = "compare",
                 chart_metrics: Sequence[str] | None = None, subtitle: str = "",
                 notes: Sequence[str] = (), sections: Sequence[str] = (),
                 extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Write ``<stem>.md``, ``<stem>.json`` and ``<stem>.png`` (bars of ``chart_metrics``, default ``metrics``;
    they should be shares in [0, 1]); return their paths. ``subtitle`` (what produced the figures) goes under the
    title of the Markdown and the chart, ``notes`` (LM, decoding, judge) under the Markdown's title; ``sections``
    (Markdown text) follow the table, each after a blank line, and ``extra`` adds keys beside the JSON's ``config``
    and ``rows``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": str(out_dir / f"{stem}.md"), "json": str(out_dir / f"{stem}.json")}
    markdown = "\n".join([markdown_table(rows, metrics, title, subtitle, notes), *(s for s in sections if s)])
    Path(paths["markdown"]).write_text(markdown, encoding="utf-8")
    document = {**dict(extra or {}), "config": dict(config or {}), "rows": list(rows)}
    Path(paths["json"]).write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    if bar_chart(rows, out_dir / f"{stem}.png", chart_metrics or metrics, title, subtitle):
        paths["chart"] = str(out_dir / f"{stem}.png")
    return paths
