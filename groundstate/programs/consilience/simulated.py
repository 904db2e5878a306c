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
what it can say: messages draw on all of its facts as described below, and the group leader (see Messages)
is computed without limits. With all three off (``attention=None``, ``salience=0``, ``weight_noise=0``, the
``ideal`` preset, which is ``SimParams()``) agents take the unlimited code path and behave exactly as before
the limits existed. :data:`SIM_PRESETS` names parameter sets and :func:`sim_preset` builds one with
overrides; the ``limited`` preset is a regime in which full information no longer gives near-perfect
accuracy on generated travel tasks while a controlled discussion still helps.

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
give the same belief and message; the limits' per-fact draws (attention order, weighting factors) hash
(agent seed, task id, agent index, purpose, fact text) and do not depend on the transcript at all. A
controller can therefore branch counterfactually from one transcript, and a run is reproducible in another
process (no global random state, no salted string hashing: fact texts and task ids are keyed by CRC-32).

Why one file (over the usual 400 lines): the belief rule, its limits and the message rules are one agent. They
share the agent's internals (Clarify argues from the limited belief); splitting them would mean importing those
private pieces across modules. What needs no internals lives beside it: the counter-based random streams in
:mod:`~groundstate.programs.consilience.simulated_streams` and the group's array code in
:mod:`~groundstate.programs.consilience.simulated_group`.

Speed: tasks are precomputed once by :mod:`~groundstate.programs.consilience.support`; with every limit off
beliefs take the same incremental path as before the limits existed, and with limits on a belief costs one
pass over the transcript and the agent's facts (``bench/simulate_speed.py`` measures both). A controller asks
the whole group at once (:func:`group_beliefs`): the stated facts are read once, and branches that state the
same facts share their beliefs. Large groups without limits are computed as arrays
(:func:`~groundstate.programs.consilience.simulated_group.full_beliefs`): the group's constants are gathered
once per discussion, a branch's summed scores extend its parent's, and the logit noise of a (transcript
length, round) is hashed as arrays once for all the counterfactual branches that share it. Every number is the
one an agent's own :meth:`SimAgent.belief` gives.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

import numpy as np

from groundstate.programs.consilience.simulated_group import GroupBeliefs, full_beliefs, group_leader, trusted_belief
from groundstate.programs.consilience.simulated_streams import mix, mix_rows, normal_rows, normals, uniform
from groundstate.programs.consilience.support import CompiledTask, compile_task
from groundstate.records import ACTIONS, Belief, HiddenProfileTask, Message, Transcript

__all__ = ["PASS_TEXT", "SIM_PRESETS", "SimAgent", "SimParams", "SimTeam", "group_beliefs", "sim_preset", "sim_team"]


PASS_TEXT = "I have nothing new to add."
"""What a simulated agent says when no fact comes to mind (no facts, so no new information)."""


_PASS_WORDS = len(PASS_TEXT.split())


_ACTION_CODES = {None: 0, **{name: i + 1 for i, name in enumerate(ACTIONS)}}


_BELIEF, _SPEAK, _VOTE = 1, 2, 3


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


_GROUPS_SIZE = 64


_VECTOR_MIN = 8
"""From this many agents (without limits of integration) a group's beliefs are computed as arrays; below it the
per-agent loop is faster. Both give the same numbers."""


_GROUPS: dict[tuple, list[Belief]] = {}
"""A group's beliefs by all they depend on: the compiled task, the agents (objects), the facts of every message
(a belief reads nothing else of a transcript), the round and the purpose. Counterfactual branches that state the
same facts (SeekEvidence and Route with one fact per message) share them. Cleared when full."""


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
        attention: at most this many informative facts enter a belief, the most salient first (recently
            spoken facts, then own private facts, then own shared facts); ``None`` attends to all of them.
        salience: extra weight of a fact on the transcript: it weighs ``1 + salience * recency ** age``
            against 1 for a fact the agent only holds; 0 weighs spoken and held facts alike.
        recency: how the extra weight of a spoken fact fades per later message (0-1; 1: no fading, 0: only
            the facts of the last message get it).
        weight_noise: standard deviation of the log of each fact's weighting factor (fixed per seed, task,
            agent and fact); 0 weighs every fact exactly.

    The last four fields set the limits of integration (module docstring); all off is the ``ideal`` preset.
    """

    beta: float = 1.0
    noise: float = 0.5
    recall: float = 0.8
    shared_bias: float = 2.0
    facts_per_message: int = 1
    attention: int | None = None
    salience: float = 0.0
    recency: float = 1.0
    weight_noise: float = 0.0

    def __post_init__(self):
        checks = [
            ("beta", self.beta, math.isfinite(self.beta) and self.beta >= 0, "a finite number >= 0"),
            ("noise", self.noise, math.isfinite(self.noise) and self.noise >= 0, "a finite number >= 0"),
            ("recall", self.recall, 0.0 <= self.recall <= 1.0, "between 0 and 1"),
            ("shared_bias", self.shared_bias, math.isfinite(self.shared_bias) and self.shared_bias > 0,
             "a finite number > 0"),
            ("facts_per_message", self.facts_per_message, _is_count(self.facts_per_message), "an integer >= 1"),
            ("attention", self.attention, self.attention is None or _is_count(self.attention),
             "an integer >= 1 or None (attend to every fact)"),
            ("salience", self.salience, _is_number(self.salience) and self.salience >= 0, "a finite number >= 0"),
            ("recency", self.recency, _is_number(self.recency) and 0.0 <= self.recency <= 1.0, "between 0 and 1"),
            ("weight_noise", self.weight_noise, _is_number(self.weight_noise) and self.weight_noise >= 0,
             "a finite number >= 0"),
        ]
        for name, value, ok, need in checks:
            if not ok:
                raise ValueError(f"SimParams.{name} must be {need}, got {value!r}")

    @property
    def integrates_fully(self) -> bool:
        """True when no limit of integration is on (beliefs weigh every known fact exactly)."""
        return self.attention is None and self.salience == 0 and self.weight_noise == 0


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


SIM_PRESETS: MappingProxyType[str, SimParams] = MappingProxyType({
    "ideal": SimParams(),
    "limited": SimParams(attention=3, salience=0.5, recency=0.8, weight_noise=0.3),
})
"""Named parameter sets (read-only; derive variants with :func:`sim_preset`).

- ``ideal``: exactly ``SimParams()``: perfect integrators, the behaviour from before the limits existed.
- ``limited``: ``SimParams()`` plus ``attention=3`` (three informative facts per belief), ``salience=0.5`` with
  ``recency=0.8`` (a fact in the last message weighs 1.5, one five messages back about 1.16) and
  ``weight_noise=0.3`` (95% of the weighting factors within 0.56-1.8). On generated travel tasks full
  information then gets about half the tasks right instead of nearly all, while discussion still helps and the
  rule controller does a little better than full information on average (a few points of accuracy), because
  the facts a controlled discussion surfaces last are the ones the agents attend to.
"""


def sim_preset(name: str, **overrides: object) -> SimParams:
    """The preset ``name`` of :data:`SIM_PRESETS` with ``overrides`` (``SimParams`` fields) replacing its values.

    Raises:
        ValueError: an unknown preset or field, or a value :class:`SimParams` rejects.
    """
    if name not in SIM_PRESETS:
        raise ValueError(f"unknown simulated-agent preset '{name}'; choose from {', '.join(SIM_PRESETS)}")
    known = {f.name for f in fields(SimParams)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown SimParams field(s) {', '.join(unknown)}; fields are {', '.join(sorted(known))}")
    return replace(SIM_PRESETS[name], **overrides)


def _action_code(action: str | None) -> int:
    code = _ACTION_CODES.get(action)
    return code if code is not None else zlib.crc32(str(action).encode("utf-8")) + 16




_LEADERS: dict[tuple, int] = {}
"""The group's leading option by (compiled task, stated facts, beta); cleared when full."""


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
        probs = self._probs(compiled, transcript, None, round, _BELIEF)
        return self._belief(compiled, probs)

    def vote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        """The final vote: the same rule as :meth:`belief`, with its own noise draw."""
        compiled = self._compiled(task)
        probs = self._probs(compiled, transcript, None, 0, _VOTE)
        return self._belief(compiled, probs)

    def speak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int) -> Message:
        """A message under ``action`` (or a free turn for ``None``) stating the facts its intent calls for."""
        compiled = self._compiled(task)
        stated = compiled.stated(transcript)
        n_messages = len(transcript.messages)
        params = self.params
        key = mix(self.seed, compiled.key, self.index, n_messages, round, _action_code(action), _SPEAK)
        if action is None:
            chosen = self._free_turn(compiled, stated, key)
        elif action in ("SeekEvidence", "Route"):
            chosen = self._unshared(compiled, stated, key, 1 if action == "SeekEvidence" else params.facts_per_message)
        elif action in ("Challenge", "Clarify"):
            chosen = self._against(compiled, transcript, stated, key, round, clarify=action == "Clarify")
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

    def _probs(self, compiled: CompiledTask, transcript: Transcript, stated: list[int] | None, round: int,
               purpose: int) -> list[float]:
        """The belief's probabilities; ``stated`` is ``compiled.stated(transcript)`` if the caller has it."""
        params, k = self.params, compiled.k
        if params.integrates_fully:
            if stated is None:
                stated = compiled.stated(transcript)
            scores = list(compiled.own_scores[self.index])
            own, rows = compiled.own_set[self.index], compiled.rows
            for j in stated:
                if j not in own:
                    row = rows[j]
                    for o in range(k):
                        scores[o] += row[o]
        else:
            scores = self._limited_scores(compiled, transcript)
        beta, noise = params.beta, params.noise
        logits = [beta * s for s in scores]
        if noise > 0:
            draws = self._noise(compiled, len(transcript.messages), round, purpose)
            logits = [x + noise * e for x, e in zip(logits, draws, strict=True)]
        return _softmax(logits)

    def _noise(self, compiled: CompiledTask, n_messages: int, round: int, purpose: int) -> list[float]:
        """The standard normal logit draws of a belief (read-only; cached in :data:`_NOISE`)."""
        cache_key = (self.seed, compiled.key, self.index, n_messages, round, purpose, compiled.k)
        draws = _NOISE.get(cache_key)
        if draws is None:
            draws = normals(mix(self.seed, compiled.key, self.index, n_messages, round, 0, purpose), compiled.k)
            if len(_NOISE) >= _NOISE_SIZE:
                _NOISE.clear()
            _NOISE[cache_key] = draws
        return draws

    def _limited_scores(self, compiled: CompiledTask, transcript: Transcript) -> list[float]:
        """Summed support under the limits of integration: salience weights, attention, weighting factors."""
        params = self.params
        order, factor = self._per_fact(compiled)
        salience, recency = params.salience, params.recency
        weight: dict[int, float] = {}
        for j, age in compiled.recent(transcript):  # the most recently mentioned first
            weight[j] = 1.0 + salience * recency ** age if salience else 1.0
        held = [j for j in compiled.own[self.index] if j not in weight]
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

    def _per_fact(self, compiled: CompiledTask) -> tuple[list[float], list[float]]:
        """This agent's attention tie-break keys and weighting factors for the task's facts (read-only lists).

        Both are drawn per fact text, so a copy of the task (such as the full-info one) gets the same draws;
        they are cached in :data:`_PER_FACT`."""
        attends, sigma = self.params.attention is not None, self.params.weight_noise
        cache_key = (self.seed, compiled.key, self.index, attends, sigma, compiled.fact_keys)
        hit = _PER_FACT.get(cache_key)
        if hit is not None:
            return hit
        keys = compiled.fact_keys
        if attends:
            attend = mix(self.seed, compiled.key, self.index, _ATTEND)
            order = [uniform(mix(attend, key), 0) for key in keys]
        else:
            order = [0.0] * len(keys)
        if sigma > 0:
            weigh = mix(self.seed, compiled.key, self.index, _WEIGH)
            factor = [math.exp(sigma * normals(mix(weigh, key), 1)[0]) for key in keys]
        else:
            factor = [1.0] * len(keys)
        if len(_PER_FACT) >= _PER_FACT_SIZE:
            _PER_FACT.clear()
        _PER_FACT[cache_key] = (order, factor)
        return order, factor

    @staticmethod
    def _belief(compiled: CompiledTask, probs: list[float]) -> Belief:
        best = _argmax(probs)
        return trusted_belief(dict(zip(compiled.options, probs, strict=True)), compiled.options[best], probs[best])

    def _recalled(self, candidates: list[int], key: int) -> list[int]:
        recall = self.params.recall
        if recall >= 1.0:
            return candidates
        stream = mix(key, 1)
        return [j for j in candidates if uniform(stream, j) < recall]

    def _free_turn(self, compiled: CompiledTask, stated: list[int], key: int) -> list[int]:
        done = set(stated)
        candidates = self._recalled([j for j in compiled.own[self.index] if j not in done], key)
        if not candidates:
            return []
        bias, shared = self.params.shared_bias, compiled.shared
        # weighted sampling without replacement (Efraimidis-Spirakis): the largest u ** (1 / w) win
        stream = mix(key, 2)
        keyed = sorted(candidates, key=lambda j: -math.log(uniform(stream, j)) / (bias if shared[j] else 1.0))
        return keyed[: self.params.facts_per_message]

    def _unshared(self, compiled: CompiledTask, stated: list[int], key: int, count: int) -> list[int]:
        done = set(stated)
        candidates = self._recalled([j for j in compiled.own[self.index] if j not in done], key)
        shared, spread = compiled.shared, compiled.spread
        candidates.sort(key=lambda j: (shared[j], -spread[j]))
        return candidates[:count]

    def _against(self, compiled: CompiledTask, transcript: Transcript, stated: list[int], key: int, round: int,
                 clarify: bool) -> list[int]:
        leader = self._leader(compiled, stated)
        if clarify:
            own = self._probs(compiled, transcript, stated, round, _BELIEF)
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
        """The group's leading option: the highest mean noiseless belief over all agents (cached in
        :data:`_LEADERS`: Challenge and Clarify from one transcript need the same one)."""
        key = (compiled, tuple(stated), self.params.beta)
        leader = _LEADERS.get(key)
        if leader is None:
            if len(_LEADERS) >= _GROUPS_SIZE:
                _LEADERS.clear()
            leader = _LEADERS[key] = group_leader(compiled, stated, self.params.beta)
        return leader


def group_beliefs(agents: list[SimAgent], task: HiddenProfileTask, transcript: Transcript, round: int,
                  final: bool = False) -> list[Belief]:
    """``[agent.belief(task, transcript, round) for agent in agents]`` (``final``: ``agent.vote(task,
    transcript)``), the same beliefs with the work they share done once: the task lookup and the facts stated
    on the transcript; a group asked again about the same facts, round and purpose gets the same beliefs
    (cached in :data:`_GROUPS`; beliefs are values, do not change them in place)."""
    if not agents:
        return []
    compiled = agents[0]._compiled(task)
    for agent in agents:
        if agent.index >= len(compiled.own):
            agent._compiled(task)  # raises the out-of-range error
    round, purpose = (0, _VOTE) if final else (round, _BELIEF)
    key = (compiled, tuple(agents), tuple(tuple(m.facts) for m in transcript.messages), round, purpose)
    beliefs = _GROUPS.get(key)
    if beliefs is None:
        stated = compiled.stated(transcript)
        if len(agents) >= _VECTOR_MIN and all(agent.params.integrates_fully for agent in agents):
            n_messages = len(transcript.messages)
            beliefs = full_beliefs(agents, compiled, stated, n_messages, round, purpose,
                                   lambda rows: _noise_rows([agents[r] for r in rows], compiled, n_messages, round,
                                                            purpose))
        else:
            beliefs = [agent._belief(compiled, agent._probs(compiled, transcript, stated, round, purpose))
                       for agent in agents]
        if len(_GROUPS) >= _GROUPS_SIZE:
            _GROUPS.clear()
        _GROUPS[key] = beliefs
    return beliefs.copy() if isinstance(beliefs, GroupBeliefs) else list(beliefs)


def _noise_rows(agents: list[SimAgent], compiled: CompiledTask, n_messages: int, round: int, purpose: int
                ) -> np.ndarray:
    """``[agent._noise(compiled, n_messages, round, purpose) for agent in agents]`` as one array, the same numbers
    hashed as arrays."""
    keys = mix_rows([a.seed for a in agents], compiled.key, [a.index for a in agents], n_messages, round, 0, purpose)
    return normal_rows(keys, compiled.k)


def sim_team(n_agents: int, params: SimParams | None = None, seed: int = 0) -> list[SimAgent]:
    """``n_agents`` simulated agents with the same parameters and seed (each agent's index varies its draws)."""
    return [SimAgent(i, params, seed) for i in range(n_agents)]


class SimTeam:
    """Simulated agents for any task (``for_task(task)``), with one seed and the same parameters, or parameters of
    their own (a heterogeneous team, the paper's §5.5.4 with simulated agents).

    Args:
        params: how the agents think and talk (every agent past ``per_agent``).
        seed: the agents' seed.
        per_agent: agent ``i`` uses ``per_agent[i]`` (``None`` or empty: every agent uses ``params``).
    """

    is_simulated = True

    def __init__(self, params: SimParams | None = None, seed: int = 0, per_agent: list[SimParams] | None = None):
        self.params = params or SimParams()
        self.seed = int(seed)
        self.per_agent = list(per_agent or [])

    def __repr__(self) -> str:
        extra = f", per_agent={self.per_agent}" if self.per_agent else ""
        return f"SimTeam(params={self.params}, seed={self.seed}{extra})"

    def params_of(self, index: int) -> SimParams:
        """The parameters of agent ``index``."""
        return self.per_agent[index] if index < len(self.per_agent) else self.params

    def for_task(self, task: HiddenProfileTask) -> list[SimAgent]:
        """One agent per agent of ``task``."""
        if not self.per_agent:
            return sim_team(task.n_agents, self.params, self.seed)
        return [SimAgent(i, self.params_of(i), self.seed) for i in range(task.n_agents)]

    def __call__(self, task: HiddenProfileTask) -> list[SimAgent]:
        """``team(task)``: the same as :meth:`for_task` (a team is the ``task -> agents`` callable programs take)."""
        return self.for_task(task)
