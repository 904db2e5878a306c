"""Statement-level scores for misinformation spread across agents (paper §E.4, the ``distributed`` variant).

In statement mode ReGround returns the statements it judged misleading (``misleading_statements``); the instance
holds the corrupted statements it planted (``OffQueryInstance.misleading_statements``). A flagged statement is a
hit when it states one of the planted statements, as decided by a T2 judge (the flagged statement plays the
state, the planted one the fact), so rewording does not matter and a negated or changed value does.

- precision: the share of flagged statements that state a planted one (``None`` when nothing was flagged);
- recall: the share of planted statements that some flagged statement states.

Our choice where the paper summary is silent: matching through the judge, one planted statement at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundstate.eval.reground.judges import Judge, LexicalJudge
from groundstate.eval.scoring import ScoringError, error_text


def statement_scores(flagged: Sequence[str] | None, planted: Sequence[str], judge: Judge | None = None
                     ) -> dict[str, float | None]:
    """``{"statement_precision", "statement_recall"}`` for one instance (recall ``None`` when nothing was planted).

    Args:
        flagged: the statements the program flagged as misleading (``None`` for a failed record: both ``None``,
            not measured).
        planted: the instance's planted misleading statements.
        judge: decides whether a flagged statement states a planted one (default :class:`LexicalJudge`).

    Raises:
        Exception: whatever the judge raised.
    """
    planted = [p for p in planted if str(p).strip()]
    if flagged is None:
        return {"statement_precision": None, "statement_recall": None}
    flagged = [f for f in (str(x) for x in flagged) if f.strip()]
    judge = judge or LexicalJudge()
    matches = [judge.supported(f, list(planted)) if planted else [] for f in flagged]
    hits = [any(m) for m in matches]
    found = [any(m[k] for m in matches) for k in range(len(planted))]
    return {"statement_precision": sum(hits) / len(hits) if hits else None,
            "statement_recall": sum(found) / len(found) if found else None}


def statement_scorer(base: Any, judge: Judge | None = None):
    """Wrap a runner scorer (T1/T2/T3) to add the statement-level scores of instances with planted statements.

    When the base scorer or the statement judge fails on some metrics, the others are still scored and one
    :class:`~groundstate.eval.scoring.ScoringError` carries them all. For a failed record (``prediction=None``)
    it names ``statement_precision`` and ``statement_recall`` as not measured. Marked ``from_outputs`` when the
    base scorer is (``misleading_statements`` is stored with the outputs of every statement-mode run).
    """

    def scorer(instance: Any, prediction: Any) -> dict[str, float | None]:
        errors: dict[str, str] = {}
        try:
            scores = dict(base(instance, prediction))
        except ScoringError as exc:
            scores, errors = dict(exc.scores), dict(exc.errors)
        planted = list(getattr(instance, "misleading_statements", None) or [])
        if planted:
            flagged = None if prediction is None else list(getattr(prediction, "misleading_statements", None) or [])
            try:
                extra = statement_scores(flagged, planted, judge)
            except Exception as exc:  # the judge failed: both statement metrics are not measured
                text = f"statement judge failed: {error_text(exc)}"
                errors.update({"statement_precision": text, "statement_recall": text} if flagged
                              else {"statement_recall": text})
            else:
                scores.update({k: v for k, v in extra.items() if v is not None or prediction is None})
        if errors:
            raise ScoringError(scores, errors)
        return scores

    scorer.from_outputs = bool(getattr(base, "from_outputs", False))  # type: ignore[attr-defined]
    return scorer
