"""Consilience's action proposal (controllers) and speaker routing (§3.1.2, §3.1.4).

**Controllers** map the collective state to a proposed action:

- :class:`RuleController`: fixed thresholds. Vote only after ``min_rounds`` rounds, with a strong leading
  belief, low disagreement and no premature consensus; otherwise Challenge when the leading belief is
  strong but recent evidence is weak, Clarify when disagreement is high, SeekEvidence when the last message
  was redundant or uninformative, Route otherwise.
- :class:`ValueController`: wraps a fitted estimator that predicts the one-step reward of every action from
  the state vector (the MLP of :mod:`groundstate.optimizers.controller`) and proposes the best admissible one.
- :class:`LLMController`: a DSPy signature given the task, options, transcript, state vector, beliefs and
  speaker counts; ``allow_vote=True`` is the LLM+Vote variant (adaptive termination).

Every controller only *proposes*; conformal acceptance decides what is executed.

**Routers** choose who carries out an accepted action. ``action-conditional`` (the method): Challenge and
Clarify go to the agent whose belief diverges most from the mean, SeekEvidence and Route to the agent who
has spoken least (ties: the lower index). For the ablation: ``random``, ``round-robin``, ``most-disagreeing``
and ``most-spoken``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import numpy as np

from groundstate.errors import ConfigError
from groundstate.programs.common import as_data, saveable
from groundstate.programs.consilience.state import FEATURES, CollectiveState, divergences
from groundstate.records import COMM_ACTIONS, Belief, HiddenProfileTask, Transcript
from groundstate.signatures.discussion import ChooseCommunicationAction

ROUTERS = ("action-conditional", "random", "round-robin", "most-disagreeing", "most-spoken")


@dataclass
class ControlContext:
    """What a controller or router may look at besides the state vector."""

    task: HiddenProfileTask
    transcript: Transcript
    beliefs: list[Belief]
    spoken: list[int]
    admissible: list[str]
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def admissible_actions(allow_vote: bool, round: int, min_vote_round: int = 1,
                       removed: Sequence[str] = ()) -> list[str]:
    """The actions a controller may propose this round (Vote only where allowed, and not before
    ``min_vote_round``); ``removed`` drops actions for the leave-one-out ablation."""
    actions = [a for a in COMM_ACTIONS if a not in removed]
    if allow_vote and round >= min_vote_round and "Vote" not in removed:
        actions.append("Vote")
    if not actions:
        raise ValueError("every action was removed; nothing is admissible")
    return actions


# ---------------------------------------------------------------------------------------------------------
# routing
# ---------------------------------------------------------------------------------------------------------


def route(action: str, ctx: ControlContext, router: str = "action-conditional") -> int | None:
    """The agent who carries out ``action`` (``None`` for Vote)."""
    if action == "Vote":
        return None
    n = len(ctx.beliefs)
    if router == "action-conditional":
        if action in ("Challenge", "Clarify"):
            return _argmax(divergences(ctx.beliefs, ctx.task.options))
        return _argmin(ctx.spoken)
    if router == "random":
        return random.Random(f"{ctx.seed}:{ctx.task.id}:{len(ctx.transcript.messages)}:{action}").randrange(n)
    if router == "round-robin":
        return len(ctx.transcript.messages) % n
    if router == "most-disagreeing":
        return _argmax(divergences(ctx.beliefs, ctx.task.options))
    if router == "most-spoken":
        return _argmax(np.array(ctx.spoken, dtype=float))
    raise ValueError(f"unknown router '{router}'; choose from {', '.join(ROUTERS)}")


def _argmax(values: Sequence[float]) -> int:
    values = list(values)
    return max(range(len(values)), key=lambda i: (values[i], -i))


def _argmin(values: Sequence[float]) -> int:
    values = list(values)
    return min(range(len(values)), key=lambda i: (values[i], i))


# ---------------------------------------------------------------------------------------------------------
# controllers
# ---------------------------------------------------------------------------------------------------------


@dataclass
class RuleController:
    """Thresholds on the state (see the module docstring). Defaults are our choice; the paper gives none."""

    min_rounds: int = 3
    vote_confidence: float = 0.70
    vote_max_disagreement: float = 0.10
    challenge_confidence: float = 0.70
    weak_evidence: float = 0.30
    high_disagreement: float = 0.15
    high_redundancy: float = 0.50
    allow_vote: bool = True
    name: str = "rules"

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        def ok(action: str) -> bool:
            return action in ctx.admissible

        if (ok("Vote") and state.round >= self.min_rounds and state.p_star >= self.vote_confidence
                and state.D <= self.vote_max_disagreement and state.P == 0):
            return "Vote"
        if ok("Challenge") and state.p_star >= self.challenge_confidence and state.G < self.weak_evidence:
            return "Challenge"
        if ok("Clarify") and state.D >= self.high_disagreement:
            return "Clarify"
        uninformative = state.round > 0 and state.G < self.weak_evidence
        if ok("SeekEvidence") and (state.R >= self.high_redundancy or uninformative):
            return "SeekEvidence"
        if ok("Route"):
            return "Route"
        return next(a for a in ctx.admissible if a != "Vote") if any(a != "Vote" for a in ctx.admissible) \
            else ctx.admissible[0]


@dataclass
class ValueController:
    """Proposes the admissible action with the highest predicted one-step reward.

    ``model`` is any fitted estimator with ``predict_rewards(X) -> (n, len(actions_))`` and an ``actions_``
    attribute (:class:`groundstate.optimizers.controller.MLPActionValue`); ``features`` must be the feature
    names it was trained on.
    """

    model: Any
    features: Sequence[str] = FEATURES
    allow_vote: bool = False
    name: str = "mlp"

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        rewards = self.model.predict_rewards(state.vector(self.features)[None, :])[0]
        scored = [(float(r), a) for r, a in zip(rewards, self.model.actions_, strict=True) if a in ctx.admissible]
        if not scored:
            return ctx.admissible[0]
        return max(scored, key=lambda pair: pair[0])[1]


@saveable
class LLMController(dspy.Module):
    """The LLM controller (``allow_vote=True``: LLM+Vote). An action outside ``admissible`` falls back to the
    first admissible communication action, and the fallback is counted in ``fallbacks``."""

    def __init__(self, allow_vote: bool = False, transcript_messages: int = 12):
        super().__init__()
        self.allow_vote = allow_vote
        self.transcript_messages = transcript_messages
        self.choose = dspy.Predict(ChooseCommunicationAction)
        self.name = "llm+vote" if allow_vote else "llm"
        self.fallbacks = 0

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        beliefs = as_data("\n".join(f"Agent {i}: " + ", ".join(f"{o}={b.probs.get(o, 0):.2f}" for o in ctx.task.options)
                                    for i, b in enumerate(ctx.beliefs)))
        vector = ", ".join(f"{k}={v:.3f}" for k, v in zip(FEATURES, state.vector(), strict=True))
        out = self.choose(task=as_data(ctx.task.description), options=as_data("\n".join(ctx.task.options)),
                          transcript=as_data(ctx.transcript.text(self.transcript_messages)),
                          state=f"{vector}, leader={as_data(state.leader)}", beliefs=beliefs,
                          speaker_counts=", ".join(f"Agent {i}: {c}" for i, c in enumerate(ctx.spoken)),
                          allowed=", ".join(ctx.admissible))
        if out.action in ctx.admissible:
            return out.action
        self.fallbacks += 1
        return next((a for a in ctx.admissible if a != "Vote"), ctx.admissible[0])

    def forward(self, state: CollectiveState, ctx: ControlContext) -> str:
        return self.propose(state, ctx)


CONTROLLERS = ("rules", "mlp", "llm", "llm+vote")


def build_controller(name: str, model: Any = None, features: Sequence[str] | None = None):
    """A controller by name; ``mlp`` needs a fitted model (and the features it was trained on)."""
    if name == "rules":
        return RuleController()
    if name == "mlp":
        if model is None:
            raise ConfigError("the mlp controller needs a trained model (--mlp DIR from `consilience train`)")
        return ValueController(model, features=list(features or getattr(model, "features_", FEATURES)))
    if name == "llm":
        return LLMController(allow_vote=False)
    if name == "llm+vote":
        return LLMController(allow_vote=True)
    raise ConfigError(f"unknown controller '{name}'; choose from {', '.join(CONTROLLERS)}")
