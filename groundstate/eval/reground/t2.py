"""T2, state reconstruction: does the group's state keep the facts it should and drop the others?

For each gold fact the judge decides whether the predicted state supports it; the fact is scored correct when
that decision equals its label (1 = must be kept, 0 = must be excluded), and the instance's T2 is the share of
correct facts. At most ``T2_MAX_FACTS[domain]`` facts are scored (the first ones). A missing, empty or failed
state scores 0 (it is *not* read as "supports nothing", which would give credit for every label-0 fact).
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
    if state is None:
        return None
    if isinstance(state, list | tuple):
        state = "\n".join(str(s) for s in state)
    text = str(state)
    return text if text.strip() else None


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

    A half is ``None`` when the instance has no fact of its label; a missing or empty state scores 0 on T2 and
    on both halves. Returns ``None`` when there are no facts (T2 does not apply).

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
    support = judge.supported(text, [f.text for f in gold])
    score = t2_from_support(support, labels)
    keep = [bool(s) for s, y in zip(support, labels, strict=True) if y == 1]
    drop = [not bool(s) for s, y in zip(support, labels, strict=True) if y == 0]
    return {"t2": score, "t2_retention": sum(keep) / len(keep) if keep else None,
            "t2_exclusion": sum(drop) / len(drop) if drop else None}


def t2_score(state: str | None, facts: Sequence[T2Fact | Mapping[str, Any]], judge: Judge,
             max_facts: int | None = None) -> float | None:
    """T2 state reconstruction for one instance: accuracy of the judged "fact is supported" labels.

    Args:
        state: the predicted information state; ``None`` or blank means missing.
        facts: the gold facts (``T2Fact`` or ``{"text", "label"}`` dicts).
        judge: decides which facts the state supports.
        max_facts: score only the first ``max_facts`` facts (``T2_MAX_FACTS[domain]``).

    Returns:
        The share of facts judged correctly; 0.0 for a missing or empty state; ``None`` when there are no facts
        (T2 does not apply).

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
    support = judge.supported(text, [f.text for f in gold])
    return t2_from_support(support, [f.label for f in gold])
