"""Standard collaboration (paper §5.1, appendix D.3), the baseline every relative gain is measured against, and its
confidence-weighted variant.

Agents exchange assessments for a number of rounds over a topology (all-to-all, chain or tree); a summarizer
names the misleading agent (T1), an updater rebuilds the shared state (T2), and the decision comes from that
state (T3). The choices made where the paper is silent are listed in :mod:`~groundstate.programs.reground.baselines`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import saveable
from groundstate.programs.reground.baseline import Agents, CollaborationBaseline, check_choice, check_count
from groundstate.programs.reground.turns import (
    ORDERINGS,
    TOPOLOGIES,
    Case,
    Opinion,
    neighbours,
    render_messages,
)
from groundstate.signatures.collaboration import (
    NameMisleadingAgent,
    ShareAssessment,
    ShareAssessmentWithConfidence,
    UpdateSharedState,
)
from groundstate.signatures.resolution import ChooseOption


@saveable
class StandardCollaboration(CollaborationBaseline):
    """Standard collaboration (appendix D.3): agents share assessments over a topology, then a summarizer
    names the misleading agent, an updater writes the shared state, and the decision is made from the state.

    Round 0: every agent assesses from its own evidence (plus the shared context under ``shared-first``), all
    at once. Rounds 1..``rounds``: ``all-to-all`` agents see every other agent's previous-round message;
    ``tree`` agents see their parent and children's previous-round messages (agents form a binary tree in index
    order); ``chain`` agents speak in index order and agent ``i`` sees agent ``i - 1``'s message from the same
    round (agent 0, the head, sees none). Every agent is warned that information may be misleading.

    Args:
        rounds: exchange rounds after the opening round (0 = opening round only).
        topology: ``all-to-all``, ``chain`` or ``tree``.
        ordering: ``shared-first`` (agents see the shared context from round 0) or ``private-first`` (the
            discussion uses private evidence only; the shared context first reaches the updater), as in §6.
    """

    program_name = "standard"
    signature: type[dspy.Signature] = ShareAssessment

    def __init__(self, rounds: int = 2, topology: str = "all-to-all", ordering: str = "shared-first"):
        super().__init__()
        self.rounds = check_count("rounds", rounds, 0)
        self.topology = check_choice("topology", topology, TOPOLOGIES)
        self.ordering = check_choice("ordering", ordering, ORDERINGS)
        self.assess = dspy.Predict(self.signature)
        self.summarize = dspy.Predict(NameMisleadingAgent)
        self.update = dspy.Predict(UpdateSharedState)
        self.decide = dspy.Predict(ChooseOption)

    def config(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "topology": self.topology, "ordering": self.ordering}

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str
                ) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        turns: list[dict] = []
        rounds = self.discuss(case, turns)
        return self.conclude(case, turns, discussion=render_messages([m for r in rounds for m in r]),
                             opinions=render_messages(rounds[-1]), speakers=range(case.n))

    def discuss(self, case: Case, turns: list[dict]) -> list[list[Opinion]]:
        """All rounds of messages (round 0 first), appending one trace entry per turn."""
        rounds = [self.opening_round(case, self.ordering)]
        turns.extend(self.assess_turn(m, [], self.ordering) for m in rounds[0])
        for r in range(1, self.rounds + 1):
            rounds.append(self.exchange_round(case, r, rounds[-1], turns))
        return rounds

    def exchange_round(self, case: Case, round_: int, previous: list[Opinion], turns: list[dict]) -> list[Opinion]:
        if self.topology == "chain":
            current: list[Opinion] = []
            for i in range(case.n):
                peers = [current[j] for j in neighbours("chain", i, case.n)]  # same-round predecessor
                current.append(self.speak(case, i, round_, peers, self.ordering, turns))
            return current
        peers = [[previous[j] for j in neighbours(self.topology, i, case.n)] for i in range(case.n)]
        current = thread_map(lambda i: self.speak(case, i, round_, peers[i], self.ordering), range(case.n))
        turns.extend(self.assess_turn(m, peers[m.agent], self.ordering) for m in current)
        return current


@saveable
class Confidence(StandardCollaboration):
    """Confidence-aware collaboration (appendix D.4): all-to-all discussion where every message carries its
    author's confidence (1-100), shown to peers, the summarizer and the updater as an input signal.

    Confidences outside 1-100 are clamped into range. Otherwise identical to
    ``StandardCollaboration(rounds, "all-to-all", ordering)``.
    """

    program_name = "confidence"
    signature = ShareAssessmentWithConfidence

    def __init__(self, rounds: int = 2, ordering: str = "shared-first"):
        super().__init__(rounds=rounds, topology="all-to-all", ordering=ordering)
