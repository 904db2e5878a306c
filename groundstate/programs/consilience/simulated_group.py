"""The group code of the simulated agents: a whole group's beliefs as arrays, and the group's leading option.

:mod:`~groundstate.programs.consilience.simulated` holds the agent (:class:`SimAgent`, its belief and message
rules; its random streams are in :mod:`~groundstate.programs.consilience.simulated_streams`) and
:func:`~groundstate.programs.consilience.simulated.group_beliefs`, which asks a group at once; for large groups
without limits of integration it hands the work to :func:`full_beliefs` here. What lives here works on the
compiled task (:mod:`~groundstate.programs.consilience.support`) and on plain agent attributes (``index``,
``params``), never on an agent's internals:

- :func:`full_beliefs`: every agent's belief from arrays, with the numbers the agent's own
  :meth:`SimAgent.belief` gives. The per-group constants (own-fact scores, the facts each agent does not hold,
  ``beta`` and ``noise``) are gathered once per group (:class:`GroupPlan`); the summed scores at a transcript
  extend those of the longest earlier list of stated facts the group was asked about (a counterfactual
  branch adds one message to its parent's transcript, so its scores are its parent's plus the new facts, in
  the same order: the same additions); the logit noise of a (transcript length, round, purpose) is one array
  for every branch that shares it; the softmax's exponentials are taken in Python (``math.exp``), its sums
  and divisions as arrays in the same order.
- :class:`GroupBeliefs`: the beliefs, a list that also carries their ``(agents, options)`` probability matrix
  (:meth:`GroupBeliefs.matrix_for`), so the collective state reads the matrix instead of rebuilding it.
- :func:`group_leader`: the option with the highest mean noiseless belief over all agents.
- :func:`trusted_belief`: a :class:`~groundstate.records.Belief` built without validation.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from groundstate.programs.consilience.support import CompiledTask
from groundstate.records import Belief

__all__ = ["GroupBeliefs", "GroupPlan", "full_beliefs", "group_leader", "group_plan", "trusted_belief"]


_PLANS_SIZE = 64


_PLANS: dict[tuple, GroupPlan] = {}
"""Group plans by (compiled task, agents): agents are built afresh for every discussion, so a plan lives for one
discussion and its counterfactual branches. Cleared when full."""


_SCORES_SIZE = 256
"""Summed scores kept per plan (by the stated facts); cleared when full."""


_BELIEF_FIELDS = frozenset(("probs", "vote", "confidence"))


_set = object.__setattr__


def trusted_belief(probs: dict[str, float], vote: str, confidence: float) -> Belief:
    """``Belief.model_construct(probs=..., vote=..., confidence=...)`` (no validation), the same object built
    directly: a belief has no defaults, aliases, extra or private attributes to resolve."""
    belief = Belief.__new__(Belief)
    _set(belief, "__dict__", {"probs": probs, "vote": vote, "confidence": confidence})
    _set(belief, "__pydantic_fields_set__", set(_BELIEF_FIELDS))
    _set(belief, "__pydantic_extra__", None)
    _set(belief, "__pydantic_private__", None)
    return belief


class GroupBeliefs(list):
    """A list of beliefs that also carries their probability matrix (rows: the beliefs, columns: ``options``)."""

    __slots__ = ("_options", "_matrix", "_members")

    def __init__(self, beliefs: Sequence[Belief], options: Sequence[str], matrix: np.ndarray):
        super().__init__(beliefs)
        self._options = tuple(options)
        self._matrix = matrix
        self._members = tuple(beliefs)

    def copy(self) -> GroupBeliefs:
        """A new list of the same beliefs, with the same matrix."""
        return GroupBeliefs(self._members, self._options, self._matrix)

    def matrix_for(self, options: Sequence[str]) -> np.ndarray | None:
        """The ``(agents, options)`` probabilities (read-only), or ``None`` when ``options`` are other options or
        the list no longer holds the beliefs it was built with."""
        if tuple(options) != self._options or len(self) != len(self._members) or \
                not all(map(operator.is_, self, self._members)):
            return None
        return self._matrix


class GroupPlan:
    """What a group's beliefs need that does not depend on the transcript, gathered once per group."""

    __slots__ = ("own_scores", "not_held", "support", "beta", "noisy", "scale", "scores", "noise")

    def __init__(self, agents: Sequence[Any], compiled: CompiledTask):
        rows = [agent.index for agent in agents]
        self.own_scores = np.array([compiled.own_scores[i] for i in rows], dtype=float)
        self.not_held = ~compiled.own_mask[rows]
        self.support = compiled.support
        self.beta = np.array([agent.params.beta for agent in agents])[:, None]
        self.noisy = [r for r, agent in enumerate(agents) if agent.params.noise > 0]
        self.scale = np.array([agents[r].params.noise for r in self.noisy])[:, None]
        self.scores: dict[tuple[int, ...], np.ndarray] = {}
        self.noise: dict[tuple[int, int, int], np.ndarray] = {}

    def summed(self, stated: tuple[int, ...]) -> np.ndarray:
        """Every agent's summed scores after ``stated`` (read-only; see :func:`full_beliefs`)."""
        scores = self.scores.get(stated)
        if scores is not None:
            return scores
        start, scores = 0, self.own_scores
        for cut in range(len(stated) - 1, max(len(stated) - 4, 0) - 1, -1):
            parent = self.scores.get(stated[:cut])
            if parent is not None:
                start, scores = cut, parent
                break
        scores = self._extend(scores, stated[start:])
        if len(self.scores) >= _SCORES_SIZE:
            self.scores.clear()
        self.scores[stated] = scores
        return scores

    def _extend(self, scores: np.ndarray, facts: tuple[int, ...]) -> np.ndarray:
        """``scores`` plus the support of each of ``facts`` an agent does not hold, added one fact at a time."""
        if len(facts) == 1:
            j = facts[0]
            return scores + self.not_held[:, j, None] * self.support[j]
        if not facts:
            return scores
        ids = list(facts)
        steps = self.not_held[:, ids][:, :, None] * self.support[ids][None, :, :]
        return np.add.accumulate(np.concatenate([scores[:, None, :], steps], axis=1), axis=1)[:, -1, :]

    def scaled_noise(self, key: tuple[int, int, int], draws: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        """``noise * eps`` for the noisy agents at ``key`` (transcript length, round, purpose); ``draws(rows)``
        are those agents' standard normal draws there, one row per agent."""
        noise = self.noise.get(key)
        if noise is None:
            if len(self.noise) >= _SCORES_SIZE:
                self.noise.clear()
            noise = self.noise[key] = self.scale * draws(self.noisy)
        return noise


def group_plan(agents: Sequence[Any], compiled: CompiledTask) -> GroupPlan:
    """The group's plan (cached by compiled task and agent identities)."""
    key = (compiled, tuple(agents))
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _PLANS_SIZE:
            _PLANS.clear()
        plan = _PLANS[key] = GroupPlan(agents, compiled)
    return plan


def full_beliefs(agents: Sequence[Any], compiled: CompiledTask, stated: list[int], n_messages: int, round: int,
                 purpose: int, draws: Callable[[list[int]], np.ndarray]) -> GroupBeliefs:
    """The beliefs of agents without limits of integration, all at once, with the numbers of the agents' own
    beliefs: the support of each fact an agent does not hold added in ``stated`` order (adding an exact zero
    for the facts it holds changes no sum, at most the sign of a zero score, which no probability depends on),
    the same noise (``draws(rows)``: those agents' standard normal draws, one row each), the exponentials in
    Python and the totals in the same order (left to right)."""
    plan = group_plan(agents, compiled)
    logits = plan.beta * plan.summed(tuple(stated))
    if plan.noisy:
        noise = plan.scaled_noise((n_messages, round, purpose), draws)
        if len(plan.noisy) == len(agents):
            logits = logits + noise
        else:
            logits[plan.noisy] += noise
    shifted = logits - logits.max(axis=1, keepdims=True)
    exps = np.array(list(map(math.exp, shifted.ravel().tolist()))).reshape(shifted.shape)
    totals = exps[:, 0].copy()
    for o in range(1, exps.shape[1]):
        totals += exps[:, o]
    probs = exps / totals[:, None]
    best = probs.argmax(axis=1).tolist()  # the first most probable option, as the agent's own rule
    options = compiled.options
    beliefs = [trusted_belief(dict(zip(options, row, strict=True)), options[b], row[b])
               for row, b in zip(probs.tolist(), best, strict=True)]
    return GroupBeliefs(beliefs, options, probs)


def group_leader(compiled: CompiledTask, stated: list[int], beta: float) -> int:
    """The group's leading option: the highest mean noiseless belief (softmax of ``beta`` times the summed
    support of the agent's own and the stated facts) over all agents of the task."""
    masks = compiled.own_mask.copy()
    if stated:
        masks[:, stated] = True
    logits = beta * (masks @ compiled.support)
    logits -= logits.max(axis=1, keepdims=True)
    exps = np.exp(logits)
    mean = (exps / exps.sum(axis=1, keepdims=True)).mean(axis=0)
    return int(np.argmax(mean))
