"""The paper's tables in their layout, built from stored OffQuery runs (``groundstate compare --paper-tables``).

Every run under a runs directory is read once (its config says the program, the LM, the data and the options);
runs are grouped by LM and *setting* (data file or synthetic settings, and the shared-context condition):

- **Table 1** (main results): per LM and setting, T1/T2/T3 of every program, with the relative gain over standard
  collaboration, ``(score - standard) / standard`` in percent (``-`` where standard scores 0 or is absent).
- **Table 10** (candidate-pool ablation): per LM and setting, ReGround's T1/T2/T3 for each M it was run with
  (``--max-candidates``) and the oracle condition (``--oracle-t1``, attribution skipped).
- **Table 11** (token cost): input, output and total tokens per instance for every program and setting.

Only ReGround runs with the default options enter Table 1 (a run with ``--oracle-t1`` or another M enters Table
10); when a program was run several times with the same LM and setting, the newest run counts. The numbers are
ours, measured the way the paper defines them; they are not the paper's results.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundstate.eval.report import bar_chart, pipe_lines
from groundstate.eval.runs import list_runs
from groundstate.eval.stats import format_ci

logger = logging.getLogger(__name__)

METRICS = ("t1", "t2", "t3")
DEFAULT_M = 3


def setting_of(config: Mapping[str, Any]) -> str:
    """``mediQ_easy.json, unreliable`` or ``synthetic healthcare/main n=20, unreliable``."""
    data = config.get("data") or {}
    if "file" in data:
        where = str(data["file"])
    elif "synthetic" in data:
        synthetic = data["synthetic"]
        where = (f"synthetic {'+'.join(synthetic.get('domains', []))}/{'+'.join(synthetic.get('variants', []))} "
                 f"n={synthetic.get('n')}")
    else:
        where = "data"
    return f"{where}, {(config.get('options') or {}).get('condition', '?')}"


def offquery_runs(out: str | Path, programs: Sequence[str]) -> list[dict[str, Any]]:
    """The stored runs of OffQuery programs under ``out``, newest first, as ``{program, lm, setting, options,
    summary, run_id}``."""
    found = []
    for run in list_runs(out):
        config = run["config"]
        if config.get("program") not in programs or config.get("shard"):
            continue
        found.append({"program": config["program"], "lm": str((config.get("lm") or {}).get("model")),
                      "setting": setting_of(config), "options": config.get("options") or {},
                      "summary": run["summary"], "run_id": run["run_id"]})
    return found


def _mean(summary: Mapping[str, Any], metric: str) -> float | None:
    return ((summary.get("scores") or {}).get(metric) or {}).get("mean")


def _is_default_reground(options: Mapping[str, Any]) -> bool:
    return not options.get("oracle_t1") and options.get("max_candidates", DEFAULT_M) == DEFAULT_M \
        and not options.get("multi_misleading") and options.get("mode", "agent") == "agent"


def table1(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows ``{lm, setting, program, t1, t2, t3, gain_t1, gain_t2, gain_t3, n, run_id}``."""
    chosen: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for run in runs:  # newest first: keep the first run per (lm, setting, program)
        if run["program"] == "reground" and not _is_default_reground(run["options"]):
            continue
        chosen.setdefault((run["lm"], run["setting"], run["program"]), run)
    rows = []
    for (lm, setting, program), run in sorted(chosen.items()):
        standard = chosen.get((lm, setting, "standard"))
        row: dict[str, Any] = {"lm": lm, "setting": setting, "program": program, "n": run["summary"].get("n_done"),
                               "run_id": run["run_id"]}
        for metric in METRICS:
            row[metric] = (run["summary"].get("scores") or {}).get(metric)
            base = _mean(standard["summary"], metric) if standard else None
            value = _mean(run["summary"], metric)
            row[f"gain_{metric}"] = (100 * (value - base) / base if base and value is not None and program != "standard"
                                     else None)
        rows.append(row)
    return rows


def table10(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows ``{lm, setting, condition ("M = k" or "Oracle"), t1, t2, t3, n, run_id}``, M ascending, Oracle last."""
    chosen: dict[tuple[str, str, Any], Mapping[str, Any]] = {}
    for run in runs:
        options = run["options"]
        if run["program"] != "reground" or options.get("multi_misleading") or options.get("mode", "agent") != "agent":
            continue
        key = "oracle" if options.get("oracle_t1") else int(options.get("max_candidates", DEFAULT_M))
        chosen.setdefault((run["lm"], run["setting"], key), run)
    order = sorted(chosen, key=lambda k: (k[0], k[1], 1 if k[2] == "oracle" else 0, 0 if k[2] == "oracle" else k[2]))
    return [{"lm": lm, "setting": setting, "condition": "Oracle" if key == "oracle" else f"M = {key}",
             **{m: (chosen[(lm, setting, key)]["summary"].get("scores") or {}).get(m) for m in METRICS},
             "n": chosen[(lm, setting, key)]["summary"].get("n_done"), "run_id": chosen[(lm, setting, key)]["run_id"]}
            for lm, setting, key in order]


def table11(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows ``{lm, setting, program, input, output, total, cached_calls}`` in tokens per instance (newest run per
    key; ``cached_calls``: calls served from DSPy's cache, which bill no tokens)."""
    chosen: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for run in runs:
        if run["program"] == "reground" and not _is_default_reground(run["options"]):
            continue
        chosen.setdefault((run["lm"], run["setting"], run["program"]), run)
    rows = []
    for (lm, setting, program), run in sorted(chosen.items()):
        summary = run["summary"]
        n = summary.get("n_done") or 0
        tokens = summary.get("tokens") or {}
        inp, out = (tokens.get("input", 0) / n, tokens.get("output", 0) / n) if n else (0.0, 0.0)
        rows.append({"lm": lm, "setting": setting, "program": program, "input": inp, "output": out,
                     "total": inp + out, "cached_calls": (summary.get("lm_calls") or {}).get("cached", 0), "n": n,
                     "run_id": run["run_id"]})
    return rows


def _gain(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


TITLES = {"1": "Table 1 layout: T1/T2/T3 with the relative gain over standard collaboration",
          "10": "Table 10 layout: ReGround's candidate pool size M and the oracle condition",
          "11": "Table 11 layout: tokens per instance"}
NO_RUNS = "(no stored runs for this table)"


def _total(row: Mapping[str, Any]) -> str:
    """Total tokens per instance; a run served (partly) from DSPy's cache says so, as its cached calls bill none."""
    text = f"{row['total']:.0f}"
    return text + f" ({row['cached_calls']} calls cached, not billed)" if row.get("cached_calls") else text


def cells(table: str, rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """One of the tables (``table`` is ``1``, ``10`` or ``11``) as ``(header, cells)``, shared by the Markdown
    file and the terminal table; a table without runs gets one row saying so."""
    if table == "1":
        header = ["LM", "setting", "program", "T1", "T2", "T3", "T1 gain", "T2 gain", "T3 gain", "n"]
        body = [[r["lm"], r["setting"], r["program"], *(format_ci(r[m]) for m in METRICS),
                 *(_gain(r[f"gain_{m}"]) for m in METRICS), str(r["n"])] for r in rows]
    elif table == "10":
        header = ["LM", "setting", "candidates", "T1", "T2", "T3", "n"]
        body = [[r["lm"], r["setting"], r["condition"], *(format_ci(r[m]) for m in METRICS), str(r["n"])]
                for r in rows]
    else:
        header = ["LM", "setting", "program", "input", "output", "total", "n"]
        body = [[r["lm"], r["setting"], r["program"], f"{r['input']:.0f}", f"{r['output']:.0f}",
                 _total(r), str(r["n"])] for r in rows]
    return header, body or [[NO_RUNS] + [""] * (len(header) - 1)]


def markdown(table: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """One of the tables as Markdown (``table`` is ``1``, ``10`` or ``11``)."""
    return "\n".join([f"### {TITLES[table]}", "", *pipe_lines(*cells(table, rows))]) + "\n"


def built_tables(runs: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of Tables 1, 10 and 11."""
    return {"1": table1(runs), "10": table10(runs), "11": table11(runs)}


def write_tables(runs: Sequence[Mapping[str, Any]], out_dir: str | Path) -> dict[str, str]:
    """Write ``table1|10|11.md`` and ``.json`` (and ``table1.png``, T1/T2/T3 per program, with matplotlib)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built = built_tables(runs)
    paths = {}
    for name, rows in built.items():
        (out_dir / f"table{name}.md").write_text(markdown(name, rows), encoding="utf-8")
        (out_dir / f"table{name}.json").write_text(json.dumps({"rows": rows}, indent=2, default=str) + "\n",
                                                   encoding="utf-8")
        paths[f"table{name}"] = str(out_dir / f"table{name}.md")
    if built["1"]:
        tokens = {t["run_id"]: t for t in built["11"]}
        chart_rows = [{"name": f"{r['program']} ({r['setting']})", **{m: r[m] for m in METRICS},
                       "tokens_per_instance": tokens.get(r["run_id"], {}).get("total", 0),
                       "cached_calls": tokens.get(r["run_id"], {}).get("cached_calls", 0)} for r in built["1"]]
        if bar_chart(chart_rows, out_dir / "table1.png", METRICS, "Table 1 layout"):
            paths["chart"] = str(out_dir / "table1.png")
    return paths
