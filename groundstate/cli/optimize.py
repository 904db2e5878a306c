"""``groundstate split``, ``optimize`` and ``evaluate``: tune a program on one split, judge it on another."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli import add_lm_options, add_run_options
    from groundstate.eval.reground.tasks import (
        BASELINE_HELP,
        _baseline_arguments,
        _reground_arguments,
        add_data_arguments,
    )
    from groundstate.optimizers.tune import OPTIMIZERS, Budget

    p = sub.add_parser("split", help="write train/val/test splits, disjoint by id and by source case")
    p.add_argument("file", help="an OffQuery data file")
    p.add_argument("--train", type=float, default=0.6)
    p.add_argument("--val", type=float, default=0.2)
    p.add_argument("--test", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="where to write <stem>.train/val/test.jsonl (default: beside FILE)")
    p.set_defaults(func=cmd_split)

    names = ["reground", *BASELINE_HELP]
    p = sub.add_parser("optimize", help="tune a program with a DSPy optimizer and save it",
                       description="Tunes PROGRAM on --train (choosing on --val) and saves program.json and "
                                   "manifest.json to --out. Programs: " + ", ".join(names))
    p.add_argument("program", help="the program to tune: " + ", ".join(names))
    p.add_argument("--train", required=True, help="training data (OffQuery file)")
    p.add_argument("--val", default=None, help="validation data (required by random-search, mipro and gepa)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="bootstrap")
    p.add_argument("--metric", default=None, help="t1, t2, t3, t1+t2+t3, 0.5*t1+t3 (default: the stage's task)")
    p.add_argument("--stage", choices=("verify", "reconstruct", "resolve", "all"), default="all",
                   help="tune one ReGround stage against its task (verify: T1, reconstruct: T2, resolve: T3)")
    p.add_argument("--trainable", nargs="+", default=None, metavar="PATTERN",
                   help="predictors the optimizer may touch (globs, e.g. 'verify.*'); overrides --stage")
    p.add_argument("--out", required=True, help="directory for the optimized program")
    defaults = Budget()
    p.add_argument("--max-demos", type=int, default=defaults.max_bootstrapped_demos, help="bootstrapped demos")
    p.add_argument("--max-labeled-demos", type=int, default=defaults.max_labeled_demos)
    p.add_argument("--bootstrap-rounds", dest="max_rounds", type=int, default=defaults.max_rounds,
                   help="bootstrapping rounds")
    p.add_argument("--candidates", type=int, default=None,
                   help=f"random-search programs ({defaults.num_candidate_programs}) / mipro candidates "
                        f"({defaults.num_candidates})")
    p.add_argument("--trials", type=int, default=defaults.num_trials, help="mipro trials")
    p.add_argument("--max-metric-calls", type=int, default=defaults.max_metric_calls, help="gepa budget")
    p.add_argument("--reflection-lm", default=None, help="gepa's reflection LM spec (default: --lm)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--condition", choices=("reliable", "unreliable"), default="unreliable")
    p.add_argument("--judge-lm", default="lexical", help="T2 judge: 'lexical' or an LM spec")
    p.add_argument("--t2-truth", default=None, help=argparse.SUPPRESS)
    _reground_arguments(p)
    _baseline_arguments(p)
    add_lm_options(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("evaluate", help="score a saved program and its unoptimized version on held-out data",
                       description="Runs the saved program (after) and the same program without its optimized "
                                   "state (before) on --data, durably, and reports T1/T2/T3 with 95% intervals.")
    p.add_argument("dir", help="a directory written by `groundstate optimize`")
    p.add_argument("--data", required=True, help="held-out data (OffQuery file or 'synthetic')")
    p.add_argument("--report-dir", default=None, help="where to write evaluate.md/json/png (default: DIR/evaluations)")
    add_data_arguments(p)
    add_run_options(p)
    p.set_defaults(func=cmd_evaluate, condition=None)


def cmd_split(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.loader import load_any
    from groundstate.eval.splits import split_instances, write_splits

    instances = load_any(args.file)
    splits = split_instances(instances, args.train, args.val, args.test, seed=args.seed)
    paths = write_splits(splits, args.file, args.out_dir, seed=args.seed)
    for name in ("train", "val", "test"):
        print(f"{name}: {len(splits[name])} instances -> {paths[name]}")
    print(f"ids and hashes: {paths['index']}")
    return 0


def examples_for(instances: list[Any], inputs) -> list[Any]:
    """``dspy.Example``s: the program inputs (marked as inputs) plus every gold label the metrics read."""
    import dspy

    examples = []
    for instance in instances:
        kwargs = inputs(instance)
        labels = {k: v for k, v in instance.labels().items() if k not in kwargs}
        examples.append(dspy.Example(id=instance.id, **kwargs, **labels).with_inputs(*kwargs))
    return examples


def cmd_optimize(args: argparse.Namespace) -> int:
    from groundstate.cli import configure_lms
    from groundstate.eval.benchmarks.offquery.loader import load_any
    from groundstate.eval.reground.judges import make_judge
    from groundstate.eval.reground.metrics import offquery_metric, parse_metric
    from groundstate.eval.splits import content_hash
    from groundstate.eval.tasks import get_task
    from groundstate.lm.specs import describe_lm, get_lm
    from groundstate.optimizers.artifacts import save_program
    from groundstate.optimizers.targets import stage_target
    from groundstate.optimizers.tune import Budget, tune

    task = get_task(args.program)
    patterns, metric = stage_target(args.stage, args.metric)
    if args.trainable:
        patterns = args.trainable
    weights = parse_metric(metric)
    budget = Budget(max_bootstrapped_demos=args.max_demos, max_labeled_demos=args.max_labeled_demos,
                    max_rounds=args.max_rounds, num_trials=args.trials, max_metric_calls=args.max_metric_calls)
    if args.candidates is not None:
        budget.num_candidate_programs = budget.num_candidates = args.candidates
    budget.check(args.optimizer)
    train = load_any(args.train, condition=args.condition)
    val = load_any(args.val, condition=args.condition) if args.val else []
    overlap = {x.id for x in train} & {x.id for x in val}
    if overlap:
        from groundstate.errors import ConfigError

        raise ConfigError(f"--train and --val share {len(overlap)} instance id(s), e.g. '{sorted(overlap)[0]}'")
    lm, lm_config = configure_lms(args)
    program = task.build(args)
    lm_config.apply(program)
    inputs = task.inputs_for(args)
    judge = make_judge(args.judge_lm)
    timeout = {"timeout": args.lm_timeout} if args.lm_timeout is not None else {}
    reflection = get_lm(args.reflection_lm, **timeout) if args.reflection_lm else None
    if args.program == "reground" and args.stage != "all" and args.trainable is None:
        print(f"tuning stage '{args.stage}' ({', '.join(patterns)}) against {metric}")
    result = tune(program, examples_for(train, inputs), examples_for(val, inputs) or None,
                  metric=offquery_metric(weights, judge), optimizer=args.optimizer, budget=budget, trainable=patterns,
                  reflection_lm=reflection, threads=args.threads, seed=args.seed)
    manifest = {
        "task": task.name,
        "task_options": {"condition": args.condition, **task.options(args)},
        "optimizer": result.settings,
        "metric": {"spec": metric, "weights": weights, "judge": getattr(judge, "name", args.judge_lm)},
        "lms": {"default": describe_lm(lm), "roles": lm_config.describe()["roles"],
                "reflection": describe_lm(reflection) if reflection else None},
        "data": {"train": {"file": args.train, "ids": [x.id for x in train], "sha256": content_hash(train)},
                 "val": {"file": args.val, "ids": [x.id for x in val], "sha256": content_hash(val)} if val else None},
        "scores": result.scores,
        "cost": {"lm_calls": result.lm_calls, "input_tokens": result.input_tokens,
                 "output_tokens": result.output_tokens, "seconds": round(result.seconds, 2)},
        "build_args": {k: getattr(args, k) for k in ("max_candidates", "multi_misleading", "oracle_t1", "rounds",
                                                     "topology", "ordering", "seed") if hasattr(args, k)},
    }
    save_program(result.program, args.out, **manifest)
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    for split, values in result.scores.items():
        print(f"{split}: {metric} {fmt(values.get('before'))} -> {fmt(values.get('after'))}")
    print(f"{result.lm_calls} LM calls, {result.input_tokens + result.output_tokens} tokens, "
          f"{result.seconds:.0f}s; saved to {args.out}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from groundstate.cli import configure_lms, program_state_hash
    from groundstate.errors import ConfigError
    from groundstate.eval.report import comparison_rows, markdown_table, write_report
    from groundstate.eval.runner import RunAborted, Runner, fingerprint, parse_shard
    from groundstate.eval.tasks import get_task
    from groundstate.lm.specs import describe_lm
    from groundstate.optimizers.artifacts import build_saved, load_program, read_manifest

    manifest = read_manifest(args.dir)
    if manifest.get("kind") != "dspy-program" or "task" not in manifest:
        raise ConfigError(f"{args.dir} is not a program saved by `groundstate optimize`")
    after = load_program(args.dir)
    before = build_saved(args.dir, manifest)
    task = get_task(manifest["task"])
    options = dict(manifest.get("task_options", {}))
    if args.condition is None:
        args.condition = options.get("condition", "unreliable")
    for key, value in manifest.get("build_args", {}).items():
        if not hasattr(args, key) or key == "seed":
            setattr(args, key, value)
    lm, lm_config = configure_lms(args)
    records, data = task.load(args)
    inputs, scorer = task.inputs_for(args), task.scorer_for(args)
    shard = parse_shard(args.shard)
    summaries = {}
    for label, program in (("before (unoptimized)", before), ("after (optimized)", after)):
        lm_config.apply(program)
        config = {"program": task.name, "program_state": program_state_hash(program), "lm": describe_lm(lm),
                  "data": data, "seed": args.seed, "options": {**task.options(args), "evaluate": label}}
        runner = Runner(program, config, out=args.out, threads=args.threads, inputs=inputs, scorer=scorer,
                        outputs=task.outputs, max_error_rate=args.max_error_rate,
                        progress=not args.no_progress and sys.stderr.isatty())
        try:
            summaries[label] = runner.run(records, limit=args.limit, shard=shard, description=label).summary
        except RunAborted as exc:
            summaries[label] = exc.result.summary
    rows = comparison_rows(summaries)
    title = f"{task.name} on {data.get('file', 'synthetic')} ({args.condition} shared context)"
    report_dir = Path(args.report_dir or Path(args.dir) / "evaluations" / fingerprint(data, 10))
    paths = write_report(rows, report_dir, config={"artifact": str(args.dir), "data": data}, title=title,
                         stem="evaluate")
    print(markdown_table(rows, title=title))
    print("wrote " + ", ".join(paths.values()))
    return 0
