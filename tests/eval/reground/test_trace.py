"""A stored ReGround trace shown stage by stage beside the gold labels (issue 26 item 8, issue 27 item 3): the view of
a real program's trace, any hostile value shown safely, and the gold labels taken only from the run's own data."""

from __future__ import annotations

import json
import unicodedata

import pytest

from groundstate.errors import InputError
from groundstate.eval.reground.trace import run_gold, trace_lines
from groundstate.testing import scripted_lm

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def _safe(lines: list[str]) -> bool:
    return all(isinstance(line, str) and not any(unicodedata.category(c) in UNSAFE for c in line) for line in lines)


def responder(req):
    """Every stage answered so that the trace shows something: two facts, one refuted (dropped), one supported."""
    fields, props = req.output_fields, (req.schema or {}).get("properties", {})
    if "statements" in fields:
        return {"statements": ["The X-ray is clear.\x1b[31m", "[bold]BNP[/bold] is high."]}
    if "pair" in fields:
        return {"pair": props["pair"]["enum"][-1], "strength": "strong", "reason": "they disagree\u202e"}
    if "incorrect" in fields:
        return {"incorrect": "second", "reason": "objective findings win"}
    if "misleading_source" in fields:
        return {"misleading_source": 5, "reason": "its report contradicts the tests"}
    if "facts" in fields:
        return {"facts": ["Troponin is normal.", "The patient had surgery."]}
    if "verdict" in fields:
        refuted = "surgery" in (req.field("fact") or "")
        return {"verdict": "refuted" if refuted else "supported", "importance": "high"}
    if "answer" in fields:
        return {"answer": "C", "reason": "the state points to it"}
    return None


def _row():
    """One real ReGround record's result row, as the runner stores it (trace included)."""
    import dspy

    from groundstate.eval.benchmarks.offquery.synthetic import generate
    from groundstate.eval.reground.judges import LexicalJudge
    from groundstate.eval.reground.scores import make_scorer
    from groundstate.programs.reground.reground import ReGround

    instance = generate("healthcare", "main", 1, seed=0)[0]
    with dspy.context(lm=scripted_lm(responder), adapter=dspy.JSONAdapter()):
        prediction = ReGround(max_candidates=2)(**instance.inputs("unreliable"))
    scores = make_scorer(LexicalJudge(), halves=True)(instance, prediction)
    outputs = {k: prediction[k] for k in ("misleading_agent", "state", "kept_facts", "removed_facts", "answer")}
    return instance, json.loads(json.dumps({"id": instance.id, "outputs": outputs, "trace": prediction.trace,
                                            "scores": scores, "score_errors": {}, "error": None}))


def test_a_reground_trace_stage_by_stage_beside_the_gold_labels():
    instance, row = _row()
    gold = {"misleading": list(instance.misleading), "answer": instance.answer}
    lines = trace_lines(row, gold)
    text = "\n".join(lines)
    assert _safe(lines)
    assert lines[0] == f"record {instance.id}"
    assert "round 1: conflict pair 4-5 (strong): they disagree\\u202e" in text  # the pair and why, escaped
    assert "adjudicated: agent 5 judged incorrect (objective findings win)" in text
    assert "blamed: agent 5 (detector: its report contradicts the tests)" in text
    assert f"gold misleading: agent {instance.misleading[0]} -> " in text
    assert "2 atomic facts from the shared context, 1 kept, 1 dropped" in text
    assert "kept    Troponin is normal. (supported, high importance)" in text
    assert "dropped The patient had surgery. (refuted, high importance)" in text
    assert "T3 resolution: answered C (the state points to it)" in text
    assert f"gold answer: {instance.answer} -> {'right' if instance.answer == 'C' else 'wrong'}" in text
    assert "statements extracted per source: 0: 2" in text
    without = "\n".join(trace_lines(row))
    assert "gold misleading: not known here (give the run's data with --data)" in without


@pytest.mark.parametrize("row", [
    None, 7, "text", [], {}, {"id": ["a"]}, {"id": "x", "trace": "\x1b[2J"},
    {"id": "x", "trace": {"verify": 1, "reconstruct": [], "resolve": "y"}, "scores": [], "outputs": "z"},
    {"id": "x", "trace": {"verify": {"rounds": [1, {"round": "r", "pair": {"a": 1}, "incorrect": None}],
                                     "candidates": [[1]], "scores": [{"candidate": [1]}], "decision": []},
                          "reconstruct": {"facts": [None, {"fact": "\u2028", "kept": "yes"}]}, "resolve": {}},
     "scores": {"t1": True, "t3": "1"}, "score_errors": {"t2": "\x1b]0;title\x07"}},
    {"id": "x", "error": "LMError: \x1b[31mboom"},
])
def test_any_stored_value_gives_safe_lines_never_an_exception(row):
    lines = trace_lines(row, {"misleading": ["\x1b"], "answer": None})
    assert lines and _safe(lines)


def test_gold_labels_come_only_from_the_runs_own_data(tmp_path):
    from groundstate.eval.benchmarks.offquery.synthetic import generate
    from groundstate.eval.sources import sha256

    data = tmp_path / "d.jsonl"
    data.write_text("".join(x.model_dump_json() + "\n" for x in generate("disaster", "main", 2, seed=0)))
    config = {"program": "reground", "run_id": "r", "options": {"condition": "unreliable"},
              "data": {"file": "d.jsonl", "sha256": sha256(data)}}
    gold = run_gold(config, data)
    assert set(gold) == {"synthetic-disaster-main-s0-00000", "synthetic-disaster-main-s0-00001"}
    assert run_gold(config) is None  # a file the run ran on is not guessed
    other = tmp_path / "o.jsonl"
    other.write_text("".join(x.model_dump_json() + "\n" for x in generate("disaster", "main", 1, seed=1)))
    with pytest.raises(InputError, match="is not the data run r ran on"):
        run_gold(config, other)
    synthetic = {**config, "data": {"synthetic": {"domains": ["disaster"], "variants": ["main"], "n": 2, "seed": 0}}}
    assert run_gold(synthetic) == gold  # regenerated from the recorded generator settings
    reliable = run_gold({**synthetic, "options": {"condition": "reliable-private"}})
    assert all(g["misleading"] == [] for g in reliable.values())  # the condition's gold: no misleading agent
    for bad in ({"domains": ["mars"]}, {"n": "2"}, {"n": 10**9}, {"domains": [["x"]]}, {"seed": -1}):
        assert run_gold({**synthetic, "data": {"synthetic": {**synthetic["data"]["synthetic"], **bad}}}) is None
    assert run_gold({**synthetic, "program": "consilience"}) is None  # not an OffQuery run
    assert run_gold({**synthetic, "program": ["reground"]}) is None
    assert run_gold({**synthetic, "options": {"condition": "sunny"}}) is None


@pytest.mark.parametrize(("gold", "expected"), [
    ({"misleading_agent": 5, "answer": "C"}, {"misleading": [5], "answer": "C"}),
    ({"misleading_agent": [1, 3], "answer": "A"}, {"misleading": [1, 3], "answer": "A"}),
    ({"misleading_agent": None, "answer": "B"}, {"misleading": [], "answer": "B"}),
    ({"misleading_agent": True, "answer": "B"}, None), ({"misleading_agent": ["x"], "answer": "B"}, None),
    ({"misleading_agent": 1}, None), ("C", None), (None, None),
])
def test_a_row_that_stores_its_gold_labels_shows_them_without_the_data(gold, expected):
    from groundstate.eval.reground.trace import row_gold

    assert row_gold({"id": "x", "gold": gold}) == expected
    if expected is not None:
        instance, row = _row()
        row["gold"] = {"misleading_agent": list(instance.misleading), "answer": instance.answer}
        assert f"gold misleading: agent {instance.misleading[0]} -> " in "\n".join(trace_lines(row, row_gold(row)))
