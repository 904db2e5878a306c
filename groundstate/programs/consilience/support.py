"""A hidden-profile task's per-fact support, compiled once for the simulated agents.

``support`` (``{fact text: {option: weight}}``) becomes fact indices, a support matrix and every agent's own-fact
scores (:class:`CompiledTask`, cached by task identity), plus what the agents' integration limits need: which
facts bear on the options at all, a stable key per fact text (for per-fact random draws) and how recently each
fact was mentioned on a transcript. :func:`option_scores` sums the support of a set of facts;
:func:`supported_answer` is the option the pooled facts support most.

Speed. Each task is precomputed once (fact indices, the support matrix, every agent's own-fact scores; cached
by object identity) and messages and beliefs are built without validation, so a 4-agent, 8-message
discussion takes well under a millisecond (``bench/simulate_speed.py``).
"""

from __future__ import annotations

import math
import threading
import zlib
from collections import OrderedDict

import numpy as np

from groundstate.records import HiddenProfileTask, Transcript

_CACHE_SIZE = 4096


class CompiledTask:
    """A task's facts as indices, its support matrix and what each agent knows before discussion."""

    __slots__ = ("task", "options", "k", "index", "facts", "words", "shared", "support", "rows", "spread",
                 "own", "own_set", "own_mask", "own_scores", "key", "_informative", "_fact_keys")

    def __init__(self, task: HiddenProfileTask):
        if not task.support:
            raise ValueError(f"task '{task.id}' has no per-fact support: simulated agents need per-fact support; "
                             "annotate the task or use LM agents")
        options = list(task.options)
        position = {o: k for k, o in enumerate(options)}
        facts: list[str] = []
        index: dict[str, int] = {}
        for text in [*task.shared, *(f for facts_i in task.private for f in facts_i), *task.support]:
            if text not in index:
                index[text] = len(facts)
                facts.append(text)
        support = np.zeros((len(facts), len(options)))
        for text, weights in task.support.items():
            for option, weight in weights.items():
                if option not in position:
                    raise ValueError(f"task '{task.id}': support of fact '{text[:60]}' names '{option}', which is "
                                     f"not an option ({', '.join(options)})")
                if not math.isfinite(float(weight)):
                    raise ValueError(f"task '{task.id}': support of fact '{text[:60]}' for '{option}' is not finite")
                support[index[text], position[option]] = float(weight)
        shared = set(task.shared)
        self.task = task
        self.options = options
        self.k = len(options)
        self.index = index
        self.facts = facts
        self.words = [len(f.split()) for f in facts]
        self.shared = [f in shared for f in facts]
        self.support = support
        self.rows = support.tolist()
        self.spread = (support.max(axis=1) - support.min(axis=1)).tolist()
        own = []
        mask = np.zeros((task.n_agents, len(facts)), dtype=bool)
        for i in range(task.n_agents):
            ids = list(dict.fromkeys(index[f] for f in task.facts_of(i)))
            own.append(ids)
            mask[i, ids] = True
        self.own = own
        self.own_set = [set(ids) for ids in own]
        self.own_mask = mask
        self.own_scores = (mask @ support).tolist()
        self.key = zlib.crc32(task.id.encode("utf-8"))
        self._informative: list[bool] | None = None
        self._fact_keys: tuple[int, ...] | None = None

    @property
    def informative(self) -> list[bool]:
        """Per fact: whether its support is non-zero for some option (computed on first use)."""
        if self._informative is None:
            self._informative = (self.support != 0).any(axis=1).tolist()
        return self._informative

    @property
    def fact_keys(self) -> tuple[int, ...]:
        """Per fact: the CRC-32 of its text, a key that is the same in every process and every copy of the task
        (computed on first use)."""
        if self._fact_keys is None:
            self._fact_keys = tuple(zlib.crc32(f.encode("utf-8")) for f in self.facts)
        return self._fact_keys

    def stated(self, transcript: Transcript) -> list[int]:
        """Indices of the known facts stated on the transcript, in first-mention order."""
        index = self.index
        seen: dict[int, None] = {}
        for message in transcript.messages:
            for text in message.facts:
                j = index.get(text)
                if j is not None:
                    seen[j] = None
        return list(seen)

    def recent(self, transcript: Transcript) -> list[tuple[int, int]]:
        """``(fact index, age)`` of the known facts on the transcript, the most recently mentioned first.

        A fact's age is the number of messages after its latest mention (0: it is in the last message); facts
        of one message keep that message's order.
        """
        index = self.index
        seen: dict[int, int] = {}
        messages = transcript.messages
        last = len(messages) - 1
        for m in range(last, -1, -1):
            for text in messages[m].facts:
                j = index.get(text)
                if j is not None and j not in seen:
                    seen[j] = last - m
        return list(seen.items())


_CACHE: OrderedDict[int, CompiledTask] = OrderedDict()
_CACHE_LOCK = threading.Lock()


def compile_task(task: HiddenProfileTask) -> CompiledTask:
    """The task's precomputation, cached by object identity (the cache keeps the task alive, so an id is
    never reused while its entry exists). Tasks are treated as values: do not mutate one after use."""
    key = id(task)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit.task is task:
            _CACHE.move_to_end(key)
            return hit
    compiled = CompiledTask(task)
    with _CACHE_LOCK:
        _CACHE[key] = compiled
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return compiled


def option_scores(task: HiddenProfileTask, facts: list[str] | None = None) -> dict[str, float]:
    """Summed support per option over ``facts`` (default: every fact of the task).

    Raises:
        ValueError: the task has no support annotation.
    """
    compiled = compile_task(task)
    ids = {compiled.index[f] for f in (task.all_facts() if facts is None else facts) if f in compiled.index}
    totals = compiled.support[sorted(ids)].sum(axis=0) if ids else np.zeros(compiled.k)
    return dict(zip(compiled.options, totals.tolist(), strict=True))


def supported_answer(task: HiddenProfileTask) -> str:
    """The option with the most summed support over all facts (the first in option order on a tie): what a
    validator of an annotated task expects to be ``task.correct``."""
    scores = option_scores(task)
    return max(scores, key=lambda o: (scores[o], -task.options.index(o)))
