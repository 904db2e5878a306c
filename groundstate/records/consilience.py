"""The records of hidden-profile discussions (Consilience): tasks, messages, transcripts, beliefs, and the
interface every discussion agent implements.

A :class:`HiddenProfileTask` gives every agent the shared facts and each agent its own private facts; the pooled
private facts identify the correct option. Agents post :class:`Message` objects to a public :class:`Transcript`
and report a :class:`Belief` (a probability per option, a vote and a confidence). :class:`DiscussionAgent` is what
protocols and controllers need from an agent, LM or simulated; :data:`ACTIONS` are the communication actions.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ACTIONS: tuple[str, ...] = ("Challenge", "Clarify", "SeekEvidence", "Route", "Vote")
"""Communication actions (§3.1.2). ``Vote`` ends the discussion where a protocol allows it."""
COMM_ACTIONS: tuple[str, ...] = ACTIONS[:4]


class HiddenProfileTask(BaseModel):
    """A hidden-profile decision task.

    Every agent sees ``description``, ``options`` and ``shared``; agent ``i`` also sees ``private[i]``. The
    pooled private facts identify ``correct``; the shared facts alone may point elsewhere.

    Attributes:
        id, name, description: identification and the scenario every agent reads.
        shared: facts every agent knows.
        private: one list of private facts per agent (``len(private)`` is the number of agents).
        options: the answer set (option texts, or letters such as ``A``-``D`` for generated tasks).
        correct: the correct option (one of ``options``).
        rationale: an optional explanation (HiddenBench).
        support: optional per-fact support for each option, ``{fact text: {option: weight}}``, used by the
            simulated agents (generated travel tasks carry it; a task can be annotated by hand).
        structure: optional generator structure (the travel plans and preferences).
        provenance: where it came from.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str = ""
    description: str
    shared: list[str] = Field(default_factory=list)
    private: list[list[str]] = Field(min_length=2)
    options: list[str] = Field(min_length=2)
    correct: str
    rationale: str | None = None
    support: dict[str, dict[str, float]] = Field(default_factory=dict)
    structure: dict[str, Any] | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @field_validator("support")
    @classmethod
    def _finite_support(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for fact, weights in value.items():
            for option, weight in weights.items():
                if not math.isfinite(weight):
                    raise ValueError(f"support of '{fact[:60]}' for option '{option}' must be finite (got {weight})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> HiddenProfileTask:
        if self.correct not in self.options:
            raise ValueError(f"correct answer '{self.correct}' is not one of the options")
        if len(set(self.options)) != len(self.options):
            raise ValueError("options must be distinct")
        for i, facts in enumerate(self.private):
            if any(not str(f).strip() for f in facts):
                raise ValueError(f"agent {i} has an empty private fact")
        if any(not str(f).strip() for f in self.shared):
            raise ValueError("shared facts must not be empty")
        return self

    @property
    def n_agents(self) -> int:
        return len(self.private)

    def facts_of(self, agent: int) -> list[str]:
        """Everything agent ``agent`` knows before discussion: shared facts then its private facts."""
        return [*self.shared, *self.private[agent]]

    def all_facts(self) -> list[str]:
        """Shared facts then every agent's private facts (what Full-Info agents see)."""
        return [*self.shared, *(f for facts in self.private for f in facts)]


class Message(BaseModel):
    """One message on the public transcript."""

    model_config = ConfigDict(extra="forbid")

    speaker: int = Field(ge=0)
    action: str | None = None
    round: int = Field(ge=0)
    text: str
    words: int = Field(default=0, ge=0)
    facts: list[str] = Field(default_factory=list, description="facts the message states, when known (simulation)")


class Transcript(BaseModel):
    """The ordered public transcript of a discussion."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(default_factory=list)

    @property
    def words(self) -> int:
        return sum(m.words for m in self.messages)

    def text(self, limit: int | None = None) -> str:
        """The transcript as ``Agent i (action): text`` lines (the last ``limit`` messages when given)."""
        messages = self.messages[-limit:] if limit else self.messages
        return "\n".join(f"Agent {m.speaker}" + (f" ({m.action})" if m.action else "") + f": {m.text}"
                         for m in messages) or "(no messages yet)"

    def spoken(self, n_agents: int) -> list[int]:
        """How many messages each agent has posted."""
        counts = [0] * n_agents
        for m in self.messages:
            if m.speaker < n_agents:
                counts[m.speaker] += 1
        return counts

    def with_message(self, message: Message) -> Transcript:
        """A new transcript with ``message`` appended (transcripts are treated as values)."""
        return Transcript.model_construct(messages=[*self.messages, message])


class Belief(BaseModel):
    """One agent's belief: a probability per option (summing to 1), its vote and its confidence."""

    model_config = ConfigDict(extra="forbid")

    probs: dict[str, float]
    vote: str
    confidence: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _normalized(self) -> Belief:
        total = sum(self.probs.values())
        if any(p < 0 for p in self.probs.values()) or abs(total - 1.0) > 1e-6:
            raise ValueError(f"probabilities must be non-negative and sum to 1 (sum {total:.4f})")
        if self.vote not in self.probs:
            raise ValueError(f"vote '{self.vote}' is not an option")
        return self

    @classmethod
    def from_scores(cls, options: list[str], weights: list[float], vote: str | None = None,
                    confidence: float | None = None) -> Belief:
        """Normalize non-negative ``weights`` into a belief (uniform if they are all zero or invalid)."""
        clean = [w if isinstance(w, (int, float)) and w == w and w > 0 else 0.0 for w in weights]
        total = sum(clean)
        probs = [w / total for w in clean] if total > 0 else [1.0 / len(options)] * len(options)
        best = max(range(len(options)), key=lambda k: probs[k])
        top = options[best]
        return cls(probs=dict(zip(options, probs, strict=True)), vote=vote if vote in options else top,
                   confidence=min(1.0, max(0.0, probs[best] if confidence is None else confidence)))


@runtime_checkable
class DiscussionAgent(Protocol):
    """What a hidden-profile discussion needs from an agent; LM agents and simulated agents both implement it.

    Agents are stateless with respect to the discussion: everything they know comes from ``task`` (their own
    facts, by ``index``) and the public ``transcript`` they are given, so a protocol or a controller can ask
    for counterfactual branches (the same transcript, different actions) without copying agents.
    """

    index: int

    def belief(self, task: HiddenProfileTask, transcript: Transcript, round: int) -> Belief:
        """The agent's current probability per option (with its vote and confidence)."""

    def speak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int) -> Message:
        """One message under ``action`` (Challenge, Clarify, SeekEvidence, Route), or a free turn (``None``)."""

    def vote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        """The final vote (and confidence) after the discussion."""


# =========================================================================================================
