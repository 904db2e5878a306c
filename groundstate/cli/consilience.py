"""``groundstate consilience ...``: split, explore, train, calibrate, evaluate and check coverage.

    groundstate consilience split tasks.jsonl --train 0.4 --calibration 0.3 --test 0.3
    groundstate consilience explore --tasks tasks.train.jsonl --agents sim --out explore.jsonl
    groundstate consilience train --data explore.jsonl --out ctl/mlp
    groundstate consilience calibrate --tasks tasks.calibration.jsonl --agents sim --controller rules --out cal/rules
    groundstate consilience evaluate --tasks tasks.test.jsonl --agents sim --controllers rules mlp \\
        --mlp ctl/mlp --calibrator rules=cal/rules --baselines hidden-pre hidden-post full-info
    groundstate consilience coverage --tasks tasks.test.jsonl --agents sim --calibrator cal/rules
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli.options import add_agent_options, add_run_options
    from groundstate.programs.consilience.control import CONTROLLERS, ROUTERS
    from groundstate.programs.consilience.protocols import PROTOCOLS
    from groundstate.programs.consilience.state import FEATURE_GROUPS
    from groundstate.records import ACTIONS

    group = sub.add_parser("consilience", help="Consilience: controlled hidden-profile discussions with conformal "
                                              "acceptance (explore, train, calibrate, evaluate)")
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
        p.add_argument("--min-vote-round", type=int, default=1, help="first round at which Vote is admissible")
        add_agent_options(p)

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
    p.add_argument("--drop-features", nargs="*", default=[], choices=list(FEATURE_GROUPS),
                   help="train without these feature groups (ablation)")
    p.add_argument("--hidden", nargs="+", type=int, default=[32, 32], help="hidden layer sizes")
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

    p = cmds.add_parser("evaluate", help="controllers vs the reference protocols on held-out tasks")
    p.add_argument("--tasks", required=True)
    p.add_argument("--controllers", nargs="*", default=["rules"], choices=CONTROLLERS)
    p.add_argument("--mlp", default=None, metavar="DIR")
    p.add_argument("--calibrator", nargs="*", default=[], metavar="CONTROLLER=DIR",
                   help="conformal acceptance per controller (controllers without one run uncertified)")
    p.add_argument("--baselines", nargs="*", default=list(PROTOCOLS), choices=PROTOCOLS)
    p.add_argument("--rounds", type=int, default=3, help="hidden-post rounds")
    p.add_argument("--sample-from-set", action="store_true",
                   help="sample uniformly from the conformal set when a proposal is rejected (ablation)")
    p.add_argument("--report-dir", default=None)
    config_options(p, controller=False)
    add_run_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = cmds.add_parser("coverage", help="held-out coverage of a calibrator, per round")
    p.add_argument("--tasks", required=True, help="held-out tasks")
    p.add_argument("--calibrator", required=True, metavar="DIR")
    p.add_argument("--min-calibration", type=int, default=50, help="rounds with fewer calibration scores are "
                   "reported but not checked (default 50)")
    p.add_argument("--seed", type=int, default=0)
    config_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_coverage)


def _lm_options(p: argparse.ArgumentParser) -> None:
    from groundstate.cli.options import add_lm_options

    add_lm_options(p)


def _tasks(path: str):
    from groundstate.eval.consilience.data import load_tasks

    return load_tasks(path)


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


def _configuration(args: argparse.Namespace, controller: str):
    from groundstate.optimizers.consilience import Configuration

    return Configuration(controller=controller, router=args.router, max_rounds=args.max_rounds,
                         agents=args.agents, removed_actions=tuple(args.remove_action),
                         min_vote_round=args.min_vote_round)


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
    from groundstate.cli.options import build_team
    from groundstate.eval.io import write_jsonl
    from groundstate.optimizers.consilience import explore_tasks

    tasks, _ = _tasks(args.tasks)
    team, _, _ = build_team(args, tasks, args.tasks)
    rows = explore_tasks(tasks, team, max_rounds=args.max_rounds, router=args.router, policy=args.policy,
                         seed=args.seed)
    write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} states x {len(rows[0]['rewards']) if rows else 0} action outcomes to {args.out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.data import load_exploration
    from groundstate.eval.runner import file_hash
    from groundstate.optimizers.artifacts import save_sklearn
    from groundstate.optimizers.consilience import features_without, train_controller
    from groundstate.records import ACTIONS

    rows = load_exploration(args.data)
    features = features_without(args.drop_features)
    model = train_controller(rows, features, hidden_layer_sizes=tuple(args.hidden), random_state=args.seed)
    save_sklearn(model, args.out, purpose="consilience MLP controller", features=features, actions=list(ACTIONS),
                 dropped_feature_groups=args.drop_features,
                 data={"file": args.data, "sha256": file_hash(args.data), "rows": len(rows)})
    print(f"trained on {len(rows)} states ({', '.join(features)}); saved to {args.out}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from groundstate.cli.options import build_team
    from groundstate.eval.runner import file_hash
    from groundstate.optimizers.artifacts import save_params
    from groundstate.optimizers.consilience import calibrate

    tasks, _ = _tasks(args.tasks)
    team, agents, lm = build_team(args, tasks, args.tasks)
    config = _configuration(args, args.controller)
    calibrator = calibrate(tasks, team, _controller(args.controller, args.mlp, args), config, alpha=args.alpha,
                           seed=args.seed)
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


def cmd_coverage(args: argparse.Namespace) -> int:
    from groundstate.cli.options import build_team
    from groundstate.eval.consilience.coverage import coverage
    from groundstate.eval.consilience.evaluate import run_tasks
    from groundstate.programs.consilience.consilience import Consilience

    tasks, _ = _tasks(args.tasks)
    team, _, _ = build_team(args, tasks, args.tasks)
    config = _configuration(args, args.controller)
    calibrator = _load_calibrator(args.calibrator, config)
    program = Consilience(team, _controller(args.controller, args.mlp, args), calibrator=None, router=args.router,
                          max_rounds=args.max_rounds, removed_actions=args.remove_action,
                          min_vote_round=args.min_vote_round, seed=args.seed)
    rows = coverage(calibrator, [p.trace for p in run_tasks(program, tasks)], args.min_calibration)
    print(f"target coverage 1 - alpha = {1 - calibrator.alpha:.2f}; rounds with >= {args.min_calibration} "
          "calibration scores are checked against target - 3 SE")
    for r in rows:
        status = ("ok" if r["ok"] else "BELOW") if r["checked"] else "not checked"
        threshold = "inf" if r["threshold"] is None else f"{r['threshold']:.4f}"
        print(f"round {r['round']}: n_cal={r['n_calibration']} n_test={r['n_test']} threshold={threshold} "
              f"coverage={r['coverage']:.3f} (se {r['se']:.3f}) {status}")
    return 0 if all(r["ok"] for r in rows if r["checked"]) else 1


def cmd_evaluate(args: argparse.Namespace) -> int:
    from groundstate.cli.options import build_team, run_settings
    from groundstate.errors import ConfigError
    from groundstate.eval.consilience.evaluate import evaluate_programs
    from groundstate.eval.report import comparison_rows, markdown_table, write_report
    from groundstate.eval.runner import fingerprint
    from groundstate.eval.stats import format_ci
    from groundstate.programs.consilience.consilience import Consilience
    from groundstate.programs.consilience.protocols import HiddenProfileProtocol

    tasks, data = _tasks(args.tasks)
    team, agents, lm = build_team(args, tasks, args.tasks)
    calibrators = {}
    for item in args.calibrator:
        name, _, path = item.partition("=")
        if not path:
            raise ConfigError(f"--calibrator takes CONTROLLER=DIR, got '{item}'")
        calibrators[name] = path
    programs: dict[str, Any] = {}
    for protocol in args.baselines:
        programs[protocol] = (HiddenProfileProtocol(protocol, args.rounds, team=team),
                              {"protocol": protocol, "rounds": args.rounds if protocol == "hidden-post" else 0})
    for name in args.controllers:
        config = _configuration(args, name)
        calibrator = _load_calibrator(calibrators[name], config) if name in calibrators else None
        label = name + ("" if calibrator is not None else " (uncertified)") + (
            " [sampled]" if args.sample_from_set else "")
        program = Consilience(team, _controller(name, args.mlp, args), calibrator=calibrator, router=args.router,
                              max_rounds=args.max_rounds, removed_actions=args.remove_action,
                              sample_from_set=args.sample_from_set, min_vote_round=args.min_vote_round,
                              seed=args.seed)
        programs[label] = (program, {"configuration": config.to_dict(), "calibrator": calibrators.get(name),
                                     "sample_from_set": args.sample_from_set})
    summaries, pooled = evaluate_programs(programs, tasks, data, agents, lm, args.seed, run_settings(args))
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
