"""``tune(max_cost=...)`` and ``optimize --max-cost`` (issue 26, item 7): past the cap every LM call is refused before
it is made; a cap reached while the starting program is scored (or an optimizer that gives up) leaves nothing to
save, one reached while optimizing keeps what the optimizer returned, flagged, with no score after."""

from __future__ import annotations

import json
import logging

import dspy
import litellm
import pytest

from groundstate.errors import ConfigError, CostCapReached
from groundstate.eval.benchmarks.offquery.loader import save_instances
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.metrics import offquery_metric
from groundstate.metering import cap_meter, meter_context, new_meter
from groundstate.optimizers.tune import Budget, tune
from groundstate.programs.reground.oracle import Oracle
from groundstate.testing import scripted_lm
from tests.optimizers.test_tune import Learner, make_data
from tests.test_hostile_files import run_cli

PRICED = "openai/gpt-4o-mini"


@pytest.fixture(autouse=True)
def _quiet_dspy():
    logging.disable(logging.ERROR)  # DSPy logs every refused example at ERROR
    yield
    logging.disable(logging.NOTSET)


def call_cost() -> float:
    prompt, completion = litellm.cost_per_token(model=PRICED, prompt_tokens=1000, completion_tokens=500)
    return prompt + completion


def priced(instances):
    return scripted_lm(Learner(instances), model=PRICED, input_tokens=1000, output_tokens=500)


def run_tune(cap, optimizer="bootstrap"):
    instances, examples = make_data()
    lm = priced(instances)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        try:
            return tune(Oracle(), examples, metric=offquery_metric("t3"), optimizer=optimizer,
                        budget=Budget(max_bootstrapped_demos=2), progress=False, max_cost=cap), lm
        except CostCapReached as exc:
            return exc, lm


def test_a_capped_meter_refuses_calls_once_its_spend_reaches_the_cap():
    lm = scripted_lm(model=PRICED, input_tokens=1000, output_tokens=500)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context(cap_meter(new_meter(), 1.5 * call_cost())) \
            as meter:
        predict = dspy.Predict("question -> answer")
        predict(question="a")
        predict(question="b")
        with pytest.raises(CostCapReached, match="LM call refused"):
            predict(question="c")
    assert lm.engine.calls == 2 and meter.calls == 2 and meter.failed == 0  # the refused call never ran
    assert meter.spent_usd == pytest.approx(2 * call_cost())


def test_without_a_cap_tuning_spends_what_it_needs():
    result, lm = run_tune(None)
    assert result.stopped_reason is None and result.scores["train"]["after"] == pytest.approx(1.0)
    assert result.cost_usd == pytest.approx(lm.engine.calls * call_cost())


def test_the_cap_reached_while_scoring_the_start_leaves_nothing_to_save():
    exc, lm = run_tune(5.5 * call_cost())  # 18 calls score the starting program
    assert isinstance(exc, CostCapReached) and exc.exit_code == 1
    assert "while scoring the starting program" in str(exc) and "nothing to save" in str(exc)
    assert lm.engine.calls == 6  # nothing was called past the cap


def test_the_cap_reached_while_optimizing_keeps_what_the_optimizer_returned():
    full, _ = run_tune(None)
    cap = 20 * call_cost()  # the 18 scoring calls and two of the optimizer's
    result, lm = run_tune(cap)
    assert not isinstance(result, Exception)
    assert lm.engine.calls == 20 < full.lm_calls
    assert result.stopped_reason.startswith("stopped at the cost cap while optimizing with 'bootstrap'")
    assert result.scores["train"]["before"] == full.scores["train"]["before"] and result.scores["train"]["after"] \
        is None  # never measured past the cap, never a made-up number
    assert 1 <= len(result.program.decide.demos) < len(full.program.decide.demos)  # what it bootstrapped in time
    assert result.settings["max_cost"] == cap and result.cost_usd == pytest.approx(20 * call_cost())


def test_an_unpriced_lm_reflection_lm_or_judge_is_refused_before_any_call():
    instances, examples = make_data()
    lm = scripted_lm(Learner(instances))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), pytest.raises(ConfigError, match="scripted/engine"):
        tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False, max_cost=1.0)
    assert lm.engine.calls == 0
    lm, reflection = priced(instances), scripted_lm(model="openai/not-a-real-model-xyz")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), pytest.raises(ConfigError, match="not-a-real-model-xyz"):
        tune(Oracle(), examples[:6], examples[6:], metric=offquery_metric("t3"), optimizer="gepa",
             reflection_lm=reflection, progress=False, max_cost=1.0)
    assert lm.engine.calls == reflection.engine.calls == 0  # not even GEPA's probe call


ANSWER = '{"answer": "A", "reason": "because", "misleading_agent": 0, "mode": "reflect"}'


def server_cost(calls: float) -> float:
    """Dollars of ``calls`` calls to the fake server (it reports 11 prompt and 3 completion tokens per call)."""
    prompt, completion = litellm.cost_per_token(model=PRICED, prompt_tokens=11, completion_tokens=3)
    return calls * (prompt + completion)


def test_optimize_with_the_cap_reached_while_scoring_saves_nothing_and_exits_1(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    instances = generate("healthcare", "main", 6, seed=0)
    save_instances(tmp_path / "train.jsonl", instances)
    server = servers(responder=lambda request: ANSWER)
    argv = ["optimize", "voting", "--data", "train.jsonl", "--out", "tuned", "--lm", PRICED, "--api-base",
            server.url, "--threads", "1", "--max-cost"]
    code, out, err = run_cli([*argv, repr(server_cost(2.5))], tmp_path)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("WARNING", "INFO"))]
    assert code == 1 and lines and "stopped at the cost cap while scoring the starting program" in lines[-1], err
    assert not (tmp_path / "tuned").exists()
    assert 3 <= len(server.requests) <= 3 + 8  # past the cap only by calls already in flight (Voting's 8 threads)
    code, out, err = run_cli([*argv, "1", "--budget", "light"], tmp_path)
    assert code == 2 and "--max-cost" not in err  # the options still parse and are checked as before


def test_optimize_saves_a_program_stopped_at_the_cap_flagged_and_exits_1(tmp_path, servers, monkeypatch):
    """The command's side of a cap reached while optimizing (``tune``'s side is tested above, on a scripted LM):
    the program is saved, the manifest says why it stopped and has no score after, the command exits 1."""
    import dataclasses

    import groundstate.eval.reground.optimize as optimize_module

    real = optimize_module.tune

    def stopped_while_optimizing(*args, **kwargs):
        assert kwargs["max_cost"] == 5
        result = real(*args, **kwargs)
        return dataclasses.replace(result, scores={"train": {"before": 0.5, "after": None}},
                                   stopped_reason="stopped at the cost cap while optimizing with 'bootstrap': ...")

    monkeypatch.setattr(optimize_module, "tune", stopped_while_optimizing)  # the forked command inherits it
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    save_instances(tmp_path / "train.jsonl", generate("healthcare", "main", 4, seed=0))
    server = servers(responder=lambda request: ANSWER)
    code, out, err = run_cli(["optimize", "voting", "--data", "train.jsonl", "--lm", PRICED, "--api-base", server.url,
                              "--threads", "1", "--out", "tuned", "--max-cost", "5"], tmp_path)
    assert code == 1, err
    assert "stopped at the cost cap while optimizing" in err and "saved to tuned, flagged in manifest.json" in err
    manifest = json.loads((tmp_path / "tuned" / "manifest.json").read_text())
    assert manifest["stopped_reason"].startswith("stopped at the cost cap") and manifest["optimizer"]["max_cost"] == 5
    assert manifest["scores"]["train"]["after"] is None and "0.500 -> -" in out
    assert 0 < manifest["cost"]["usd"] <= server_cost(manifest["cost"]["lm_calls"]) * 1.000001  # cache hits: free
