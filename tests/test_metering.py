"""The meter counts every LM call (any LM object, sync or async, failed or cached) with no DSPy callback installed."""

import asyncio

import dspy
import pytest

from groundstate.eval.runner import Runner
from groundstate.metering import meter_context
from groundstate.testing import scripted_lm


class Listener:
    def __init__(self):
        self.calls, self.usage = [], []

    def on_lm_call(self, failed):
        self.calls.append(failed)

    def on_lm_usage(self, input_tokens, output_tokens):
        self.usage.append((input_tokens, output_tokens))


def test_a_metered_block_installs_no_dspy_callback(tmp_path):
    seen = []

    class Probe(dspy.Module):
        def __init__(self):
            super().__init__()
            self.qa = dspy.Predict("question -> answer")

        def forward(self, question):
            seen.append(list(dspy.settings.callbacks))
            return self.qa(question=question)

    result = Runner(Probe(), {"program": "probe"}, out=tmp_path, threads=1, lm=scripted_lm(),
                    adapter=dspy.JSONAdapter()).run([{"id": "a", "question": "q"}])
    assert seen == [[]] and result.rows[0]["lm_calls"] == 1 and result.rows[0]["input_tokens"] == 10


def test_calls_to_a_predictors_own_lm_are_counted():
    own, shared = scripted_lm(), scripted_lm()
    predict = dspy.Predict("question -> answer")
    predict.lm = own
    listener = Listener()
    with dspy.context(lm=shared, adapter=dspy.JSONAdapter()), meter_context() as meter:
        meter.listener = listener
        predict(question="q")
        dspy.Predict("question -> answer")(question="r")
    assert len(own.engine.requests) == len(shared.engine.requests) == 1
    assert meter.calls == 2 and meter.tokens() == (20, 10) and meter.cached() == 0
    assert listener.calls == [False, False] and listener.usage == [(10, 5), (10, 5)]


def test_async_calls_and_failures_are_counted():
    def respond(request):
        return RuntimeError("scripted failure") if "bad" in request.user else None

    lm = scripted_lm(respond)
    predict = dspy.Predict("question -> answer")

    async def both():
        await predict.acall(question="good")
        with pytest.raises(Exception, match="scripted failure"):
            await predict.acall(question="bad")

    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context() as meter:
        asyncio.run(both())
        with pytest.raises(Exception, match="scripted failure"):
            predict(question="bad again")
    assert (meter.calls, meter.failed, meter.cached(), meter.reached_model()) == (3, 2, 0, 1)
    assert "scripted failure" in meter.first_error


def test_nested_meters_both_count_calls():
    with dspy.context(lm=scripted_lm(), adapter=dspy.JSONAdapter()), meter_context() as outer:
        dspy.Predict("question -> answer")(question="a")
        with meter_context() as inner:
            dspy.Predict("question -> answer")(question="b")
    assert (outer.calls, inner.calls) == (2, 1)
    assert inner.tokens() == (10, 5) and outer.tokens() == (10, 5)  # usage goes to the innermost tracker


def test_calls_outside_a_meter_are_not_counted():
    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context() as meter:
        pass
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict("question -> answer")(question="a")
    assert meter.calls == 0 and len(lm.engine.requests) == 1
