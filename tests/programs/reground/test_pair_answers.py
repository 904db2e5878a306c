"""The conflict search's pair answer (issue 25, item 1): any order and the common phrasings of two standing ids
are read through the real ChatAdapter and JSONAdapter; only an answer that names no standing pair is refused."""

import json
import re

import dspy
import pytest

from groundstate.programs.reground.reground import Verify
from groundstate.records import AgentEvidence
from groundstate.signatures.verification import read_pair, standing_pair
from groundstate.testing import scripted_lm

AGENTS = [AgentEvidence(agent=i, evidence=f"Finding number {i} is present. Value {i} is recorded.") for i in range(6)]
ADAPTERS = {"chat": dspy.ChatAdapter, "json": dspy.JSONAdapter}


def outputs(req):
    """The output fields a request asks for, under either adapter (the JSON schema, or ChatAdapter's list)."""
    if req.schema:
        return req.output_fields
    listed = req.system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", listed, re.M)


def responder(answers, incorrect="second"):
    """Scripted replies: the conflict search answers ``answers`` in turn (raw values, any phrasing)."""
    answers = list(answers)

    def respond(req):
        fields = outputs(req)
        if "statements" in fields:
            return {"statements": [s.strip() + "." for s in req.field("evidence").split(".") if s.strip()]}
        if "pair" in fields:
            return {"pair": answers.pop(0) if answers else "0-1", "strength": "strong", "reason": "values differ"}
        if "argument" in fields:
            return {"argument": "ARG"}
        if "incorrect" in fields:
            return {"incorrect": incorrect, "reason": "weaker"}
        if "consistency" in fields:
            return {"consistency": 2, "reason": "r"}
        if "misleading_source" in fields:
            return {"misleading_source": 5, "reason": "r"}
        raise AssertionError(f"unexpected request for {fields}")

    return respond


def run(answers, adapter, max_candidates=1):
    lm = scripted_lm(responder(answers))
    with dspy.context(lm=lm, adapter=ADAPTERS[adapter]()):
        out = Verify(max_candidates=max_candidates)(agents=AGENTS)
    return out, lm.engine.requests, [r for r in lm.engine.requests if "pair" in outputs(r)]


PHRASINGS = [
    ("5-0", (0, 5)),
    ("0 and 1", (0, 1)),
    ("agents 3 & 4", (3, 4)),
    ("(2, 0)", (0, 2)),
    ("Agent 1 vs Agent 2", (1, 2)),
    ("[4] Agent 4 and [1] Agent 1", (1, 4)),
    ([2, 0], (0, 2)),
    ("'3-5'", (3, 5)),
    ("Sources 5 – 2 (temperature 39.2 against 36.5)", (2, 5)),
]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("answer, pair", PHRASINGS, ids=[str(p[0]) for p in PHRASINGS])
def test_a_pair_in_any_order_or_phrasing_yields_a_candidate(adapter, answer, pair):
    out, requests, pair_calls = run([answer], adapter)
    assert len(pair_calls) == 1  # parsed by the adapter itself (ChatAdapter needed no JSON retry)
    first = out.trace["rounds"][0]
    assert first["pair"] == list(pair) and "stop" not in first
    assert out.candidates == [pair[1]]  # the adjudicator said "second": the higher id of the canonical pair
    assert out.misleading_agent == pair[1]
    assert len([r for r in requests if "argument" in outputs(r)]) == 4


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("answer", ["1-1", "7-1", "none", "3", "no contradiction", [5, 5]])
def test_an_answer_naming_no_standing_pair_is_refused(adapter, answer):
    out, requests, _ = run([answer, answer], adapter)
    assert out.misleading_agent is None and out.candidates == []
    assert out.trace["rounds"][0]["stop"].startswith("invalid pair")
    assert not [r for r in requests if "argument" in outputs(r)]


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_a_source_already_in_the_candidate_pool_is_no_longer_standing(adapter):
    out, _, pair_calls = run(["5-0", "5-1", "5-1"], adapter, max_candidates=2)
    assert out.candidates == [5]  # round 1 named the removed source 5: refused, the search stops there
    assert out.trace["rounds"][1]["stop"].startswith("invalid pair")
    # round 1's answer was constrained to the pairs of the sources still standing
    if adapter == "json":
        schema = pair_calls[1].schema["properties"]["pair"]
        assert "5" not in json.dumps(schema["enum"]) and len(schema["enum"]) == 10


def test_read_pair_accepts_phrasings_and_refuses_what_names_no_standing_pair():
    standing = (0, 1, 2, 4)
    assert read_pair("4-0", standing) == (0, 4)
    assert read_pair("Agent 4 vs Agent 2", standing) == (2, 4)
    assert read_pair("3-4 or 1-2", standing) == (1, 4)  # 3 is not standing: the first two standing ids named
    assert read_pair(("1", "0"), standing) == (0, 1)
    for refused in ("3-4", "2-2", "", "none", 4, None, [1], [1, 2, 4], {"a": 1}, [True, 1], "0.4 and 2.1"):
        assert read_pair(refused, standing) is None


def test_the_pair_type_is_a_string_enum_and_validates_to_canonical_text():
    import pydantic

    kind = standing_pair([4, 0, 2])
    assert kind is standing_pair((0, 2, 4))  # one type per set of standing ids
    assert pydantic.TypeAdapter(kind).json_schema() == {"type": "string", "enum": ["0-2", "0-4", "2-4"]}
    assert pydantic.TypeAdapter(kind).validate_python("4 & 2") == "2-4"
    with pytest.raises(pydantic.ValidationError):
        pydantic.TypeAdapter(kind).validate_python("1-2")
