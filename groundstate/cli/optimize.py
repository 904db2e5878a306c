"""``groundstate split``, ``optimize`` and ``evaluate``: tune a program on one split, judge it on another."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from groundstate.cli.numbers import seed
from groundstate.cli.options import (
    add_data_option,
    add_lm_options,
    add_progress_option,
    add_report_dir,
    add_run_options,
    add_shares,
    context_for,
    run_settings,
    shows_progress,
)
from groundstate.cli.output import report_failed_runs
from groundstate.cli.run import RUN_OPTIONS
from groundstate.cli.settings import add_settings, settings_from
from groundstate.eval.reground.optimize import (
    DATA_HELP,
    VAL_DATA_HELP,
    OptimizeSettings,
    optimize_task,
    read_optimized,
)
from groundstate.eval.reground.settings import EvaluationData
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.report import METRICS, write_report
from groundstate.eval.runner import fingerprint
from groundstate.optimizers.targets import stage_target

OPTIMIZE_FLAGS = {"max_rounds": ("--bootstrap-rounds",), "preset": ("--budget",)}
"""``optimize``'s options whose names differ from their settings fields."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("split", help="write train/val/test splits, disjoint by id and by source case, stratified by "
                       "domain and variant")
    add_data_option(p, "an OffQuery data file")
    add_shares(p, {"train": 0.6, "val": 0.2, "test": 0.2})
    p.add_argument("--seed", type=seed, default=0, help="seed of the shuffle (default 0)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory for <stem>.train/val/test.jsonl (default: beside --data)")
    p.set_defaults(func=cmd_split)

    names = list(OFFQUERY_TASKS)
    p = sub.add_parser("optimize", help="tune a program with a DSPy optimizer and save it",
                       description="Tunes PROGRAM on --data (choosing on --val-data) and saves program.json and "
                                   "manifest.json to --out. Programs: " + ", ".join(names))
    p.add_argument("program", help="the program to tune: " + ", ".join(names))
    add_data_option(p, DATA_HELP)
    add_data_option(p, VAL_DATA_HELP, required=False, flag="--val-data")
    p.add_argument("--out", required=True, help="directory for the optimized program")
    add_settings(p, OptimizeSettings, flags=OPTIMIZE_FLAGS,
                 overrides={"trainable": {"default": None}})
    add_lm_options(p)
    add_progress_option(p, help="no progress line (phase, metric calls, LM calls and failed calls, elapsed: a live "
                                "line on a terminal, otherwise a line on stderr every 30 s and at the end); DSPy's "
                                "own logs and bars are shown only with -v")
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("evaluate", help="score a saved program and its unoptimized version on held-out data",
                       description="Runs the saved program (after) and the same program without its optimized "
                                   "state (before) on --data, durably, and reports T1/T2/T3 with 95% intervals.")
    p.add_argument("dir", help="a directory written by `groundstate optimize`")
    p.add_argument("--data", required=True, help="held-out data (OffQuery file or 'synthetic')")
    add_report_dir(p, "where to write evaluate.md/json/png (default: DIR/evaluations)")
    add_settings(p, EvaluationData, skip=RUN_OPTIONS)
    add_run_options(p)
    p.set_defaults(func=cmd_evaluate)


def cmd_split(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.loader import load_any  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.splits import split_instances, write_splits  # noqa: PLC0415 (--help stays light)

    instances = load_any(args.data)
    splits = split_instances(instances, args.train_share, args.val_share, args.test_share, seed=args.seed)
    paths = write_splits(splits, args.data, args.out, seed=args.seed)
    for name in ("train", "val", "test"):
        print(f"{name}: {len(splits[name])} instances -> {paths[name]}")
    print(f"ids and hashes: {paths['index']}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    """``optimize``: tune, then save. Progress is one groundstate line (:class:`~groundstate.eval.progress.
    TuneProgress`, from the first phase on, so a refusal before any work stays one line; ``--no-progress`` leaves
    it out); DSPy's own INFO logs, prints and tqdm bars are held back unless ``-v`` is given."""
    from groundstate.eval.metric_spec import header_lines, scoring_description  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.progress import TuneProgress  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.artifacts import save_program  # noqa: PLC0415 (--help stays light)

    settings = settings_from(OptimizeSettings, args, flags=OPTIMIZE_FLAGS)
    if settings.program == "reground" and settings.stage != "all" and settings.trainable is None:
        patterns, metric = stage_target(settings.stage, settings.metric)
        print(f"tuning stage '{settings.stage}' ({', '.join(patterns)}) against {metric}")
    if settings.mlflow:  # refused before any work when MLflow is not installed
        from groundstate.eval.mlflow_log import require_mlflow  # noqa: PLC0415 (--help stays light)

        require_mlflow()
    context = context_for(args)
    context.lm_pair()  # the LMs are built (and checked) before any data is read, as before
    with TuneProgress(f"optimize {settings.program} ({settings.optimizer})", enabled=shows_progress(args)) as shown:
        result, manifest, metric = optimize_task(settings, context, listener=shown,
                                                 quiet=not getattr(args, "verbose", 0))
    save_program(result.program, args.out, **manifest)
    if settings.mlflow:
        from groundstate.eval.mlflow_log import log_optimization  # noqa: PLC0415 (--help stays light)

        log_optimization(manifest, args.out)
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for split, values in result.scores.items():
        print(f"{split}: {metric} {fmt(values.get('before'))} -> {fmt(values.get('after'))}")
    scored = scoring_description({"lm": manifest["lms"]["default"], "lm_config": {"roles": manifest["lms"]["roles"]},
                                  "options": manifest["task_options"]})
    print("; ".join(header_lines(scored)))
    dollars = "" if result.cost_usd is None else f", ${result.cost_usd:.4f}"
    print(f"{result.lm_calls} LM calls, {result.input_tokens + result.output_tokens} tokens{dollars}, "
          f"{result.seconds:.0f}s; saved to {args.out}")
    if result.unchanged:
        print(f"warning: '{settings.optimizer}' left the program unchanged (same instructions and demos as the "
              "unoptimized program; flagged in manifest.json)")
    if result.stopped_reason:  # saved, flagged in manifest.json: what the optimizer did before the cap
        print(f"groundstate: {result.stopped_reason} (saved to {args.out}, flagged in manifest.json)", file=sys.stderr)
        return 1
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_comparison  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.evaluate import evaluate_saved  # noqa: PLC0415 (--help stays light)

    data = settings_from(EvaluationData, args)
    run = run_settings(args)
    saved = read_optimized(args.dir)  # a bad manifest stops here, before any LM is built
    evaluation = evaluate_saved(args.dir, data, run, context_for(args), saved)  # LMs built before data is read
    rows = evaluation.rows()
    report_dir = Path(args.report_dir or Path(args.dir) / "evaluations" / fingerprint(evaluation.data, 10))
    lines = evaluation.report_lines()
    warnings = [f"warning: {warning}" for warning in evaluation.warnings]
    paths = write_report(rows, report_dir, config={"artifact": str(args.dir), "data": evaluation.data,
                                                   **evaluation.scoring, "notes": evaluation.notes},
                         title=evaluation.title, stem="evaluate", notes=lines,
                         sections=[evaluation.difference_markdown(), "\n".join(f"- {w}" for w in warnings)],
                         extra={"differences": {m: d.as_dict() for m, d in evaluation.differences.items()},
                                "warnings": evaluation.warnings})
    print_comparison(rows, METRICS, title=evaluation.title, notes=lines)
    for line in evaluation.difference_lines():
        print(line)
    print("wrote " + ", ".join(paths.values()))
    for warning in warnings:
        print(warning)
    return report_failed_runs(evaluation.summaries)
