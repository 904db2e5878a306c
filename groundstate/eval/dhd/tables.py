"""The DHD analysis in the layout of the paper's appendix tables 17, 18, 19, 23, 24, 25 and 26 (our numbers).

Each table is built from what ``groundstate dhd analyze`` already computed for one cache (one *model*, in the
paper's terms): ``report.json`` (:func:`groundstate.eval.dhd.analysis.analyze`), ``crossfit.json``
(:func:`~groundstate.eval.dhd.analysis.crossfit`) and, when a masking run exists, its ``mask_table.json``
(:func:`~groundstate.eval.dhd.masking.mask_table`). :func:`paper_tables` takes one :class:`TableSource` per model
and gives every table as JSON-able rows with the paper's columns; :func:`tables_markdown` renders them;
:func:`write_tables` writes ``tables.json``, ``tables.md`` and two charts (Table 18's group means and Table 24's
gains, with matplotlib). ``groundstate dhd tables`` combines several analysis directories (say, two model
families) into one set, as the paper's tables put OSS and Gemma side by side.

What each table holds (LOO at the main pool size; percentages and percentage points):

- **17** Controlled repeated replay: per model and benchmark (then ``Pooled``), the full-pool disagreement rate
  with its Wilson 95% interval and the W+, W-, C+, C- and indeterminate counts of the separation rule.
- **18** Mean repeated trajectory-value estimate by proposal correctness: per benchmark (then ``Pooled``,
  stratified by benchmark) the wrong- and correct-answer means and correct - wrong, with hierarchical-bootstrap
  intervals. The paper shows one model (OSS); we give one block per model.
- **19** Cross-model calibration: separated and group counts with the 95% range of the within-block permutation
  null; the per-message BH and BY selections by group (W+/W-/C+/C-: proposal correctness and the sign of the
  estimate), the paper's "BH" column (its caption tests 5,000 messages; see
  :mod:`~groundstate.eval.dhd.message_tests` for why it is per-message, and the p-values used); the problem-level
  BH and BY selections per family as a second, labelled column (not in the paper's table: the authors' separate
  problem-blocked check, :mod:`~groundstate.eval.dhd.multiplicity`); and the strict W+ and C- counts. A report
  written before the per-message column existed (its ``fdr`` does not name its p-values) shows that column as not
  measured.
- **23** Component masking: success (%) per diagnostic category and variant (full and repeat each average their
  two identical-input outcomes), only when the cache has a masking run; a category with no sampled message is shown
  with n = 0 and empty cells, not left out.
- **24** Cross-fit: micro-pooled full-pool accuracy -> cross-fitted accuracy and the gain with its
  problem-clustered interval (the main estimate, full pool scored as the mean of both replicates).
- **25** Cross-fitted gain by benchmark (one column per model).
- **26** Sensitivity: the gain when replicate A or B alone stands for the full pool, with the 95% null intervals of
  the all-action and removal-identity shuffled controls. The main estimate is listed first as ``(A+B)/2`` (not a
  row of the paper's table, which shows A and B only).

For a simulated cache (its report has ``planted_truth``), ``tables.md`` ends with each selection scored against the
planted truth (:mod:`~groundstate.eval.dhd.planted`): not a table of the paper, whose effects are not known.

A table whose inputs are missing (no strata, no masking run, a cache too small to cross-fit) is left out with a
note saying why, never filled with placeholders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundstate.eval.dhd import report as dhd_report  # pyplot looked up at call time: tests stand in for it
from groundstate.eval.dhd.planted import recall_markdown
from groundstate.eval.report import legend_above, no_data_note
from groundstate.eval.results import write_json
from groundstate.files import jsonable

GROUPS = ("W+", "W-", "C+", "C-")
POOLED = "Pooled"
TABLES = ("17", "18", "19", "23", "24", "25", "26")
TITLES = {
    "17": "Table 17: controlled repeated replay (disagreement of identical-input full-pool pairs, Wilson 95% CI; "
          "messages whose repeated-call interval lies wholly above/below zero)",
    "18": "Table 18: mean repeated trajectory-value estimate by proposal correctness (percentage points, "
          "hierarchical bootstrap 95% intervals)",
    "19": "Table 19: calibration of repeated effects (brackets: 95% count ranges of the within-block permutation "
          "null; BH, BY: per-message selections on exact within-block permutation p-values; problem-level BH: "
          "max-statistic selections per family; strict: every arm and block evaluable)",
    "23": "Table 23: integrator success (%) in the component-masking diagnostic",
    "24": "Table 24: micro-pooled accuracy (%) on a held-out replay block, cross-fitted one-removal choice "
          "(problem-clustered bootstrap 95% CI)",
    "25": "Table 25: cross-fitted accuracy gain over the full pool by benchmark (percentage points)",
    "26": "Table 26: sensitivity of the cross-fitted gain to the full-pool replicate, with the 95% null "
          "intervals of the two block-preserving shuffled controls (percentage points)",
}


@dataclass
class TableSource:
    """What one model's tables are built from: its analysis report and, if available, cross-fit and masking."""

    label: str
    report: Mapping[str, Any]
    crossfit: Mapping[str, Any] | None = None
    mask: Mapping[str, Any] | None = None
    crossfit_note: str | None = None


def _pp(value: Any) -> float | None:
    return None if value is None else round(100 * float(value), 2)


def _interval(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not entry or entry.get("mean") is None:
        return None
    return {"mean": _pp(entry["mean"]), "low": _pp(entry.get("low")), "high": _pp(entry.get("high")),
            "n": entry.get("n")}


def _loo(source: TableSource) -> Mapping[str, Any] | None:
    return source.report.get("modes", {}).get("loo")


def _loo_sections(sources: Sequence[TableSource]):
    """``(source, LOO section)`` for each model that has LOO replays."""
    for source in sources:
        section = _loo(source)
        if section is not None:
            yield source, section


def _benchmark_rows(section: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(benchmark, part)`` per benchmark, then the pooled section (the whole LOO section)."""
    parts = list((section.get("by_benchmark") or {}).items())
    return [*parts, (POOLED, section)]


def table_17(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    rows = []
    for source, section in _loo_sections(sources):
        for benchmark, part in _benchmark_rows(section):
            d = part.get("disagreement") or {}
            groups = part.get("groups") or {}
            rows.append({"model": source.label, "benchmark": benchmark,
                         "disagreement": _pp(d.get("rate")), "low": _pp(d.get("low")), "high": _pp(d.get("high")),
                         "n_pairs": d.get("n"), **{g: groups.get(g) for g in GROUPS},
                         "indeterminate": groups.get("indeterminate")})
    return rows


def table_18(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    rows = []
    for source, section in _loo_sections(sources):
        for benchmark, part in _benchmark_rows(section):
            boot = part.get("bootstrap") or {}
            rows.append({"model": source.label, "benchmark": benchmark, "wrong": _interval(boot.get("wrong")),
                         "correct": _interval(boot.get("correct")),
                         "correct_minus_wrong": _interval(boot.get("difference")),
                         "stratified": benchmark == POOLED and bool(boot.get("strata"))})
    return rows


def table_19(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    rows = []
    for source, section in _loo_sections(sources):
        null = section["permutation_null"]
        counts = {name: {"observed": null["observed"][name], "low": null["null"][name]["low"],
                         "high": null["null"][name]["high"]} for name in ("separated", *GROUPS)}
        multi = section.get("multiplicity", {})
        fdr = section.get("fdr") or {}
        measured = fdr.get("p_values") is not None  # older reports: sign-flip selections of a secondary view
        selected = fdr.get("counts") or {}
        strict = section.get("strict", {})
        rows.append({"model": source.label, **counts,
                     **{m: {g: (selected.get(m) or {}).get(g) if measured else None for g in GROUPS}
                        for m in ("bh", "by")},
                     **{f"problem_{m}": {g: (multi.get(m) or {}).get(g) for g in GROUPS} for m in ("bh", "by")},
                     "strict": {"W+": strict.get("W+"), "C-": strict.get("C-")},
                     "message_p_values": fdr.get("p_values"), "n_tested_messages": fdr.get("n_tests"),
                     "n_messages": section.get("n_messages"), "n_permutations": null.get("n_permutations"),
                     "n_tested_problems": multi.get("n_tested_problems")})
    return rows


def table_23(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    """One row per model and category: all five categories in the paper's order (one with no sampled message has
    ``n`` 0 and empty cells, also from a masking table written before empty rows were kept), then any other."""
    from groundstate.eval.dhd.masking import CATEGORIES, CATEGORY_TITLES  # noqa: PLC0415 (--help stays light)

    rows = []
    for source in sources:
        if not source.mask:
            continue
        variants = source.mask["variants"]
        present = source.mask["rows"]
        for category in [*CATEGORIES, *(c for c in present if c not in CATEGORIES)]:
            row = present.get(category)
            if row is None:
                rows.append({"model": source.label, "category": category, "title": CATEGORY_TITLES[category],
                             "n": 0, **dict.fromkeys(variants), "failures": 0})
                continue
            rows.append({"model": source.label, "category": category, "title": row["title"],
                         "n": row.get("sampled", row.get("pairs")),
                         **{v: row[v]["success"] for v in variants},
                         "failures": sum(int(row[v].get("failures") or 0) for v in variants)})
    return rows


def table_24(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    rows = []
    for source in sources:
        main = ((source.crossfit or {}).get("variants") or {}).get("main")
        if main is None:
            continue
        rows.append({"model": source.label, "full": _pp(main["full_accuracy"]),
                     "crossfit": _pp(main["crossfit_accuracy"]), "gain": _interval(main["gain"]),
                     "n_problems": main.get("n_problems"), "n_units": main.get("n_units")})
    return rows


def table_25(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    benchmarks: dict[str, dict[str, Any]] = {}
    for source in sources:
        main = ((source.crossfit or {}).get("variants") or {}).get("main")
        for benchmark, part in ((main or {}).get("by_benchmark") or {}).items():
            benchmarks.setdefault(benchmark, {"benchmark": benchmark})[source.label] = {
                "gain": _pp(part["gain"]["mean"]), "n_problems": part.get("n_problems")}
    return list(benchmarks.values())


def table_26(sources: Sequence[TableSource]) -> list[dict[str, Any]]:
    rows = []
    for source in sources:
        variants = (source.crossfit or {}).get("variants") or {}
        for arm, name in (("main", "(A+B)/2"), ("A", "A"), ("B", "B")):
            row = variants.get(arm)
            if row is None:
                continue
            controls = row.get("controls") or {}
            rows.append({"model": source.label, "arm": name, "observed": _pp(row["gain"]["mean"]),
                         **{kind: {"low": _pp(controls[kind]["low"]), "high": _pp(controls[kind]["high"]),
                                   "p_value": controls[kind].get("p_value")}
                            for kind in ("all_action", "removal_identity") if kind in controls}})
    return rows


BUILDERS = {"17": table_17, "18": table_18, "19": table_19, "23": table_23, "24": table_24, "25": table_25,
            "26": table_26}


def paper_tables(sources: Sequence[TableSource]) -> dict[str, Any]:
    """Every table as ``{"title", "rows"}`` (rows as documented per builder), plus ``notes`` on what is missing."""
    out: dict[str, Any] = {"models": [s.label for s in sources], "tables": {}, "notes": []}
    for number in TABLES:
        rows = BUILDERS[number](sources)
        if rows:
            out["tables"][number] = {"title": TITLES[number], "rows": rows}
    planted = {source.label: source.report["planted_truth"] for source in sources
               if source.report.get("planted_truth")}
    if planted:  # simulated caches: what each selection found of the effects dhd simulate planted
        out["planted_truth"] = planted
    for source in sources:
        section = _loo(source)
        if section is None:
            out["notes"].append(f"{source.label}: no LOO replays, so Tables 17-19 have no row for it")
        elif not section.get("by_benchmark"):
            out["notes"].append(f"{source.label}: one benchmark (or none recorded), so Tables 17-18 show the "
                                "pooled row only")
        if not source.mask:
            out["notes"].append(f"{source.label}: no masking run (`groundstate dhd mask`), so no Table 23 rows")
        if not source.crossfit:
            out["notes"].append(f"{source.label}: no cross-fit ({source.crossfit_note or 'not computed'}), so no "
                                "Tables 24-26 rows")
    return jsonable(out)


# -- Markdown -------------------------------------------------------------------------------------------------
def _num(value: Any, digits: int = 1, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _ci(entry: Mapping[str, Any] | None, digits: int = 2, sign: bool = True) -> str:
    if not entry:
        return "-"
    text = _num(entry["mean"], digits, sign)
    if entry.get("low") is not None and entry.get("high") is not None:
        text += f" [{_num(entry['low'], digits, sign)}, {_num(entry['high'], digits, sign)}]"
    return text


def _count(entry: Mapping[str, Any]) -> str:
    return f"{entry['observed']} [{entry['low']},{entry['high']}]"


def _render(number: str, rows: list[dict[str, Any]], models: Sequence[str]) -> list[str]:
    if number == "17":
        head = ["Model", "Benchmark", "Disagreement [95% CI]", *GROUPS, "Indeterminate"]
        body = [[r["model"], r["benchmark"], f"{_num(r['disagreement'])}% [{_num(r['low'])}, {_num(r['high'])}]"
                 if r["disagreement"] is not None else "-", *(str(r[g]) for g in GROUPS), str(r["indeterminate"])]
                for r in rows]
    elif number == "18":
        head = ["Model", "Benchmark", "Wrong-answer messages", "Correct-answer messages", "Correct - wrong"]
        body = [[r["model"], r["benchmark"], _ci(r["wrong"]), _ci(r["correct"]), _ci(r["correct_minus_wrong"])]
                for r in rows]
    elif number == "19":
        head = ["Model", "Separated [null]", *(f"{g} [null]" for g in GROUPS), "BH W+/W-/C+/C-", "BY W+/W-/C+/C-",
                "Problem-level BH W+/W-/C+/C-", "Strict W+/C-"]
        body = [[r["model"], _count(r["separated"]), *(_count(r[g]) for g in GROUPS),
                 *("/".join("-" if r[m][g] is None else str(r[m][g]) for g in GROUPS)
                   for m in ("bh", "by", "problem_bh")), f"{r['strict']['W+']}/{r['strict']['C-']}"]
                for r in rows]
    elif number == "23":
        variants = [k for k in ("full", "repeat", "remove", "neutral", "hide_answer", "hide_reasoning")
                    if rows and k in rows[0]]
        titles = {"full": "Full", "repeat": "Repeat", "remove": "Remove", "neutral": "Neutral replacement",
                  "hide_answer": "Hide answer", "hide_reasoning": "Hide reasoning"}
        head = ["Model", "Diagnostic sample (n)", *(titles[v] for v in variants)]
        body = [[r["model"], f"{r['title']} ({r['n']})", *(_num(r[v], 0) for v in variants)] for r in rows]
    elif number == "24":
        head = ["Model", "Full -> cross-fit", "Gain [95% CI]"]
        body = [[r["model"], f"{_num(r['full'], 2)} -> {_num(r['crossfit'], 2)}", _ci(r["gain"])] for r in rows]
    elif number == "25":
        head = ["Benchmark", *models]
        body = [[r["benchmark"], *(_num(r[m]["gain"], 2, True) if m in r else "-" for m in models)] for r in rows]
    else:
        head = ["Model / arm", "Observed", "All-action", "Removal identity"]

        def null(entry: Mapping[str, Any] | None) -> str:
            return "-" if not entry else f"[{_num(entry['low'], 2, True)}, {_num(entry['high'], 2, True)}]"

        body = [[f"{r['model']} / {r['arm']}", _num(r["observed"], 2, True), null(r.get("all_action")),
                 null(r.get("removal_identity"))] for r in rows]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(row) + " |" for row in body)]


def tables_markdown(tables: Mapping[str, Any]) -> str:
    """All tables of :func:`paper_tables` as Markdown, in the paper's order, then the notes."""
    lines = ["# DHD tables in the paper's layout", "",
             "Our numbers in the rows and columns of the paper's appendix tables (models: "
             + ", ".join(tables["models"]) + ").", ""]
    for number, table in tables["tables"].items():
        lines += [f"## {table['title']}", "", *_render(number, table["rows"], tables["models"]), ""]
    for model, planted in (tables.get("planted_truth") or {}).items():
        lines += recall_markdown({f"{model}, {mode}": entry for mode, entry in planted.items()})
    if tables.get("notes"):
        lines += ["## Not shown", "", *(f"- {note}" for note in tables["notes"]), ""]
    return "\n".join(lines)


# -- charts and files -----------------------------------------------------------------------------------------
def plot_table_18(rows: Sequence[Mapping[str, Any]], path: str | Path) -> bool:
    """Wrong- vs correct-answer mean value (pp) with intervals per model and benchmark; ``False`` without
    matplotlib or without rows."""
    plt = dhd_report.pyplot()
    if plt is None or not rows:
        return False
    labels = [f"{r['model']}\n{r['benchmark']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.8, 1.2 * len(rows) + 2.5), 3.6))  # room for the legend
    for offset, key, color in ((-0.18, "wrong", "#d8553b"), (0.18, "correct", "#3b7dd8")):
        points = [(x, row[key]) for x, row in enumerate(rows) if row[key] and row[key].get("mean") is not None]
        for i, (x, entry) in enumerate(points):
            low, high = entry.get("low"), entry.get("high")
            err = None if low is None or high is None else [[entry["mean"] - low], [high - entry["mean"]]]
            ax.errorbar(x + offset, entry["mean"], yerr=err, fmt="o", color=color, capsize=3,
                        label=f"{key}-answer messages" if i == 0 else None)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel("mean trajectory value (pp)")
    if ax.get_legend_handles_labels()[0]:
        legend_above(ax, 2)  # outside the axes: never over a point or its interval
    else:
        no_data_note(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def plot_table_24(rows: Sequence[Mapping[str, Any]], path: str | Path) -> bool:
    """The cross-fitted gain (pp) per model and replicate row with its interval (main) or control null range
    (A, B); ``False`` without matplotlib or without rows."""
    plt = dhd_report.pyplot()
    if plt is None or not rows:
        return False
    fig, ax = plt.subplots(figsize=(1.1 * len(rows) + 2.5, 3.4))
    for x, row in enumerate(rows):
        if row["observed"] is None:  # no gain measured: say so rather than draw a gain of 0
            ax.text(x, 0, "no data", ha="center", va="bottom", color="grey", fontsize=8)
        else:
            ax.bar(x, row["observed"], color="#3b7dd8" if row["arm"] == "(A+B)/2" else "#8fb8ee")
        control = row.get("all_action")
        if control:
            ax.plot([x - 0.35, x + 0.35], [control["high"]] * 2, color="#d8553b", linewidth=1.5,
                    label="all-action null, upper 95%" if x == 0 else None)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['model']}\n{r['arm']}" for r in rows], fontsize=8)
    ax.set_ylabel("cross-fitted gain (pp)")
    if ax.get_legend_handles_labels()[0]:
        legend_above(ax, 1)  # outside the axes: never over a bar
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def write_tables(out: str | Path, sources: Sequence[TableSource]) -> dict[str, str]:
    """Write ``tables.json``, ``tables.md`` and the charts into ``out``; returns what was written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tables = paper_tables(sources)
    paths = {"tables_json": out / "tables.json", "tables_markdown": out / "tables.md"}
    if plot_table_18(tables["tables"].get("18", {}).get("rows", []), out / "table18.png"):
        paths["table18_chart"] = out / "table18.png"
    if plot_table_24(tables["tables"].get("26", {}).get("rows", []), out / "table24.png"):
        paths["table24_chart"] = out / "table24.png"
    write_json(paths["tables_json"], tables)
    charts = [f"![{name}]({p.name})" for name, p in paths.items() if name.endswith("_chart")]
    text = tables_markdown(tables) + ("\n## Charts\n\n" + "\n".join(charts) + "\n" if charts else "")
    paths["tables_markdown"].write_text(text, encoding="utf-8")
    return {name: str(p) for name, p in paths.items()}
