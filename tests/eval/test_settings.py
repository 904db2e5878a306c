"""Settings are typed data (issue 23, item 1): the models validate, the CLI and Python build the same run, and the
run configurations of unchanged settings are the ones earlier versions wrote (their run ids stay)."""

from __future__ import annotations

import json

import pytest

import groundstate as gs
from groundstate.cli import main
from groundstate.errors import ConfigError, InputError
from groundstate.eval.assemble import assemble
from groundstate.eval.reground.settings import BaselineSettings, CompareSettings, ReGroundSettings
from groundstate.eval.run_settings import RunSettings
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm

LEXICAL = "lexical(threshold=0.75)"
SYNTHETIC = {"synthetic": {"domains": ["healthcare"], "n": 2, "seed": 0, "variants": ["main"]}}


@pytest.fixture
def placeholder_lm(monkeypatch):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


# -- the models ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, field", [
    ({"max_candidates": 0}, "max_candidates"),
    ({"keep_rule": "loose"}, "keep_rule"),
    ({"condition": "sometimes"}, "condition"),
    ({"n": "many"}, "n"),
    ({"max_candidate": 3}, "max_candidate"),  # a misspelt field is refused, never ignored
    ({"seed": -1}, "seed"),
])
def test_a_settings_table_that_does_not_fit_is_one_line_naming_the_file_and_field(value, field):
    with pytest.raises(InputError) as info:
        ReGroundSettings.parse(value, file="spec.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("spec.toml") and f"field '{field}'" in message


def test_a_value_from_the_command_line_is_named_by_its_flag():
    from groundstate.cli.settings import settings_from

    with pytest.raises(ConfigError) as info:
        settings_from(ReGroundSettings, {"max_candidates": 0})
    assert str(info.value).startswith("--max-candidates ") and "1" in str(info.value)
    with pytest.raises(ConfigError, match="^--keep-rule "):
        settings_from(ReGroundSettings, {"keep_rule": "loose"})


def test_compare_settings_narrow_to_each_program():
    both = CompareSettings(max_candidates=2, rounds=1, ordering="shared-first", seed=3)
    reground, standard = both.narrow(ReGroundSettings), both.narrow(BaselineSettings)
    assert (reground.max_candidates, reground.seed) == (2, 3) and not hasattr(reground, "rounds")
    assert (standard.rounds, standard.ordering, standard.seed) == (1, "shared-first", 3)
    assert ReGroundSettings.parse(both) == reground


def test_run_settings_check_their_values():
    assert RunSettings(shard="1/3").shard == (1, 3)
    with pytest.raises(ConfigError, match="--shard"):
        RunSettings(shard="3/3")
    with pytest.raises(ValueError):
        RunSettings(threads=0)
    with pytest.raises(ValueError):
        RunSettings(backend="slurm")
    dumped = RunSettings(worker_setup=lambda: {}, lm_spec={"default": {}}).model_dump()
    assert "worker_setup" not in dumped and "lm_spec" not in dumped  # runtime only, never stored


# -- run configurations: what the settings fingerprint -----------------------------------------------------
#: ``(settings, the config's options, seed)`` as earlier main wrote them for the same command line (captured on
#: 7bb8b36 with `groundstate run ...`): the run ids of these configurations must not change.
PINNED = [
    ("reground", ReGroundSettings(n=2),
     {"condition": "unreliable", "judge": LEXICAL, "max_candidates": 3, "multi_misleading": False,
      "oracle_t1": False}, 0),
    ("reground", ReGroundSettings(n=2, stop_early=True, keep_rule="strict", mode="statement", batch_facts=True,
                                  oracle_t1=True, multi_misleading=True, max_candidates=2, condition="reliable"),
     {"batch_facts": True, "condition": "reliable", "judge": LEXICAL, "keep_rule": "strict", "max_candidates": 2,
      "mode": "statement", "multi_misleading": True, "oracle_t1": True, "stop_early": True}, 0),
    ("standard", BaselineSettings(n=2, rounds=1, ordering="shared-first", topology="chain"),
     {"condition": "unreliable", "judge": LEXICAL, "ordering": "shared-first", "rounds": 1, "topology": "chain"}, 0),
    ("oracle", BaselineSettings(n=2, oracle_attribution="gold"),
     {"condition": "unreliable", "judge": LEXICAL, "oracle_t1": "gold"}, 0),
    # Robin's default ordering became private-first (issue 25 item 4, Standard's footing): the earlier command line
    # now needs --ordering shared-first for the options it wrote (its program, on Standard's closing contract by
    # default, differs anyway: the run id's program_state says so)
    ("robin", BaselineSettings(n=2, seed=2, ordering="shared-first"),
     {"condition": "unreliable", "judge": LEXICAL, "ordering": "shared-first", "rounds": 1}, 2),
    ("voting", BaselineSettings(n=2), {"condition": "unreliable", "judge": LEXICAL}, 0),
]


@pytest.mark.parametrize("name, settings, options, seed", PINNED, ids=[p[0] + str(i) for i, p in enumerate(PINNED)])
def test_the_run_config_of_unchanged_settings_is_what_earlier_versions_wrote(name, settings, options, seed,
                                                                            placeholder_lm):
    _, _, planned = assemble(name, settings)
    assert planned.config["options"] == options
    assert planned.config["data"] == SYNTHETIC and planned.config["seed"] == seed
    assert planned.config["lm_config"] is None and planned.config["program"] == name
    assert placeholder_lm.engine.calls == 0  # assembling calls no LM


def test_a_spec_table_and_the_model_plan_the_same_run(placeholder_lm):
    table = {"n": 2, "max_candidates": 2, "keep_rule": "strict"}
    _, settings, from_table = assemble("reground", table)
    _, _, from_model = assemble("reground", ReGroundSettings(**table))
    assert settings == ReGroundSettings(**table)
    assert from_table.run_id(RunSettings()) == from_model.run_id(RunSettings())


def test_settings_built_in_python_run_the_same_run_as_the_command(tmp_path, placeholder_lm):
    runs = tmp_path / "runs"
    assert main(["run", "reground", "--n", "2", "--max-candidates", "2", "--stop-early", "--runs-dir", str(runs),
                 "--no-progress"]) == 0
    (cli_run,) = runs.iterdir()
    calls = placeholder_lm.engine.calls
    result = gs.run_task("reground", gs.ReGroundSettings(n=2, max_candidates=2, stop_early=True),
                         gs.RunSettings(out=runs))
    assert result.run_id == cli_run.name and placeholder_lm.engine.calls == calls  # resumed: nothing ran again
    assert result.summary["n_done"] == 2


# -- gs.evaluate ------------------------------------------------------------------------------------------------
@pytest.fixture
def optimized(tmp_path, placeholder_lm):
    from groundstate.eval.benchmarks.offquery.loader import save_instances
    from groundstate.eval.benchmarks.offquery.synthetic import generate

    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    save_instances(train, generate("healthcare", "main", 4, seed=0))
    save_instances(test, generate("disaster", "main", 2, seed=5))
    out = tmp_path / "opt"
    assert main(["optimize", "reground", "--stage", "resolve", "--data", str(train), "--out", str(out),
                 "--max-demos", "1"]) == 0
    return out, test


def test_gs_evaluate_returns_what_the_command_prints(tmp_path, optimized, placeholder_lm, capsys):
    out, test = optimized
    runs, report = tmp_path / "runs", tmp_path / "report"
    assert main(["evaluate", str(out), "--data", str(test), "--runs-dir", str(runs), "--report-dir", str(report),
                 "--no-progress"]) == 0
    printed = json.loads((report / "evaluate.json").read_text())
    calls = placeholder_lm.engine.calls
    evaluation = gs.evaluate(out, test, run=gs.RunSettings(out=runs))
    assert placeholder_lm.engine.calls == calls  # the same two runs, resumed
    assert sorted(evaluation.run_ids.values()) == sorted(p.name for p in runs.iterdir())
    assert json.loads(json.dumps(evaluation.rows(), default=str)) == printed["rows"]
    assert evaluation.data == printed["config"]["data"] and evaluation.title in (report / "evaluate.md").read_text()


def test_gs_evaluate_refuses_a_manifest_without_a_build_argument_in_one_line(optimized, tmp_path):
    out, test = optimized
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["build_args"]["oracle_t1"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError) as info:
        gs.evaluate(out, test, run=gs.RunSettings(out=tmp_path / "runs"))
    assert "build_args.oracle_t1" in str(info.value) and "manifest.json" in str(info.value)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, model, given", [
    (["run", "reground"], ReGroundSettings, {}),
    (["run", "standard"], BaselineSettings, {}),
    (["compare", "reground"], CompareSettings, {}),
    (["consilience", "evaluate", "--data", "t.jsonl"], "EvaluationSettings", {"data": "t.jsonl"}),
    (["hidden", "run", "--data", "t.jsonl"], "ProtocolSettings", {"data": "t.jsonl"}),
    (["dhd", "replay", "--cache", "c", "--mode", "loo"], "ReplaySettings", {"cache": "c", "mode": "loo"}),
    (["dhd", "mask", "--cache", "c"], "MaskSettings", {"cache": "c"}),
])
def test_options_left_out_give_the_models_defaults(argv, model, given):
    """Every option derived from a settings model defaults to the model's default (lists included), so the command
    line and Python build the same settings."""
    from groundstate.cli import build_parser
    from groundstate.cli.settings import settings_from
    from groundstate.eval.consilience import settings as consilience
    from groundstate.eval.dhd import settings as dhd

    if isinstance(model, str):
        model = getattr(consilience, model, None) or getattr(dhd, model)
    args = build_parser().parse_args(argv)
    for name, field in model.model_fields.items():
        if name in vars(args) and name not in given and vars(args)[name] is not None:
            assert vars(args)[name] == field.get_default(call_default_factory=True), name
    assert settings_from(model, args) == model(**given)


def test_python_runs_use_the_lm_dspy_is_configured_with_and_records_in_memory(tmp_path):
    import dspy

    from groundstate.eval.qa import QASettings

    lm = scripted_lm()
    rows = [{"id": "a", "question": "What is 1?", "answer": "1"}, {"id": "b", "question": "What is 2?"}]
    with dspy.context(lm=lm):
        result = gs.run_task("qa", QASettings(), gs.RunSettings(out=tmp_path), source=rows)
    assert lm.engine.calls >= 2 and result.summary["n_done"] == 2
    assert result.config["lm"]["model"] == lm.model  # DSPy's LM, not an embedded one built here
    assert result.config["data"]["records"] == "<list of records>" and len(result.config["data"]["sha256"]) == 64
    with dspy.context(lm=lm), pytest.raises(InputError, match="field 'question'"):
        gs.run_task("qa", QASettings(), gs.RunSettings(out=tmp_path), source=[{"id": "c"}])
