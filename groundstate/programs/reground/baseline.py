"""The stages the collaboration baselines share: an agent's turn, the closing summarizer and updater, the
decision from the state, and the trace they all write.

Subclass :class:`CollaborationBaseline` to compose a new collaboration strategy: create the predictors the
stages use (``assess``, ``summarize``, ``update``, ``decide``) in ``__init__`` and call the stages from
``forward``. Every stage that calls an LM has an ``a``-prefixed twin (``aspeak``, ``aconclude``, ...) for an
``aforward``: it awaits the predictors' ``acall`` (independent calls with ``asyncio.gather``) and shares the
stage's argument and result helpers, so both paths send the same prompts and return the same prediction.

Every piece of model-produced text a later prompt quotes (assessments, states, questions, replies) goes
through :func:`~groundstate.programs.common.as_data` first, exactly like evidence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.files import jsonable
from groundstate.programs.common import acall_stage, as_data, offquery_prediction
from groundstate.programs.reground.turns import NO_MESSAGES, Case, Opinion, render_messages, turn
from groundstate.records import AgentEvidence
from groundstate.signatures.collaboration import (
    FindMisleadingAgent,
    NameMisleadingAgent,
    UpdateContext,
    UpdateSharedState,
    team_member,
)

#: The closing summarizer's contracts (see :meth:`CollaborationBaseline.closing_stages`).
SUMMARIZERS = ("standard", "open")
#: The closing updater's contracts (see :meth:`CollaborationBaseline.closing_stages`).
UPDATERS = ("standard", "evidence")

Agents = Sequence[AgentEvidence | Mapping[str, Any]]
"""What every OffQuery program takes as ``agents``: records or dicts of the same shape."""


def check_count(name: str, value: int, minimum: int) -> int:
    """``value`` if it is an integer ``>= minimum``; otherwise a ``ValueError`` naming the setting."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    """``value`` if it is one of ``allowed``; otherwise a ``ValueError`` naming the setting."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got '{value}'")
    return value


def call(fn: Callable[[], Any]) -> Any:
    """``fn()`` (for running independent stages with :func:`~groundstate.concurrency.thread_map`)."""
    return fn()


class CollaborationBaseline(dspy.Module):
    """Shared stages: an agent's turn, the closing summarizer/updater, and the decision from the state.

    Subclasses create the predictors they use (``assess``, ``summarize``, ``update``, ``decide``, ...) in
    ``__init__``, so ``named_predictors()`` lists exactly the prompts a baseline runs.
    """

    program_name = "collaboration"
    summarizer = "open"  # the contracts of a subclass that never calls closing_stages (see there)
    updater = "evidence"

    def config(self) -> dict[str, Any]:
        """The settings recorded in the trace."""
        return {}

    # -- turns ------------------------------------------------------------------------------------------
    def speak(self, case: Case, agent: int, round_: int, peers: Sequence[Opinion], ordering: str,
              turns: list[dict] | None = None) -> Opinion:
        """Agent ``agent`` shares its assessment after seeing ``peers`` (with ``self.assess``)."""
        prediction = self.assess(**self.speak_args(case, agent, peers, ordering))
        return self.spoken(case, agent, round_, peers, ordering, prediction, turns)

    async def aspeak(self, case: Case, agent: int, round_: int, peers: Sequence[Opinion], ordering: str,
                     turns: list[dict] | None = None) -> Opinion:
        """:meth:`speak` with ``await self.assess.acall``."""
        prediction = await acall_stage(self.assess, **self.speak_args(case, agent, peers, ordering))
        return self.spoken(case, agent, round_, peers, ordering, prediction, turns)

    @staticmethod
    def speak_args(case: Case, agent: int, peers: Sequence[Opinion], ordering: str) -> dict[str, str]:
        """The inputs of agent ``agent``'s assessment after seeing ``peers``."""
        person = case.agents[agent]
        return {"agent": person.name, "team": case.team, "private_evidence": person.evidence,
                "shared_context": case.context_for_agents(ordering), "question": case.question,
                "options": case.options, "peer_messages": render_messages(peers)}

    def spoken(self, case: Case, agent: int, round_: int, peers: Sequence[Opinion], ordering: str, prediction: Any,
               turns: list[dict] | None = None) -> Opinion:
        """The message of an assessment, traced into ``turns`` if given."""
        message = Opinion.from_prediction(case, agent, round_, prediction)
        if turns is not None:
            turns.append(self.assess_turn(message, peers, ordering))
        return message

    @staticmethod
    def assess_turn(message: Opinion, peers: Sequence[Opinion], ordering: str, step: str = "assess",
                    **extra: Any) -> dict[str, Any]:
        """The trace entry for an agent's message, given the peers' messages it saw."""
        return turn(step, message.agent, message.round, [p.agent for p in peers], message.output(),
                    saw_shared_context=ordering == "shared-first", **extra)

    def opening_round(self, case: Case, ordering: str) -> list[Opinion]:
        """Round 0: every agent assesses alone, all at once."""
        return thread_map(lambda i: self.speak(case, i, 0, [], ordering), range(case.n))

    async def aopening_round(self, case: Case, ordering: str) -> list[Opinion]:
        """:meth:`opening_round` with the assessments gathered."""
        return list(await asyncio.gather(*(self.aspeak(case, i, 0, [], ordering) for i in range(case.n))))

    # -- closing ----------------------------------------------------------------------------------------
    def closing_stages(self, summarizer: str | None = None, updater: str | None = None) -> None:
        """Create the closing predictors under the given contracts (``None``: that stage is not used).

        ``summarizer``: ``standard`` (:class:`~groundstate.signatures.collaboration.FindMisleadingAgent`, as
        :class:`~groundstate.programs.reground.standard.StandardCollaboration` runs it: it reads each agent's
        final message, is told one agent holds misleading information, and must name an agent of the team) or
        ``open`` (:class:`~groundstate.signatures.collaboration.NameMisleadingAgent`, the earlier release's: it
        reads the whole transcript and may answer "no one"). ``updater``: ``standard``
        (:class:`~groundstate.signatures.collaboration.UpdateContext`, Standard's: after the summarizer, from the
        initial shared context and the final messages of every agent but the one named; no raw evidence, no
        length cap) or ``evidence`` (:class:`~groundstate.signatures.collaboration.UpdateSharedState`, the earlier
        release's: concurrently with the summarizer, from the shared context, every agent's raw evidence, the
        misleading agent's included, and the messages, in at most 1,500 characters).
        """
        if summarizer is not None:
            self.summarizer = check_choice("summarizer", summarizer, SUMMARIZERS)
            self.summarize = dspy.Predict(FindMisleadingAgent if summarizer == "standard" else NameMisleadingAgent)
        if updater is not None:
            self.updater = check_choice("updater", updater, UPDATERS)
            self.update = dspy.Predict(UpdateContext if updater == "standard" else UpdateSharedState)

    def conclude(self, case: Case, turns: list[dict], *, discussion: str, opinions: str,
                 speakers: Iterable[int], final: Sequence[tuple[int, str]] = (), agent_information: str | None = None,
                 **extra: Any) -> dspy.Prediction:
        """The summarizer names the misleading agent and the updater writes the state (the updater after the
        summarizer under the ``standard`` updater, concurrently otherwise); then the decision is made from the
        state alone. ``final``: each agent's final message as ``(agent, text)`` (what the standard stages read);
        ``opinions``, ``agent_information``: what the ``evidence`` updater reads."""
        naming = self.naming_args(case, discussion, final)
        if self.updater == "standard":
            misleading = self.named_agent(case, self.summarize(**naming), speakers, turns)
            written = self.update(**self.writing_args(case, final, misleading, opinions, agent_information))
        else:
            writing = self.writing_args(case, final, None, opinions, agent_information)
            verdict, written = thread_map(call, [partial(self.summarize, **naming), partial(self.update, **writing)])
            misleading = self.named_agent(case, verdict, speakers, turns)
        state = self.written_state(written, final, misleading, speakers, turns)
        return self.finish(case, misleading, state, turns, **extra)

    async def aconclude(self, case: Case, turns: list[dict], *, discussion: str, opinions: str,
                        speakers: Iterable[int], final: Sequence[tuple[int, str]] = (),
                        agent_information: str | None = None, **extra: Any) -> dspy.Prediction:
        """:meth:`conclude`, each call awaited (the two stages gathered when they are independent)."""
        naming = self.naming_args(case, discussion, final)
        if self.updater == "standard":
            misleading = self.named_agent(case, await acall_stage(self.summarize, **naming), speakers, turns)
            written = await acall_stage(self.update, **self.writing_args(case, final, misleading, opinions,
                                                                  agent_information))
        else:
            writing = self.writing_args(case, final, None, opinions, agent_information)
            verdict, written = await asyncio.gather(acall_stage(self.summarize, **naming),
                                                    acall_stage(self.update, **writing))
            misleading = self.named_agent(case, verdict, speakers, turns)
        state = self.written_state(written, final, misleading, speakers, turns)
        return await self.afinish(case, misleading, state, turns, **extra)

    def naming_args(self, case: Case, discussion: str, final: Sequence[tuple[int, str]]) -> dict[str, Any]:
        """The summarizer's inputs: the final messages, the answer constrained to the team (``standard``), or
        the team and the whole transcript (``open``)."""
        if self.summarizer == "standard":
            signature = self.summarize.signature.with_updated_fields(
                "misleading_agent", type_=team_member(a.agent for a in case.agents))
            return {"opinions": "\n\n".join(text for _, text in final) or NO_MESSAGES, "signature": signature}
        return {"team": case.team, "discussion": discussion}

    def writing_args(self, case: Case, final: Sequence[tuple[int, str]], misleading: int | None, opinions: str,
                     agent_information: str | None) -> dict[str, str]:
        """The updater's inputs: the shared context and the final messages of every agent but ``misleading``
        (``standard``), or the shared context, the agents' information and ``opinions`` (``evidence``)."""
        shared = case.shared_context or "(no shared context)"
        if self.updater == "standard":
            kept = [text for agent, text in final if agent != misleading]
            return {"shared_context": shared, "opinions": "\n\n".join(kept) or NO_MESSAGES}
        info = case.sources() if agent_information is None else agent_information
        return {"shared_context": shared, "agent_information": info, "discussion": opinions}

    def named_agent(self, case: Case, verdict: Any, speakers: Iterable[int], turns: list[dict]) -> int | None:
        """The agent the summarizer named, traced: under ``standard`` always an agent (agent 0 for an answer naming
        none, as the authors' code falls back); under ``open`` ``None`` for "no one" or an unusable answer."""
        if self.summarizer != "standard":
            return self.record_verdict(case, verdict, speakers, turns)
        named = case.index(verdict.misleading_agent)
        misleading = named if named is not None else case.agents[0].agent
        turns.append(turn("name_misleading", "summarizer", None, sorted(set(speakers)),
                          {"misleading_agent": misleading, "raw": jsonable(verdict.misleading_agent),
                           "reason": verdict.reason}))
        return misleading

    def written_state(self, written: Any, final: Sequence[tuple[int, str]], misleading: int | None,
                      speakers: Iterable[int], turns: list[dict]) -> str:
        """The updater's state, traced with whose messages it saw."""
        state = str(written.state or "").strip()
        if self.updater == "standard":
            turns.append(turn("update_state", "updater", None, [a for a, _ in final if a != misleading],
                              {"state": state}, saw_shared_context=True, saw_private_evidence=False))
        else:
            turns.append(turn("update_state", "updater", None, sorted(set(speakers)), {"state": state},
                              saw_shared_context=True))
        return state

    @staticmethod
    def record_verdict(case: Case, verdict: Any, speakers: Iterable[int], turns: list[dict]) -> int | None:
        """Map the summarizer's index to an agent (``-1``/out of range -> ``None``) and trace it."""
        misleading = case.index(verdict.misleading_agent)
        turns.append(turn("name_misleading", "summarizer", None, speakers,
                          {"misleading_agent": misleading, "raw": jsonable(verdict.misleading_agent),
                           "reason": verdict.reason}))
        return misleading

    def decide_from(self, case: Case, state: str, turns: list[dict]) -> str | None:
        """``ChooseOption`` over the state only (never the raw evidence or transcript)."""
        return self.decided(self.decide(**self.decide_args(case, state)), turns)

    @staticmethod
    def decide_args(case: Case, state: str) -> dict[str, str]:
        """The decision's inputs: the state, the question and the options."""
        return {"information": as_data(state) or "(empty state)", "question": case.question, "options": case.options}

    @staticmethod
    def decided(decision: Any, turns: list[dict]) -> str | None:
        """The decision's answer, traced."""
        turns.append(turn("decide", "decider", None, [], {"answer": decision.answer, "reason": decision.reason},
                          input="state"))
        return decision.answer

    def finish(self, case: Case, misleading: int | None, state: str, turns: list[dict], **extra: Any
               ) -> dspy.Prediction:
        """Decide from ``state`` and return the contract prediction."""
        answer = self.decide_from(case, state, turns)
        return self.prediction(misleading, state, answer, turns, **extra)

    async def afinish(self, case: Case, misleading: int | None, state: str, turns: list[dict], **extra: Any
                      ) -> dspy.Prediction:
        """:meth:`finish` with ``await self.decide.acall``."""
        answer = self.decided(await acall_stage(self.decide, **self.decide_args(case, state)), turns)
        return self.prediction(misleading, state, answer, turns, **extra)

    def prediction(self, misleading: Any, state: str, answer: str | None, turns: list[dict],
                   **extra: Any) -> dspy.Prediction:
        """The contract prediction, with the trace ``{"program", "config", **extra, "turns"}``."""
        trace = {"program": self.program_name, "config": self.config(), **extra, "turns": turns}
        return offquery_prediction(misleading_agent=misleading, state=state, answer=answer, trace=trace)

