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

Opinions have no length limit, as in the authors' prompts (``standard/prompts/independent.txt`` asks to share
the important information "briefly", ``discuss.txt`` for the updated opinion only; neither names a length, and the
paper gives none). ``opinion_cap=True`` keeps the earlier release's cap of 600 characters per opinion (the
prompt asks for at most 600 characters), which shortens the baseline every gain is measured against.

Variants kept as options: ``topology`` ``chain`` (agents speak in index order within a round and agent ``i`` sees
agent ``i - 1``'s opinion from the same round) or ``tree`` (a binary tree in index order: an agent sees its parent
and children from the previous round), and ``ordering="shared-first"`` (every opinion turn also sees the shared
context).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import acall_stage, saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, check_choice, check_count
from groundstate.programs.reground.turns import ORDERINGS, TOPOLOGIES, Case, Opinion, neighbours, render_messages, turn
from groundstate.signatures.collaboration import (
    FindMisleadingAgent,
    ReviseOpinion,
    ReviseOpinionCapped,
    ReviseOpinionWithConfidence,
    ReviseOpinionWithConfidenceCapped,
    ShareOpinion,
    ShareOpinionCapped,
    ShareOpinionWithConfidence,
    ShareOpinionWithConfidenceCapped,
    UpdateContext,
    team_member,
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
        opinion_cap: cap every opinion at 600 characters (the earlier release; off by default, as the authors
            run it).
    """

    program_name = "standard"
    opening_signature: type[dspy.Signature] = ShareOpinion
    revise_signature: type[dspy.Signature] = ReviseOpinion
    capped_signatures: tuple[type[dspy.Signature], type[dspy.Signature]] = (ShareOpinionCapped, ReviseOpinionCapped)
    #: The value manifests saved before ``opinion_cap`` existed were built with (see ``registry.validate_kwargs``).
    legacy_kwargs = {"opinion_cap": True}

    def __init__(self, rounds: int = 3, topology: str = "all-to-all", ordering: str = "private-first",
                 opinion_cap: bool = False):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 0)
        self.topology = check_choice("topology", topology, TOPOLOGIES)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.opinion_cap = bool(opinion_cap)
        opening, revise = self.capped_signatures if self.opinion_cap else (self.opening_signature,
                                                                          self.revise_signature)
        self.open = dspy.Predict(opening)
        self.revise = dspy.Predict(revise)
        self.summarize = dspy.Predict(FindMisleadingAgent)
        self.update = dspy.Predict(UpdateContext)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "topology": self.topology, "ordering": self.ordering,
                **({"opinion_cap": True} if self.opinion_cap else {})}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        final = self.discuss(case, turns)[-1]
        misleading = self.name_misleading(case, final, turns)
        trusted = [m for m in final if m.agent != misleading]
        state = self.written(trusted, self.update(**self.update_args(case, trusted)), turns)
        return self.finish(case, misleading, state, turns)

    async def aforward(self, agents: Agents, shared_context: str, question: str,
                       options: Mapping[str, str] | str) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``, same result: every call awaits the predictor's
        ``acall``, each round's simultaneous turns gathered (``asyncio.gather``)."""
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        final = (await self.adiscuss(case, turns))[-1]
        misleading = await self.aname_misleading(case, final, turns)
        trusted = [m for m in final if m.agent != misleading]
        state = self.written(trusted, await acall_stage(self.update, **self.update_args(case, trusted)), turns)
        return await self.afinish(case, misleading, state, turns)

    @staticmethod
    def update_args(case: Case, trusted: list[Opinion]) -> dict[str, str]:
        """The updater's inputs: the initial shared context and the final opinions of the agents not named."""
        return {"shared_context": case.shared_context or "(no shared context)", "opinions": render_messages(trusted)}

    @staticmethod
    def written(trusted: list[Opinion], written: Any, turns: list[dict]) -> str:
        """The updater's state, traced."""
        state = str(written.state or "").strip()
        turns.append(turn("update_state", "updater", None, [m.agent for m in trusted], {"state": state},
                          saw_shared_context=True, saw_private_evidence=False))
        return state

    # -- the discussion ------------------------------------------------------------------------------------
    def discuss(self, case: Case, turns: list[dict]) -> list[list[Opinion]]:
        """Every round's opinions, the opening turn first, appending one trace entry per turn."""
        rounds = [thread_map(lambda i: Opinion.from_opinion(case, i, 0, self.open(**self.open_args(case, i))),
                             range(case.n))]
        turns.extend(self.opinion_turn(m, [], saw_private=True) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            rounds.append(self.exchange_round(case, r, rounds[-1], turns))
        return rounds

    async def adiscuss(self, case: Case, turns: list[dict]) -> list[list[Opinion]]:
        """:meth:`discuss`, each round's simultaneous turns gathered."""
        opened = await asyncio.gather(*(acall_stage(self.open, **self.open_args(case, i)) for i in range(case.n)))
        rounds = [[Opinion.from_opinion(case, i, 0, out) for i, out in enumerate(opened)]]
        turns.extend(self.opinion_turn(m, [], saw_private=True) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            rounds.append(await self.aexchange_round(case, r, rounds[-1], turns))
        return rounds

    def exchange_round(self, case: Case, round_: int, previous: list[Opinion], turns: list[dict]) -> list[Opinion]:
        def revise(i: int, peers: list[Opinion]) -> Opinion:
            return Opinion.from_opinion(case, i, round_, self.revise(**self.revise_args(case, i, previous, peers)))

        if self.topology == "chain":
            current: list[Opinion] = []
            for i in range(case.n):
                peers = [current[j] for j in neighbours("chain", i, case.n)]  # same-round predecessor
                current.append(revise(i, peers))
                turns.append(self.opinion_turn(current[-1], peers))
            return current
        peers = self.round_peers(case, previous)
        current = thread_map(lambda i: revise(i, peers[i]), range(case.n))
        turns.extend(self.opinion_turn(m, peers[m.agent]) for m in current)
        return current

    async def aexchange_round(self, case: Case, round_: int, previous: list[Opinion], turns: list[dict]
                              ) -> list[Opinion]:
        """:meth:`exchange_round` with the turns awaited (in a chain one after another, otherwise gathered)."""
        async def revise(i: int, peers: list[Opinion]) -> Opinion:
            out = await acall_stage(self.revise, **self.revise_args(case, i, previous, peers))
            return Opinion.from_opinion(case, i, round_, out)

        if self.topology == "chain":
            current: list[Opinion] = []
            for i in range(case.n):
                peers = [current[j] for j in neighbours("chain", i, case.n)]
                current.append(await revise(i, peers))
                turns.append(self.opinion_turn(current[-1], peers))
            return current
        peers = self.round_peers(case, previous)
        current = list(await asyncio.gather(*(revise(i, peers[i]) for i in range(case.n))))
        turns.extend(self.opinion_turn(m, peers[m.agent]) for m in current)
        return current

    def open_args(self, case: Case, agent: int) -> dict[str, str]:
        """The opening turn's inputs: the agent's private evidence (and the shared context under shared-first)."""
        person = case.agents[agent]
        return {"agent": person.name, "private_evidence": person.evidence,
                "shared_context": case.context_for_agents(self.ordering)}

    def revise_args(self, case: Case, agent: int, previous: list[Opinion], peers: list[Opinion]) -> dict[str, str]:
        """A revision's inputs: the agent's previous opinion and the peers' opinions it sees."""
        return {"agent": case.agents[agent].name, "previous_opinion": previous[agent].text,
                "shared_context": case.context_for_agents(self.ordering), "other_opinions": render_messages(peers)}

    def round_peers(self, case: Case, previous: list[Opinion]) -> list[list[Opinion]]:
        """Every agent's peers from the previous round under the (all-to-all or tree) topology."""
        return [[previous[j] for j in neighbours(self.topology, i, case.n)] for i in range(case.n)]

    def opinion_turn(self, message: Opinion, peers: list[Opinion], saw_private: bool = False) -> dict[str, Any]:
        return turn("opinion", message.agent, message.round, [p.agent for p in peers], message.output(),
                    saw_shared_context=self.ordering == "shared-first", saw_private_evidence=saw_private)

    # -- closing ------------------------------------------------------------------------------------------
    def name_misleading(self, case: Case, final: list[Opinion], turns: list[dict]) -> int:
        """The summarizer names the misleading agent from the final opinions; the answer is constrained to
        the team's agents (the authors' code falls back to agent 0 for an unusable answer; so do we)."""
        return self.named(case, final, self.summarize(**self.summarize_args(case, final)), turns)

    async def aname_misleading(self, case: Case, final: list[Opinion], turns: list[dict]) -> int:
        """:meth:`name_misleading` with ``await self.summarize.acall``."""
        return self.named(case, final, await acall_stage(self.summarize, **self.summarize_args(case, final)), turns)

    def summarize_args(self, case: Case, final: list[Opinion]) -> dict[str, Any]:
        """The summarizer's inputs: the final opinions, the answer constrained to the team's agents
        (:func:`~groundstate.signatures.collaboration.team_member`: an ``enum`` to schema-constrained decoding;
        ``"Agent 3"`` and the like read from other LMs)."""
        signature = self.summarize.signature.with_updated_fields(
            "misleading_agent", type_=team_member(a.agent for a in case.agents))
        return {"opinions": render_messages(final), "signature": signature}

    @staticmethod
    def named(case: Case, final: list[Opinion], verdict: Any, turns: list[dict]) -> int:
        """The agent the summarizer named (agent 0 for an unusable answer), traced."""
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
    ``StandardCollaboration(rounds, "all-to-all", ordering, opinion_cap)`` (opinions uncapped by default, as
    Standard's).
    """

    program_name = "confidence"
    opening_signature = ShareOpinionWithConfidence
    revise_signature = ReviseOpinionWithConfidence
    capped_signatures = (ShareOpinionWithConfidenceCapped, ReviseOpinionWithConfidenceCapped)

    def __init__(self, rounds: int = 3, ordering: str = "private-first", opinion_cap: bool = False):
        super().__init__(rounds=rounds, topology="all-to-all", ordering=ordering, opinion_cap=opinion_cap)
