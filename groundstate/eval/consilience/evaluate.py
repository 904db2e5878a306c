"""Running the reference protocols and Consilience on hidden-profile tasks, durably, and comparing them.

- :func:`make_team`: the agents of a run, LM agents (one LM per ``agent.i`` role) or seeded simulated agents,
  with the description that goes into the run's fingerprint.
- :func:`run_protocol`: one reference protocol (Hidden-Pre, Hidden-Post, Full-Info) over the tasks.
- :func:`evaluate_programs`: several programs (protocols and controllers) over the same tasks, one run each,
  with the per-task scores and the §4.2 pooled vote accuracy.
- :func:`run_tasks`: a program over tasks in memory (calibration and coverage use it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.consilience.metrics import discussion_scorer, pooled_vote_accuracy
from groundstate.eval.runner import RunAborted, RunResult, RunSettings, durable_run, run_config
from groundstate.records import HiddenProfileTask


def run_tasks(program: Any, tasks: Sequence[HiddenProfileTask]) -> list[Any]:
    """``program(task=task)`` for every task, in memory (no run directory)."""
    return [program(task=task) for task in tasks]


def make_team(kind: str, tasks: Sequence[HiddenProfileTask], tasks_file: str, *, sim_params: Any = None,
              seed: int = 0, lm: Any = None, lm_config: Any = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(team, agents description, LM description)`` for ``kind`` ``sim`` or ``lm``.

    Args:
        kind: ``sim`` (seeded simulated agents, every task needs per-fact support) or ``lm``.
        tasks, tasks_file: the tasks and their file (named in errors).
        sim_params: the :class:`~groundstate.programs.consilience.simulated.SimParams` for ``sim``.
        seed: the simulated agents' seed.
        lm, lm_config: the default LM and the per-role configuration for ``lm`` (agent ``i`` uses role
            ``agent.i``).

    Raises:
        InputError: simulated agents on a task without per-fact support.
    """
    from groundstate.lm.specs import describe_lm
    from groundstate.programs.consilience.agents import LMTeam
    from groundstate.programs.consilience.simulated import SimParams, SimTeam

    if kind == "sim":
        params = sim_params or SimParams()
        unannotated = next((t for t in tasks if not t.support), None)
        if unannotated is not None:
            raise InputError("simulated agents need per-fact support; give the tasks support (--support) or use "
                             "--agents lm",
                             file=tasks_file, record=unannotated.id, field="support")
        return SimTeam(params, seed), {"kind": "sim", "params": asdict(params), "seed": seed}, {"model": None}
    if kind != "lm":
        raise ConfigError(f"unknown agents '{kind}': use sim or lm")
    team = LMTeam(lambda i: lm_config.lm_for(f"agent.{i}"))
    return team, {"kind": "lm", "lm_config": lm_config.describe() if lm_config.roles else None}, describe_lm(lm)


def run_protocol(protocol: str, rounds: int | None, tasks: Sequence[HiddenProfileTask], data: dict[str, Any],
                 team: Any, agents: dict[str, Any], lm: dict[str, Any], seed: int, settings: RunSettings) -> RunResult:
    """One reference protocol over the tasks, durably (``groundstate hidden run``); ``rounds=None`` plays the
    protocol's default (:func:`~groundstate.programs.consilience.protocols.default_rounds`)."""
    from groundstate.programs.consilience.protocols import HiddenProfileProtocol

    if rounds is not None and rounds < 0:
        raise ConfigError("--rounds must be >= 0")
    try:
        program = HiddenProfileProtocol(protocol, rounds, team=team, seed=seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    name = f"{protocol}-{agents['kind']}"
    config = run_config(name, state=program, lm=lm, data=data, seed=seed,
                        options={"protocol": protocol, "rounds": program.rounds, "agents": agents})
    return durable_run(program, config, tasks, settings, inputs=lambda task: {"task": task},
                       scorer=discussion_scorer(initial=protocol == "hiddenbench"), description=name)


def evaluate_programs(programs: Mapping[str, tuple[Any, dict[str, Any]]], tasks: Sequence[HiddenProfileTask],
                      data: dict[str, Any], agents: dict[str, Any], lm: dict[str, Any], seed: int,
                      settings: RunSettings) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Run every ``label -> (program, options)`` over the tasks (one durable run each).

    Returns:
        ``(summaries, pooled, rows)``: each label's run summary, its §4.2 vote accuracy pooled over all votes,
        and its per-task rows. A run that failed (``max_error_rate``, or every task failed) contributes what it
        finished; its summary's ``stopped_reason`` says why.
    """
    summaries, pooled, rows = {}, {}, {}
    for label, (program, options) in programs.items():
        config = run_config("consilience-" + label.split()[0].replace("+", "-"), state=program, lm=lm, data=data,
                            seed=seed, options={**options, "agents": agents, "label": label})
        initial = getattr(program, "protocol", None) == "hiddenbench"
        try:
            result = durable_run(program, config, tasks, settings, inputs=lambda task: {"task": task},
                                 scorer=discussion_scorer(initial=initial), description=label)
        except RunAborted as exc:
            result = exc.result
        summaries[label] = result.summary
        pooled[label] = pooled_vote_accuracy(result.rows)
        rows[label] = result.rows
    return summaries, pooled, rows
