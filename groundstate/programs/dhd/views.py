"""How a cached DHD message is shown to the integrator when part of it is hidden (the paper's masking, Table 23).

A hidden part keeps its place: the message stays in its slot of the pool, and every hidden field is replaced by
content-free filler with exactly the characters and words of the text it replaces (:func:`filler`: each word becomes
a word of the same length made of ``masked``, cut short or padded with ``-``; whitespace is kept). So the
integrator sees a message of the same shape and length with the hidden content gone, and the only difference
between arms is the content, not the length or the position.

- ``hide_answer``: the proposed answer is filled.
- ``hide_reasoning``: the four reasoning fields (direction, key idea, critical assumption, what to check) are filled.
- ``neutral``: the role, the answer and the reasoning are filled and the confidence shown is the constant 0.50 (a
  neutral replacement of the whole message).

The field groups follow the authors' content-control code; they match word counts, we match characters as well.
"""

from __future__ import annotations

import re
from typing import Any

from groundstate.records import HypothesisMessage

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
        update["confidence"] = NEUTRAL_CONFIDENCE
    return message.model_copy(update=update)
