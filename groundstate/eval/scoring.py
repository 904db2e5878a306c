"""How the runner scores one record: measured metrics apart from failed ones, never a failure as a number.

A scorer is ``(record, prediction_or_None) -> {metric: value}``. The runner calls it through
:func:`score_prediction`, which returns ``(scores, score_errors)``: the metrics that were measured, and for each
metric that could not be, why. Nothing that failed is ever given a value:

- a scorer that can tell which metric failed (the ReGround scorer, when the T2 judge errors or its reply cannot
  be parsed) raises :class:`ScoringError` carrying the metrics it did measure (T1, T3) and an error per failed
  one (T2 and its halves);
- any other exception fails every metric the scorer gives the record (the names come from
  :func:`metric_names`), or, when not even the names can be learnt, the one pseudo-metric :data:`SCORER`;
- a record whose *program* failed has no prediction to score: :func:`unmeasured` names its metrics as failed.

A scorer that reads only what the run stores as the record's ``outputs`` says so with the attribute
``from_outputs = True`` (:func:`scores_from_outputs`); the runner then re-scores a record whose scoring failed
from the stored outputs (:func:`stored_prediction`) instead of running its program again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groundstate.errors import scrub_secrets
from groundstate.files import jsonable

SCORER = "scorer"
"""The metric name a failure is recorded under when the scorer cannot even say which metrics it gives."""

PROGRAM_FAILED = "not scored: the program failed on this record (see its error)"
"""The ``score_errors`` text of every metric of a record whose program raised."""


class ScoringError(Exception):
    """Some metrics of one record could not be measured; the others were.

    Attributes:
        scores: the metrics that were measured, ``{name: value}``.
        errors: each metric that could not be measured, ``{name: error text}`` (never empty).
    """

    def __init__(self, scores: Mapping[str, Any], errors: Mapping[str, str]):
        if not errors:
            raise ValueError("a ScoringError needs at least one failed metric")
        self.scores = dict(scores)
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {text}" for name, text in self.errors.items()))


def error_text(exc: BaseException) -> str:
    """``Type: message``, secrets scrubbed: what a row stores for a failure."""
    return scrub_secrets(f"{type(exc).__name__}: {exc}".strip())


def metric_names(scorer: Callable[[Any, Any], Mapping[str, Any]], record: Any) -> list[str]:
    """The metrics ``scorer`` gives ``record``: the keys of ``scorer(record, None)`` (its values are ignored).

    Raises:
        Exception: whatever the scorer raised.
    """
    return list(scorer(record, None) or {})


def unmeasured(scorer: Callable[[Any, Any], Mapping[str, Any]] | None, record: Any,
               text: str = PROGRAM_FAILED) -> dict[str, str]:
    """``{metric: text}`` for every metric ``scorer`` gives ``record`` ({} without a scorer; :data:`SCORER` when
    the scorer cannot name them)."""
    if scorer is None:
        return {}
    try:
        return {name: text for name in metric_names(scorer, record)}
    except Exception as exc:
        return {SCORER: f"{text}; the scorer could not name its metrics: {error_text(exc)}"}


def score_prediction(scorer: Callable[[Any, Any], Mapping[str, Any]] | None, record: Any,
                     prediction: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """``(scores, score_errors)`` of one record's prediction (see the module docstring; ``({}, {})`` without a
    scorer).

    A metric the scorer gives as ``None`` (it does not apply to the record) stays in ``scores`` as ``None``, as
    before; the summary counts it as neither measured nor failed. Never raises for a scorer failure: every
    failure ends up in ``score_errors`` with its (secret-scrubbed) text, and a failed metric is never in
    ``scores``.
    """
    if scorer is None:
        return {}, {}
    try:
        scores, errors = dict(scorer(record, prediction)), {}
    except ScoringError as exc:
        scores, errors = exc.scores, {k: scrub_secrets(str(v)) for k, v in exc.errors.items()}
    except Exception as exc:
        text = f"scoring failed: {error_text(exc)}"
        return {}, unmeasured(scorer, record, text)
    scores = {k: v for k, v in scores.items() if k not in errors}
    return scores, errors


def record_failed(row: Mapping[str, Any]) -> bool:
    """Whether a result row counts as failed: its program failed or one of its metrics could not be measured."""
    return bool(row.get("error") or row.get("score_errors"))


def scores_from_outputs(scorer: Any) -> bool:
    """Whether ``scorer`` reads only what a run stores as ``outputs`` (its ``from_outputs`` attribute)."""
    return bool(getattr(scorer, "from_outputs", False))


def rescorable(scorer: Any, previous: Mapping[str, Any] | None) -> bool:
    """Whether the record of the row ``previous`` is re-scored from its stored outputs rather than run again: its
    program succeeded, some metric failed, and ``scorer`` reads only stored outputs."""
    return bool(previous) and not previous.get("error") and bool(previous.get("score_errors")) \
        and scores_from_outputs(scorer)


def stored_prediction(row: Mapping[str, Any]) -> Any:
    """A ``dspy.Prediction`` rebuilt from a result row's stored ``outputs`` (and ``trace``, when stored)."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    fields = dict(row.get("outputs") or {})
    if row.get("trace") is not None and "trace" not in fields:
        fields["trace"] = row["trace"]
    return dspy.Prediction(**fields)


def rescored_row(scorer: Callable[[Any, Any], Mapping[str, Any]], record: Any,
                 previous: Mapping[str, Any]) -> dict[str, Any]:
    """``previous``, the row of a record whose program succeeded but whose scoring failed, scored again from its
    stored outputs (its program is not run), with ``attempt`` counted up.

    A metric measured before that fails now keeps its earlier value: both come from the same stored outputs.
    """
    scores, errors = score_prediction(scorer, record, stored_prediction(previous))
    earlier = {k: v for k, v in (previous.get("scores") or {}).items() if k in errors and v is not None}
    scores = {**jsonable(scores), **earlier}
    return {**previous, "scores": scores, "score_errors": {k: v for k, v in errors.items() if k not in scores},
            "attempt": int(previous.get("attempt") or 0) + 1}
