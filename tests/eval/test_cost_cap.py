"""``--max-cost USD`` on durable runs (issue 26, item 7): the run stops cleanly when the priced spend reaches the
cap (no new record starts, finished records are written, the summary names the spend and the cap, exit 1), the
same command resumes (finished records make no call), the cap is not part of the run id, and a model without a
price is refused before any call."""

from __future__ import annotations

import json

import dspy
import litellm
import pytest

from groundstate.errors import ConfigError
from groundstate.eval.cost_cap import CostCap, described_models, usd
from groundstate.eval.results import RESULTS, read_results
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import CostCapStopped, RunAborted, Runner, durable_run
from groundstate.programs.qa import QuestionAnswering
from groundstate.testing import scripted_lm
from tests.helpers import echo_number_lm, json_adapter, qa_records, qa_score
from tests.test_hostile_files import run_cli

PRICED = "openai/gpt-4o-mini"
TOKENS = {"input_tokens": 1000, "output_tokens": 500}


def call_cost() -> float:
    prompt, completion = litellm.cost_per_token(model=PRICED, prompt_tokens=1000, completion_tokens=500)
    return prompt + completion


def priced_lm():
    return echo_number_lm(model=PRICED, **TOKENS)


def runner(tmp_path, lm, cap=None, threads=1, program=None):
    return Runner(program or QuestionAnswering(), {"program": "qa", "data": "test", "lm": {"model": lm.model}},
                  out=tmp_path / "runs", threads=threads, inputs=lambda r: {"question": r["question"]},
                  scorer=qa_score, lm=lm, adapter=json_adapter(), cost_cap=cap)


def test_the_run_stops_at_the_cap_keeps_what_finished_and_resumes(tmp_path):
    cap = 2.5 * call_cost()  # the third record's spend reaches it
    lm = priced_lm()
    with pytest.raises(CostCapStopped) as stop:
        runner(tmp_path, lm, CostCap(cap)).run(qa_records(10))
    result = stop.value.result
    assert isinstance(stop.value, RunAborted)  # every caller that keeps a failed run's records keeps these
    assert lm.engine.calls == 3 and len(read_results(result.run_dir / RESULTS)) == 3  # no record started after
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["n_done"] == 3 and summary["finished"] is True
    assert summary["cost_cap"] == {"max_usd": cap, "spent_usd": pytest.approx(3 * call_cost())}
    reason = summary["stopped_reason"]
    assert reason.startswith("stopped at the cost cap") and usd(3 * call_cost()) in reason and usd(cap) in reason
    assert "3 of 10 records done" in reason

    again = priced_lm()  # the same command again: the finished records make no call
    with pytest.raises(CostCapStopped) as stop:
        runner(tmp_path, again, CostCap(cap)).run(qa_records(10))
    assert stop.value.result.run_id == result.run_id and again.engine.calls == 3
    assert stop.value.result.summary["n_done"] == 6 and stop.value.result.skipped == 3
    last = priced_lm()
    done = runner(tmp_path, last).run(qa_records(10))  # without a cap it finishes the 4 left
    assert last.engine.calls == 4 and done.summary["n_done"] == 10 and done.summary["stopped_reason"] is None
    assert sorted(r["id"] for r in read_results(done.run_dir / RESULTS)) == [f"r{i:03d}" for i in range(10)]


def test_a_cap_the_last_record_reaches_is_no_stop(tmp_path):
    lm = priced_lm()
    result = runner(tmp_path, lm, CostCap(2.5 * call_cost())).run(qa_records(3))
    assert result.summary["n_done"] == 3 and result.summary["stopped_reason"] is None and lm.engine.calls == 3


def test_with_threads_no_record_starts_after_the_cap_and_every_started_one_is_written(tmp_path):
    lm = echo_number_lm(model=PRICED, sleep=0.02, **TOKENS)
    with pytest.raises(CostCapStopped) as stop:
        runner(tmp_path, lm, CostCap(2.5 * call_cost()), threads=4).run(qa_records(40))
    written = read_results(stop.value.result.run_dir / RESULTS)
    assert len(written) == lm.engine.calls  # every call's record was written: none lost in flight
    assert 3 <= lm.engine.calls <= 3 + 4 - 1  # past the cap only by records that were already running
    assert stop.value.result.summary["n_done"] == len(written) < 40


def test_the_cap_is_not_part_of_the_run_id_and_one_cap_covers_a_commands_runs(tmp_path):
    settings = RunSettings(out=tmp_path / "runs", threads=1, max_cost=2.5 * call_cost())
    assert settings.model_copy(update={"threads": 2}).cost_cap() is settings.cost_cap()  # shared by copies
    assert settings.model_copy(update={"max_cost": None}).cost_cap() is None
    config = {"program": "qa", "data": "test", "lm": {"model": PRICED}}
    first, second = priced_lm(), priced_lm()
    kwargs = dict(inputs=lambda r: {"question": r["question"]}, scorer=qa_score)
    with dspy.context(lm=first, adapter=json_adapter()), pytest.raises(CostCapStopped) as stop:
        durable_run(QuestionAnswering(), config, qa_records(5), settings, **kwargs)
    with dspy.context(lm=second, adapter=json_adapter()), pytest.raises(CostCapStopped) as later:
        durable_run(QuestionAnswering(), {**config, "data": "other"}, qa_records(5), settings, **kwargs)
    assert first.engine.calls == 3 and second.engine.calls == 0  # the second run of the command starts no record
    assert later.value.result.summary["n_done"] == 0 and "0 of 5 records done" in str(later.value)
    plain = RunSettings(out=tmp_path / "runs", threads=1)
    with dspy.context(lm=priced_lm(), adapter=json_adapter()):
        resumed = durable_run(QuestionAnswering(), config, qa_records(5), plain, **kwargs)
    assert resumed.run_id == stop.value.result.run_id and resumed.skipped == 3  # no cap: the same run


def test_a_model_without_a_price_is_refused_before_any_call(tmp_path):
    lm = echo_number_lm()  # a scripted LM: no price
    with pytest.raises(ConfigError, match="'scripted/engine' has none in LiteLLM's cost map"):
        runner(tmp_path, lm, CostCap(1.0)).run(qa_records(3))
    assert lm.engine.calls == 0 and not (tmp_path / "runs").exists()  # nothing ran, nothing was made


def test_an_unpriced_role_or_judge_in_the_config_is_refused(tmp_path):
    config = {"lm": {"model": PRICED}, "lm_config": {"default": {"model": PRICED},
                                                    "roles": {"agent.1": {"model": "hosted_vllm/my-model"}}},
              "options": {"metric_spec": {"judge_lm": {"model": "openai/not-a-real-model-xyz"}}}}
    assert described_models(config) == {PRICED, "hosted_vllm/my-model", "openai/not-a-real-model-xyz"}
    lm = priced_lm()
    cap_runner = Runner(QuestionAnswering(), {"program": "qa", **config}, out=tmp_path / "runs", lm=lm,
                        adapter=json_adapter(), inputs=lambda r: {"question": r["question"]}, cost_cap=CostCap(1.0))
    with pytest.raises(ConfigError, match="hosted_vllm/my-model"):
        cap_runner.run(qa_records(2))
    assert lm.engine.calls == 0


def test_a_record_that_calls_an_unpriced_model_anyway_stops_the_run(tmp_path):
    """The check before the run sees the default LM; a program that calls another LM of its own is caught when its
    first record ends: the spend is unknown, so no other record starts."""
    hidden = scripted_lm(lambda req: {"answer": "1"})

    def program(question):
        with dspy.context(lm=hidden):
            return dspy.Predict("question -> answer")(question=question)

    lm = priced_lm()
    with pytest.raises(CostCapStopped, match="cannot be kept because the LM 'scripted/engine' has no price"):
        runner(tmp_path, lm, CostCap(1.0), program=program).run(qa_records(4))
    assert hidden.engine.calls == 1


def test_the_judges_calls_count_against_the_cap(tmp_path):
    judge = echo_number_lm(model=PRICED, **TOKENS)

    def judged(record, prediction):
        if prediction is None:
            return {"judged": 0.0}
        with dspy.context(lm=judge, adapter=json_adapter()):
            dspy.Predict("question -> answer")(question=record["question"])
        return {"judged": 1.0}

    lm = priced_lm()
    cap_runner = Runner(QuestionAnswering(), {"program": "qa", "lm": {"model": PRICED}}, out=tmp_path / "runs",
                        lm=lm, adapter=json_adapter(), inputs=lambda r: {"question": r["question"]}, scorer=judged,
                        cost_cap=CostCap(3.5 * call_cost()))
    with pytest.raises(CostCapStopped) as stop:
        cap_runner.run(qa_records(10))
    assert lm.engine.calls == judge.engine.calls == 2  # two records: program and judge, four calls of spend
    assert stop.value.result.summary["cost_cap"]["spent_usd"] == pytest.approx(4 * call_cost())
    assert stop.value.result.summary["cost_usd"]["total"] == pytest.approx(2 * call_cost())  # rows: program only


def test_a_ray_row_is_settled_from_its_cost_and_an_unpriced_one_stops():
    cap = CostCap(1.0)
    cap.settle_row({"id": "a", "cost_usd": 0.4, "lm_calls": 1})
    assert not cap.reached() and cap.spent() == pytest.approx(0.4)
    cap.settle_row({"id": "b", "cost_usd": None, "lm_calls": 2, "cached_calls": 2})  # all from cache: free
    assert not cap.reached()
    cap.settle_row({"id": "c", "cost_usd": None, "lm_calls": 1, "cached_calls": 0})
    assert cap.reached() and "record 'c'" in cap.reason(3, 5)
    with pytest.raises(ConfigError):
        CostCap(0)


def test_the_command_line_stops_at_the_cap_exit_1_and_resumes(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers()
    prompt, completion = litellm.cost_per_token(model=PRICED, prompt_tokens=11, completion_tokens=3)  # its usage
    cap = 2.5 * (prompt + completion)
    argv = ["run", "qa", "--data", "example:qa", "--lm", PRICED, "--api-base", server.url, "--threads", "1",
            "--runs-dir", "runs", "--no-progress", "--max-cost", repr(cap)]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 1 and len(server.requests) == 3, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("groundstate: stopped at the cost cap") and "Traceback" not in err
    assert "cost cap (--max-cost)" in out and "3/8" in out
    code, out, err = run_cli(argv, tmp_path)
    assert code == 1 and len(server.requests) == 6 and "6/8" in out  # resumed: 3 more records, none again
    code, out, err = run_cli(argv[:-2], tmp_path)
    assert code == 0 and len(server.requests) == 8 and "8/8" in out


def test_the_command_line_refuses_a_cap_on_an_unpriced_lm_in_one_line(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers()
    code, out, err = run_cli(["run", "qa", "--data", "example:qa", "--lm", "openai/my-local-model", "--api-base",
                              server.url, "--runs-dir", "runs", "--no-progress", "--max-cost", "5"], tmp_path)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "'openai/my-local-model' has none" in lines[0], err
    assert not server.requests and not (tmp_path / "runs").exists()
    code, out, err = run_cli(["run", "qa", "--data", "example:qa", "--max-cost", "0"], tmp_path)
    assert code == 2 and "argument --max-cost" in err


def priced_setup():
    """Ray worker setup: the scripted LM with a price (built once per worker process)."""
    return {"lm": priced_lm(), "adapter": json_adapter()}


@pytest.mark.timeout(300)
def test_on_ray_the_driver_stops_at_the_cap_and_a_resume_goes_on(tmp_path, local_ray):
    """The driver settles each row Ray returns; at the cap it starts nothing more (what was in flight is cancelled
    and runs on resume)."""
    settings = RunSettings(out=tmp_path / "runs", threads=1, backend="ray", ray_workers=1, worker_setup=priced_setup,
                           max_cost=2.5 * call_cost())
    config = {"program": "qa", "data": "ray", "lm": {"model": PRICED}}
    kwargs = dict(inputs=lambda r: {"question": r["question"]}, scorer=qa_score)
    with pytest.raises(CostCapStopped) as stop:
        durable_run(QuestionAnswering(), config, qa_records(12), settings, **kwargs)
    assert stop.value.result.summary["n_done"] == 3 and len(read_results(stop.value.result.run_dir / RESULTS)) == 3
    done = durable_run(QuestionAnswering(), config, qa_records(12), settings.model_copy(update={"max_cost": None}),
                       **kwargs)
    assert done.summary["n_done"] == 12 and done.skipped == 3 and done.run_id == stop.value.result.run_id


def test_experiment_run_checks_every_cell_before_the_first_and_shares_one_cap(tmp_path):
    from groundstate.eval.experiments.execute import run_experiment
    from groundstate.eval.experiments.load import load_spec
    from tests.eval.experiments.scripted import ScriptedLMs

    spec = load_spec("reground-table1-synthetic", {"n": 2})
    unpriced = ScriptedLMs()  # named as the embedded model: no price
    with pytest.raises(ConfigError, match="has none in LiteLLM's cost map"):
        run_experiment(spec, RunSettings(out=tmp_path / "runs", threads=1, max_cost=1.0), lms=unpriced)
    assert unpriced.calls == 0 and not (tmp_path / "runs").exists()

    capped = ScriptedLMs(model=PRICED)
    outcome = run_experiment(spec, RunSettings(out=tmp_path / "runs", threads=1, max_cost=1e-6), lms=capped)
    stopped = [o for o in outcome.outcomes if not o.reused]
    assert len(stopped) > 1 and all(o.failed.startswith("stopped at the cost cap") for o in stopped)
    assert stopped[0].summary["n_done"] == 1 and all(o.summary["n_done"] == 0 for o in stopped[1:])
    first_calls = capped.calls  # the first record of the first cell, and nothing after it
    assert first_calls == stopped[0].summary["lm_calls"]["total"]
    rest = ScriptedLMs(model=PRICED)
    finished = run_experiment(spec, RunSettings(out=tmp_path / "runs", threads=1), lms=rest)
    assert not finished.failed and all(o.summary["n_done"] == 2 for o in finished.outcomes)
    assert rest.calls == sum(o.summary["lm_calls"]["total"] for o in finished.outcomes if not o.reused) - first_calls


def test_a_ray_workers_rows_bring_the_judges_spend_and_the_driver_counts_it_without_writing_it():
    """Under Ray the scoring happens on the worker: a worker runner under a cap (``meter_scoring``) adds the judge's
    dollars to each row, and the driver's ``settle_row`` adds them to the spend and takes them out of the row."""
    judge = echo_number_lm(model=PRICED, **TOKENS)

    def judged(record, prediction):
        with dspy.context(lm=judge, adapter=json_adapter()):
            dspy.Predict("question -> answer")(question=record["question"])
        return {"judged": 1.0}

    worker = Runner(QuestionAnswering(), {}, lm=priced_lm(), adapter=json_adapter(), scorer=judged,
                    inputs=lambda r: {"question": r["question"]}, meter_scoring=True)
    row = worker.run_record(qa_records(1)[0], {}, {})
    assert row["_scoring_calls"] == 1 and row["_scoring_cost_usd"] == pytest.approx(call_cost())
    cap = CostCap(1.0)
    cap.settle_row(row)
    assert cap.spent() == pytest.approx(2 * call_cost())  # the program's call and the judge's
    assert not any(key.startswith("_scoring") for key in row)  # never written to results.jsonl
    unpriced = {"id": "r", "cost_usd": 0.0, "lm_calls": 1, "_scoring_cost_usd": None, "_scoring_calls": 2}
    cap.settle_row(unpriced)
    assert cap.reached() and "judge of record 'r'" in cap.reason(2, 3)
    plain = Runner(QuestionAnswering(), {}, lm=priced_lm(), adapter=json_adapter(), scorer=judged,
                   inputs=lambda r: {"question": r["question"]}).run_record(qa_records(1)[0], {}, {})
    assert not any(key.startswith("_scoring") for key in plain)  # no cap: rows as before
