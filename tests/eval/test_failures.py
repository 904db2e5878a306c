"""A failure is never a score (issue 22 item 6).

A T2 judge served by a fake OpenAI-compatible server (``servers``) fails for chosen records while the program runs
on a scripted LM: the failed record keeps its outputs and trace, T1 and T3 are scored, T2 is absent with its error,
the summary counts it as failed and never averages it in as 0, the printed table says "not measured (N failed)",
a resume asks the judge again for exactly the failed calls (DSPy's cache does not replay them) without running
the program again, and a run where every record failed raises :class:`RunAborted` (exit 1 from the CLI).
"""

from __future__ import annotations

import io
import json
import uuid

import dspy
import pytest
from rich.console import Console

from groundstate.cli import main
from groundstate.cli.output import print_summary
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.judges import LMJudge
from groundstate.eval.reground.scores import make_scorer
from groundstate.eval.reground.statements import statement_scorer
from groundstate.eval.reground.tasks import offquery_outputs
from groundstate.eval.results import summarize
from groundstate.eval.runner import RunAborted, Runner
from groundstate.eval.scoring import PROGRAM_FAILED, ScoringError
from groundstate.eval.stats import format_ci
from groundstate.lm.specs import get_lm
from groundstate.programs.qa import QuestionAnswering
from groundstate.testing import scripted_lm
from tests.helpers import echo_number_lm, json_adapter, qa_records, qa_score
from tests.test_hostile_files import run_cli

GOOD_JUDGE = "[[ ## supported_ids ## ]]\n[1, 2]\n\n[[ ## completed ## ]]"


class OneCallProgram(dspy.Module):
    """An OffQuery program of one scripted LM call whose state names the record (so the judge server can tell
    records apart); it returns a trace, which a failed judge must not discard."""

    def __init__(self):
        super().__init__()
        self.step = dspy.Predict("question -> answer")

    def forward(self, rid: str):
        out = self.step(question=f"which option for {rid}?")
        return dspy.Prediction(misleading_agent=5, state=f"State of {rid}: fever present, cough present.",
                               answer=out.answer, trace=[{"step": "one call", "record": rid}])


def judge_server(servers, broken: set[str]):
    """A judge whose reply is prose (unparseable, even by DSPy's JSON fallback) for the records in ``broken``."""

    def respond(request: dict) -> str:
        prompt = json.dumps(request["messages"])
        return "I would rather not say." if any(rid in prompt for rid in broken) else GOOD_JUDGE

    return servers(responder=respond)


def requests_for(server, rid: str) -> int:
    return sum(1 for r in server.requests if rid.encode() in r["body"])


def offquery_runner(tmp_path, program_lm, judge, **kwargs) -> Runner:
    return Runner(OneCallProgram(), {"program": "one-call", "data": "synthetic"}, out=tmp_path / "runs",
                  inputs=lambda record: {"rid": record.id}, scorer=make_scorer(judge, halves=True),
                  outputs=lambda p: {**offquery_outputs(p)}, lm=program_lm, **kwargs)


def printed(result) -> str:
    buffer = io.StringIO()
    print_summary(result, Console(file=buffer, width=200))
    return buffer.getvalue()


@pytest.fixture
def judge_lm(servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge")

    def make(server):  # a model name of its own: no cache entry of another test can answer it
        return get_lm(f"openai/judge-{uuid.uuid4().hex[:8]}", api_base=server.url, num_retries=0)

    return make


@pytest.mark.timeout(120)
def test_failed_judge_keeps_outputs_scores_t1_t3_and_resume_reasks_only_the_failed_calls(tmp_path, servers,
                                                                                          judge_lm):
    records = generate("healthcare", "main", 4, seed=0)
    broken = {records[1].id, records[3].id}
    server = judge_server(servers, broken)
    judge = LMJudge(judge_lm(server))
    program_lm = scripted_lm(lambda request: {"answer": "C"})
    result = offquery_runner(tmp_path, program_lm, judge, max_error_rate=None).run(records)

    assert program_lm.engine.calls == 4
    for record in records:
        row = result.row(record.id)
        assert row["error"] is None  # the program succeeded: its outputs and trace are kept
        assert row["outputs"]["state"].startswith(f"State of {record.id}") and row["outputs"]["answer"] == "C"
        assert row["trace"] == [{"step": "one call", "record": record.id}]
        assert set(row["scores"]) >= {"t1", "t3"}
        if record.id in broken:
            assert not {"t2", "t2_retention", "t2_exclusion"} & set(row["scores"])
            assert set(row["score_errors"]) == {"t2", "t2_retention", "t2_exclusion"}
            assert "T2 judge failed: AdapterParseError" in row["score_errors"]["t2"]
        else:
            assert "t2" in row["scores"] and row["score_errors"] == {}
    measured = [result.row(r.id)["scores"]["t2"] for r in records if r.id not in broken]
    t2 = result.summary["scores"]["t2"]
    assert t2["n"] == 2 and t2["failed"] == 2 and t2["missing"] == 0
    assert t2["mean"] == pytest.approx(sum(measured) / 2)  # over the measured records: no failure averaged as 0
    assert result.summary["scores"]["t1"]["n"] == 4 and result.summary["scores"]["t1"]["failed"] == 0
    assert result.summary["n_error"] == 0 and result.summary["n_score_failed"] == 2
    assert "(2 failed)" in printed(result)
    asked = {r.id: requests_for(server, r.id) for r in records}
    assert all(asked[rid] == 2 for rid in broken)  # the chat reply, then DSPy's JSON fallback: both unparseable

    broken.clear()  # the judge answers properly now; its unparseable replies are still what the cache saw
    again = offquery_runner(tmp_path, program_lm, judge, max_error_rate=None).run(records)
    assert again.run_id == result.run_id
    assert program_lm.engine.calls == 4  # re-scored from the stored outputs: no program ran again
    for record in records:
        row = again.row(record.id)
        failed_before = record.id in {records[1].id, records[3].id}
        # the failed judge call reached the server again (not replayed from DSPy's cache); the others did not
        assert requests_for(server, record.id) == asked[record.id] + (1 if failed_before else 0)
        assert row["score_errors"] == {} and "t2" in row["scores"]
        assert row["attempt"] == (2 if failed_before else 1)
        assert row["trace"] == [{"step": "one call", "record": record.id}]
    assert again.summary["scores"]["t2"]["n"] == 4 and again.summary["scores"]["t2"]["failed"] == 0
    assert again.summary["n_score_failed"] == 0


@pytest.mark.timeout(120)
def test_judge_failing_everywhere_is_not_measured_and_the_run_fails(tmp_path, servers, judge_lm, capsys):
    records = generate("healthcare", "main", 3, seed=1)
    server = judge_server(servers, {r.id for r in records})
    with pytest.raises(RunAborted, match="every record failed") as info:
        offquery_runner(tmp_path, scripted_lm(lambda request: {"answer": "A"}), LMJudge(judge_lm(server)),
                        max_error_rate=None).run(records)
    result = info.value.result
    t2 = result.summary["scores"]["t2"]
    assert t2["mean"] is None and t2["low"] is None and t2["n"] == 0 and t2["failed"] == 3
    assert result.summary["scores"]["t1"]["n"] == 3  # T1 and T3 were measured on every record
    text = printed(result)
    assert "not measured (3 failed)" in text and "0.000 [0.000, 0.000]" not in text
    assert json.loads((result.run_dir / "summary.json").read_text())["stopped_reason"].startswith("failed: every")
    assert len((result.run_dir / "results.jsonl").read_text().splitlines()) == 3  # everything kept on disk
    capsys.readouterr()
    assert main(["runs", "show", result.run_id, "--runs-dir", str(tmp_path / "runs")]) == 0
    shown = capsys.readouterr().out
    assert "not measured (3 failed)" in shown and shown.count("not measured on ") == 3
    assert "(t2, t2_retention, t2_exclusion): T2 judge failed: AdapterParseError" in shown


def test_program_failure_is_counted_apart_never_scored(tmp_path):
    records = qa_records(6, fail={1, 4})
    result = Runner(QuestionAnswering(), {"program": "qa", "data": "t"}, out=tmp_path / "runs",
                    inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=echo_number_lm(),
                    adapter=json_adapter()).run(records)
    failed = result.row("r001")
    # qa_score gives a failed record 0.0; the runner uses only the metric's name, never that value
    assert failed["error"] and failed["scores"] == {} and failed["score_errors"] == {"exact_match": PROGRAM_FAILED}
    entry = result.summary["scores"]["exact_match"]
    assert entry["mean"] == 1.0 and entry["n"] == 4 and entry["failed"] == 2
    assert format_ci(entry) == "1.000 [1.000, 1.000] (2 failed)"


@pytest.mark.parametrize("n,fail,limit,aborts", [
    (3, {0, 1, 2}, None, "failed: every record failed"),  # fewer than 5 records, no limit: still a failed run
    (3, {0, 1}, 0.5, "failed: error rate 67% exceeds --max-error-rate 50%"),  # checked at the end, however few
    (3, {0}, 0.5, None),
    (12, set(range(12)), 0.5, "stopped: error rate 100%"),  # stopped early after 5 records
])
def test_error_share_and_every_record_failed_fail_the_run(tmp_path, n, fail, limit, aborts):
    runner = Runner(QuestionAnswering(), {"program": "qa", "data": "t"}, out=tmp_path / "runs",
                    inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=echo_number_lm(),
                    adapter=json_adapter(), max_error_rate=limit)
    if aborts is None:
        assert runner.run(qa_records(n, fail=fail)).stopped_reason is None
        return
    with pytest.raises(RunAborted, match=aborts) as info:
        runner.run(qa_records(n, fail=fail))
    assert len((info.value.result.run_dir / "results.jsonl").read_text().splitlines()) == len(info.value.result.rows)


def test_a_scorer_that_cannot_score_stored_outputs_runs_the_record_again(tmp_path):
    calls = {"n": 0}

    def flaky(record, prediction):  # fails once per record, and is not marked from_outputs
        if prediction is None:
            return {"exact_match": None}
        calls["n"] += 1
        if calls["n"] <= 2:
            raise RuntimeError("scorer hiccup")
        return {"exact_match": 1.0}

    lm = echo_number_lm()

    def runner():
        return Runner(QuestionAnswering(), {"program": "qa", "data": "t"}, out=tmp_path / "runs",
                      inputs=lambda r: {"question": r["question"]}, scorer=flaky, lm=lm, adapter=json_adapter(),
                      max_error_rate=None)

    with pytest.raises(RunAborted, match="every record failed"):
        runner().run(qa_records(2))
    assert lm.engine.calls == 2
    again = runner().run(qa_records(2))
    assert lm.engine.calls == 4 and again.summary["scores"]["exact_match"]["n"] == 2
    row = again.row("r000")
    assert row["attempt"] == 2 and row["score_errors"] == {}


def test_error_row_of_a_lost_worker_names_metrics_as_not_measured(tmp_path):
    runner = Runner(QuestionAnswering(), {}, scorer=make_scorer(halves=True))
    record = generate("healthcare", "main", 1, seed=0)[0]
    row = runner.error_row(record, "Ray task failed: worker died", {record.id: {"attempt": 1}})
    assert row["scores"] == {} and row["attempt"] == 2 and row["outputs"] == {}
    assert set(row["score_errors"]) == {"t1", "t2", "t2_retention", "t2_exclusion", "t3"}


def test_summary_and_format_ci_never_print_a_failure_as_a_number():
    rows = [{"id": "a", "scores": {}, "score_errors": {"m": "x"}, "error": "boom"},
            {"id": "b", "scores": {}, "score_errors": {"m": "x"}}]
    entry = summarize(rows)["scores"]["m"]
    assert entry == {"mean": None, "low": None, "high": None, "n": 0, "failed": 2, "missing": 0}
    assert format_ci(entry) == "not measured (2 failed)"
    one = {"mean": 0.5, "low": None, "high": None, "n": 1, "failed": 1}
    assert format_ci(one) == "0.500 (n=1, no interval, 1 failed)"
    assert format_ci({"mean": 0.5, "low": 0.25, "high": 0.75, "n": 9}) == "0.500 [0.250, 0.750]"
    assert format_ci({"mean": None, "n": 0, "failed": 0}) == "-" and format_ci(None) == "-"


class _FlagJudge:
    """Fails on statement matching only (its states are flagged statements, never a program state)."""

    def supported(self, state, facts):
        if state.startswith("flagged"):
            raise RuntimeError("statement judge down")
        return [True] * len(facts)


def test_statement_judge_failure_fails_only_the_statement_metrics():
    record = generate("healthcare", "distributed", 1, seed=0)[0]
    assert record.misleading_statements
    scorer = statement_scorer(make_scorer(_FlagJudge()), _FlagJudge())
    prediction = dspy.Prediction(misleading_agent=None, state="fever", answer="A",
                                 misleading_statements=["flagged one"])
    with pytest.raises(ScoringError) as info:
        scorer(record, prediction)
    assert set(info.value.errors) == {"statement_precision", "statement_recall"}
    assert {"t1", "t2", "t3"} <= set(info.value.scores)
    assert scorer.from_outputs
    assert set(scorer(record, None)) >= {"t1", "t3", "statement_precision", "statement_recall"}


def test_cli_run_where_every_record_failed_exits_1_and_prints_not_measured(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli")
    server = servers("500")
    (tmp_path / "lm.toml").write_text(f'[default]\nmodel = "openai/fails-{uuid.uuid4().hex[:8]}"\n'
                                      f'api_base = "{server.url}"\nnum_retries = 0\n')
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "question": f"q {i}?", "answer": "a"})
                                               + "\n" for i in range(3)))
    code, out, err = run_cli(["run", "qa", "--data", "qa.jsonl", "--lm-config", "lm.toml", "--runs-dir", "runs",
                              "--no-progress"], tmp_path)
    assert code == 1
    assert err.strip().count("\n") == 0 and "every record failed (3 program errors" in err
    assert "not measured (3 failed)" in out and "0.000" not in out
    assert len(next((tmp_path / "runs").glob("*/results.jsonl")).read_text().splitlines()) == 3


def test_consilience_table_counts_failed_discussions_apart():
    from groundstate.eval.consilience.metrics import FAILED_METRICS
    from groundstate.eval.consilience.tables import method_row, table_cells

    ok = {"scores": {"task_accuracy": 1.0, "vote_accuracy": 0.5, "votes_correct": 2.0, "votes": 4.0,
                     "messages": 6.0, "words": 60.0}, "score_errors": {}, "error": None}
    lost = {"scores": {}, "score_errors": dict.fromkeys(FAILED_METRICS, PROGRAM_FAILED), "error": "boom"}
    row = method_row("Rules", [ok, lost, lost])
    assert row["task_accuracy"]["mean"] == 1.0 and row["task_accuracy"]["n"] == 1
    assert row["task_accuracy"]["failed"] == 2 and row["vote_accuracy"]["failed"] == 2
    assert row["vote_accuracy"]["mean"] == 0.5 and row["errors"] == 2
    cells = table_cells([row, method_row("LLM", [lost])])
    assert "(2 failed)" in cells[0][2] and "(2 failed)" in cells[0][3]
    assert cells[1][1] == "not measured (1 failed)" and cells[1][2] == "not measured (1 failed)"
    assert cells[1][4] == "-"  # no messages were measured: no number


def test_a_resume_that_stops_early_keeps_every_stored_output(tmp_path):
    judge = {"up": False}

    def scorer(record, prediction):  # exact match needs a judge that is down until told otherwise
        if prediction is None:
            return {"exact_match": None}
        if not judge["up"]:
            raise ScoringError({}, {"exact_match": "judge down"})
        return {"exact_match": float(prediction.answer == record["answer"])}

    scorer.from_outputs = True
    lm = echo_number_lm()

    def run(limit):
        return Runner(QuestionAnswering(), {"program": "qa", "data": "t"}, out=tmp_path / "runs",
                      inputs=lambda r: {"question": r["question"]}, scorer=scorer, lm=lm, adapter=json_adapter(),
                      max_error_rate=limit).run(qa_records(12))

    with pytest.raises(RunAborted, match="every record failed"):
        run(None)
    with pytest.raises(RunAborted, match="stopped: error rate 100%") as info:
        run(0.5)  # re-scoring fails again: stopped after 5 records
    stopped = info.value.result
    lines = [json.loads(line) for line in (stopped.run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == [f"r{i:03d}" for i in range(12)]  # one line each, none lost
    assert all(r["outputs"]["answer"] == str(int(r["id"][1:])) for r in lines)  # every stored output kept
    assert len(stopped.rows) == 12 and stopped.summary["scores"]["exact_match"]["failed"] == 12
    judge["up"] = True
    done = run(0.5)
    assert lm.engine.calls == 12  # every program ran once; the rest was re-scoring from stored outputs
    assert done.summary["scores"]["exact_match"] == {**done.summary["scores"]["exact_match"], "mean": 1.0, "n": 12,
                                                     "failed": 0}
    assert sorted(r["attempt"] for r in done.rows) == [2] * 7 + [3] * 5


def test_cli_compare_reports_every_run_and_exits_1_when_one_failed(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli")
    server = servers("500")
    (tmp_path / "lm.toml").write_text(f'[default]\nmodel = "openai/fails-{uuid.uuid4().hex[:8]}"\n'
                                      f'api_base = "{server.url}"\nnum_retries = 0\n')
    code, out, err = run_cli(["compare", "standard", "--data", "synthetic", "--n", "2", "--judge-lm", "lexical",
                              "--lm-config", "lm.toml", "--runs-dir", "runs", "--no-progress"], tmp_path)
    assert code == 1, err
    assert err.strip().count("\n") == 0 and "standard: failed: every record failed (2 program errors" in err
    assert "not measured (2 failed)" in out  # the report is still written and printed
    row = next((tmp_path / "runs").glob("compare-*/compare.md")).read_text().splitlines()[-1]
    assert row.startswith("| standard (too many failures) | not measured (2 failed) |") and "0.000" not in row


def test_a_program_whose_reply_was_unparseable_is_asked_again_on_resume(tmp_path):
    replies = {"broken": True}

    def respond(request):
        return "sorry, no fields" if replies["broken"] and "number 1" in request.user else {
            "answer": request.user.split("question number")[-1].split()[0].strip()}

    lm = scripted_lm(respond, cache=True, model=f"scripted-{uuid.uuid4().hex[:8]}")  # DSPy's cache is on

    def run():
        return Runner(QuestionAnswering(), {"program": "qa", "data": "t"}, out=tmp_path / "runs",
                      inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=lm,
                      adapter=json_adapter(), max_error_rate=None).run(qa_records(3))

    first = run()
    assert "AdapterParseError" in first.row("r001")["error"] and first.row("r000")["error"] is None
    calls = lm.engine.calls
    replies["broken"] = False
    again = run()
    assert lm.engine.calls == calls + 1  # only the failed call reached the LM; the cache did not replay it
    assert again.row("r001")["error"] is None and again.summary["scores"]["exact_match"]["n"] == 3
