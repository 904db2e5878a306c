"""The centralized collaboration baselines (appendix D.4): a manager folding every report into one record
(:class:`Manager`) and an instructor questioning one agent per turn (:class:`Instructor`).

They share the conventions of :mod:`groundstate.programs.reground.baselines` (the contract prediction, the
trace, :func:`~groundstate.programs.common.as_data` on every quoted model text), where ``BASELINES`` lists them.
Both have ``aforward`` for ``await program.acall(...)``: the same prompts and prediction, each LM call awaited
through the predictor's ``acall`` (the independent closing calls gathered).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.files import jsonable
from groundstate.programs.common import acall_stage, as_data, saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, call, check_count
from groundstate.programs.reground.turns import NO_MESSAGES, Case, Opinion, render_messages, turn
from groundstate.signatures.collaboration import (
    AnswerInstructor,
    AskAgent,
    ContributeToState,
    UpdateCompactState,
)
from groundstate.signatures.resolution import ChooseOption

DEFAULT_INSTRUCTOR_QUESTION = "What does your evidence report that bears on the task?"


@saveable
class Manager(CollaborationBaseline):
    """Centralized collaboration with a carried-forward state (appendix D.4).

    The manager's record starts as the shared context. Agents speak in index order; each sees the current
    record (never the other agents' raw messages) and reports what its evidence adds or contradicts; the
    manager then folds the report into the record (``UpdateCompactState``). At the end the summarizer names
    the misleading agent from the reports the manager received, and the decision is made from the final
    record, concurrently. ``state`` is the final record: the manager is this baseline's updater (the paper:
    "Manager iteratively updates and carries forward a compact information state"), so it has no separate
    updater, and its record starts from the shared context (the manager holds the team's record from the start;
    Standard's private-first ordering has no counterpart here).

    Args:
        rounds: passes over the agents.
        summarizer: ``standard`` (default, Standard's: reads each agent's latest report and names an agent of the
            team) or ``open`` (the earlier release's: reads every report, may answer "no one"); see
            :meth:`~groundstate.programs.reground.baseline.CollaborationBaseline.closing_stages`.
    """

    program_name = "manager"
    #: The footing manifests saved before the option existed were built with (``registry.validate_kwargs``).
    legacy_kwargs = {"summarizer": "open"}

    def __init__(self, rounds: int = 1, summarizer: str = "standard"):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 1)
        self.contribute = dspy.Predict(ContributeToState)
        self.compact = dspy.Predict(UpdateCompactState)
        self.closing_stages(summarizer)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "summarizer": self.summarizer}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        state = self.first_record(case)
        reports: list[Opinion] = []
        for r, i in self.turn_order(case):
            report = self.reported(case, i, r, self.contribute(**self.contribute_args(case, i, state)), turns)
            state = self.recorded(state, r, i, self.compact(**self.compact_args(case, i, state, report)), turns)
            reports.append(report)
        naming, deciding = self.close_args(case, state, reports)
        verdict, decision = thread_map(call, [partial(self.summarize, **naming), partial(self.decide, **deciding)])
        return self.close(case, state, reports, turns, verdict, decision)

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)`` (sequential turns awaited, the closing calls gathered)."""
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        state = self.first_record(case)
        reports: list[Opinion] = []
        for r, i in self.turn_order(case):
            contribution = await acall_stage(self.contribute, **self.contribute_args(case, i, state))
            report = self.reported(case, i, r, contribution, turns)
            compacted = await acall_stage(self.compact, **self.compact_args(case, i, state, report))
            state = self.recorded(state, r, i, compacted, turns)
            reports.append(report)
        naming, deciding = self.close_args(case, state, reports)
        verdict, decision = await asyncio.gather(acall_stage(self.summarize, **naming),
                                                 acall_stage(self.decide, **deciding))
        return self.close(case, state, reports, turns, verdict, decision)

    # -- the steps both paths share ----------------------------------------------------------------------
    @staticmethod
    def first_record(case: Case) -> str:
        return case.shared_context.strip() or "(nothing recorded yet)"

    def turn_order(self, case: Case) -> list[tuple[int, int]]:
        """``(round, agent)`` of every report, agents in index order."""
        return [(r, i) for r in range(self.rounds) for i in range(case.n)]

    @staticmethod
    def contribute_args(case: Case, agent: int, state: str) -> dict[str, str]:
        person = case.agents[agent]
        return {"agent": person.name, "team": case.team, "private_evidence": person.evidence, "team_state": state,
                "question": case.question, "options": case.options}

    def reported(self, case: Case, agent: int, round_: int, prediction: Any, turns: list[dict]) -> Opinion:
        report = Opinion.from_prediction(case, agent, round_, prediction)
        turns.append(self.assess_turn(report, [], "shared-first", step="report", saw_state=True))
        return report

    @staticmethod
    def compact_args(case: Case, agent: int, state: str, report: Opinion) -> dict[str, str]:
        return {"current_state": state, "speaker": case.agents[agent].name, "message": report.render()}

    @staticmethod
    def recorded(state: str, round_: int, agent: int, compacted: Any, turns: list[dict]) -> str:
        """The manager's new record (the old one if it wrote nothing), traced."""
        state = as_data(str(compacted.updated_state or "").strip()) or state
        turns.append(turn("update_state", "manager", round_, [agent], {"state": state}))
        return state

    def close_args(self, case: Case, state: str, reports: list[Opinion]) -> tuple[dict[str, Any], dict[str, str]]:
        """The summarizer's inputs (every report, or each agent's latest one under ``standard``) and the
        decision's."""
        latest = {m.agent: m for m in reports}
        final = [(i, latest[i].render()) for i in sorted(latest)]
        return (self.naming_args(case, render_messages(reports), final),
                {"information": state, "question": case.question, "options": case.options})

    def close(self, case: Case, state: str, reports: list[Opinion], turns: list[dict], verdict: Any, decision: Any
              ) -> dspy.Prediction:
        misleading = self.named_agent(case, verdict, [m.agent for m in reports], turns)
        turns.append(turn("decide", "decider", None, [], {"answer": decision.answer, "reason": decision.reason},
                          input="state"))
        return self.prediction(misleading, state, decision.answer, turns)


@saveable
class Instructor(CollaborationBaseline):
    """Centralized elicitation (appendix D.4): an instructor questions one agent per turn, then decides.

    The instructor sees the shared context and the questions and answers so far, never an agent's raw
    evidence. Each turn it names one agent and asks one focused question; that agent answers from its own
    evidence only (it sees nothing else: no context, no other answers). If the instructor names no valid
    agent, the least-asked agent (lowest index on ties) is asked. After ``turns`` turns the summarizer names
    the misleading agent from the questions and answers, the updater writes the state from the shared context
    and the answers (grouped by agent), and the decision is made from the state. The instructor works from the
    shared context by design (the paper: it "centrally elicits targeted missing information"), so Standard's
    private-first ordering has no counterpart here; the closing stages follow Standard's contract by default,
    each agent's answers standing for its final message.

    Args:
        turns: number of questions (default: one per agent).
        summarizer: ``standard`` (default, Standard's: reads each agent's answers and names an agent of the team)
            or ``open`` (the earlier release's: reads the questions and answers, may answer "no one").
        updater: ``standard`` (default, Standard's: after the summarizer, from the shared context and the answers
            of every agent but the one named) or ``evidence`` (the earlier release's: concurrently, from the shared
            context and every agent's answers, in at most 1,500 characters). See
            :meth:`~groundstate.programs.reground.baseline.CollaborationBaseline.closing_stages`.
    """

    program_name = "instructor"
    #: The footing manifests saved before these options existed were built with (``registry.validate_kwargs``).
    legacy_kwargs = {"summarizer": "open", "updater": "evidence"}

    def __init__(self, turns: int | None = None, summarizer: str = "standard", updater: str = "standard"):
        super().__init__()
        self.turns = None if turns is None else check_count("turns", turns, 1)
        self.ask = dspy.Predict(AskAgent)
        self.answer = dspy.Predict(AnswerInstructor)
        self.closing_stages(summarizer, updater)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"turns": self.turns, "summarizer": self.summarizer, "updater": self.updater}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        exchanges: list[tuple[int, str, str]] = []
        asked: Counter[int] = Counter()
        for t in range(self.turns or case.n):
            chosen, focused = self.asked(case, t, self.ask(**self.ask_args(case, exchanges)), asked, exchanges, turns)
            reply = self.answer(**self.answer_args(case, chosen, focused))
            self.answered(t, chosen, focused, reply, asked, exchanges, turns)
        return self.conclude(case, turns, **self.closing(case, exchanges))

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                       ) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)`` (each question and answer awaited in turn)."""
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        exchanges: list[tuple[int, str, str]] = []
        asked: Counter[int] = Counter()
        for t in range(self.turns or case.n):
            request = await acall_stage(self.ask, **self.ask_args(case, exchanges))
            chosen, focused = self.asked(case, t, request, asked, exchanges, turns)
            reply = await acall_stage(self.answer, **self.answer_args(case, chosen, focused))
            self.answered(t, chosen, focused, reply, asked, exchanges, turns)
        return await self.aconclude(case, turns, **self.closing(case, exchanges))

    @staticmethod
    def render(case: Case, exchanges: Sequence[tuple[int, str, str]]) -> str:
        """The questions and answers in the order they were asked."""
        lines = [f"Instructor to {case.agents[i].name}: {q}\n{case.agents[i].name}: {a}" for i, q, a in exchanges]
        return "\n\n".join(lines) if lines else NO_MESSAGES

    @staticmethod
    def answers_by_agent(case: Case, exchanges: Sequence[tuple[int, str, str]]) -> list[tuple[int, str]]:
        """What each agent reported, one ``(agent, block)`` per agent asked, in index order."""
        blocks = []
        for agent in sorted({i for i, _, _ in exchanges}):
            lines = [f"- asked: {q}\n  answered: {a}" for i, q, a in exchanges if i == agent]
            blocks.append((agent, f"{case.agents[agent].name}:\n" + "\n".join(lines)))
        return blocks

    @classmethod
    def by_agent(cls, case: Case, exchanges: Sequence[tuple[int, str, str]]) -> str:
        """What each agent reported, one block per agent (the ``evidence`` updater's view of the agents'
        information)."""
        return "\n\n".join(block for _, block in cls.answers_by_agent(case, exchanges)) or NO_MESSAGES

    # -- the steps both paths share ----------------------------------------------------------------------
    def ask_args(self, case: Case, exchanges: Sequence[tuple[int, str, str]]) -> dict[str, str]:
        """The instructor's inputs: the shared context and the questions and answers so far."""
        notes = (f"Shared context:\n{case.shared_context or '(none)'}\n\n"
                 f"Questions and answers so far:\n{self.render(case, exchanges)}")
        return {"case_notes": notes, "team": case.team, "question": case.question, "options": case.options}

    @staticmethod
    def asked(case: Case, turn_: int, request: Any, asked: Counter[int], exchanges: Sequence[tuple[int, str, str]],
              turns: list[dict]) -> tuple[int, str]:
        """``(agent asked, question)`` from the instructor's request (the least-asked agent if it named none)."""
        target = case.index(request.target_agent)
        chosen = target if target is not None else min(range(case.n), key=lambda i: (asked[i], i))
        focused = as_data(str(request.focused_question or "").strip()) or DEFAULT_INSTRUCTOR_QUESTION
        turns.append(turn("ask", "instructor", turn_, [j for j, _, _ in exchanges],
                          {"target_agent": chosen, "raw_target": jsonable(request.target_agent),
                           "question": focused}, saw_shared_context=True))
        return chosen, focused

    @staticmethod
    def answer_args(case: Case, agent: int, focused: str) -> dict[str, str]:
        person = case.agents[agent]
        return {"agent": person.name, "private_evidence": person.evidence, "instructor_question": focused}

    @staticmethod
    def answered(turn_: int, agent: int, focused: str, answer: Any, asked: Counter[int],
                 exchanges: list[tuple[int, str, str]], turns: list[dict]) -> None:
        """Record the agent's reply as an exchange, traced."""
        reply = as_data(str(answer.reply or "").strip())
        turns.append(turn("answer", agent, turn_, [], {"reply": reply}, saw_shared_context=False))
        exchanges.append((agent, focused, reply))
        asked[agent] += 1

    def closing(self, case: Case, exchanges: Sequence[tuple[int, str, str]]) -> dict[str, Any]:
        """The closing stages' inputs: the questions and answers, and each agent's answers as its information."""
        return {"discussion": self.render(case, exchanges), "opinions": NO_MESSAGES,
                "speakers": [j for j, _, _ in exchanges], "agent_information": self.by_agent(case, exchanges),
                "final": self.answers_by_agent(case, exchanges)}
