"""Pydantic records shared by programs and evaluation.

OffQuery (ReGround's benchmark): :class:`OffQueryInstance` holds one collaboration episode: the agents'
private evidence, the reliable and (optionally) corrupted shared context, the question and options, the
gold answer, which agents are misleading, and the T2 facts with their keep (1) / exclude (0) labels. A
``condition`` chooses what a program sees (:mod:`groundstate.conditions`): which shared context, which evidence.

Programs receive only :meth:`OffQueryInstance.inputs`; the labels stay with the record and are used by the
metrics outside the program.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from groundstate import conditions
from groundstate.conditions import CONDITIONS, CORRUPTED_CONDITIONS, RELIABLE_PRIVATE_CONDITIONS, Condition  # noqa: F401

OptionLetter = Literal["A", "B", "C", "D"]
LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
Domain = Literal["healthcare", "disaster"]


class AgentEvidence(BaseModel):
    """One agent's private evidence, as a program sees it."""

    model_config = ConfigDict(extra="forbid")

    agent: int = Field(ge=0, description="the agent's index (0-based, the order of the instance's agents)")
    role: str | None = Field(default=None, description="the agent's role or department, when known")
    evidence: str = Field(min_length=1, pattern=r"\S", description="the agent's private text")

    @property
    def name(self) -> str:
        """``Agent 2``: how programs refer to the agent in prompts, a neutral id only.

        The role never reaches a prompt: in the published OffQuery files the misleading agent is an extra agent
        with no category, so a role in its name would single it out (the authors' prompts use bare ids too).
        """
        return f"Agent {self.agent}"

    @property
    def label(self) -> str:
        """``Agent 2 (laboratory)``: the name with the role, for reports and traces people read."""
        return f"Agent {self.agent}" + (f" ({self.role})" if self.role else "")


class T2Fact(BaseModel):
    """An atomic fact scored by T2: label 1 = must be kept in the state, 0 = must be excluded."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, pattern=r"\S")
    label: Literal[0, 1]


class OffQueryInstance(BaseModel):
    """One OffQuery collaboration episode.

    Attributes:
        id: unique id.
        domain: ``healthcare`` or ``disaster``.
        split: a split tag (``healthcare-s``, ``healthcare-i``, ``disaster``, ``train``, ...) or ``None``.
        agents: the agents' private evidence, in order (misleading agents included).
        shared_context: the reliable shared context.
        corrupted_context: the corrupted shared context, if the instance has one.
        question: the question (disaster tasks have none: the task is to choose a response).
        options: the options ``A``-``D``.
        answer: the correct option.
        wrong_answer: the wrong option the corruption pushes, if known.
        misleading: indices of the misleading agents (one in the main setting, several in stress variants,
            none when all private evidence is reliable).
        misleading_statements: for statement-level (distributed) misinformation, the corrupted statements.
        t2_facts: the T2 facts with their labels.
        variant: how the instance was made (``main``, ``misleading-shared``, ``multi-misleading``,
            ``distributed``) when known.
        provenance: where it came from (file and position, builder, seed, source case id, ...).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    domain: Domain
    split: str | None = None
    agents: list[AgentEvidence] = Field(min_length=1)
    shared_context: str
    corrupted_context: str | None = None
    question: str | None = None
    options: dict[OptionLetter, str]
    answer: OptionLetter
    wrong_answer: OptionLetter | None = None
    misleading: list[int] = Field(default_factory=list)
    misleading_statements: list[str] = Field(default_factory=list)
    t2_facts: list[T2Fact] = Field(default_factory=list)
    variant: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @field_validator("options")
    @classmethod
    def _four_options(cls, value: dict[str, str]) -> dict[str, str]:
        if sorted(value) != list(LETTERS):
            raise ValueError(f"options must be exactly A, B, C and D (got {sorted(value)})")
        if any(not str(v).strip() for v in value.values()):
            raise ValueError("options must not be empty")
        return {k: value[k] for k in LETTERS}

    @model_validator(mode="after")
    def _consistent(self) -> OffQueryInstance:
        n = len(self.agents)
        if [a.agent for a in self.agents] != list(range(n)):
            raise ValueError("agents must be numbered 0..n-1 in order")
        bad = [i for i in self.misleading if not 0 <= i < n]
        if bad:
            raise ValueError(f"misleading index {bad[0]} is out of range for {n} agents")
        if len(set(self.misleading)) != len(self.misleading):
            raise ValueError("misleading indices must be distinct")
        if self.wrong_answer is not None and self.wrong_answer == self.answer:
            raise ValueError("wrong_answer must differ from answer")
        return self

    # -- views -----------------------------------------------------------------------------------------
    def context_for(self, condition: Condition = "unreliable") -> str:
        """The shared context a program sees under ``condition`` (:func:`groundstate.conditions.shared_context_for`)."""
        return conditions.shared_context_for(self, condition)

    def under(self, condition: Condition = "unreliable") -> OffQueryInstance:
        """The instance as ``condition`` shows it to programs and metrics (:func:`groundstate.conditions.under`)."""
        return conditions.under(self, condition)

    def inputs(self, condition: Condition = "unreliable") -> dict[str, Any]:
        """The keyword arguments every OffQuery program takes under ``condition`` (:meth:`under`): agents, shared
        context, question, options."""
        view = self.under(condition)
        return {
            "agents": [a.model_copy() for a in view.agents],
            "shared_context": view.context_for(condition),
            "question": view.question or default_question(view.domain),
            "options": dict(view.options),
        }

    def labels(self) -> dict[str, Any]:
        """The gold labels the metrics use (never shown to a program)."""
        return {
            "answer": self.answer,
            "misleading": list(self.misleading),
            "misleading_roles": [self.agents[i].role for i in self.misleading],
            "t2_facts": [f.model_dump() for f in self.t2_facts],
            "domain": self.domain,
        }

    def to_example(self, condition: Condition = "unreliable"):
        """A ``dspy.Example`` with the program inputs marked as inputs and the labels alongside."""
        import dspy

        view = self.under(condition)
        inputs = view.inputs(condition)
        return dspy.Example(id=self.id, condition=condition, **inputs, **view.labels()).with_inputs(*inputs)

    def reliable_information(self) -> str:
        """Everything reliable about the episode in one text (what an Oracle sees).

        Generated instances keep each misleading agent's truthful evidence; published ones keep the original
        context; otherwise it is the reliable shared context plus the non-misleading agents' evidence.
        """
        structure = (self.provenance or {}).get("structure") or {}
        original = (self.provenance or {}).get("original_context")
        if isinstance(original, str) and original.strip():
            return original
        truthful = structure.get("reliable_evidence", {})
        parts = [self.shared_context]
        for agent in self.agents:
            text = truthful.get(str(agent.agent))
            if text is None and agent.agent in self.misleading:
                continue
            parts.append(text if text is not None else agent.evidence)
        return "\n".join(p for p in parts if p)

    @property
    def n_agents(self) -> int:
        return len(self.agents)

    def agent_label(self, index: int) -> str:
        """The neutral name of agent ``index`` (``Agent 2``), as programs and feedback show it."""
        return self.agents[index].name


def default_question(domain: str) -> str:
    """The task statement used when an instance has no question (disaster tasks)."""
    if domain == "disaster":
        return "Which response strategy should the coordination team adopt given the current situation?"
    return "Which of the following is the most likely diagnosis for the patient?"


def options_text(options: dict[str, str]) -> str:
    """``A: ...`` lines, in letter order."""
    return "\n".join(f"{k}: {options[k]}" for k in sorted(options))


# =========================================================================================================
# Hidden-profile discussions (Consilience)
# =========================================================================================================

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
# Diverse Hypothesis Deliberation
# =========================================================================================================

AnswerKind = Literal["number", "option", "options", "expression", "text"]


class Problem(BaseModel):
    """A problem for Diverse Hypothesis Deliberation.

    Attributes:
        id: unique id.
        question: the problem text.
        answer: the gold answer as text (``"2.5"``, ``"B"``, ``"ACD"``, an expression, free text).
        kind: ``number`` (with ``unit`` and a relative ``tolerance``), ``option`` (one letter), ``options``
            (several letters, e.g. JEEBench MCQ(multiple)), ``expression`` or ``text``.
        unit: the unit of a numeric answer, if any.
        tolerance: the relative tolerance for numeric answers (default 5%, SciBench's convention).
        source: the benchmark (``scibench/atkins``, ``jeebench``, ...).
        metadata: anything else from the source record.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str
    kind: AnswerKind = "text"
    unit: str | None = None
    tolerance: float = Field(default=0.05, ge=0)
    source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "answer", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class HypothesisMessage(BaseModel):
    """One cached hypothesizer message (DHD): a role's structured proposal for a problem."""

    model_config = ConfigDict(extra="forbid")

    problem_id: str
    index: int = Field(ge=0, description="position in the problem's message pool (0..K-1)")
    role: str
    proposed_answer: str = ""
    reasoning_direction: str = ""
    key_idea: str = ""
    critical_assumption: str = ""
    what_to_check: str = ""
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    error: str | None = Field(default=None, description="an operational failure while generating it")
