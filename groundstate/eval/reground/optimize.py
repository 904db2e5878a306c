"""Optimizing an OffQuery program against T1/T2/T3 and evaluating the saved result on held-out data.

- :func:`examples_for`: instances as ``dspy.Example``s (program inputs plus the gold labels the metrics read).
- :func:`optimize_task`: ``groundstate optimize``: load the train/val files, build the task's program, tune it
  with :func:`~groundstate.optimizers.tune.tune` against :func:`~groundstate.eval.reground.metrics.offquery_metric`,
  and return the result with the manifest to save beside it.
- :func:`evaluate_saved`: ``groundstate evaluate``: run the saved program and its unoptimized version on the
  same records, durably, and return both summaries.
"""

from __future__ import annotations

import argparse
from typing import Any

from groundstate.errors import ConfigError, GroundstateError, one_line


def examples_for(instances: list[Any], inputs) -> list[Any]:
    """``dspy.Example``s: the program inputs (marked as inputs) plus every gold label the metrics read."""
    import dspy

    examples = []
    for instance in instances:
        kwargs = inputs(instance)
        labels = {k: v for k, v in instance.labels().items() if k not in kwargs}
        examples.append(dspy.Example(id=instance.id, **kwargs, **labels).with_inputs(*kwargs))
    return examples


def optimize_task(args: argparse.Namespace, lm: Any, lm_config: Any) -> tuple[Any, dict[str, Any], str]:
    """Tune the program ``args.program`` names; return ``(TuneResult, manifest, metric spec)``.

    Raises:
        ConfigError: a bad budget, metric or stage, or train and val that share instances.
        OptimizationFailed: every LM call failed (nothing should be saved).
    """
    from groundstate.eval.benchmarks.offquery.loader import load_any
    from groundstate.eval.reground.judges import make_judge
    from groundstate.eval.reground.metrics import offquery_metric, parse_metric
    from groundstate.eval.reground.saved import BuildArgs
    from groundstate.eval.runner import program_state_hash
    from groundstate.eval.splits import content_hash, group_key
    from groundstate.eval.tasks import get_task
    from groundstate.lm.specs import describe_lm, get_lm
    from groundstate.optimizers.targets import stage_target
    from groundstate.optimizers.tune import MAX_FAILED_SHARE, Budget, tune

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
    train = load_any(args.data, condition=args.condition)
    val = load_any(args.val_data, condition=args.condition) if args.val_data else []
    overlap = {x.id for x in train} & {x.id for x in val}
    if overlap:
        raise ConfigError(f"--data and --val-data share {len(overlap)} instance id(s), e.g. '{sorted(overlap)[0]}'")
    program = task.build(args)
    lm_config.apply(program)
    inputs = task.inputs_for(args)
    judge = make_judge(args.judge_lm)
    timeout = {"timeout": args.lm_timeout} if getattr(args, "lm_timeout", None) is not None else {}
    try:
        reflection = get_lm(args.reflection_lm, **timeout) if args.reflection_lm else None
    except GroundstateError as exc:
        raise ConfigError(f"cannot build the reflection LM (--reflection-lm): {exc}") from None
    result = tune(program, examples_for(train, inputs), examples_for(val, inputs) or None,
                  metric=offquery_metric(weights, judge), optimizer=args.optimizer, budget=budget, trainable=patterns,
                  reflection_lm=reflection, threads=args.threads, seed=args.seed,
                  max_failed_share=getattr(args, "max_failed_share", MAX_FAILED_SHARE))
    manifest = {
        "task": task.name,
        "task_options": {"condition": args.condition, **task.options(args)},
        "optimizer": result.settings,
        "metric": {"spec": metric, "weights": weights, "judge": getattr(judge, "name", args.judge_lm)},
        "lms": {"default": describe_lm(lm), "roles": lm_config.describe()["roles"],
                "reflection": describe_lm(reflection) if reflection else None},
        "data": {"train": {"file": args.data, "ids": [x.id for x in train], "sha256": content_hash(train),
                           "groups": sorted({group_key(x) for x in train})},
                 "val": {"file": args.val_data, "ids": [x.id for x in val], "sha256": content_hash(val),
                         "groups": sorted({group_key(x) for x in val})} if val else None},
        "scores": result.scores,
        "program_state": {"before": program_state_hash(program), "after": program_state_hash(result.program),
                          "unchanged": result.unchanged},
        "failed_share": round(result.failed_share, 4),
        "cost": {"lm_calls": result.lm_calls, "input_tokens": result.input_tokens,
                 "output_tokens": result.output_tokens, "seconds": round(result.seconds, 2)},
        "build_args": {k: getattr(args, k) for k in BuildArgs.model_fields if hasattr(args, k)},
    }
    return result, manifest, metric


def read_optimized(directory: Any) -> tuple[dict[str, Any], Any]:
    """``(manifest, OptimizedManifest)`` of a program saved by ``groundstate optimize``, checked before any work:
    a saved program of a compatible version (:class:`~groundstate.optimizers.manifests.ProgramManifest`) whose
    ``task`` is an OffQuery program and whose ``task_options``, ``build_args`` and ``data`` fit
    :class:`~groundstate.eval.reground.saved.OptimizedManifest`.

    Raises:
        InputError: an unreadable manifest, or a field of the wrong type or missing (one line naming the field).
        ConfigError: not a program saved by ``optimize``, or one saved by an incompatible version.
    """
    from pathlib import Path

    from groundstate.errors import InputError
    from groundstate.eval.reground.saved import OptimizedManifest
    from groundstate.eval.reground.tasks import BASELINE_HELP
    from groundstate.optimizers.artifacts import MANIFEST, check_compatible, read_manifest
    from groundstate.optimizers.manifests import ProgramManifest
    from groundstate.schema import validate

    manifest = read_manifest(directory)
    if manifest.get("kind") != "dspy-program" or "task" not in manifest:
        raise ConfigError(f"{directory} is not a program saved by `groundstate optimize`")
    check_compatible(manifest, directory)
    path = Path(directory) / MANIFEST
    validate(ProgramManifest, manifest, file=path)  # what loading the program reads
    saved = validate(OptimizedManifest, manifest, file=path)
    programs = ("reground", *BASELINE_HELP)
    if saved.task not in programs:
        raise InputError(f"'{one_line(saved.task, 80)}' is not an OffQuery program ({', '.join(programs)})",
                         file=str(path), field="task")
    return manifest, saved


def evaluate_saved(args: argparse.Namespace, lm: Any, lm_config: Any, settings: Any,
                   saved: tuple[dict[str, Any], Any] | None = None) -> tuple[dict, dict, str, list[str]]:
    """Run the program saved in ``args.dir`` (after) and the same program without its optimized state (before)
    on ``args``' data; return ``(summaries by label, data description, title, warnings)``.

    Data that shares instance ids or source cases with the manifest's train/val data is refused unless
    ``args.allow_overlap``; a saved program whose state equals the unoptimized one is evaluated with a warning.

    The saved manifest (``saved``: what :func:`read_optimized` returned, read here when not given) supplies the
    task, its condition (unless ``--condition`` is given) and the program's build arguments. A run that failed
    (``--max-error-rate``, or every record failed) contributes what it finished; its summary's ``stopped_reason``
    says why.

    Raises:
        InputError: a manifest field of the wrong type or missing (see :func:`read_optimized`).
        ConfigError: the directory is not a program saved by ``groundstate optimize``, or the data overlaps the
            data it was optimized on (without ``--allow-overlap``).
    """
    from groundstate.eval.runner import RunAborted, durable_run, program_state_hash, run_config
    from groundstate.eval.tasks import get_task
    from groundstate.lm.specs import describe_lm
    from groundstate.optimizers.artifacts import build_saved, load_program

    manifest, checked = saved if saved is not None else read_optimized(args.dir)
    after = load_program(args.dir)
    before = build_saved(args.dir, manifest)
    task = get_task(checked.task)
    if args.condition is None:
        args.condition = checked.task_options.condition
    for key, value in checked.build_values().items():
        if not hasattr(args, key) or key == "seed":
            setattr(args, key, value)
    records, data = task.load(args)
    if not getattr(args, "allow_overlap", False):
        check_no_overlap(records, checked)
    warnings = []
    if program_state_hash(before) == program_state_hash(after):
        warnings.append("the saved program's state equals the unoptimized program's (the optimizer changed "
                        "nothing): before and after will score the same")
    inputs, scorer = task.inputs_for(args), task.scorer_for(args)
    summaries = {}
    for label, program in (("before (unoptimized)", before), ("after (optimized)", after)):
        lm_config.apply(program)
        config = run_config(task.name, state=program, lm=describe_lm(lm), data=data, seed=args.seed,
                            options={**task.options(args), "evaluate": label})
        try:
            summaries[label] = durable_run(program, config, records, settings, inputs=inputs, scorer=scorer,
                                           outputs=task.outputs, description=label).summary
        except RunAborted as exc:
            summaries[label] = exc.result.summary
    title = f"{task.name} on {data.get('file', 'synthetic')} ({args.condition} shared context)"
    return summaries, data, title, warnings


def check_no_overlap(records: list[Any], manifest: Any) -> None:
    """Raise :class:`ConfigError` when ``records`` share instance ids or source cases with the manifest's
    train/val data (manifests from before source cases were recorded are checked by id only). ``manifest`` is
    the manifest's dict or its :class:`~groundstate.eval.reground.saved.OptimizedManifest`."""
    from groundstate.eval.reground.saved import OptimizedManifest, SplitRecords
    from groundstate.eval.splits import group_key

    for split in ("train", "val"):
        if isinstance(manifest, OptimizedManifest):
            entry = manifest.split(split) or SplitRecords()
        else:
            entry = SplitRecords.model_validate((manifest.get("data") or {}).get(split) or {})
        ids, groups = set(entry.ids), set(entry.groups)
        for record in records:
            rid = getattr(record, "id", None)
            if rid in ids:
                raise ConfigError(f"record '{one_line(rid, 80)}' was in the program's {split} data: evaluating on "
                                  "it overstates the score (use held-out data, or --allow-overlap)")
            group = group_key(record) if rid is not None else None
            if group in groups and not group.startswith("id:"):
                raise ConfigError(f"record '{one_line(rid, 80)}' comes from source case '{one_line(group, 80)}', "
                                  f"which was in the program's {split} data (use held-out data, or --allow-overlap)")
