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
- The baselines stand on Standard's footing by default (:mod:`~groundstate.programs.reground.standard`, as the
  authors run it; the paper says only that the baselines share Standard's final-decision prompt, §D.4, and the
  authors' public code has none of them, so the rest of the footing is our reading; Confidence is Standard with
  confidences; Manager takes the summarizer only and Instructor the summarizer and updater, since their designs
  hold the shared context from the start, see :mod:`~groundstate.programs.reground.centralized`):
  ``private-first`` ordering (Voting, Robin, Self-Reflect: the discussion
  uses private information only and the shared context first reaches the updater, Standard's ordering and the
  one §6 recommends); the ``standard`` summarizer (reads each agent's final message, is told one agent holds
  misleading information, and names an agent of the team); the ``standard`` updater (after the summarizer, from
  the initial shared context and the final messages of every agent but the one named, never raw evidence, no
  length cap). The earlier release's footing stays as options: ``ordering="shared-first"`` (every turn sees the
  shared context), ``summarizer="open"`` (reads the whole transcript, may answer "no one"),
  ``updater="evidence"`` (reads every agent's raw evidence, the misleading agent's included, writes at most
  1,500 characters, concurrently with the summarizer). See
  :meth:`~groundstate.programs.reground.baseline.CollaborationBaseline.closing_stages`. Programs saved before
  these options existed load with the footing they were built with (``legacy_kwargs``).
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
from groundstate.programs.common import acall_stage, plurality, saveable
from groundstate.programs.reground.baseline import (
    SUMMARIZERS,
    Agents,
    CollaborationBaseline,
    check_choice,
    check_count,
)
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
    ReflectOnAssessment,
    ShareAssessment,
)
from groundstate.signatures.resolution import ChooseOption


@saveable
class Voting(CollaborationBaseline):
    """Independent agents, majority decision (appendix D.4: "Voting independently constructs information states and
    decisions before majority aggregation").

    Each agent, on its own and concurrently with the others, (1) assesses the case from its private evidence
    (seeing no peer; and, under ``shared-first``, the shared context), (2) writes its own information state and
    (3) decides from that state. The answer is the plurality of the decisions; a tie goes to the tied option first
    voted for by the lowest-indexed agent. ``state`` is the state of the lowest-indexed agent that voted for the
    winner.

    Args:
        ordering: ``private-first`` (default, Standard's) or ``shared-first`` (the earlier release's: the
            assessment sees the shared context).
        summarizer: ``standard`` (default): after the ballots the summarizer reads every agent's assessment and
            names the misleading agent (an agent of the team). ``open`` (the earlier release's):
            ``misleading_agent`` is the plurality of the agents' suspicions, where "no one" is a vote too (same tie
            rule); no summarizer call.
        updater: ``standard`` (default): an agent's state is written from the shared context and its own
            assessment (Standard's updater contract: no raw evidence, no length cap). ``evidence`` (the earlier
            release's): from the shared context, its own raw evidence and its assessment, in at most 1,500
            characters.
    """

    program_name = "voting"
    #: The footing manifests saved before these options existed were built with (``registry.validate_kwargs``).
    legacy_kwargs = {"ordering": "shared-first", "summarizer": "open", "updater": "evidence"}

    def __init__(self, ordering: str = "private-first", summarizer: str = "standard", updater: str = "standard"):
        super().__init__()
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.summarizer = check_choice("summarizer", summarizer, SUMMARIZERS)
        self.assess = dspy.Predict(ShareAssessment)
        # under "open" no summarizer is built: the earlier release's Voting took the plurality of suspicions
        self.closing_stages(summarizer if summarizer == "standard" else None, updater)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"ordering": self.ordering, "summarizer": self.summarizer, "updater": self.updater}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        ballots = thread_map(partial(self.ballot, case), range(case.n))
        turns = [t for b in ballots for t in b["turns"]]
        named = self.named_agent(case, self.summarize(**self.ballot_naming(case, ballots)), range(case.n), turns) \
            if self.summarizer == "standard" else None
        return self.tally(ballots, turns, named)

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``: the ballots gathered, each awaiting its calls."""
        case = Case.build(agents, shared_context, question, options)
        ballots = list(await asyncio.gather(*(self.aballot(case, i) for i in range(case.n))))
        turns = [t for b in ballots for t in b["turns"]]
        named = None
        if self.summarizer == "standard":
            verdict = await acall_stage(self.summarize, **self.ballot_naming(case, ballots))
            named = self.named_agent(case, verdict, range(case.n), turns)
        return self.tally(ballots, turns, named)

    def ballot(self, case: Case, agent: int) -> dict[str, Any]:
        """One agent's independent assessment, state and decision, with its trace entries."""
        message = self.speak(case, agent, 0, [], self.ordering)
        state = str(self.update(**self.state_args(case, agent, message)).state or "").strip()
        return self.counted(case, agent, message, state, self.decide(**self.decide_args(case, state)))

    async def aballot(self, case: Case, agent: int) -> dict[str, Any]:
        """:meth:`ballot`, awaiting each call."""
        message = await self.aspeak(case, agent, 0, [], self.ordering)
        state = str((await acall_stage(self.update, **self.state_args(case, agent, message))).state or "").strip()
        decision = await acall_stage(self.decide, **self.decide_args(case, state))
        return self.counted(case, agent, message, state, decision)

    def state_args(self, case: Case, agent: int, message: Opinion) -> dict[str, str]:
        """The inputs of an agent's own state: the shared context and its assessment (and, under the
        ``evidence`` updater, its raw evidence)."""
        shared = case.shared_context or "(no shared context)"
        if self.updater == "standard":
            return {"shared_context": shared, "opinions": render_messages([message])}
        return {"shared_context": shared, "agent_information": case.sources([agent]),
                "discussion": render_messages([message])}

    def ballot_naming(self, case: Case, ballots: list[dict[str, Any]]) -> dict[str, Any]:
        """The summarizer's inputs: every agent's assessment."""
        return self.naming_args(case, "", [(b["agent"], b["message"].render()) for b in ballots])

    def counted(self, case: Case, agent: int, message: Opinion, state: str, decision: Any) -> dict[str, Any]:
        """An agent's ballot from its assessment, state and decision, with its trace entries."""
        person = case.agents[agent]
        turns = [self.assess_turn(message, [], self.ordering),
                 turn("update_state", agent, 0, [agent], {"state": state}, saw_shared_context=True,
                      saw_private_evidence=self.updater == "evidence"),
                 turn("decide", agent, 0, [], {"answer": decision.answer, "reason": decision.reason}, input="state")]
        return {"agent": agent, "name": person.name, "answer": decision.answer, "suspect": message.suspect,
                "message": message, "state": state, "turns": turns}

    def tally(self, ballots: list[dict[str, Any]], turns: list[dict], named: int | None = None) -> dspy.Prediction:
        """The plurality answer, its state, and the misleading agent (``named`` by the summarizer, or the
        plurality of suspicions under ``open``)."""
        votes = [b["answer"] for b in ballots]
        answer = plurality(votes)
        state = next((b["state"] for b in ballots if b["answer"] == answer), "")
        misleading = named if self.summarizer == "standard" else plurality([b["suspect"] for b in ballots])
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
        ordering: ``private-first`` (default, Standard's) or ``shared-first`` (the earlier release's default).
        summarizer: ``standard`` (default, Standard's) or ``open`` (the earlier release's; see the module
            docstring).
        updater: ``standard`` (default, Standard's) or ``evidence`` (the earlier release's).
    """

    program_name = "robin"
    #: The footing manifests saved before these options existed were built with (``registry.validate_kwargs``).
    legacy_kwargs = {"summarizer": "open", "updater": "evidence"}

    def __init__(self, seed: int = 0, rounds: int = 1, ordering: str = "private-first", summarizer: str = "standard",
                 updater: str = "standard"):
        super().__init__()
        self.seed = check_count("seed", seed, 0)
        self.rounds = check_count("rounds", rounds, 1)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.assess = dspy.Predict(ShareAssessment)
        self.closing_stages(summarizer, updater)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"seed": self.seed, "rounds": self.rounds, "ordering": self.ordering, "summarizer": self.summarizer,
                "updater": self.updater}

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
        final = [latest[i] for i in sorted(latest)]
        return {"discussion": render_messages(transcript), "opinions": render_messages(final),
                "final": [(m.agent, m.render()) for m in final], "speakers": order, "order": order}


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
        ordering: ``private-first`` (default, Standard's: a reflection re-reads the private evidence only) or
            ``shared-first`` (the earlier release's default).
        summarizer: ``standard`` (default, Standard's) or ``open`` (the earlier release's; see the module
            docstring).
        updater: ``standard`` (default, Standard's) or ``evidence`` (the earlier release's).
    """

    program_name = "self-reflect"
    #: The footing manifests saved before these options existed were built with (``registry.validate_kwargs``).
    legacy_kwargs = {"summarizer": "open", "updater": "evidence"}

    def __init__(self, rounds: int = 2, ordering: str = "private-first", summarizer: str = "standard",
                 updater: str = "standard"):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 0)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.assess = dspy.Predict(ShareAssessment)
        self.choose_mode = dspy.Predict(ChooseMode)
        self.reflect = dspy.Predict(ReflectOnAssessment)
        self.closing_stages(summarizer, updater)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "ordering": self.ordering, "summarizer": self.summarizer,
                "updater": self.updater}

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
        choice = await acall_stage(self.choose_mode, **self.mode_args(case, previous, agent))
        mode, entries = self.chosen(round_, previous, agent, choice)
        if mode == "reflect":
            prediction = await acall_stage(self.reflect, **self.reflect_args(case, previous, agent))
        else:
            prediction = await acall_stage(self.assess, **self.speak_args(case, agent, self.peers(previous, agent),
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
                "final": [(m.agent, m.render()) for m in rounds[-1]], "speakers": range(case.n)}


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
