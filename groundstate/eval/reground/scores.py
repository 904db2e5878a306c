"""T1, T2 and T3 of one OffQuery prediction at once, and the runner's ``scorer`` hook built from them.

Only T2 calls the judge, so only T2 (and its halves) can fail for the judge's sake: when the judge's call errors
or its reply cannot be parsed, T1 and T3 are still scored and :class:`~groundstate.eval.scoring.ScoringError`
carries them with T2's error, so the runner records T2 as not measured instead of discarding the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groundstate.eval.reground.contract import MISSING, field_of
from groundstate.eval.reground.judges import Judge, LexicalJudge
from groundstate.eval.reground.t1 import t1_score
from groundstate.eval.reground.t2 import T2_MAX_FACTS, t2_parts
from groundstate.eval.reground.t3 import t3_score
from groundstate.eval.scoring import ScoringError, error_text
from groundstate.records import OffQueryInstance


def _roles(instance: OffQueryInstance) -> list[str | None]:
    return [a.role for a in instance.agents]


def offquery_scores(instance: OffQueryInstance | Mapping[str, Any], prediction: Any,
                    judge: Judge | None = None, halves: bool = False) -> dict[str, float | None]:
    """T1, T2 and T3 for one instance.

    Args:
        instance: the instance (or its dict form).
        prediction: the program's prediction (see :mod:`~groundstate.eval.reground.contract`), or ``None`` for a
            record whose program failed.
        judge: the T2 judge (default :class:`LexicalJudge`).
        halves: also report T2's halves, ``t2_retention`` and ``t2_exclusion``
            (:func:`~groundstate.eval.reground.t2.t2_parts`; a half is left out when the instance has no fact of
            its label).

    Returns:
        ``{"t1", "t2", "t3"}``; ``t2`` is left out when the instance has no T2 facts. For a failed record
        (``prediction=None``) every metric that applies is ``None``: not measured, never 0. A prediction without
        a ``misleading_agent`` field scores 0.0 on T1 (an explicit ``None`` means "no agent is misleading").

    Raises:
        ScoringError: the judge failed (its call errored or its reply could not be parsed): ``scores`` holds T1
            and T3, ``errors`` T2 (and its halves with ``halves``) with the judge's error.
    """
    if not isinstance(instance, OffQueryInstance):
        instance = OffQueryInstance.model_validate(dict(instance))
    has_t2 = bool(instance.t2_facts)
    labels = {f.label for f in instance.t2_facts[:T2_MAX_FACTS.get(instance.domain)]}
    t2_names = ["t2"] if has_t2 else []
    if halves and has_t2:
        t2_names += [k for k, label in (("t2_retention", 1), ("t2_exclusion", 0)) if label in labels]
    if prediction is None:
        return {name: None for name in ("t1", *t2_names, "t3")}
    agent = field_of(prediction, "misleading_agent", MISSING)
    scores: dict[str, float | None] = {
        "t1": 0.0 if agent is MISSING else t1_score(agent, instance.misleading, _roles(instance))}
    failure = None
    if has_t2:
        try:
            parts = t2_parts(field_of(prediction, "state"), instance.t2_facts, judge or LexicalJudge(),
                             max_facts=T2_MAX_FACTS.get(instance.domain))
        except Exception as exc:  # the judge failed: T2 is not measured; T1 and T3 still are
            failure = exc
        else:
            scores["t2"] = 0.0 if parts is None else parts["t2"]
            if halves and parts is not None:
                scores.update({k: parts[k] for k in ("t2_retention", "t2_exclusion") if parts[k] is not None})
    scores["t3"] = t3_score(field_of(prediction, "answer"), instance.answer)
    if failure is not None:
        text = f"T2 judge failed: {error_text(failure)}"
        raise ScoringError(scores, {name: text for name in t2_names}) from failure
    return scores


def make_scorer(judge: Judge | None = None, halves: bool = False) -> Callable[[Any, Any], dict[str, float]]:
    """The runner's ``scorer`` hook: ``(instance, prediction_or_None) -> {"t1", "t2", "t3"}``, plus T2's halves
    (``t2_retention``, ``t2_exclusion``) with ``halves=True`` (what ``groundstate run`` and ``compare`` report).

    It reads only ``misleading_agent``, ``state`` and ``answer``, which every OffQuery run stores as the record's
    outputs, so it is marked ``from_outputs``: a record whose judge failed is re-scored from its stored outputs.

    Args:
        judge: the T2 judge shared by every call (default :class:`LexicalJudge`).
        halves: report T2's two halves beside it.
    """
    judge = judge or LexicalJudge()

    def scorer(instance: Any, prediction: Any) -> dict[str, float | None]:
        return offquery_scores(instance, prediction, judge, halves=halves)

    scorer.judge = judge  # type: ignore[attr-defined]
    scorer.from_outputs = True  # type: ignore[attr-defined]
    return scorer
