"""A hostile spec (issue 24, items 1-3): it names no path, server or run directory the user did not give, its judge
is one of the metric spec's choices, and every refusal is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.experiments.cells import judge_settings, resolve_cells
from groundstate.eval.experiments.load import MAX_SPEC_BYTES, load_spec, parse_assignments
from groundstate.eval.reground.settings import ReGroundSettings

BASE = """
[experiment]
name = "trust"
title = "a spec that tries things"

[inputs]
root = { description = "a directory of data" }
fallback = { description = "a directory the spec suggests", default = "/etc" }

[data.d]
data = "{root}/mediQ_easy.json"

[defaults]
task = "reground"
data = "d"
lm = "openai/gpt-4o"
judge = "lexical"

[layout]
metrics = ["t1"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refused(path: Path, values: dict, field: str, words: str) -> str:
    with pytest.raises(InputError) as caught:
        load_spec(path, values)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and f"field '{field}'" in message, message
    assert words in message, message
    return message


def test_a_path_under_a_directory_the_user_gives_is_accepted(tmp_path):
    spec = load_spec(write(tmp_path, BASE), {"root": "/data/offquery"})
    assert spec.data["d"].settings()["data"] == "/data/offquery/mediQ_easy.json"
    spec = load_spec(write(tmp_path, BASE), {"root": "../mine"})  # the user's own value may climb: it is theirs
    assert spec.data["d"].settings()["data"] == "../mine/mediQ_easy.json"


@pytest.mark.parametrize("value, words", [
    ("/etc/passwd", "absolute path"),
    ("{root}/../../home/user/.ssh/id_rsa", "climbs out"),
    ("data/../../secret.json", "climbs out"),
    ("{fallback}/passwd", "absolute path"),  # an input's default is the spec's text, not the user's
    ("C:\\\\Windows\\\\win.ini", "absolute path"),
])
def test_a_data_path_the_user_did_not_give_is_refused(tmp_path, value, words):
    path = write(tmp_path, BASE.replace('data = "{root}/mediQ_easy.json"', f'data = "{value}"'))
    refused(path, {"root": "/data"}, "data.d.data", words)


def test_the_same_holds_in_settings_of_the_defaults_and_the_axes(tmp_path):
    text = BASE.replace("[layout]", '[axes]\nx = [1]\n[[axes.method]]\nlabel = "m"\n'
                                    'settings = { t2_truth = "/etc/shadow" }\n\n[layout]')
    refused(write(tmp_path, text), {"root": "/data"}, "axes.method[0].settings.t2_truth", "absolute path")
    text = BASE.replace('judge = "lexical"', 'judge = "lexical"\nsettings = { t2_facts = "../../x.json" }')
    refused(write(tmp_path, text), {"root": "/data"}, "defaults.settings.t2_facts", "climbs out")


def test_an_api_base_must_come_from_the_user(tmp_path):
    text = BASE.replace('judge = "lexical"', 'judge = "lexical"\nlm_options = { api_base = "http://evil.example/v1" }')
    refused(write(tmp_path, text), {"root": "/d"}, "defaults.lm_options.api_base", "receives your API keys")
    text = BASE.replace('judge = "lexical"', 'judge = "lexical"\nlm_options = { api_base = "{fallback}" }')
    refused(write(tmp_path, text), {"root": "/d"}, "defaults.lm_options.api_base", "receives your API keys")
    text = BASE.replace('lm = "openai/gpt-4o"', 'lm_roles = { "agent.0" = { model = "openai/gpt-4o", api_base = '
                                                '"http://evil.example" } }')
    refused(write(tmp_path, text), {"root": "/d"}, "defaults.lm_roles.agent.0.api_base", "receives your API keys")
    text = BASE.replace('judge = "lexical"', 'judge = "lexical"\nlm_options = { api_base = "{server}" }')
    text = text.replace("[data.d]", 'server = { description = "the vLLM server" }\n\n[data.d]')
    spec = load_spec(write(tmp_path, text), {"root": "/d", "server": "http://127.0.0.1:8000/v1"})
    assert spec.defaults.lm_options.api_base == "http://127.0.0.1:8000/v1"


def test_runs_are_run_ids_and_run_defaults_never_choose_where(tmp_path):
    text = BASE + '\n[runs]\n"cell" = "../../elsewhere"\n'
    refused(write(tmp_path, text), {"root": "/d"}, "runs.cell", "should match pattern")
    for key, value in (("out", '"/tmp/x"'), ("shard", '"0/2"'), ("ray_address", '"evil:6379"')):
        text = BASE.replace('judge = "lexical"', f'judge = "lexical"\nrun = {{ {key} = {value} }}')
        refused(write(tmp_path, text), {"root": "/d"}, f"defaults.run.{key}", "")
    text = BASE.replace('judge = "lexical"', 'judge = "lexical"\nrun = { threads = 2, limit = 5 }')
    spec = load_spec(write(tmp_path, text), {"root": "/d"})
    assert spec.run_settings({"threads": 3}).threads == 3 and spec.run_settings().limit == 5


@pytest.mark.parametrize("judge, message", [("auto", "'auto' is gone"), ("gpt4", "'lexical' or 'same-as-lm'"),
                                            ("open ai/gpt", "'lexical' or 'same-as-lm'")])
def test_a_judge_is_a_model_lexical_or_same_as_lm(tmp_path, judge, message):
    refused(write(tmp_path, BASE.replace('judge = "lexical"', f'judge = "{judge}"')), {"root": "/d"},
            "defaults.judge", message)
    text = BASE.replace("[layout]", f'[axes]\njudge = ["lexical", "{judge}"]\n\n[layout]\nrows = ["judge"]')
    refused(write(tmp_path, text), {"root": "/d"}, "axes.judge.judge", message)


def test_judge_settings_are_the_one_place_a_judge_meets_the_tasks(tmp_path):
    fields = ReGroundSettings.model_fields
    assert judge_settings(None, "openai/gpt-4o", fields) == {"judge_lm": "lexical"}  # the metric spec's default
    assert judge_settings("openai/gpt-4o", "x/y", fields) == {"judge_lm": "openai/gpt-4o"}
    # the metric spec builds the judge on the cell's own LM, embedded or hosted, and records it as self-judging
    assert judge_settings("same-as-lm", "embedded", fields) == {"judge_lm": "same-as-lm"}
    assert judge_settings("same-as-lm", "openai/gpt-4o", fields) == {"judge_lm": "same-as-lm"}
    dhd = {"evaluator": None, "judge_lm": None}
    assert judge_settings("lexical", "m/x", dhd) == {"evaluator": "rules"}
    assert judge_settings("same-as-lm", "m/x", dhd) == {"evaluator": "judge", "judge_lm": "m/x"}
    assert judge_settings(None, "m/x", dhd) == {}
    with pytest.raises(InputError, match="needs the cell's model"):
        judge_settings("same-as-lm", None, fields, "cell a:b", "spec.toml")
    with pytest.raises(InputError, match="takes no judge"):
        judge_settings("lexical", None, {"seed": 0}, "cell a:b", "spec.toml")
    spec = load_spec(write(tmp_path, BASE.replace('judge = "lexical"', 'judge = "same-as-lm"')), {"root": "/d"})
    assert resolve_cells(spec)[0].settings["judge_lm"] == "same-as-lm"


def test_an_oversized_spec_and_bad_input_names_are_one_line(tmp_path):
    path = tmp_path / "big.toml"
    with path.open("wb") as handle:
        handle.truncate(MAX_SPEC_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(InputError) as caught:
        load_spec(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    refused(write(tmp_path, BASE.replace("root = {", '"a.b" = { description = "x" }\nroot = {')), {"root": "/d"},
            "inputs.a.b", "not a valid input name")
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_assignments(["../x=1"])
