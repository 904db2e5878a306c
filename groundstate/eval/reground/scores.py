"""T1, T2 and T3 of one OffQuery prediction at once, and the runner's ``scorer`` hook built from them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groundstate.eval.reground.contract import MISSING, field_of
from groundstate.eval.reground.judges import Judge, LexicalJudge
from groundstate.eval.reground.t1 import t1_score
from groundstate.eval.reground.t2 import T2_MAX_FACTS, t2_score
from groundstate.eval.reground.t3 import t3_score
from groundstate.records import OffQueryInstance


def _roles(instance: OffQueryInstance) -> list[str | None]:
    return [a.role for a in instance.agents]


def offquery_scores(instance: OffQueryInstance | Mapping[str, Any], prediction: Any,
                    judge: Judge | None = None) -> dict[str, float]:
    """T1, T2 and T3 for one instance.

    Args:
        instance: the instance (or its dict form).
        prediction: the program's prediction (see the module docstring), or ``None`` for a failed record.
        judge: the T2 judge (default :class:`LexicalJudge`).

    Returns:
        ``{"t1", "t2", "t3"}``; ``t2`` is left out when the instance has no T2 facts. A failed record scores 0.0
        on every metric. A prediction without a ``misleading_agent`` field scores 0.0 on T1 (an explicit
        ``None`` means "no agent is misleading").

    Raises:
        Exception: whatever the judge raised.
    """
    if not isinstance(instance, OffQueryInstance):
        instance = OffQueryInstance.model_validate(dict(instance))
    has_t2 = bool(instance.t2_facts)
    if prediction is None:
        return {"t1": 0.0, "t2": 0.0, "t3": 0.0} if has_t2 else {"t1": 0.0, "t3": 0.0}
    agent = field_of(prediction, "misleading_agent", MISSING)
    scores = {"t1": 0.0 if agent is MISSING else t1_score(agent, instance.misleading, _roles(instance))}
    if has_t2:
        t2 = t2_score(field_of(prediction, "state"), instance.t2_facts, judge or LexicalJudge(),
                      max_facts=T2_MAX_FACTS.get(instance.domain))
        scores["t2"] = 0.0 if t2 is None else t2
    scores["t3"] = t3_score(field_of(prediction, "answer"), instance.answer)
    return scores


def make_scorer(judge: Judge | None = None) -> Callable[[Any, Any], dict[str, float]]:
    """The runner's ``scorer`` hook: ``(instance, prediction_or_None) -> {"t1", "t2", "t3"}``.

    Args:
        judge: the T2 judge shared by every call (default :class:`LexicalJudge`).
    """
    judge = judge or LexicalJudge()

    def scorer(instance: Any, prediction: Any) -> dict[str, float]:
        return offquery_scores(instance, prediction, judge)

    scorer.judge = judge  # type: ignore[attr-defined]
    return scorer
