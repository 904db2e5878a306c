"""How a cached DHD message is shown to the integrator when part of it is hidden (the paper's masking, Table 23).

A hidden part keeps its place: the message stays in its slot of the pool, and every hidden field is replaced by
content-free filler with exactly the characters and words of the text it replaces (:func:`filler`: each word becomes
a word of the same length made of ``masked``, cut short or padded with ``-``; whitespace is kept). So the
integrator sees a message of the same shape and length with the hidden content gone, and the only difference
between arms is the content, not the length or the position.

- ``hide_answer``: the proposed answer is filled.
- ``hide_reasoning``: the four reasoning fields (direction, key idea, critical assumption, what to check) are filled.
- ``neutral``: the role, the answer and the reasoning are filled, and so is a confidence stated in words (low,
  medium or high and why, as the authors' semantic mask fills every rendered field); a numeric confidence is shown
  as the constant 0.50 instead (a neutral replacement of the whole message).

The field groups follow the authors' content-control code; they match word counts, we match characters as well.

:func:`render_message` and :func:`render_pool` write what the integrator reads, under the integrator's prompt
(:data:`PROMPTS`; see :mod:`groundstate.programs.dhd.deliberation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from groundstate.programs.common import as_data
from groundstate.records import HypothesisMessage
from groundstate.signatures.deliberation import NO_SCORE_NOTE

PROMPTS: tuple[str, ...] = ("authors", "compact")
"""The integrator's (and the independent solver's) prompts: the authors' protocol (default) or the earlier compact
one (see :mod:`groundstate.programs.dhd.deliberation`)."""
DEFAULT_PROMPT = "authors"
VIEWS: tuple[str, ...] = ("full", "hide_answer", "hide_reasoning", "neutral")
"""How a message is shown to the integrator: whole; with its proposed answer hidden; with its reasoning hidden; or
replaced by neutral filler. Hidden parts are filled with content-free text of the same length and the message keeps
its slot."""
FIELD_LABELS: tuple[tuple[str, str], ...] = (
    ("reasoning_direction", "reasoning direction"),
    ("key_idea", "key idea"),
    ("critical_assumption", "critical assumption"),
    ("what_to_check", "what to check"),
)
"""The reasoning fields of a message with the label the integrator reads."""

ANSWER_FIELDS: tuple[str, ...] = ("proposed_answer",)
REASONING_FIELDS: tuple[str, ...] = ("reasoning_direction", "key_idea", "critical_assumption", "what_to_check")
FILLED: dict[str, tuple[str, ...]] = {"hide_answer": ANSWER_FIELDS, "hide_reasoning": REASONING_FIELDS,
                                      "neutral": ("role", *ANSWER_FIELDS, *REASONING_FIELDS)}
"""The fields each masked view fills."""
NEUTRAL_CONFIDENCE = 0.5
FILLER_WORD = "masked"


def _filler_word(n: int) -> str:
    return FILLER_WORD[:n] if n <= len(FILLER_WORD) else FILLER_WORD + "-" * (n - len(FILLER_WORD))


def filler(text: str) -> str:
    """Content-free text with exactly the length and the word count of ``text`` (whitespace kept)."""
    return re.sub(r"\S+", lambda m: _filler_word(len(m.group(0))), text or "")


def masked_message(message: HypothesisMessage, view: str) -> HypothesisMessage:
    """``message`` with the fields of ``view`` (``hide_answer``, ``hide_reasoning``, ``neutral``) filled."""
    if view not in FILLED:
        raise ValueError(f"unknown masked view '{view}' (choose from {', '.join(FILLED)})")
    update: dict[str, Any] = {name: filler(getattr(message, name)) for name in FILLED[view]}
    if view == "neutral":
        if message.confidence_note:
            update["confidence_note"] = filler(message.confidence_note)
        else:
            update["confidence"] = NEUTRAL_CONFIDENCE
    return message.model_copy(update=update)


def check_prompt(prompt: str) -> str:
    """``prompt`` when it is one of :data:`PROMPTS`.

    Raises:
        ValueError: an unknown prompt.
    """
    if prompt not in PROMPTS:
        raise ValueError(f"unknown integrator prompt '{prompt}' (choose from {', '.join(PROMPTS)})")
    return prompt


def confidence_text(message: HypothesisMessage) -> str:
    """The confidence as shown: the stated note (low/medium/high and why), else the number, else ``(none)``."""
    if message.confidence_note:
        return as_data(message.confidence_note)
    return "(none)" if message.confidence is None else f"{message.confidence:.2f}"


def render_message(message: HypothesisMessage, number: int, view: str = "full", prompt: str = DEFAULT_PROMPT) -> str:
    """One message as the integrator reads it, under ``view`` (one of :data:`VIEWS`) and ``prompt``.

    ``hide_answer``, ``hide_reasoning`` and ``neutral`` render the message with those fields replaced by filler of
    the same length (:func:`masked_message`), so the message keeps its slot and its shape. The authors' prompt puts
    the no-score note (:data:`~groundstate.signatures.deliberation.NO_SCORE_NOTE`) on the line before
    "Hypothesis n"; the compact one writes "Message n" with no note, exactly as before issue 25."""
    if view not in VIEWS:
        raise ValueError(f"unknown view '{view}' (choose from {', '.join(VIEWS)})")
    if view != "full":
        message = masked_message(message, view)
    head = f"Message {number}" if check_prompt(prompt) == "compact" else f"{NO_SCORE_NOTE}\nHypothesis {number}"
    lines = [f"{head} (role: {as_data(message.role)})",
             f"- proposed answer: {as_data(message.proposed_answer) or '(none)'}"]
    lines += [f"- {label}: {as_data(getattr(message, name)) or '(none)'}" for name, label in FIELD_LABELS]
    lines.append(f"- confidence: {confidence_text(message)}")
    return "\n".join(lines)


def render_pool(messages: Sequence[HypothesisMessage], views: Sequence[str] | None = None,
                prompt: str = DEFAULT_PROMPT) -> str:
    """The integrator's ``messages`` input: the messages numbered 1..m in order, each under its view."""
    views = list(views) if views is not None else ["full"] * len(messages)
    if len(views) != len(messages):
        raise ValueError(f"{len(views)} views for {len(messages)} messages")
    if not messages:
        return "(no messages)"
    return "\n\n".join(render_message(m, i + 1, v, prompt)
                        for i, (m, v) in enumerate(zip(messages, views, strict=True)))
