"""Consilience with simulated agents: coverage, whether control pays, and what exploration/calibration cost.

1. Coverage: calibrate the rule controller on one set of generated travel tasks, run held-out tasks with the
   same configuration, and report, per round, the share of proposals within the threshold (target
   1 - alpha; rounds with >= 50 calibration trajectories are checked against 1 - alpha - 3 SE).
2. Control pays: task accuracy, vote accuracy and mean messages (one per controlled round) of Hidden-Pre,
   Hidden-Post, Full-Info, Rules, MLP and LLM-free ablations (one action removed, other routers, sampling
   from the conformal set, MLP without a feature group; the ablations run without a calibrator) on
   held-out tasks. Reported as the simulator gives them (the paper's Table 2, with LLM agents: Hidden-Pre
   0.25, Hidden-Post 0.50, Full-Info 0.37, Rules 0.65).
3. Cost: exploration and calibration on 500 simulated tasks (target: under a minute here).

Usage: ``python bench/consilience.py [--n-test 300]``; prints tables, writes bench/results/consilience.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.coverage import coverage
from groundstate.eval.consilience.evaluate import run_tasks
from groundstate.optimizers.consilience import Configuration, calibrate, explore_tasks, features_without
from groundstate.optimizers.consilience import train_controller as fit_mlp
from groundstate.programs.consilience.consilience import Consilience
from groundstate.programs.consilience.control import RuleController, build_controller
from groundstate.programs.consilience.protocols import run_discussion
from groundstate.programs.consilience.simulated import SimParams, SimTeam

OUT = Path(__file__).parent / "results" / "consilience.json"
ALPHA = 0.1
MAX_ROUNDS = 10


def summarize(predictions, tasks) -> dict:
    """Task accuracy, vote accuracy pooled over all votes (§4.2) and mean rounds."""
    votes = [(v["vote"], t.correct) for p, t in zip(predictions, tasks, strict=True) for v in p.votes]
    return {"task_accuracy": float(np.mean([p.correct for p in predictions])),
            "vote_accuracy": sum(v == gold for v, gold in votes) / max(1, len(votes)),
            "rounds": float(np.mean([p.rounds for p in predictions]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--n-cost", type=int, default=500)
    args = parser.parse_args()
    team = SimTeam(SimParams(), seed=0)
    train = generate_hidden_travel(200, seed=101)
    cal = generate_hidden_travel(500, seed=102)
    test = generate_hidden_travel(args.n_test, seed=103)
    results: dict = {}

    # 3. cost (also produces the MLP's data and the rule controller's calibration)
    cost_tasks = generate_hidden_travel(args.n_cost, seed=104)
    started = time.perf_counter()
    rows = explore_tasks(cost_tasks, team, max_rounds=MAX_ROUNDS)
    explore_s = time.perf_counter() - started
    started = time.perf_counter()
    calibrate(cost_tasks, team, RuleController(), Configuration("rules", max_rounds=MAX_ROUNDS), alpha=ALPHA)
    calibrate_s = time.perf_counter() - started
    results["cost"] = {"tasks": args.n_cost, "explore_s": explore_s, "calibrate_s": calibrate_s,
                       "total_s": explore_s + calibrate_s, "explored_states": len(rows), "target_s": 60}

    # 1. coverage
    config = Configuration("rules", max_rounds=MAX_ROUNDS)
    calibrator = calibrate(cal, team, RuleController(), config, alpha=ALPHA)
    held_out = Consilience(team, RuleController(), max_rounds=MAX_ROUNDS)
    cov = coverage(calibrator, [p.trace for p in run_tasks(held_out, test)], min_calibration=50)
    results["coverage"] = {"alpha": ALPHA, "rounds": cov, "all_checked_ok": all(r["ok"] for r in cov if r["checked"])}

    # 2. control pays
    train_rows = explore_tasks(train, team, max_rounds=MAX_ROUNDS)
    mlp = fit_mlp(train_rows)
    mlp_cal = calibrate(cal, team, build_controller("mlp", mlp), Configuration("mlp", max_rounds=MAX_ROUNDS),
                        alpha=ALPHA)
    table = {}
    for protocol in ("hidden-pre", "hidden-post", "full-info"):
        outs = [run_discussion(t, team(t), protocol, rounds=3) for t in test]
        table[protocol] = {"task_accuracy": float(np.mean([o.correct for o in outs])),
                           "vote_accuracy": float(sum(o.vote_accuracy * len(o.votes) for o in outs)
                                                  / sum(len(o.votes) for o in outs)),
                           "rounds": float(np.mean([len(o.transcript.messages) for o in outs]))}

    def consilience(label, controller, calibrator=None, **kw):
        program = Consilience(team, controller, calibrator=calibrator, max_rounds=MAX_ROUNDS, **kw)
        table[label] = summarize(run_tasks(program, test), test)

    consilience("rules", RuleController(), calibrator)
    consilience("mlp", build_controller("mlp", mlp), mlp_cal)
    for action in ("Challenge", "Clarify", "SeekEvidence", "Route"):
        consilience(f"rules - {action}", RuleController(), None, removed_actions=(action,))
    for router in ("random", "round-robin", "most-disagreeing", "most-spoken"):
        consilience(f"rules, router {router}", RuleController(), None, router=router)
    consilience("rules, sampled from conformal set", RuleController(), calibrator, sample_from_set=True)
    for group in ("belief", "information", "cost"):
        features = features_without([group])
        model = fit_mlp(train_rows, features)
        consilience(f"mlp without {group} features", build_controller("mlp", model, features))
    results["control"] = table

    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"Coverage (alpha={ALPHA}, target {1 - ALPHA:.2f}; held-out simulated trajectories)")
    for col in ("round", "n_cal", "n_test", "threshold", "coverage", "checked", "ok"):
        t.add_column(col)
    for r in cov:
        t.add_row(str(r["round"]), str(r["n_calibration"]), str(r["n_test"]),
                  "inf" if r["threshold"] is None else f"{r['threshold']:.3f}", f"{r['coverage']:.3f}",
                  str(r["checked"]), str(r["ok"]) if r["checked"] else "-")
    console.print(t)
    t = Table(title=f"Control pays? simulated agents, {args.n_test} held-out travel tasks")
    for col in ("protocol / controller", "task acc.", "vote acc.", "mean messages"):
        t.add_column(col)
    for name, row in table.items():
        t.add_row(name, f"{row['task_accuracy']:.3f}", f"{row['vote_accuracy']:.3f}", f"{row['rounds']:.2f}")
    console.print(t)
    c = results["cost"]
    console.print(f"cost: exploration {c['explore_s']:.1f}s + calibration {c['calibrate_s']:.1f}s on {c['tasks']} "
                  f"tasks = {c['total_s']:.1f}s (target < 60s)")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
