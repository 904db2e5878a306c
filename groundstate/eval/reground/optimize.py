"""Optimizing an OffQuery program against T1/T2/T3.

- :class:`OptimizeSettings`: everything ``groundstate optimize`` takes besides the LMs (the program, the data, the
  optimizer and its budget, the metric, and the program's own options).
- :func:`examples_for`: instances as ``dspy.Example`` objects (program inputs plus the gold labels the metrics read).
- :func:`optimize_task`: load the train/val files, build the task's program, tune it with
  :func:`~groundstate.optimizers.tune.tune` against :func:`~groundstate.eval.reground.metrics.offquery_metric`,
  and return the result with the manifest to save beside it. The manifest records the metric spec
  (``metric_spec``: the T2 judge, :class:`~groundstate.eval.metric_spec.MetricSpec`) and the LMs the program was
  tuned with (``lms``: :func:`~groundstate.lm.specs.describe_lm` of the default LM, its decoding included, and
  the per-role LMs), which ``evaluate`` uses unless told otherwise.
- :func:`read_optimized` and :func:`check_no_overlap`: what ``evaluate`` (:mod:`groundstate.eval.reground.evaluate`)
  checks before it runs a saved program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import dspy
from pydantic import Field

from groundstate.errors import ConfigError, GroundstateError, InputError, one_line
from groundstate.eval.metric_spec import JUDGE_HELP, JudgeSpec, MetricSpec
from groundstate.eval.reground.saved import CONDITIONS, BuildArgs, OptimizedManifest, SplitRecords
from groundstate.eval.reground.settings import (
    CONDITION_HELP,
    BaselineOptions,
    OffQueryData,
    ReGroundOptions,
    SyntheticChoice,
)
from groundstate.eval.reground.tasks import OFFQUERY_TASKS, load_offquery_data, offquery_judge
from groundstate.eval.runner import program_state_hash
from groundstate.eval.task import RunContext
from groundstate.lm.specs import describe_lm, get_lm
from groundstate.optimizers.targets import stage_target
from groundstate.optimizers.tune import MAX_FAILED_SHARE, MIPRO_PRESETS, OPTIMIZERS, Budget, tune
from groundstate.schema import validate

_BUDGET = Budget()
REFLECTION_ROLE = "reflection"
"""The ``--lm-config`` role of GEPA's reflection LM (``[roles.reflection]``)."""


DATA_HELP = ("training data: an OffQuery data file, or 'synthetic' (generated as `run` does: --domain, --variant, "
             "--n, --synthetic-seed)")
VAL_DATA_HELP = ("validation data (required by random-search, mipro and gepa): an OffQuery data file, or "
                 "'synthetic' (generated with the seed after --synthetic-seed)")


class OptimizeSettings(BaselineOptions, ReGroundOptions, SyntheticChoice):
    """What ``groundstate optimize`` takes besides the LMs: the program and its options, the train and validation
    files, the optimizer, its budget and the metric."""

    program: str = Field("reground", description="the program to tune (an OffQuery program)")
    data: str = Field(description=DATA_HELP, json_schema_extra={"metavar": "FILE"})
    val_data: str | None = Field(None, description=VAL_DATA_HELP, json_schema_extra={"metavar": "FILE"})
    synthetic_seed: int = Field(0, ge=0, description="with --data synthetic: the generator's seed (default 0; "
                                "--val-data synthetic uses the next seed, so no instance is in both)")
    optimizer: Literal[OPTIMIZERS] = Field("bootstrap", description="the DSPy optimizer (default bootstrap)")
    metric: str | None = Field(None, description="t1, t2, t3, t1+t2+t3, 0.5*t1+t3 (default: the stage's task)")
    stage: Literal["verify", "reconstruct", "resolve", "all"] = Field(
        "all", description="tune one ReGround stage against its task (verify: T1, reconstruct: T2, resolve: T3)")
    trainable: list[str] | None = Field(None, description="predictors the optimizer may touch (globs, e.g. "
                                        "'verify.*'); overrides --stage", json_schema_extra={"metavar": "PATTERN"})
    max_demos: int = Field(_BUDGET.max_bootstrapped_demos, ge=0, description="bootstrapped demos")
    max_labeled_demos: int = Field(_BUDGET.max_labeled_demos, ge=0, description="labeled demos taken from --data "
                                   f"(default {_BUDGET.max_labeled_demos})")
    max_rounds: int = Field(_BUDGET.max_rounds, ge=1, description="bootstrapping rounds")
    candidates: int | None = Field(None, ge=1, description=f"random-search programs "
                                   f"({_BUDGET.num_candidate_programs}) / mipro candidates ({_BUDGET.num_candidates})")
    trials: int | None = Field(None, ge=1, description=f"mipro trials (default {_BUDGET.num_trials})")
    preset: Literal[MIPRO_PRESETS] | None = Field(None, description="light, medium or heavy: mipro's own budget "
                                                  "preset (MIPROv2 auto=...); it chooses candidates and trials, so "
                                                  "not with --candidates or --trials",
                                      json_schema_extra={"metavar": "PRESET"})
    max_metric_calls: int = Field(_BUDGET.max_metric_calls, ge=1, description="gepa budget")
    reflection_lm: str | None = Field(None, description="gepa's reflection LM spec (default: --lm)")
    reflection_api_base: str | None = Field(None, description="server URL of --reflection-lm (default: --api-base "
                                            "when it has --lm's provider, else the provider's own endpoint)",
                                            json_schema_extra={"metavar": "URL"})
    max_failed_share: float = Field(MAX_FAILED_SHARE, ge=0, le=1, description="stop (exit 2, nothing saved) when "
                                    f"more than this share of metric calls failed (default {MAX_FAILED_SHARE:g})",
                                    json_schema_extra={"metavar": "X"})
    threads: int = Field(4, ge=1, description="metric calls (the optimizer's evaluation threads) worked on at once "
                                              "(default 4)")
    seed: int = Field(0, ge=0, description="the optimizer's seed (default 0)")
    condition: Literal[CONDITIONS] = Field("unreliable", description=CONDITION_HELP + " (default unreliable)")
    judge_lm: JudgeSpec = Field("lexical", description=JUDGE_HELP + "; recorded in the manifest, and `evaluate` "
                                "uses it", json_schema_extra={"metavar": "JUDGE"})
    judge_api_base: str | None = Field(None, description="server URL of an LM --judge-lm (default: --api-base when "
                                       "the judge has --lm's provider, else the provider's own endpoint)",
                                       json_schema_extra={"metavar": "URL"})
    max_cost: float | None = Field(None, gt=0, description="stop once the priced LM spend of tuning reaches USD "
                                   "dollars (LiteLLM's prices; every LM, judge and reflection LM must have one): a "
                                   "program the optimizer returned is saved, flagged, without scores after; exit 1",
                                   json_schema_extra={"metavar": "USD"})
    mlflow: bool = Field(False, description="log the optimization as one MLflow run (parameters, scores before and "
                         "after, cost) to MLFLOW_TRACKING_URI or ./mlruns (pip install 'groundstate[trace]')")

    def metric_spec(self) -> MetricSpec:
        """The :class:`~groundstate.eval.metric_spec.MetricSpec` the metric is scored under."""
        from groundstate.eval.metric_spec import MetricSpec  # noqa: PLC0415 (--help stays light)
        return MetricSpec(judge=self.judge_lm)

    def budget(self) -> Budget:
        """The optimizer's :class:`~groundstate.optimizers.tune.Budget`.

        Raises:
            ConfigError: ``preset`` (``--budget``) with ``candidates`` or ``trials`` for mipro.
        """
        candidates = {}
        if self.candidates is not None:
            candidates = {"num_candidate_programs": self.candidates}
            if self.optimizer == "mipro":
                candidates["num_candidates"] = self.candidates
        return Budget(max_bootstrapped_demos=self.max_demos, max_labeled_demos=self.max_labeled_demos,
                      max_rounds=self.max_rounds, num_trials=self.trials, max_metric_calls=self.max_metric_calls,
                      auto=self.preset, **candidates)


def examples_for(instances: list[Any], inputs) -> list[Any]:
    """``dspy.Example``s: the program inputs (marked as inputs) plus every gold label the metrics read."""
    examples = []
    for instance in instances:
        kwargs = inputs(instance)
        labels = {k: v for k, v in instance.labels().items() if k not in kwargs}
        examples.append(dspy.Example(id=instance.id, **kwargs, **labels).with_inputs(*kwargs))
    return examples


def optimize_records(settings: OptimizeSettings, data: str, seed: int) -> tuple[list[Any], dict[str, Any]]:
    """``(instances, what to record of them)`` for ``data``: a file, a shipped example or ``synthetic`` (generated
    with ``seed`` and the generator's settings, recorded as ``synthetic``), resolved exactly as ``run`` resolves its
    ``--data`` (:func:`~groundstate.eval.reground.tasks.load_offquery_data`); the instances as
    ``settings.condition`` shows them, so the examples' labels match their inputs."""
    source = OffQueryData(data=data, condition=settings.condition, domain=settings.domain, variant=settings.variant,
                          n=settings.n, synthetic_seed=seed)
    instances, description = load_offquery_data(source)
    return instances, {"file": data, **({"synthetic": description["synthetic"]} if "synthetic" in description else {})}


def optimize_task(settings: OptimizeSettings, context: RunContext, listener: Any = None,
                  quiet: bool = False) -> tuple[Any, dict[str, Any], str]:
    """Tune the program ``settings.program`` names; return ``(TuneResult, manifest, metric spec)``.

    ``--data`` and ``--val-data`` are files, shipped examples or ``synthetic`` (:func:`optimize_records`;
    ``--val-data synthetic`` is generated with the seed after ``--synthetic-seed``). ``listener`` and ``quiet``
    go to :func:`~groundstate.optimizers.tune.tune` (progress as it happens; DSPy's own output held back).

    Raises:
        ConfigError: an unknown program, a bad budget, metric or stage, or train and val that share instances.
        OptimizationFailed: every LM call failed (nothing should be saved).
    """
    from groundstate.eval.reground.metrics import offquery_metric, parse_metric  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.splits import content_hash, group_key  # noqa: PLC0415 (--help stays light)

    if settings.program not in OFFQUERY_TASKS:
        raise ConfigError(f"unknown program '{settings.program}'; available: {', '.join(sorted(OFFQUERY_TASKS))}")
    task = OFFQUERY_TASKS[settings.program]
    task_settings = settings.narrow(task.settings)
    patterns, metric = stage_target(settings.stage, settings.metric)
    if settings.trainable:
        patterns = settings.trainable
    weights = parse_metric(metric)
    budget = settings.budget()
    budget.check(settings.optimizer)
    train, train_source = optimize_records(settings, settings.data, settings.synthetic_seed)
    val, val_source = optimize_records(settings, settings.val_data, settings.synthetic_seed + 1) \
        if settings.val_data else ([], {})
    overlap = {x.id for x in train} & {x.id for x in val}
    if overlap:
        raise ConfigError(f"--data and --val-data share {len(overlap)} instance id(s), e.g. '{sorted(overlap)[0]}'")
    program = task.build(task_settings)
    lm, lm_config = context.lm_pair()
    lm_config.apply(program)
    inputs = task.inputs(task_settings)
    judge = offquery_judge(settings, context)
    reflection = reflection_lm(settings, context, lm_config)
    result = tune(program, examples_for(train, inputs), examples_for(val, inputs) or None,
                  metric=offquery_metric(weights, judge), optimizer=settings.optimizer, budget=budget,
                  trainable=patterns, reflection_lm=reflection, threads=settings.threads, seed=settings.seed,
                  max_failed_share=settings.max_failed_share, max_cost=settings.max_cost, listener=listener,
                  quiet=quiet)
    manifest = {
        "task": task.name,
        "task_options": {"condition": settings.condition, **task.options(task_settings, judge)},
        "optimizer": result.settings,
        "metric": {"spec": metric, "weights": weights, "judge": getattr(judge, "name", settings.judge_lm)},
        "metric_spec": settings.metric_spec().model_dump(),
        "lms": {"default": describe_lm(lm), "roles": lm_config.describe()["roles"],
                "reflection": describe_lm(reflection) if reflection else None},
        "data": {"train": {**train_source, "ids": [x.id for x in train], "sha256": content_hash(train),
                           "groups": sorted({group_key(x) for x in train})},
                 "val": {**val_source, "ids": [x.id for x in val], "sha256": content_hash(val),
                         "groups": sorted({group_key(x) for x in val})} if val else None},
        "scores": result.scores,
        "program_state": {"before": program_state_hash(program), "after": program_state_hash(result.program),
                          "unchanged": result.unchanged},
        "failed_share": round(result.failed_share, 4),
        "cost": {"lm_calls": result.lm_calls, "input_tokens": result.input_tokens,
                 "output_tokens": result.output_tokens, "seconds": round(result.seconds, 2), "usd": result.cost_usd},
        "stopped_reason": result.stopped_reason,
        "build_args": settings.model_dump(include=set(BuildArgs.model_fields)),
    }
    return result, manifest, metric


def reflection_lm(settings: OptimizeSettings, context: RunContext, lm_config: Any) -> Any:
    """GEPA's reflection LM: the ``--lm-config`` role ``reflection`` when there is one (its ``model`` must then be
    ``--reflection-lm``, when given), else ``--reflection-lm`` served at ``--reflection-api-base``, or at
    ``--api-base`` when it has ``--lm``'s provider (:meth:`~groundstate.lm.config.LMConfig.server_for`); ``None``
    (GEPA reflects with the default LM) when neither is given.

    Raises:
        ConfigError: the LM cannot be built, the role names another model than ``--reflection-lm``, or the role and
            ``--reflection-api-base`` are both given.
    """
    role = (getattr(lm_config, "roles", None) or {}).get(REFLECTION_ROLE)
    if role is not None:
        if settings.reflection_lm and role.get("model") != settings.reflection_lm:
            raise ConfigError(f"the reflection LM is '{settings.reflection_lm}' but the --lm-config role "
                              f"'{REFLECTION_ROLE}' names '{role.get('model')}': give one model")
        if settings.reflection_api_base:
            raise ConfigError(f"the reflection LM is set twice (--reflection-api-base and the --lm-config role "
                              f"'{REFLECTION_ROLE}'): give its server in one place")
        return lm_config.lm_for(REFLECTION_ROLE)
    if not settings.reflection_lm:
        if settings.reflection_api_base:
            raise ConfigError("--reflection-api-base needs --reflection-lm (without it GEPA reflects with --lm)")
        return None
    options = lm_config.server_for(settings.reflection_lm, settings.reflection_api_base)
    if context.lms.lm_timeout is not None and settings.reflection_lm != "embedded":
        options["timeout"] = context.lms.lm_timeout
    try:
        return get_lm(settings.reflection_lm, **options)
    except GroundstateError as exc:
        raise ConfigError(f"cannot build the reflection LM (--reflection-lm): {exc}") from None


def read_optimized(directory: Any) -> tuple[dict[str, Any], Any]:
    """``(manifest, OptimizedManifest)`` of a program saved by ``groundstate optimize``, checked before any work:
    a saved program of a compatible version (:class:`~groundstate.optimizers.manifests.ProgramManifest`) whose
    ``task`` is an OffQuery program and whose ``task_options``, ``build_args`` and ``data`` fit
    :class:`~groundstate.eval.reground.saved.OptimizedManifest`.

    Raises:
        InputError: an unreadable manifest, or a field of the wrong type or missing (one line naming the field).
        ConfigError: not a program saved by ``optimize``, or one saved by an incompatible version.
    """
    from groundstate.optimizers.artifacts import (  # noqa: PLC0415 (--help stays light)
        MANIFEST,
        check_compatible,
        read_manifest,
    )
    from groundstate.optimizers.manifests import ProgramManifest  # noqa: PLC0415 (--help stays light)

    manifest = read_manifest(directory)
    if manifest.get("kind") != "dspy-program" or "task" not in manifest:
        raise ConfigError(f"{directory} is not a program saved by `groundstate optimize`")
    check_compatible(manifest, directory)
    path = Path(directory) / MANIFEST
    validate(ProgramManifest, manifest, file=path)  # what loading the program reads
    saved = validate(OptimizedManifest, manifest, file=path)
    programs = tuple(OFFQUERY_TASKS)
    if saved.task not in programs:
        raise InputError(f"'{one_line(saved.task, 80)}' is not an OffQuery program ({', '.join(programs)})",
                         file=str(path), field="task")
    return manifest, saved


def check_no_overlap(records: list[Any], manifest: Any) -> None:
    """Raise :class:`ConfigError` when ``records`` share instance ids or source cases with the manifest's
    train/val data (manifests from before source cases were recorded are checked by id only). ``manifest`` is
    the manifest's dict or its :class:`~groundstate.eval.reground.saved.OptimizedManifest`."""
    from groundstate.eval.splits import group_key  # noqa: PLC0415 (--help stays light)

    for split in ("train", "val"):
        if isinstance(manifest, OptimizedManifest):
            entry = manifest.split(split) or SplitRecords()
        else:
            entry = SplitRecords.model_validate((manifest.get("data") or {}).get(split) or {})
        ids, groups = set(entry.ids), set(entry.groups)
        for record in records:
            rid = getattr(record, "id", None)
            if rid in ids:
                other = ", e.g. another --synthetic-seed" if str(rid).startswith("synthetic-") else ""
                raise ConfigError(f"record '{one_line(rid, 80)}' was in the program's {split} data: evaluating on "
                                  f"it overstates the score (use held-out data{other}, or --allow-overlap)")
            group = group_key(record) if rid is not None else None
            if group in groups and not group.startswith("id:"):
                raise ConfigError(f"record '{one_line(rid, 80)}' comes from source case '{one_line(group, 80)}', "
                                  f"which was in the program's {split} data (use held-out data, or --allow-overlap)")
