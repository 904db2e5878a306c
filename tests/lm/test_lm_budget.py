"""An LM call's ``timeout`` is the budget of the whole call, retries included (groundstate.lm.budget), against a
real HTTP server on 127.0.0.1. Nothing here asserts a wall time: each test counts the requests the server received
and reads the error; pytest-timeout bounds the tests themselves."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from groundstate.cli import main
from groundstate.lm.budget import Budget, dspy_retries, single_attempts
from groundstate.lm.specs import get_lm
from groundstate.metering import meter_context


@pytest.fixture(autouse=True)
def canary_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-budget-41c7e2")


def fresh_model() -> str:
    return f"openai/budget-{uuid.uuid4().hex[:8]}"  # no cache entry from another test can answer


def call(lm, mode: str, prompt: str = "hello"):
    return lm(prompt) if mode == "sync" else asyncio.run(lm.acall(prompt))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hanging_server_gets_one_attempt_when_it_spends_the_whole_budget(servers, mode):
    from dspy.utils.exceptions import LMTimeoutError

    server = servers("hang")
    lm = get_lm(fresh_model(), api_base=server.url, timeout=2, num_retries=3)
    with meter_context() as meter, pytest.raises(LMTimeoutError) as info:
        call(lm, mode)
    # DSPy alone gave each of 1 + 3 attempts the whole 2 s (and waited 1 + 2 + 4 s between them)
    assert len(server.requests) == 1
    text = str(info.value)
    assert "timed out: no reply within the whole call's 2s budget (1 attempt, retries included" in text
    assert "read timed out" in text  # the last attempt's own error, kept as the detail (and as the cause)
    assert isinstance(info.value.__cause__, Exception)
    assert (meter.calls, meter.failed) == (1, 1)
    assert lm.num_retries == 3  # the configured count, outside a call


@pytest.mark.timeout(60)
def test_fast_failures_are_still_retried_inside_the_budget(servers):
    from dspy.utils.exceptions import LMServerError

    server = servers("500")
    lm = get_lm(fresh_model(), api_base=server.url, timeout=60, num_retries=2)
    with meter_context() as meter, pytest.raises(LMServerError, match="the model crashed"):
        lm("hello")
    assert len(server.requests) == 3  # the first attempt and both retries: the budget had room for them
    assert (meter.calls, meter.failed) == (1, 1)  # one call, however many attempts


@pytest.mark.timeout(60)
def test_retries_stop_when_the_wait_would_outlast_the_budget(servers):
    from dspy.utils.exceptions import LMServerError

    server = servers("500")
    lm = get_lm(fresh_model(), api_base=server.url, timeout=2.5, num_retries=6)
    with pytest.raises(LMServerError, match="the model crashed"):  # the server's own error, not a timeout
        lm("hello")
    # waits of 1, 2, 4, ... s: after the first wait, the next (2 s) no longer fits in a 2.5 s budget
    assert 1 <= len(server.requests) <= 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_retry_that_succeeds_is_one_successful_call(servers, mode):
    server = servers("500-once", content="recovered")
    lm = get_lm(fresh_model(), api_base=server.url, timeout=60, num_retries=2)
    with meter_context() as meter:
        assert call(lm, mode) == ["recovered"]
    assert len(server.requests) == 2
    assert (meter.calls, meter.failed, meter.reached_model()) == (1, 0, 1)


def test_a_budget_plans_retries_and_timeouts():
    from dspy.utils.exceptions import LMAuthError, LMServerError, LMTransportError

    budget = Budget(30.0, retries=2)
    assert budget.attempt_kwargs({"temperature": 0}) == {"temperature": 0}  # the first attempt: as asked
    assert budget.after_failure(LMServerError("boom")) == 1.0
    retry = budget.attempt_kwargs({"temperature": 0})
    assert retry["cache"] is False and 0 < retry["timeout"] < 30  # what is left, never the whole budget again
    assert budget.after_failure(LMServerError("boom", retry_after=5)) == 5.0  # the server's hint wins
    with pytest.raises(LMServerError):
        budget.after_failure(LMServerError("boom"))  # retries used up
    with pytest.raises(LMAuthError):
        Budget(30.0, retries=2).after_failure(LMAuthError("no"))  # not transient: never retried
    for retries in (3, 0):  # a timeout that leaves no room for another attempt spent the budget, retries or not
        with pytest.raises(Exception, match="whole call's 0.04s budget") as info:
            Budget(0.04, retries=retries).after_failure(LMTransportError("read timed out; more text"))
        assert type(info.value).__name__ == "LMTimeoutError" and "more text" not in str(info.value)
    with pytest.raises(LMTransportError):  # a timeout with budget left and no retries: the attempt's own error
        Budget(30.0, retries=0).after_failure(LMTransportError("connect timed out"))
    with single_attempts():
        assert dspy_retries(3) == 0
    assert dspy_retries(3) == 3


# ---------------------------------------------------------------------------------------------------------
# The command line: --lm-timeout is each record call's budget, retries on
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_run_with_retries_against_a_hanging_server_spends_one_budget_per_call(tmp_path: Path, servers, capsys):
    server = servers("hang")
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": "alpha"}) + "\n"
                            for i in range(2)))
    config = tmp_path / "lm.toml"
    config.write_text(f'[default]\nmodel = "{fresh_model()}"\napi_base = "{server.url}"\nnum_retries = 3\n')
    code = main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / "runs"), "--lm-config", str(config),
                 "--lm-timeout", "2", "--threads", "2", "--no-progress"])
    assert code == 1  # every record failed: the run exits 1, everything kept (issue 22 item 6)
    run_dir = next((tmp_path / "runs").iterdir())
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and len(server.requests) == 2  # one attempt per record: each spent its whole budget
    for row in rows:
        assert "whole call's 2s budget (1 attempt, retries included" in row["error"]
        assert row["failed_calls"] == row["lm_calls"] == 1
    assert "2 of 2 failed" in capsys.readouterr().out
