"""The reference discussion protocols of the Consilience paper (§4.1), the final plurality vote (§3.1.5) and
the metrics (§4.2), in two presets.

**groundstate's protocols** (any agents implementing :class:`~groundstate.records.DiscussionAgent`):

- ``hidden-pre``: every agent votes from its own facts; no messages.
- ``hidden-post``: ``rounds`` rounds (default 3) of fixed round-robin discussion (agents ``0, 1, ..., n-1`` each
  round, free turns, action ``None``); every speaker sees the whole transcript so far; then everyone votes.
  Discussion rounds are numbered from 1 (round 0 is the state before discussion).
- ``full-info``: every agent is given every fact (:func:`full_info_task`) and votes; no messages.

Their answer is :func:`~groundstate.programs.common.plurality` with the Consilience paper's confidence
tie-break.

**HiddenBench's protocol** (``hiddenbench-pre``, ``hiddenbench``, ``hiddenbench-full``), as its public simulation
script runs it, for the paper's "Hidden Pre, Hidden Post, and Full Info are reproduced from the baseline":
:mod:`groundstate.programs.consilience.hiddenbench` says step by step what it does and where it departs from the
script (:class:`~groundstate.programs.consilience.hiddenbench.HiddenBenchOptions`). In short: the clues are dealt
afresh to the agents every discussion, each agent casts a private initial vote with a rationale (Hidden-Pre;
``hiddenbench-pre`` stops there, ``hiddenbench`` reports them as ``initial_votes``), then :data:`HIDDENBENCH_ROUNDS`
(15) rounds in the fixed order ``0..n-1`` in which LM agents hold a multi-turn chat each, seeing the others'
latest messages; then a final vote, and plurality with HiddenBench's first-vote tie rule. ``hiddenbench-full``
gives every agent every clue and, as the Consilience paper's Full-Info, does not discuss (HiddenBench's script
does: ``full_discussion``).

Votes are independent, so LM agents vote concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import on_worker_thread, plurality
from groundstate.programs.consilience.hiddenbench import (
    HIDDENBENCH_ROUNDS,
    HiddenBenchChat,
    HiddenBenchOptions,
    discuss,
)
from groundstate.records import Belief, DiscussionAgent, HiddenProfileTask, Transcript

PROTOCOLS: tuple[str, ...] = ("hidden-pre", "hidden-post", "full-info", "hiddenbench-pre", "hiddenbench",
                              "hiddenbench-full")
HIDDENBENCH_PROTOCOLS: tuple[str, ...] = ("hiddenbench-pre", "hiddenbench", "hiddenbench-full")
DEFAULT_ROUNDS: dict[str, int] = {"hidden-post": 3, "hiddenbench": HIDDENBENCH_ROUNDS}
TABLE_NAMES: dict[str, str] = {"hidden-pre": "Hidden-Pre", "hidden-post": "Hidden-Post", "full-info": "Full-Info",
                               "hiddenbench-pre": "Hidden-Pre", "hiddenbench": "Hidden-Post",
                               "hiddenbench-full": "Full-Info"}
"""The paper's name for each protocol."""


def discusses(protocol: str, hiddenbench: HiddenBenchOptions | None = None) -> bool:
    """Whether ``protocol`` has discussion rounds (``hiddenbench-full`` only with ``full_discussion``)."""
    if protocol == "hiddenbench-full":
        return bool(hiddenbench and hiddenbench.full_discussion)
    return protocol in DEFAULT_ROUNDS


def default_rounds(protocol: str, hiddenbench: HiddenBenchOptions | None = None) -> int:
    """The rounds ``protocol`` plays by default (0 without discussion)."""
    if protocol == "hiddenbench-full" and discusses(protocol, hiddenbench):
        return HIDDENBENCH_ROUNDS
    return DEFAULT_ROUNDS.get(protocol, 0)


def full_info_task(task: HiddenProfileTask) -> HiddenProfileTask:
    """A copy of ``task`` in which every agent's private facts are all the private facts (each once, in order)."""
    pooled = list(dict.fromkeys(f for facts in task.private for f in facts))
    return task.model_copy(update={"private": [list(pooled) for _ in task.private]})


@dataclass
class DiscussionResult:
    """What one discussion produced.

    Attributes:
        task_id: the task's id.
        protocol: the protocol that ran.
        options: the task's options.
        correct_answer: the task's correct option.
        answer: the group's answer (plurality with confidence tie-break).
        votes: each agent's final belief (vote and confidence), in agent order.
        transcript: the public transcript (empty for ``hidden-pre`` and ``full-info``).
        rounds: discussion rounds played (0 without discussion).
        initial_votes: the votes cast before any message (HiddenBench's protocols; ``None`` otherwise).
        tie: the tie rule of ``answer``.
        hiddenbench: HiddenBench's protocols: ``holders`` (agent ``i`` held the private facts of task agent
            ``holders[i]``), ``special`` (the special agents), ``initial_rationales`` and ``rationales`` (LM agents
            in the chat; ``None`` for others); ``None`` for groundstate's protocols.
    """

    task_id: str
    protocol: str
    options: list[str]
    correct_answer: str
    answer: str
    votes: list[Belief]
    transcript: Transcript
    rounds: int
    initial_votes: list[Belief] | None = None
    tie: str = "confidence"
    hiddenbench: dict[str, Any] | None = None

    @property
    def initial_answer(self) -> str | None:
        """The plurality of the initial votes (Hidden-Pre of a HiddenBench discussion), under the same tie rule."""
        return None if self.initial_votes is None else plurality(self.initial_votes, self.options, tie=self.tie)

    @property
    def correct(self) -> bool:
        return self.answer == self.correct_answer

    @property
    def task_accuracy(self) -> float:
        return float(self.correct)

    @property
    def vote_accuracy(self) -> float:
        """The share of agents whose final vote is the correct option."""
        return sum(v.vote == self.correct_answer for v in self.votes) / len(self.votes)

    @property
    def words(self) -> int:
        return self.transcript.words

    @property
    def messages(self) -> int:
        return len(self.transcript.messages)

    def to_prediction(self) -> dspy.Prediction:
        """The program output: ``answer``, ``correct``, ``votes`` and ``transcript`` (as JSON data), ``rounds``,
        ``words``, ``messages``, ``vote_accuracy``, ``protocol``, for HiddenBench's discussion
        ``initial_votes`` and ``initial_answer`` (both ``None`` otherwise), and for HiddenBench's protocols
        ``hiddenbench`` (see the attribute)."""
        initial = None if self.initial_votes is None else [v.model_dump() for v in self.initial_votes]
        extra = {} if self.hiddenbench is None else {"hiddenbench": self.hiddenbench}
        return dspy.Prediction(answer=self.answer, correct=self.correct,
                               votes=[v.model_dump() for v in self.votes],
                               transcript=self.transcript.model_dump(), rounds=self.rounds, words=self.words,
                               messages=self.messages, vote_accuracy=self.vote_accuracy, protocol=self.protocol,
                               initial_votes=initial, initial_answer=self.initial_answer, **extra)


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol '{protocol}'; choose from {', '.join(PROTOCOLS)}")
    return protocol


def _each(fn: Callable[[Any], Any], agents: Sequence[Any], threads: int | None) -> list[Any]:
    """``fn`` over the agents: inline for simulated agents (or ``threads=1``), otherwise on threads."""
    if threads == 1 or all(getattr(a, "is_simulated", False) for a in agents):
        return [fn(a) for a in agents]
    return thread_map(fn, agents, max_workers=threads or len(agents))


def _check_rounds(protocol: str, rounds: int | None, hiddenbench: HiddenBenchOptions | None = None) -> int:
    if rounds is None:
        return default_rounds(protocol, hiddenbench)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    if protocol in ("hiddenbench", "hiddenbench-full") and discusses(protocol, hiddenbench) and rounds < 1:
        raise ValueError("HiddenBench's discussion needs at least one round")
    return rounds


def run_discussion(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], protocol: str = "hidden-post",
                   rounds: int | None = None, threads: int | None = None, seed: int = 0,
                   memory: bool = True, hiddenbench: HiddenBenchOptions | None = None,
                   chat: HiddenBenchChat | None = None) -> DiscussionResult:
    """Run one discussion under a reference protocol (see the module docstring).

    Args:
        task: the hidden-profile task.
        agents: one agent per task agent, agent ``i`` at position ``i``.
        protocol: one of :data:`PROTOCOLS`.
        rounds: discussion rounds for ``hidden-post`` and ``hiddenbench`` (and ``hiddenbench-full`` with
            ``full_discussion``); default :func:`default_rounds`; ignored by the others.
        threads: concurrent votes (default: one per agent; simulated agents always vote inline).
        seed: HiddenBench's deal of the clues, its special agents and each agent's order of its facts.
        memory: HiddenBench's protocols, agents without a chat: keep what they were shown (``False`` replaces
            ``hiddenbench.memory``).
        hiddenbench: HiddenBench's protocols: :class:`~groundstate.programs.consilience.hiddenbench.
            HiddenBenchOptions` (default: its simulation script's behaviour, Full-Info as the paper's).
        chat: HiddenBench's protocols: the LM agents' predictors (default: fresh ones).

    Raises:
        ValueError: an unknown protocol, a bad round count, or agents that do not match the task.
    """
    check_protocol(protocol)
    if not memory:
        hiddenbench = replace(hiddenbench or HiddenBenchOptions(), memory=False)
    rounds = _check_rounds(protocol, rounds, hiddenbench)
    agents = list(agents)
    if len(agents) != task.n_agents:
        raise ValueError(f"task '{task.id}' has {task.n_agents} agents but {len(agents)} were given")
    for position, agent in enumerate(agents):
        if agent.index != position:
            raise ValueError(f"the agent at position {position} has index {agent.index}; agents must be in order")
    if protocol in HIDDENBENCH_PROTOCOLS:
        return _hiddenbench(task, agents, protocol, rounds, threads, seed, hiddenbench, chat)
    transcript = Transcript.model_construct(messages=[])
    played = 0
    view = full_info_task(task) if protocol == "full-info" else task
    if protocol == "hidden-post":
        for round_ in range(1, rounds + 1):
            for agent in agents:
                transcript = transcript.with_message(agent.speak(task, transcript, None, round_))
        played = rounds
    votes = _each(lambda agent: agent.vote(view, transcript), agents, threads)
    return DiscussionResult(task_id=task.id, protocol=protocol, options=list(task.options),
                            correct_answer=task.correct, answer=plurality(votes, task.options), votes=votes,
                            transcript=transcript, rounds=played)


def _hiddenbench(task: HiddenProfileTask, agents: list[Any], protocol: str, rounds: int, threads: int | None,
                 seed: int, options: HiddenBenchOptions | None, chat: HiddenBenchChat | None) -> DiscussionResult:
    """HiddenBench's protocol (:func:`~groundstate.programs.consilience.hiddenbench.discuss`) as a result."""
    options = options or HiddenBenchOptions()
    played = rounds if protocol == "hiddenbench" or discusses(protocol, options) else 0
    outcome = discuss(task, agents, played, full_info=full_info_task if protocol == "hiddenbench-full" else None,
                      threads=threads, seed=seed, options=options, chat=chat)
    votes = outcome.votes if outcome.votes is not None else outcome.initial
    about = {"holders": outcome.holders, "special": outcome.special, "initial_rationales": outcome.initial_rationales,
             "rationales": outcome.rationales}
    return DiscussionResult(task_id=task.id, protocol=protocol, options=list(task.options), correct_answer=task.correct,
                            answer=plurality(votes, task.options, tie="first-vote"), votes=votes,
                            transcript=outcome.transcript, rounds=outcome.rounds, initial_votes=outcome.initial,
                            tie="first-vote", hiddenbench=about)


class HiddenProfileProtocol(dspy.Module):
    """A reference protocol as a program: ``forward(task, agents=None) -> dspy.Prediction``.

    Args:
        protocol: one of :data:`PROTOCOLS`.
        rounds: discussion rounds for ``hidden-post`` and ``hiddenbench`` (default :func:`default_rounds`).
        team: where agents come from when ``forward`` is given none: a callable ``task -> agents``, such as
            :class:`~groundstate.programs.consilience.agents.LMTeam` or
            :class:`~groundstate.programs.consilience.simulated.SimTeam`. An ``LMTeam`` is a submodule, so its
            predictors are this program's predictors.
        threads: concurrent votes (see :func:`run_discussion`).
        seed: HiddenBench's deal of the clues and order of the facts (see :func:`run_discussion`).
        memory: HiddenBench's protocols: agents without a chat keep what they were shown (see :func:`run_discussion`).
        hiddenbench: HiddenBench's protocols: :class:`~groundstate.programs.consilience.hiddenbench.HiddenBenchOptions`.

    HiddenBench's protocols (unless ``flat``) hold the LM agents' chat predictors (``chat``, a
    :class:`~groundstate.programs.consilience.hiddenbench.HiddenBenchChat`), so they are this program's predictors
    too. The prediction is :meth:`DiscussionResult.to_prediction`.
    """

    def __init__(self, protocol: str = "hidden-post", rounds: int | None = None, team: Any = None,
                 threads: int | None = None, seed: int = 0, memory: bool = True,
                 hiddenbench: HiddenBenchOptions | None = None):
        super().__init__()
        self.protocol = check_protocol(protocol)
        self.hiddenbench = hiddenbench if self.protocol in HIDDENBENCH_PROTOCOLS else None
        self.rounds = _check_rounds(self.protocol, rounds, self.hiddenbench) if discusses(
            self.protocol, self.hiddenbench) else 0
        self.team = team
        self.threads = threads
        self.seed = seed
        self.memory = memory
        if self.protocol in HIDDENBENCH_PROTOCOLS and not (hiddenbench and hiddenbench.flat):
            self.chat = HiddenBenchChat()

    def forward(self, task: HiddenProfileTask, agents: Sequence[DiscussionAgent] | None = None) -> dspy.Prediction:
        if agents is None:
            if self.team is None:
                raise ValueError("HiddenProfileProtocol needs agents: pass agents= or build it with a team")
            agents = self.team(task)
        return run_discussion(task, agents, self.protocol, self.rounds, self.threads, self.seed, self.memory,
                              self.hiddenbench, getattr(self, "chat", None)).to_prediction()

    async def aforward(self, task: HiddenProfileTask, agents: Sequence[DiscussionAgent] | None = None
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``, same result, on one worker thread
        (:func:`~groundstate.programs.common.on_worker_thread`, which carries the DSPy context)."""
        return await on_worker_thread(type(self).forward, self, task, agents)
