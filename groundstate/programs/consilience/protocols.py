"""The reference discussion protocols of the Consilience paper (§4.1), the final plurality vote (§3.1.5) and
the metrics (§4.2).

Protocols (any agents implementing :class:`~groundstate.records.DiscussionAgent`: LM or simulated):

- ``hidden-pre``: every agent votes from its own facts; no messages.
- ``hidden-post``: ``rounds`` rounds of fixed round-robin discussion (agents ``0, 1, ..., n-1`` each round, free
  turns, action ``None``); every speaker sees the whole transcript so far; then everyone votes. Discussion
  rounds are numbered from 1 (round 0 is the state before discussion).
- ``full-info``: every agent is given every fact (:func:`full_info_task`) and votes; no messages.

The final answer is :func:`~groundstate.programs.common.plurality` over the votes. Votes are independent, so
LM agents vote concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import plurality
from groundstate.records import Belief, DiscussionAgent, HiddenProfileTask, Transcript

PROTOCOLS: tuple[str, ...] = ("hidden-pre", "hidden-post", "full-info")


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
    """

    task_id: str
    protocol: str
    options: list[str]
    correct_answer: str
    answer: str
    votes: list[Belief]
    transcript: Transcript
    rounds: int

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
        ``words``, ``messages``, ``vote_accuracy``, ``protocol``."""
        return dspy.Prediction(answer=self.answer, correct=self.correct,
                               votes=[v.model_dump() for v in self.votes],
                               transcript=self.transcript.model_dump(), rounds=self.rounds, words=self.words,
                               messages=self.messages, vote_accuracy=self.vote_accuracy, protocol=self.protocol)


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol '{protocol}'; choose from {', '.join(PROTOCOLS)}")
    return protocol


def _each(fn: Callable[[Any], Any], agents: Sequence[Any], threads: int | None) -> list[Any]:
    """``fn`` over the agents: inline for simulated agents (or ``threads=1``), otherwise on threads."""
    if threads == 1 or all(getattr(a, "is_simulated", False) for a in agents):
        return [fn(a) for a in agents]
    return thread_map(fn, agents, max_workers=threads or len(agents))


def run_discussion(task: HiddenProfileTask, agents: Sequence[DiscussionAgent], protocol: str = "hidden-post",
                   rounds: int = 3, threads: int | None = None) -> DiscussionResult:
    """Run one discussion under a reference protocol (see the module docstring).

    Args:
        task: the hidden-profile task.
        agents: one agent per task agent, agent ``i`` at position ``i``.
        protocol: ``hidden-pre``, ``hidden-post`` or ``full-info``.
        rounds: round-robin rounds for ``hidden-post`` (ignored by the others).
        threads: concurrent final votes (default: one per agent; simulated agents always vote inline).

    Raises:
        ValueError: an unknown protocol, a bad round count, or agents that do not match the task.
    """
    check_protocol(protocol)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    agents = list(agents)
    if len(agents) != task.n_agents:
        raise ValueError(f"task '{task.id}' has {task.n_agents} agents but {len(agents)} were given")
    for position, agent in enumerate(agents):
        if agent.index != position:
            raise ValueError(f"the agent at position {position} has index {agent.index}; agents must be in order")
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


class HiddenProfileProtocol(dspy.Module):
    """A reference protocol as a program: ``forward(task, agents=None) -> dspy.Prediction``.

    Args:
        protocol: ``hidden-pre``, ``hidden-post`` or ``full-info``.
        rounds: round-robin rounds for ``hidden-post``.
        team: where agents come from when ``forward`` is given none: a callable ``task -> agents``, such as
            :class:`~groundstate.programs.consilience.agents.LMTeam` or
            :class:`~groundstate.programs.consilience.simulated.SimTeam`. An ``LMTeam`` is a submodule, so its
            predictors are this program's predictors.
        threads: concurrent final votes (see :func:`run_discussion`).

    The prediction is :meth:`DiscussionResult.to_prediction`.
    """

    def __init__(self, protocol: str = "hidden-post", rounds: int = 3, team: Any = None, threads: int | None = None):
        super().__init__()
        self.protocol = check_protocol(protocol)
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
            raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
        self.rounds = rounds
        self.team = team
        self.threads = threads

    def forward(self, task: HiddenProfileTask, agents: Sequence[DiscussionAgent] | None = None) -> dspy.Prediction:
        if agents is None:
            if self.team is None:
                raise ValueError("HiddenProfileProtocol needs agents: pass agents= or build it with a team")
            agents = self.team(task)
        return run_discussion(task, agents, self.protocol, self.rounds, self.threads).to_prediction()
