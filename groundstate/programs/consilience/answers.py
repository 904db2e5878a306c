"""What an LM agent's answers mean: option labels, the option a vote names, a valid belief from whatever came
back, and a message cut to size.

An LM agent (:class:`~groundstate.programs.consilience.agents.LMAgent`) shows a task's options with letter labels
(``A: ...``; an option that already is its letter is shown as the letter alone) and reads votes back as labels or
option texts (:func:`resolve_option`). :func:`repair_belief` turns any probabilities, vote and confidence an LM
returns into a valid :class:`~groundstate.records.Belief` (its rules are in its docstring), and
:func:`message_text` keeps a message to two sentences and :data:`MAX_MESSAGE_CHARS` characters. Nothing here calls
an LM.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from groundstate.programs.common import as_data
from groundstate.records import Belief

__all__ = ["MAX_MESSAGE_CHARS", "message_text", "option_labels", "options_block", "repair_belief", "resolve_option"]

MAX_MESSAGE_CHARS = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LABEL = re.compile(r"^\W*(?:(?i:option|plan|choice|answer)\s+)?([A-Z])(?:\W|$)")


def option_labels(options: Sequence[str]) -> list[str]:
    """Letter labels ``A, B, C, ...`` for the options, in order."""
    if len(options) > len(string.ascii_uppercase):
        raise ValueError(f"at most {len(string.ascii_uppercase)} options are supported, got {len(options)}")
    return list(string.ascii_uppercase[: len(options)])


def options_block(options: Sequence[str]) -> str:
    """``A: ...`` lines (an option that is its own letter is shown as the letter alone), as data."""
    return "\n".join(label if option.strip() == label else f"{label}: {as_data(option)}"
                     for label, option in zip(option_labels(options), options, strict=True))


def resolve_option(value: Any, options: Sequence[str]) -> str | None:
    """The option an LM's vote names: an option's exact text (case-insensitive), or a label (``B``, ``B.``,
    ``(B)``, ``Option B``, ``Plan B``, ``B: ...``; the letter in capitals); ``None`` when it names none."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    labels = option_labels(options)
    for option in options:
        if text.lower() == option.strip().lower():
            return option
    match = _LABEL.match(text)
    if match and match.group(1) in labels:
        return options[labels.index(match.group(1))]
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip().rstrip("%")) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _confidence(value: Any) -> float | None:
    number = _number(value)
    if number is None:
        return None
    if 2.0 <= number <= 100.0:  # a percentage
        number /= 100.0
    return min(1.0, max(0.0, number))


def repair_belief(options: Sequence[str], probabilities: Any, vote: Any = None, confidence: Any = None) -> Belief:
    """A valid :class:`Belief` from whatever an LM returned.

    Rules, in order:

    1. Probabilities come as a list in option order or as a mapping from option letter (or option text) to
       probability; each is read as a number, and a missing entry, non-number, NaN, infinity or negative
       value counts as 0.
    2. A list with one entry per option (or a mapping naming at least one option) and a positive sum is
       normalized to sum to 1 (so percentages work).
    3. Otherwise (nothing usable, a list of the wrong length, all zero) the distribution is rebuilt from the
       vote: the voted option gets the confidence (at least ``1/K``) and the others share the rest equally;
       with no valid vote or no confidence it is uniform.
    4. The vote is kept when it names an option (it may differ from the most probable option); otherwise it is
       the most probable option (the first in option order on a tie).
    5. The confidence is read as a number in [0, 1]: a value from 2 to 100 is taken as a percentage, anything
       else outside [0, 1] is clipped; when missing or not a number it is the probability of the vote.
    """
    options = list(options)
    k = len(options)
    chosen = resolve_option(vote, options)
    conf = _confidence(confidence)
    weights = None
    if isinstance(probabilities, BaseModel):
        probabilities = probabilities.model_dump()
    if isinstance(probabilities, dict):
        labels = option_labels(options)
        keyed = [probabilities.get(label, probabilities.get(option)) for label, option in zip(labels, options,
                                                                                                  strict=True)]
        probabilities = keyed if any(p is not None for p in keyed) else None
    if isinstance(probabilities, (list, tuple)) and len(probabilities) == k:
        clean = [_number(p) for p in probabilities]
        clean = [p if p is not None and p > 0 else 0.0 for p in clean]
        total = sum(clean)
        if total > 0:
            weights = [p / total for p in clean]
    if weights is None:
        if chosen is not None and conf is not None:
            top = max(conf, 1.0 / k)
            weights = [top if o == chosen else (1.0 - top) / (k - 1) for o in options]
        else:
            weights = [1.0 / k] * k
    if chosen is None:
        chosen = options[max(range(k), key=lambda i: (weights[i], -i))]
    if conf is None:
        conf = weights[options.index(chosen)]
    total = sum(weights)
    probs = {o: w / total for o, w in zip(options, weights, strict=True)}
    return Belief(probs=probs, vote=chosen, confidence=conf)


def message_text(text: Any) -> str:
    """At most two sentences and :data:`MAX_MESSAGE_CHARS` characters (cut at a word boundary)."""
    text = " ".join(str(text or "").split())
    sentences = _SENTENCE_END.split(text)
    text = " ".join(sentences[:2])
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS].rsplit(" ", 1)[0].rstrip() + "…"
    return text
