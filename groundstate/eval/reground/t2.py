"""T2, state reconstruction: does the group's state keep the facts it should and drop the others?

For each gold fact the judge decides whether the predicted state supports it; the fact is scored correct when
that decision equals its label (1 = must be kept, 0 = must be excluded), and the instance's T2 is the share of
correct facts. At most ``T2_MAX_FACTS[domain]`` facts are scored (the first ones).

An *empty* state (blank text) supports no fact, as the authors' judge reads it (``task2_evaluation``: the judge
lists the facts the text expresses, none for an empty text, and ``metrics.py`` scores that list against the
labels), so it scores the share of label-0 facts (0.5 on the published, balanced T2 facts): T2 retention 0 and
T2 exclusion 1, the halves that show what happened. It is decided without a judge call. A *missing* state
(``None``: the program produced none) scores 0 on T2 and both halves, as the authors' ``metrics.py`` scores an
instance with no evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from groundstate.eval.reground.judges import Judge
from groundstate.records import T2Fact

T2_MAX_FACTS: dict[str, int] = {"healthcare": 10, "disaster": 16}
"""The most T2 facts scored per instance, by domain (appendix B.5)."""


def as_facts(facts: Sequence[T2Fact | Mapping[str, Any]]) -> list[T2Fact]:
    return [f if isinstance(f, T2Fact) else T2Fact.model_validate(dict(f)) for f in facts]


def state_text(state: Any) -> str | None:
    """The state as text: ``None`` for a missing state, ``""`` for an empty one (blank text, or a list of blank
    lines), the text otherwise (a list of strings is one fact per line)."""
    if state is None:
        return None
    if isinstance(state, list | tuple):
        state = "\n".join(str(s) for s in state)
    text = str(state)
    return text if text.strip() else ""


def t2_from_support(support: Sequence[bool], labels: Sequence[int]) -> float:
    """Share of facts whose judged support matches the label (1 = should be supported, 0 = should not).

    Raises:
        ValueError: the two sequences differ in length or are empty.
    """
    if len(support) != len(labels):
        raise ValueError(f"judge returned {len(support)} decisions for {len(labels)} facts")
    if not labels:
        raise ValueError("no facts to score")
    return sum(bool(s) == (int(y) == 1) for s, y in zip(support, labels, strict=True)) / len(labels)


def t2_parts(state: str | None, facts: Sequence[T2Fact | Mapping[str, Any]], judge: Judge,
             max_facts: int | None = None) -> dict[str, float | None] | None:
    """T2 and its halves for one instance, from one judgment: ``{"t2", "t2_retention", "t2_exclusion"}``.

    A half is ``None`` when the instance has no fact of its label. An empty state supports no fact (the share of
    label-0 facts; retention 0, exclusion 1; no judge call); a missing state scores 0 on T2 and on both halves
    (see the module docstring). Returns ``None`` when there are no facts (T2 does not apply).

    Raises:
        Exception: whatever the judge raised.
    """
    gold = as_facts(facts)
    if max_facts is not None:
        gold = gold[:max_facts]
    if not gold:
        return None
    labels = [f.label for f in gold]
    text = state_text(state)
    if text is None:
        return {"t2": 0.0, "t2_retention": 0.0 if 1 in labels else None, "t2_exclusion": 0.0 if 0 in labels else None}
    support = judge.supported(text, [f.text for f in gold]) if text else [False] * len(gold)
    score = t2_from_support(support, labels)
    keep = [bool(s) for s, y in zip(support, labels, strict=True) if y == 1]
    drop = [not bool(s) for s, y in zip(support, labels, strict=True) if y == 0]
    return {"t2": score, "t2_retention": sum(keep) / len(keep) if keep else None,
            "t2_exclusion": sum(drop) / len(drop) if drop else None}


def t2_score(state: str | None, facts: Sequence[T2Fact | Mapping[str, Any]], judge: Judge,
             max_facts: int | None = None) -> float | None:
    """T2 state reconstruction for one instance: accuracy of the judged "fact is supported" labels.

    Args:
        state: the predicted information state; ``None`` means missing, blank text empty.
        facts: the gold facts (``T2Fact`` or ``{"text", "label"}`` dicts).
        judge: decides which facts the state supports.
        max_facts: score only the first ``max_facts`` facts (``T2_MAX_FACTS[domain]``).

    Returns:
        The share of facts judged correctly (an empty state supports none: the share of label-0 facts); 0.0 for a
        missing state; ``None`` when there are no facts (T2 does not apply).

    Raises:
        Exception: whatever the judge raised (e.g. a failed LM call).
    """
    gold = as_facts(facts)
    if max_facts is not None:
        gold = gold[:max_facts]
    if not gold:
        return None
    text = state_text(state)
    if text is None:
        return 0.0
    support = judge.supported(text, [f.text for f in gold]) if text else [False] * len(gold)
    return t2_from_support(support, [f.label for f in gold])
