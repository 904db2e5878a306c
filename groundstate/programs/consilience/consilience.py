"""Consilience: control a hidden-profile discussion round by round, with conformal acceptance.

Each round: elicit beliefs -> collective state -> the controller proposes an action -> every admissible
action is evaluated as a counterfactual branch (route a speaker, let them speak, update every belief,
compute J of the next state) -> regret ``R(s, a) = J(s^a) - min_a' J(s^a')`` -> conformal acceptance: the
proposal is executed if its regret is within the round's threshold, otherwise an action from the conformal
set ``{a : R(s, a) <= threshold}`` (its lowest-regret action) -> the executed branch *is* the evaluated one
(its message and beliefs join the real transcript; nothing is resampled) -> repeat until Vote or the round
limit -> every agent votes -> plurality with a confidence tie-break.

The admissible actions are the configuration's (:func:`~groundstate.programs.consilience.control.admissible_actions`):
Vote only where the controller's termination rule permits it, so neither a proposal nor a replacement can end
the discussion earlier than the configuration allows.

Set sampling (the paper's conformal-sampling ablation, §5.5 (1), ``set_sampling="every-round"``): every
round the executed action is drawn uniformly from the conformal set, whatever the proposal (the proposal is
still recorded and scored). ``set_sampling="on-reject"`` draws from the set only to replace a rejected
proposal (groundstate's earlier ablation).

The Vote branch leaves the discussion as it is: its outcome is the current state, so its regret is
``J(s) - min_a' J(s^a')``. Without a calibrator (or at a round the calibration never reached) the
threshold is ``+inf``: every action is admissible, the proposal is executed, and the trace marks the round
uncertified. Calibration trajectories are exactly such runs (see :func:`proposal_scores`).

Works with any agents implementing :class:`~groundstate.records.DiscussionAgent` (LM or simulated). Every
round's state, proposal, regrets, threshold, executed action and speaker goes into the trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy
import numpy as np

from groundstate.concurrency import thread_map
from groundstate.programs.common import on_worker_thread, plurality
from groundstate.programs.consilience.control import ControlContext, admissible_actions, route, vote_permitted
from groundstate.programs.consilience.simulated import SimAgent, group_beliefs
from groundstate.programs.consilience.state import (
    STORED_FEATURES,
    CollectiveState,
    LossWeights,
    branch_states,
    state_and_divergences,
)
from groundstate.records import COMM_ACTIONS, Belief, DiscussionAgent, HiddenProfileTask, Transcript


@dataclass
class Branch:
    """One evaluated action: who spoke, what they said, and the resulting beliefs and state (``spread``: each
    agent's divergence from the mean of ``beliefs``, kept for routing from this state)."""

    action: str
    speaker: int | None
    transcript: Transcript
    beliefs: list[Belief]
    state: CollectiveState
    spread: np.ndarray | None = None


@dataclass
class RoundView:
    """One round of a Consilience discussion as ``on_round`` sees it: the state the decision was made in and
    what was executed (``speaker`` is ``None`` for Vote)."""

    task: HiddenProfileTask
    agents: list[Any]
    transcript: Transcript
    beliefs: list[Belief]
    state: CollectiveState
    round: int
    executed: str
    speaker: int | None
    max_rounds: int
    weights: LossWeights
    seed: int


def worker_count(agents: Sequence[Any], threads: int) -> int:
    """Threads worth using: simulated agents are pure CPU, so they run inline (1); LM agents use ``threads``."""
    return 1 if all(getattr(a, "is_simulated", False) for a in agents) else threads


def _grouped(agents: Sequence[Any]) -> bool:
    """Whether every agent is a plain :class:`SimAgent`, whose beliefs :func:`group_beliefs` computes together."""
    return bool(agents) and all(type(agent) is SimAgent for agent in agents)


def elicit(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript, round: int,
           threads: int = 8) -> list[Belief]:
    """Every agent's belief at ``transcript`` (concurrently; simulated agents together)."""
    if _grouped(agents):
        return group_beliefs(list(agents), task, transcript, round)
    return thread_map(lambda agent: agent.belief(task, transcript, round), list(agents), threads)


def final_votes(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript,
                threads: int = 8) -> list[Belief]:
    """Every agent's final vote at ``transcript`` (concurrently; simulated agents together)."""
    if _grouped(agents):
        return group_beliefs(list(agents), task, transcript, 0, final=True)
    return thread_map(lambda agent: agent.vote(task, transcript), list(agents), threads)


def speaker_branch(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript,
                   action: str, speaker: int, round: int, max_rounds: int, weights: LossWeights | None = None
                   ) -> Branch:
    """``speaker`` carries out ``action`` from ``transcript``: the message, every agent's new belief, the new
    state (one counterfactual branch)."""
    after, new_beliefs = _spoken(task, agents, transcript, action, speaker, round)
    new_state, spread = state_and_divergences(task, new_beliefs, after, round + 1, max_rounds, weights)
    return Branch(action, speaker, after, new_beliefs, new_state, spread)


def _spoken(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript, action: str,
            speaker: int, round: int) -> tuple[Transcript, list[Belief]]:
    """The transcript after ``speaker`` carries out ``action``, and every agent's belief there."""
    after = transcript.with_message(agents[speaker].speak(task, transcript, action, round))
    return after, elicit(task, agents, after, round + 1, threads=1)


def evaluate_branches(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript,
                      beliefs: list[Belief], state: CollectiveState, actions: Sequence[str], round: int,
                      max_rounds: int, router: str = "action-conditional", weights: LossWeights | None = None,
                      seed: int = 0, threads: int = 8, spread: np.ndarray | None = None) -> dict[str, Branch]:
    """Evaluate every action in ``actions`` from the same state (the messages and beliefs concurrently, then the
    states of all branches together); see the module docstring. ``spread`` is each agent's divergence from
    the mean of ``beliefs`` when the caller has it."""
    spoken = transcript.spoken(len(agents))
    ctx = ControlContext(task, transcript, beliefs, spoken, list(actions), seed, spread=spread)
    spread = ctx.belief_divergences() if router in ("action-conditional", "most-disagreeing") else spread
    speakers = {a: route(a, ctx, router) for a in actions if a != "Vote"}
    said = dict(zip(speakers, thread_map(lambda a: _spoken(task, agents, transcript, a, speakers[a], round),
                                         list(speakers), threads), strict=True))
    states = branch_states(task, [b for _, b in said.values()], [t for t, _ in said.values()], round + 1,
                           max_rounds, weights)
    branches = {a: Branch(a, speakers[a], after, new_beliefs, new_state, new_spread)
                for (a, (after, new_beliefs)), (new_state, new_spread) in zip(said.items(), states, strict=True)}
    return {a: branches[a] if a != "Vote" else Branch(a, None, transcript, beliefs, state, spread) for a in actions}


def regrets_of(branches: dict[str, Branch]) -> dict[str, float]:
    best = min(b.state.J for b in branches.values())
    return {a: b.state.J - best for a, b in branches.items()}


SET_SAMPLING: tuple[str, ...] = ("off", "every-round", "on-reject")


class Consilience(dspy.Module):
    """The Consilience loop over one task.

    Args:
        agents: ``task -> list of agents`` (one per agent of the task).
        controller: proposes an action (``RuleController``, ``ValueController``, ``LLMController``).
        calibrator: a fitted :class:`~groundstate.optimizers.conformal.RoundwiseConformal` (or anything with
            ``threshold(round)``); ``None`` makes every round uncertified (every action admissible).
        router: ``action-conditional`` (default) or an ablation router.
        max_rounds: the round limit (K).
        weights: the weights of J.
        removed_actions: actions taken out for the whole discussion (leave-one-out ablation).
        set_sampling: ``off`` (default), ``every-round`` (the paper's ablation: execute a uniform draw from the
            conformal set every round) or ``on-reject`` (draw only to replace a rejected proposal).
        sample_from_set: ``True`` is ``set_sampling="every-round"`` (kept for callers of earlier versions).
        min_vote_round: an extra lower bound on the round at which Vote is admissible (``None``: only the
            controller's own termination rule; see
            :func:`~groundstate.programs.consilience.control.vote_permitted`).
        seed: seeds routing and sampling.
        threads: concurrency for belief elicitation and branches.
        on_round: called after each round's decision with a :class:`RoundView` (for analyses that need the
            round's transcript and beliefs, such as the speaker-routing counterfactuals); not part of the
            program's saved state.

    ``forward(task)`` returns ``Prediction(answer, votes, transcript, rounds, words, messages, trace, correct,
    final_state)``; ``rounds`` counts controlled rounds that produced a message (a round ending in Vote adds
    none) and ``final_state`` is the collective state the discussion ended in (its ``J`` is the "final
    objective" of the paper's Table 6).
    """

    def __init__(self, agents: Callable[[HiddenProfileTask], Sequence[DiscussionAgent]], controller: Any,
                 calibrator: Any = None, router: str = "action-conditional", max_rounds: int = 10,
                 weights: LossWeights | None = None, removed_actions: Sequence[str] = (),
                 set_sampling: str = "off", sample_from_set: bool = False, min_vote_round: int | None = None,
                 seed: int = 0, threads: int = 8, on_round: Callable[[RoundView], None] | None = None):
        super().__init__()
        if sample_from_set:
            set_sampling = "every-round"
        if set_sampling not in SET_SAMPLING:
            raise ValueError(f"unknown set_sampling '{set_sampling}'; choose from {', '.join(SET_SAMPLING)}")
        self.agents = agents
        self.controller = controller
        self.calibrator = calibrator
        self.router = router
        self.max_rounds = max_rounds
        self.weights = weights or LossWeights()
        self.removed_actions = tuple(removed_actions)
        self.set_sampling = set_sampling
        self.min_vote_round = min_vote_round
        self.seed = seed
        self.threads = threads
        self.on_round = on_round

    def threshold(self, round: int) -> float:
        return math.inf if self.calibrator is None else float(self.calibrator.threshold(round))

    def admissible(self, state: CollectiveState) -> list[str]:
        """The configuration's admissible actions at ``state``."""
        return admissible_actions(vote_permitted(self.controller, state, self.min_vote_round), self.removed_actions)

    async def aforward(self, task: HiddenProfileTask) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``, same result: the whole loop (its fan-outs on
        :func:`~groundstate.concurrency.thread_map`) runs on one worker thread
        (:func:`~groundstate.programs.common.on_worker_thread`), which carries the DSPy context, so the event loop
        stays free."""
        return await on_worker_thread(type(self).forward, self, task)

    def forward(self, task: HiddenProfileTask) -> dspy.Prediction:
        agents = list(self.agents(task))
        if len(agents) != task.n_agents:
            raise ValueError(f"task {task.id} has {task.n_agents} agents but {len(agents)} were built")
        threads = worker_count(agents, self.threads)
        transcript = Transcript()
        beliefs = elicit(task, agents, transcript, 0, threads)
        state, spread = state_and_divergences(task, beliefs, transcript, 0, self.max_rounds, self.weights)
        trace: list[dict[str, Any]] = []
        rng = random.Random(f"consilience:{self.seed}:{task.id}")
        for t in range(self.max_rounds):
            actions = self.admissible(state)
            ctx = ControlContext(task, transcript, beliefs, transcript.spoken(len(agents)), actions, self.seed,
                                 spread=spread)
            proposal = self.controller.propose(state, ctx)
            if proposal not in actions:
                raise ValueError(f"controller proposed '{proposal}', not admissible ({actions})")
            branches = evaluate_branches(task, agents, transcript, beliefs, state, actions, t, self.max_rounds,
                                         self.router, self.weights, self.seed, threads, spread)
            regrets = regrets_of(branches)
            epsilon = self.threshold(t)
            conformal_set = [a for a in actions if regrets[a] <= epsilon]
            accepted = regrets[proposal] <= epsilon
            if self.set_sampling == "every-round":
                executed = rng.choice(conformal_set)
            elif accepted:
                executed = proposal
            elif self.set_sampling == "on-reject":
                executed = rng.choice(conformal_set)
            else:
                executed = min(conformal_set, key=lambda a: (regrets[a], actions.index(a)))
            chosen = branches[executed]
            trace.append({
                "round": t, "state": state.to_dict(), "proposal": proposal, "admissible": actions,
                "regrets": regrets, "threshold": None if math.isinf(epsilon) else epsilon,
                "certified": math.isfinite(epsilon), "conformal_set": conformal_set, "executed": executed,
                "speaker": chosen.speaker, "proposal_accepted": accepted, "set_sampling": self.set_sampling,
                "message": chosen.transcript.messages[-1].text if chosen.speaker is not None else None,
            })
            if self.on_round is not None:
                self.on_round(RoundView(task, agents, transcript, beliefs, state, t, executed, chosen.speaker,
                                        self.max_rounds, self.weights, self.seed))
            if executed == "Vote":
                break
            transcript, beliefs, state, spread = chosen.transcript, chosen.beliefs, chosen.state, chosen.spread
        votes = final_votes(task, agents, transcript, threads)
        answer = plurality(votes, task.options)
        return dspy.Prediction(answer=answer, correct=answer == task.correct,
                               votes=[v.model_dump() for v in votes], transcript=transcript.model_dump(),
                               rounds=len(transcript.messages), messages=len(transcript.messages),
                               words=transcript.words, trace=trace, final_state=state.to_dict())


def proposal_scores(traces: Sequence[Sequence[dict[str, Any]]]) -> tuple[list[int], list[float]]:
    """``(rounds, scores)`` for calibration: the regret of the controller's proposal at each round of each trace."""
    rounds, scores = [], []
    for trace in traces:
        for entry in trace:
            rounds.append(int(entry["round"]))
            scores.append(float(entry["regrets"][entry["proposal"]]))
    return rounds, scores


def explore(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], max_rounds: int = 10,
            weights: LossWeights | None = None, router: str = "action-conditional", policy: str = "random",
            seed: int = 0, threads: int = 8) -> list[dict[str, Any]]:
    """Exhaustive action outcomes along one trajectory (training data for the MLP controller, appendix C.1).

    At every visited state the four communication actions are each evaluated as a counterfactual branch; the
    row holds the state vector (:data:`~groundstate.programs.consilience.state.STORED_FEATURES`: the six
    features and the optional extras) and each action's reward ``J(s) - J(s^a)`` (:data:`COMM_ACTIONS` order;
    Vote is not explored: its branch leaves the state as it is, so its reward would always be 0). The
    trajectory then follows ``policy`` (``random``: a uniformly random communication action, seeded; ``best``:
    the lowest-J action) for ``max_rounds`` rounds.
    """
    if policy not in ("random", "best"):
        raise ValueError(f"unknown exploration policy '{policy}'; choose random or best")
    rng = random.Random(f"explore:{seed}:{task.id}")
    agents = list(agents)
    threads = worker_count(agents, threads)
    transcript = Transcript()
    beliefs = elicit(task, agents, transcript, 0, threads)
    state, spread = state_and_divergences(task, beliefs, transcript, 0, max_rounds, weights)
    rows = []
    for t in range(max_rounds):
        branches = evaluate_branches(task, agents, transcript, beliefs, state, list(COMM_ACTIONS), t, max_rounds,
                                     router, weights, seed, threads, spread)
        rows.append({"task": task.id, "round": t, "features": state.vector(STORED_FEATURES).tolist(),
                     "feature_names": list(STORED_FEATURES), "actions": list(COMM_ACTIONS),
                     "rewards": [state.J - branches[a].state.J for a in COMM_ACTIONS], "J": state.J})
        if policy == "best":
            step = min(COMM_ACTIONS, key=lambda a: branches[a].state.J)
        else:
            step = rng.choice(COMM_ACTIONS)
        chosen = branches[step]
        transcript, beliefs, state, spread = chosen.transcript, chosen.beliefs, chosen.state, chosen.spread
    return rows
