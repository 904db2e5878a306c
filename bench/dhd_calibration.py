"""DHD calibration and power on the real design (issue 15): nulls, BH/BY, recall, bootstrap coverage, timings.

Every data set is drawn from the generative model of :mod:`groundstate.eval.dhd.simulate` (problems with their own
accuracies; per block two full-pool calls shared by the five messages and five removal calls; planted effects shift
chosen messages' removal accuracy). Measured:

- ``null_calibration``: on null data sets, the share whose observed separated count leaves the null's 95% range
  (target <= 0.075), for the within-block permutation null (``block``, the default), the per-message sign flip on the
  same block effects (``sign_flip``) and the sign flip on replicate-A effects (``sign_flip_replicate_a``: the
  statistics before issue 15), in three accuracy scenarios (the realistic default of ``dhd simulate`` among them).
- ``fdr_under_null``: under the global null every selection is false, so the FDR is the chance that a data set has
  any selection; the flag is the unit tests' criterion, that share <= q + 3 standard errors of the number of data
  sets (before issue 25 it compared the mean number of selections with q x tested, which cannot fail). Measured for
  the per-message BH and BY on exact within-block permutation p-values (Table 19's column), the per-message sign-flip
  p-values (contrast: they cannot select at 5 blocks) and the problem-level BH and BY per family, on the realistic
  default and on uniform accuracies.
- ``power``: recall of planted effects at 5 and 10 blocks on the realistic default of ``dhd simulate`` (issue 25: a
  U-shaped mix of problem accuracies, about 7% identical-input disagreement, proposals right more often on easy
  problems): per message (separated in the planted direction by the interval rule, with the paper's block effect and
  with replicate A only; selected by the per-message BH of Table 19's column, overall and among planted effects
  whose true value is at least 0.5 in size) and per problem (BH-selected in the planted family), with the null
  messages' false separation share and the false share of the selections.
- ``bootstrap_coverage``: how often the hierarchical bootstrap's 95% interval covers the true mean value of
  wrong- and correct-proposal messages (and their difference); target >= 0.95 - 3 SE.
- ``timing_seconds``: the statistics at the paper's size (1,000 problems x 5 messages x 5 blocks) and a simulated
  cache written and analysed end to end with the defaults (``bench/dhd_null.py`` used to time the old null; this
  bench replaces it).

``--quick`` runs fewer data sets (same fields) in a few seconds. Prints a table and writes
``bench/results/dhd_calibration.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from groundstate.eval.dhd.analysis import analyze
from groundstate.eval.dhd.bootstrap import hierarchical_bootstrap
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.message_tests import block_permutation_p_values
from groundstate.eval.dhd.multiplicity import multiplicity
from groundstate.eval.dhd.simulate import DesignSpec, PlantedEffect, simulate, write_cache
from groundstate.eval.dhd.values import fdr_selection, message_values, permutation_null

OUT = Path(__file__).parent / "results" / "dhd_calibration.json"
NULL_TARGET = 0.075
Q = 0.05
SCENARIOS = {"realistic default": {},
             "accuracy U(0, 1)": {"accuracy": (1.0, 1.0)},
             "accuracy U(0.3, 0.7)": {"accuracy": (1.0, 1.0), "accuracy_range": (0.3, 0.7)}}
FDR_SCENARIOS = ("realistic default", "accuracy U(0, 1)")
POWER_EFFECTS = tuple(PlantedEffect(g, 0.1, 0.5) for g in ("W+", "W-", "C+", "C-"))
STRONG_EFFECTS = (PlantedEffect("W+", 0.1, 1.0), PlantedEffect("C+", 0.1, 1.0))  # removal always fails
COVERAGE_EFFECTS = (PlantedEffect("W-", 0.15, 0.5), PlantedEffect("C+", 0.15, 0.5))


def wilson(k: int, n: int) -> dict[str, float]:
    ci = stats.binomtest(k, n).proportion_ci(method="wilson")
    return {"share": k / n, "low": float(ci.low), "high": float(ci.high), "n": n}


def null_calibration(n_sets: int, n_problems: int, n_permutations: int) -> dict[str, Any]:
    out = {}
    for name, settings in SCENARIOS.items():
        spec = DesignSpec(n_problems=n_problems, **settings)
        outside = {"block": 0, "sign_flip": 0, "sign_flip_replicate_a": 0}
        for seed in range(n_sets):
            sim = simulate(spec, seed)
            for key, table, null in (("block", sim.table(), "block"), ("sign_flip", sim.table(), "sign-flip"),
                                     ("sign_flip_replicate_a", sim.table(full="a"), "sign-flip")):
                res = permutation_null(table, n_permutations=n_permutations, seed=seed, null=null)
                rng = res["null"]["separated"]
                outside[key] += not rng["low"] <= res["observed"]["separated"] <= rng["high"]
        shares = {key: wilson(k, n_sets) for key, k in outside.items()}
        out[name] = {"n_datasets": n_sets, "n_problems": n_problems, "n_permutations": n_permutations,
                     "outside_share": {k: v["share"] for k, v in shares.items()}, "outside_interval": shares,
                     "target": NULL_TARGET, "met": shares["block"]["share"] <= NULL_TARGET}
    return out


def any_limit(n_sets: int) -> float:
    """The flag's bound on the share of null data sets with any selection: q + 3 standard errors."""
    return Q + 3 * math.sqrt(Q * (1 - Q) / n_sets)


def tally(counts: dict[str, dict[str, int]], key: str, selected: int, tested: int) -> None:
    entry = counts.setdefault(key, {"selected": 0, "tested": 0, "any": 0})
    entry["selected"] += selected
    entry["tested"] += tested
    entry["any"] += selected > 0


def fdr_under_null(n_sets: int, n_problems: int, n_permutations: int) -> dict[str, Any]:
    limit = any_limit(n_sets)
    out: dict[str, Any] = {"n_datasets": n_sets, "n_problems": n_problems, "n_permutations": n_permutations, "q": Q,
                           "limit_share_any": limit, "scenarios": {}}
    for name in FDR_SCENARIOS:
        spec = DesignSpec(n_problems=n_problems, **SCENARIOS[name])
        counts: dict[str, dict[str, int]] = {}
        for seed in range(n_sets):
            table = simulate(spec, 10_000 + seed).table()
            res = multiplicity(table, n_permutations=n_permutations, seed=seed, q=Q)
            for family, info in res["families"].items():
                tally(counts, f"problem {family} BH", info["n_bh"], info["n_tested"])
                tally(counts, f"problem {family} BY", info["n_by"], info["n_tested"])
            for kind, p_values in (("message (within-block)", block_permutation_p_values(table)),
                                   ("message (sign flip)", message_values(table)["p_value"])):
                selection = fdr_selection(p_values, q=Q)
                tally(counts, f"{kind} BH", selection["n_bh"], selection["n_tests"])
                tally(counts, f"{kind} BY", selection["n_by"], selection["n_tests"])
        out["scenarios"][name] = {
            key: {"mean_selected": c["selected"] / n_sets, "mean_tested": c["tested"] / n_sets,
                  "share_any": wilson(c["any"], n_sets), "met": c["any"] / n_sets <= limit}
            for key, c in counts.items()}
    out["met"] = all(entry["met"] for scenario in out["scenarios"].values() for entry in scenario.values())
    return out


def power(n_sets: int, n_problems: int, n_permutations: int) -> dict[str, Any]:
    out = {}
    for name, n_blocks in (("5", 5), ("10", 10), ("5_strong", 5), ("10_strong", 10)):
        effects = STRONG_EFFECTS if "strong" in name else POWER_EFFECTS
        spec = DesignSpec(n_problems=n_problems, n_blocks=n_blocks, effects=effects)  # the realistic default
        found = {"mean": 0, "replicate_a": 0}
        n_planted = wrong_sign = null_separated = n_null = 0
        groups = ("W+", "W-", "C+", "C-")
        bh_found, bh_planted = dict.fromkeys(groups, 0), dict.fromkeys(groups, 0)
        bh_false = bh_selected = 0
        message_found, message_found_big, n_big, message_false, message_selected = 0, 0, 0, 0, 0
        values_true = []
        for seed in range(n_sets):
            sim = simulate(spec, 20_000 + 100 * n_blocks + seed)
            planted = sim.planted.ravel()
            truth_value = np.abs(sim.true_value.ravel())
            values_true.extend(truth_value[planted != 0])
            table = sim.table()
            for key, full in (("mean", "mean"), ("replicate_a", "a")):
                direction = message_values(sim.table(full=full))["direction"].to_numpy()
                found[key] += int((direction[planted != 0] == planted[planted != 0]).sum())
                if key == "mean":
                    wrong_sign += int((direction * planted < 0).sum())
                    null_separated += int((direction[planted == 0] != 0).sum())
            n_planted += int((planted != 0).sum())
            n_null += int((planted == 0).sum())
            chosen = fdr_selection(block_permutation_p_values(table), q=Q)["bh"]
            big = (planted != 0) & (truth_value >= 0.5)
            message_found += int((chosen & (planted != 0)).sum())
            message_found_big += int((chosen & big).sum())
            n_big += int(big.sum())
            message_false += int((chosen & (planted == 0)).sum())
            message_selected += int(chosen.sum())
            res = multiplicity(table, n_permutations=n_permutations, seed=seed, q=Q)
            ids = sim.problem_ids
            for group in groups:
                klass, sign = group[0] == "C", 1 if group[1] == "+" else -1
                hit = ((sim.planted == sign) & (sim.proposal == klass)).any(axis=1)
                truth = {ids[p] for p in np.flatnonzero(hit)}
                picked = {s["problem_id"] for s in res["families"][group]["selected_bh"]}
                bh_found[group] += len(picked & truth)
                bh_planted[group] += len(truth)
                bh_false += len(picked - truth)
                bh_selected += len(picked)
        out[name] = {
            "n_blocks": n_blocks, "strong": "strong" in name, "n_datasets": n_sets, "n_problems": n_problems,
            "n_planted": n_planted,
            "mean_abs_true_value": float(np.mean(values_true)),
            "recall_rule": {k: v / n_planted for k, v in found.items()}, "wrong_sign": wrong_sign,
            "null_separated_share": null_separated / n_null,
            "recall_message_bh": message_found / max(n_planted, 1),
            "recall_message_bh_true_value_at_least_0.5": message_found_big / max(n_big, 1),
            "message_bh_false_selection_share": message_false / max(message_selected, 1),
            "recall_bh": {g: bh_found[g] / max(bh_planted[g], 1) for g in bh_found},
            "n_planted_by_group": bh_planted,
            "bh_false_selection_share": bh_false / max(bh_selected, 1)}
    return {"design": "the realistic default of dhd simulate (Beta(0.15, 0.06) accuracies, proposals correct with "
                      "probability 0.05 + 0.8 x accuracy)",
            "effects": [f"{e.group}:{e.share}:{e.size}" for e in POWER_EFFECTS],
            "strong_effects": [f"{e.group}:{e.share}:{e.size}" for e in STRONG_EFFECTS], "blocks": out}


def bootstrap_coverage(n_sets: int, n_problems: int, n_resamples: int) -> dict[str, Any]:
    spec = DesignSpec(n_problems=n_problems, accuracy=(2.0, 1.0), effects=COVERAGE_EFFECTS)
    big = simulate(DesignSpec(**{**spec.as_dict(), "n_problems": 200_000, "effects": COVERAGE_EFFECTS}), 99)
    value = big.true_value
    truth = {"wrong": float(value[~big.proposal].mean()), "correct": float(value[big.proposal].mean())}
    truth["difference"] = truth["correct"] - truth["wrong"]
    hits = dict.fromkeys(truth, 0)
    for seed in range(n_sets):
        table = simulate(spec, 30_000 + seed).table()
        res = hierarchical_bootstrap(table, message_values(table), n_resamples=n_resamples, seed=seed)
        for name in truth:
            hits[name] += res[name]["low"] <= truth[name] <= res[name]["high"]
    target = 0.95 - 3 * math.sqrt(0.95 * 0.05 / n_sets)
    coverage = {name: hits[name] / n_sets for name in truth}
    return {"n_datasets": n_sets, "n_problems": n_problems, "n_resamples": n_resamples, "truth": truth,
            "effects": [f"{e.group}:{e.share}:{e.size}" for e in COVERAGE_EFFECTS], "coverage": coverage,
            "target": target, "met": all(coverage[g] >= target for g in ("wrong", "correct"))}


def timed(fn) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def timings(n_problems: int) -> dict[str, float]:
    sim = simulate(DesignSpec(n_problems=n_problems, effects=POWER_EFFECTS), 7)
    table = sim.table()
    out = {}
    out["message_values"], values = timed(lambda: message_values(table))
    out["permutation_null block (5000)"], _ = timed(lambda: permutation_null(table, 5000))
    out["permutation_null sign-flip (5000)"], _ = timed(lambda: permutation_null(table, 5000, null="sign-flip"))
    out["multiplicity (100000 per pattern)"], _ = timed(lambda: multiplicity(table, 100_000))
    out["hierarchical_bootstrap (2000)"], _ = timed(lambda: hierarchical_bootstrap(table, values, 2000))
    with tempfile.TemporaryDirectory() as tmp:
        out["simulate + write_cache"], _ = timed(lambda: write_cache(sim, Path(tmp) / "c"))
        out["analyze (defaults)"], _ = timed(lambda: analyze(MessageCache(Path(tmp) / "c")))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer data sets (a few seconds), same fields")
    args = parser.parse_args()
    if args.quick:
        sizes = {"null": (30, 150, 300), "fdr": (20, 60, 4000), "power": (3, 100, 4000), "coverage": (20, 60, 300),
                 "timing": 200}
    else:
        sizes = {"null": (200, 300, 500), "fdr": (200, 200, 20_000), "power": (20, 200, 20_000),
                 "coverage": (200, 100, 1000), "timing": 1000}
    started = time.perf_counter()
    results: dict[str, Any] = {"quick": args.quick, "sizes": sizes,
                               "machine": {"python": platform.python_version(), "numpy": np.__version__,
                                           "processor": platform.machine()}}
    results["null_calibration"] = null_calibration(*sizes["null"])
    results["fdr_under_null"] = fdr_under_null(*sizes["fdr"])
    results["power"] = power(*sizes["power"])
    results["bootstrap_coverage"] = bootstrap_coverage(*sizes["coverage"])
    results["timing_seconds"] = {"n_problems": sizes["timing"], **timings(sizes["timing"])}
    results["targets_met"] = {
        **{f"null in range ({name})": entry["met"] for name, entry in results["null_calibration"].items()},
        "BH/BY under the null (share of data sets with any selection)": results["fdr_under_null"]["met"],
        "bootstrap coverage (W, C)": results["bootstrap_coverage"]["met"]}
    results["seconds"] = time.perf_counter() - started
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    report(results)
    print(f"wrote {OUT}")
    return 0


def report(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    view = Table(title="DHD calibration on the real design" + (" (quick)" if results["quick"] else ""))
    for column in ("measure", "value", "target", "met"):
        view.add_column(column, justify="left" if column == "measure" else "right")
    for name, entry in results["null_calibration"].items():
        share = entry["outside_share"]
        view.add_row(f"separated count outside 95% null, {name} ({entry['n_datasets']} sets): within-block",
                     f"{share['block']:.3f}", f"<= {NULL_TARGET}", "yes" if entry["met"] else "NO")
        view.add_row("  same data, per-message sign flip / sign flip on replicate A (old)",
                     f"{share['sign_flip']:.3f} / {share['sign_flip_replicate_a']:.3f}", "(contrast)", "")
    fdr = results["fdr_under_null"]
    for scenario, entries in fdr["scenarios"].items():
        for key, f in entries.items():
            view.add_row(f"null: data sets with any selection, {key}, {scenario} ({f['mean_tested']:.0f} tested)",
                         f"{f['share_any']['share']:.3f}", f"<= {fdr['limit_share_any']:.3f}",
                         "yes" if f["met"] else "NO")
    for entry in results["power"]["blocks"].values():
        recall = entry["recall_rule"]
        kind = "strong effects" if entry["strong"] else "planted effects"
        view.add_row(f"recall, {kind} (|value| {entry['mean_abs_true_value']:.2f}), {entry['n_blocks']} blocks: "
                     "rule (A+B)/2 / A only",
                     f"{recall['mean']:.3f} / {recall['replicate_a']:.3f}", "", "")
        view.add_row(f"  per-message BH recall (Table 19's column): all / true value >= 0.5 (false share "
                     f"{entry['message_bh_false_selection_share']:.3f})",
                     f"{entry['recall_message_bh']:.2f} / {entry['recall_message_bh_true_value_at_least_0.5']:.2f}",
                     "", "")
        bh = entry["recall_bh"]
        groups = [g for g in ("W+", "W-", "C+", "C-") if entry["n_planted_by_group"][g]]
        view.add_row(f"  problem-level BH recall {'/'.join(groups)} (false share "
                     f"{entry['bh_false_selection_share']:.3f})", " / ".join(f"{bh[g]:.2f}" for g in groups), "", "")
    cov = results["bootstrap_coverage"]
    view.add_row(f"hierarchical bootstrap coverage W / C / C-W ({cov['n_datasets']} sets)",
                 " / ".join(f"{cov['coverage'][g]:.3f}" for g in ("wrong", "correct", "difference")),
                 f">= {cov['target']:.3f}", "yes" if cov["met"] else "NO")
    console.print(view)
    timing = results["timing_seconds"]
    console.print(f"timings at {timing['n_problems']} problems x 5 messages x 5 blocks: " + ", ".join(
        f"{name} {seconds:.2f} s" for name, seconds in timing.items() if name != "n_problems"))
    console.print(f"total {results['seconds']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
