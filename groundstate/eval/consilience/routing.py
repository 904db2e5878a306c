"""The speaker-routing ablation of §5.5 (2) and Table 8: the same state and action, every possible speaker.

Along trajectories of a Consilience program (its own router choosing who actually speaks), each round whose
executed action is a communication action is replayed once per agent as the speaker (the action held fixed,
:func:`~groundstate.programs.consilience.consilience.speaker_branch`), giving the objective ``J_i`` of the next
state with speaker ``i``. Each routing policy (:data:`~groundstate.programs.consilience.control.ROUTERS`) is
then scored on the speaker it would pick there, ``r``:

- objective change ``dJ = J_r - J(s)`` (negative = the discussion state improved), averaged over all steps;
- normalised regret ``(J_r - min_i J_i) / (max_i J_i - min_i J_i)`` (0 = the best speaker, 1 = the worst),
  averaged over the steps where speakers differ at all; steps where every speaker gives the same ``J`` have no
  regret to normalise and are counted separately (``flat_steps``), never silently dropped.

The paper measures the same two quantities (Table 8); it does not say how it treats steps with no spread, so
the rule above is ours. Each policy also reports ``differs_from_round_robin``, the share of steps at which its
pick is not round-robin's: a policy that agrees with round-robin at almost every step cannot be told apart from
it by these means (the action-conditional router's share is the figure to look at first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundstate.eval.report import pipe_lines
from groundstate.programs.consilience.consilience import RoundView, speaker_branch
from groundstate.programs.consilience.control import ROUTERS, ControlContext, route

FLAT = 1e-12


def speaker_outcomes(view: RoundView) -> dict[str, Any] | None:
    """For one round: ``J`` of the state, ``J`` after each speaker carries out the executed action, and each
    router's pick; ``None`` when the round ended in Vote."""
    if view.executed == "Vote":
        return None
    task, agents = view.task, view.agents
    outcomes = [speaker_branch(task, agents, view.transcript, view.executed, i, view.round, view.max_rounds,
                               view.weights).state.J for i in range(len(agents))]
    ctx = ControlContext(task, view.transcript, view.beliefs, view.transcript.spoken(len(agents)),
                         [view.executed], view.seed)
    return {"task": task.id, "round": view.round, "action": view.executed, "J": view.state.J,
            "outcomes": outcomes, "picks": {r: route(view.executed, ctx, r) for r in ROUTERS}}


def routing_metrics(steps: Sequence[dict[str, Any]], routers: Sequence[str] = ROUTERS) -> dict[str, dict[str, Any]]:
    """Per router: ``mean_dJ`` over all steps, ``normalized_regret`` over steps with a spread of outcomes,
    ``steps``, ``flat_steps`` and ``differs_from_round_robin`` (the share of steps whose pick is not round-robin's;
    ``None`` without steps) (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for router in routers:
        changes, regrets, flat, differ = [], [], 0, 0
        for step in steps:
            outcomes = step["outcomes"]
            picked = outcomes[step["picks"][router]]
            differ += step["picks"][router] != step["picks"]["round-robin"]
            changes.append(picked - step["J"])
            low, high = min(outcomes), max(outcomes)
            if high - low <= FLAT:
                flat += 1
            else:
                regrets.append((picked - low) / (high - low))
        out[router] = {"mean_dJ": sum(changes) / len(changes) if changes else None,
                       "normalized_regret": sum(regrets) / len(regrets) if regrets else None,
                       "steps": len(changes), "flat_steps": flat,
                       "differs_from_round_robin": differ / len(changes) if changes else None}
    return out


def routing_ablation(program: Any, tasks: Sequence[Any]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Run ``program`` (a :class:`~groundstate.programs.consilience.consilience.Consilience`) over ``tasks``,
    collecting :func:`speaker_outcomes` every round; returns ``(routing_metrics(steps), steps)``. The program's
    ``on_round`` is restored afterwards."""
    steps: list[dict[str, Any]] = []
    previous = program.on_round

    def collect(view: RoundView) -> None:
        step = speaker_outcomes(view)
        if step is not None:
            steps.append(step)

    program.on_round = collect
    try:
        for task in tasks:
            program(task=task)
    finally:
        program.on_round = previous
    return routing_metrics(steps), steps


HEADER: tuple[str, ...] = ("routing policy", "mean dJ", "normalized regret", "steps", "steps with no spread",
                           "picks unlike round-robin")


def table_cells(metrics: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Each routing policy's cells under :data:`HEADER` (shared by the Markdown and the terminal table)."""
    body = []
    for router, m in metrics.items():
        regret = "n/a" if m["normalized_regret"] is None else f"{m['normalized_regret']:.4f}"
        dj = "n/a" if m["mean_dJ"] is None else f"{m['mean_dJ']:+.4f}"
        differ = m.get("differs_from_round_robin")
        body.append([router, dj, regret, str(m["steps"]), str(m["flat_steps"]),
                     "n/a" if differ is None else f"{differ:.1%}"])
    return body


def round_robin_line(metrics: dict[str, dict[str, Any]], router: str = "action-conditional") -> str:
    """One sentence: how often ``router``'s pick differed from round-robin's (for a study's printout)."""
    m = metrics.get(router) or {}
    share = m.get("differs_from_round_robin")
    if share is None:
        return f"the {router} router made no pick (no communication step)"
    return (f"the {router} router picked another speaker than round-robin at {round(share * m['steps'])} of "
            f"{m['steps']} steps ({share:.1%})")


def markdown(metrics: dict[str, dict[str, Any]]) -> str:
    """Table 8's layout: routing policy, mean objective change, normalised regret (plus step counts)."""
    return "\n".join(pipe_lines(HEADER, table_cells(metrics))) + "\n"
