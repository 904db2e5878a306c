"""The one way a run is assembled and started: typed settings -> a planned run -> the durable runner.

Every durable run of groundstate goes through here: ``groundstate run`` and ``compare`` (the OffQuery programs and
``qa``), ``evaluate`` (a saved program and its unoptimized version), the DHD steps (``dhd generate``, ``replay``,
``mask``), ``hidden run`` and ``consilience evaluate``/``table``. Each is a registered task
(:mod:`groundstate.eval.tasks`) whose settings model says what it takes.

- :func:`assemble`: the task (by name or object), its settings validated into its model, and the
  :class:`~groundstate.eval.task.PlannedRun` (program, records, scorer, run configuration), without running.
- :func:`~groundstate.eval.task.execute`: a planned run through :func:`~groundstate.eval.runner.durable_run` under
  the run settings (in :mod:`groundstate.eval.task`, so the tasks' own modules can use it without importing the
  registry).
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

from collections.abc import Mapping
from typing import Any

from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunResult
from groundstate.eval.settings import LMSettings, Settings
from groundstate.eval.task import PlannedRun, RunContext, Task, execute


def task_named(task: Task | str) -> Task:
    """The task itself, or the registered task of that name (:func:`groundstate.eval.tasks.get_task`)."""
    if isinstance(task, Task):
        return task
    from groundstate.eval.tasks import get_task  # noqa: PLC0415 (heavy: dspy)

    return get_task(task)


def assemble(task: Task | str, settings: Settings | Mapping[str, Any] | None = None,
             context: RunContext | None = None, *, lms: LMSettings | None = None, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> tuple[Task, Settings, PlannedRun]:
    """``(task, settings, planned run)``: ``settings`` validated into the task's model (a mapping from a spec or a
    manifest: one line naming the field when it does not fit; settings of another model: narrowed to this task's
    fields), then planned. Nothing runs and no LM is called.

    Args:
        task: a :class:`~groundstate.eval.task.Task` or a registered task's name.
        settings: the task's settings (``None``: its defaults).
        context: what the runs of one command share (LMs, judge, notes); default: a new one with ``lms``.
        lms: the LM options when no ``context`` is given (default: the embedded LM).
        run: the run settings the plan will run under (a DHD step sizes its program's concurrent calls by
            ``run.call_threads``); default :class:`~groundstate.eval.run_settings.RunSettings`.
        program: a ready program instead of the task's own (a loaded optimized program).
        source: the records in memory instead of the settings' data file.
    """
    task = task_named(task)
    settings = task.settings.parse(settings if settings is not None else {})
    context = context or RunContext(lms=lms or LMSettings())
    return task, settings, task.plan(settings, context, run=run or RunSettings(), program=program, source=source)


def run_task(task: Task | str, settings: Settings | Mapping[str, Any] | None = None, run: RunSettings | None = None,
             *, context: RunContext | None = None, lms: LMSettings | None = None, program: Any = None,
             source: Any = None) -> RunResult | None:
    """Assemble the run ``settings`` describe and run it durably (resumable: the same settings find the same run
    directory and run only what is left). See :func:`assemble` for the arguments and
    :func:`~groundstate.eval.task.execute` for the result."""
    context = context or RunContext(lms=lms or LMSettings())
    _, _, planned = assemble(task, settings, context, run=run, program=program, source=source)
    return execute(planned, run, context)
