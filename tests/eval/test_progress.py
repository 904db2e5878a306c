"""Progress of long runs: per-LM-call updates, plain interval lines off a terminal, honest run states."""

from __future__ import annotations

import io
import re

import dspy
import pytest

from groundstate.eval.lock import RunLock
from groundstate.eval.progress import RunProgress
from groundstate.eval.runner import Runner
from groundstate.eval.runs import list_runs
from groundstate.programs.qa import QuestionAnswering
from tests.helpers import echo_number_lm, json_adapter, qa_records, qa_score


class ThreeCalls(dspy.Module):
    """Three LM calls per record; after each it notes what the progress display has seen so far."""

    def __init__(self, bar_ref: dict):
        super().__init__()
        self.qa = QuestionAnswering()
        self.bar_ref, self.seen = bar_ref, []

    def forward(self, question):
        for _ in range(3):
            prediction = self.qa(question=question)
            bar = self.bar_ref["bar"]
            self.seen.append((bar.calls, bar.tokens, bar.done))
        return prediction


def test_progress_receives_each_lm_call_before_the_record_finishes(tmp_path, monkeypatch):
    bars: dict = {}
    real = Runner._progress

    def recording(self, *args, **kwargs):
        bars["bar"] = real(self, *args, **kwargs)
        return bars["bar"]

    monkeypatch.setattr(Runner, "_progress", recording)
    program = ThreeCalls(bars)
    runner = Runner(program, {"program": "three", "data": "one"}, out=tmp_path / "runs", scorer=qa_score,
                    inputs=lambda r: {"question": r["question"]}, lm=echo_number_lm(), adapter=json_adapter())
    runner.run(qa_records(1))
    # the call count and tokens advance per call while the one record is still running (done stays 0)
    assert program.seen == [(1, 15, 0), (2, 30, 0), (3, 45, 0)]
    bar = bars["bar"]
    assert (bar.done, bar.calls, bar.tokens) == (1, 3, 45)  # not counted twice when the record finishes


def test_off_a_terminal_progress_prints_plain_lines_at_intervals_and_at_the_end():
    stream = io.StringIO()  # not a TTY
    with RunProgress("demo", total=2, done=0, enabled=True, interval=0.05, stream=stream) as bar:
        bar.on_lm_call(False)
        bar.on_lm_usage(10, 5)
        import time

        time.sleep(0.3)
        bar.advance(False)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3  # some interval lines, then the final one
    assert all(line.startswith("[groundstate] demo: ") for line in lines)
    assert "1 LM calls, 15 tokens" in lines[0] and "0/2 records" in lines[0]
    assert "1/2 records" in lines[-1] and "elapsed" in lines[-1]
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()  # no bar escapes in a log


def test_a_runner_off_a_terminal_prints_progress_lines(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GROUNDSTATE_PROGRESS_INTERVAL", "0.01")
    Runner(QuestionAnswering(), {"program": "qa", "data": "lines"}, out=tmp_path / "runs", progress=True,
           inputs=lambda r: {"question": r["question"]}, lm=echo_number_lm(), adapter=json_adapter()).run(
        qa_records(3))
    err = capsys.readouterr().err.splitlines()
    assert err and err[-1].startswith("[groundstate] qa-") and "3/3 records, 3 LM calls, 45 tokens" in err[-1]


def _runner(tmp_path, data, program=None):
    return Runner(program or QuestionAnswering(), {"program": "qa", "data": data}, out=tmp_path / "runs",
                  inputs=lambda r: {"question": r["question"]}, lm=echo_number_lm(), adapter=json_adapter())


class KilledAt(dspy.Module):
    """Dies (like a killed process: nothing after it runs) on the third record."""

    def __init__(self):
        super().__init__()
        self.qa, self.n = QuestionAnswering(), 0

    def forward(self, question):
        self.n += 1
        if self.n == 3:
            raise KeyboardInterrupt
        return self.qa(question=question)


def test_runs_list_states_complete_running_and_killed(tmp_path, monkeypatch, capsys):
    from groundstate.cli import main

    done = _runner(tmp_path, "done").run(qa_records(4))
    with pytest.raises(KeyboardInterrupt):
        _runner(tmp_path, "killed", KilledAt()).run(qa_records(5))
    running = _runner(tmp_path, "running").run(qa_records(2))
    states = {run["config"]["data"]: run for run in list_runs(tmp_path / "runs")}
    assert states["done"]["state"] == "complete"
    killed = states["killed"]
    assert killed["state"] == "killed" and not killed["summary"]["complete"]
    assert (killed["summary"]["n_done"], killed["summary"]["n_selected"]) == (2, 5)  # not 0/0 complete
    with RunLock(running.run_dir):  # a live holder of the run's lock
        states = {run["config"]["data"]: run for run in list_runs(tmp_path / "runs")}
        assert states["running"]["state"].startswith("running (pid ")
        monkeypatch.setenv("COLUMNS", "250")
        assert main(["runs", "list", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "complete" in out and "killed" in out and "running" in out and "2/5" in out
    assert done.run_dir.name in out
    (running.run_dir / "summary.json").unlink()  # a run killed before this version wrote any summary
    states = {run["config"]["data"]: run for run in list_runs(tmp_path / "runs")}
    assert states["running"]["state"] == "killed"


def test_ray_workers_running_totals_show_before_records_return_and_are_not_added_twice():
    stream = io.StringIO()
    with RunProgress("ray", total=3, done=1, enabled=True, tokens=100, interval=3600, stream=stream) as bar:
        assert "1/3 records, 0 LM calls, 100 tokens" in bar.line()
        bar.on_worker_totals(5, 1, 70)  # calls of records still running on the workers (a resumed run: +100 tokens)
        assert "1/3 records, 5 LM calls, 170 tokens (" in bar.line() and " tokens/s), 0 errors" in bar.line()
        bar.advance(False, tokens=30, calls=2)  # the first record back reports its own calls: already counted
        assert "2/3 records, 5 LM calls, 170 tokens" in bar.line()
        bar.on_worker_totals(7, 1, 105)
        bar.advance(True, tokens=35, calls=2)
    assert re.match(r"\[groundstate\] ray: 3/3 records, 7 LM calls, 205 tokens \([\d,.]+ tokens/s\), 1 errors, ",
                    stream.getvalue().splitlines()[-1])


def test_the_line_shows_the_tokens_per_second_this_run_advanced(monkeypatch):
    """Tokens advanced (the resumed records' tokens left out) over the seconds since the display started."""
    from groundstate.eval import progress

    clock = {"now": 1000.0}
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock["now"])
    stream = io.StringIO()
    with RunProgress("rate", total=3, done=1, enabled=True, tokens=400, interval=3600, stream=stream) as bar:
        assert "400 tokens (0.0 tokens/s)" in bar.line()
        clock["now"] += 8.0
        bar.on_lm_usage(100, 20)
        assert "520 tokens (15.0 tokens/s)" in bar.line()
        clock["now"] += 2.0
        bar.on_worker_totals(3, 0, 250)  # Ray workers' running totals: 250 tokens of this session
        assert "650 tokens (25.0 tokens/s)" in bar.line() and bar.line().endswith(" 10s elapsed")


def test_records_of_a_dead_worker_still_count_when_its_totals_are_gone():
    bar = RunProgress("ray", total=2, done=0, enabled=False)
    bar.on_worker_totals(2, 0, 30)
    bar.advance(False, tokens=30, calls=2)
    bar.advance(False, tokens=45, calls=3)  # a record whose worker's tally was never read
    assert "2/2 records, 5 LM calls, 75 tokens" in bar.line()


def test_the_tune_progress_line_starts_with_the_first_phase():
    from groundstate.eval.progress import TuneProgress

    stream = io.StringIO()
    with TuneProgress("optimize oracle (bootstrap)", enabled=True, interval=3600, stream=stream) as shown:
        shown.on_metric_call(False)  # before any phase (a refusal would come here): nothing is shown
    assert stream.getvalue() == ""
    with TuneProgress("optimize oracle (bootstrap)", enabled=True, interval=3600, stream=stream) as shown:
        shown.on_phase("optimizing")
        for failed in (False, True, False):
            shown.on_lm_call(failed)
        shown.on_lm_usage(10, 5)
        shown.on_metric_call(False)
        shown.on_metric_call(True)
    line = stream.getvalue().splitlines()[-1]
    assert line.startswith("[groundstate] optimize oracle (bootstrap): optimizing, 2 metric calls (1 raised), 3 LM "
                           "calls (1 failed), 15 tokens, ") and line.endswith(" elapsed")
    with TuneProgress("off", enabled=False, stream=stream) as shown:
        shown.on_phase("optimizing")
    assert "off" not in stream.getvalue()
