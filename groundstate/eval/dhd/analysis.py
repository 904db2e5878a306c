"""DHD analysis outputs: the labels file, the report (Markdown + JSON + two charts) and the cross-fitted choice.

:func:`analyze` reads a cache's finished replays (:func:`groundstate.eval.dhd.run.collect_pairs`) and, per
replay mode, at the main pool size (the largest replayed ``K`` unless given), computes with the statistics
modules of :mod:`groundstate.eval.dhd`:
the full-pool disagreement rate (LOO), per-message values and groups, the hierarchical bootstrap of wrong- vs
correct-answer messages, the within-block permutation null of the separated counts, the per-message BH/BY
selections on exact within-block permutation p-values (``fdr``: the paper's Table 19 column, see
:mod:`~groundstate.eval.dhd.message_tests`), the problem-level BH/BY selections
(``multiplicity``: :mod:`~groundstate.eval.dhd.multiplicity`, Table 19's second, labelled column), the strict
counts, the failed calls
(:mod:`~groundstate.eval.dhd.completeness`) and the flip direction by proposal correctness; and, over all LOO pool
sizes, the per-message LOO rates by ``K``. The block effect is the paper's ``(A + B) / 2 - removal`` unless
``full="a"``. It writes into ``out``:

- ``labels.jsonl``: one line per problem, message and mode (value estimate, interval, p-value, label, group,
  proposal correctness, blocks): training data for programs that learn when to listen;
- ``pairs.jsonl``: the matched pair rows themselves (one per problem, message, mode, K and block);
- ``multiplicity.jsonl``: one line per mode and complete problem (family statistics and p-values);
- ``report.json`` and ``report.md``; ``flip_direction.png`` and ``loo_rates.png`` (with matplotlib).

- for a cache written by ``dhd simulate`` (it has ``simulation.json``), ``report.json`` and ``report.md`` also score
  every selection against the planted truth (``planted_truth``: recall and false discoveries per selection,
  :mod:`~groundstate.eval.dhd.planted`);
- ``report.json`` also records the replay runs' settings (temperatures, evaluator, judge LM: ``settings``) and, for
  LOO replays over several benchmarks, ``by_benchmark`` (groups, disagreement and bootstrap per benchmark);
- ``crossfit.json`` and the paper-layout ``tables.md`` / ``tables.json`` with ``table18.png`` and ``table24.png``
  (:mod:`~groundstate.eval.dhd.tables`), unless ``with_tables=False``.

:func:`crossfit` runs :func:`~groundstate.eval.dhd.crossfit.crossfit_keep_or_remove` once at the main K: rows
``main`` (full pool scored as the mean of replicates A and B), ``A`` and ``B``, each with its shuffled controls, gains
by benchmark and the excluded problems.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.errors import ConfigError, InputError
from groundstate.eval.dhd.blocks import collect_pairs, replay_run_settings
from groundstate.eval.dhd.bootstrap import hierarchical_bootstrap
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.completeness import replay_inventory
from groundstate.eval.dhd.crossfit import crossfit_keep_or_remove
from groundstate.eval.dhd.effects import disagreement_rate, pair_effects
from groundstate.eval.dhd.multiplicity import multiplicity
from groundstate.eval.dhd.planted import planted_recall, read_truth, recall_markdown
from groundstate.eval.dhd.replay import arm_accuracy, repeat_pairs
from groundstate.eval.dhd.report import flip_direction, loo_rates_by_K, plot_flip_direction, plot_loo_rates
from groundstate.eval.dhd.table_inputs import read_mask_table
from groundstate.eval.dhd.tables import TableSource, write_tables
from groundstate.eval.dhd.values import (
    fdr_selection,
    group_counts,
    labels_rows,
    message_values,
    permutation_null,
    strict_counts,
)
from groundstate.eval.io import read_jsonl, write_jsonl
from groundstate.eval.results import write_json
from groundstate.files import jsonable

logger = logging.getLogger(__name__)


def _main_k(rows: Sequence[Mapping[str, Any]], mode: str, k: int | None) -> int | None:
    sizes = sorted({int(r["K"]) for r in rows if r["mode"] == mode})
    if not sizes:
        return None
    if k is None:
        return sizes[-1]
    if k not in sizes:
        raise ConfigError(f"no {mode} replays at K={k} (replayed: {', '.join(map(str, sizes))})")
    return k


def _need_rows(cache: MessageCache, rows: list) -> None:
    if not rows:
        raise ConfigError(f"no finished replay blocks for the cache {cache.dir}; run `groundstate dhd replay` first")


def analyze(cache: MessageCache, out: str | Path | None = None, *, runs_dir: str | Path | None = None,
            run_ids: Sequence[str] | None = None, k: int | None = None, seed: int = 0, n_permutations: int = 5000,
            n_resamples: int = 2000, q: float = 0.05, confidence: float = 0.95,
            method: str = "bootstrap", full: str = "mean", null: str = "block",
            n_multiplicity: int = 100_000, label: str | None = None, with_tables: bool = True,
            mask_run: str | None = None) -> dict[str, Any]:
    """Compute the DHD statistics and write the labels, the report and the charts (see the module notes).

    With ``with_tables`` (default) it also cross-fits the LOO replays (:func:`crossfit`, same seed and resamples) and
    writes the paper-layout tables (:mod:`~groundstate.eval.dhd.tables`) with the model name ``label`` (default:
    the cache directory's name); a cache too small to cross-fit gets its tables without Tables 24-26 and a note.
    Table 23 is the cache's masking run named ``mask_run`` (a run id), else its only one
    (:func:`~groundstate.eval.dhd.blocks.choose_mask_run`; several and none named: refused before anything is
    written), and left out when it has none.

    ``full`` is the LOO block effect (``"mean"``: ``(A + B) / 2 - removal``, the paper's; ``"a"``: replicate A
    only), ``null`` the permutation null of the counts and of the per-message tests (``"block"``: within-block
    permutation, and the per-message p-values of :func:`~groundstate.eval.dhd.message_tests.
    block_permutation_p_values`; ``"sign-flip"``: the miscalibrated sign flip, and the exact sign-flip p-values of
    the separation rule, which cannot go below 0.0625 at five blocks) and ``n_multiplicity`` the permutations per
    pattern of the problem-level max-statistic analysis.

    Returns the report (JSON-able) with ``paths`` naming what was written.

    Raises:
        InputError: a replay block without one of its arms, an old cache without the second full-pool call and
            ``full="mean"``, or malformed pair rows (one line naming the problem, message and block), before
            anything is written.
        ConfigError: with tables, several masking runs of the cache and none named (before anything is written).
    """
    from groundstate.eval.dhd.blocks import choose_mask_run  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.message_tests import (  # noqa: PLC0415 (--help stays light)
        block_permutation_p_values,
        describe,
    )
    cache.require()
    out = Path(out) if out is not None else cache.dir / "analysis"
    mask_dir = choose_mask_run(cache, runs_dir, [mask_run] if mask_run else (), own=True) if with_tables else None
    rows, blocks = collect_pairs(cache, runs_dir, run_ids)
    _need_rows(cache, rows)
    truth = read_truth(cache.dir)  # a simulated cache's planted effects (None for a real cache); checked here
    entries = cache.entries()
    tables, inventories = {}, {}
    for mode in ("loo", "single"):  # every check before anything is written
        main_k = _main_k(rows, mode, k)
        if main_k is None:
            continue
        inventories[mode] = replay_inventory(blocks, entries, mode, main_k, full)
        try:
            tables[mode] = pair_effects(rows, mode=mode, K=main_k, full=full)
            tables[mode].block_outcomes()
        except ValueError as exc:
            raise InputError(f"{cache.dir}: {exc}") from None
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"cache": str(cache.dir), "n_problems": len({r["problem_id"] for r in rows}),
                              "n_blocks": len(blocks), "arms": arm_accuracy(blocks), "modes": {}}
    labels: list[dict[str, Any]] = []
    problem_rows: list[dict[str, Any]] = []
    for mode, table in tables.items():
        main_k = table.K
        values = message_values(table, confidence=confidence, method=method)
        values["p_block"] = block_permutation_p_values(table)
        strata = table.strata is not None and len(set(table.strata)) > 1
        fdr = fdr_selection(values["p_block" if null == "block" else "p_value"], q=q, values=values)
        section: dict[str, Any] = {
            "K": main_k, "n_messages": table.n_messages, "n_blocks": table.n_blocks,
            "groups": group_counts(values["group"]),
            "bootstrap": hierarchical_bootstrap(table, values, n_resamples=n_resamples, seed=seed,
                                                   stratify=True if strata else None, confidence=confidence),
            "permutation_null": permutation_null(table, n_permutations=n_permutations, seed=seed,
                                                    confidence=confidence, method=method, null=null),
            "fdr": {key: fdr[key] for key in ("q", "n_tests", "n_bh", "n_by", "counts") if key in fdr},
            "effect": {"full": full if mode == "loo" else None, "definition": (
                ("(A + B) / 2 - removal: mean of the block's two full-pool calls minus the removal call"
                 if full == "mean" else "A - removal: replicate A of the full pool only") if mode == "loo"
                else "only - independent")},
            "failures": inventories[mode],
            "strict": strict_counts(table, values),
            "flip_direction": flip_direction(table),
            "rule": values.attrs.get("rule"),
        }
        section["fdr"]["selected_bh"] = [list(table.keys[i]) for i, s in enumerate(fdr["bh"]) if s]
        section["fdr"]["selected_by"] = [list(table.keys[i]) for i, s in enumerate(fdr["by"]) if s]
        section["fdr"].update(describe() if null == "block" else {
            "p_values": "sign-flip", "description": "exact sign-flip p-value of each message's block effects "
            "(floor 2 / 2^B: 0.0625 at five blocks)"})
        section["fdr"]["view"] = "Table 19 column: per-message BH/BY"
        problem_level = multiplicity(table, n_permutations=n_multiplicity, seed=seed, q=q)
        section["multiplicity"] = {key: v for key, v in problem_level.items() if key != "problems"}
        problem_rows.extend({"mode": mode, "K": main_k, **entry} for entry in problem_level["problems"])
        if truth is not None:
            report.setdefault("planted_truth", {})[mode] = planted_recall(truth, table.keys, values, fdr,
                                                                          problem_level)
        if mode == "loo":
            section["disagreement"] = disagreement_rate(repeat_pairs(blocks, main_k))
            if strata:
                section["by_benchmark"] = _by_benchmark(table, values, blocks, n_resamples=n_resamples, seed=seed,
                                                        confidence=confidence)
        report["modes"][mode] = section
        labels.extend(labels_rows(table, values))
    paths = {"labels": out / "labels.jsonl", "pairs": out / "pairs.jsonl", "json": out / "report.json",
             "markdown": out / "report.md", "multiplicity": out / "multiplicity.jsonl"}
    if "loo" in report["modes"]:
        report["loo_rates_by_K"] = loo_rates_by_K(rows)
        chart = out / "loo_rates.png"
        if plot_loo_rates(report["loo_rates_by_K"], chart):
            paths["loo_rates_chart"] = chart
        chart = out / "flip_direction.png"
        if plot_flip_direction(report["modes"]["loo"]["flip_direction"], chart):
            paths["flip_direction_chart"] = chart
    write_jsonl(paths["labels"], labels)
    write_jsonl(paths["pairs"], rows)
    write_jsonl(paths["multiplicity"], problem_rows)
    report["settings"] = replay_run_settings(cache, runs_dir, run_ids)
    report["paths"] = {name: str(path) for name, path in paths.items()}
    report = jsonable(report)
    if with_tables:
        report["paths"].update(_write_tables(cache, out, report, label=label, runs_dir=runs_dir, run_ids=run_ids,
                                             k=k, seed=seed, n_resamples=n_resamples, confidence=confidence,
                                             mask_dir=mask_dir))
    write_json(paths["json"], report)
    paths["markdown"].write_text(report_markdown(report), encoding="utf-8")
    return report


def _by_benchmark(table: Any, values: Any, blocks: Sequence[Mapping[str, Any]], *, n_resamples: int, seed: int,
                  confidence: float) -> dict[str, dict[str, Any]]:
    """Per benchmark (the table's strata): group counts, full-pool disagreement and the hierarchical bootstrap of
    its messages alone (the rows of the paper's Tables 17 and 18)."""
    labels = np.asarray(table.strata, dtype=object)[table.problem_index]
    out = {}
    for stratum in dict.fromkeys(table.strata):
        mask = labels == stratum
        part = table.select(mask)
        part_values = values[mask].reset_index(drop=True)
        problems = set(part.problems)
        mine = [b for b in blocks if b["problem_id"] in problems]
        out[str(stratum)] = {
            "n_problems": len(problems), "n_messages": part.n_messages,
            "groups": group_counts(part_values["group"]),
            "disagreement": disagreement_rate(repeat_pairs(mine, table.K)),
            "bootstrap": hierarchical_bootstrap(part, part_values, n_resamples=n_resamples, seed=seed,
                                                confidence=confidence),
        }
    return out


def _write_tables(cache: MessageCache, out: Path, report: Mapping[str, Any], *, label: str | None,
                  runs_dir: str | Path | None, run_ids: Sequence[str] | None, k: int | None, seed: int,
                  n_resamples: int, confidence: float, mask_dir: Path | None) -> dict[str, str]:
    from groundstate.eval.dhd.blocks import MASK_TABLE  # noqa: PLC0415 (--help stays light)
    fitted, note = None, None
    if "loo" in report["modes"]:
        try:
            fitted = crossfit(cache, out, runs_dir=runs_dir, run_ids=run_ids, k=k, seed=seed,
                              n_resamples=n_resamples, confidence=confidence)
        except (ConfigError, InputError) as exc:
            note = str(exc)
            logger.warning("no cross-fit for the tables: %s", exc)
    else:
        note = "no LOO replays"
    source = TableSource(label=label or cache.dir.resolve().name, report=report, crossfit=fitted,
                         mask=read_mask_table(mask_dir / MASK_TABLE) if mask_dir is not None else None,
                         crossfit_note=note)
    paths = write_tables(out, [source])
    if fitted is not None:
        paths["crossfit"] = fitted["path"]
    return paths


def crossfit(cache: MessageCache, out: str | Path | None = None, *, runs_dir: str | Path | None = None,
             run_ids: Sequence[str] | None = None, k: int | None = None, seed: int = 0, n_resamples: int = 2000,
             n_shuffles: int = 1000, complete_only: bool = True, confidence: float = 0.95,
             control_draw: str = "problem") -> dict[str, Any]:
    """The cross-fitted one-removal analysis on the LOO replays (the paper's Tables 24-26).

    One call of :func:`~groundstate.eval.dhd.crossfit.crossfit_keep_or_remove` at the main pool size: variants
    ``main`` (full pool = mean of replicates A and B), ``A`` and ``B``, each with its shuffled controls and gains by
    benchmark, and the excluded incomplete problems. Writes ``crossfit.json`` (those fields, ``K`` the pool size)
    into ``out`` (default ``<cache>/analysis``) and returns it with ``path``.

    Failed calls exclude their problem (listed in ``excluded_problems``); a block stored without one of its arms is
    refused by :func:`~groundstate.eval.dhd.completeness.replay_inventory`. A cache replayed without the second
    full-pool call gets variant ``A`` only (with a ``note``).

    Raises:
        InputError: a replay block without one of its arms (one line naming the problem, message and block).
        ConfigError: fewer than two replay blocks, or a malformed table (one line naming the problem and block).
    """
    cache.require()
    rows, blocks = collect_pairs(cache, runs_dir, run_ids)
    loo = [r for r in rows if r["mode"] == "loo"]
    _need_rows(cache, loo)
    main_k = _main_k(loo, "loo", k)
    has_b = any(a["arm"] == "full_b" for b in blocks if b["mode"] == "loo" and int(b["K"]) == main_k
                for a in b["arms"])
    replay_inventory(blocks, cache.entries(), "loo", main_k, "mean" if has_b else "a")  # refuses a missing arm
    try:
        # cross-fitting forms its variants from the arms (A, B, removals), not from the table's block effect;
        # full="a" keeps a cache replayed without the second full-pool call readable (then only variant A)
        table = pair_effects(loo, mode="loo", K=main_k, full="a")
        result = {**crossfit_keep_or_remove(table, seed=seed, n_resamples=n_resamples, n_shuffles=n_shuffles,
                                            complete_only=complete_only, confidence=confidence,
                                            control_draw=control_draw), "K": main_k}
    except ValueError as exc:
        raise ConfigError(f"{cache.dir}: {exc}") from None
    out = Path(out) if out is not None else cache.dir / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    result = jsonable(result)
    write_json(out / "crossfit.json", result)
    result["path"] = str(out / "crossfit.json")
    return result


# -- Markdown -------------------------------------------------------------------------------------------------------
def _pct(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * float(value):.{digits}f}%"


def _interval(entry: Mapping[str, Any] | None, scale: float = 100.0, unit: str = "") -> str:
    if not entry or entry.get("mean") is None:
        return "-"
    low, high = entry.get("low"), entry.get("high")
    text = f"{scale * entry['mean']:+.2f}{unit}"
    if low is not None and high is not None:
        text += f" [{scale * low:+.2f}, {scale * high:+.2f}]"
    return text


def report_markdown(report: Mapping[str, Any]) -> str:
    """The analysis report as Markdown."""
    lines = ["# DHD replay analysis", "", f"Cache: `{report['cache']}`; {report['n_problems']} problems, "
             f"{report['n_blocks']} replay blocks.", "", "## Arm accuracy", "",
             "| mode / K / arm | accuracy | evaluable | operational failures |", "|---|---|---|---|"]
    for key, entry in report["arms"].items():
        lines.append(f"| {key} | {_pct(entry['accuracy'])} | {entry['n']} | {entry['failures']} |")
    for mode, section in report["modes"].items():
        title = "In-pool leave-one-out" if mode == "loo" else "Single-message replay"
        lines += ["", f"## {title} (K={section['K']}, {section['n_messages']} messages, {section['n_blocks']} "
                  "blocks)", ""]
        if "disagreement" in section:
            d = section["disagreement"]
            lines.append(f"Full-pool repeat disagreement: {_pct(d.get('rate'))} "
                         f"[{_pct(d.get('low'))}, {_pct(d.get('high'))}] over {d.get('n')} pairs "
                         f"({d.get('n_failed')} with a failed replay).")
            lines.append("")
        null = section["permutation_null"]
        if "effect" in section:
            lines += [f"Block effect: {section['effect']['definition']}.", ""]
        failures = section.get("failures")
        if failures:
            lines += [f"Failed calls: {failures['n_failed_calls']} (never imputed): "
                      f"{failures['blocks_without_baseline']} problem-blocks without their full-pool outcome(s), "
                      f"{failures['message_blocks_lost']} message-blocks not evaluable; "
                      f"{failures['n_missing_blocks']} blocks not finished.", ""]
        multi = section.get("multiplicity", {})
        fdr = section["fdr"]
        counts = fdr.get("counts", {})
        lines += ["| group | observed | permutation null (95%) | BH (messages) | BY (messages) | BH (problems) | "
                  "BY (problems) | strict |", "|---|---|---|---|---|---|---|---|"]
        for group in ("W+", "W-", "C+", "C-", "separated"):
            rng = null["null"][group]
            lines.append(f"| {group} | {null['observed'][group]} | [{rng['low']}, {rng['high']}] | "
                         f"{counts.get('bh', {}).get(group, '-')} | {counts.get('by', {}).get(group, '-')} | "
                         f"{multi.get('bh', {}).get(group, '-')} | {multi.get('by', {}).get(group, '-')} | "
                         f"{section['strict'].get(group, '-')} |")
        kind = "within-block permutations" if null.get("null_kind", "block") == "block" else "per-message sign flips"
        lines += ["", f"Permutation p-value of the separated count: {null['p_value']:.4f} "
                  f"({null['n_permutations']} {kind}). Strict messages (every block evaluable): "
                  f"{section['strict']['n_strict']} of {section['strict']['n_messages']}.", ""]
        kind = ("exact within-block permutation" if fdr.get("p_values") == "within-block permutation"
                else "exact sign-flip")
        lines += [f"BH/BY (messages), the paper's Table 19 column: {kind} p-values of {fdr['n_tests']} messages, "
                  f"q = {fdr['q']}; BH {fdr['n_bh']}, BY {fdr['n_by']} selected.", ""]
        if multi:
            lines += [f"BH/BY (problems): problem-level max statistics ({multi['n_tested_problems']} complete "
                      f"problems, {multi['n_excluded']} excluded; {multi['n_permutations']} permutations per pattern, "
                      f"q = {multi['q']}); off-diagonal BH {multi['bh']['off_diagonal']}, any-effect BH "
                      f"{multi['bh']['any_effect']}.", ""]
        boot = section["bootstrap"]
        lines += ["| mean value estimate (pp) | wrong-answer messages | correct-answer messages | correct - wrong |",
                  "|---|---|---|---|",
                  f"| hierarchical bootstrap | {_interval(boot.get('wrong'))} | {_interval(boot.get('correct'))} | "
                  f"{_interval(boot.get('difference'))} |", ""]
        lines += ["Flip direction (helpful vs harmful among pairs that change final correctness):", "",
                  "| proposal | flips / evaluable | flip rate | helpful share | harmful share |",
                  "|---|---|---|---|---|"]
        for name, entry in section["flip_direction"].items():
            lines.append(f"| {name} | {entry['n_flips']} / {entry['n_evaluable']} | {_pct(entry['flip_rate'])} | "
                         f"{_pct(entry['helpful_share'])} | {_pct(entry['harmful_share'])} |")
    planted = recall_markdown(report.get("planted_truth") or {})
    lines += ["", *planted] if planted else []
    rates = report.get("loo_rates_by_K")
    if rates:
        lines += ["", "## Per-message LOO rates by K", "", "| K | eligible | W+ | W- | C+ | C- |",
                  "|---|---|---|---|---|---|"]
        for size, entry in rates.items():
            lines.append(f"| {size} | {entry['n_eligible']} | " + " | ".join(_pct(entry[g]) for g in
                                                                              ("W+", "W-", "C+", "C-")) + " |")
    paths = report.get("paths", {})
    charts = [f"![{name}]({Path(paths[name]).name})" for name in ("flip_direction_chart", "loo_rates_chart")
              if name in paths]
    if charts:
        lines += ["", "## Charts", "", *charts]
    lines += ["", f"Labels: `{Path(paths.get('labels', 'labels.jsonl')).name}` (one line per problem, message and "
              "mode).", ""]
    return "\n".join(lines)


def load_labels(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a labels file (for ``dhd mask --labels``)."""
    rows = read_jsonl(path)
    for number, row in enumerate(rows, start=1):
        for field in ("problem_id", "message_id"):
            if row.get(field) is None:
                raise InputError("is missing (a labels row needs problem_id and message_id)", file=str(path),
                                 record=number, field=field)
    return rows
