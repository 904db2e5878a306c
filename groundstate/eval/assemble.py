"""The one way a run is assembled and started: typed settings -> a planned run -> the durable runner.

Every durable run of groundstate goes through here: ``groundstate run`` and ``compare`` (the OffQuery programs and
``qa``), ``evaluate`` (a saved program and its unoptimized version), the DHD steps (``dhd generate``, ``replay``,
``mask``), ``hidden run`` and ``consilience evaluate``/``table``. Each is a registered task
(:mod:`groundstate.eval.tasks`) whose settings model says what it takes.

- :func:`assemble`: the task (by name or object), its settings validated into its model, and the
  :class:`~groundstate.eval.task.PlannedRun` (program, records, scorer, run configuration), without running.
- :func:`execute`: a planned run through :func:`~groundstate.eval.runner.durable_run` under the run settings.
- :func:`run_task`: both.

Example::

    import groundstate as gs
    from groundstate.eval.reground.settings import ReGroundSettings

    result = gs.run_task("reground", ReGroundSettings(data="synthetic", n=5),
                         gs.RunSettings(out="runs", threads=4), lms=gs.LMSettings(lm="openai/gpt-4o-mini"))
    print(result.run_id, result.summary["metrics"])

The command ``groundstate run reground --n 5 --runs-dir runs --threads 4 --lm openai/gpt-4o-mini`` builds the same
settings and so runs (or resumes) the same run: the same run id.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from typing import Any

from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunResult, durable_run
from groundstate.eval.settings import LMSettings, Settings
from groundstate.eval.task import PlannedRun, RunContext, Task


def task_named(task: Task | str) -> Task:
    """The task itself, or the registered task of that name (:func:`groundstate.eval.tasks.get_task`)."""
    if isinstance(task, Task):
        return task
    from groundstate.eval.tasks import get_task

    return get_task(task)


def assemble(task: Task | str, settings: Settings | Mapping[str, Any] | None = None,
             context: RunContext | None = None, *, lms: LMSettings | None = None, program: Any = None,
             source: Any = None) -> tuple[Task, Settings, PlannedRun]:
    """``(task, settings, planned run)``: ``settings`` validated into the task's model (a mapping from a spec or a
    manifest: one line naming the field when it does not fit; settings of another model: narrowed to this task's
    fields), then planned. Nothing runs and no LM is called.

    Args:
        task: a :class:`~groundstate.eval.task.Task` or a registered task's name.
        settings: the task's settings (``None``: its defaults).
        context: what the runs of one command share (LMs, judge, notes); default: a new one with ``lms``.
        lms: the LM options when no ``context`` is given (default: the embedded LM).
        program: a ready program instead of the task's own (a loaded optimized program).
        source: the records in memory instead of the settings' data file.
    """
    task = task_named(task)
    settings = task.settings.parse(settings if settings is not None else {})
    context = context or RunContext(lms=lms or LMSettings())
    return task, settings, task.plan(settings, context, program=program, source=source)


def execute(planned: PlannedRun, run: RunSettings | None = None, context: RunContext | None = None
            ) -> RunResult | None:
    """Run a planned run durably under ``run`` (see :func:`~groundstate.eval.runner.durable_run`).

    Returns ``None`` when the plan has nothing to run (its ``outcome`` says why); otherwise the result, with
    ``result.outcome`` set by the plan's ``after``. Raises :class:`~groundstate.eval.runner.RunAborted` when the
    run fails (everything finished is kept). When ``context`` built the LMs itself (a Python caller gave LM
    settings, not built LMs), they are DSPy's LM and adapter for the run's duration, and Ray workers get their
    key-free specs.
    """
    run = run or RunSettings()
    if planned.records is None:
        return None
    built = context is not None and context.built_lms()
    if built and run.backend == "ray" and run.lm_spec is None and run.worker_setup is None:
        run = run.model_copy(update={"lm_spec": context.lm_config.worker_spec()})
    run = run.model_copy(update={"out": planned.out(run)})
    if planned.before is not None:
        planned.before(planned.out(run) / planned.run_id(run))
    with contextlib.ExitStack() as stack:
        if built:
            import dspy

            from groundstate.lm.specs import default_adapter

            stack.enter_context(dspy.context(lm=context.lm, adapter=default_adapter(context.lm)))
        if planned.ignore_warnings:
            stack.enter_context(warnings.catch_warnings())
            for message in planned.ignore_warnings:
                warnings.filterwarnings("ignore", message=message)
        result = durable_run(planned.program, planned.config, planned.records, run, inputs=planned.inputs,
                             scorer=planned.scorer, outputs=planned.outputs, description=planned.description)
    if planned.after is not None:
        result.outcome = planned.after(result)
    return result


def run_task(task: Task | str, settings: Settings | Mapping[str, Any] | None = None, run: RunSettings | None = None,
             *, context: RunContext | None = None, lms: LMSettings | None = None, program: Any = None,
             source: Any = None) -> RunResult | None:
    """Assemble the run ``settings`` describe and run it durably (resumable: the same settings find the same run
    directory and run only what is left; see :func:`assemble` for the arguments, :func:`execute` for the result).
    """
    context = context or RunContext(lms=lms or LMSettings())
    _, _, planned = assemble(task, settings, context, program=program, source=source)
    return execute(planned, run, context)
