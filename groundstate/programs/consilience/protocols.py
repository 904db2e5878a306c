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

- *Facts*: each agent gets the shared facts and its private fact(s) in one list, shuffled per agent and
  numbered, with a note that the order means nothing (LM agents: :meth:`LMAgent.with_presentation
  <groundstate.programs.consilience.agents.LMAgent.with_presentation>`); it is not told which facts the
  others share. Simulated agents are unaffected (they hold the same facts either way).
- *Initial vote*: before any message every agent votes privately; these votes are Hidden-Pre
  (``hiddenbench-pre`` stops there; ``hiddenbench`` reports them as ``initial_votes``). LM agents are told their
  own initial vote for the rest of the discussion.
- *Rounds*: :data:`HIDDENBENCH_ROUNDS` (15) by default; every agent speaks once per round in the fixed order
  ``0..n-1``.
- *Visibility*: in round 1 a speaker is shown the messages of this round so far; from round 2 on, the latest
  message of every other agent (starting with the next agent in order). What an agent was shown stays with it
  (HiddenBench's agents keep their chat history), so an agent's view is every message it has been shown plus
  its own, in the order it saw them. Because every agent speaks once per round in a fixed order, that view
  turns out to hold every message spoken so far, in the order spoken: what differs from groundstate's
  ``hidden-post`` is the presentation of each turn (only the latest messages are new in the prompt), not
  what an agent can know. ``memory=False`` drops the history: an agent then sees only what its current turn
  shows (the others' latest messages), a stricter reading offered for comparison.
- *Final vote*: after the last round each agent is shown the last round's messages and votes.
- *Tie rule*: plurality, a tie going to the tied option whose first vote came earliest in agent order
  (``tie="first-vote"``; HiddenBench has no confidence tie-break).
- ``hiddenbench-full``: every agent holds every fact (shuffled likewise) and casts the initial vote only: the
  Consilience paper's Full-Info ("agents receive all evidence but do not discuss").

The number of rounds of HiddenBench's published configuration is not in its public repository (the config
file is not published); 15 is the figure its paper's evaluation reports and its public reimplementations use.
Pass ``rounds`` to change it.

Votes are independent, so LM agents vote concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import plurality
from groundstate.records import Belief, DiscussionAgent, HiddenProfileTask, Message, Transcript

PROTOCOLS: tuple[str, ...] = ("hidden-pre", "hidden-post", "full-info", "hiddenbench-pre", "hiddenbench",
                              "hiddenbench-full")
HIDDENBENCH_PROTOCOLS: tuple[str, ...] = ("hiddenbench-pre", "hiddenbench", "hiddenbench-full")
DEFAULT_ROUNDS: dict[str, int] = {"hidden-post": 3, "hiddenbench": 15}
HIDDENBENCH_ROUNDS = DEFAULT_ROUNDS["hiddenbench"]
"""HiddenBench's discussion rounds (see the module docstring)."""
TABLE_NAMES: dict[str, str] = {"hidden-pre": "Hidden-Pre", "hidden-post": "Hidden-Post", "full-info": "Full-Info",
                               "hiddenbench-pre": "Hidden-Pre", "hiddenbench": "Hidden-Post",
                               "hiddenbench-full": "Full-Info"}
"""The paper's name for each protocol."""


def discusses(protocol: str) -> bool:
    """Whether ``protocol`` has discussion rounds."""
    return protocol in DEFAULT_ROUNDS


def default_rounds(protocol: str) -> int:
    """The rounds ``protocol`` plays by default (0 without discussion)."""
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
        ``words``, ``messages``, ``vote_accuracy``, ``protocol``, and for HiddenBench's discussion
        ``initial_votes`` and ``initial_answer`` (both ``None`` otherwise)."""
        initial = None if self.initial_votes is None else [v.model_dump() for v in self.initial_votes]
        return dspy.Prediction(answer=self.answer, correct=self.correct,
                               votes=[v.model_dump() for v in self.votes],
                               transcript=self.transcript.model_dump(), rounds=self.rounds, words=self.words,
                               messages=self.messages, vote_accuracy=self.vote_accuracy, protocol=self.protocol,
                               initial_votes=initial, initial_answer=self.initial_answer)


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol '{protocol}'; choose from {', '.join(PROTOCOLS)}")
    return protocol


def _each(fn: Callable[[Any], Any], agents: Sequence[Any], threads: int | None) -> list[Any]:
    """``fn`` over the agents: inline for simulated agents (or ``threads=1``), otherwise on threads."""
    if threads == 1 or all(getattr(a, "is_simulated", False) for a in agents):
        return [fn(a) for a in agents]
    return thread_map(fn, agents, max_workers=threads or len(agents))


def _check_rounds(protocol: str, rounds: int | None) -> int:
    if rounds is None:
        return default_rounds(protocol)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    if protocol == "hiddenbench" and rounds < 1:
        raise ValueError("HiddenBench's discussion needs at least one round")
    return rounds


def run_discussion(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], protocol: str = "hidden-post",
                   rounds: int | None = None, threads: int | None = None, seed: int = 0,
                   memory: bool = True) -> DiscussionResult:
    """Run one discussion under a reference protocol (see the module docstring).

    Args:
        task: the hidden-profile task.
        agents: one agent per task agent, agent ``i`` at position ``i``.
        protocol: one of :data:`PROTOCOLS`.
        rounds: discussion rounds for ``hidden-post`` and ``hiddenbench`` (default :func:`default_rounds`;
            ignored by the others).
        threads: concurrent votes (default: one per agent; simulated agents always vote inline).
        seed: HiddenBench's per-agent shuffle of the facts (LM agents).
        memory: HiddenBench's protocols: agents keep what they were shown (see the module docstring).

    Raises:
        ValueError: an unknown protocol, a bad round count, or agents that do not match the task.
    """
    check_protocol(protocol)
    rounds = _check_rounds(protocol, rounds)
    agents = list(agents)
    if len(agents) != task.n_agents:
        raise ValueError(f"task '{task.id}' has {task.n_agents} agents but {len(agents)} were given")
    for position, agent in enumerate(agents):
        if agent.index != position:
            raise ValueError(f"the agent at position {position} has index {agent.index}; agents must be in order")
    if protocol in HIDDENBENCH_PROTOCOLS:
        return _hiddenbench(task, agents, protocol, rounds, threads, seed, memory)
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


def _presented(agent: Any, seed: int, note: str | None = None) -> Any:
    """``agent`` showing its facts as HiddenBench does (LM agents); simulated agents are returned as they are."""
    present = getattr(agent, "with_presentation", None)
    return agent if present is None else present("shuffled", seed=seed, note=note)


def _hiddenbench(task: HiddenProfileTask, agents: list[Any], protocol: str, rounds: int, threads: int | None,
                 seed: int, memory: bool = True) -> DiscussionResult:
    """HiddenBench's protocol (see the module docstring)."""
    view_task = full_info_task(task) if protocol == "hiddenbench-full" else task
    shown = [_presented(agent, seed) for agent in agents]
    empty = Transcript.model_construct(messages=[])
    initial = _each(lambda agent: agent.vote(view_task, empty), shown, threads)
    base = {"task_id": task.id, "protocol": protocol, "options": list(task.options), "correct_answer": task.correct,
            "tie": "first-vote"}
    if protocol != "hiddenbench":
        return DiscussionResult(**base, answer=plurality(initial, task.options, tie="first-vote"), votes=initial,
                                transcript=empty, rounds=0, initial_votes=initial)
    speakers = [_presented(agent, seed, note=f"Before the discussion you voted for {belief.vote}.")
                for agent, belief in zip(agents, initial, strict=True)]
    n = len(agents)
    public: list[Message] = []
    views: list[list[int]] = [[] for _ in range(n)]  # per agent: positions in ``public`` it has seen, in order
    latest: list[int | None] = [None] * n

    def show(i: int, positions: Sequence[int | None]) -> None:
        if not memory:
            views[i] = []
        seen = set(views[i])
        for position in positions:
            if position is not None and position not in seen:
                views[i].append(position)
                seen.add(position)

    def view_of(i: int) -> Transcript:
        return Transcript.model_construct(messages=[public[p] for p in views[i]])

    for round_ in range(1, rounds + 1):
        start = len(public)
        for i, agent in enumerate(speakers):
            if round_ == 1:
                show(i, range(start, len(public)))
            else:
                show(i, [latest[(i + k) % n] for k in range(1, n)])
            message = agent.speak(task, view_of(i), None, round_)
            public.append(message)
            latest[i] = len(public) - 1
            if memory:
                views[i].append(latest[i])
    last_round = list(range(len(public) - n, len(public)))
    for i in range(n):
        show(i, last_round)
    votes = _each(lambda agent: agent.vote(task, view_of(agent.index)), speakers, threads)
    return DiscussionResult(**base, answer=plurality(votes, task.options, tie="first-vote"), votes=votes,
                            transcript=Transcript.model_construct(messages=public), rounds=rounds,
                            initial_votes=initial)


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
        seed: HiddenBench's shuffle of the facts (see :func:`run_discussion`).
        memory: HiddenBench's protocols: agents keep what they were shown (see :func:`run_discussion`).

    The prediction is :meth:`DiscussionResult.to_prediction`.
    """

    def __init__(self, protocol: str = "hidden-post", rounds: int | None = None, team: Any = None,
                 threads: int | None = None, seed: int = 0, memory: bool = True):
        super().__init__()
        self.protocol = check_protocol(protocol)
        self.rounds = _check_rounds(self.protocol, rounds) if discusses(self.protocol) else 0
        self.team = team
        self.threads = threads
        self.seed = seed
        self.memory = memory

    def forward(self, task: HiddenProfileTask, agents: Sequence[DiscussionAgent] | None = None) -> dspy.Prediction:
        if agents is None:
            if self.team is None:
                raise ValueError("HiddenProfileProtocol needs agents: pass agents= or build it with a team")
            agents = self.team(task)
        return run_discussion(task, agents, self.protocol, self.rounds, self.threads, self.seed,
                              self.memory).to_prediction()

    async def aforward(self, task: HiddenProfileTask, agents: Sequence[DiscussionAgent] | None = None
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``, same result, on one worker thread
        (``asyncio.to_thread``, which carries the DSPy context)."""
        return await asyncio.to_thread(self.forward, task, agents)
