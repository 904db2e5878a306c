"""``groundstate dhd crossfit``: print the cross-fitted one-removal analysis (the paper's Tables 24-26).

The parser is defined with the other ``dhd`` commands (:mod:`groundstate.cli.dhd`); this is what the command does:
:func:`groundstate.eval.dhd.analysis.crossfit` on the cache, then one line per row (main, A, B) with the gain, its
interval and both shuffled controls, the gains by benchmark, and the excluded incomplete problems.
"""

from __future__ import annotations

import argparse
from typing import Any

from groundstate.errors import one_line
from groundstate.eval.dhd.cache import MessageCache


def cmd_crossfit(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.analysis import crossfit  # noqa: PLC0415 (--help stays light)

    result = crossfit(MessageCache(args.cache), args.report_dir, runs_dir=args.runs_dir, run_ids=args.run, k=args.k,
                      seed=args.seed, n_resamples=args.resamples, n_shuffles=args.shuffles,
                      complete_only=not args.all_problems, control_draw=args.control_draw)

    def pp(value: Any) -> str:
        return "-" if value is None else f"{100 * value:+.2f}"

    titles = {"main": "main (full pool = mean of replicates A and B)", "A": "replicate A", "B": "replicate B"}
    for name, entry in result["variants"].items():
        gain = entry["gain"]
        full, fit = entry.get("full_accuracy"), entry.get("crossfit_accuracy")
        if full is None or fit is None or gain.get("mean") is None:
            print(f"{titles[name]} (K={result['K']}): not enough complete problems")
            continue
        controls = "; ".join(f"{c.replace('_', '-')} null [{pp(v['low'])}, {pp(v['high'])}] p={v['p_value']:.3f}"
                             for c, v in entry["controls"].items())
        print(f"{titles[name]} (K={result['K']}): full {100 * full:.2f}% -> cross-fit {100 * fit:.2f}%, gain "
              f"{pp(gain['mean'])} pp [{pp(gain['low'])}, {pp(gain['high'])}] over {gain.get('n')} problems"
              + (f"; {controls}" if controls else ""))
    headline = result["variants"][result["headline"]]
    if headline["by_benchmark"]:
        print(f"gain by benchmark ({result['headline']}, pp): " + ", ".join(
            f"{one_line(label, 80)} {pp(cell['gain']['mean'])} ({cell['n_problems']} problems)"
            for label, cell in headline["by_benchmark"].items()))
    if result.get("note"):
        print(result["note"])
    if result["n_excluded_problems"]:
        shown = result["excluded_problems"][:5]
        print(f"{result['n_excluded_problems']} incomplete problems excluded, e.g. " + "; ".join(
            f"{one_line(e['problem_id'], 80)} (" + ", ".join(part for part in (
                None if e["message_id"] is None else f"message {e['message_id']}",
                None if e["block"] is None else f"block {e['block']}", e["reason"]) if part) + ")" for e in shown))
    print(f"stored in {result['path']}")
    return 0
