"""Hidden-profile discussion metrics (§4.2): per-task scores for the runner and vote accuracy pooled over votes."""

import pytest

from groundstate.eval.consilience.metrics import (
    FAILED_METRICS,
    aggregate_results,
    discussion_scores,
    pooled_vote_accuracy,
)
from groundstate.programs.consilience.protocols import HiddenProfileProtocol, run_discussion
from groundstate.programs.consilience.simulated import SimParams, SimTeam, sim_team
from groundstate.records import Belief, Transcript
from tests.programs.consilience.test_simulated import make_task


def test_program_prediction_and_scores():
    task = make_task(4)
    program = HiddenProfileProtocol("hidden-post", rounds=2, team=SimTeam(SimParams(noise=0.0)))
    prediction = program(task=task)
    assert prediction.answer in task.options and prediction.rounds == 2 and prediction.protocol == "hidden-post"
    assert Transcript.model_validate(prediction.transcript).words == prediction.words
    votes = [Belief.model_validate(v) for v in prediction.votes]
    scores = discussion_scores(task, prediction)
    correct_votes = sum(v.vote == task.correct for v in votes)
    assert scores == {"task_accuracy": float(prediction.answer == task.correct),
                      "vote_accuracy": correct_votes / 4, "rounds": 2.0, "words": float(prediction.words),
                      "messages": 8.0, "votes_correct": float(correct_votes), "votes": 4.0}
    assert prediction.correct == (prediction.answer == task.correct)
    # a failed discussion is not measured, never scored 0: pooled over the finished ones, the failure counted
    assert set(discussion_scores(task, None)) == set(FAILED_METRICS)
    assert all(v is None for v in discussion_scores(task, None).values())
    rows = [{"scores": scores}, {"scores": {}, "score_errors": dict.fromkeys(FAILED_METRICS, "program failed")}]
    pooled = pooled_vote_accuracy(rows)
    assert pooled["mean"] == pytest.approx(correct_votes / 4) and pooled["n"] == 4 and pooled["failed"] == 1
    with pytest.raises(ValueError, match="needs agents"):
        HiddenProfileProtocol("hidden-pre")(task=task)


def test_vote_accuracy_pools_votes_across_tasks():
    small = run_discussion(make_task(5, n_agents=3), sim_team(3, SimParams(noise=0.0)), "full-info")
    large = run_discussion(make_task(6), sim_team(4, SimParams(noise=0.0)), "hidden-pre")
    summary = aggregate_results([small, large])
    assert summary["vote_accuracy"] == pytest.approx((3 * small.vote_accuracy + 4 * large.vote_accuracy) / 7)
    assert summary["task_accuracy"] == (small.task_accuracy + large.task_accuracy) / 2
