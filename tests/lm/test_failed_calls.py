"""A predictor call that fails leaves nothing in DSPy's response cache; one that succeeds keeps its entries."""

from __future__ import annotations

import asyncio
import uuid

import dspy
import pytest

from groundstate.lm.failed_calls import failed_call_eviction
from groundstate.lm.specs import get_lm
from groundstate.testing import scripted_lm


@pytest.fixture(autouse=True)
def eviction():
    with failed_call_eviction():
        yield


def cached_lm(replies: dict):
    """A scripted LM with DSPy's cache on whose reply is ``replies["now"]``: prose (unparseable) or fields."""
    return scripted_lm(lambda request: replies["now"], cache=True, model=f"scripted-{uuid.uuid4().hex[:8]}")


def test_unparseable_reply_is_asked_again_and_a_good_one_is_cached():
    replies = {"now": "prose where fields were asked for"}
    lm = cached_lm(replies)
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        for attempt in (1, 2):
            with pytest.raises(Exception, match="failed to parse|cannot be serialized"):
                predict(question="q")
            assert lm.engine.calls == 2 * attempt  # chat reply and JSON fallback, asked again on the retry
        replies["now"] = {"answer": "42"}
        assert predict(question="q").answer == "42"
        calls = lm.engine.calls
        assert predict(question="q").answer == "42" and lm.engine.calls == calls  # a success stays cached


def test_async_predictor_failure_is_not_cached_either():
    replies = {"now": "no fields"}
    lm = cached_lm(replies)
    predict = dspy.Predict("question -> answer")

    async def ask():
        with dspy.context(lm=lm):
            return await predict.acall(question="q")

    with pytest.raises(Exception, match="failed to parse|cannot be serialized"):
        asyncio.run(ask())
    first = lm.engine.calls
    replies["now"] = {"answer": "7"}
    assert asyncio.run(ask()).answer == "7" and lm.engine.calls > first


def test_a_failure_elsewhere_keeps_earlier_successful_calls_cached():
    replies = {"now": {"answer": "ok"}}
    lm = cached_lm(replies)
    first, second = dspy.Predict("question -> answer"), dspy.Predict("topic -> answer")
    with dspy.context(lm=lm):
        assert first(question="q").answer == "ok"
        replies["now"] = "unparseable"
        with pytest.raises(Exception, match="failed to parse|cannot be serialized"):
            second(topic="t")
        calls = lm.engine.calls
        assert first(question="q").answer == "ok" and lm.engine.calls == calls  # still answered from the cache


@pytest.mark.timeout(60)
def test_hosted_lm_unparseable_reply_reaches_the_server_again(servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = servers(content="nothing parseable here")
    lm = get_lm(f"openai/evict-{uuid.uuid4().hex[:8]}", api_base=server.url, num_retries=0)
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        with pytest.raises(Exception, match="failed to parse|cannot be serialized"):
            predict(question="q")
        asked = len(server.requests)
        server.content = "[[ ## answer ## ]]\nfine\n\n[[ ## completed ## ]]"
        assert predict(question="q").answer == "fine" and len(server.requests) == asked + 1
        assert predict(question="q").answer == "fine" and len(server.requests) == asked + 1  # cached now
