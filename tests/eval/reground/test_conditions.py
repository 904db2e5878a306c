"""The reliable-private conditions (issue 25, item 5; the paper's Table 2): what a program sees and what the
metrics score when the private evidence is made reliable, on generated and published data, through the
records, the task settings and the command line."""

from __future__ import annotations

import json

import pytest

from groundstate.eval.benchmarks.offquery.published import load_offquery
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.records import CONDITIONS, OffQueryInstance
from tests.helpers import DATA

HEALTH, HEALTH_T2 = DATA / "offquery" / "mediQ_easy.json", DATA / "offquery" / "mediQ_easy_t2.json"


def published_items():
    return json.loads(HEALTH.read_text(encoding="utf-8"))


def test_the_conditions_are_the_four_settings_of_table_2():
    assert CONDITIONS == ("reliable", "unreliable", "reliable-private", "reliable-private-unreliable-shared")


@pytest.mark.parametrize("variant", ["main", "multi-misleading", "distributed"])
def test_a_generated_instance_under_reliable_private_has_only_reliable_evidence(variant):
    instance = generate("healthcare", variant, 1, seed=3)[0]
    truthful = instance.provenance["structure"]["reliable_evidence"]
    assert instance.misleading and truthful
    for condition, shared in (("reliable-private", instance.shared_context),
                              ("reliable-private-unreliable-shared", instance.corrupted_context)):
        view = instance.under(condition)
        assert view.misleading == [] and view.misleading_statements == []
        assert [a.agent for a in view.agents] == [a.agent for a in instance.agents]  # every one has a reliable text
        for agent in instance.agents:
            expected = truthful.get(str(agent.agent), agent.evidence)
            assert view.agents[agent.agent].evidence == expected
        assert all(s not in a.evidence for a in view.agents for s in instance.misleading_statements)
        inputs = instance.inputs(condition)
        assert inputs["shared_context"] == shared
        assert [a.evidence for a in inputs["agents"]] == [a.evidence for a in view.agents]
        assert view.t2_facts == instance.t2_facts and view.answer == instance.answer
        assert view.under(condition) == view  # idempotent
        assert view.reliable_information() == instance.reliable_information()  # the Oracle's view is unchanged
        example = instance.to_example(condition)
        assert example.misleading == [] and example.shared_context == shared
    for condition in ("reliable", "unreliable"):
        assert instance.under(condition) is instance


def test_a_published_misleading_agent_in_a_categorys_place_gets_that_categorys_reliable_text(tmp_path):
    (instance, *_) = load_offquery(HEALTH, HEALTH_T2)
    assert instance.misleading == [1]
    view = instance.under("reliable-private")
    assert [a.evidence for a in view.agents] == [
        "White cell count 15,200 per microlitre.", "Chest radiograph shows right lower lobe consolidation.",
        "Temperature 38.9 °C, crackles over the right lower lung field."]
    assert view.provenance["private_made_reliable"] == {"replaced": [1], "left_out": []}


def test_an_extra_published_misleading_agent_is_left_out_and_the_rest_renumbered(tmp_path):
    item = published_items()[0]
    fabricated = item["shuffled_private_information"][1]
    item["shuffled_private_information"] = ["White cell count 15,200 per microlitre.", fabricated,
                                            "Temperature 38.9 °C, crackles over the right lower lung field.",
                                            "Chest radiograph shows right lower lobe consolidation."]
    path = tmp_path / "mediQ_easy.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    (instance,) = load_offquery(path)
    assert instance.agents[1].role is None and instance.provenance["misleading_reliable_evidence"] is None
    view = instance.under("reliable-private-unreliable-shared")
    assert [a.agent for a in view.agents] == [0, 1, 2] and fabricated not in [a.evidence for a in view.agents]
    assert [a.role for a in view.agents] == ["Laboratory", "Physical Examination", "Imaging"]
    assert view.misleading == [] and view.provenance["private_made_reliable"] == {"replaced": [], "left_out": [1]}
    assert OffQueryInstance.model_validate(view.model_dump()) == view  # still a valid instance
    assert instance.inputs("reliable-private-unreliable-shared")["shared_context"] == instance.corrupted_context


def test_a_condition_showing_the_corrupted_context_needs_one(tmp_path):
    from groundstate.errors import InputError

    item = published_items()[0]
    item["unreliable_context"] = ""
    path = tmp_path / "mediQ_easy.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_offquery(path, condition="reliable-private-unreliable-shared")
    assert "unreliable_context" in str(info.value) and "\n" not in str(info.value)
    assert load_offquery(path, condition="reliable-private")[0].corrupted_context is None
    with pytest.raises(ValueError, match="condition"):
        load_offquery(path, condition="reliable-private")[0].under("sometimes")


def test_a_run_under_reliable_private_scores_t1_against_no_misleading_agent(tmp_path, monkeypatch):
    import groundstate as gs
    from groundstate.eval.reground.settings import BaselineSettings
    from groundstate.lm.config import LMConfig
    from groundstate.testing import scripted_lm

    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    result = gs.run_task("oracle", BaselineSettings(n=2, condition="reliable-private", oracle_attribution="gold"),
                         gs.RunSettings(out=tmp_path / "runs"))
    assert result.summary["n_done"] == 2
    config = json.loads((tmp_path / "runs" / result.run_id / "config.json").read_text())
    assert config["options"]["condition"] == "reliable-private"
    records = [json.loads(line) for line in (tmp_path / "runs" / result.run_id / "results.jsonl").read_text()
               .splitlines()]
    assert all(r["outputs"]["misleading_agent"] is None and r["scores"]["t1"] == 1.0 for r in records)


def test_the_command_line_takes_the_new_conditions(tmp_path):
    from tests.test_hostile_files import run_cli

    code, out, err = run_cli(["data", "generate", "offquery", "--domain", "healthcare", "--n", "1", "--out",
                              str(tmp_path / "x.jsonl")], tmp_path)
    assert code == 0, err
    for condition in ("reliable-private", "reliable-private-unreliable-shared"):
        code, out, err = run_cli(["data", "validate", "--data", str(tmp_path / "x.jsonl"), "--condition", condition],
                                 tmp_path)
        assert code == 0, err
    code, _, err = run_cli(["run", "standard", "--condition", "reliable-privat", "--n", "1"], tmp_path)
    assert code == 2 and "reliable-private" in err


@pytest.mark.parametrize("name", ["reground-table2", "reground-table2-synthetic"])
def test_table_2_carries_a_cell_for_every_paper_value(name):
    """Every number of the paper's Table 2 lands on a cell of the spec (no longer "paper values for cells not in
    this table"); the values themselves are checked against the paper by tests/eval/experiments/test_references.py.
    """
    from groundstate.eval.experiments.cells import resolve_cells
    from groundstate.eval.experiments.load import load_spec
    from tests.eval.experiments.test_spec import placeholder_inputs

    spec = load_spec(name, placeholder_inputs(name))
    cells = resolve_cells(spec)
    conditions = {c.keys["setting"]: c.settings.get("condition") for c in cells}
    assert {"reliable", "misleading-shared", "misleading-private"} <= set(conditions)
    if name == "reground-table2":
        assert conditions == {"reliable": "reliable-private", "misleading-shared": "reliable-private-unreliable-shared",
                              "misleading-private": "reliable"}
    assert len(spec.reference) >= 3
    for reference in spec.reference:
        assert any(all(c.keys.get(k) == v for k, v in reference.cell.items()) for c in cells), reference.cell
