"""What a simulated agent concludes: its beliefs and votes under the scoring rule and the limits of integration.

Knowledge. At a transcript, agent ``i`` knows its own facts (the shared facts and ``private[i]``) plus every
fact stated on the transcript (:attr:`Message.facts`). Facts on the transcript that the task does not know
(neither a task fact nor a key of ``support``) are ignored.

Scoring rule (beliefs). The score of option ``k`` is the summed support of the known facts,
``score_k = sum_f support[f][k]``, and the belief is a noisy softmax::

    p_k = softmax_k(beta * score_k + noise * eps_k),    eps_k ~ N(0, 1)

``beta`` sets how sharp beliefs are (0 gives uniform beliefs); ``noise`` is the standard deviation of the
per-option Gaussian perturbation (0 gives a deterministic belief). The vote is the most probable option (the
first in option order on a tie) and the confidence is its probability.

Limits of integration. The rule above makes an agent a perfect integrator: handed every fact (the
``full-info`` protocol), it weighs each one exactly. Real (LM) agents overlook facts buried in a long context
and misjudge how much a fact matters, which is why full information is no upper bound in the paper. Three
optional limits, all off by default, replace the score by a weighted sum over the facts the agent attends to::

    score_k = sum_{f attended} w_f * m_f * support[f][k]

- ``attention`` (bounded attention): only the ``attention`` most salient *informative* facts enter the sum (a
  fact is informative when its support is non-zero for some option; facts that support nothing never take a
  place). Salience order: first the facts on the transcript, the most recently mentioned first (a fact's
  latest mention counts, so restating a fact refreshes it; facts of one message in the message's order); then
  the agent's own facts not on the transcript, private before shared, each group in a random order that is
  fixed per (seed, task, agent, fact text). ``None`` attends to every fact.
- ``salience`` and ``recency`` (spoken facts count more): a fact on the transcript weighs
  ``w_f = 1 + salience * recency ** age``, where ``age`` is the number of messages after its latest mention
  (0 for the last message); a fact the agent only holds weighs ``w_f = 1``. ``salience = 0`` weighs all
  facts alike; ``recency = 1`` boosts every spoken fact equally, smaller values let the boost fade with each
  later message.
- ``weight_noise`` (imperfect weighting): each fact's support is scaled by ``m_f = exp(weight_noise * z_f)``,
  ``z_f ~ N(0, 1)``, a log-normal factor with median 1 drawn once per (seed, task, agent, fact text). An agent
  therefore misweighs the same facts at every turn, in every counterfactual branch and in the full-info copy
  of the task; 0 weighs every fact exactly (``m_f = 1``).

The limits shape what an agent concludes (beliefs, votes, and the own belief a ``Clarify`` argues from), not
what it can say: messages draw on all of its facts (:mod:`~groundstate.programs.consilience.simulated_speech`),
and the group leader is computed without limits. With all three off (``attention=None``, ``salience=0``,
``weight_noise=0``, the ``ideal`` preset, which is ``SimParams()``) agents take the unlimited code path and
behave exactly as before the limits existed
(:data:`~groundstate.programs.consilience.simulated_params.SIM_PRESETS` names parameter sets).

Determinism. A belief's logit noise hashes (agent seed, task id, agent index, transcript length, round,
purpose) and the limits' per-fact draws (attention order, weighting factors) hash (agent seed, task id, agent
index, purpose, fact text), never global state (:mod:`~groundstate.programs.consilience.simulated_streams`), so
the same transcript always gives the same belief, and the per-fact draws do not depend on the transcript at all.

The functions take the agent (any object with ``index``, ``params`` and ``seed``, such as
:class:`~groundstate.programs.consilience.simulated.SimAgent`) and the compiled task
(:mod:`~groundstate.programs.consilience.support`); :meth:`SimAgent.belief` and :meth:`SimAgent.vote` are
:func:`probabilities` and :func:`to_belief`, and
:func:`~groundstate.programs.consilience.simulated.group_beliefs` gives a whole group the same numbers.
"""

from __future__ import annotations

import math
from typing import Any

from groundstate.programs.consilience.simulated_group import trusted_belief
from groundstate.programs.consilience.simulated_streams import mix, normals, uniform
from groundstate.programs.consilience.support import CompiledTask
from groundstate.records import Belief, Transcript

__all__ = ["BELIEF", "SPEAK", "VOTE", "argmax", "known_facts", "limited_scores", "logit_noise", "per_fact_draws",
           "probabilities", "softmax", "to_belief"]


BELIEF, SPEAK, VOTE = 1, 2, 3
"""Purposes of an agent's random streams: a belief's noise, a message's choices, the final vote's noise."""


_ATTEND, _WEIGH = 4, 5
"""Purposes of the limits' per-fact streams (attention order, weighting factors)."""


_PER_FACT_SIZE = 8192


_PER_FACT: dict[tuple, tuple[list[float], list[float]]] = {}
"""The limits' per-fact draws by (seed, task key, agent index, attention on, weight noise, fact keys): they
depend on nothing else, so agents built afresh for every discussion (and the full-info copy of a task) reuse
them. Cleared when full; a lost entry is only recomputed."""


_NOISE_SIZE = 65536


_NOISE: dict[tuple[int, ...], list[float]] = {}
"""Logit noise by (seed, task key, agent index, transcript length, round, purpose, options): it depends on
nothing else, so the counterfactual branches of one round (transcripts of the same length) draw it once per
agent. Cleared when full; a lost entry is only recomputed."""


def softmax(logits: list[float]) -> list[float]:
    """The softmax of ``logits`` (shifted by their maximum, so large logits do not overflow)."""
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def argmax(values: list[float]) -> int:
    """The index of the largest value, the first one on a tie (a vote's tie rule: option order)."""
    best = 0
    for k in range(1, len(values)):
        if values[k] > values[best]:
            best = k
    return best


def known_facts(agent: Any, compiled: CompiledTask, stated: list[int]) -> list[int]:
    """The facts ``agent`` knows at a transcript: its own, then those stated on the transcript it does not hold."""
    seen = compiled.own_set[agent.index]
    return compiled.own[agent.index] + [j for j in stated if j not in seen]


def probabilities(agent: Any, compiled: CompiledTask, transcript: Transcript, stated: list[int] | None, round: int,
                  purpose: int) -> list[float]:
    """The belief's probabilities (option order); ``stated`` is ``compiled.stated(transcript)`` if the caller has
    it, ``purpose`` is :data:`BELIEF` or :data:`VOTE` (each draws its own noise)."""
    params, k = agent.params, compiled.k
    if params.integrates_fully:
        if stated is None:
            stated = compiled.stated(transcript)
        scores = list(compiled.own_scores[agent.index])
        own, rows = compiled.own_set[agent.index], compiled.rows
        for j in stated:
            if j not in own:
                row = rows[j]
                for o in range(k):
                    scores[o] += row[o]
    else:
        scores = limited_scores(agent, compiled, transcript)
    beta, noise = params.beta, params.noise
    logits = [beta * s for s in scores]
    if noise > 0:
        draws = logit_noise(agent, compiled, len(transcript.messages), round, purpose)
        logits = [x + noise * e for x, e in zip(logits, draws, strict=True)]
    return softmax(logits)


def logit_noise(agent: Any, compiled: CompiledTask, n_messages: int, round: int, purpose: int) -> list[float]:
    """The standard normal logit draws of a belief (read-only; cached in :data:`_NOISE`)."""
    cache_key = (agent.seed, compiled.key, agent.index, n_messages, round, purpose, compiled.k)
    draws = _NOISE.get(cache_key)
    if draws is None:
        draws = normals(mix(agent.seed, compiled.key, agent.index, n_messages, round, 0, purpose), compiled.k)
        if len(_NOISE) >= _NOISE_SIZE:
            _NOISE.clear()
        _NOISE[cache_key] = draws
    return draws


def limited_scores(agent: Any, compiled: CompiledTask, transcript: Transcript) -> list[float]:
    """Summed support under the limits of integration: salience weights, attention, weighting factors."""
    params = agent.params
    order, factor = per_fact_draws(agent, compiled)
    salience, recency = params.salience, params.recency
    weight: dict[int, float] = {}
    for j, age in compiled.recent(transcript):  # the most recently mentioned first
        weight[j] = 1.0 + salience * recency ** age if salience else 1.0
    held = [j for j in compiled.own[agent.index] if j not in weight]
    ranked = list(weight)
    if params.attention is not None:
        shared, informative = compiled.shared, compiled.informative
        held.sort(key=lambda j: (shared[j], order[j]))
        ranked.extend(held)
        ranked = [j for j in ranked if informative[j]][: params.attention]
    else:
        ranked.extend(held)
    rows, k = compiled.rows, compiled.k
    scores = [0.0] * k
    for j in ranked:
        w = weight.get(j, 1.0) * factor[j]
        row = rows[j]
        for o in range(k):
            scores[o] += w * row[o]
    return scores


def per_fact_draws(agent: Any, compiled: CompiledTask) -> tuple[list[float], list[float]]:
    """The agent's attention tie-break keys and weighting factors for the task's facts (read-only lists).

    Both are drawn per fact text, so a copy of the task (such as the full-info one) gets the same draws;
    they are cached in :data:`_PER_FACT`."""
    attends, sigma = agent.params.attention is not None, agent.params.weight_noise
    cache_key = (agent.seed, compiled.key, agent.index, attends, sigma, compiled.fact_keys)
    hit = _PER_FACT.get(cache_key)
    if hit is not None:
        return hit
    keys = compiled.fact_keys
    if attends:
        attend = mix(agent.seed, compiled.key, agent.index, _ATTEND)
        order = [uniform(mix(attend, key), 0) for key in keys]
    else:
        order = [0.0] * len(keys)
    if sigma > 0:
        weigh = mix(agent.seed, compiled.key, agent.index, _WEIGH)
        factor = [math.exp(sigma * normals(mix(weigh, key), 1)[0]) for key in keys]
    else:
        factor = [1.0] * len(keys)
    if len(_PER_FACT) >= _PER_FACT_SIZE:
        _PER_FACT.clear()
    _PER_FACT[cache_key] = (order, factor)
    return order, factor


def to_belief(compiled: CompiledTask, probs: list[float]) -> Belief:
    """The :class:`~groundstate.records.Belief` of ``probs``: the vote is the most probable option (the first in
    option order on a tie) and the confidence its probability."""
    best = argmax(probs)
    return trusted_belief(dict(zip(compiled.options, probs, strict=True)), compiled.options[best], probs[best])
