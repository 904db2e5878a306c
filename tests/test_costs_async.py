"""Dollar cost per record (priced vs unpriced models) and acall == call for ReGround, Standard, Integrator."""

import asyncio

import dspy
import pytest

from groundstate.eval.results import summarize
from groundstate.metering import meter_context
from groundstate.testing import scripted_lm


def _predict(lm):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context() as meter:
        dspy.Predict("question -> answer")(question="q")
        dspy.Predict("question -> answer")(question="r")
    return meter


def test_priced_model_records_litellm_cost():
    import litellm

    meter = _predict(scripted_lm(model="openai/gpt-4o-mini", input_tokens=1000, output_tokens=500))
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1000,
                                                completion_tokens=500)
    assert meter.cost_usd() == pytest.approx(2 * (prompt + completion))
    assert meter.cost_usd() > 0


def test_unpriced_model_is_none_not_zero():
    assert _predict(scripted_lm()).cost_usd() is None


def test_summary_sums_priced_records_and_counts_unpriced():
    rows = [{"id": "a", "cost_usd": 0.25}, {"id": "b", "cost_usd": 0.5}, {"id": "c", "cost_usd": None}]
    cost = summarize(rows)["cost_usd"]
    assert cost["total"] == pytest.approx(0.75) and cost["unpriced_records"] == 1
    assert summarize([{"id": "c", "cost_usd": None}])["cost_usd"]["total"] is None


def _both(program, **kwargs):
    def run_sync():
        lm = scripted_lm()
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return program(**kwargs), [r.text for r in lm.engine.requests]

    async def run_async():
        lm = scripted_lm()
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return await program.acall(**kwargs), [r.text for r in lm.engine.requests]

    return run_sync(), asyncio.run(run_async())


AGENTS = [{"agent": i, "evidence": f"evidence {i}"} for i in range(3)]
CASE = dict(agents=AGENTS, shared_context="a shared context", question="which?", options={"A": "a", "B": "b"})


@pytest.mark.parametrize("name", ["reground", "standard"])
def test_acall_equals_call(name):
    from groundstate.programs.reground.reground import ReGround
    from groundstate.programs.reground.standard import StandardCollaboration as Standard

    program = ReGround() if name == "reground" else Standard(rounds=1)
    (sync, sync_requests), (async_, async_requests) = _both(program, **CASE)
    assert async_requests, "the async run made no LM call"
    assert sorted(sync_requests) == sorted(async_requests)
    assert sync.toDict() == async_.toDict()


def test_integrator_acall_equals_call():
    from groundstate.programs.dhd.deliberation import Integrator

    (sync, sync_requests), (async_, async_requests) = _both(Integrator(), problem="1+1?", answer_format="a number",
                                                            messages=[])
    assert async_requests and sync_requests == async_requests
    assert sync.toDict() == async_.toDict()


def test_runs_under_mlflow_autolog(tmp_path):
    mlflow = pytest.importorskip("mlflow")
    from groundstate.programs.reground.reground import ReGround

    mlflow.set_tracking_uri(f"file://{tmp_path}")
    mlflow.dspy.autolog()
    try:
        with dspy.context(lm=scripted_lm(), adapter=dspy.JSONAdapter()):
            assert ReGround()(**CASE).answer is not None
    finally:
        mlflow.dspy.autolog(disable=True)
