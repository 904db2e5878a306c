"""A built :class:`~groundstate.eval.experiments.table.Table` as text, Markdown, JSON and a PNG chart.

Every number is shown beside the paper's: for each column and metric there is ours and ``paper (Δ)``, the
paper's value and ours minus it (in the table's units: percentage points with ``percent``), or "not in the
available text" where the spec gives no reference. A cell not run says "not run", a metric measured on no
record "not measured (N failed)" (:func:`groundstate.eval.stats.format_ci`), a metric the run does not report
"not reported". :func:`cells` gives the header and rows as text (shared by the Markdown file and the terminal
table, which prints them with markup off), :func:`write_table` writes ``<stem>.md``, ``<stem>.json`` and
``<stem>.png`` (matplotlib, imported only here and only when a chart is written).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from groundstate.eval.consilience.provenance import runs_provenance
from groundstate.eval.experiments.table import Table, Value

NOT_IN_TEXT = "not in the available text"


def metric_label(table: Table, metric: str) -> str:
    """How a metric is headed: the spec's label, else :func:`groundstate.eval.report.label`."""
    from groundstate.eval.report import label  # noqa: PLC0415 (--help stays light)

    return table.spec.layout.labels.get(metric, label(metric))


def _digits(table: Table, metric: str | None = None) -> int:
    layout = table.spec.layout
    given = layout.digits.get(metric) if isinstance(layout.digits, dict) else layout.digits
    return given if given is not None else (1 if layout.scale(metric) == 100 else 3)


def scaled(table: Table, number: float | None, metric: str | None = None) -> float | None:
    """``number`` in the table's units for ``metric`` (a percentage: times 100; ``Layout.scale``)."""
    return None if number is None else number * table.spec.layout.scale(metric)


def ours(table: Table, value: Value, metric: str | None = None) -> str:
    """Our number as text: ``mean [low, high]``, with failures and notes; or why there is none."""
    digits = _digits(table, metric)
    entry = value.entry or {}
    failed = int(entry.get("failed") or 0)
    if value.status == "not run":
        text = "not run"
    elif value.status in ("not reported", "base"):
        text = value.status
    elif entry.get("mean") is None:
        text = f"not measured ({failed} failed)" if failed else "not measured"
    else:
        digits = 0 if entry.get("integer") else digits  # a count
        text = f"{scaled(table, entry['mean'], metric):.{digits}f}"
        if entry.get("low") is not None and entry.get("high") is not None:
            text += (f" [{scaled(table, entry['low'], metric):.{digits}f}, "
                     f"{scaled(table, entry['high'], metric):.{digits}f}]")
        if failed:
            text += f" ({failed} failed)"
    return text + (f" ({value.note})" if value.note else "")


def difference(table: Table, value: Value, metric: str | None = None) -> float | None:
    """Ours minus the paper's, in the table's units (``None`` without both)."""
    mean = (value.entry or {}).get("mean")
    if value.reference is None or mean is None:
        return None
    return scaled(table, mean, metric) - scaled(table, value.reference.value, metric)


def paper(table: Table, value: Value, metric: str | None = None) -> str:
    """The paper's number and the difference, or "not in the available text"."""
    if value.reference is None:
        return NOT_IN_TEXT
    digits = _digits(table, metric)
    text = f"{scaled(table, value.reference.value, metric):.{digits}f}"
    delta = difference(table, value, metric)
    return text + (f" (Δ {delta:+.{digits}f})" if delta is not None else "")


def title(table: Table) -> str:
    """The table's title, with the paper's table and page, and the design-default warning
    (:data:`~groundstate.eval.consilience.provenance.FIXED_BY_CONSTRUCTION`) when any of its runs had simulated
    agents on support derived from the answer."""
    info = table.spec.experiment
    where = ", ".join(x for x in (info.table, f"p. {info.page}" if info.page is not None else None) if x)
    text = info.title + (f" ({info.paper} paper, {where})" if info.paper and where else "")
    warning = runs_provenance(table.configs.values())["warning"]
    return f"{text}: {warning}" if warning and warning not in text else text


def cells(table: Table) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` as text: one column per row dimension, then per column and metric ours and the paper's
    (ours alone when the table's ``show_paper`` is off)."""
    header = list(table.row_dims)
    for column in table.columns:
        prefix = " · ".join(label for _, label in column.values())
        for metric in table.metrics:
            name = f"{prefix} · {metric_label(table, metric)}" if prefix else metric_label(table, metric)
            header += [name, f"{name} paper (Δ)"] if table.show_paper else [name]
    body = []
    for row in table.rows:
        line = [row.labels[d] if row.keys[d] != "average" else f"average ({d})" for d in table.row_dims]
        for index in range(len(table.columns)):
            for metric in table.metrics:
                value = row.values[(index, metric)]
                line += [ours(table, value, metric)] + ([paper(table, value, metric)] if table.show_paper else [])
        body.append(line)
    return header, body


def paper_only_lines(table: Table) -> list[str]:
    """The references whose cell is not in the table, one line each."""
    out = []
    for reference in table.paper_only:
        where = ", ".join(f"{k} {v}" for k, v in reference.cell.items())
        number = f"{scaled(table, reference.value, reference.metric):.{_digits(table, reference.metric)}f}"
        out.append(f"{where}: {metric_label(table, reference.metric)} {number} ({reference.source})"
                   + (f"; {reference.note}" if reference.note else ""))
    return out


def markdown(table: Table) -> str:
    """The whole table as Markdown: title, header lines, the table, references not in it, notes."""
    from groundstate.eval.report import pipe_lines  # noqa: PLC0415 (--help stays light)

    header, body = cells(table)
    escape = [[c.replace("|", "\\|") for c in row] for row in [header, *body]]
    lines = [f"### {title(table)}", "", *([table.subtitle, ""] if table.subtitle else []),
             *(f"- {line}" for line in table.header), "", *pipe_lines(escape[0], escape[1:])]
    if table.paper_only:
        lines += ["", "Paper values for cells not in this table:", "", *(f"- {x}" for x in paper_only_lines(table))]
    if table.notes:
        lines += ["", *(f"- {note}" for note in table.notes)]
    if table.spec.experiment.note:
        lines += ["", table.spec.experiment.note]
    return "\n".join(lines) + "\n"


def as_json(table: Table) -> dict[str, Any]:
    """The table as JSON: the experiment, the header, the columns, every value with its reference and difference."""
    def value(v: Value, metric: str) -> dict[str, Any]:
        reference = v.reference.model_dump() if v.reference else None
        return {"entry": v.entry, "status": v.status, "note": v.note, "shown": ours(table, v, metric),
                "reference": reference, "difference": difference(table, v, metric), "paper": paper(table, v, metric)}

    return {
        "experiment": table.spec.experiment.model_dump(), "title": title(table), "subtitle": table.subtitle,
        "header": table.header,
        "percent": table.spec.layout.percent, "row_dims": table.row_dims, "col_dims": table.col_dims,
        "columns": [{d: {"key": k, "label": lab} for d, (k, lab) in c.items()} for c in table.columns],
        "metrics": table.metrics,
        "rows": [{"keys": r.keys, "labels": r.labels, "average": r.average,
                  "values": [{"column": i, "metric": m, **value(v, m)} for (i, m), v in r.values.items()]}
                 for r in table.rows],
        "paper_only": [r.model_dump() for r in table.paper_only], "notes": table.notes, "runs": table.runs,
        "spec": table.spec.source}


def chart(table: Table, path: str | Path) -> str:
    """A grouped bar chart: one group per row, one bar per column and metric (95% intervals where there are
    some), the paper's values as black ticks; the legend above the axes (never over a bar) and the title wrapped
    until it fits the figure (:func:`~groundstate.eval.report.fit_title`)."""
    import matplotlib  # noqa: PLC0415 (optional extra: plot)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)

    from groundstate.eval.report import fit_title, legend_above  # noqa: PLC0415 (--help stays light)

    series = [(i, m) for i in range(len(table.columns)) for m in table.metrics]
    groups = len(table.rows)
    width = 0.8 / max(1, len(series))
    fig_width = min(16.0, max(6.0, 0.35 * groups * len(series) + 2))
    fig, ax = plt.subplots(figsize=(fig_width, 4.4))
    for s, (index, metric) in enumerate(series):
        xs, means, lows, highs = [], [], [], []
        for g, row in enumerate(table.rows):
            entry = row.values[(index, metric)].entry or {}
            mean = scaled(table, entry.get("mean"), metric)
            x = g - 0.4 + width * (s + 0.5)
            reference = row.values[(index, metric)].reference
            if reference is not None and table.show_paper:
                ax.plot([x - width / 2, x + width / 2], [scaled(table, reference.value, metric)] * 2, color="black",
                        lw=2)
            if mean is None:  # not measured: said, never a bar at 0
                ax.text(x, 0, "n/a", ha="center", va="bottom", fontsize=6, color="grey", rotation=90)
                continue
            if mean == 0:  # a measured 0 has no visible bar: its value is written instead
                ax.text(x, 0, "0", ha="center", va="bottom", fontsize=6)
            low, high = scaled(table, entry.get("low"), metric), scaled(table, entry.get("high"), metric)
            xs.append(x)
            means.append(mean)
            lows.append(mean - low if low is not None else float("nan"))  # no interval: no whisker, no cap
            highs.append(high - mean if high is not None else float("nan"))
        prefix = " · ".join(lab for _, lab in table.columns[index].values())
        ax.bar(xs, means, width, yerr=[lows, highs], capsize=2,
               label=f"{prefix} · {metric_label(table, metric)}" if prefix else metric_label(table, metric))
    names = [" / ".join(r.labels[d] if r.keys[d] != "average" else "average" for d in table.row_dims)
             for r in table.rows]
    ax.set_xticks(range(groups), [textwrap.shorten(n, 40) for n in names], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("%" if table.spec.layout.percent is True else "value")
    legend = legend_above(ax, min(4, len(series)), fontsize=7) if ax.get_legend_handles_labels()[0] else None
    fit_title(fig, ax, title(table) + (" (black: the paper)" if table.show_paper else ""), table.subtitle or "",
              legend=legend, fontsize=9)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)


def write_table(table: Table, directory: str | Path, stem: str | None = None, png: bool = True, *,
                extra_markdown: str = "", extra_json: dict[str, Any] | None = None) -> dict[str, str]:
    """Write ``<stem>.md``, ``<stem>.json`` and (``png``, with matplotlib installed) ``<stem>.png``; their paths.
    A front-end may append a section to the Markdown (``extra_markdown``) and keys to the JSON (``extra_json``;
    they never replace the table's own)."""
    from groundstate.eval.results import write_json  # noqa: PLC0415 (--help stays light)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or table.spec.experiment.name
    paths = {"md": str(directory / f"{stem}.md"), "json": str(directory / f"{stem}.json")}
    Path(paths["md"]).write_text(markdown(table) + (f"\n{extra_markdown}" if extra_markdown else ""),
                                 encoding="utf-8")
    write_json(paths["json"], {**(extra_json or {}), **as_json(table)})
    if png:
        try:
            paths["png"] = chart(table, directory / f"{stem}.png")
        except ImportError:
            pass
    return paths
