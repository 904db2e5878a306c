"""Consilience's action proposal (controllers) and speaker routing (§3.1.2, §3.1.4).

**Controllers** map the collective state to a proposed action:

- :class:`RuleController`: fixed thresholds. Vote only after ``min_rounds`` rounds, with a strong leading
  belief, low disagreement and no premature consensus; otherwise Challenge when the leading belief is
  strong but recent evidence is weak, Clarify when disagreement is high, SeekEvidence when the last message
  was redundant or uninformative, Route otherwise.
- :class:`ValueController`: wraps a fitted estimator that predicts the one-step reward of every
  communication action from the state vector (the MLP of :mod:`groundstate.optimizers.controller`) and
  proposes the best admissible one. It never votes (the paper's MLP has no Vote; Table 7 marks "- Voting"
  NA for it).
- :class:`LLMController`: a DSPy signature given the task, options, the whole public transcript (cut to the
  LM's context, with a note saying so), state vector, beliefs and speaker counts; ``allow_vote=True`` is the
  LLM+Vote variant (adaptive termination).

Every controller only *proposes*; conformal acceptance decides what is executed.

**Admissible actions** (:func:`admissible_actions`, the paper's A_t^m(s)): the four
communication actions (less any removed for the leave-one-out ablation), plus Vote where the configuration's
termination rule allows it (:func:`vote_permitted`): the controller must be one that votes, and its own rule
must permit voting in this state (``permits_vote``): for the rule controller, its whole vote condition
(enough rounds, a strong leader, low disagreement, no premature consensus); for LLM+Vote, from its first
vote round on. Conformal acceptance picks replacements from this same set, so a rejected proposal can never
be replaced by a Vote the configuration would not have allowed, and calibration scores are computed over it.

**Routers** choose who carries out an accepted action. ``action-conditional`` (the method, §3.1.4):
Challenge and Clarify go to the agent whose belief diverges most from the mean (the paper's
``argmax_i JSD(p_i || p_bar)``), SeekEvidence and Route to the agent who has spoken least (the paper's
"under-participating agent"). Ties are broken as the paper's router breaks them, by the state first and then by
chance (:func:`route`): a disagreement-oriented action among equally divergent agents goes to the one who has
spoken least, an evidence-seeking action among equally quiet agents to the one whose belief diverges most (an
agent pulled away from the group is the likeliest to hold facts the group has not heard), and agents still tied
are drawn at random, seeded by (seed, task, transcript length, action), so a run is reproducible and a
counterfactual replay of the same state picks the same speaker. (Earlier versions sent ties to the lowest
index, which made Route and SeekEvidence the round-robin order.) For the ablation: ``random``, ``round-robin``,
``most-disagreeing`` and ``most-spoken`` (the last two keep ties at the lowest index: they are the generic
policies as the paper names them, one quantity each).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
import numpy as np

from groundstate.errors import ConfigError
from groundstate.programs.common import acall_stage, as_data, saveable
from groundstate.programs.consilience.state import FEATURES, CollectiveState, divergences
from groundstate.records import COMM_ACTIONS, Belief, HiddenProfileTask, Transcript
from groundstate.signatures.discussion import ChooseCommunicationAction

ROUTERS = ("action-conditional", "random", "round-robin", "most-disagreeing", "most-spoken")


@dataclass
class ControlContext:
    """What a controller or router may look at besides the state vector.

    A context describes one discussion state: ``spread`` caches each agent's divergence from the mean of
    ``beliefs`` (pass it when the state's computation already has it; otherwise it is computed on first use).
    Build a new context for another state rather than changing ``beliefs`` in place.
    """

    task: HiddenProfileTask
    transcript: Transcript
    beliefs: list[Belief]
    spoken: list[int]
    admissible: list[str]
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    spread: np.ndarray | None = None

    def belief_divergences(self) -> np.ndarray:
        """Each agent's Jensen-Shannon divergence from the mean belief (computed once per context)."""
        if self.spread is None or len(self.spread) != len(self.beliefs):
            self.spread = divergences(self.beliefs, self.task.options)
        return self.spread


def vote_permitted(controller: Any, state: CollectiveState, min_vote_round: int | None = None) -> bool:
    """Whether Vote is admissible for ``controller`` at ``state``: the controller votes (``allow_vote``), its
    ``permits_vote(state)`` rule holds (a controller without one permits voting from round 1), and, when
    ``min_vote_round`` is given, ``state.round >= min_vote_round``."""
    if not getattr(controller, "allow_vote", False):
        return False
    if min_vote_round is not None and state.round < min_vote_round:
        return False
    rule = getattr(controller, "permits_vote", None)
    return bool(rule(state)) if rule is not None else state.round >= 1


def admissible_actions(vote: bool, removed: Sequence[str] = ()) -> list[str]:
    """The actions a controller may propose (and acceptance may execute) this round: the communication actions
    not ``removed``, then Vote when ``vote`` (:func:`vote_permitted`) and Vote is not removed."""
    actions = [a for a in COMM_ACTIONS if a not in removed]
    if vote and "Vote" not in removed:
        actions.append("Vote")
    if not actions:
        raise ValueError("every action was removed; nothing is admissible")
    return actions


# ---------------------------------------------------------------------------------------------------------
# routing
# ---------------------------------------------------------------------------------------------------------


def route(action: str, ctx: ControlContext, router: str = "action-conditional") -> int | None:
    """The agent who carries out ``action`` (``None`` for Vote), as ``router`` picks it (see the module docstring).

    The pick depends only on ``ctx`` (beliefs, messages spoken, transcript length, task and seed) and the action:
    the same state always gives the same speaker, in any process."""
    if action == "Vote":
        return None
    n = len(ctx.beliefs)
    if router == "action-conditional":
        spread = np.asarray(ctx.belief_divergences(), dtype=float)
        spoken = np.asarray(ctx.spoken, dtype=float)
        if action in ("Challenge", "Clarify"):
            tied = _best(-spoken, _best(spread, range(n)))
        else:
            tied = _best(spread, _best(-spoken, range(n)))
        if len(tied) == 1:
            return tied[0]
        return random.Random(f"route-tie:{ctx.seed}:{ctx.task.id}:{len(ctx.transcript.messages)}:{action}").choice(
            tied)
    if router == "random":
        return random.Random(f"{ctx.seed}:{ctx.task.id}:{len(ctx.transcript.messages)}:{action}").randrange(n)
    if router == "round-robin":
        return len(ctx.transcript.messages) % n
    if router == "most-disagreeing":
        return _argmax(ctx.belief_divergences())
    if router == "most-spoken":
        return _argmax(np.array(ctx.spoken, dtype=float))
    raise ValueError(f"unknown router '{router}'; choose from {', '.join(ROUTERS)}")


def _argmax(values: Sequence[float]) -> int:
    values = list(values)
    return max(range(len(values)), key=lambda i: (values[i], -i))


TIE_TOLERANCE = 1e-12
"""Divergences closer than this (absolutely, or relative to their size) count as a tie when routing."""


def _best(values: np.ndarray, among: Sequence[int]) -> list[int]:
    """The indices in ``among`` whose value is the largest among them (within :data:`TIE_TOLERANCE`), in order."""
    among = list(among)
    top = max(values[i] for i in among)
    return [i for i in among if top - values[i] <= TIE_TOLERANCE * max(1.0, abs(top))]


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

    def permits_vote(self, state: CollectiveState) -> bool:
        """The termination rule: at least ``min_rounds`` rounds, a strong leader, low disagreement, no premature
        consensus."""
        return (self.allow_vote and state.round >= self.min_rounds and state.p_star >= self.vote_confidence
                and state.D <= self.vote_max_disagreement and state.P == 0)

    def vote_rule(self) -> dict[str, Any]:
        """The termination rule's parameters (recorded with a calibration)."""
        return {"kind": "rules", "min_rounds": self.min_rounds, "vote_confidence": self.vote_confidence,
                "vote_max_disagreement": self.vote_max_disagreement} if self.allow_vote else {"kind": "never"}

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        def ok(action: str) -> bool:
            return action in ctx.admissible

        if ok("Vote") and self.permits_vote(state):
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

    def vote_rule(self) -> dict[str, Any]:
        return {"kind": "never"}

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        rewards = self.model.predict_rewards(state.vector(self.features)[None, :])[0]
        scored = [(float(r), a) for r, a in zip(rewards, self.model.actions_, strict=True)
                  if a in ctx.admissible and a != "Vote"]
        if not scored:
            return next((a for a in ctx.admissible if a != "Vote"), ctx.admissible[0])
        return max(scored, key=lambda pair: pair[0])[1]


DEFAULT_TRANSCRIPT_CHARS = 24_000
"""The LLM controller's transcript budget when the LM's context is unknown (about 6,000 tokens)."""


def transcript_budget(lm: Any) -> int:
    """Characters of transcript the LLM controller may show ``lm``: half of an embedded model's context window
    (at about 4 characters per token; the rest is the task, the state and the answer), else
    :data:`DEFAULT_TRANSCRIPT_CHARS`."""
    engine = getattr(lm, "engine", None)
    n_ctx = getattr(engine, "n_ctx", None)
    if isinstance(n_ctx, int) and n_ctx > 0:
        return max(1_000, n_ctx * 4 // 2)
    return DEFAULT_TRANSCRIPT_CHARS


def fit_transcript(transcript: Transcript, budget: int) -> tuple[str, int]:
    """The whole transcript as text when it fits in ``budget`` characters; otherwise its most recent messages
    that fit, after a note saying how many earlier ones were left out. Returns ``(text, messages left out)``."""
    lines = transcript.text().split("\n") if transcript.messages else []
    if not lines:
        return transcript.text(), 0
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if kept and used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    dropped = len(lines) - len(kept)
    text = "\n".join(reversed(kept))
    if dropped:
        text = f"(the {dropped} earliest of {len(lines)} messages are left out to fit the model's context)\n{text}"
    return text, dropped


@saveable
class LLMController(dspy.Module):
    """The LLM controller (``allow_vote=True``: LLM+Vote).

    It sees the whole public transcript, cut to ``max_transcript_chars`` (default: :func:`transcript_budget` of
    the LM in use) by leaving out the earliest messages, with a note in the prompt saying how many; each cut
    is counted in ``truncations``. An action outside ``admissible`` falls back to the first admissible
    communication action, counted in ``fallbacks``. With ``allow_vote``, Vote is admissible from round
    ``min_vote_round`` on.
    """

    def __init__(self, allow_vote: bool = False, max_transcript_chars: int | None = None, min_vote_round: int = 1):
        super().__init__()
        self.allow_vote = allow_vote
        self.max_transcript_chars = max_transcript_chars
        self.min_vote_round = min_vote_round
        self.choose = dspy.Predict(ChooseCommunicationAction)
        self.name = "llm+vote" if allow_vote else "llm"
        self.fallbacks = 0
        self.truncations = 0

    def permits_vote(self, state: CollectiveState) -> bool:
        return self.allow_vote and state.round >= self.min_vote_round

    def vote_rule(self) -> dict[str, Any]:
        return {"kind": "llm", "min_vote_round": self.min_vote_round} if self.allow_vote else {"kind": "never"}

    def propose(self, state: CollectiveState, ctx: ControlContext) -> str:
        return self.chosen(ctx, self.choose(**self.choose_args(state, ctx)))

    async def apropose(self, state: CollectiveState, ctx: ControlContext) -> str:
        """:meth:`propose` awaiting ``self.choose.acall``."""
        return self.chosen(ctx, await acall_stage(self.choose, **self.choose_args(state, ctx)))

    def choose_args(self, state: CollectiveState, ctx: ControlContext) -> dict[str, str]:
        """The prompt's inputs (counting a transcript cut in ``truncations``)."""
        beliefs = as_data("\n".join(f"Agent {i}: " + ", ".join(f"{o}={b.probs.get(o, 0):.2f}" for o in ctx.task.options)
                                    for i, b in enumerate(ctx.beliefs)))
        vector = ", ".join(f"{k}={v:.3f}" for k, v in zip(FEATURES, state.vector(), strict=True))
        budget = self.max_transcript_chars or transcript_budget(dspy.settings.lm)
        transcript, dropped = fit_transcript(ctx.transcript, budget)
        if dropped:
            self.truncations += 1
        return {"task": as_data(ctx.task.description), "options": as_data("\n".join(ctx.task.options)),
                "transcript": as_data(transcript),
                "state": f"{vector}, p_star={state.p_star:.3f}, leader={as_data(state.leader)}", "beliefs": beliefs,
                "speaker_counts": ", ".join(f"Agent {i}: {c}" for i, c in enumerate(ctx.spoken)),
                "allowed": ", ".join(ctx.admissible)}

    def chosen(self, ctx: ControlContext, out: dspy.Prediction) -> str:
        """The LM's action if admissible, else the first admissible communication action (a fallback)."""
        if out.action in ctx.admissible:
            return out.action
        self.fallbacks += 1
        return next((a for a in ctx.admissible if a != "Vote"), ctx.admissible[0])

    def forward(self, state: CollectiveState, ctx: ControlContext) -> dspy.Prediction:
        """``Prediction(action=...)``: :meth:`propose`'s action (a DSPy program returns a prediction, so
        ``dspy.Evaluate``, ``dspy.streamify`` and the optimizers take the controller like any other program;
        Consilience itself calls :meth:`propose`, which returns the action alone)."""
        return dspy.Prediction(action=self.propose(state, ctx))

    async def aforward(self, state: CollectiveState, ctx: ControlContext) -> dspy.Prediction:
        """:meth:`forward` for ``await controller.acall(...)`` (:meth:`apropose`)."""
        return dspy.Prediction(action=await self.apropose(state, ctx))


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
