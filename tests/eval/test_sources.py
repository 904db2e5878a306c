"""Every loader family accepts every input kind; travel tasks round-trip through Parquet; runs export flat tables."""

import json

import datasets
import pandas as pd
import pytest

import groundstate as gs
from groundstate.errors import InputError
from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks, save_hidden_tasks
from groundstate.eval.benchmarks.offquery.loader import load_any, load_instances, save_instances
from groundstate.eval.benchmarks.offquery.published import load_offquery
from groundstate.eval.benchmarks.problems import load_problems, save_problems
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.runner import Runner
from groundstate.eval.sources import Records, as_source, write_records
from groundstate.programs.qa import QuestionAnswering
from tests.helpers import DATA, echo_number_lm, json_adapter, qa_records, qa_score

HEALTH, HEALTH_T2 = DATA / "offquery" / "mediQ_easy.json", DATA / "offquery" / "mediQ_easy_t2.json"
HIDDEN = DATA / "hiddenbench" / "sample.json"
SCIBENCH = DATA / "dhd" / "scibench_small.json"
KINDS = ("json", "jsonl", "parquet", "dataset", "dataframe", "list")


def as_kind(rows: list[dict], kind: str, tmp_path):
    """``rows`` handed over as ``kind``: a file of that format, or the in-memory object."""
    if kind == "json":
        path = tmp_path / "data.json"
        path.write_text(json.dumps(rows), encoding="utf-8")
        return path
    if kind == "jsonl":
        path = tmp_path / "data.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return str(path)
    if kind == "parquet":
        path = tmp_path / "data.parquet"
        write_records(path, rows)
        return path
    if kind == "dataset":
        return datasets.Dataset.from_pandas(pd.DataFrame(rows), preserve_index=False)
    if kind == "dataframe":
        return pd.DataFrame(rows)
    return list(rows)


def dump(records):
    return [r.model_dump(mode="json") for r in records]


# -- OffQuery --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_offquery_instances_load_from_every_kind(tmp_path, kind):
    expected = load_offquery(HEALTH, HEALTH_T2)
    source = as_kind(dump(expected), kind, tmp_path)
    assert dump(load_instances(source)) == dump(expected)
    assert dump(load_any(source)) == dump(expected)


@pytest.mark.parametrize("kind", ("parquet", "dataset", "dataframe", "list"))
def test_published_offquery_items_load_from_every_kind(tmp_path, kind):
    items = json.loads(HEALTH.read_text(encoding="utf-8"))
    expected = load_offquery(HEALTH, split="healthcare-s")
    got = load_offquery(as_kind(items, kind, tmp_path), split="healthcare-s")
    strip = [{**d, "id": None, "provenance": None} for d in dump(expected)]  # ids/file come from the file name
    assert [{**d, "id": None, "provenance": None} for d in dump(got)] == strip


def test_load_offquery_on_groundstate_jsonl_loads_it(tmp_path):
    expected = load_offquery(HEALTH, HEALTH_T2)
    path = tmp_path / "instances.jsonl"
    save_instances(path, expected)
    assert load_offquery(path) == expected


def test_load_offquery_on_groundstate_jsonl_with_published_options_says_what_it_is(tmp_path):
    path = tmp_path / "instances.jsonl"
    save_instances(path, load_offquery(HEALTH, HEALTH_T2))
    with pytest.raises(InputError, match=r"groundstate JSONL file of 3 OffQuery records") as info:
        load_offquery(path, HEALTH_T2)
    assert "malformed JSON" not in str(info.value)


def test_load_offquery_on_other_jsonl_names_its_keys(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"question": "q1", "answer": "a"}\n{"question": "q2", "answer": "b"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"JSON Lines file of 2 records whose first has keys 'question', 'answer'"):
        load_offquery(path)


# -- hidden-profile and travel tasks ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_hidden_tasks_load_from_every_kind(tmp_path, kind):
    # travel tasks' free-form ``structure`` has no single Arrow type, so the Dataset case uses HiddenBench tasks
    tasks = load_hidden_tasks(HIDDEN) if kind == "dataset" else generate_hidden_travel(3, seed=1)
    got = dump(load_hidden_tasks(as_kind(dump(tasks), kind, tmp_path)))
    if kind == "dataset":  # an Arrow struct column fills keys missing from some rows' provenance with None
        got = [{**t, "provenance": {k: v for k, v in t["provenance"].items() if v is not None}} for t in got]
    assert got == dump(tasks)


@pytest.mark.parametrize("kind", ("parquet", "dataset", "dataframe", "list"))
def test_hiddenbench_items_load_from_every_kind(tmp_path, kind):
    items = [{**item, "id": str(item["id"])} for item in json.loads(HIDDEN.read_text(encoding="utf-8"))]
    expected = load_hidden_tasks(HIDDEN)  # Arrow needs one type per column: ids as text
    got = load_hidden_tasks(as_kind(items, kind, tmp_path))
    assert [t.correct for t in got] == [t.correct for t in expected]
    assert [t.private for t in got] == [t.private for t in expected]
    assert got[0].provenance["source"] == "hiddenbench"


def test_travel_tasks_round_trip_through_parquet(tmp_path):
    tasks = generate_hidden_travel(4, seed=3)
    path = tmp_path / "travel.parquet"
    save_hidden_tasks(path, tasks)
    assert path.read_bytes()[:4] == b"PAR1"
    frame = pd.read_parquet(path)
    assert len(frame) == 4 and "structure" in frame.columns
    assert load_hidden_tasks(path) == tasks


def test_cli_generate_travel_writes_parquet(tmp_path):
    from groundstate.cli import main

    out = tmp_path / "travel.parquet"
    assert main(["hidden", "generate", "travel", "--n", "2", "--out", str(out)]) == 0
    back = load_hidden_tasks(out)
    assert len(back) == 2 and back == generate_hidden_travel(2, seed=0)


# -- DHD problems ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_scibench_problems_load_from_every_kind(tmp_path, kind):
    items = json.loads(SCIBENCH.read_text(encoding="utf-8"))
    expected = load_problems(SCIBENCH)
    got = load_problems(as_kind(items, kind, tmp_path))
    assert [(p.question, p.answer, p.kind, p.unit) for p in got] == \
        [(p.question, p.answer, p.kind, p.unit) for p in expected]


@pytest.mark.parametrize("kind", KINDS)
def test_generic_problems_load_from_every_kind(tmp_path, kind):
    rows = [{"id": "p1", "input": "2+2?", "answer": "4"}, {"id": "p2", "input": "Pick", "answer": "B"}]
    got = load_problems(as_kind(rows, kind, tmp_path))
    assert [(p.id, p.answer, p.kind) for p in got] == [("p1", "4", "number"), ("p2", "B", "option")]


def test_problems_round_trip_through_parquet(tmp_path):
    expected = load_problems(SCIBENCH)
    save_problems(tmp_path / "p.parquet", expected)
    assert load_problems(tmp_path / "p.parquet") == expected


# -- bad input -------------------------------------------------------------------------------------------------
def test_in_memory_errors_name_the_source_record_and_field():
    with pytest.raises(InputError, match=r"<pandas DataFrame>.*position 1.*answer"):
        load_problems(pd.DataFrame([{"input": "a", "answer": "1"}, {"input": "b", "answer": None}]))


def test_unaccepted_inputs_say_what_is_accepted(tmp_path):
    with pytest.raises(InputError, match="pass a path"):
        load_problems(42)
    with pytest.raises(InputError, match="pass one, e.g. data\\['train'\\]"):
        load_problems(datasets.DatasetDict({"train": datasets.Dataset.from_list([{"input": "a", "answer": "1"}])}))
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="bad.parquet.*not a readable Parquet file"):
        load_problems(tmp_path / "bad.parquet")


def test_as_source_keeps_json_paths_as_paths(tmp_path):
    assert as_source(str(tmp_path / "x.jsonl")).path == tmp_path / "x.jsonl"
    assert isinstance(as_source([{"a": 1}]), Records)


# -- run export ------------------------------------------------------------------------------------------------
def test_load_run_exports_flat_tables(tmp_path):
    runner = Runner(QuestionAnswering(), {"program": "qa", "data": "export"}, out=tmp_path / "runs", threads=1,
                    inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=echo_number_lm(),
                    adapter=json_adapter())
    result = runner.run(qa_records(4, fail={2}))
    run = gs.load_run(result.run_dir)
    assert run["run_id"] == result.run_dir.name and len(run["rows"]) == 4  # still the dict it was
    frame = run.to_pandas()
    assert list(frame.columns[:11]) == ["run_id", "id", "error", "input_tokens", "output_tokens", "total_tokens",
                                        "lm_calls", "failed_calls", "cached_calls", "latency_s", "attempt"]
    assert {"score.exact_match", "output.answer"} <= set(frame.columns)
    by_id = frame.set_index("id")
    assert by_id.loc["r001", "output.answer"] == "1" and by_id.loc["r001", "score.exact_match"] == 1.0
    assert by_id.loc["r001", "total_tokens"] == 15
    # a failed record is not scored 0: its score is null and the export says why
    assert "scripted LM failure" in by_id.loc["r002", "error"] and pd.isna(by_id.loc["r002", "score.exact_match"])
    assert "program failed" in by_id.loc["r002", "score_error.exact_match"]
    assert pd.isna(by_id.loc["r001", "score_error.exact_match"])
    table = run.to_dataset()
    assert isinstance(table, datasets.Dataset) and table.num_rows == 4
    assert table.column_names == list(frame.columns)
    assert table["score.exact_match"] == [1.0, 1.0, None, 1.0]


# -- the generic --data reader ---------------------------------------------------------------------------------
def test_read_records_reads_parquet(tmp_path):
    from groundstate.eval.io import read_records

    rows = [{"id": "a", "question": "1+1?", "meta": {"tags": ["x"], "n": 1}}, {"id": "b", "question": "2+2?",
                                                                            "meta": {"tags": [], "n": 2}}]
    write_records(tmp_path / "ours.parquet", rows)
    assert read_records(tmp_path / "ours.parquet") == rows  # object columns round-trip
    pd.DataFrame([{"id": "c", "question": "3+3?"}]).to_parquet(tmp_path / "other.PQ", index=False)
    assert read_records(tmp_path / "other.PQ") == [{"id": "c", "question": "3+3?"}]
    pd.DataFrame({"id": pd.Series([], dtype=str)}).to_parquet(tmp_path / "empty.parquet", index=False)
    assert read_records(tmp_path / "empty.parquet", allow_empty=True) == []
    with pytest.raises(InputError, match="no records|empty"):
        read_records(tmp_path / "empty.parquet")
    with pytest.raises(InputError, match="not found"):
        read_records(tmp_path / "missing.parquet")


# -- a source is normalised once and each file read once (issue 23, item 3) ------------------------------------
@pytest.fixture
def reads(monkeypatch):
    """Whole-file reads by path (``groundstate.files.read_bytes``, which every JSON and JSON Lines reader uses) and
    the sources made (``DataFile``), counted."""
    import collections

    from groundstate import files
    from groundstate.eval import sources

    counts = {"reads": collections.Counter(), "sources": 0}
    read_bytes, init = files.read_bytes, sources.DataFile.__init__

    def counting_read(path, *args, **kwargs):
        counts["reads"][str(path)] += 1
        return read_bytes(path, *args, **kwargs)

    def counting_init(self, path):
        counts["sources"] += 1
        init(self, path)

    monkeypatch.setattr(files, "read_bytes", counting_read)
    monkeypatch.setattr(sources.DataFile, "__init__", counting_init)
    return counts


def test_loading_a_file_normalises_it_once_and_reads_it_once(tmp_path, reads):
    from groundstate.eval.benchmarks.offquery.synthetic import generate

    instances = tmp_path / "instances.jsonl"
    save_instances(instances, generate("healthcare", "main", 3, seed=0))
    cases = [(instances, lambda p: load_any(p, condition="unreliable")),  # tells the formats apart, then loads
             (instances, lambda p: load_offquery(p)),  # a groundstate file given to the published loader
             (HEALTH, lambda p: load_any(p, t2_truth=HEALTH_T2)),
             (SCIBENCH, lambda p: load_problems(p)),  # detects the format from the rows it then loads
             (HIDDEN, lambda p: load_hidden_tasks(p))]
    for path, load in cases:
        reads["reads"].clear()
        reads["sources"] = 0
        assert load(path)
        assert reads["sources"] == 1, path
        assert reads["reads"][str(path)] == 1, (path, reads["reads"])


def test_a_normalised_source_is_passed_down_unchanged(tmp_path):
    from groundstate.eval.sources import DataFile

    source = as_source(str(HEALTH))
    assert isinstance(source, DataFile) and as_source(source) is source and source.path == HEALTH
    assert source.first_char() == "[" and "shuffled_private_information" in source.first()
    records = as_source([{"id": "a"}])
    assert as_source(records) is records and records.first() == {"id": "a"}
