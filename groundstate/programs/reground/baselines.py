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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.files import jsonable
from groundstate.programs.common import as_data, plurality, saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, call, check_choice, check_count
from groundstate.programs.reground.oracle import Oracle
from groundstate.programs.reground.standard import Confidence, StandardCollaboration
from groundstate.programs.reground.turns import (
    NO_MESSAGES,
    ORDERINGS,
    Case,
    Opinion,
    render_messages,
    speaking_order,
    turn,
)
from groundstate.signatures.collaboration import (
    AnswerInstructor,
    AskAgent,
    ChooseMode,
    ContributeToState,
    NameMisleadingAgent,
    ReflectOnAssessment,
    ShareAssessment,
    UpdateCompactState,
    UpdateSharedState,
)
from groundstate.signatures.resolution import ChooseOption

DEFAULT_INSTRUCTOR_QUESTION = "What does your evidence report that bears on the task?"


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

    def ballot(self, case: Case, agent: int) -> dict[str, Any]:
        """One agent's independent assessment, state and decision, with its trace entries."""
        message = self.speak(case, agent, 0, [], "shared-first")
        person = case.agents[agent]
        state = str(self.update(shared_context=case.shared_context or "(no shared context)",
                                agent_information=case.sources([agent]),
                                discussion=render_messages([message])).state or "").strip()
        decision = self.decide(information=as_data(state) or "(empty state)", question=case.question,
                               options=case.options)
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
        transcript = self.discuss(case, order, turns)
        latest = {m.agent: m for m in transcript}
        return self.conclude(case, turns, discussion=render_messages(transcript),
                             opinions=render_messages([latest[i] for i in sorted(latest)]), speakers=order,
                             order=order)

    def discuss(self, case: Case, order: list[int], turns: list[dict]) -> list[Opinion]:
        transcript: list[Opinion] = []
        for r in range(self.rounds):
            for agent in order:
                transcript.append(self.speak(case, agent, r, list(transcript), self.ordering, turns))
        return transcript


@saveable
class Manager(CollaborationBaseline):
    """Centralized collaboration with a carried-forward state (appendix D.4).

    The manager's record starts as the shared context. Agents speak in index order; each sees the current
    record (never the other agents' raw messages) and reports what its evidence adds or contradicts; the
    manager then folds the report into the record (``UpdateCompactState``). At the end the summarizer names
    the misleading agent from the reports the manager received, and the decision is made from the final
    record, concurrently. ``state`` is the final record.

    Args:
        rounds: passes over the agents.
    """

    program_name = "manager"

    def __init__(self, rounds: int = 1):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 1)
        self.contribute = dspy.Predict(ContributeToState)
        self.compact = dspy.Predict(UpdateCompactState)
        self.summarize = dspy.Predict(NameMisleadingAgent)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        state, reports = self.discuss(case, turns)
        return self.close(case, state, reports, turns)

    def discuss(self, case: Case, turns: list[dict]) -> tuple[str, list[Opinion]]:
        state = case.shared_context.strip() or "(nothing recorded yet)"
        reports: list[Opinion] = []
        for r in range(self.rounds):
            for i, person in enumerate(case.agents):
                prediction = self.contribute(agent=person.name, team=case.team, private_evidence=person.evidence,
                                             team_state=state, question=case.question, options=case.options)
                report = Opinion.from_prediction(case, i, r, prediction)
                turns.append(self.assess_turn(report, [], "shared-first", step="report", saw_state=True))
                state = as_data(str(self.compact(current_state=state, speaker=person.name,
                                                 message=report.render()).updated_state or "").strip()) or state
                turns.append(turn("update_state", "manager", r, [i], {"state": state}))
                reports.append(report)
        return state, reports

    def close(self, case: Case, state: str, reports: list[Opinion], turns: list[dict]) -> dspy.Prediction:
        def name_agent() -> Any:
            return self.summarize(team=case.team, discussion=render_messages(reports))

        def decide() -> Any:
            return self.decide(information=state, question=case.question, options=case.options)

        verdict, decision = thread_map(call, [name_agent, decide])
        misleading = self.record_verdict(case, verdict, [m.agent for m in reports], turns)
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
    and the answers (grouped by agent), and the decision is made from the state.

    Args:
        turns: number of questions (default: one per agent).
    """

    program_name = "instructor"

    def __init__(self, turns: int | None = None):
        super().__init__()
        self.turns = None if turns is None else check_count("turns", turns, 1)
        self.ask = dspy.Predict(AskAgent)
        self.answer = dspy.Predict(AnswerInstructor)
        self.summarize = dspy.Predict(NameMisleadingAgent)
        self.update = dspy.Predict(UpdateSharedState)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"turns": self.turns}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        exchanges = self.interview(case, turns)
        return self.conclude(case, turns, discussion=self.render(case, exchanges), opinions=NO_MESSAGES,
                             speakers=[j for j, _, _ in exchanges], agent_information=self.by_agent(case, exchanges))

    @staticmethod
    def render(case: Case, exchanges: Sequence[tuple[int, str, str]]) -> str:
        """The questions and answers in the order they were asked."""
        lines = [f"Instructor to {case.agents[i].name}: {q}\n{case.agents[i].name}: {a}" for i, q, a in exchanges]
        return "\n\n".join(lines) if lines else NO_MESSAGES

    @staticmethod
    def by_agent(case: Case, exchanges: Sequence[tuple[int, str, str]]) -> str:
        """What each agent reported, one block per agent (the updater's view of the agents' information)."""
        blocks = []
        for agent in sorted({i for i, _, _ in exchanges}):
            lines = [f"- asked: {q}\n  answered: {a}" for i, q, a in exchanges if i == agent]
            blocks.append(f"{case.agents[agent].name}:\n" + "\n".join(lines))
        return "\n\n".join(blocks) if blocks else NO_MESSAGES

    def interview(self, case: Case, turns: list[dict]) -> list[tuple[int, str, str]]:
        exchanges: list[tuple[int, str, str]] = []
        asked: Counter[int] = Counter()
        for t in range(self.turns or case.n):
            notes = (f"Shared context:\n{case.shared_context or '(none)'}\n\n"
                     f"Questions and answers so far:\n{self.render(case, exchanges)}")
            request = self.ask(case_notes=notes, team=case.team, question=case.question, options=case.options)
            target = case.index(request.target_agent)
            chosen = target if target is not None else min(range(case.n), key=lambda i: (asked[i], i))
            focused = as_data(str(request.focused_question or "").strip()) or DEFAULT_INSTRUCTOR_QUESTION
            turns.append(turn("ask", "instructor", t, [j for j, _, _ in exchanges],
                              {"target_agent": chosen, "raw_target": jsonable(request.target_agent),
                               "question": focused}, saw_shared_context=True))
            person = case.agents[chosen]
            reply = as_data(str(self.answer(agent=person.name, private_evidence=person.evidence,
                                            instructor_question=focused).reply or "").strip())
            turns.append(turn("answer", chosen, t, [], {"reply": reply}, saw_shared_context=False))
            exchanges.append((chosen, focused, reply))
            asked[chosen] += 1
        return exchanges


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
            results = thread_map(partial(self.next_turn, case, r, rounds[-1]), range(case.n))
            rounds.append([message for message, _ in results])
            turns.extend(entry for _, entries in results for entry in entries)
        return self.conclude(case, turns, discussion=render_messages([m for r in rounds for m in r]),
                             opinions=render_messages(rounds[-1]), speakers=range(case.n))

    def next_turn(self, case: Case, round_: int, previous: list[Opinion], agent: int
                  ) -> tuple[Opinion, list[dict]]:
        """One agent's round: choose a mode, then reflect alone or debate with the peers' messages."""
        person, own = case.agents[agent], previous[agent]
        peers = [m for m in previous if m.agent != agent]
        mode = self.choose_mode(agent=person.name, private_evidence=person.evidence, previous_assessment=own.render(),
                                peer_messages=render_messages(peers)).mode
        mode = mode if mode in ("reflect", "debate") else "debate"
        entries = [turn("choose_mode", agent, round_, [p.agent for p in peers], {"mode": mode})]
        if mode == "reflect":
            prediction = self.reflect(agent=person.name, team=case.team, private_evidence=person.evidence,
                                      shared_context=case.context_for_agents(self.ordering), question=case.question,
                                      options=case.options, previous_assessment=own.render())
            message = Opinion.from_prediction(case, agent, round_, prediction)
            entries.append(self.assess_turn(message, [own], self.ordering, step="reflect", mode=mode))
        else:
            message = self.speak(case, agent, round_, peers, self.ordering)
            entries.append(self.assess_turn(message, peers, self.ordering, step="debate", mode=mode))
        return message, entries


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
