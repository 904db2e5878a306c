"""Building blocks of the collaboration baselines: the case, messages, topologies, speaking orders, votes.

Nothing here calls an LM; :mod:`groundstate.programs.reground.baselines` composes these pieces with predictors.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from groundstate.programs.common import agent_index, as_data, coerce_agents, format_options, format_sources
from groundstate.records import LETTERS, AgentEvidence

TOPOLOGIES = ("all-to-all", "chain", "tree")
ORDERINGS = ("shared-first", "private-first")
NOT_SHARED_YET = "(not shared yet: the team discusses its private evidence first)"
NO_MESSAGES = "(none)"
CONFIDENCE_RANGE = (1, 100)

V = TypeVar("V", bound=Hashable)


@dataclass
class Case:
    """One episode's inputs, normalized once: coerced agents, the shared context, question and option text."""

    agents: list[AgentEvidence]
    shared_context: str
    question: str
    options: str

    @classmethod
    def build(cls, agents: Iterable[AgentEvidence | Mapping[str, Any]], shared_context: str, question: str,
              options: Mapping[str, str] | str) -> Case:
        coerced = coerce_agents(agents)
        if not coerced:
            raise ValueError("a collaboration needs at least one agent")
        return cls(coerced, as_data(shared_context), as_data(question), format_options(options))

    @property
    def n(self) -> int:
        return len(self.agents)

    @property
    def team(self) -> str:
        """The roster shown to agents: one name per line (the number in each name is the agent's index)."""
        return "\n".join(agent.name for agent in self.agents)

    def context_for_agents(self, ordering: str) -> str:
        """What agents see as the shared context during the discussion under ``ordering``."""
        if ordering == "private-first":
            return NOT_SHARED_YET
        return self.shared_context or "(no shared context)"

    def sources(self, indices: Iterable[int] | None = None) -> str:
        """The agents' private evidence, one block per agent (all agents, or only ``indices``)."""
        chosen = self.agents if indices is None else [self.agents[i] for i in indices]
        return format_sources(chosen)

    def index(self, value: Any) -> int | None:
        """An agent index from an LM output; ``-1``, out-of-range values and junk become ``None``."""
        if isinstance(value, str) and value.strip().startswith("-"):
            return None
        return agent_index(value, self.agents)


@dataclass
class Opinion:
    """One agent's turn: what it told the others."""

    agent: int
    name: str
    round: int
    text: str
    answer: str | None
    suspect: int | None
    suspect_name: str | None = None
    confidence: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    kind: str = "assessment"  # or "opinion": free text only (standard collaboration as the authors run it)

    @classmethod
    def from_prediction(cls, case: Case, agent: int, round_: int, prediction: Any) -> Opinion:
        """Read ``assessment``, ``answer``, ``suspected_misleading`` (and ``confidence``, if any) from a prediction.

        The assessment is model-produced text that later prompts quote, so it goes through
        :func:`~groundstate.programs.common.as_data` like evidence."""
        suspect = case.index(getattr(prediction, "suspected_misleading", None))
        answer = getattr(prediction, "answer", None)
        raw_confidence = getattr(prediction, "confidence", None)
        return cls(agent=agent, name=case.agents[agent].name, round=round_,
                   text=as_data(str(getattr(prediction, "assessment", "") or "").strip()),
                   answer=answer if answer in LETTERS else None, suspect=suspect,
                   suspect_name=case.agents[suspect].name if suspect is not None else None,
                   confidence=clamp_confidence(raw_confidence) if raw_confidence is not None else None)

    @classmethod
    def from_opinion(cls, case: Case, agent: int, round_: int, prediction: Any) -> Opinion:
        """Read ``opinion`` (and ``confidence``, if any) from a prediction; model text goes through ``as_data``."""
        raw_confidence = getattr(prediction, "confidence", None)
        return cls(agent=agent, name=case.agents[agent].name, round=round_,
                   text=as_data(str(getattr(prediction, "opinion", "") or "").strip()), answer=None, suspect=None,
                   confidence=clamp_confidence(raw_confidence) if raw_confidence is not None else None,
                   kind="opinion")

    def render(self) -> str:
        """How the message appears to whoever sees it: author, round, text, and its stance (opinions: author and
        text, with the confidence when there is one)."""
        if self.kind == "opinion":
            suffix = f" (confidence {self.confidence}/100)" if self.confidence is not None else ""
            return f"{self.name}: {self.text}{suffix}"
        stance = [f"favours {self.answer or 'no option'}", f"suspects {self.suspect_name or 'no one'}"]
        if self.confidence is not None:
            stance.append(f"confidence {self.confidence}/100")
        return f"{self.name}, round {self.round}: {self.text}\n({'; '.join(stance)})"

    def output(self) -> dict[str, Any]:
        """The JSON-able record of the message for traces."""
        if self.kind == "opinion":
            return {"opinion": self.text, **({"confidence": self.confidence} if self.confidence is not None else {})}
        out = {"assessment": self.text, "answer": self.answer, "suspected_misleading": self.suspect}
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out


def render_messages(messages: Sequence[Opinion]) -> str:
    """Messages in order, separated by blank lines; ``(none)`` when there are none."""
    return "\n\n".join(m.render() for m in messages) if messages else NO_MESSAGES


def clamp_confidence(value: Any) -> int:
    """A confidence forced into 1-100 (non-numbers become the midpoint, 50)."""
    low, high = CONFIDENCE_RANGE
    try:
        number = int(round(float(value)))
    except (TypeError, ValueError):
        return (low + high) // 2
    return max(low, min(high, number))


def neighbours(topology: str, agent: int, n: int) -> list[int]:
    """Whose messages ``agent`` sees in ``topology``.

    ``all-to-all``: every other agent (previous round). ``tree``: agents form a binary tree in index order
    (agent 0 is the root); an agent sees its parent ``(i - 1) // 2`` and its children ``2i + 1`` and ``2i + 2``
    (previous round). ``chain``: agents speak one after another in index order and agent ``i`` sees agent
    ``i - 1`` (same round); agent 0, the head, sees no one.
    """
    if topology == "all-to-all":
        return [j for j in range(n) if j != agent]
    if topology == "tree":
        linked = ([(agent - 1) // 2] if agent > 0 else []) + [c for c in (2 * agent + 1, 2 * agent + 2) if c < n]
        return sorted(linked)
    if topology == "chain":
        return [agent - 1] if agent > 0 else []
    raise ValueError(f"topology must be one of {TOPOLOGIES}, got '{topology}'")


def speaking_order(agents: Sequence[AgentEvidence], seed: int) -> list[int]:
    """A random permutation of the agents, fixed by ``seed`` and the agents' evidence (stable across processes)."""
    digest = hashlib.sha256()
    digest.update(str(seed).encode())
    for agent in agents:
        digest.update(b"\x00" + agent.name.encode() + b"\x00" + agent.evidence.encode())
    order = list(range(len(agents)))
    random.Random(int(digest.hexdigest(), 16)).shuffle(order)
    return order


def turn(step: str, speaker: int | str, round_: int | None, saw: Iterable[int], output: Mapping[str, Any],
         **extra: Any) -> dict[str, Any]:
    """One trace entry: which step, who spoke, in which round, whose messages it saw, and what it produced."""
    return {"step": step, "speaker": speaker, "round": round_, "saw": sorted(set(saw)), **extra,
            "output": dict(output)}
