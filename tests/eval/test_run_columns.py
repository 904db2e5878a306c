"""``load_run(dir).to_pandas()`` carries each record's gold answer, domain, variant and dollar cost (issue 26,
item 5): stored by the runner from the task's labels, read back, null for runs written before, and never part of
the run id."""

import json

import datasets
import dspy
import pandas as pd
import pytest

import groundstate as gs
from groundstate.errors import InputError
from groundstate.eval.assemble import run_task
from groundstate.eval.reground.settings import BaselineSettings
from groundstate.eval.reground.tasks import load_offquery_data
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import Runner
from groundstate.eval.runs import RUN_COLUMNS
from groundstate.metering import call_cost
from groundstate.programs.qa import QuestionAnswering
from groundstate.testing import scripted_lm
from tests.helpers import echo_number_lm, json_adapter, qa_records, qa_score

NEW_COLUMNS = ("cost_usd", "gold", "domain", "variant")


def offquery_run(tmp_path, **data):
    settings = BaselineSettings(data="synthetic", n=1, **data)
    with dspy.context(lm=scripted_lm()):
        result = run_task("oracle", settings, RunSettings(out=str(tmp_path / "runs"), progress=False))
    return settings, result


def test_an_offquery_run_exports_gold_domain_and_variant(tmp_path):
    settings, result = offquery_run(tmp_path, domain="both", variant="all")
    instances = {x.id: x for x in load_offquery_data(settings)[0]}
    frame = gs.load_run(result.run_dir).to_pandas()
    assert tuple(frame.columns[:len(RUN_COLUMNS)]) == RUN_COLUMNS and set(NEW_COLUMNS) <= set(RUN_COLUMNS)
    assert {"gold.misleading_agent", "gold.answer"} <= set(frame.columns)
    assert len(frame) == len(instances) == 8 and set(frame["variant"]) == {"main", "misleading-shared",
                                                                          "multi-misleading", "distributed"}
    for _, row in frame.iterrows():
        instance = instances[row["id"]]
        assert (row["domain"], row["variant"]) == (instance.domain, instance.variant)
        assert row["gold.answer"] == instance.answer
        gold = json.loads(row["gold"])  # an object: JSON text, one type per column
        assert gold["answer"] == instance.answer
        cell = row["gold.misleading_agent"]  # ints, lists and nulls in one column: JSON text or null
        misleading = json.loads(cell) if isinstance(cell, str) else None
        expected = instance.misleading[0] if len(instance.misleading) == 1 else (instance.misleading or None)
        assert misleading == gold["misleading_agent"] == expected
    assert any(isinstance(json.loads(v), list) for v in frame["gold.misleading_agent"] if isinstance(v, str))
    assert frame["cost_usd"].isna().all()  # the scripted LM has no LiteLLM price: not a pretended 0
    table = gs.load_run(result.run_dir).to_dataset()
    assert isinstance(table, datasets.Dataset) and table.column_names == list(frame.columns)
    assert table["variant"] == list(frame["variant"]) and table["gold"] == list(frame["gold"])


def test_the_gold_of_a_reliable_private_condition_is_no_misleading_agent(tmp_path):
    _, result = offquery_run(tmp_path, condition="reliable-private-unreliable-shared")
    frame = gs.load_run(result.run_dir).to_pandas()
    assert frame["gold.misleading_agent"].isna().all() and frame["gold.answer"].notna().all()


def test_labels_never_change_the_run_id_and_reach_failed_records(tmp_path):
    def run(labels, out):
        runner = Runner(QuestionAnswering(), {"program": "qa", "data": "labels"}, out=tmp_path / out, threads=1,
                        inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=echo_number_lm(),
                        adapter=json_adapter(), labels=labels)
        return runner.run(qa_records(3, fail={1}))

    plain = run(None, "a")
    labelled = run(lambda r: {"gold": r["answer"], "domain": "math", "id": "forged", "error": "forged"}, "b")
    assert plain.run_id == labelled.run_id
    frame = gs.load_run(labelled.run_dir).to_pandas().set_index("id")
    assert list(frame["gold"]) == ["0", "1", "2"] and set(frame["domain"]) == {"math"}
    assert "scripted LM failure" in frame.loc["r001", "error"]  # failed, and still labelled
    assert pd.isna(frame.loc["r000", "error"])  # a label is an allow-listed field: it never overwrites the row's
    assert frame["variant"].isna().all()
    old = gs.load_run(plain.run_dir).to_pandas()  # a run whose rows carry no labels: null, not missing columns
    assert old["gold"].isna().all() and old["domain"].isna().all()
    assert gs.load_run(plain.run_dir).to_dataset()["gold"] == [None, None, None]


def test_a_qa_task_run_stores_its_answer_as_gold(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in qa_records(2)))
    with dspy.context(lm=echo_number_lm(), adapter=json_adapter()):
        result = run_task("qa", {"data": str(data)}, RunSettings(out=str(tmp_path / "runs"), progress=False))
    frame = gs.load_run(result.run_dir).to_pandas()
    assert dict(zip(frame["id"], frame["gold"], strict=True)) == {"r000": "0", "r001": "1"}
    assert frame["domain"].isna().all()


def test_cost_is_the_runners_price_or_null(tmp_path):
    def run(out, **model):
        lm = echo_number_lm(**model)
        runner = Runner(QuestionAnswering(), {"program": "qa", "data": "cost"}, out=tmp_path / out, threads=1,
                        inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=lm, adapter=json_adapter())
        return gs.load_run(runner.run(qa_records(2)).run_dir).to_pandas()

    priced = run("priced", model="openai/gpt-4o-mini")
    assert (priced["cost_usd"] > 0).all()
    expected = [call_cost("openai/gpt-4o-mini", i, o) for i, o in zip(priced["input_tokens"], priced["output_tokens"],
                                                                      strict=True)]
    assert list(priced["cost_usd"]) == pytest.approx(expected)
    assert run("unpriced")["cost_usd"].isna().all()  # the scripted model has no price: null, not 0


def test_reused_input_tokens_are_what_the_lm_reported_or_null(tmp_path):
    def run(out, **engine):
        lm = echo_number_lm(**engine)
        runner = Runner(QuestionAnswering(), {"program": "qa", "data": out}, out=tmp_path / out, threads=1,
                        inputs=lambda r: {"question": r["question"]}, scorer=qa_score, lm=lm, adapter=json_adapter())
        result = runner.run(qa_records(2))
        return gs.load_run(result.run_dir).to_pandas(), result.summary["tokens"]

    reused, tokens = run("reused", reused_tokens=7)  # each call reports 7 of its 10 input tokens served from a cache
    assert list(reused["reused_input_tokens"]) == [7, 7] and list(reused["input_tokens"]) == [10, 10]
    assert tokens["reused_input"] == 14
    silent, tokens = run("silent")  # no call reported it: null, not 0
    assert silent["reused_input_tokens"].isna().all() and tokens["reused_input"] is None


def write_run(run_dir, config, rows):
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"program": "qa", "run_id": run_dir.name, **config}))
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


OLD_ROWS = [{"id": "a", "scores": {}, "outputs": {}, "input_tokens": 1000, "output_tokens": 200, "lm_calls": 2},
            {"id": "b", "scores": {}, "outputs": {}, "input_tokens": 0, "output_tokens": 0, "lm_calls": 0}]


@pytest.mark.parametrize("config,priced", [
    ({"lm": {"model": "openai/gpt-4o-mini"}}, True),
    ({"lm": {"model": "openai/gpt-4o-mini"}, "lm_config": {"roles": {"judge": {"model": "x"}}}}, False),
    ({"lm": {"model": "scripted/engine"}}, False),
    ({"lm": {"model": ["not", "a", "name"]}}, False),
])
def test_rows_written_before_costs_were_stored_are_priced_as_the_runs_one_lm(tmp_path, config, priced):
    frame = gs.load_run(write_run(tmp_path / "qa-old", config, OLD_ROWS)).to_pandas().set_index("id")
    if priced:
        assert frame.loc["a", "cost_usd"] == pytest.approx(call_cost("openai/gpt-4o-mini", 1000, 200))
    else:
        assert pd.isna(frame.loc["a", "cost_usd"])
    assert pd.isna(frame.loc["b", "cost_usd"])  # no LM call: nothing was priced
    assert frame["gold"].isna().all() and frame["variant"].isna().all()


@pytest.mark.parametrize("field,value", [("domain", 5), ("variant", ["x"]), ("cost_usd", "1"), ("cost_usd", -1.0)])
def test_a_hostile_label_or_cost_is_one_line_naming_the_field(tmp_path, field, value):
    run_dir = write_run(tmp_path / "qa-bad", {}, [{"id": "a", "scores": {}, field: value}])
    with pytest.raises(InputError, match=rf"results.jsonl.*{field}") as caught:
        gs.load_run(run_dir)
    assert "\n" not in str(caught.value)
