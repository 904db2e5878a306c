"""Hidden-profile discussion metrics (§4.2): task accuracy, vote accuracy (per task and pooled over all votes),
rounds, words and messages, with Wilson intervals from scipy.

A failed discussion is not a score: the runner records its metrics as not measured (``score_errors``), and the
figures here are over the discussions that finished, with the failed ones counted apart (``failed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundstate.programs.consilience.protocols import DiscussionResult
from groundstate.records import HiddenProfileTask


def _vote_of(vote: Any) -> str | None:
    return vote.get("vote") if isinstance(vote, dict) else getattr(vote, "vote", None)


def _messages(prediction: Any) -> int:
    """Messages on the prediction's public transcript."""
    transcript = getattr(prediction, "transcript", None)
    if isinstance(transcript, dict):
        return len(transcript.get("messages") or [])
    return len(getattr(transcript, "messages", None) or [])


FAILED_METRICS: tuple[str, ...] = ("task_accuracy", "vote_accuracy", "rounds", "words", "messages",
                                   "votes_correct", "votes")
"""The metrics a failed discussion does not have (and, with ``initial_``, those of its initial votes)."""


def discussion_scorer(initial: bool = False):
    """The runner's scorer: :func:`discussion_scores`; with ``initial`` (HiddenBench's discussion) a failed
    discussion also names its initial-vote metrics as not measured, so they are counted as failed, not dropped."""
    def scorer(task: HiddenProfileTask, prediction: Any) -> dict[str, float | None]:
        scores = discussion_scores(task, prediction)
        if initial and prediction is None:
            scores.update({f"initial_{k}": None for k in ("task_accuracy", "vote_accuracy", "votes_correct", "votes")})
        return scores

    return scorer


def discussion_scores(task: HiddenProfileTask, prediction: Any) -> dict[str, float]:
    """Per-task scores (§4.2) for the runner: ``task_accuracy`` (the group's answer is correct), ``vote_accuracy``
    (the share of correct final votes), ``rounds`` and ``words``, plus ``votes_correct`` and ``votes`` so vote
    accuracy can be pooled over all votes as §4.2 defines it (:func:`pooled_vote_accuracy`). A failed
    discussion (``prediction=None``) has every metric of :data:`FAILED_METRICS` as ``None``: not measured.

    A HiddenBench discussion also carries its initial votes (Hidden-Pre of the same run): they are scored as
    ``initial_task_accuracy``, ``initial_vote_accuracy``, ``initial_votes_correct`` and ``initial_votes``."""
    if prediction is None:
        return dict.fromkeys(FAILED_METRICS)
    votes = list(prediction.votes)
    correct = sum(_vote_of(v) == task.correct for v in votes)
    scores = {
        "task_accuracy": float(prediction.answer == task.correct),
        "vote_accuracy": correct / len(votes) if votes else 0.0,
        "rounds": float(prediction.rounds),
        "words": float(prediction.words),
        "messages": float(_messages(prediction)),
        "votes_correct": float(correct),
        "votes": float(len(votes)),
    }
    initial = getattr(prediction, "initial_votes", None)
    if initial:
        hits = sum(_vote_of(v) == task.correct for v in initial)
        scores.update(initial_task_accuracy=float(prediction.initial_answer == task.correct),
                      initial_vote_accuracy=hits / len(initial), initial_votes_correct=float(hits),
                      initial_votes=float(len(initial)))
    return scores


def pooled_vote_accuracy(rows: Sequence[dict[str, Any]], prefix: str = "") -> dict[str, float | int | None]:
    """§4.2 vote accuracy from runner rows: correct votes / all votes of the discussions that finished, with a
    Wilson 95% interval (``n``: votes) and ``failed``, the discussions whose votes were not measured
    (``prefix="initial_"``: of a HiddenBench run's initial votes)."""
    from scipy.stats import binomtest  # noqa: PLC0415 (heavy: scipy)

    correct = int(sum((r.get("scores") or {}).get(f"{prefix}votes_correct") or 0 for r in rows))
    total = int(sum((r.get("scores") or {}).get(f"{prefix}votes") or 0 for r in rows))
    failed = sum(1 for r in rows if f"{prefix}votes" in (r.get("score_errors") or {}))
    if total == 0:
        return {"mean": None, "low": None, "high": None, "n": 0, "failed": failed}
    ci = binomtest(correct, total).proportion_ci(method="wilson")
    return {"mean": correct / total, "low": float(ci.low), "high": float(ci.high), "n": total, "failed": failed}


def aggregate_results(results: Sequence[DiscussionResult]) -> dict[str, Any]:
    """Accuracy over many discussions: task accuracy with a 95% Wilson interval, vote accuracy pooled over all
    agents' votes (as in §4.2, so tasks with more agents weigh more), mean rounds, words and messages."""
    from scipy.stats import binomtest  # noqa: PLC0415 (heavy: scipy)

    n = len(results)
    if not n:
        raise ValueError("aggregate_results needs at least one result")
    hits = sum(r.correct for r in results)
    ci = binomtest(hits, n).proportion_ci(method="wilson")
    n_votes = sum(len(r.votes) for r in results)
    good_votes = sum(v.vote == r.correct_answer for r in results for v in r.votes)
    return {
        "n": n,
        "task_accuracy": hits / n,
        "task_accuracy_ci": [float(ci.low), float(ci.high)],
        "vote_accuracy": good_votes / n_votes,
        "rounds": sum(r.rounds for r in results) / n,
        "words": sum(r.words for r in results) / n,
        "messages": sum(r.messages for r in results) / n,
    }
