"""``groundstate consilience coverage | routing | ablate | generalize``: studies of a configuration, run in
memory (meant for simulated agents and small LM studies), each printing the paper's table for it. Table 6
(``ablate features``) and Table 8 (``routing``) also run durably, with the same numbers on the same inputs, as the
experiment specs ``consilience-table6`` and ``consilience-table8`` (``groundstate experiment run``; offline:
``consilience-table6-sim``, ``consilience-table8-sim``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from groundstate.cli.consilience_setup import (
    configuration_for,
    controller_named,
    load_calibrator,
    task_map,
    tasks_and_team,
    write_json_out,
)
from groundstate.errors import ConfigError
from groundstate.eval.stats import format_ci


def _print_coverage(rows: list[dict[str, Any]], title: str, caption: str = "") -> None:
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)

    cells = []
    for r in rows:
        if not r["certified"]:
            status = "uncertified"
        elif not r["checked"]:
            status = "not checked"
        else:
            status = "ok" if r["ok"] else "BELOW"
        threshold = "inf" if r["threshold"] is None else f"{r['threshold']:.4f}"
        coverage = ("- (no trajectory reached it)" if not r["n_reached"] else
                    f"{r['coverage']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]")
        cells.append([r["round"], r["n_reached"], r["n_calibration"], threshold, coverage,
                      f"{r['executed_coverage']:.3f}", status])
    print_table(cells, title=title, columns=("round", "trajectories reached", "calibration scores", "threshold",
                                              "coverage [95% exact CI]", "executed within threshold", "status"),
                caption=caption)


def cmd_coverage(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.coverage import coverage_report  # noqa: PLC0415 (heavy: scikit-learn)
    from groundstate.eval.consilience.provenance import provenance, warned_title  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.consilience import EpisodeTrace  # noqa: PLC0415 (heavy: scikit-learn)

    tasks, _, team, agents, lm = tasks_and_team(args, args.data)
    about = provenance(agents, lm)
    controller = controller_named(args.controller, args.mlp, args)
    config = configuration_for(args, args.controller, controller, team)
    calibrator = load_calibrator(args.calibrator, config)
    policies = ("calibrated", "deployed") if args.policy == "both" else (args.policy,)
    traces = {}
    for policy in policies:
        program = config.program(team, controller, calibrator=calibrator if policy == "deployed" else None,
                                 seed=args.seed)
        map_fn = task_map(args, args.controller, label=f"consilience coverage ({policy} policy)")
        traces[policy] = map_fn(EpisodeTrace(program), tasks)
    report = coverage_report(calibrator, traces.get("calibrated", []), traces.get("deployed", []),
                             args.min_calibration)
    print(f"target coverage 1 - alpha = {report['target']:.2f}; rounds with >= {args.min_calibration} calibration "
          "scores are checked against target - 3 SE; 'executed' is the share of executed actions within the "
          "threshold")
    for policy in policies:
        how = "every proposal executed" if policy == "calibrated" else "accept or replace"
        _print_coverage(report[policy], warned_title(f"{policy} policy ({how})", agents), about["agents"])
    if report["uncertified_rounds"]:
        print("uncertified rounds (too few calibration trajectories reached them; every action admissible): "
              + ", ".join(map(str, report["uncertified_rounds"])))
    write_json_out(args.json_out, {**report, "provenance": about})
    below = [(policy, r) for policy in policies for r in report[policy] if r["checked"] and not r["ok"]]
    if below:
        print(below_target_line(below, report["target"]), file=sys.stderr)
        return 1
    return 0


def below_target_line(below: list[tuple[str, dict[str, Any]]], target: float) -> str:
    """The one line (on stderr, like every failure line) saying why ``coverage`` exits 1: each checked round below
    target, with its policy, its measured coverage and the bound it missed (target - 3 SE)."""
    rounds = "; ".join(f"round {r['round']} ({policy} policy) coverage {r['coverage']:.3f} < "
                       f"{target - 3 * r['se']:.3f}" for policy, r in below)
    return (f"groundstate: coverage below target in {len(below)} checked round(s) (target 1 - alpha = {target:.2f}, "
            f"checked against target - 3 SE): {rounds}")


def cmd_routing(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.provenance import provenance, warned_title  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.routing import (  # noqa: PLC0415 (--help stays light)
        HEADER,
        round_robin_line,
        routing_ablation,
        table_cells,
    )

    tasks, _, team, agents, lm = tasks_and_team(args, args.data)
    about = provenance(agents, lm)
    controller = controller_named(args.controller, args.mlp, args)
    config = configuration_for(args, args.controller, controller, team)
    calibrator = load_calibrator(args.calibrator, config) if args.calibrator else None
    metrics, steps = routing_ablation(config.program(team, controller, calibrator=calibrator, seed=args.seed), tasks)
    print(f"speaker routing on {len(tasks)} tasks, {len(steps)} controlled steps (action held fixed, every speaker "
          "evaluated); lower is better")
    print_table(table_cells(metrics), columns=HEADER,
                title=warned_title("speaker routing (Table 8 layout; means over steps, no intervals)", agents),
                caption=about["agents"])
    print(round_robin_line(metrics))
    write_json_out(args.json_out, {"metrics": metrics, "steps": steps, "provenance": about})
    return 0


def _ci(entry: dict[str, Any] | None) -> str:
    return format_ci(entry)


ABLATION_TITLES: dict[str, str] = {
    "actions": "one action left out (Table 7 layout): task accuracy (%, no intervals), change from the full set "
               "in parentheses",
    "features": "MLP feature sets (Table 6 layout; success with its 95% interval, costs as means)",
    "sampling": "executed action drawn from the conformal set every round (Table 9 layout; rounds as means)",
}


def cmd_ablate(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience import ablations  # noqa: PLC0415 (heavy: scikit-learn)
    from groundstate.eval.consilience.data import load_exploration  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.provenance import provenance, warned_title  # noqa: PLC0415 (--help stays light)

    calibration, _, team, _, _ = tasks_and_team(args, args.calibration_data)
    test, _, _, agents, lm = tasks_and_team(args, args.data)
    about = provenance(agents, lm)
    common = {"alpha": args.alpha, "max_rounds": args.max_rounds, "seed": args.seed}
    if args.kind == "features":
        if not args.explore:
            raise ConfigError("the feature ablation trains the MLP on each feature set: give --explore FILE")
        table = ablations.feature_ablation(load_exploration(args.explore), team, calibration, test, **common)
    else:
        if "mlp" in args.controllers and not args.mlp:
            raise ConfigError("the mlp controller needs --mlp DIR")
        factories = {name: (lambda name=name: controller_named(name, args.mlp, args)) for name in args.controllers}
        if args.kind == "actions":
            table = ablations.action_ablation(factories, team, calibration, test, **common)
        else:
            table = ablations.sampling_ablation(factories, team, calibration, test, **common)
    header, body = ablations.CELLS[args.kind](table)
    print_table(body, columns=header, title=warned_title(ABLATION_TITLES[args.kind], agents), caption=about["agents"])
    write_json_out(args.json_out, table)
    return 0


def cmd_generalize(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.generalize import (  # noqa: PLC0415 (heavy: scikit-learn)
        HEADER,
        summary_line,
        table_cells,
        unseen_task_generalization,
    )
    from groundstate.eval.consilience.provenance import provenance, warned_title  # noqa: PLC0415 (--help stays light)

    tasks, _, team, agents, lm = tasks_and_team(args, args.data)
    about = provenance(agents, lm)
    result = unseen_task_generalization(tasks, team, train_size=args.train_size, splits=args.splits, seed=args.seed,
                                        max_rounds=args.max_rounds)
    print(f"MLP trained on {args.train_size}-task subsets, tested on the other {len(tasks) - args.train_size}")
    title = "unseen-task generalization per split (accuracy with 95% intervals; paired difference as a mean)"
    print_table(table_cells(result), columns=HEADER, title=warned_title(title, agents), caption=about["agents"])
    print(summary_line(result))
    write_json_out(args.json_out, {**result, "provenance": about})
    return 0
