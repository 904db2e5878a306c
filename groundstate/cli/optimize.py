"""``groundstate split``, ``optimize`` and ``evaluate``: tune a program on one split, judge it on another."""

from __future__ import annotations

import argparse

from groundstate.cli.numbers import bound_options, count, positive_int, seed, share


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli.options import (
        add_data_option,
        add_lm_options,
        add_report_dir,
        add_run_options,
        add_shares,
        add_threads,
    )
    from groundstate.eval.reground.tasks import (
        BASELINE_HELP,
        add_baseline_arguments,
        add_data_arguments,
        add_reground_arguments,
    )
    from groundstate.optimizers.tune import MAX_FAILED_SHARE, OPTIMIZERS, Budget

    p = sub.add_parser("split", help="write train/val/test splits, disjoint by id and by source case, stratified by "
                       "domain and variant")
    add_data_option(p, "an OffQuery data file", positional=True)
    add_shares(p, {"train": 0.6, "val": 0.2, "test": 0.2})
    p.add_argument("--seed", type=seed, default=0, help="seed of the shuffle (default 0)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory for <stem>.train/val/test.jsonl (default: beside --data)")
    p.alias("--out-dir", "--out")
    p.set_defaults(func=cmd_split)

    names = ["reground", *BASELINE_HELP]
    p = sub.add_parser("optimize", help="tune a program with a DSPy optimizer and save it",
                       description="Tunes PROGRAM on --data (choosing on --val-data) and saves program.json and "
                                   "manifest.json to --out. Programs: " + ", ".join(names))
    p.add_argument("program", help="the program to tune: " + ", ".join(names))
    add_data_option(p, "training data (OffQuery file)", old=("--train",))
    add_data_option(p, "validation data (required by random-search, mipro and gepa)", required=False,
                    old=("--val",), flag="--val-data")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap",
                   help="the DSPy optimizer (default bootstrap)")
    p.add_argument("--metric", default=None, help="t1, t2, t3, t1+t2+t3, 0.5*t1+t3 (default: the stage's task)")
    p.add_argument("--stage", choices=("verify", "reconstruct", "resolve", "all"), default="all",
                   help="tune one ReGround stage against its task (verify: T1, reconstruct: T2, resolve: T3)")
    p.add_argument("--trainable", nargs="+", default=None, metavar="PATTERN",
                   help="predictors the optimizer may touch (globs, e.g. 'verify.*'); overrides --stage")
    p.add_argument("--out", required=True, help="directory for the optimized program")
    defaults = Budget()
    p.add_argument("--max-demos", type=count, default=defaults.max_bootstrapped_demos, help="bootstrapped demos")
    p.add_argument("--max-labeled-demos", type=count, default=defaults.max_labeled_demos,
                   help=f"labeled demos taken from --data (default {defaults.max_labeled_demos})")
    p.add_argument("--bootstrap-rounds", dest="max_rounds", type=positive_int, default=defaults.max_rounds,
                   help="bootstrapping rounds")
    p.add_argument("--candidates", type=positive_int, default=None,
                   help=f"random-search programs ({defaults.num_candidate_programs}) / mipro candidates "
                        f"({defaults.num_candidates})")
    p.add_argument("--trials", type=positive_int, default=defaults.num_trials, help="mipro trials")
    p.add_argument("--max-metric-calls", type=positive_int, default=defaults.max_metric_calls, help="gepa budget")
    p.add_argument("--reflection-lm", default=None, help="gepa's reflection LM spec (default: --lm)")
    p.add_argument("--max-failed-share", type=share, default=MAX_FAILED_SHARE, metavar="X",
                   help=f"stop (exit 2, nothing saved) when more than this share of metric calls failed "
                        f"(default {MAX_FAILED_SHARE:g})")
    add_threads(p, "metric calls (the optimizer's evaluation threads)")
    p.add_argument("--seed", type=seed, default=0, help="the optimizer's seed (default 0)")
    p.add_argument("--condition", choices=("reliable", "unreliable"), default="unreliable",
                   help="which shared context programs see (default unreliable)")
    p.add_argument("--judge-lm", default="lexical", help="T2 judge: 'lexical' or an LM spec")
    p.add_argument("--t2-truth", default=None, help=argparse.SUPPRESS)
    add_reground_arguments(p)
    add_baseline_arguments(p)
    bound_options(p)
    add_lm_options(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("evaluate", help="score a saved program and its unoptimized version on held-out data",
                       description="Runs the saved program (after) and the same program without its optimized "
                                   "state (before) on --data, durably, and reports T1/T2/T3 with 95% intervals.")
    p.add_argument("dir", help="a directory written by `groundstate optimize`")
    p.add_argument("--data", required=True, help="held-out data (OffQuery file or 'synthetic')")
    add_report_dir(p, "where to write evaluate.md/json/png (default: DIR/evaluations)")
    p.add_argument("--allow-overlap", action="store_true",
                   help="evaluate even on data that shares instance ids or source cases with the train/val data")
    add_data_arguments(p)
    bound_options(p)
    add_run_options(p)
    p.set_defaults(func=cmd_evaluate, condition=None)


def cmd_split(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.loader import load_any
    from groundstate.eval.splits import split_instances, write_splits

    instances = load_any(args.data)
    splits = split_instances(instances, args.train_share, args.val_share, args.test_share, seed=args.seed)
    paths = write_splits(splits, args.data, args.out, seed=args.seed)
    for name in ("train", "val", "test"):
        print(f"{name}: {len(splits[name])} instances -> {paths[name]}")
    print(f"ids and hashes: {paths['index']}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.eval.reground.optimize import optimize_task
    from groundstate.optimizers.artifacts import save_program

    if args.program == "reground" and args.stage != "all" and args.trainable is None:
        from groundstate.optimizers.targets import stage_target

        patterns, metric = stage_target(args.stage, args.metric)
        print(f"tuning stage '{args.stage}' ({', '.join(patterns)}) against {metric}")
    lm, lm_config = configure_lms(args)
    result, manifest, metric = optimize_task(args, lm, lm_config)
    save_program(result.program, args.out, **manifest)
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for split, values in result.scores.items():
        print(f"{split}: {metric} {fmt(values.get('before'))} -> {fmt(values.get('after'))}")
    print(f"{result.lm_calls} LM calls, {result.input_tokens + result.output_tokens} tokens, "
          f"{result.seconds:.0f}s; saved to {args.out}")
    if result.unchanged:
        print(f"warning: '{args.optimizer}' left the program unchanged (same instructions and demos as the "
              "unoptimized program; flagged in manifest.json)")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from groundstate.cli.options import configure_lms, run_settings
    from groundstate.cli.output import report_failed_runs
    from groundstate.cli.tables import print_comparison
    from groundstate.eval.reground.optimize import evaluate_saved, read_optimized
    from groundstate.eval.report import METRICS, comparison_rows, write_report
    from groundstate.eval.runner import fingerprint

    saved = read_optimized(args.dir)  # a bad manifest stops here, before any LM is built
    settings = run_settings(args)
    lm, lm_config = configure_lms(args)
    summaries, data, title, warnings = evaluate_saved(args, lm, lm_config, settings, saved)
    rows = comparison_rows(summaries)
    report_dir = Path(args.report_dir or Path(args.dir) / "evaluations" / fingerprint(data, 10))
    paths = write_report(rows, report_dir, config={"artifact": str(args.dir), "data": data}, title=title,
                         stem="evaluate")
    print_comparison(rows, METRICS, title=title)
    print("wrote " + ", ".join(paths.values()))
    for warning in warnings:
        print(f"warning: {warning}")
    return report_failed_runs(summaries)
