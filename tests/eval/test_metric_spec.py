"""One metric spec (issue 24, item 5): the judge is explicit ('lexical', 'same-as-lm' or a model), 'auto' is refused
in one line, every OffQuery run config records the judge where :mod:`groundstate.eval.metric_spec` says, and every
report names the LM, its decoding and the judge."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from groundstate.cli import main
from groundstate.errors import ConfigError, InputError
from groundstate.eval.assemble import assemble
from groundstate.eval.metric_spec import LEXICAL_LABEL, MetricSpec, judge_label, scoring_description
from groundstate.eval.reground.settings import CompareSettings, ReGroundSettings
from groundstate.eval.settings import LMSettings
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.conftest import requires_embedded

SYNTHETIC = {"data": "synthetic", "n": 2}
SELF = "the model under test judges itself"
JUDGE_REPLY = "[[ ## supported_ids ## ]]\n[1]\n\n[[ ## completed ## ]]"


@pytest.fixture
def tested_lm(monkeypatch):
    """The model under test is a scripted LM named like a hosted one; any LM an ``--lm-config`` role names other
    than the default is built for real (so a judge role reaches the fake server)."""
    lm = scripted_lm(model="openai/under-test")
    real = LMConfig.lm_for
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: real(self, role) if role == "judge" else lm)
    return lm


# -- the choices -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["run", "reground"], ["compare", "reground"], ["optimize", "reground"],
                                  ["evaluate", "somewhere"]])
def test_auto_is_refused_in_one_line_naming_the_three_choices(tmp_path, capsys, argv):
    sentinel = tmp_path / "runs"
    where = ["--out", str(sentinel)] if argv[0] == "optimize" else ["--runs-dir", str(sentinel)]
    code = main([*argv, "--data", "synthetic", "--judge-lm", "auto", *where])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--judge-lm" in err and "'lexical'" in err and "'same-as-lm'" in err and "openai/gpt-4o" in err
    assert "'auto' is gone" in err
    assert not sentinel.exists()  # nothing ran


@pytest.mark.parametrize("value", ["auto", "gpt-4o", "", "openai/", "/x", "openai/gpt 4o", "openai/x/",
                                   "openai/\x1b[31mx", "openai/\u202ex"])
def test_a_spec_table_with_a_bad_judge_is_one_line_naming_the_file_and_field(value):
    with pytest.raises(InputError) as info:
        ReGroundSettings.parse({"judge_lm": value}, file="spec.toml")
    assert str(info.value).startswith("spec.toml") and "judge_lm" in str(info.value) and "\n" not in str(info.value)


def test_the_default_judge_is_lexical_everywhere():
    from groundstate.eval.reground.optimize import OptimizeSettings

    assert MetricSpec().judge == ReGroundSettings().judge_lm == CompareSettings().judge_lm == "lexical"
    assert OptimizeSettings(data="x").judge_lm == "lexical"
    assert MetricSpec(judge=" openai/gpt-4o ").judge == "openai/gpt-4o"


# -- what run configs record -------------------------------------------------------------------------------------
def test_each_judge_choice_is_recorded_in_the_run_config(tested_lm):
    lexical = assemble("reground", {**SYNTHETIC})[2].config
    assert lexical["options"]["judge"] == "lexical(threshold=0.75)" and "metric_spec" not in lexical["options"]
    assert judge_label(lexical) == LEXICAL_LABEL
    same = assemble("reground", {**SYNTHETIC, "judge_lm": "same-as-lm"})[2].config
    assert same["options"]["judge"] == "lm:openai/under-test"
    assert same["options"]["metric_spec"] == {"judge": "same-as-lm", "judge_lm": same["lm"]}
    assert judge_label(same) == f"{SELF} (openai/under-test)"
    named = assemble("reground", {**SYNTHETIC, "judge_lm": "openai/gpt-4o"})[2].config  # built, never called
    assert named["options"]["judge"] == "lm:openai/gpt-4o"
    assert named["options"]["metric_spec"]["judge"] == "openai/gpt-4o"
    assert named["options"]["metric_spec"]["judge_lm"]["temperature"] == 0.0  # a hosted judge decodes at 0
    assert judge_label(named) == "openai/gpt-4o (LM judge, temperature 0)"
    ids = {assemble("reground", {**SYNTHETIC, "judge_lm": j})[2].run_id(gs_run()) for j in
           ("lexical", "same-as-lm", "openai/gpt-4o")}
    assert len(ids) == 3 and tested_lm.engine.calls == 0  # three judges, three runs; planning calls no LM


def gs_run():
    from groundstate.eval.run_settings import RunSettings

    return RunSettings()


def test_a_hosted_lm_without_a_temperature_is_recorded_at_temperature_zero():
    """The LM description (so the run id) holds the decoding: 0 unless told, the given one when told."""
    default = assemble("reground", SYNTHETIC, lms=LMSettings(lm="openai/gpt-4o-mini"))[2]
    told = assemble("reground", SYNTHETIC, lms=LMSettings(lm="openai/gpt-4o-mini", temperature=0.7))[2]
    assert default.config["lm"]["temperature"] == 0.0 and told.config["lm"]["temperature"] == 0.7
    assert default.run_id(gs_run()) != told.run_id(gs_run())
    assert scoring_description(default.config)["decoding"] == "temperature 0"


def test_the_judge_role_of_an_lm_config_is_the_judges_server_and_decoding(tmp_path, servers, tested_lm, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers(responder=lambda request: JUDGE_REPLY)
    config = tmp_path / "lm.toml"
    config.write_text(f'[default]\nmodel = "embedded"\n\n[roles.judge]\nmodel = "openai/judge"\n'
                      f'api_base = "{server.url}"\n')
    runs = tmp_path / "runs"
    base = ["run", "reground", "--n", "1", "--runs-dir", str(runs), "--no-progress", "--lm-config", str(config)]
    assert main([*base, "--judge-lm", "openai/judge"]) == 0
    assert server.requests and all(json.loads(r["body"])["temperature"] == 0.0 for r in server.requests)
    (run_dir,) = runs.iterdir()
    options = json.loads((run_dir / "config.json").read_text())["options"]
    assert options["metric_spec"]["judge_lm"]["api_base"] == server.url
    assert "openai/judge (LM judge, temperature 0)" in capsys.readouterr().out
    assert main([*base, "--judge-lm", "openai/other"]) == 2  # the role names another model: one line
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "openai/other" in err and "openai/judge" in err
    assert main(base) == 0  # lexical: the role is not used, and a note says so
    assert "role 'judge' is not used" in capsys.readouterr().err


# -- what reports say --------------------------------------------------------------------------------------------
def test_the_run_summary_and_runs_show_name_the_lm_decoding_and_judge(tmp_path, capsys, tested_lm):
    runs = tmp_path / "runs"
    assert main(["run", "reground", "--n", "1", "--runs-dir", str(runs), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    for text in ("openai/under-test", "temperature 0", "max tokens 512", LEXICAL_LABEL):
        assert text in " ".join(printed.split())
    assert main(["runs", "show", next(runs.iterdir()).name, "--runs-dir", str(runs)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "decoding" in shown and "temperature 0" in shown and "approximate; the paper uses GPT-4o" in shown


def test_same_as_lm_makes_every_header_say_the_judge_is_the_model_under_test(tmp_path, capsys, tested_lm):
    report = tmp_path / "report"
    assert main(["compare", "reground", "standard", "--n", "1", "--runs-dir", str(tmp_path / "runs"),
                 "--report-dir", str(report), "--judge-lm", "same-as-lm", "--no-progress"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"judge = {SELF} (openai/under-test)" in printed
    markdown = (report / "compare.md").read_text()
    assert f"- judge = {SELF} (openai/under-test)" in markdown and "- LM = openai/under-test" in markdown
    assert "- decoding = temperature 0, max tokens 512" in markdown
    config = json.loads((report / "compare.json").read_text())["config"]
    assert config["judge"] == f"{SELF} (openai/under-test)" and config["judge_spec"] == "same-as-lm"
    assert config["lm"] == "openai/under-test" and config["decoding"].startswith("temperature 0")
    assert any("supported_ids" in r.text for r in tested_lm.engine.requests)  # the model judged itself


def test_a_config_written_before_the_metric_spec_is_read_from_its_judges_name():
    old_auto = {"lm": {"model": "openai/gpt-4o", "temperature": None}, "options": {"judge": "lm:openai/gpt-4o"}}
    assert judge_label(old_auto) == f"{SELF} (openai/gpt-4o)"  # what 'auto' did with a hosted LM
    assert scoring_description(old_auto)["decoding"] == "temperature: provider default"
    other = {"lm": {"model": "openai/gpt-4o-mini"}, "options": {"judge": "lm:openai/gpt-4o"}}
    assert judge_label(other) == "openai/gpt-4o (LM judge)"
    assert judge_label({"lm": {"model": "x/y"}, "options": {}}) is None  # no judge: none named


# -- the API the experiment layer uses ---------------------------------------------------------------------------
def test_the_spec_parses_describes_itself_and_is_read_back_from_a_run_config(tested_lm):
    assert MetricSpec.from_cli(" same-as-lm ").is_same_as_lm and MetricSpec.from_cli("lexical").is_lexical
    for bad in ("auto", "gpt-4o", ""):
        with pytest.raises(ConfigError) as info:
            MetricSpec.from_cli(bad)
        assert str(info.value).startswith("--judge-lm must be") and "\n" not in str(info.value)
    with pytest.raises(ValidationError):
        MetricSpec(judge="auto")
    with pytest.raises(InputError) as info:
        MetricSpec.parse({"judge": "auto"}, file="spec.toml", loc=("defaults",))
    message = str(info.value)
    assert message.startswith("spec.toml") and "judge" in message and "'auto' is gone" in message
    assert MetricSpec().describe("x/y") == LEXICAL_LABEL
    assert MetricSpec(judge="same-as-lm").describe("x/y") == f"{SELF} (x/y)"
    assert MetricSpec(judge="x/y").describe("x/y") == f"{SELF} (x/y)"  # a named judge that is the model under test
    assert MetricSpec(judge="same-as-lm").describe() == SELF
    assert MetricSpec(judge="openai/gpt-4o").describe("x/y") == "openai/gpt-4o (LM judge)"
    for judge in ("lexical", "same-as-lm", "openai/gpt-4o"):
        config = assemble("reground", {**SYNTHETIC, "judge_lm": judge})[2].config
        assert MetricSpec.of_config(config) == MetricSpec(judge=judge)
    assert MetricSpec.of_config({"lm": {"model": "x/y"}, "options": {"judge": "lm:openai/gpt-4o"}}) == \
        MetricSpec(judge="openai/gpt-4o")  # a config written before the metric spec
    assert MetricSpec.of_config({"lm": {"model": "x/y"}, "options": {}}) is None


# -- run ids: only hosted LMs without a temperature change ---------------------------------------------------------
def _fingerprinted(description):
    return {k: ({kk: vv for kk, vv in v.items() if kk != "runtime"} if k == "engine" else v)
            for k, v in description.items()}


def test_the_lm_descriptions_of_scripted_and_explicitly_decoded_lms_are_what_earlier_versions_wrote():
    """Captured on 3ceb2a4 (before the metric spec): the run ids of these LMs' runs do not change. A hosted LM
    without a temperature was described with ``temperature: None`` then; it is 0 now (or 1 for OpenAI's reasoning
    models, which accept nothing else), the run id of an explicit ``--temperature 0`` run."""
    from groundstate.lm.specs import describe_lm, get_lm

    assert describe_lm(scripted_lm()) == {"model": "scripted/engine", "temperature": 0.0, "max_tokens": 512}
    assert describe_lm(get_lm("openai/gpt-4o", temperature=0.5, max_tokens=64)) == {
        "model": "openai/gpt-4o", "temperature": 0.5, "max_tokens": 64}
    assert describe_lm(get_lm("openai/gpt-4o")) == describe_lm(get_lm("openai/gpt-4o", temperature=0.0)) == {
        "model": "openai/gpt-4o", "temperature": 0.0, "max_tokens": None}
    assert describe_lm(get_lm("openai/gpt-5")) == {"model": "openai/gpt-5", "temperature": 1.0}
    assert describe_lm(get_lm("openai/gpt-5-chat"))["temperature"] == 0.0
    roles = LMConfig(roles={"agent.0": {"model": "openai/x"}, "agent.1": {"model": "embedded", "quant": "shipped"},
                            "agent.2": {"model": "openai/y", "temperature": 0.4},
                            "agent.3": {"model": "embedded"}}).describe()["roles"]
    assert roles == {"agent.0": {"model": "openai/x", "temperature": 0.0},
                     "agent.1": {"model": "embedded", "revision": 2},
                     "agent.2": {"model": "openai/y", "temperature": 0.4},  # per-role LMs record their decoding too
                     # and the embedded LM's type and engine revision (issue 27)
                     "agent.3": {"model": "embedded", "quant": "q8_0", "revision": 2}}


@requires_embedded
def test_the_embedded_lms_description_is_what_earlier_versions_wrote_plus_the_engine_revision():
    from groundstate.lm.specs import describe_lm, get_lm

    # revision 2 (issue 27: no flash attention, exact prefix reuse) answers differently from earlier releases
    engine = {"n_ctx": 8192, "n_threads": 1, "max_string_length": 300, "max_items": 8, "seed": 0, "revision": 2}
    assert _fingerprinted(describe_lm(get_lm("embedded", quant="shipped"))) == {
        "model": "embedded/smollm2-135m-instruct", "temperature": 0.0, "max_tokens": 512, "engine": engine}
    assert _fingerprinted(describe_lm(get_lm("embedded", temperature=0.3, max_tokens=100, quant="shipped"))) == {
        "model": "embedded/smollm2-135m-instruct", "temperature": 0.3, "max_tokens": 100, "engine": engine}
    # the q8_0 copy the embedded LM runs by default since issue 27 answers differently: its own run ids
    assert _fingerprinted(describe_lm(get_lm("embedded"))) == {
        "model": "embedded/smollm2-135m-instruct", "temperature": 0.0, "max_tokens": 512,
        "engine": {**engine, "quant": "q8_0"}}
