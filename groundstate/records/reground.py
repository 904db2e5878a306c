"""The records of ReGround's benchmark, OffQuery.

:class:`OffQueryInstance` holds one collaboration episode: the agents' private evidence, the reliable and
(optionally) corrupted shared context, the question and options, the gold answer, which agents are misleading,
and the T2 facts with their keep (1) / exclude (0) labels. A ``condition`` (:mod:`groundstate.conditions`)
chooses which shared context a program sees.

Programs receive only :meth:`OffQueryInstance.inputs`; the labels stay with the record and are used by the
metrics outside the program.
"""

from __future__ import annotations

from typing import Any, Literal

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
        import dspy  # noqa: PLC0415 (heavy: dspy)

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

