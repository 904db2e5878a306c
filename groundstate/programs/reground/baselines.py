"""The collaboration baselines ReGround is compared against (paper §5.1, §6, appendix D.3-D.4).

Every baseline is a ``dspy.Module`` whose ``forward(agents, shared_context, question, options)`` returns
:func:`~groundstate.programs.common.offquery_prediction`: ``misleading_agent`` (T1), ``state`` (T2),
``answer`` (T3), empty ``kept_facts``/``removed_facts``, and a JSON-able ``trace``::

    {"program": "standard", "config": {...}, "turns": [
        {"step": "assess", "speaker": 2, "round": 1, "saw": [0, 1, 3], "saw_shared_context": true,
         "output": {"assessment": "...", "answer": "B", "suspected_misleading": 4}},
        ...,
        {"step": "decide", "speaker": "decider", "round": null, "saw": [], "input": "state", "output": {...}}]}

``saw`` lists the agents whose messages the speaker was shown. Agents never see each other's private
evidence; they see messages. Every program decides with ``ChooseOption`` from its final state only.

Choices made where the paper is silent (each class docstring repeats its own):

- "R rounds of exchange" = one independent opening round (round 0, no peers) plus ``rounds`` exchange rounds.
  In exchange rounds an agent sees its neighbours' latest messages, never its own.
- ``chain``: in every exchange round agents speak in index order and agent ``i`` sees agent ``i - 1``'s
  message from the same round; agent 0 (the head) sees no one. ``tree``: a binary tree in index order
  (agent 0 the root); an agent sees its parent and children from the previous round, all speaking at once.
- The summarizer (T1) reads the whole transcript; the updater (T2) reads the shared context, every agent's
  initial private information and the final-round opinions. They are independent stages (as in the paper)
  and run concurrently, so the state is not conditioned on the summarizer's verdict.
- ``private-first`` ordering withholds the shared context from every discussion turn; it reaches only the
  updater. ``shared-first`` shows it to every turn.
- Ties in votes go to the tied value whose first vote came from the lowest-indexed agent.

Model-produced text that a later prompt quotes (assessments, states, the instructor's questions and the
agents' replies) is escaped with :func:`~groundstate.programs.common.as_data`, exactly like evidence.

Every baseline also has ``aforward`` for ``await program.acall(...)``: the same prompts and prediction, each LM call
awaited through the predictor's ``acall`` and the concurrent ones gathered (``asyncio.gather``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import plurality, saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, check_choice, check_count
from groundstate.programs.reground.centralized import Instructor, Manager
from groundstate.programs.reground.oracle import Oracle
from groundstate.programs.reground.standard import Confidence, StandardCollaboration
from groundstate.programs.reground.turns import (
    ORDERINGS,
    Case,
    Opinion,
    render_messages,
    speaking_order,
    turn,
)
from groundstate.signatures.collaboration import (
    ChooseMode,
    NameMisleadingAgent,
    ReflectOnAssessment,
    ShareAssessment,
    UpdateSharedState,
)
from groundstate.signatures.resolution import ChooseOption


@saveable
class Voting(CollaborationBaseline):
    """Independent agents, majority decision (appendix D.4).

    Each agent, on its own and concurrently with the others, (1) assesses the case from its private evidence
    and the shared context (seeing no peer), (2) writes its own information state from the shared context, its
    evidence and its assessment, and (3) decides from that state. The answer is the plurality of the decisions;
    a tie goes to the tied option first voted for by the lowest-indexed agent. ``state`` is the state of the
    lowest-indexed agent that voted for the winner; ``misleading_agent`` is the plurality of the agents'
    suspicions, where "no one" is a vote too (same tie rule).
    """

    program_name = "voting"

    def __init__(self):
        super().__init__()
        self.assess = dspy.Predict(ShareAssessment)
        self.update = dspy.Predict(UpdateSharedState)
        self.decide = dspy.Predict(ChooseOption)

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        ballots = thread_map(partial(self.ballot, case), range(case.n))
        return self.tally(ballots)

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``: the ballots gathered, each awaiting its calls."""
        case = Case.build(agents, shared_context, question, options)
        return self.tally(list(await asyncio.gather(*(self.aballot(case, i) for i in range(case.n)))))

    def ballot(self, case: Case, agent: int) -> dict[str, Any]:
        """One agent's independent assessment, state and decision, with its trace entries."""
        message = self.speak(case, agent, 0, [], "shared-first")
        state = str(self.update(**self.state_args(case, agent, message)).state or "").strip()
        return self.counted(case, agent, message, state, self.decide(**self.decide_args(case, state)))

    async def aballot(self, case: Case, agent: int) -> dict[str, Any]:
        """:meth:`ballot`, awaiting each call."""
        message = await self.aspeak(case, agent, 0, [], "shared-first")
        state = str((await self.update.acall(**self.state_args(case, agent, message))).state or "").strip()
        return self.counted(case, agent, message, state, await self.decide.acall(**self.decide_args(case, state)))

    @staticmethod
    def state_args(case: Case, agent: int, message: Opinion) -> dict[str, str]:
        """The inputs of an agent's own state: the shared context, its evidence and its assessment."""
        return {"shared_context": case.shared_context or "(no shared context)",
                "agent_information": case.sources([agent]), "discussion": render_messages([message])}

    def counted(self, case: Case, agent: int, message: Opinion, state: str, decision: Any) -> dict[str, Any]:
        """An agent's ballot from its assessment, state and decision, with its trace entries."""
        person = case.agents[agent]
        turns = [self.assess_turn(message, [], "shared-first"),
                 turn("update_state", agent, 0, [agent], {"state": state}, saw_shared_context=True),
                 turn("decide", agent, 0, [], {"answer": decision.answer, "reason": decision.reason}, input="state")]
        return {"agent": agent, "name": person.name, "answer": decision.answer, "suspect": message.suspect,
                "state": state, "turns": turns}

    def tally(self, ballots: list[dict[str, Any]]) -> dspy.Prediction:
        votes = [b["answer"] for b in ballots]
        answer = plurality(votes)
        state = next((b["state"] for b in ballots if b["answer"] == answer), "")
        misleading = plurality([b["suspect"] for b in ballots])
        turns = [t for b in ballots for t in b["turns"]]
        counts = Counter(v for v in votes if v is not None)
        turns.append(turn("tally", "tally", None, [b["agent"] for b in ballots],
                          {"votes": {str(b["agent"]): b["answer"] for b in ballots}, "counts": dict(counts),
                           "answer": answer, "misleading_votes": {str(b["agent"]): b["suspect"] for b in ballots},
                           "misleading_agent": misleading}))
        return self.prediction(misleading, state, answer, turns)


@saveable
class Robin(CollaborationBaseline):
    """Sequential discussion in a random speaking order (appendix D.4).

    The order is a permutation drawn from ``seed`` and a hash of the agents' names and evidence, so the same
    program on the same instance always uses the same order. Each turn sees every earlier turn's message (in
    later rounds that includes the speaker's own earlier messages). Afterwards the summarizer, updater and
    decision run as in :class:`StandardCollaboration`, with each agent's latest message as its opinion.

    Args:
        seed: the order's seed.
        rounds: passes through the (same) order.
        ordering: ``shared-first`` or ``private-first`` (see :class:`StandardCollaboration`).
    """

    program_name = "robin"

    def __init__(self, seed: int = 0, rounds: int = 1, ordering: str = "shared-first"):
        super().__init__()
        self.seed = check_count("seed", seed, 0)
        self.rounds = check_count("rounds", rounds, 1)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.assess = dspy.Predict(ShareAssessment)
        self.summarize = dspy.Predict(NameMisleadingAgent)
        self.update = dspy.Predict(UpdateSharedState)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed, "rounds": self.rounds, "ordering": self.ordering}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        order = speaking_order(case.agents, self.seed)
        transcript: list[Opinion] = []
        for r, agent in self.turn_order(order):
            transcript.append(self.speak(case, agent, r, list(transcript), self.ordering, turns))
        return self.conclude(case, turns, **self.closing(transcript, order))

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)`` (the turns are sequential, each awaited)."""
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        order = speaking_order(case.agents, self.seed)
        transcript: list[Opinion] = []
        for r, agent in self.turn_order(order):
            transcript.append(await self.aspeak(case, agent, r, list(transcript), self.ordering, turns))
        return await self.aconclude(case, turns, **self.closing(transcript, order))

    def turn_order(self, order: list[int]) -> list[tuple[int, int]]:
        """``(round, agent)`` of every turn, in speaking order."""
        return [(r, agent) for r in range(self.rounds) for agent in order]

    @staticmethod
    def closing(transcript: list[Opinion], order: list[int]) -> dict[str, Any]:
        """The closing stages' inputs: the whole transcript, and each agent's latest message as its opinion."""
        latest = {m.agent: m for m in transcript}
        return {"discussion": render_messages(transcript),
                "opinions": render_messages([latest[i] for i in sorted(latest)]), "speakers": order, "order": order}


@saveable
class SelfReflect(CollaborationBaseline):
    """Agents choose, each round, between reflection and debate (appendix D.4).

    Round 0 is an independent assessment. In each later round every agent (concurrently) first chooses a mode
    from its evidence, its previous assessment and the peers' previous messages (it needs the peers' messages
    to judge whether a debate is worth having). ``reflect``: it re-examines its evidence and the shared context
    seeing only its own previous assessment. ``debate``: it writes a new assessment seeing all peers'
    previous-round messages (as in all-to-all standard collaboration). The choice is recorded in the trace.
    The closing stages are those of :class:`StandardCollaboration`.

    Args:
        rounds: rounds after the opening round.
        ordering: ``shared-first`` or ``private-first`` (see :class:`StandardCollaboration`).
    """

    program_name = "self-reflect"

    def __init__(self, rounds: int = 2, ordering: str = "shared-first"):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 0)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.assess = dspy.Predict(ShareAssessment)
        self.choose_mode = dspy.Predict(ChooseMode)
        self.reflect = dspy.Predict(ReflectOnAssessment)
        self.summarize = dspy.Predict(NameMisleadingAgent)
        self.update = dspy.Predict(UpdateSharedState)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "ordering": self.ordering}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        rounds = [self.opening_round(case, self.ordering)]
        turns.extend(self.assess_turn(m, [], self.ordering) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            rounds.append(self.next_round(turns, thread_map(partial(self.next_turn, case, r, rounds[-1]),
                                                            range(case.n))))
        return self.conclude(case, turns, **self.closing(case, rounds))

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``: each round's agents gathered, each awaiting its calls."""
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        rounds = [await self.aopening_round(case, self.ordering)]
        turns.extend(self.assess_turn(m, [], self.ordering) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            results = await asyncio.gather(*(self.anext_turn(case, r, rounds[-1], i) for i in range(case.n)))
            rounds.append(self.next_round(turns, list(results)))
        return await self.aconclude(case, turns, **self.closing(case, rounds))

    def next_turn(self, case: Case, round_: int, previous: list[Opinion], agent: int
                  ) -> tuple[Opinion, list[dict]]:
        """One agent's round: choose a mode, then reflect alone or debate with the peers' messages."""
        mode, entries = self.chosen(round_, previous, agent, self.choose_mode(**self.mode_args(case, previous, agent)))
        if mode == "reflect":
            prediction = self.reflect(**self.reflect_args(case, previous, agent))
        else:
            prediction = self.assess(**self.speak_args(case, agent, self.peers(previous, agent), self.ordering))
        return self.turned(case, round_, previous, agent, mode, prediction, entries)

    async def anext_turn(self, case: Case, round_: int, previous: list[Opinion], agent: int
                         ) -> tuple[Opinion, list[dict]]:
        """:meth:`next_turn`, awaiting each call."""
        choice = await self.choose_mode.acall(**self.mode_args(case, previous, agent))
        mode, entries = self.chosen(round_, previous, agent, choice)
        if mode == "reflect":
            prediction = await self.reflect.acall(**self.reflect_args(case, previous, agent))
        else:
            prediction = await self.assess.acall(**self.speak_args(case, agent, self.peers(previous, agent),
                                                                   self.ordering))
        return self.turned(case, round_, previous, agent, mode, prediction, entries)

    # -- the steps both paths share ----------------------------------------------------------------------
    @staticmethod
    def peers(previous: list[Opinion], agent: int) -> list[Opinion]:
        return [m for m in previous if m.agent != agent]

    def mode_args(self, case: Case, previous: list[Opinion], agent: int) -> dict[str, str]:
        person = case.agents[agent]
        return {"agent": person.name, "private_evidence": person.evidence,
                "previous_assessment": previous[agent].render(),
                "peer_messages": render_messages(self.peers(previous, agent))}

    def chosen(self, round_: int, previous: list[Opinion], agent: int, choice: Any) -> tuple[str, list[dict]]:
        """The mode (``debate`` unless the agent chose ``reflect``) and its trace entry."""
        mode = choice.mode if choice.mode in ("reflect", "debate") else "debate"
        return mode, [turn("choose_mode", agent, round_, [p.agent for p in self.peers(previous, agent)],
                           {"mode": mode})]

    def reflect_args(self, case: Case, previous: list[Opinion], agent: int) -> dict[str, str]:
        person = case.agents[agent]
        return {"agent": person.name, "team": case.team, "private_evidence": person.evidence,
                "shared_context": case.context_for_agents(self.ordering), "question": case.question,
                "options": case.options, "previous_assessment": previous[agent].render()}

    def turned(self, case: Case, round_: int, previous: list[Opinion], agent: int, mode: str, prediction: Any,
               entries: list[dict]) -> tuple[Opinion, list[dict]]:
        """The agent's message of the round, with its trace entries."""
        message = Opinion.from_prediction(case, agent, round_, prediction)
        seen = [previous[agent]] if mode == "reflect" else self.peers(previous, agent)
        entries.append(self.assess_turn(message, seen, self.ordering, step=mode, mode=mode))
        return message, entries

    @staticmethod
    def next_round(turns: list[dict], results: list[tuple[Opinion, list[dict]]]) -> list[Opinion]:
        """A round's messages from the agents' turns, whose trace entries go into ``turns``."""
        turns.extend(entry for _, entries in results for entry in entries)
        return [message for message, _ in results]

    @staticmethod
    def closing(case: Case, rounds: list[list[Opinion]]) -> dict[str, Any]:
        return {"discussion": render_messages([m for r in rounds for m in r]), "opinions": render_messages(rounds[-1]),
                "speakers": range(case.n)}


BASELINES: dict[str, type[dspy.Module]] = {
    "oracle": Oracle,
    "standard": StandardCollaboration,
    "voting": Voting,
    "robin": Robin,
    "manager": Manager,
    "instructor": Instructor,
    "self-reflect": SelfReflect,
    "confidence": Confidence,
}
"""CLI name -> baseline class (``Oracle`` alone also takes ``reliable_information`` and ``misleading``)."""
