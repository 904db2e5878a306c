"""DHD permutation-null calibration at the paper's size: 5,000 messages x 5 blocks x 5,000 permutations.

Times :func:`groundstate.eval.dhd.values.permutation_null` (vectorized: one random bit pattern per message and
permutation, a popcount and a lookup in the separation rule's table) on two synthetic tables of 1,000 problems x 5
messages x 5 blocks: *realistic* (most blocks neutral, as with a few-percent replay disagreement, plus planted
repeatable messages) and *dense* (every block flips either way with probability 1/2, so every message can change
group: the worst case). The same null computed by a plain Python loop (per permutation, message and block, reading
the same rule table) is timed on a subsample (200 messages x 200 permutations by default) and extrapolated to the full
size; the speedup is the ratio. A naive loop that recomputes each flipped message's interval with
``scipy.stats.bootstrap`` (what the rule means, without the lookup table) is timed on 100 calls and extrapolated too.
Also timed at the same size: ``message_values``, ``hierarchical_bootstrap`` (2,000 resamples) and
``crossfit_keep_or_remove``. Prints a table and writes ``bench/results/dhd_null.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.eval.dhd.bootstrap import hierarchical_bootstrap
from groundstate.eval.dhd.crossfit import crossfit_keep_or_remove
from groundstate.eval.dhd.effects import EffectTable, pair_effects
from groundstate.eval.dhd.values import message_values, permutation_null, separation_rule

OUT = Path(__file__).parent / "results" / "dhd_null.json"


def synthetic_table(n_problems: int, k: int, n_blocks: int, dense: bool, seed: int = 0) -> EffectTable:
    """Ternary effects; realistic: 8% symmetric flips per block and 4% planted repeatable messages."""
    rng = np.random.default_rng(seed)
    n = n_problems * k
    if dense:
        plus = minus = np.full(n, 0.5)
    else:
        planted = np.where(rng.random(n) < 0.04, rng.choice([-1, 1], n), 0)
        plus = np.where(planted == 1, 0.7, np.where(planted == -1, 0.02, 0.04))
        minus = np.where(planted == -1, 0.7, np.where(planted == 1, 0.02, 0.04))
    u = rng.random((n, n_blocks))
    effects = np.where(u < plus[:, None], 1.0, np.where(u < (plus + minus)[:, None], -1.0, 0.0))
    keys = [(f"p{i // k}", i % k) for i in range(n)]
    return EffectTable(keys=keys, effects=effects, proposal_correct=list(rng.random(n) < 0.6), problem_index=None)


def loo_rows(n_problems: int, k: int, n_blocks: int, seed: int = 0) -> list[dict[str, Any]]:
    """LOO pair rows with a shared full-pool outcome per block (for the cross-fit timing)."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_problems):
        base = rng.uniform(0.5, 0.95)
        harmful = int(rng.integers(k)) if rng.random() < 0.2 else -1
        pool = base - 0.4 if harmful >= 0 else base
        proposal = rng.random(k) < 0.6
        for b in range(n_blocks):
            full = int(rng.random() < pool)
            for m in range(k):
                rows.append({"problem_id": f"p{p}", "message_id": m, "mode": "loo", "K": k, "block": b,
                             "with_correct": full, "without_correct": int(rng.random() < (base if m == harmful
                                                                                           else pool)),
                             "proposal_correct": bool(proposal[m])})
    return rows


def loop_null(table: EffectTable, n_messages: int, n_permutations: int, seed: int = 0) -> tuple[float, list[float]]:
    """The same null with plain Python loops over permutations, messages and blocks; returns (seconds, mean counts).

    Uses the same separation rule table (as nested Python lists), so only the looping differs.
    """
    rule = separation_rule(table.n_blocks).direction.tolist()
    effects = table.effects[:n_messages].tolist()
    code = table.proposal_code[:n_messages].tolist()
    rnd = random.Random(seed)
    totals = [0.0] * 4
    started = time.perf_counter()
    for _ in range(n_permutations):
        counts = [0, 0, 0, 0]
        for i in range(n_messages):
            if code[i] < 0:
                continue
            n_eval = n_plus = n_minus = 0
            for e in effects[i]:
                if e != e:  # NaN: not evaluable
                    continue
                n_eval += 1
                if e != 0:
                    if rnd.random() < 0.5:
                        e = -e
                    if e > 0:
                        n_plus += 1
                    else:
                        n_minus += 1
            direction = rule[n_eval][n_plus][n_minus]
            if direction:
                counts[2 * code[i] + (0 if direction > 0 else 1)] += 1
        for g in range(4):
            totals[g] += counts[g]
    return time.perf_counter() - started, [t / n_permutations for t in totals]


def naive_null(table: EffectTable, n_messages: int, n_permutations: int, seed: int = 0) -> float:
    """Seconds for the most naive loop: flip, then recompute each message's interval with scipy.stats.bootstrap."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    for _ in range(n_permutations):
        for i in range(n_messages):
            effects = table.effects[i][~np.isnan(table.effects[i])]
            flipped = np.sort(effects * rng.choice([-1.0, 1.0], len(effects)))
            if len(flipped) >= 2 and not np.all(flipped == flipped[0]):
                stats.bootstrap((flipped,), np.mean, n_resamples=9999, method="percentile",
                                rng=np.random.default_rng(0))
    return time.perf_counter() - started


def exact_null_means(table: EffectTable) -> list[float]:
    """Exact expected W+, W-, C+, C- null counts (binomial enumeration of the flips of each message)."""
    from scipy import stats

    rule = separation_rule(table.n_blocks).direction
    n_eval = (~np.isnan(table.effects)).sum(axis=1)
    n_nz = (np.nan_to_num(table.effects) != 0).sum(axis=1)
    means = [0.0] * 4
    for code, e, z in zip(table.proposal_code.tolist(), n_eval, n_nz, strict=True):
        if code < 0:
            continue
        k = np.arange(z + 1)
        weight = stats.binom.pmf(k, z, 0.5)
        direction = rule[e, k, z - k]
        means[2 * code] += float(weight[direction > 0].sum())
        means[2 * code + 1] += float(weight[direction < 0].sum())
    return means


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=1000, help="problems (5 messages each; default 1000)")
    parser.add_argument("--blocks", type=int, default=5, help="repeat blocks (default 5)")
    parser.add_argument("--permutations", type=int, default=5000, help="permutations (default 5000)")
    parser.add_argument("--loop-messages", type=int, default=200, help="plain-loop subsample: messages (200)")
    parser.add_argument("--loop-permutations", type=int, default=200, help="plain-loop subsample: permutations (200)")
    parser.add_argument("--naive-calls", type=int, default=100, help="naive scipy-per-message loop: calls (100)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats, best kept (default 3)")
    args = parser.parse_args()
    k = 5
    n_messages = args.problems * k
    started = time.perf_counter()
    separation_rule(args.blocks)
    rule_seconds = time.perf_counter() - started
    results: dict[str, Any] = {
        "size": {"problems": args.problems, "messages": n_messages, "blocks": args.blocks,
                 "permutations": args.permutations},
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "processor": platform.machine()},
        "rule_table_seconds": rule_seconds, "cases": {},
    }
    for case, dense in (("realistic", False), ("dense", True)):
        table = synthetic_table(args.problems, k, args.blocks, dense)
        seconds, null = best_of(lambda t=table: permutation_null(t, n_permutations=args.permutations, seed=0),
                                args.repeats)
        loop_seconds, loop_means = loop_null(table, args.loop_messages, args.loop_permutations)
        per_cell = loop_seconds / (args.loop_messages * args.loop_permutations)
        extrapolated = per_cell * n_messages * args.permutations
        subsample = table.select(np.arange(n_messages) < args.loop_messages)
        sub = permutation_null(subsample, n_permutations=args.permutations, seed=1)
        naive = naive_null(table, args.naive_calls, 1) / args.naive_calls * n_messages * args.permutations
        results["cases"][case] = {
            "vectorized_seconds": seconds, "n_active": null["n_active"], "observed": null["observed"],
            "null_separated": null["null"]["separated"], "p_value": null["p_value"],
            "loop_seconds_subsample": loop_seconds,
            "loop_subsample": {"messages": args.loop_messages, "permutations": args.loop_permutations},
            "loop_seconds_extrapolated": extrapolated, "speedup": extrapolated / seconds,
            "naive_scipy_loop_seconds_extrapolated": naive, "naive_speedup": naive / seconds,
            "check_null_means_on_loop_subsample": {
                "exact": exact_null_means(subsample), "loop": loop_means,
                "vectorized": [sub["null"][g]["mean"] for g in ("W+", "W-", "C+", "C-")]},
        }
    table = synthetic_table(args.problems, k, args.blocks, dense=False)
    values_seconds, values = best_of(lambda: message_values(table), args.repeats)
    boot_seconds, _ = best_of(lambda: hierarchical_bootstrap(table, values, n_resamples=2000), 1)
    loo = pair_effects(loo_rows(args.problems, k, args.blocks))
    crossfit_seconds, crossfit = best_of(lambda: crossfit_keep_or_remove(loo, n_resamples=2000, n_shuffles=1000), 1)
    results["other_seconds"] = {"message_values": values_seconds, "hierarchical_bootstrap (2000 resamples)":
                                boot_seconds, "crossfit_keep_or_remove (2000 resamples, 2 x 1000 shuffles)":
                                crossfit_seconds}
    results["crossfit_gain"] = crossfit["gain"]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    view = Table(title=f"DHD permutation null: {n_messages:,} messages x {args.blocks} blocks x "
                       f"{args.permutations:,} permutations")
    columns = ("table", "active msgs", "vectorized", "plain loop", "speedup", "naive scipy loop", "observed [null]")
    for column in columns:
        view.add_column(column, justify="left" if column == "table" else "right")
    for case, entry in results["cases"].items():
        sep = entry["null_separated"]
        view.add_row(case, f"{entry['n_active']:,}", f"{entry['vectorized_seconds']:.2f} s",
                     f"{entry['loop_seconds_extrapolated']:.1f} s", f"{entry['speedup']:,.0f}x",
                     f"{entry['naive_scipy_loop_seconds_extrapolated'] / 3600:,.1f} h",
                     f"{entry['observed']['separated']} [{sep['low']}, {sep['high']}]")
    console = Console(width=120)
    console.print(view)
    console.print(f"rule table (scipy, once per B): {rule_seconds:.2f} s. Loops extrapolated to the full size: plain "
                  f"loop (same rule table) timed on {args.loop_messages} messages x {args.loop_permutations} "
                  f"permutations; naive loop (scipy.stats.bootstrap per message and permutation) on "
                  f"{args.naive_calls} calls")
    for name, seconds in results["other_seconds"].items():
        console.print(f"{name}: {seconds:.2f} s")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
