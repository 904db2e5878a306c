"""``groundstate consilience ...``: split, explore, train, calibrate, evaluate, check coverage, ablate, generalise
and print the paper's tables.

    groundstate consilience split --data tasks.jsonl --train-share 0.4 --calibration-share 0.3 --test-share 0.3
    groundstate consilience explore --data tasks.train.jsonl --agents sim --out explore.jsonl
    groundstate consilience train --data explore.jsonl --out ctl/mlp
    groundstate consilience calibrate --data tasks.calibration.jsonl --agents sim --controller rules --out cal/rules
    groundstate consilience evaluate --data tasks.test.jsonl --agents sim --controllers rules mlp \\
        --mlp ctl/mlp --calibrator rules=cal/rules --baselines hidden-pre hidden-post full-info
    groundstate consilience coverage --data tasks.test.jsonl --agents sim --calibrator cal/rules
    groundstate consilience routing --data tasks.test.jsonl --agents sim --calibrator cal/rules
    groundstate consilience ablate actions --calibration-data tasks.calibration.jsonl --data tasks.test.jsonl
    groundstate consilience generalize --data hiddenbench.json --agents sim --train-size 5 --splits 5
    groundstate consilience table --data hiddenbench.json --agents sim --preset hiddenbench --controllers rules

``table`` is a front-end of the experiment layer (:mod:`groundstate.eval.consilience.table_spec`): it builds an
experiment spec from its options (one ``method`` value per reference protocol and controller), runs exactly its
cells (durably, resumable: a finished cell makes no new call) and tabulates exactly those cells, each from the run
its options name (never "the newest run"), as ``table.md``, ``table.json`` and ``table.png`` in the layout of the
paper's Tables 1/2; with ``--sensitivity`` (simulated agents) the spec adds the cells at attention limits
unlimited, 5, 3 and 2, and the files a section with each limit's ordering of the methods. Every table and chart
names the agents (the simulated preset and its limits, or the LMs); on design-default support (HiddenBench without
an annotation) the titles say the results are fixed by construction. ``routing``,
``ablate`` and ``generalize`` run in memory (meant for simulated agents and small LM studies) and print their
table; ``--json-out`` keeps it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from groundstate.cli.consilience_setup import (
    configuration_for,
    controller_named,
    load_tasks_file,
    task_map,
    tasks_and_team,
)
from groundstate.cli.consilience_studies import cmd_ablate, cmd_coverage, cmd_generalize, cmd_routing
from groundstate.cli.numbers import count, level, positive_int, seed
from groundstate.cli.options import (
    add_agent_options,
    add_backend_options,
    add_data_option,
    add_lm_options,
    add_progress_option,
    add_report_dir,
    add_run_options,
    add_shares,
    add_support_options,
    agent_settings,
    context_for,
    run_settings,
)
from groundstate.cli.output import report_failed_runs
from groundstate.cli.settings import add_settings
from groundstate.errors import ConfigError
from groundstate.eval.consilience.settings import ConfigurationSettings, EvaluationSettings
from groundstate.eval.io import write_jsonl
from groundstate.eval.report import comparison_rows, write_report
from groundstate.eval.runner import file_hash, fingerprint
from groundstate.eval.stats import format_ci
from groundstate.programs.consilience.control import CONTROLLERS
from groundstate.programs.consilience.state import FEATURE_GROUPS, FEATURE_SETS

ABLATIONS = ("actions", "features", "sampling")


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("consilience", help="Consilience: controlled hidden-profile discussions with conformal "
                                              "acceptance (explore, train, calibrate, evaluate, tables)")
    cmds = group.add_subparsers(dest="consilience_command", metavar="COMMAND", parser_class=type(group))
    cmds.required = True

    def config_options(p: argparse.ArgumentParser, controller: bool = True) -> None:
        if controller:
            p.add_argument("--controller", choices=CONTROLLERS, default="rules",
                           help="which controller proposes the next action (default rules)")
            p.add_argument("--mlp", default=None, metavar="DIR", help="a trained MLP controller (for --controller mlp)")
        add_settings(p, ConfigurationSettings, overrides={"remove_action": {"nargs": "*"}})
        add_agent_options(p)
        add_support_options(p)

    def json_out(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json-out", default=None, metavar="FILE", help="also write the result as JSON")

    p = cmds.add_parser("split", help="task-level train / calibration / test splits")
    add_data_option(p, "hidden-profile tasks (JSONL or HiddenBench JSON)")
    add_shares(p, {"train": 0.4, "calibration": 0.3, "test": 0.3}, what="tasks")
    p.add_argument("--seed", type=seed, default=0, help="seed of the shuffle (default 0)")
    p.set_defaults(func=cmd_split)

    p = cmds.add_parser("explore", help="exhaustive action outcomes on training tasks (MLP training data)")
    add_data_option(p, "training tasks (JSONL or HiddenBench JSON)")
    p.add_argument("--out", required=True, help="JSONL of state features and per-action rewards")
    p.add_argument("--policy", choices=("random", "best"), default="random", help="how trajectories move on")
    p.add_argument("--seed", type=seed, default=0, help="seed of the episodes and the random policy (default 0)")
    config_options(p, controller=False)
    _lm_options(p)
    add_backend_options(p, "tasks")
    add_progress_option(p)
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
    p.add_argument("--hidden", nargs="+", type=positive_int, default=[32, 32], help="hidden layer sizes")
    p.add_argument("--no-reward-normalization", action="store_true",
                   help="fit raw rewards (the paper standardizes them)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the MLP's initialisation and shuffling (default 0)")
    add_progress_option(p, help="accepted as in explore, calibrate and coverage, so a script can pass it to every "
                                "step; training the MLP shows no progress display")
    p.set_defaults(func=cmd_train)

    p = cmds.add_parser("calibrate", help="round-wise conformal thresholds for one configuration")
    add_data_option(p, "calibration tasks (separate from training and test tasks)")
    p.add_argument("--alpha", type=level, default=0.1,
                   help="miscoverage level: the accepted action is in the set with probability 1 - alpha "
                        "(default 0.1)")
    p.add_argument("--out", required=True, help="directory for the calibrator (JSON parameters + manifest)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the calibration episodes (default 0)")
    config_options(p)
    _lm_options(p)
    add_backend_options(p, "tasks")
    add_progress_option(p)
    p.set_defaults(func=cmd_calibrate)

    def evaluation_options(p: argparse.ArgumentParser, baselines: bool = True) -> None:
        add_data_option(p, "held-out tasks (JSONL or HiddenBench JSON)")
        add_settings(p, EvaluationSettings, only=("controllers", "mlp", "calibrator"),
                     overrides={"controllers": {"nargs": "*"}, "calibrator": {"nargs": "*"}})
        if baselines:
            add_settings(p, EvaluationSettings, only=("baselines",), overrides={"baselines": {"nargs": "*"}})
        add_settings(p, EvaluationSettings, only=("rounds", "set_sampling", "sample_from_set"))
        add_report_dir(p, "where to write the report (Markdown, JSON, PNG; default: <runs-dir>/consilience-<hash>)")
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
    p.add_argument("--sensitivity", action="store_true",
                   help="simulated agents: also run every program at attention limits unlimited, 5, 3 and 2 facts "
                        "(same tasks and seeds) and add a row per limit with each method's task accuracy and the "
                        "ordering of the methods, so you see whether a conclusion is a property of the preset")
    p.set_defaults(func=cmd_table)

    p = cmds.add_parser("coverage", help="held-out coverage of a calibrator per round, under both policies")
    add_data_option(p, "held-out tasks (JSONL or HiddenBench JSON)")
    p.add_argument("--calibrator", required=True, metavar="DIR", help="a calibrator written by `consilience calibrate`")
    p.add_argument("--policy", choices=("both", "calibrated", "deployed"), default="both",
                   help="calibrated: every proposal executed (the calibrated policy); deployed: accept or replace")
    p.add_argument("--min-calibration", type=count, default=50, help="rounds with fewer calibration scores are "
                   "reported but not checked (default 50)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the episodes (default 0)")
    json_out(p)
    config_options(p)
    _lm_options(p)
    add_backend_options(p, "tasks")
    add_progress_option(p)
    p.set_defaults(func=cmd_coverage)

    p = cmds.add_parser("routing", help="speaker-routing counterfactuals (Table 8): every speaker, same state/action")
    add_data_option(p, "held-out tasks (JSONL or HiddenBench JSON)")
    p.add_argument("--calibrator", default=None, metavar="DIR", help="run the controller with conformal acceptance")
    p.add_argument("--seed", type=seed, default=0, help="seed of the episodes (default 0)")
    json_out(p)
    config_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_routing)

    p = cmds.add_parser("ablate", help="the paper's ablations with a calibrator per configuration (Tables 6, 7, 9)")
    p.add_argument("kind", choices=ABLATIONS, help="actions: leave one action out (Table 7); features: MLP feature "
                   "sets (Table 6); sampling: sample from the conformal set every round (Table 9)")
    add_data_option(p, "held-out tasks (JSONL or HiddenBench JSON)")
    add_data_option(p, "calibration tasks", flag="--calibration-data")
    p.add_argument("--controllers", nargs="*", default=["rules"], choices=CONTROLLERS,
                   help="the controllers to ablate (default rules)")
    p.add_argument("--mlp", default=None, metavar="DIR", help="the MLP controller (actions, sampling)")
    p.add_argument("--explore", default=None, metavar="FILE", help="exploration rows (features: trains each set)")
    p.add_argument("--alpha", type=level, default=0.1, help="miscoverage level of each calibrator (default 0.1)")
    p.add_argument("--max-rounds", type=positive_int, default=10, help="round limit K (default 10)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the episodes (default 0)")
    json_out(p)
    add_agent_options(p)
    add_support_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_ablate)

    p = cmds.add_parser("generalize", help="unseen-task generalisation of the MLP (§5.4): train on small subsets")
    add_data_option(p, "hidden-profile tasks to split (JSONL or HiddenBench JSON)")
    p.add_argument("--train-size", type=positive_int, default=5,
                   help="training tasks per split (default 5, as the paper)")
    p.add_argument("--splits", type=positive_int, default=5, help="seeded splits (default 5)")
    p.add_argument("--max-rounds", type=positive_int, default=10, help="round limit K (default 10)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the splits and episodes (default 0)")
    json_out(p)
    add_agent_options(p)
    add_support_options(p)
    _lm_options(p)
    p.set_defaults(func=cmd_generalize)


def _lm_options(p: argparse.ArgumentParser) -> None:
    add_lm_options(p)


def cmd_split(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.data import split_tasks  # noqa: PLC0415 (--help stays light)

    tasks, _ = load_tasks_file(args.data)
    parts = split_tasks(tasks, (args.train_share, args.calibration_share, args.test_share), seed=args.seed)
    stem = Path(args.data).with_suffix("")
    for name, items in parts.items():
        path = f"{stem}.{name}.jsonl"
        save_hidden_tasks(path, items)
        print(f"{name}: {len(items)} tasks -> {path}")
    return 0


def cmd_explore(args: argparse.Namespace) -> int:
    from groundstate.optimizers.consilience import explore_tasks  # noqa: PLC0415 (heavy: scikit-learn)

    tasks, _, team, _, _ = tasks_and_team(args, args.data)
    rows = explore_tasks(tasks, team, max_rounds=args.max_rounds, router=args.router, policy=args.policy,
                         seed=args.seed, map_fn=task_map(args))
    write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} states x {len(rows[0]['rewards']) if rows else 0} action outcomes to {args.out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.data import load_exploration  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.artifacts import save_sklearn  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.consilience import feature_set, train_controller  # noqa: PLC0415 (heavy: scikit-learn)

    rows = load_exploration(args.data)
    dropped = {f for g in args.drop_features for f in FEATURE_GROUPS[g]}
    features = [f for f in feature_set(args.features, args.extra_features) if f not in dropped]
    if not features:
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
    from groundstate.eval.consilience.provenance import (  # noqa: PLC0415 (--help stays light)
        describe_agents,
        warned_title,
    )
    from groundstate.optimizers.artifacts import save_params  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.consilience import calibrate  # noqa: PLC0415 (heavy: scikit-learn)

    tasks, _, team, agents, lm = tasks_and_team(args, args.data)
    controller = controller_named(args.controller, args.mlp, args)
    config = configuration_for(args, args.controller, controller, team)
    calibrator = calibrate(tasks, team, controller, config, alpha=args.alpha, seed=args.seed,
                           map_fn=task_map(args, args.controller))
    save_params(calibrator, args.out, purpose="consilience round-wise conformal calibration",
                configuration=config.to_dict(), agents=agents, lm=lm,
                data={"file": args.data, "sha256": file_hash(args.data), "tasks": len(tasks)})
    print(warned_title(f"calibrated with {describe_agents(agents, lm)}", agents))
    for t in sorted(calibrator.thresholds_):
        eps = calibrator.thresholds_[t]
        shown = "inf (uncertified)" if eps == float("inf") else f"{eps:.4f}"
        print(f"round {t}: n={calibrator.counts_[t]} threshold={shown}")
    print(f"saved to {args.out}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_comparison  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.evaluate import evaluate_programs  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.provenance import provenance, warned_title  # noqa: PLC0415 (--help stays light)

    settings = agent_settings(EvaluationSettings, args)
    evaluation = evaluate_programs(settings, run_settings(args), context_for(args))
    data, agents = evaluation.setup.data, evaluation.setup.agents
    about = provenance(agents, evaluation.setup.lm)
    rows = comparison_rows(evaluation.summaries, metrics=("task_accuracy", "vote_accuracy", "rounds"))
    for row in rows:
        row["vote_accuracy_pooled"] = evaluation.pooled[row["name"]]
    title = warned_title(f"Consilience on {data['file']} ({agents['kind']} agents, router {settings.router})", agents)
    report_dir = Path(args.report_dir or Path(args.runs_dir) / f"consilience-{fingerprint(evaluation.labels, 10)}")
    paths = write_report(rows, report_dir, config={"tasks": data, "agents": agents, "provenance": about}, title=title,
                         metrics=("task_accuracy", "vote_accuracy", "rounds"), stem="consilience",
                         chart_metrics=("task_accuracy", "vote_accuracy"), subtitle=about["agents"])
    print_comparison(rows, ("task_accuracy", "vote_accuracy", "rounds"), title=title, caption=about["agents"])
    for row in rows:
        print(f"{row['name']}: vote accuracy pooled over all votes {format_ci(row['vote_accuracy_pooled'])}")
    print("wrote " + ", ".join(paths.values()))
    (report_dir / "pooled_vote_accuracy.json").write_text(json.dumps(evaluation.pooled, indent=2) + "\n")
    return report_failed_runs(evaluation.summaries)


def cmd_table(args: argparse.Namespace) -> int:
    from groundstate.cli.experiment import print_built_table  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.options import note  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import (  # noqa: PLC0415 (--help stays light)
        console,
        print_table,
    )
    from groundstate.eval.consilience import sensitivity as sens  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.table_spec import (  # noqa: PLC0415 (--help stays light)
        BASELINES,
        table_spec,
        tabulate,
    )
    from groundstate.eval.experiments.execute import run_experiment  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.render import write_table  # noqa: PLC0415 (--help stays light)

    settings = agent_settings(EvaluationSettings, args, baselines=BASELINES[args.preset])
    if args.sensitivity and settings.agents != "sim":
        raise ConfigError("--sensitivity varies the simulated agents' attention limit; it needs --agents sim")
    spec = table_spec(settings, args.preset, args.sensitivity)  # a bad combination is refused before anything runs
    context, run = context_for(args), run_settings(args)

    def lms(cell):  # the command's LMs, built when a cell first needs them (simulated agents never do)
        return context.lm_pair()

    outcome = run_experiment(spec, run, lms=lms, note=note)
    built = tabulate(spec, settings, run, preset=args.preset, lms=lms, note=note)
    table, about = built.table, built.provenance
    report_dir = Path(args.report_dir or Path(args.runs_dir) / f"consilience-table-"
                      f"{fingerprint(spec.model_dump(mode='json'), 10)}")
    paths = write_table(table, report_dir, stem="table", png=not args.no_png, extra_markdown=built.extra_markdown(),
                        extra_json=built.extra_json())
    out = console()
    print_built_table(table, out)
    if built.sensitivity:
        header, body = sens.sensitivity_cells(built.sensitivity)
        print_table(body, columns=header, headers=header, title=sens.sensitivity_title(built.sensitivity),
                    caption=f"{about['agents']}; the attention limit varies by row", out=out)
        print(sens.holds_line(built.sensitivity))
    elif about["simulated"]:
        print("note: with simulated agents the ordering of the methods may be a property of the preset; "
              "--sensitivity adds rows at attention limits unlimited, 5, 3 and 2 (same seeds)")
    print("wrote " + ", ".join(paths.values()))
    if built.uncertified:
        print("note: " + ", ".join(built.uncertified) + " ran without a calibrator (no conformal acceptance); pass "
              "--calibrator NAME=DIR for the certified configuration")
    return report_failed_runs(outcome.summaries())
