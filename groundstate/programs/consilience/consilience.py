"""Consilience: control a hidden-profile discussion round by round, with conformal acceptance.

Each round: elicit beliefs -> collective state -> the controller proposes an action -> every admissible
action is evaluated as a counterfactual branch (route a speaker, let them speak, update every belief,
compute J of the next state) -> regret ``R(s, a) = J(s^a) - min_a' J(s^a')`` -> conformal acceptance: the
proposal is executed if its regret is within the round's threshold, otherwise an action from the admissible
set ``{a : R(s, a) <= threshold}`` (lowest regret by default, uniform sampling for the §5.5.1 ablation) ->
the executed branch *is* the evaluated one (its message and beliefs join the real transcript; nothing is
resampled) -> repeat until Vote or the round limit -> every agent votes -> plurality with a confidence
tie-break.

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

from groundstate.concurrency import thread_map
from groundstate.programs.consilience.control import ControlContext, admissible_actions, route
from groundstate.programs.consilience.state import FEATURES, CollectiveState, LossWeights, collective_state
from groundstate.records import ACTIONS, Belief, DiscussionAgent, HiddenProfileTask, Transcript


@dataclass
class Branch:
    """One evaluated action: who spoke, what they said, and the resulting beliefs and state."""

    action: str
    speaker: int | None
    transcript: Transcript
    beliefs: list[Belief]
    state: CollectiveState


def worker_count(agents: Sequence[Any], threads: int) -> int:
    """Threads worth using: simulated agents are pure CPU, so they run inline (1); LM agents use ``threads``."""
    return 1 if all(getattr(a, "is_simulated", False) for a in agents) else threads


def elicit(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript, round: int,
           threads: int = 8) -> list[Belief]:
    """Every agent's belief at ``transcript`` (concurrently)."""
    return thread_map(lambda agent: agent.belief(task, transcript, round), list(agents), threads)


def evaluate_branches(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], transcript: Transcript,
                      beliefs: list[Belief], state: CollectiveState, actions: Sequence[str], round: int,
                      max_rounds: int, router: str = "action-conditional", weights: LossWeights | None = None,
                      seed: int = 0, threads: int = 8) -> dict[str, Branch]:
    """Evaluate every action in ``actions`` from the same state (concurrently); see the module docstring."""
    spoken = transcript.spoken(len(agents))
    ctx = ControlContext(task, transcript, beliefs, spoken, list(actions), seed)

    def branch(action: str) -> Branch:
        if action == "Vote":
            return Branch(action, None, transcript, beliefs, state)
        speaker = route(action, ctx, router)
        message = agents[speaker].speak(task, transcript, action, round)
        after = transcript.with_message(message)
        new_beliefs = [agent.belief(task, after, round + 1) for agent in agents]
        new_state = collective_state(task, new_beliefs, after, round + 1, max_rounds, weights)
        return Branch(action, speaker, after, new_beliefs, new_state)

    return dict(zip(actions, thread_map(branch, list(actions), threads), strict=True))


def regrets_of(branches: dict[str, Branch]) -> dict[str, float]:
    best = min(b.state.J for b in branches.values())
    return {a: b.state.J - best for a, b in branches.items()}


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
        sample_from_set: when the proposal is rejected, sample uniformly from the admissible set instead of
            taking its lowest-regret action (§5.5.1).
        min_vote_round: the first round at which Vote is admissible (for controllers that allow it).
        seed: seeds routing and sampling.
        threads: concurrency for belief elicitation and branches.

    ``forward(task)`` returns ``Prediction(answer, votes, transcript, rounds, words, trace, correct)``.
    """

    def __init__(self, agents: Callable[[HiddenProfileTask], Sequence[DiscussionAgent]], controller: Any,
                 calibrator: Any = None, router: str = "action-conditional", max_rounds: int = 10,
                 weights: LossWeights | None = None, removed_actions: Sequence[str] = (),
                 sample_from_set: bool = False, min_vote_round: int = 1, seed: int = 0, threads: int = 8):
        super().__init__()
        self.agents = agents
        self.controller = controller
        self.calibrator = calibrator
        self.router = router
        self.max_rounds = max_rounds
        self.weights = weights or LossWeights()
        self.removed_actions = tuple(removed_actions)
        self.sample_from_set = sample_from_set
        self.min_vote_round = min_vote_round
        self.seed = seed
        self.threads = threads

    def threshold(self, round: int) -> float:
        return math.inf if self.calibrator is None else float(self.calibrator.threshold(round))

    def forward(self, task: HiddenProfileTask) -> dspy.Prediction:
        from groundstate.programs.common import plurality

        agents = list(self.agents(task))
        if len(agents) != task.n_agents:
            raise ValueError(f"task {task.id} has {task.n_agents} agents but {len(agents)} were built")
        threads = worker_count(agents, self.threads)
        transcript = Transcript()
        beliefs = elicit(task, agents, transcript, 0, threads)
        state = collective_state(task, beliefs, transcript, 0, self.max_rounds, self.weights)
        trace: list[dict[str, Any]] = []
        rng = random.Random(f"consilience:{self.seed}:{task.id}")
        for t in range(self.max_rounds):
            allow_vote = bool(getattr(self.controller, "allow_vote", False))
            actions = admissible_actions(allow_vote, t, self.min_vote_round, self.removed_actions)
            ctx = ControlContext(task, transcript, beliefs, transcript.spoken(len(agents)), actions, self.seed)
            proposal = self.controller.propose(state, ctx)
            if proposal not in actions:
                raise ValueError(f"controller proposed '{proposal}', not admissible ({actions})")
            branches = evaluate_branches(task, agents, transcript, beliefs, state, actions, t, self.max_rounds,
                                         self.router, self.weights, self.seed, threads)
            regrets = regrets_of(branches)
            epsilon = self.threshold(t)
            admissible = [a for a in actions if regrets[a] <= epsilon]
            if regrets[proposal] <= epsilon:
                executed = proposal
            elif self.sample_from_set:
                executed = rng.choice(admissible)
            else:
                executed = min(admissible, key=lambda a: (regrets[a], actions.index(a)))
            chosen = branches[executed]
            trace.append({
                "round": t, "state": state.to_dict(), "proposal": proposal, "admissible": actions,
                "regrets": regrets, "threshold": None if math.isinf(epsilon) else epsilon,
                "certified": math.isfinite(epsilon), "conformal_set": admissible, "executed": executed,
                "speaker": chosen.speaker, "proposal_accepted": executed == proposal,
                "message": chosen.transcript.messages[-1].text if chosen.speaker is not None else None,
            })
            if executed == "Vote":
                break
            transcript, beliefs, state = chosen.transcript, chosen.beliefs, chosen.state
        votes = thread_map(lambda agent: agent.vote(task, transcript), agents, threads)
        answer = plurality(votes, task.options)
        return dspy.Prediction(answer=answer, correct=answer == task.correct,
                               votes=[v.model_dump() for v in votes], transcript=transcript.model_dump(),
                               rounds=len(transcript.messages), words=transcript.words, trace=trace)


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
            seed: int = 0, threads: int = 8, features: Sequence[str] = FEATURES) -> list[dict[str, Any]]:
    """Exhaustive action outcomes along one trajectory (training data for the MLP controller).

    At every visited state all five actions are evaluated; the row holds the state vector and each action's
    reward ``J(s) - J(s^a)``. The trajectory then follows ``policy`` (``random``: a uniformly random
    communication action, seeded; ``best``: the lowest-regret action) for ``max_rounds`` rounds.
    """
    rng = random.Random(f"explore:{seed}:{task.id}")
    agents = list(agents)
    threads = worker_count(agents, threads)
    transcript = Transcript()
    beliefs = elicit(task, agents, transcript, 0, threads)
    state = collective_state(task, beliefs, transcript, 0, max_rounds, weights)
    rows = []
    for t in range(max_rounds):
        branches = evaluate_branches(task, agents, transcript, beliefs, state, list(ACTIONS), t, max_rounds, router,
                                     weights, seed, threads)
        rows.append({"task": task.id, "round": t, "features": state.vector(features).tolist(),
                     "rewards": [state.J - branches[a].state.J for a in ACTIONS], "J": state.J})
        if policy == "best":
            step = min((a for a in ACTIONS if a != "Vote"), key=lambda a: branches[a].state.J)
        else:
            step = rng.choice([a for a in ACTIONS if a != "Vote"])
        transcript, beliefs, state = branches[step].transcript, branches[step].beliefs, branches[step].state
    return rows
