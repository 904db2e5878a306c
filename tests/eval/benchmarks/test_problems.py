"""DHD problem loaders: SciBench, JEEBench, generic JSON Lines; auto-detection; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.problems import (
    detect_format,
    load_jeebench,
    load_jsonl_problems,
    load_problems,
    load_scibench,
    save_problems,
)
from groundstate.programs.dhd.evaluator import parse_plain_number
from tests.helpers import DATA as TEST_DATA
from tests.helpers import ROOT

DATA = TEST_DATA / "dhd"
REAL_SCIBENCH = ROOT / ".." / "shared" / "data" / "scibench"


def test_scibench_fixture():
    problems = load_scibench(DATA / "scibench_small.json")
    assert [p.id for p in problems] == ["tiny-1.1(a)", "tiny-1.2", "tiny-1.3", "tiny-1.4"]
    assert {p.kind for p in problems} == {"number"}
    assert all(p.tolerance == 0.05 and p.source == "scibench/tiny" for p in problems)
    assert [p.unit for p in problems] == ["$\\mathrm{atm}$", "$10^{-19} \\mathrm{~J}$", None,
                                          "$\\mathrm{kJ} \\mathrm{mol}^{-1}$"]
    assert [p.answer for p in problems] == ["4.93", "3.52", "1.5", "+65.49"]
    assert problems[2].metadata["answer_latex"] == "3 / 2"
    assert problems[1].metadata["comment"] == "Only the energy" and "comment" not in problems[0].metadata
    assert problems[0].question.startswith("A sample of 2.0 mol")


def test_scibench_tolerance_override():
    assert {p.tolerance for p in load_scibench(DATA / "scibench_small.json", tolerance=0.01)} == {0.01}


def test_jeebench_fixture():
    problems = load_jeebench(DATA / "jeebench_small.json")
    by_id = {p.id: p for p in problems}
    assert list(by_id) == ["jeebench-1", "jeebench-2", "jeebench-3", "jeebench-4"]
    assert by_id["jeebench-1"].kind == "option" and by_id["jeebench-1"].answer == "B"
    assert by_id["jeebench-2"].kind == "options" and by_id["jeebench-2"].answer == "ACD"  # stored sorted
    for pid in ("jeebench-3", "jeebench-4"):
        assert by_id[pid].kind == "number"
        assert by_id[pid].tolerance == 0.0 and by_id[pid].metadata["abs_tolerance"] == 0.01
    assert by_id["jeebench-4"].source == "jeebench/phy" and by_id["jeebench-2"].metadata["type"] == "MCQ(multiple)"


def test_generic_jsonl_and_kind_inference():
    problems = load_jsonl_problems(DATA / "generic.jsonl")
    assert [(p.id, p.kind) for p in problems] == [("g-num", "number"), ("g-opt", "option"), ("g-text", "text"),
                                                 ("generic-4", "expression")]
    assert problems[0].answer == "42" and problems[2].metadata == {"topic": "biology"}
    assert problems[3].question.startswith("Simplify")


@pytest.mark.parametrize(("name", "fmt"), [("scibench_small.json", "scibench"), ("jeebench_small.json", "jeebench"),
                                           ("generic.jsonl", "jsonl")])
def test_auto_detection(name, fmt):
    assert detect_format(DATA / name) == fmt
    assert load_problems(DATA / name) == load_problems(DATA / name, fmt)


def test_saved_problems_round_trip(tmp_path):
    problems = load_problems(DATA / "jeebench_small.json") + load_problems(DATA / "scibench_small.json")
    save_problems(tmp_path / "all.jsonl", problems)
    assert load_problems(tmp_path / "all.jsonl") == problems


@pytest.mark.skipif(not REAL_SCIBENCH.is_dir(), reason="the SciBench files are not in ../shared/data/scibench")
@pytest.mark.parametrize("name", ["atkins", "calculus", "chemmc"])
def test_real_scibench_files(name):
    path = REAL_SCIBENCH / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    raw = json.loads(path.read_text(encoding="utf-8"))
    problems = load_problems(path)
    assert len(problems) == len(raw) > 0
    assert {p.kind for p in problems} == {"number"}
    assert len({p.id for p in problems}) == len(problems)
    assert all(parse_plain_number(p.answer) is not None for p in problems)
    for item, problem in zip(raw, problems, strict=True):
        assert problem.unit == (item["unit"].strip() or None)  # units kept as written
        assert problem.source == f"scibench/{item['source']}"


def write(tmp_path, name, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def sci(**overrides):
    item = {"problem_text": "Q?", "answer_number": "1.5", "unit": "m", "source": "s", "problemid": "p1"}
    return {**item, **overrides}


def one_line(err: Exception) -> str:
    text = str(err)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(("item", "field", "words"), [
    (sci(answer_number="about two"), "answer_number", "is not a number"),
    (sci(answer_number=None), "answer_number", "is missing"),
    (sci(problem_text="  "), "problem_text", "is empty"),
    (sci(problemid=None), "problemid", "is missing"),
    (sci(unit=3), "unit", "must be text"),
])
def test_scibench_bad_records_name_file_record_field(tmp_path, item, field, words):
    path = write(tmp_path, "sci.json", [sci(problemid="ok"), item])
    with pytest.raises(InputError) as info:
        load_problems(path, "scibench")
    text = one_line(info.value)
    assert str(path) in text and "record position 1" in text and f"field '{field}'" in text and words in text


def test_jeebench_bad_records(tmp_path):
    base = {"question": "Q", "gold": "A", "type": "MCQ", "index": 7, "subject": "phy"}
    cases = [({"type": "Essay"}, "type", "must be one of"), ({"gold": "AE"}, "gold", "option letters"),
             ({"gold": "AB"}, "gold", "one letter"), ({"type": "Numeric", "gold": "two"}, "gold", "not a number")]
    for change, field, words in cases:
        path = write(tmp_path, "jee.json", [{**base, **change}])
        with pytest.raises(InputError) as info:
            load_jeebench(path)
        text = one_line(info.value)
        assert "record position 0 (index '7')" in text and f"field '{field}'" in text and words in text


def test_generic_bad_lines(tmp_path):
    path = write(tmp_path, "p.jsonl", '{"id": "a", "input": "Q", "answer": "1"}\n{not json\n')
    with pytest.raises(InputError) as info:
        load_problems(path, "jsonl")
    assert "line 2" in one_line(info.value) and str(path) in str(info.value)
    path = write(tmp_path, "p.jsonl", '{"id": "a", "input": "Q"}\n')
    with pytest.raises(InputError, match="field 'answer'"):
        load_problems(path)
    path = write(tmp_path, "p.jsonl", '{"id": "a", "input": "Q", "answer": "x", "kind": "number"}\n')
    with pytest.raises(InputError, match="kind 'number' needs a numeric answer"):
        load_problems(path)
    path = write(tmp_path, "p.jsonl", '{"id": "a", "input": "Q", "answer": "x", "kind": "essay"}\n')
    with pytest.raises(InputError, match="field 'kind'"):
        load_problems(path)


def test_duplicate_ids_and_skip_invalid(tmp_path):
    path = write(tmp_path, "sci.json", [sci(), sci(answer_number="oops", problemid="p2"), sci()])
    with pytest.raises(InputError, match="record position 1 .*field 'answer_number'"):
        load_scibench(path)
    skipped: list[str] = []
    problems = load_scibench(path, skip_invalid=True, problems=skipped)
    assert [p.id for p in problems] == ["s-p1"]
    assert len(skipped) == 2 and "duplicate id 's-p1'" in skipped[1] and all("record skipped" in s for s in skipped)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_problems(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match="unknown problem format"):
        load_problems(DATA / "generic.jsonl", "csv")
