"""The Consilience paper's Tables 1 and 2 from stored runs: one row per method, task accuracy / vote accuracy.

Table 1 (HiddenBench) and Table 2 (the generated travel benchmark) report, per method, task accuracy / vote
accuracy (§4.2: task accuracy over tasks; vote accuracy pooled over every agent's final vote). We add what a
reader needs to weigh them: 95% intervals (Wilson for both proportions), the number of tasks, and the mean
messages and words per discussion, with LM calls per task.

Methods appear in the paper's order: Hidden-Pre, Hidden-Post, Full-Info, then the controllers (Rules, MLP,
LLM, LLM+Vote) and anything else. Under the HiddenBench preset, Hidden-Pre is read from the initial votes of
the Hidden-Post run itself (as HiddenBench records both in one discussion), so the two are paired.

:func:`rows_from_runs` builds the rows from the runner's per-task rows; :func:`write_table` writes Markdown, JSON
and (with matplotlib) a PNG bar chart with the intervals (:func:`table_figure`). Each of them carries what
produced the figures (:mod:`groundstate.eval.consilience.provenance`): the agents under the title, and, for
simulated agents on design-default support, the warning in the title; the sensitivity rows of
:mod:`groundstate.eval.consilience.sensitivity` follow the table when given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundstate.eval.consilience.metrics import pooled_vote_accuracy
from groundstate.eval.report import mark_unscored, no_data_note
from groundstate.eval.results import write_json
from groundstate.eval.stats import format_ci, mean_ci, wilson_ci

ORDER: tuple[str, ...] = ("Hidden-Pre", "Hidden-Post", "Full-Info", "Rules", "MLP", "LLM", "LLM+Vote")
CONTROLLER_NAMES: dict[str, str] = {"rules": "Rules", "mlp": "MLP", "llm": "LLM", "llm+vote": "LLM+Vote"}


def _scores(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    """The measured values of ``key`` (a discussion that failed has none: it is counted apart, never as 0)."""
    return [float(v) for r in rows if (v := (r.get("scores") or {}).get(key)) is not None]


def _failed(rows: Sequence[Mapping[str, Any]], key: str) -> int:
    return sum(1 for r in rows if key in (r.get("score_errors") or {}))


def method_row(method: str, rows: Sequence[Mapping[str, Any]], initial: bool = False,
               note: str = "") -> dict[str, Any]:
    """One table row from a run's per-task rows (``initial``: score the run's initial votes instead). Every
    figure is over the discussions that finished; ``task_accuracy`` carries how many failed (``failed``)."""
    prefix = "initial_" if initial else ""
    hits = _scores(rows, f"{prefix}task_accuracy")
    messages = [0.0] * len(hits) if initial else _scores(rows, "messages")
    words = [0.0] * len(hits) if initial else _scores(rows, "words")
    calls = [float(r.get("lm_calls") or 0) for r in rows]
    return {
        "method": method,
        "n": len(rows),
        "errors": sum(1 for r in rows if r.get("error")),
        "task_accuracy": {**wilson_ci(int(round(sum(hits))), len(hits)),
                          "failed": _failed(rows, f"{prefix}task_accuracy")},
        "vote_accuracy": pooled_vote_accuracy(rows, prefix=prefix),
        "messages": mean_ci(messages),
        "words": mean_ci(words),
        "lm_calls_per_task": sum(calls) / len(rows) if rows else 0.0,
        "note": note,
    }


def ordered(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in the paper's order (others after, as given)."""
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r["method"].split(" ")[0], len(ORDER)), rows.index(r)))


def _pair(row: Mapping[str, Any]) -> str:
    task, vote = row["task_accuracy"]["mean"], row["vote_accuracy"]["mean"]
    if task is not None and vote is not None:
        return f"{task:.3f} / {vote:.3f}"
    failed = row["task_accuracy"].get("failed") or 0
    return f"not measured ({failed} failed)" if failed else "n/a"


def _mean(entry: Mapping[str, Any] | None, digits: int) -> str:
    return "-" if not entry or entry.get("mean") is None else f"{entry['mean']:.{digits}f}"


HEADER: tuple[str, ...] = ("Method", "Task Acc. / Vote Acc.", "task acc. 95% CI", "vote acc. 95% CI", "messages",
                           "words", "LM calls/task", "n", "errors")


def table_cells(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Each row's cells under :data:`HEADER` (shared by the Markdown file and the terminal table)."""
    body = []
    for row in rows:
        name = row["method"] + (f" ({row['note']})" if row.get("note") else "")
        body.append([name, _pair(row), format_ci(row["task_accuracy"]), format_ci(row["vote_accuracy"]),
                     _mean(row["messages"], 2), _mean(row["words"], 1),
                     f"{row['lm_calls_per_task']:.1f}", str(row["n"]), str(row["errors"])])
    return body


def markdown(rows: Sequence[Mapping[str, Any]], title: str, subtitle: str = "") -> str:
    """Table 1/2's layout in Markdown: task / vote accuracy first, then the intervals, size and cost; ``subtitle``
    (the agents) is the line under the title."""
    lines = [f"### {title}", "", *([subtitle, ""] if subtitle else []), "| " + " | ".join(HEADER) + " |",
             "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_cells(rows)]
    return "\n".join(lines) + "\n"


def write_table(rows: Sequence[dict[str, Any]], directory: str | Path, title: str, stem: str = "table",
                config: Mapping[str, Any] | None = None, png: bool = True,
                provenance: Mapping[str, Any] | None = None,
                sensitivity: Sequence[Mapping[str, Any]] | None = None) -> dict[str, str]:
    """Write ``<stem>.md``, ``<stem>.json`` and (``png``, when matplotlib is installed) ``<stem>.png``.

    Args:
        provenance: :func:`~groundstate.eval.consilience.provenance.provenance` of the agents: its ``agents``
            label goes under the title of the Markdown and the chart, the whole mapping into the JSON (the title
            should already carry its warning, :func:`~groundstate.eval.consilience.provenance.warned_title`).
        sensitivity: rows of :func:`~groundstate.eval.consilience.sensitivity.sensitivity_rows`, written after the
            table in the Markdown and under ``sensitivity`` in the JSON.
    """
    from groundstate.eval.consilience.sensitivity import holds_line, sensitivity_markdown  # noqa: PLC0415 (--help stays light)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    subtitle = (provenance or {}).get("agents") or ""
    paths = {"md": str(directory / f"{stem}.md"), "json": str(directory / f"{stem}.json")}
    text = markdown(rows, title, subtitle)
    document: dict[str, Any] = {"title": title, "provenance": dict(provenance or {}), "config": dict(config or {}),
                                "rows": list(rows)}
    if sensitivity:
        text += "\n" + sensitivity_markdown(sensitivity, subtitle)
        document["sensitivity"] = {"rows": list(sensitivity), "conclusion": holds_line(sensitivity)}
    Path(paths["md"]).write_text(text, encoding="utf-8")
    write_json(paths["json"], document)
    if png:
        try:
            paths["png"] = _chart(rows, directory / f"{stem}.png", title, subtitle)
        except ImportError:
            pass
    return paths


def _chart(rows: Sequence[Mapping[str, Any]], path: Path, title: str, subtitle: str = "") -> str:
    import matplotlib  # noqa: PLC0415 (optional extra: plot)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)

    fig = table_figure(rows, title, subtitle)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def table_figure(rows: Sequence[Mapping[str, Any]], title: str, subtitle: str = ""):
    """The chart of the table as a matplotlib figure: task and vote accuracy per method with their 95% intervals;
    the title, with ``subtitle`` under it, wrapped to lie inside the figure
    (:func:`~groundstate.eval.report.fit_title`)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)

    from groundstate.eval.report import fit_title, legend_above  # noqa: PLC0415 (--help stays light)

    names = [r["method"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows)), 3.6))
    width = 0.38
    for offset, key, label in ((-width / 2, "task_accuracy", "task accuracy"),
                               (width / 2, "vote_accuracy", "vote accuracy")):
        means = [r[key]["mean"] or 0.0 for r in rows]
        low = [m - (r[key]["low"] if r[key]["low"] is not None else m) for m, r in zip(means, rows, strict=True)]
        high = [(r[key]["high"] if r[key]["high"] is not None else m) - m for m, r in zip(means, rows, strict=True)]
        ax.bar([i + offset for i in range(len(rows))], means, width, yerr=[low, high], capsize=3, label=label)
        for i, row in enumerate(rows):  # one metric without a mean beside one with: said, never a bar at 0
            if row[key]["mean"] is None and any(row[k]["mean"] is not None for k in ("task_accuracy", "vote_accuracy")):
                ax.text(i + offset, 0.02, "not measured", rotation=90, ha="center", va="bottom", color="grey",
                        fontsize=6)
    ax.set_xticks(range(len(rows)), names, rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy (95% CI)")
    if any(r[key]["mean"] is not None for r in rows for key in ("task_accuracy", "vote_accuracy")):
        legend = legend_above(ax, 2)  # above the axes: never over a bar or its error bar
        mark_unscored(ax, rows, ("task_accuracy", "vote_accuracy"))
        fit_title(fig, ax, title, subtitle, legend=legend, fontsize=10)
    else:
        no_data_note(ax)
        fit_title(fig, ax, title, subtitle, fontsize=10)
    return fig


def as_json(rows: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(rows), indent=2)


PROTOCOL_ROWS: dict[str, tuple[tuple[str, bool, str], ...]] = {
    "hidden-pre": (("Hidden-Pre", False, ""),),
    "hidden-post": (("Hidden-Post", False, "{rounds} rounds"),),
    "full-info": (("Full-Info", False, ""),),
    "hiddenbench-pre": (("Hidden-Pre", False, "HiddenBench"),),
    "hiddenbench": (("Hidden-Pre", True, "initial votes of the Hidden-Post run"),
                    ("Hidden-Post", False, "HiddenBench round-robin, {rounds} rounds")),
    "hiddenbench-full": (("Full-Info", False, "HiddenBench, every fact, no discussion"),),
}
"""How each protocol's run becomes table rows: ``(method, from the initial votes, note)``."""


def rows_from_runs(rows_by: Mapping[str, Sequence[Mapping[str, Any]]], rounds: Mapping[str, int]
                   ) -> list[dict[str, Any]]:
    """Table rows (in the paper's order) from the per-task rows of each run, keyed by the evaluation's labels
    (protocol names, or controller labels such as ``rules`` or ``mlp (uncertified)``); ``rounds`` gives each
    protocol's discussion rounds for the notes."""
    table = []
    for label, rows in rows_by.items():
        if label in PROTOCOL_ROWS:
            for method, initial, note in PROTOCOL_ROWS[label]:
                table.append(method_row(method, rows, initial=initial, note=note.format(rounds=rounds.get(label, 0))))
        else:
            base, _, rest = label.partition(" ")
            table.append(method_row(CONTROLLER_NAMES.get(base, base), rows, note=rest.strip("()[] ")))
    return ordered(table)
