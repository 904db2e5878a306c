"""LM-free simulated agents for hidden-profile discussions, in the spirit of Stasser's DISCUSS model.

A :class:`SimAgent` implements :class:`~groundstate.records.DiscussionAgent`, so every protocol and controller
that runs LM agents runs simulated ones too, thousands of discussions per second. It needs a task whose facts
carry support for the options (:attr:`HiddenProfileTask.support`, ``{fact text: {option: weight}}``): generated
travel tasks carry it, and any task can be annotated by hand. A fact without an annotation supports nothing.

Knowledge. At a transcript, agent ``i`` knows its own facts (the shared facts and ``private[i]``) plus every
fact stated on the transcript (:attr:`Message.facts`). Facts on the transcript that the task does not know
(neither a task fact nor a key of ``support``) are ignored.

Scoring rule (beliefs). The score of option ``k`` is the summed support of the known facts,
``score_k = sum_f support[f][k]``, and the belief is a noisy softmax::

    p_k = softmax_k(beta * score_k + noise * eps_k),    eps_k ~ N(0, 1)

``beta`` sets how sharp beliefs are (0 gives uniform beliefs); ``noise`` is the standard deviation of the
per-option Gaussian perturbation (0 gives a deterministic belief). The vote is the most probable option (the
first in option order on a tie) and the confidence is its probability.

Messages. What an agent says follows the action's intent (§3.1.2 of the Consilience paper):

- free turn (``None``, e.g. round-robin): facts of its own not yet on the transcript, drawn at random with
  weight ``shared_bias`` for shared facts and 1 for private ones (the common-information bias: with
  ``shared_bias > 1`` agents mostly repeat what everybody already knows);
- ``SeekEvidence``: the single most discriminative fact of its own not yet on the transcript, private facts
  first (discriminative = the largest spread of support across options);
- ``Route``: the same ranking, ``facts_per_message`` facts (the concise discriminative facts of an
  under-participating agent);
- ``Challenge``: facts it knows that speak against the group's leading option (another option has more
  support), those not yet stated first, the strongest first;
- ``Clarify``: facts it knows that favour its own top option over the group's leading option (over its own
  runner-up when it agrees with the group), those not yet stated first, the strongest first.

The group's leading option is the option with the highest mean noiseless belief over all agents (each from
its own facts and the transcript, with the speaker's ``beta``); the simulation may look at every agent's
facts because it stands in for what the speaker reads off the discussion. Each candidate fact comes to
mind with probability ``recall`` (imperfect recall). A message states up to ``facts_per_message`` facts
(``SeekEvidence`` states one); its text is the facts' sentences and its ``words`` their word count. When no
candidate comes to mind (for example ``recall=0``, or everything it knows is already on the transcript) the
agent passes: the message :data:`PASS_TEXT` with no facts, so nothing new is said.

Determinism. Every random draw comes from a counter-based hash of (agent seed, task id, agent index,
transcript length, round, action, purpose), never from global state, so the same transcript and action always
give the same belief and message. A controller can therefore branch counterfactually from one transcript, and
a run is reproducible in another process (no global random state, no salted string hashing).

Speed: tasks are precomputed once by :mod:`~groundstate.programs.consilience.support`.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from groundstate.programs.consilience.support import CompiledTask, compile_task
from groundstate.records import ACTIONS, Belief, HiddenProfileTask, Message, Transcript

__all__ = ["PASS_TEXT", "SimAgent", "SimParams", "SimTeam", "sim_team"]


PASS_TEXT = "I have nothing new to add."
"""What a simulated agent says when no fact comes to mind (no facts, so no new information)."""


_PASS_WORDS = len(PASS_TEXT.split())


_MASK = (1 << 64) - 1


_TWO_53 = float(1 << 53)


_ACTION_CODES = {None: 0, **{name: i + 1 for i, name in enumerate(ACTIONS)}}


_BELIEF, _SPEAK, _VOTE = 1, 2, 3


@dataclass(frozen=True)
class SimParams:
    """How simulated agents think and talk.

    Attributes:
        beta: belief sharpness (the softmax inverse temperature on summed support); 0 gives uniform beliefs.
        noise: standard deviation of the Gaussian noise added to each option's logit; 0 is deterministic.
        recall: probability that a fact the agent could state comes to mind when it speaks (0-1).
        shared_bias: weight of a shared fact relative to a private one (weight 1) when choosing what to say
            on a free turn; above 1 favours common information.
        facts_per_message: facts stated per message (1 or 2 keeps messages short; SeekEvidence states one).
    """

    beta: float = 1.0
    noise: float = 0.5
    recall: float = 0.8
    shared_bias: float = 2.0
    facts_per_message: int = 1

    def __post_init__(self):
        checks = [
            ("beta", self.beta, math.isfinite(self.beta) and self.beta >= 0, "a finite number >= 0"),
            ("noise", self.noise, math.isfinite(self.noise) and self.noise >= 0, "a finite number >= 0"),
            ("recall", self.recall, 0.0 <= self.recall <= 1.0, "between 0 and 1"),
            ("shared_bias", self.shared_bias, math.isfinite(self.shared_bias) and self.shared_bias > 0,
             "a finite number > 0"),
            ("facts_per_message", self.facts_per_message,
             isinstance(self.facts_per_message, int) and not isinstance(self.facts_per_message, bool)
             and self.facts_per_message >= 1, "an integer >= 1"),
        ]
        for name, value, ok, need in checks:
            if not ok:
                raise ValueError(f"SimParams.{name} must be {need}, got {value!r}")


def _splitmix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _mix(*parts: int) -> int:
    h = 0x243F6A8885A308D3
    for part in parts:
        h = _splitmix(h ^ (part & _MASK))
    return h


def _uniform(key: int, j: int) -> float:
    """The ``j``-th uniform number in (0, 1) of the stream ``key``."""
    return ((_splitmix((key + j) & _MASK) >> 11) + 0.5) / _TWO_53


def _normals(key: int, n: int) -> list[float]:
    """``n`` standard normal numbers from the stream ``key`` (Box-Muller)."""
    out: list[float] = []
    j = 0
    while len(out) < n:
        r = math.sqrt(-2.0 * math.log(_uniform(key, j)))
        theta = 2.0 * math.pi * _uniform(key, j + 1)
        out.append(r * math.cos(theta))
        out.append(r * math.sin(theta))
        j += 2
    return out[:n]


def _action_code(action: str | None) -> int:
    code = _ACTION_CODES.get(action)
    return code if code is not None else zlib.crc32(str(action).encode("utf-8")) + 16




def _softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def _argmax(values: list[float]) -> int:
    best = 0
    for k in range(1, len(values)):
        if values[k] > values[best]:
            best = k
    return best


class SimAgent:
    """A seeded, LM-free hidden-profile agent (see the module docstring for its rules).

    Args:
        index: the agent's index in the task (which private facts it holds).
        params: how it thinks and talks (:class:`SimParams`).
        seed: its random seed; all of its draws are a function of the seed and the discussion state.
    """

    is_simulated = True

    def __init__(self, index: int, params: SimParams | None = None, seed: int = 0):
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"agent index must be an integer >= 0, got {index!r}")
        self.index = index
        self.params = params or SimParams()
        self.seed = int(seed)

    def __repr__(self) -> str:
        return f"SimAgent(index={self.index}, params={self.params}, seed={self.seed})"

    # -- the DiscussionAgent interface --------------------------------------------------------------------
    def belief(self, task: HiddenProfileTask, transcript: Transcript, round: int) -> Belief:
        """The agent's noisy softmax belief from the facts it knows at ``transcript``."""
        compiled = self._compiled(task)
        probs = self._probs(compiled, compiled.stated(transcript), len(transcript.messages), round, _BELIEF)
        return self._belief(compiled, probs)

    def vote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        """The final vote: the same rule as :meth:`belief`, with its own noise draw."""
        compiled = self._compiled(task)
        probs = self._probs(compiled, compiled.stated(transcript), len(transcript.messages), 0, _VOTE)
        return self._belief(compiled, probs)

    def speak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int) -> Message:
        """A message under ``action`` (or a free turn for ``None``) stating the facts its intent calls for."""
        compiled = self._compiled(task)
        stated = compiled.stated(transcript)
        n_messages = len(transcript.messages)
        params = self.params
        key = _mix(self.seed, compiled.key, self.index, n_messages, round, _action_code(action), _SPEAK)
        if action is None:
            chosen = self._free_turn(compiled, stated, key)
        elif action in ("SeekEvidence", "Route"):
            chosen = self._unshared(compiled, stated, key, 1 if action == "SeekEvidence" else params.facts_per_message)
        elif action in ("Challenge", "Clarify"):
            chosen = self._against(compiled, stated, key, n_messages, round, clarify=action == "Clarify")
        else:
            raise ValueError(f"unknown action '{action}'; expected one of {ACTIONS[:4]} or None (a free turn)")
        if not chosen:
            return Message.model_construct(speaker=self.index, action=action, round=round, text=PASS_TEXT,
                                           words=_PASS_WORDS, facts=[])
        texts = [compiled.facts[j] for j in chosen]
        return Message.model_construct(speaker=self.index, action=action, round=round, text=" ".join(texts),
                                       words=sum(compiled.words[j] for j in chosen), facts=texts)

    # -- internals ------------------------------------------------------------------------------------------
    def _compiled(self, task: HiddenProfileTask) -> CompiledTask:
        compiled = compile_task(task)
        if self.index >= len(compiled.own):
            raise ValueError(f"agent index {self.index} is out of range for task '{task.id}' "
                             f"with {len(compiled.own)} agents")
        return compiled

    def _known(self, compiled: CompiledTask, stated: list[int]) -> list[int]:
        seen = compiled.own_set[self.index]
        return compiled.own[self.index] + [j for j in stated if j not in seen]

    def _probs(self, compiled: CompiledTask, stated: list[int], n_messages: int, round: int, purpose: int
               ) -> list[float]:
        scores = list(compiled.own_scores[self.index])
        own, rows, k = compiled.own_set[self.index], compiled.rows, compiled.k
        for j in stated:
            if j not in own:
                row = rows[j]
                for o in range(k):
                    scores[o] += row[o]
        beta, noise = self.params.beta, self.params.noise
        logits = [beta * s for s in scores]
        if noise > 0:
            key = _mix(self.seed, compiled.key, self.index, n_messages, round, 0, purpose)
            logits = [x + noise * e for x, e in zip(logits, _normals(key, k), strict=True)]
        return _softmax(logits)

    @staticmethod
    def _belief(compiled: CompiledTask, probs: list[float]) -> Belief:
        best = _argmax(probs)
        return Belief.model_construct(probs=dict(zip(compiled.options, probs, strict=True)),
                                      vote=compiled.options[best], confidence=probs[best])

    def _recalled(self, candidates: list[int], key: int) -> list[int]:
        recall = self.params.recall
        if recall >= 1.0:
            return candidates
        stream = _mix(key, 1)
        return [j for j in candidates if _uniform(stream, j) < recall]

    def _free_turn(self, compiled: CompiledTask, stated: list[int], key: int) -> list[int]:
        done = set(stated)
        candidates = self._recalled([j for j in compiled.own[self.index] if j not in done], key)
        if not candidates:
            return []
        bias, shared = self.params.shared_bias, compiled.shared
        # weighted sampling without replacement (Efraimidis-Spirakis): the largest u ** (1 / w) win
        stream = _mix(key, 2)
        keyed = sorted(candidates, key=lambda j: -math.log(_uniform(stream, j)) / (bias if shared[j] else 1.0))
        return keyed[: self.params.facts_per_message]

    def _unshared(self, compiled: CompiledTask, stated: list[int], key: int, count: int) -> list[int]:
        done = set(stated)
        candidates = self._recalled([j for j in compiled.own[self.index] if j not in done], key)
        shared, spread = compiled.shared, compiled.spread
        candidates.sort(key=lambda j: (shared[j], -spread[j]))
        return candidates[:count]

    def _against(self, compiled: CompiledTask, stated: list[int], key: int, n_messages: int, round: int,
                 clarify: bool) -> list[int]:
        leader = self._leader(compiled, stated)
        if clarify:
            own = self._probs(compiled, stated, n_messages, round, _BELIEF)
            mine = _argmax(own)
            if mine == leader:  # no divergence from the group: explain the edge over its own runner-up
                rest = [p if k != mine else -1.0 for k, p in enumerate(own)]
                other = _argmax(rest)
            else:
                other = leader
        rows = compiled.rows
        margin: dict[int, float] = {}
        for j in self._known(compiled, stated):
            row = rows[j]
            if clarify:
                value = row[mine] - row[other]
            else:
                value = max(row[o] for o in range(compiled.k) if o != leader) - row[leader]
            if value > 0:
                margin[j] = value
        done = set(stated)
        candidates = self._recalled(list(margin), key)
        candidates.sort(key=lambda j: (j in done, -margin[j]))
        return candidates[: self.params.facts_per_message]

    def _leader(self, compiled: CompiledTask, stated: list[int]) -> int:
        """The group's leading option: the highest mean noiseless belief over all agents."""
        masks = compiled.own_mask.copy()
        if stated:
            masks[:, stated] = True
        logits = self.params.beta * (masks @ compiled.support)
        logits -= logits.max(axis=1, keepdims=True)
        exps = np.exp(logits)
        mean = (exps / exps.sum(axis=1, keepdims=True)).mean(axis=0)
        return int(np.argmax(mean))


def sim_team(n_agents: int, params: SimParams | None = None, seed: int = 0) -> list[SimAgent]:
    """``n_agents`` simulated agents with the same parameters and seed (each agent's index varies its draws)."""
    return [SimAgent(i, params, seed) for i in range(n_agents)]


class SimTeam:
    """Simulated agents for any task (``for_task(task)``), all with the same parameters and seed.

    Args:
        params: how the agents think and talk.
        seed: the agents' seed.
    """

    is_simulated = True

    def __init__(self, params: SimParams | None = None, seed: int = 0):
        self.params = params or SimParams()
        self.seed = int(seed)

    def __repr__(self) -> str:
        return f"SimTeam(params={self.params}, seed={self.seed})"

    def for_task(self, task: HiddenProfileTask) -> list[SimAgent]:
        """One agent per agent of ``task``."""
        return sim_team(task.n_agents, self.params, self.seed)

    def __call__(self, task: HiddenProfileTask) -> list[SimAgent]:
        """``team(task)``: the same as :meth:`for_task` (a team is the ``task -> agents`` callable programs take)."""
        return self.for_task(task)
