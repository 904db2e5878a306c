"""Standard collaboration (paper §5.1, appendix D.3), the baseline every relative gain is measured against, and its
confidence-weighted variant (appendix D.4), as the authors run them (``whr000001/OffQuery``, ``standard/``).

1. Opening: every agent shares what matters in its *private* information, alone and all at once (under the
   default ``private-first`` ordering it never sees the shared context, §6).
2. ``rounds`` discussion rounds (3 by default): every agent revises its own previous opinion after reading the
   other agents' opinions from the previous round (all at once), warned that information may be misleading
   and that the majority is not necessarily right.
3. A summarizer reads the final-round opinions, is told that one agent holds misleading information, and names
   it (T1); the answer can only be an agent of the team.
4. An updater rebuilds the shared context from the *initial* shared information (the corrupted one under the
   unreliable condition) and the final opinions of every agent except the one named (T2). It never sees the
   named agent's opinion or any raw private evidence.
5. The decision is made from that state only (T3), with the same decision prompt as ReGround and every other
   baseline (:class:`~groundstate.signatures.resolution.ChooseOption`).

Variants kept as options: ``topology`` ``chain`` (agents speak in index order within a round and agent ``i`` sees
agent ``i - 1``'s opinion from the same round) or ``tree`` (a binary tree in index order: an agent sees its parent
and children from the previous round), and ``ordering="shared-first"`` (every opinion turn also sees the shared
context).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, check_choice, check_count
from groundstate.programs.reground.turns import ORDERINGS, TOPOLOGIES, Case, Opinion, neighbours, render_messages, turn
from groundstate.signatures.collaboration import (
    FindMisleadingAgent,
    ReviseOpinion,
    ReviseOpinionWithConfidence,
    ShareOpinion,
    ShareOpinionWithConfidence,
    UpdateContext,
)
from groundstate.signatures.resolution import ChooseOption


@saveable
class StandardCollaboration(CollaborationBaseline):
    """Standard collaboration as the authors run it (see the module docstring).

    Args:
        rounds: discussion rounds after the opening turn (3, the authors' setting; 0 = opening turn only).
        topology: ``all-to-all`` (default), ``chain`` or ``tree``.
        ordering: ``private-first`` (default: the discussion uses private information only; the shared
            context first reaches the updater) or ``shared-first`` (every turn sees the shared context).
    """

    program_name = "standard"
    opening_signature: type[dspy.Signature] = ShareOpinion
    revise_signature: type[dspy.Signature] = ReviseOpinion

    def __init__(self, rounds: int = 3, topology: str = "all-to-all", ordering: str = "private-first"):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 0)
        self.topology = check_choice("topology", topology, TOPOLOGIES)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.open = dspy.Predict(self.opening_signature)
        self.revise = dspy.Predict(self.revise_signature)
        self.summarize = dspy.Predict(FindMisleadingAgent)
        self.update = dspy.Predict(UpdateContext)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "topology": self.topology, "ordering": self.ordering}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        final = self.discuss(case, turns)[-1]
        misleading = self.name_misleading(case, final, turns)
        trusted = [m for m in final if m.agent != misleading]
        written = self.update(shared_context=case.shared_context or "(no shared context)",
                              opinions=render_messages(trusted))
        state = str(written.state or "").strip()
        turns.append(turn("update_state", "updater", None, [m.agent for m in trusted], {"state": state},
                          saw_shared_context=True, saw_private_evidence=False))
        return self.finish(case, misleading, state, turns)

    async def aforward(self, agents: Agents, shared_context: str, question: str,
                       options: Mapping[str, str] | str) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``, same result. The discussion rounds (a fan-out per round
        on :func:`~groundstate.concurrency.thread_map`) and the final decision run on one worker thread
        (``asyncio.to_thread`` carries the DSPy context); the state update awaits the LM's async path."""
        import asyncio

        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []

        def discussed():
            final = self.discuss(case, turns)[-1]
            return final, self.name_misleading(case, final, turns)

        final, misleading = await asyncio.to_thread(discussed)
        trusted = [m for m in final if m.agent != misleading]
        written = await self.update.acall(shared_context=case.shared_context or "(no shared context)",
                                          opinions=render_messages(trusted))
        state = str(written.state or "").strip()
        turns.append(turn("update_state", "updater", None, [m.agent for m in trusted], {"state": state},
                          saw_shared_context=True, saw_private_evidence=False))
        return await asyncio.to_thread(self.finish, case, misleading, state, turns)

    # -- the discussion ------------------------------------------------------------------------------------
    def discuss(self, case: Case, turns: list[dict]) -> list[list[Opinion]]:
        """Every round's opinions, the opening turn first, appending one trace entry per turn."""
        context = case.context_for_agents(self.ordering)

        def opening(i: int) -> Opinion:
            person = case.agents[i]
            return Opinion.from_opinion(case, i, 0, self.open(agent=person.name, private_evidence=person.evidence,
                                                              shared_context=context))

        rounds = [thread_map(opening, range(case.n))]
        turns.extend(self.opinion_turn(m, [], saw_private=True) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            rounds.append(self.exchange_round(case, r, rounds[-1], turns))
        return rounds

    def exchange_round(self, case: Case, round_: int, previous: list[Opinion], turns: list[dict]) -> list[Opinion]:
        context = case.context_for_agents(self.ordering)

        def revise(i: int, own: Opinion, peers: list[Opinion]) -> Opinion:
            out = self.revise(agent=case.agents[i].name, previous_opinion=own.text, shared_context=context,
                              other_opinions=render_messages(peers))
            return Opinion.from_opinion(case, i, round_, out)

        if self.topology == "chain":
            current: list[Opinion] = []
            for i in range(case.n):
                peers = [current[j] for j in neighbours("chain", i, case.n)]  # same-round predecessor
                current.append(revise(i, previous[i], peers))
                turns.append(self.opinion_turn(current[-1], peers))
            return current
        peers = [[previous[j] for j in neighbours(self.topology, i, case.n)] for i in range(case.n)]
        current = thread_map(lambda i: revise(i, previous[i], peers[i]), range(case.n))
        turns.extend(self.opinion_turn(m, peers[m.agent]) for m in current)
        return current

    def opinion_turn(self, message: Opinion, peers: list[Opinion], saw_private: bool = False) -> dict[str, Any]:
        return turn("opinion", message.agent, message.round, [p.agent for p in peers], message.output(),
                    saw_shared_context=self.ordering == "shared-first", saw_private_evidence=saw_private)

    # -- closing ------------------------------------------------------------------------------------------
    def name_misleading(self, case: Case, final: list[Opinion], turns: list[dict]) -> int:
        """The summarizer names the misleading agent from the final opinions; the answer is constrained to
        the team's agents (the authors' code falls back to agent 0 for an unusable answer; so do we)."""
        ids = tuple(a.agent for a in case.agents)
        signature = self.summarize.signature.with_updated_fields("misleading_agent", type_=Literal[ids])
        verdict = self.summarize(opinions=render_messages(final), signature=signature)
        named = case.index(verdict.misleading_agent)
        misleading = named if named is not None else case.agents[0].agent
        turns.append(turn("name_misleading", "summarizer", None, [m.agent for m in final],
                          {"misleading_agent": misleading, "raw": verdict.misleading_agent,
                           "reason": verdict.reason}))
        return misleading


@saveable
class Confidence(StandardCollaboration):
    """Confidence-aware collaboration (appendix D.4): standard collaboration in which every opinion carries its
    author's confidence (1-100), shown to the other agents as an input signal.

    Confidences outside 1-100 are clamped into range. Otherwise identical to
    ``StandardCollaboration(rounds, "all-to-all", ordering)``.
    """

    program_name = "confidence"
    opening_signature = ShareOpinionWithConfidence
    revise_signature = ReviseOpinionWithConfidence

    def __init__(self, rounds: int = 3, ordering: str = "private-first"):
        super().__init__(rounds=rounds, topology="all-to-all", ordering=ordering)
