import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.results import RESULTS, read_results
from groundstate.eval.runner import RunAborted, Runner, fingerprint, parse_shard, select_records, shard_of
from groundstate.eval.runs import merge_runs
from groundstate.programs.qa import QuestionAnswering
from groundstate.testing import scripted_lm
from tests.helpers import ROOT, echo_number_lm, json_adapter, qa_records, qa_score


def make_runner(tmp_path, lm, threads=1, **kwargs):
    return Runner(QuestionAnswering(), {"program": "qa", "data": "test"}, out=tmp_path / "runs", threads=threads,
                  inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=lm, adapter=json_adapter(),
                  **kwargs)


def ids_in_file(result):
    return [row["id"] for row in read_results(result.run_dir / RESULTS)]


def test_run_writes_config_results_and_summary(tmp_path):
    lm = echo_number_lm()
    result = make_runner(tmp_path, lm, threads=3).run(qa_records(12))
    assert (result.run_dir / "config.json").is_file()
    assert json.loads((result.run_dir / "summary.json").read_text())["n_done"] == 12
    rows = read_results(result.run_dir / RESULTS)
    assert sorted(r["id"] for r in rows) == [f"r{i:03d}" for i in range(12)]
    row = rows[0]
    assert row["error"] is None and row["lm_calls"] == 1
    assert row["input_tokens"] == 10 and row["output_tokens"] == 5
    assert all(r["outputs"]["answer"] == str(int(r["id"][1:])) for r in rows)
    assert result.summary["scores"]["exact_match"]["mean"] == 1.0
    assert result.summary["tokens"]["total"] == 12 * 15
    assert lm.engine.calls == 12


def test_same_config_same_run_id_and_changed_config_new_one(tmp_path):
    r1 = make_runner(tmp_path, echo_number_lm()).run(qa_records(3))
    r2 = make_runner(tmp_path, echo_number_lm()).run(qa_records(3))
    assert r1.run_id == r2.run_id and r2.skipped == 3
    r3 = Runner(QuestionAnswering(), {"program": "qa", "data": "other"}, out=tmp_path / "runs",
                inputs=lambda r: {"question": r["question"]}, lm=echo_number_lm(),
                adapter=json_adapter()).run(qa_records(3))
    assert r3.run_id != r1.run_id
    assert fingerprint({"a": 1, "b": 2}) == fingerprint({"b": 2, "a": 1})


def test_faulty_records_are_recorded_as_failed_never_scored_and_retried(tmp_path):
    records = qa_records(10, fail={2, 7})
    result = make_runner(tmp_path, echo_number_lm(), threads=2).run(records)
    failed = {r["id"]: r for r in result.rows if r["error"]}
    assert set(failed) == {"r002", "r007"}
    assert "scripted LM failure" in failed["r002"]["error"]
    # a failed program is not a score: the metric is absent, named as not measured
    assert failed["r002"]["scores"] == {} and set(failed["r002"]["score_errors"]) == {"exact_match"}
    assert result.summary["n_error"] == 2
    entry = result.summary["scores"]["exact_match"]
    assert entry["mean"] == 1.0 and entry["n"] == 8 and entry["failed"] == 2 and entry["missing"] == 0

    fixed = [{**r, "question": r["question"].replace("FAIL ", "")} for r in records]
    lm = echo_number_lm()
    again = make_runner(tmp_path, lm, threads=2).run(fixed)
    assert again.run_id == result.run_id
    assert lm.engine.calls == 2  # only the two failed records ran again
    assert Counter(ids_in_file(again)) == Counter(r["id"] for r in records)  # each id exactly once
    assert again.summary["n_error"] == 0
    assert again.row("r007")["attempt"] == 2 and again.row("r001")["attempt"] == 1


def test_max_error_rate_stops_and_keeps_results(tmp_path):
    records = qa_records(30, fail=set(range(30)))
    with pytest.raises(RunAborted) as info:
        make_runner(tmp_path, echo_number_lm(), max_error_rate=0.5).run(records)
    result = info.value.result
    assert 5 <= len(result.rows) < 30
    assert len(ids_in_file(result)) == len(result.rows)
    assert json.loads((result.run_dir / "summary.json").read_text())["stopped_reason"].startswith("stopped")


@pytest.mark.parametrize("threads", [1, 3])
def test_keyboard_interrupt_midway_then_resume(tmp_path, threads):
    records = qa_records(20)

    def respond(req):
        if "question number 9" in req.user:
            return KeyboardInterrupt()
        return {"answer": req.user.split("question number")[-1].split()[0]}

    with pytest.raises(KeyboardInterrupt):
        make_runner(tmp_path, scripted_lm(respond), threads=threads).run(records)
    run_dirs = list((tmp_path / "runs").iterdir())
    written = read_results(run_dirs[0] / RESULTS)
    assert 0 < len(written) < 20
    assert "r009" not in {r["id"] for r in written}

    lm = echo_number_lm()
    result = make_runner(tmp_path, lm, threads=threads).run(records)
    assert Counter(ids_in_file(result)) == Counter(r["id"] for r in records)
    assert set(Counter(ids_in_file(result)).values()) == {1}
    assert lm.engine.calls == 20 - len(written)


SIGKILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from groundstate.eval.runner import Runner
    from groundstate.programs.qa import QuestionAnswering
    from groundstate.testing import scripted_lm
    import dspy
    dspy.configure_cache(enable_disk_cache=False)

    def respond(req):
        return {{"answer": req.user.split("question number")[-1].split()[0]}}

    records = [{{"id": f"r{{i:03d}}", "question": f"question number {{i}}", "answer": str(i)}} for i in range(60)]
    runner = Runner(QuestionAnswering(), {{"program": "qa", "data": "kill"}}, out={out!r}, threads=2,
                    inputs=lambda r: {{"question": r["question"]}}, lm=scripted_lm(respond, sleep=0.05),
                    adapter=dspy.JSONAdapter())
    runner.run(records)
""")


def test_sigkill_loses_nothing_written_and_torn_line_is_repaired(tmp_path):
    out = tmp_path / "runs"
    script = tmp_path / "run.py"
    script.write_text(SIGKILL_SCRIPT.format(root=str(ROOT), out=str(out)))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.time() + 120
    results = None
    while time.time() < deadline:
        found = list(out.glob("*/results.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 8:
            results = found[0]
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert results is not None, "the subprocess never wrote results"
    before = read_results(results)
    assert 8 <= len(before) < 60
    with open(results, "a") as handle:  # imitate a write torn by the kill
        handle.write('{"id": "r059", "outputs": {"ans')

    def respond(req):
        return {"answer": req.user.split("question number")[-1].split()[0]}

    records = [{"id": f"r{i:03d}", "question": f"question number {i}", "answer": str(i)} for i in range(60)]
    lm = scripted_lm(respond)
    result = Runner(QuestionAnswering(), {"program": "qa", "data": "kill"}, out=out, threads=2,
                    inputs=lambda r: {"question": r["question"]}, lm=lm, adapter=json_adapter()).run(records)
    counts = Counter(ids_in_file(result))
    assert counts == Counter(r["id"] for r in records)
    assert lm.engine.calls == 60 - len(before)
    assert results.read_text().endswith("\n")


def test_shards_partition_the_records_and_merge(tmp_path):
    records = qa_records(40)
    full = make_runner(tmp_path, echo_number_lm()).run(records)
    shards = [make_runner(tmp_path, echo_number_lm()).run(records, shard=(i, 3)) for i in range(3)]
    shard_ids = [set(r["id"] for r in s.rows) for s in shards]
    assert all(ids for ids in shard_ids)
    for i in range(3):
        for j in range(i + 1, 3):
            assert not shard_ids[i] & shard_ids[j]
    assert set().union(*shard_ids) == {r["id"] for r in full.rows}
    assert len({s.run_id for s in shards}) == 3
    merged = merge_runs([s.run_dir for s in shards], out=tmp_path / "runs")
    assert sorted(r["id"] for r in merged["rows"]) == sorted(r["id"] for r in full.rows)
    assert merged["summary"]["n_done"] == 40 and merged["summary"]["shards"]["missing"] == []
    # shards with a limit: the limit applies first, so shards of a limited run still partition it
    limited = [select_records(records, limit=10, shard=(i, 2)) for i in range(2)]
    assert sorted(r["id"] for part in limited for r in part) == [r["id"] for r in records[:10]]


def test_merge_refuses_different_configs(tmp_path):
    records = qa_records(6)
    a = make_runner(tmp_path, echo_number_lm()).run(records, shard=(0, 2))
    b = Runner(QuestionAnswering(), {"program": "qa", "data": "other"}, out=tmp_path / "runs",
               inputs=lambda r: {"question": r["question"]}, lm=echo_number_lm(),
               adapter=json_adapter()).run(records, shard=(1, 2))
    from groundstate.errors import InputError

    with pytest.raises(InputError, match="configuration differs"):
        merge_runs([a.run_dir, b.run_dir], out=tmp_path / "runs")


def test_shard_parsing_and_stability():
    assert parse_shard("1/4") == (1, 4)
    assert parse_shard(None) is None
    for bad in ("4/4", "x", "1/0", "-1/3"):
        with pytest.raises(ConfigError):
            parse_shard(bad)
    assert shard_of("abc", 7) == shard_of("abc", 7)
    assert {shard_of(f"id{i}", 4) for i in range(100)} == {0, 1, 2, 3}


def test_duplicate_ids_are_refused(tmp_path):
    records = qa_records(3) + qa_records(1)
    with pytest.raises(ConfigError, match="duplicate record id 'r000'"):
        make_runner(tmp_path, echo_number_lm()).run(records)


def test_meter_counts_calls_made_on_program_threads(tmp_path):
    """LM calls that a program fans out to its own threads are still counted on the record."""
    import dspy

    from groundstate.concurrency import thread_map

    class FanOut(dspy.Module):
        def __init__(self):
            super().__init__()
            self.qa = QuestionAnswering()

        def forward(self, question):
            answers = thread_map(lambda q: self.qa(question=q).answer, [question] * 4, max_workers=4)
            return dspy.Prediction(answer=answers[0])

    lm = echo_number_lm()
    result = Runner(FanOut(), {"program": "fan"}, out=tmp_path / "runs", threads=2,
                    inputs=lambda r: {"question": r["question"]}, lm=lm, adapter=json_adapter()).run(qa_records(5))
    assert all(r["lm_calls"] == 4 and r["input_tokens"] == 40 for r in result.rows)
    assert lm.engine.calls == 20


def test_failed_calls_are_counted_as_failures_not_cache_hits(tmp_path):
    lm = echo_number_lm()  # no cache: a failed call reports no usage, like a cache hit, yet it is a failure
    result = make_runner(tmp_path, lm).run(qa_records(4, fail={1, 3}))
    failed = [result.row(f"r{i:03d}") for i in (1, 3)]
    assert all(r["error"] and r["lm_calls"] == 1 and r["failed_calls"] == 1 and r["cached_calls"] == 0
               for r in failed)
    assert result.row("r000")["failed_calls"] == 0
    assert result.summary["lm_calls"] == {"total": 4, "per_record": 1.0, "cached": 0, "failed": 2}


def test_cached_calls_are_counted_and_cost_no_tokens(tmp_path):
    lm = echo_number_lm(cache=True)
    first = make_runner(tmp_path, lm).run(qa_records(4))
    assert first.summary["lm_calls"]["cached"] == 0 and first.summary["tokens"]["total"] == 4 * 15
    again = Runner(QuestionAnswering(), {"program": "qa", "data": "second"}, out=tmp_path / "runs",
                   inputs=lambda r: {"question": r["question"]}, lm=lm, adapter=json_adapter()).run(qa_records(4))
    assert again.summary["lm_calls"] == {"total": 4, "per_record": 1.0, "cached": 4, "failed": 0}
    assert again.summary["tokens"]["total"] == 0
    assert lm.engine.calls == 4


def test_a_key_echoed_inside_a_parsed_reply_never_reaches_results(tmp_path, monkeypatch):
    """A server can echo the key in a reply that parses: the stored outputs hold no form of it; prose is kept."""
    import base64

    key = "sk-test-echoed-4f1e9a7c2b"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    echoed = f"my key is {key}, base64 {base64.b64encode(key.encode()).decode()}; the bearer of bad news"
    result = make_runner(tmp_path, scripted_lm(lambda request: {"answer": echoed})).run(qa_records(2))
    text = (result.run_dir / RESULTS).read_text()
    assert key not in text and base64.b64encode(key.encode()).decode() not in text
    assert "[redacted]" in text and "the bearer of bad news" in text
