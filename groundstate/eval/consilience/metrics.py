"""Hidden-profile discussion metrics (§4.2): task accuracy, vote accuracy (per task and pooled over all votes),
rounds, words and messages, with Wilson intervals from scipy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundstate.programs.consilience.protocols import DiscussionResult
from groundstate.records import HiddenProfileTask


def _vote_of(vote: Any) -> str | None:
    return vote.get("vote") if isinstance(vote, dict) else getattr(vote, "vote", None)


def discussion_scores(task: HiddenProfileTask, prediction: Any) -> dict[str, float]:
    """Per-task scores (§4.2) for the runner: ``task_accuracy`` (the group's answer is correct), ``vote_accuracy``
    (the share of correct final votes), ``rounds`` and ``words``, plus ``votes_correct`` and ``votes`` so vote
    accuracy can be pooled over all votes as §4.2 defines it (:func:`pooled_vote_accuracy`). A failed
    discussion (``prediction=None``) scores 0 on both accuracies and has no rounds or words."""
    if prediction is None:
        return {"task_accuracy": 0.0, "vote_accuracy": 0.0, "votes_correct": 0.0, "votes": float(task.n_agents)}
    votes = list(prediction.votes)
    correct = sum(_vote_of(v) == task.correct for v in votes)
    return {
        "task_accuracy": float(prediction.answer == task.correct),
        "vote_accuracy": correct / len(votes) if votes else 0.0,
        "rounds": float(prediction.rounds),
        "words": float(prediction.words),
        "votes_correct": float(correct),
        "votes": float(len(votes)),
    }


def pooled_vote_accuracy(rows: Sequence[dict[str, Any]]) -> dict[str, float | int | None]:
    """§4.2 vote accuracy from runner rows: correct votes / all votes, with a Wilson 95% interval."""
    from scipy.stats import binomtest

    correct = int(sum((r.get("scores") or {}).get("votes_correct", 0) for r in rows))
    total = int(sum((r.get("scores") or {}).get("votes", 0) for r in rows))
    if total == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    ci = binomtest(correct, total).proportion_ci(method="wilson")
    return {"mean": correct / total, "low": float(ci.low), "high": float(ci.high), "n": total}


def aggregate_results(results: Sequence[DiscussionResult]) -> dict[str, Any]:
    """Accuracy over many discussions: task accuracy with a 95% Wilson interval, vote accuracy pooled over all
    agents' votes (as in §4.2, so tasks with more agents weigh more), mean rounds, words and messages."""
    from scipy.stats import binomtest

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
