"""Evaluating a program saved by ``groundstate optimize`` on held-out data: ``groundstate evaluate`` and
:func:`evaluate` (``groundstate.evaluate``), which return the same :class:`Evaluation`.

The saved program (after) and the same program without its optimized state (before) run on the same records,
durably (one run each, resumable), through the one assembly path (:mod:`groundstate.eval.assemble`). The manifest
(checked by :func:`~groundstate.eval.reground.optimize.read_optimized` before any LM is built) supplies the task,
its condition (unless one is given) and the program's options, which are validated into the task's settings
model, so a manifest that lacks one is one line naming the file and the field.

Example::

    import groundstate as gs

    evaluation = gs.evaluate("opt/reground", "data/test.jsonl", lms=gs.LMSettings(lm="openai/gpt-4o-mini"))
    for row in evaluation.rows():
        print(row["name"], row["t3"])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.eval.assemble import assemble, execute
from groundstate.eval.reground.settings import EvaluationData
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.report import comparison_rows
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunAborted, program_state_hash
from groundstate.eval.settings import LMSettings
from groundstate.eval.task import LoadedData, RunContext

LABELS = ("before (unoptimized)", "after (optimized)")


@dataclass
class Evaluation:
    """What ``groundstate evaluate`` prints and writes.

    Attributes:
        summaries: each label's (``before (unoptimized)``, ``after (optimized)``) run summary; a run that failed
            contributes what it finished and its ``stopped_reason``.
        data: the records' description (file and hash, or generator settings).
        title: the report's title.
        warnings: what the user should know (a program the optimizer left unchanged).
        run_ids: each label's run id.
    """

    summaries: dict[str, dict[str, Any]]
    data: dict[str, Any]
    title: str
    warnings: list[str] = field(default_factory=list)
    run_ids: dict[str, str] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        """The comparison rows the command prints (:func:`~groundstate.eval.report.comparison_rows`)."""
        return comparison_rows(self.summaries)


def evaluation_config(config: dict[str, Any], label: str) -> dict[str, Any]:
    """The run config of an evaluation run: the task's config, without ``lm_config`` and with the label in its
    options (how ``evaluate`` has always identified its runs, so their run ids stay what they were)."""
    return {**{k: v for k, v in config.items() if k != "lm_config"},
            "options": {**config.get("options", {}), "evaluate": label}}


def evaluate_saved(directory: str | os.PathLike, data: EvaluationData, run: RunSettings | None = None,
                   context: RunContext | None = None, saved: tuple[dict[str, Any], Any] | None = None,
                   source: Any = None) -> Evaluation:
    """Run the program saved in ``directory`` (after) and its unoptimized version (before) on ``data``.

    Data that shares instance ids or source cases with the manifest's train/val data is refused unless
    ``data.allow_overlap``; a saved program whose state equals the unoptimized one is evaluated with a warning.
    ``saved`` is what :func:`~groundstate.eval.reground.optimize.read_optimized` returned (read here when not
    given); ``source`` gives the records in memory instead of ``data.data``.

    Raises:
        InputError: a manifest field of the wrong type or missing.
        ConfigError: the directory is not a program saved by ``groundstate optimize``, or the data overlaps the
            data it was optimized on (without ``allow_overlap``).
    """
    from groundstate.eval.reground.optimize import check_no_overlap, read_optimized  # noqa: PLC0415 (heavy: dspy)
    from groundstate.optimizers.artifacts import MANIFEST, build_saved, load_program  # noqa: PLC0415 (heavy: dspy)

    manifest, checked = saved if saved is not None else read_optimized(directory)
    context = context or RunContext()
    after = load_program(directory)
    before = build_saved(directory, manifest)
    task = OFFQUERY_TASKS[checked.task]
    condition = data.condition or checked.task_options.condition
    values = {**data.model_dump(exclude={"allow_overlap"}), "condition": condition, **checked.build_values()}
    settings = task.settings.parse({k: v for k, v in values.items() if k in task.settings.model_fields},
                                   file=Path(directory) / MANIFEST, loc=("build_args",))
    loaded = LoadedData(*task.load(settings, source))
    if not data.allow_overlap:
        check_no_overlap(loaded.records, checked)
    warnings = []
    if program_state_hash(before) == program_state_hash(after):
        warnings.append("the saved program's state equals the unoptimized program's (the optimizer changed "
                        "nothing): before and after will score the same")
    summaries, run_ids = {}, {}
    for label, program in zip(LABELS, (before, after), strict=True):
        _, _, planned = assemble(task, settings, context, program=program, source=loaded)
        planned.config = evaluation_config(planned.config, label)
        planned.description = label
        try:
            result = execute(planned, run, context)
        except RunAborted as exc:
            result = exc.result
        summaries[label], run_ids[label] = result.summary, result.run_id
    title = f"{task.name} on {loaded.description.get('file', 'synthetic')} ({condition} shared context)"
    return Evaluation(summaries, loaded.description, title, warnings, run_ids)


def evaluate(saved_dir: str | os.PathLike, data: Any = "synthetic", *, run: RunSettings | None = None,
             lms: LMSettings | None = None, context: RunContext | None = None, **options: Any) -> Evaluation:
    """Evaluate a program saved by ``groundstate optimize``: the Python form of ``groundstate evaluate``.

    Args:
        saved_dir: the directory ``optimize`` wrote.
        data: an OffQuery file, ``"synthetic"``, an :class:`~groundstate.eval.reground.settings.EvaluationData`, or
            the records in memory (a list of dicts, a ``datasets.Dataset``, a pandas ``DataFrame``).
        run: the run settings (where the runs go, threads, limit, ...); default :class:`RunSettings`.
        lms: the LM options (default: the embedded LM); ignored when ``context`` is given.
        context: a :class:`~groundstate.eval.task.RunContext` to share LMs and the judge with other runs.
        **options: the other fields of :class:`~groundstate.eval.reground.settings.EvaluationData` (``condition``,
            ``judge_lm``, ``allow_overlap``, ``n``, ...).

    Returns:
        The :class:`Evaluation` the command prints (``rows()``: its table).
    """
    source = None
    if isinstance(data, EvaluationData):
        settings = data.model_copy(update=options) if options else data
    elif isinstance(data, str | os.PathLike):
        settings = EvaluationData.parse({"data": str(data), **options})
    else:
        source, settings = data, EvaluationData.parse({"data": "records", **options})
    context = context or RunContext(lms=lms or LMSettings())
    return evaluate_saved(saved_dir, settings, run, context, source=source)
