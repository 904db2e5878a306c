"""``groundstate consilience ...``: split, explore, train, calibrate, evaluate, check coverage, ablate, generalise
and print the paper's tables.

    groundstate consilience split tasks.jsonl --train 0.4 --calibration 0.3 --test 0.3
    groundstate consilience explore --tasks tasks.train.jsonl --agents sim --out explore.jsonl
    groundstate consilience train --data explore.jsonl --out ctl/mlp
    groundstate consilience calibrate --tasks tasks.calibration.jsonl --agents sim --controller rules --out cal/rules
    groundstate consilience evaluate --tasks tasks.test.jsonl --agents sim --controllers rules mlp \\
        --mlp ctl/mlp --calibrator rules=cal/rules --baselines hidden-pre hidden-post full-info
    groundstate consilience coverage --tasks tasks.test.jsonl --agents sim --calibrator cal/rules
    groundstate consilience routing --tasks tasks.test.jsonl --agents sim --calibrator cal/rules
    groundstate consilience ablate actions --calibration tasks.calibration.jsonl --test tasks.test.jsonl --agents sim
    groundstate consilience generalize --tasks hiddenbench.json --agents sim --train-size 5 --splits 5
    groundstate consilience table --tasks hiddenbench.json --agents sim --preset hiddenbench --controllers rules

``table`` runs the reference protocols and the controllers (durably, like ``evaluate``) and writes the
layout of the paper's Tables 1/2 (Markdown, JSON, PNG). ``routing``, ``ablate`` and ``generalize`` run in
memory (meant for simulated agents and small LM studies) and print their table; ``--json-out`` keeps it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ABLATIONS = ("actions", "features", "sampling")


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli.options import add_agent_options, add_run_options, add_support_options
    from groundstate.programs.consilience.consilience import SET_SAMPLING
    from groundstate.programs.consilience.control import CONTROLLERS, ROUTERS
    from groundstate.programs.consilience.protocols import PROTOCOLS
    from groundstate.programs.consilience.state import FEATURE_GROUPS, FEATURE_SETS
    from groundstate.records import ACTIONS

    group = sub.add_parser("consilience", help="Consilience: controlled hidden-profile discussions with conformal "
                                              "acceptance (explore, train, calibrate, evaluate, tables)")
    cmds = group.add_subparsers(dest="consilience_command", metavar="COMMAND", parser_class=type(group))
    cmds.required = True

    def config_options(p: argparse.ArgumentParser, controller: bool = True) -> None:
        if controller:
            p.add_argument("--controller", choices=CONTROLLERS, default="rules")
            p.add_argument("--mlp", default=None, metavar="DIR", help="a trained MLP controller (for --controller mlp)")
        p.add_argument("--router", choices=ROUTERS, default="action-conditional")
        p.add_argument("--max-rounds", type=int, default=10, help="round limit K (default 10)")
        p.add_argument("--remove-action", nargs="*", default=[], choices=ACTIONS, metavar="ACTION",
                       help="take actions out for the whole discussion (ablation)")
        p.add_argument("--min-vote-round", type=int, default=None,
                       help="an extra lower bound on the round at which Vote is admissible (default: only the "
                            "controller's own termination rule)")
        add_agent_options(p)
        add_support_options(p)

    def json_out(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json-out", default=None, metavar="FILE", help="also write the result as JSON")

    p = cmds.add_parser("split", help="task-level train / calibration / test splits")
    p.add_argument("tasks", help="hidden-profile tasks (JSONL or HiddenBench JSON)")
    p.add_argument("--train", type=float, default=0.4)
    p.add_argument("--calibration", type=float, default=0.3)
    p.add_argument("--test", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_split)

    p = cmds.add_parser("explore", help="exhaustive action outcomes on training tasks (MLP training data)")
    p.add_argument("--tasks", required=True)
    p.add_argument("--out", required=True, help="JSONL of state features and per-action rewards")
    p.add_argument("--policy", choices=("random", "best"), default="random", help="how trajectories move on")
    p.add_argument("--seed", type=int, default=0)
    config_options(p, controller=False)
    _lm_options(p)
    p.set_defaults(func=cmd_explore)

    p = cmds.add_parser("train", help="train the MLP controller on exploration data")
    p.add_argument("--data", required=True, help="JSONL written by `consilience explore`")
    p.add_argument("--out", required=True, help="directory for the model (skops) and its manifest")
    p.add_argument("--features", choices=list(FEATURE_SETS), default="all",
                   help="the state features (a row of the paper's Table 6; default all six)")
    p.add_argument("--extra-features", action="store_true",
                   help="also use p_star and round_frac (groundstate additions, not in the paper)")
    p.add_argument("--drop-features", nargs="*", default=[], choices=list(FEATURE_GROUPS),
                   help="train without these feature groups (ablation)")
    p.add_argument("--hidden", nargs="+", type=int, default=[32, 32], help="hidden layer sizes")
    p.add_argument("--no-reward-normalization", action="store_true",
                   help="fit raw rewards (the paper standardizes them)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_train)

    p = cmds.add_parser("calibrate", help="round-wise conformal thresholds for one configuration")
    p.add_argument("--tasks", required=True, help="calibration tasks (separate from training and test tasks)")
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--out", required=True, help="directory for the calibrator (JSON parameters + manifest)")
    p.add_argument("--seed", type=int, default=0)
    config_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_calibrate)

    def evaluation_options(p: argparse.ArgumentParser, baselines: bool = True) -> None:
        p.add_argument("--tasks", required=True)
        p.add_argument("--controllers", nargs="*", default=["rules"], choices=CONTROLLERS)
        p.add_argument("--mlp", default=None, metavar="DIR")
        p.add_argument("--calibrator", nargs="*", default=[], metavar="CONTROLLER=DIR",
                       help="conformal acceptance per controller (controllers without one run uncertified)")
        if baselines:
            p.add_argument("--baselines", nargs="*", default=["hidden-pre", "hidden-post", "full-info"],
                           choices=PROTOCOLS)
        p.add_argument("--rounds", type=int, default=None,
                       help="discussion rounds of the baselines (default: 3 for hidden-post, 15 for hiddenbench)")
        p.add_argument("--set-sampling", choices=SET_SAMPLING, default="off",
                       help="every-round: execute a uniform draw from the conformal set every round (the "
                            "paper's ablation); on-reject: only to replace a rejected proposal")
        p.add_argument("--sample-from-set", action="store_true", help="the same as --set-sampling every-round")
        p.add_argument("--report-dir", default=None)
        config_options(p, controller=False)
        add_run_options(p)

    p = cmds.add_parser("evaluate", help="controllers vs the reference protocols on held-out tasks")
    evaluation_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = cmds.add_parser("table", help="the paper's Table 1/2: task / vote accuracy per protocol and controller",
                        description="Runs Hidden-Pre, Hidden-Post, Full-Info and the controllers on a task file "
                                    "(durably, like `evaluate`) and writes the layout of the paper's Tables 1 and 2: "
                                    "task accuracy / vote accuracy (vote accuracy pooled over all votes, §4.2), "
                                    "95%% intervals, messages and words per discussion (Markdown, JSON, PNG).")
    evaluation_options(p, baselines=False)
    p.add_argument("--preset", choices=("groundstate", "hiddenbench"), default="groundstate",
                   help="the reference protocols: groundstate's, or HiddenBench's own (Table 1's 'reproduced from "
                        "the baseline'; Hidden-Pre is the initial votes of its Hidden-Post run)")
    p.add_argument("--no-png", action="store_true", help="skip the chart")
    p.set_defaults(func=cmd_table)

    p = cmds.add_parser("coverage", help="held-out coverage of a calibrator per round, under both policies")
    p.add_argument("--tasks", required=True, help="held-out tasks")
    p.add_argument("--calibrator", required=True, metavar="DIR")
    p.add_argument("--policy", choices=("both", "calibrated", "deployed"), default="both",
                   help="calibrated: every proposal executed (the calibrated policy); deployed: accept or replace")
    p.add_argument("--min-calibration", type=int, default=50, help="rounds with fewer calibration scores are "
                   "reported but not checked (default 50)")
    p.add_argument("--seed", type=int, default=0)
    json_out(p)
    config_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_coverage)

    p = cmds.add_parser("routing", help="speaker-routing counterfactuals (Table 8): every speaker, same state/action")
    p.add_argument("--tasks", required=True)
    p.add_argument("--calibrator", default=None, metavar="DIR", help="run the controller with conformal acceptance")
    p.add_argument("--seed", type=int, default=0)
    json_out(p)
    config_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_routing)

    p = cmds.add_parser("ablate", help="the paper's ablations with a calibrator per configuration (Tables 6, 7, 9)")
    p.add_argument("kind", choices=ABLATIONS, help="actions: leave one action out (Table 7); features: MLP feature "
                   "sets (Table 6); sampling: sample from the conformal set every round (Table 9)")
    p.add_argument("--calibration", required=True, metavar="FILE", help="calibration tasks")
    p.add_argument("--test", required=True, metavar="FILE", help="held-out tasks")
    p.add_argument("--controllers", nargs="*", default=["rules"], choices=CONTROLLERS)
    p.add_argument("--mlp", default=None, metavar="DIR", help="the MLP controller (actions, sampling)")
    p.add_argument("--explore", default=None, metavar="FILE", help="exploration rows (features: trains each set)")
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--max-rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    json_out(p)
    add_agent_options(p)
    add_support_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_ablate)

    p = cmds.add_parser("generalize", help="unseen-task generalisation of the MLP (§5.4): train on small subsets")
    p.add_argument("--tasks", required=True)
    p.add_argument("--train-size", type=int, default=5, help="training tasks per split (default 5, as the paper)")
    p.add_argument("--splits", type=int, default=5, help="seeded splits (default 5)")
    p.add_argument("--max-rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    json_out(p)
    add_agent_options(p)
    add_support_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_generalize)


def _lm_options(p: argparse.ArgumentParser) -> None:
    from groundstate.cli.options import add_lm_options

    add_lm_options(p)


def _tasks(path: str):
    from groundstate.eval.consilience.data import load_tasks

    return load_tasks(path)


def _team(args: argparse.Namespace, path: str):
    """``(tasks, team, agents description, LM description)`` for the tasks in ``path``."""
    from groundstate.cli.options import prepare_team

    tasks, data = _tasks(path)
    tasks, team, agents, lm = prepare_team(args, tasks, path)
    return tasks, data, team, agents, lm


def _write_json(path: str | None, value: Any) -> None:
    if path:
        from groundstate.eval.results import write_json

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_json(path, value)
        print(f"wrote {path}")


def cmd_split(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.consilience.data import split_tasks

    tasks, _ = _tasks(args.tasks)
    parts = split_tasks(tasks, (args.train, args.calibration, args.test), seed=args.seed)
    stem = Path(args.tasks).with_suffix("")
    for name, items in parts.items():
        path = f"{stem}.{name}.jsonl"
        save_hidden_tasks(path, items)
        print(f"{name}: {len(items)} tasks -> {path}")
    return 0


def _configuration(args: argparse.Namespace, name: str, controller: Any):
    from groundstate.optimizers.consilience import Configuration

    return Configuration.of(name, controller, router=args.router, max_rounds=args.max_rounds, agents=args.agents,
                            removed_actions=tuple(args.remove_action), min_vote_round=args.min_vote_round)


def _controller(name: str, mlp_dir: str | None, args: argparse.Namespace | None = None):
    from groundstate.optimizers.artifacts import load_sklearn, read_manifest
    from groundstate.programs.consilience.control import build_controller

    if name.startswith("llm") and args is not None and getattr(args, "agents", None) == "sim":
        from groundstate.cli.options import configure_lms

        configure_lms(args)  # the LLM controller needs an LM even when the agents are simulated
    model, features = None, None
    if name == "mlp" and mlp_dir:
        model = load_sklearn(mlp_dir)
        features = read_manifest(mlp_dir).get("features")
    return build_controller(name, model, features)


def cmd_explore(args: argparse.Namespace) -> int:
    from groundstate.eval.io import write_jsonl
    from groundstate.optimizers.consilience import explore_tasks

    tasks, _, team, _, _ = _team(args, args.tasks)
    rows = explore_tasks(tasks, team, max_rounds=args.max_rounds, router=args.router, policy=args.policy,
                         seed=args.seed)
    write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} states x {len(rows[0]['rewards']) if rows else 0} action outcomes to {args.out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.data import load_exploration
    from groundstate.eval.runner import file_hash
    from groundstate.optimizers.artifacts import save_sklearn
    from groundstate.optimizers.consilience import feature_set, train_controller
    from groundstate.programs.consilience.state import FEATURE_GROUPS

    rows = load_exploration(args.data)
    dropped = {f for g in args.drop_features for f in FEATURE_GROUPS[g]}
    features = [f for f in feature_set(args.features, args.extra_features) if f not in dropped]
    if not features:
        from groundstate.errors import ConfigError

        raise ConfigError("those options leave no feature")
    model = train_controller(rows, features, hidden_layer_sizes=tuple(args.hidden), random_state=args.seed,
                             normalize_rewards=not args.no_reward_normalization)
    save_sklearn(model, args.out, purpose="consilience MLP controller", features=features, actions=model.actions_,
                 feature_set=args.features, extra_features=args.extra_features,
                 dropped_feature_groups=args.drop_features, reward_normalization=not args.no_reward_normalization,
                 data={"file": args.data, "sha256": file_hash(args.data), "rows": len(rows)})
    print(f"trained on {len(rows)} states ({', '.join(features)} -> {', '.join(model.actions_)}); saved to {args.out}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from groundstate.eval.runner import file_hash
    from groundstate.optimizers.artifacts import save_params
    from groundstate.optimizers.consilience import calibrate

    tasks, _, team, agents, lm = _team(args, args.tasks)
    controller = _controller(args.controller, args.mlp, args)
    config = _configuration(args, args.controller, controller)
    calibrator = calibrate(tasks, team, controller, config, alpha=args.alpha, seed=args.seed)
    save_params(calibrator, args.out, purpose="consilience round-wise conformal calibration",
                configuration=config.to_dict(), agents=agents, lm=lm,
                data={"file": args.tasks, "sha256": file_hash(args.tasks), "tasks": len(tasks)})
    for t in sorted(calibrator.thresholds_):
        eps = calibrator.thresholds_[t]
        shown = "inf (uncertified)" if eps == float("inf") else f"{eps:.4f}"
        print(f"round {t}: n={calibrator.counts_[t]} threshold={shown}")
    print(f"saved to {args.out}")
    return 0


def _load_calibrator(path: str, config) -> Any:
    from groundstate.optimizers.artifacts import load_params
    from groundstate.optimizers.consilience import check_config

    calibrator = load_params(path)
    check_config(calibrator, config)
    return calibrator


def _print_coverage(rows: list[dict[str, Any]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in ("round", "reached", "n_cal", "threshold", "coverage [95% exact CI]", "executed", "status"):
        table.add_column(column)
    for r in rows:
        if not r["certified"]:
            status = "uncertified"
        elif not r["checked"]:
            status = "not checked"
        else:
            status = "ok" if r["ok"] else "BELOW"
        threshold = "inf" if r["threshold"] is None else f"{r['threshold']:.4f}"
        table.add_row(str(r["round"]), str(r["n_reached"]), str(r["n_calibration"]), threshold,
                      f"{r['coverage']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]", f"{r['executed_coverage']:.3f}",
                      status)
    Console(width=120).print(table)


def cmd_coverage(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.coverage import coverage_report
    from groundstate.eval.consilience.evaluate import run_tasks

    tasks, _, team, _, _ = _team(args, args.tasks)
    controller = _controller(args.controller, args.mlp, args)
    config = _configuration(args, args.controller, controller)
    calibrator = _load_calibrator(args.calibrator, config)
    policies = ("calibrated", "deployed") if args.policy == "both" else (args.policy,)
    traces = {}
    for policy in policies:
        program = config.program(team, controller, calibrator=calibrator if policy == "deployed" else None,
                                 seed=args.seed)
        traces[policy] = [p.trace for p in run_tasks(program, tasks)]
    report = coverage_report(calibrator, traces.get("calibrated", []), traces.get("deployed", []),
                             args.min_calibration)
    print(f"target coverage 1 - alpha = {report['target']:.2f}; rounds with >= {args.min_calibration} calibration "
          "scores are checked against target - 3 SE; 'executed' is the share of executed actions within the "
          "threshold")
    for policy in policies:
        how = "every proposal executed" if policy == "calibrated" else "accept or replace"
        _print_coverage(report[policy], f"{policy} policy ({how})")
    if report["uncertified_rounds"]:
        print("uncertified rounds (too few calibration trajectories reached them; every action admissible): "
              + ", ".join(map(str, report["uncertified_rounds"])))
    _write_json(args.json_out, report)
    rows = [r for policy in policies for r in report[policy]]
    return 0 if all(r["ok"] for r in rows if r["checked"]) else 1


def cmd_routing(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.routing import routing_ablation

    tasks, _, team, _, _ = _team(args, args.tasks)
    controller = _controller(args.controller, args.mlp, args)
    config = _configuration(args, args.controller, controller)
    calibrator = _load_calibrator(args.calibrator, config) if args.calibrator else None
    metrics, steps = routing_ablation(config.program(team, controller, calibrator=calibrator, seed=args.seed), tasks)
    print(f"speaker routing on {len(tasks)} tasks, {len(steps)} controlled steps (action held fixed, every speaker "
          "evaluated); lower is better")
    print("| routing policy | mean dJ | normalized regret | steps | steps with no spread |")
    print("|---|---|---|---|---|")
    for router, m in metrics.items():
        regret = "n/a" if m["normalized_regret"] is None else f"{m['normalized_regret']:.4f}"
        dj = "n/a" if m["mean_dJ"] is None else f"{m['mean_dJ']:+.4f}"
        print(f"| {router} | {dj} | {regret} | {m['steps']} | {m['flat_steps']} |")
    _write_json(args.json_out, {"metrics": metrics, "steps": steps})
    return 0


def _ci(entry: dict[str, Any] | None) -> str:
    from groundstate.eval.stats import format_ci

    return format_ci(entry)


def cmd_ablate(args: argparse.Namespace) -> int:
    from groundstate.errors import ConfigError
    from groundstate.eval.consilience.ablations import action_ablation, feature_ablation, sampling_ablation
    from groundstate.eval.consilience.data import load_exploration

    calibration, _, team, _, _ = _team(args, args.calibration)
    test, _, _, _, _ = _team(args, args.test)
    common = {"alpha": args.alpha, "max_rounds": args.max_rounds, "seed": args.seed}
    if args.kind == "features":
        if not args.explore:
            raise ConfigError("the feature ablation trains the MLP on each feature set: give --explore FILE")
        table = feature_ablation(load_exploration(args.explore), team, calibration, test, **common)
        print("| features retained | success | communication cost | final objective | n |")
        print("|---|---|---|---|---|")
        for label, row in table.items():
            print(f"| {label} | {_ci(row['task_accuracy'])} | {row['final_C']:.4f} | {row['final_J']:.4f} "
                  f"| {row['n']} |")
        _write_json(args.json_out, table)
        return 0
    if "mlp" in args.controllers and not args.mlp:
        raise ConfigError("the mlp controller needs --mlp DIR")
    factories = {name: (lambda name=name: _controller(name, args.mlp, args)) for name in args.controllers}
    if args.kind == "actions":
        table = action_ablation(factories, team, calibration, test, **common)
        print("| configuration | " + " | ".join(args.controllers) + " |")
        print("|---|" + "---|" * len(args.controllers))
        full = table["full"]
        for label, cells in table.items():
            shown = []
            for name in args.controllers:
                row = cells[name]
                if row is None:
                    shown.append("NA")
                    continue
                mean = row["task_accuracy"]["mean"]
                delta = "" if label == "full" else f" ({100 * (mean - full[name]['task_accuracy']['mean']):+.1f})"
                shown.append(f"{100 * mean:.1f}{delta}")
            print(f"| {label} | " + " | ".join(shown) + " |")
    else:
        table = sampling_ablation(factories, team, calibration, test, **common)
        print("| method | mean success | mean rounds/trial | n |")
        print("|---|---|---|---|")
        for name, row in table.items():
            print(f"| {name} | {_ci(row['task_accuracy'])} | {row['messages']:.2f} | {row['n']} |")
    _write_json(args.json_out, table)
    return 0


def cmd_generalize(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.generalize import unseen_task_generalization

    tasks, _, team, _, _ = _team(args, args.tasks)
    result = unseen_task_generalization(tasks, team, train_size=args.train_size, splits=args.splits, seed=args.seed,
                                        max_rounds=args.max_rounds)
    print(f"MLP trained on {args.train_size}-task subsets, tested on the other {len(tasks) - args.train_size} "
          f"({result['note']})")
    print("| split | held-out MLP | all-task MLP, same tasks | paired difference |")
    print("|---|---|---|---|")
    for r in result["splits"]:
        print(f"| {r['split']} | {_ci(r['held_out'])} | {_ci(r['all_task_same_tasks'])} "
              f"| {r['paired_difference']:+.3f} |")
    print(f"mean over splits: held-out {result['held_out_mean']:.3f}, all-task on the same tasks "
          f"{result['all_task_same_tasks_mean']:.3f} (gap {result['gap_mean']:+.3f}); all-task MLP on all tasks "
          f"(in-domain diagnostic) {_ci(result['all_task_all_tasks'])}")
    _write_json(args.json_out, result)
    return 0


def _programs(args: argparse.Namespace, team: Any, baselines: list[str]) -> dict[str, Any]:
    """``label -> (program, options)`` for the baselines and the controllers of an evaluation."""
    from groundstate.errors import ConfigError
    from groundstate.programs.consilience.protocols import HiddenProfileProtocol, discusses

    calibrators = {}
    for item in args.calibrator:
        name, _, path = item.partition("=")
        if not path:
            raise ConfigError(f"--calibrator takes CONTROLLER=DIR, got '{item}'")
        calibrators[name] = path
    sampling = "every-round" if args.sample_from_set else args.set_sampling
    programs: dict[str, Any] = {}
    for protocol in baselines:
        try:
            program = HiddenProfileProtocol(protocol, args.rounds if discusses(protocol) else None, team=team,
                                            seed=args.seed)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        programs[protocol] = (program, {"protocol": protocol, "rounds": program.rounds})
    for name in args.controllers:
        controller = _controller(name, args.mlp, args)
        config = _configuration(args, name, controller)
        calibrator = _load_calibrator(calibrators[name], config) if name in calibrators else None
        label = name + ("" if calibrator is not None else " (uncertified)") + (
            f" [sampled {sampling}]" if sampling != "off" else "")
        program = config.program(team, controller, calibrator=calibrator, seed=args.seed, set_sampling=sampling)
        programs[label] = (program, {"configuration": config.to_dict(), "calibrator": calibrators.get(name),
                                     "set_sampling": sampling})
    return programs


def cmd_evaluate(args: argparse.Namespace) -> int:
    from groundstate.cli.options import run_settings
    from groundstate.eval.consilience.evaluate import evaluate_programs
    from groundstate.eval.report import comparison_rows, markdown_table, write_report
    from groundstate.eval.runner import fingerprint
    from groundstate.eval.stats import format_ci

    tasks, data, team, agents, lm = _team(args, args.tasks)
    programs = _programs(args, team, args.baselines)
    summaries, pooled, _ = evaluate_programs(programs, tasks, data, agents, lm, args.seed, run_settings(args))
    rows = comparison_rows(summaries, metrics=("task_accuracy", "vote_accuracy", "rounds"))
    for row in rows:
        row["vote_accuracy_pooled"] = pooled[row["name"]]
    title = f"Consilience on {data['file']} ({agents['kind']} agents, router {args.router})"
    report_dir = Path(args.report_dir or Path(args.out) / f"consilience-{fingerprint(list(programs), 10)}")
    paths = write_report(rows, report_dir, config={"tasks": data, "agents": agents}, title=title,
                         metrics=("task_accuracy", "vote_accuracy", "rounds"), stem="consilience",
                         chart_metrics=("task_accuracy", "vote_accuracy"))
    print(markdown_table(rows, metrics=("task_accuracy", "vote_accuracy", "rounds"), title=title))
    for row in rows:
        print(f"{row['name']}: vote accuracy pooled over all votes {format_ci(row['vote_accuracy_pooled'])}")
    print("wrote " + ", ".join(paths.values()))
    (report_dir / "pooled_vote_accuracy.json").write_text(json.dumps(pooled, indent=2) + "\n")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from groundstate.cli.options import run_settings
    from groundstate.eval.consilience.evaluate import evaluate_programs
    from groundstate.eval.consilience.tables import CONTROLLER_NAMES, markdown, method_row, ordered, write_table
    from groundstate.eval.runner import fingerprint

    tasks, data, team, agents, lm = _team(args, args.tasks)
    baselines = ["hiddenbench", "hiddenbench-full"] if args.preset == "hiddenbench" else \
        ["hidden-pre", "hidden-post", "full-info"]
    programs = _programs(args, team, baselines)
    _, _, rows_by = evaluate_programs(programs, tasks, data, agents, lm, args.seed, run_settings(args))
    table = []
    for label, rows in rows_by.items():
        if label == "hiddenbench":
            table.append(method_row("Hidden-Pre", rows, initial=True, note="initial votes of the Hidden-Post run"))
            rounds = programs[label][0].rounds
            table.append(method_row("Hidden-Post", rows, note=f"HiddenBench round-robin, {rounds} rounds"))
        elif label == "hiddenbench-full":
            table.append(method_row("Full-Info", rows, note="HiddenBench, every fact, no discussion"))
        elif label in ("hidden-pre", "hidden-post", "full-info"):
            name = {"hidden-pre": "Hidden-Pre", "hidden-post": "Hidden-Post", "full-info": "Full-Info"}[label]
            note = f"{programs[label][0].rounds} rounds" if label == "hidden-post" else ""
            table.append(method_row(name, rows, note=note))
        else:
            base, _, rest = label.partition(" ")
            table.append(method_row(CONTROLLER_NAMES.get(base, base), rows, note=rest.strip("()[] ")))
    table = ordered(table)
    title = (f"{data['file']}: task accuracy / vote accuracy ({agents['kind']} agents, "
             f"{'HiddenBench' if args.preset == 'hiddenbench' else 'groundstate'} protocols, {len(tasks)} tasks)")
    report_dir = Path(args.report_dir or Path(args.out) / f"consilience-table-{fingerprint(list(programs), 10)}")
    paths = write_table(table, report_dir, title, config={"tasks": data, "agents": agents, "preset": args.preset,
                                                         "programs": {k: v[1] for k, v in programs.items()}},
                        png=not args.no_png)
    print(markdown(table, title))
    print("wrote " + ", ".join(paths.values()))
    uncertified = [r["method"] for r in table if "uncertified" in r.get("note", "")]
    if uncertified:
        print("note: " + ", ".join(uncertified) + " ran without a calibrator (no conformal acceptance); pass "
              "--calibrator NAME=DIR for the certified configuration")
    return 0
