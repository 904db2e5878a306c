"""The cached JSONAdapter: byte-identical requests to DSPy's, and a fresh entry whenever a signature changes."""

from typing import Literal

import dspy
import pydantic
import pytest

from groundstate.lm.adapters import RESPONSE_FORMATS, SYSTEM_MESSAGES, json_adapter
from groundstate.lm.embedded import EMBEDDED_MODEL_NAME
from groundstate.lm.specs import default_adapter
from groundstate.testing import scripted_lm


class Item(pydantic.BaseModel):
    name: str
    score: int = 0


class Judge(dspy.Signature):
    """Judge the thing."""

    question: str = dspy.InputField(desc="the question")
    choice: Literal["a", "b"] = dspy.OutputField(desc="pick one")
    items: list[Item] = dspy.OutputField()
    n: int = dspy.OutputField()


VARIANTS = {
    "string": dspy.Signature("question -> answer"),
    "class": Judge,
    "instructions": Judge.with_instructions("Judge it differently."),
    "field description": Judge.with_updated_fields("choice", desc="pick the better one"),
    "field type": Judge.with_updated_fields("n", type_=float),
    "deleted field": Judge.delete("n"),
    "appended field": Judge.append("extra", dspy.OutputField(), type_=float),
}


def _requests(adapter, signatures, demos=()):
    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=adapter):
        for signature in signatures:
            predict = dspy.Predict(signature)
            predict.demos = list(demos)
            for k in range(2):
                predict(question=f"question {k}")
    return [(r.messages, r.schema) for r in lm.engine.requests]


@pytest.fixture(autouse=True)
def _empty_caches():
    RESPONSE_FORMATS.clear()
    SYSTEM_MESSAGES.clear()


def test_requests_are_identical_to_dspys_json_adapter():
    signatures = list(VARIANTS.values())
    assert _requests(json_adapter(), signatures) == _requests(dspy.JSONAdapter(), signatures)
    demo = dspy.Example(question="dq", choice="a", items=[{"name": "x"}], n=1)
    assert _requests(json_adapter(), [Judge], [demo]) == _requests(dspy.JSONAdapter(), [Judge], [demo])


def test_each_changed_signature_gets_its_own_entry_and_repeats_hit():
    requests = _requests(json_adapter(), list(VARIANTS.values()))
    systems = [messages[0]["content"] for messages, _ in requests[::2]]
    assert len(set(systems)) == len(VARIANTS)  # instructions and descriptions reach the prompt
    schemas = [schema for _, schema in requests[::2]]
    assert schemas[2] == schemas[1] and schemas[4] != schemas[1]  # instructions do not change the schema; types do
    assert SYSTEM_MESSAGES.misses == len(VARIANTS) and SYSTEM_MESSAGES.hits == len(VARIANTS)
    assert RESPONSE_FORMATS.misses == 5  # string, class (= instructions, description), type, deleted, appended


def test_a_cached_schema_cannot_be_changed_by_a_caller():
    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=json_adapter()):
        dspy.Predict(Judge)(question="q")
        lm.engine.requests[0].schema["properties"].clear()
        dspy.Predict(Judge)(question="q2")
    assert "choice" in lm.engine.requests[1].schema["properties"]


def test_the_embedded_lm_gets_the_cached_adapter():
    class Embedded:
        model = EMBEDDED_MODEL_NAME

    assert type(default_adapter(Embedded())).__name__ == "CachedJSONAdapter"
    assert isinstance(default_adapter(Embedded()), dspy.JSONAdapter)
