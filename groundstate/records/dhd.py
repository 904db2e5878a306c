"""The records of Diverse Hypothesis Deliberation: the problems (:class:`Problem`) and the cached hypothesizer
messages (:class:`HypothesisMessage`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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
    """One cached hypothesizer message (DHD): a role's structured proposal for a problem. Its confidence is in words
    (``confidence_note``: low/medium/high and why; ``confidence`` ``None``) or a number (``confidence``, no note)."""

    model_config = ConfigDict(extra="forbid")

    problem_id: str
    index: int = Field(ge=0, description="position in the problem's message pool (0..K-1)")
    role: str
    proposed_answer: str = ""
    reasoning_direction: str = ""
    key_idea: str = ""
    critical_assumption: str = ""
    what_to_check: str = ""
    confidence: float | None = Field(default=0.5, ge=0.0, le=1.0)
    confidence_note: str = Field(default="", description="the stated confidence: low, medium or high, then why")
    error: str | None = Field(default=None, description="an operational failure while generating it")
