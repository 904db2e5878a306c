"""The registry of runnable tasks: every system's tasks by name, and the ones a user registers.

``groundstate run NAME`` lists the registered :class:`~groundstate.eval.task.ProgramTask` objects; the other durable
commands (``evaluate``, ``dhd generate|replay|mask``, ``hidden run``, ``consilience evaluate|table``, and the
Consilience studies ``consilience-features`` and ``consilience-routing`` that experiment specs run) run their
registered tasks through the same :func:`~groundstate.eval.assemble.run_task`. The systems' task modules are
imported here by plain imports (they import only :mod:`groundstate.eval.task`, never this registry, so there is no
cycle); a user adds a task with :func:`register`.
"""

from __future__ import annotations

from groundstate.errors import ConfigError
from groundstate.eval.consilience.study_tasks import STUDY_TASKS
from groundstate.eval.consilience.tasks import CONSILIENCE_TASKS
from groundstate.eval.dhd.steps import DHD_TASKS
from groundstate.eval.qa import QA
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.task import ProgramTask, Task

#: Every registered task by name (groundstate's own first, then the user's).
TASKS: dict[str, Task] = {QA.name: QA, **OFFQUERY_TASKS, **DHD_TASKS, **CONSILIENCE_TASKS, **STUDY_TASKS}


def register(task: Task) -> Task:
    """Register ``task`` under its name (replacing a task of that name); returns it."""
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The registered task ``name``.

    Raises:
        ConfigError: no task of that name (the message lists the names).
    """
    if name not in TASKS:
        raise ConfigError(f"unknown program '{name}'; available: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def program_tasks() -> dict[str, ProgramTask]:
    """The tasks ``groundstate run`` offers: the registered :class:`~groundstate.eval.task.ProgramTask` objects."""
    return {name: task for name, task in TASKS.items() if isinstance(task, ProgramTask)}


def offquery_names() -> list[str]:
    """The OffQuery programs (``compare``, ``optimize``, the paper tables): ``reground`` and the baselines."""
    return list(OFFQUERY_TASKS)
