"""T3, task resolution: exact match of the chosen option letter (read tolerantly by :func:`option_letter`)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from groundstate.records import LETTERS

_LETTER = re.compile(
    r"^(?:(?:final\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*)?"
    r"(?:[(\[]\s*([a-d])\s*[)\]]|([a-d])(?=\s*$|\s*[:.)\-\u2013\u2014]|\s+[(\[]))",
    re.IGNORECASE,
)


def option_letter(value: Any) -> str | None:
    """The option letter in ``value`` (``"B"``, ``" b "``, ``"B: text"``, ``"(B)"``, ``"Answer: B"``), or ``None``.

    A letter followed directly by words (``"A patient..."``, ``"a fever"``) is not read as an option.
    """
    if value is None:
        return None
    text = unicodedata.normalize("NFKC", str(value)).strip().strip("*`'\"")
    match = _LETTER.match(text)
    if not match:
        return None
    return next(g for g in match.groups() if g).upper()


def t3_score(predicted: Any, answer: str) -> float:
    """T3 task resolution: exact match of the option letter.

    Args:
        predicted: the predicted answer (tolerant forms, see :func:`option_letter`); ``None`` scores 0.
        answer: the gold letter.

    Returns:
        1.0 or 0.0.
    """
    letter = option_letter(predicted)
    return float(letter is not None and letter in LETTERS and letter == str(answer).strip().upper())
