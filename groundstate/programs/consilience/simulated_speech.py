"""What a simulated agent says: the message rules behind
:meth:`~groundstate.programs.consilience.simulated.SimAgent.speak`.

What an agent says follows the action's intent (§3.1.2 of the Consilience paper):

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

Determinism. A message's draws (which facts come to mind, the weighted choice of a free turn) hash (agent seed,
task id, agent index, transcript length, round, action, purpose)
(:mod:`~groundstate.programs.consilience.simulated_streams`), so the same transcript and action always give the
same message, and a controller can try every action from one transcript.

Clarify argues from the agent's own belief, limits of integration included
(:func:`~groundstate.programs.consilience.simulated_belief.probabilities`); the other rules read only the
agent's facts, the transcript and the group's leading option.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

from groundstate.programs.consilience.simulated_belief import BELIEF, SPEAK, argmax, known_facts, probabilities
from groundstate.programs.consilience.simulated_group import group_leader
from groundstate.programs.consilience.simulated_streams import mix, uniform
from groundstate.programs.consilience.support import CompiledTask
from groundstate.records import ACTIONS, Message, Transcript

__all__ = ["PASS_TEXT", "message"]


PASS_TEXT = "I have nothing new to add."
"""What a simulated agent says when no fact comes to mind (no facts, so no new information)."""


_PASS_WORDS = len(PASS_TEXT.split())


_ACTION_CODES = {None: 0, **{name: i + 1 for i, name in enumerate(ACTIONS)}}


_LEADERS_SIZE = 64


_LEADERS: dict[tuple, int] = {}
"""The group's leading option by (compiled task, stated facts, beta); cleared when full."""


def message(agent: Any, compiled: CompiledTask, transcript: Transcript, action: str | None, round: int) -> Message:
    """What ``agent`` (with ``index``, ``params`` and ``seed``) says under ``action`` (``None``: a free turn) at
    ``transcript``: the facts the action's intent calls for, or :data:`PASS_TEXT` when none comes to mind.

    Raises:
        ValueError: an action that is not one of the four communication actions or ``None``.
    """
    stated = compiled.stated(transcript)
    n_messages = len(transcript.messages)
    params = agent.params
    key = mix(agent.seed, compiled.key, agent.index, n_messages, round, _action_code(action), SPEAK)
    if action is None:
        chosen = _free_turn(agent, compiled, stated, key)
    elif action in ("SeekEvidence", "Route"):
        chosen = _unshared(agent, compiled, stated, key, 1 if action == "SeekEvidence" else params.facts_per_message)
    elif action in ("Challenge", "Clarify"):
        chosen = _against(agent, compiled, transcript, stated, key, round, clarify=action == "Clarify")
    else:
        raise ValueError(f"unknown action '{action}'; expected one of {ACTIONS[:4]} or None (a free turn)")
    if not chosen:
        return Message.model_construct(speaker=agent.index, action=action, round=round, text=PASS_TEXT,
                                       words=_PASS_WORDS, facts=[])
    texts = [compiled.facts[j] for j in chosen]
    return Message.model_construct(speaker=agent.index, action=action, round=round, text=" ".join(texts),
                                   words=sum(compiled.words[j] for j in chosen), facts=texts)


def _action_code(action: str | None) -> int:
    code = _ACTION_CODES.get(action)
    return code if code is not None else zlib.crc32(str(action).encode("utf-8")) + 16


def _recalled(agent: Any, candidates: list[int], key: int) -> list[int]:
    recall = agent.params.recall
    if recall >= 1.0:
        return candidates
    stream = mix(key, 1)
    return [j for j in candidates if uniform(stream, j) < recall]


def _free_turn(agent: Any, compiled: CompiledTask, stated: list[int], key: int) -> list[int]:
    done = set(stated)
    candidates = _recalled(agent, [j for j in compiled.own[agent.index] if j not in done], key)
    if not candidates:
        return []
    bias, shared = agent.params.shared_bias, compiled.shared
    # weighted sampling without replacement (Efraimidis-Spirakis): the largest u ** (1 / w) win
    stream = mix(key, 2)
    keyed = sorted(candidates, key=lambda j: -math.log(uniform(stream, j)) / (bias if shared[j] else 1.0))
    return keyed[: agent.params.facts_per_message]


def _unshared(agent: Any, compiled: CompiledTask, stated: list[int], key: int, count: int) -> list[int]:
    done = set(stated)
    candidates = _recalled(agent, [j for j in compiled.own[agent.index] if j not in done], key)
    shared, spread = compiled.shared, compiled.spread
    candidates.sort(key=lambda j: (shared[j], -spread[j]))
    return candidates[:count]


def _against(agent: Any, compiled: CompiledTask, transcript: Transcript, stated: list[int], key: int, round: int,
             clarify: bool) -> list[int]:
    leader = _leader(compiled, stated, agent.params.beta)
    if clarify:
        own = probabilities(agent, compiled, transcript, stated, round, BELIEF)
        mine = argmax(own)
        if mine == leader:  # no divergence from the group: explain the edge over its own runner-up
            rest = [p if k != mine else -1.0 for k, p in enumerate(own)]
            other = argmax(rest)
        else:
            other = leader
    rows = compiled.rows
    margin: dict[int, float] = {}
    for j in known_facts(agent, compiled, stated):
        row = rows[j]
        if clarify:
            value = row[mine] - row[other]
        else:
            value = max(row[o] for o in range(compiled.k) if o != leader) - row[leader]
        if value > 0:
            margin[j] = value
    done = set(stated)
    candidates = _recalled(agent, list(margin), key)
    candidates.sort(key=lambda j: (j in done, -margin[j]))
    return candidates[: agent.params.facts_per_message]


def _leader(compiled: CompiledTask, stated: list[int], beta: float) -> int:
    """The group's leading option: the highest mean noiseless belief over all agents (cached in
    :data:`_LEADERS`: Challenge and Clarify from one transcript need the same one)."""
    key = (compiled, tuple(stated), beta)
    leader = _LEADERS.get(key)
    if leader is None:
        if len(_LEADERS) >= _LEADERS_SIZE:
            _LEADERS.clear()
        leader = _LEADERS[key] = group_leader(compiled, stated, beta)
    return leader
