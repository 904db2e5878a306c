"""Running the reference protocols and Consilience on hidden-profile tasks, durably, and comparing them.

- :func:`run_protocol`: one reference protocol (Hidden-Pre, Hidden-Post, Full-Info) over the tasks: the registered
  task ``hidden-protocol`` (``groundstate hidden run``).
- :func:`evaluate_programs`: the controllers and reference protocols of an
  :class:`~groundstate.eval.consilience.settings.EvaluationSettings` over the same tasks, one run each of the
  registered task ``consilience``, with the per-task scores and the §4.2 pooled vote accuracy.
- :func:`run_tasks`: a program over tasks in memory (calibration and coverage use it).

Both durable entry points assemble their runs through :mod:`groundstate.eval.assemble`; the tasks, the team
and the run configurations are in :mod:`groundstate.eval.consilience.tasks`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.eval import assemble as assembly  # assembly.assemble looked up at call time: tests spy on it
from groundstate.eval.assemble import run_task
from groundstate.eval.consilience.metrics import pooled_vote_accuracy
from groundstate.eval.consilience.settings import EvaluationSettings, ProtocolSettings
from groundstate.eval.consilience.tasks import HiddenSetup, hidden_setup
from groundstate.eval.consilience.tasks import make_team as make_team
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunAborted, RunResult
from groundstate.eval.task import RunContext, execute
from groundstate.records import HiddenProfileTask


def run_tasks(program: Any, tasks: Sequence[HiddenProfileTask]) -> list[Any]:
    """``program(task=task)`` for every task, in memory (no run directory)."""
    return [program(task=task) for task in tasks]


def run_protocol(settings: ProtocolSettings, run: RunSettings | None = None,
                 context: RunContext | None = None) -> RunResult:
    """One reference protocol over the tasks, durably (``groundstate hidden run``); ``settings.rounds=None`` plays
    the protocol's default (:func:`~groundstate.programs.consilience.protocols.default_rounds`). Raises
    :class:`~groundstate.eval.runner.RunAborted` when the run fails (everything finished is kept)."""
    return run_task("hidden-protocol", settings, run, context=context or RunContext())


@dataclass
class Evaluation:
    """What an evaluation of several programs left: by label, each run's ``summaries``, its §4.2 vote accuracy
    ``pooled`` over all votes, its per-task ``rows``, its program's discussion ``rounds`` and ``options`` (the run
    config's, without the agents and the label); ``setup``: the tasks and agents they ran on."""

    summaries: dict[str, Any] = field(default_factory=dict)
    pooled: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    setup: HiddenSetup | None = None

    @property
    def labels(self) -> list[str]:
        return list(self.summaries)


def evaluate_programs(settings: EvaluationSettings, run: RunSettings | None = None,
                      context: RunContext | None = None) -> Evaluation:
    """Run every program of ``settings`` (:meth:`EvaluationSettings.programs`) over the same tasks and team, one
    durable run each (through :func:`~groundstate.eval.assemble.run_task`). A run that failed
    (``max_error_rate``, or every task failed) contributes what it finished; its summary's ``stopped_reason`` says
    why."""
    context = context or RunContext()
    out = Evaluation()
    plans = [assembly.assemble("consilience", program, context, run=run)[2] for program in settings.programs()]
    for planned in plans:  # every program is built (and its calibrator checked) before any of them runs
        label = planned.description
        try:
            result = execute(planned, run, context)
        except RunAborted as exc:
            result = exc.result
        out.summaries[label], out.rows[label] = result.summary, result.rows
        out.pooled[label] = pooled_vote_accuracy(result.rows)
        out.rounds[label] = getattr(planned.program, "rounds", 0)
        out.options[label] = {k: v for k, v in planned.config["options"].items() if k not in ("agents", "label")}
    out.setup = hidden_setup(settings, context)
    return out
