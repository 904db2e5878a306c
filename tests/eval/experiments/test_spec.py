"""Experiment specs (issue 24, item 1): shipped specs validate and plan offline; a bad spec is one line naming the
file and the field; inputs, models and cells resolve as the spec says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from groundstate import experiments
from groundstate.errors import ConfigError, InputError
from groundstate.eval.experiments.cells import resolve_cells, with_lm_options, with_models
from groundstate.eval.experiments.load import load_spec, parse_assignments
from groundstate.eval.experiments.plan import plan_experiment
from groundstate.eval.run_settings import RunSettings

MINIMAL = """
[experiment]
name = "mini"
title = "a small table"

[defaults]
task = "consilience"
data = "travel"
settings = { agents = "sim", program = "hidden-post" }

[data.travel]
generate = { kind = "travel", n = 2 }

[layout]
metrics = ["task_accuracy"]
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def placeholder_inputs(name: str) -> dict[str, str]:
    """A value for every required input of a shipped spec (validation only: nothing is read)."""
    import tomllib

    raw = tomllib.loads(Path(experiments.path(name)).read_text())
    return {k: "/nonexistent" for k, v in raw.get("inputs", {}).items() if "default" not in v}


def test_at_least_the_three_exemplars_are_shipped_and_listed():
    assert {"reground-table1-synthetic", "consilience-table2-sim"} <= set(experiments.names())
    assert Path(experiments.path("consilience-table2-sim")).is_file()
    with pytest.raises(FileNotFoundError, match="reground-table1-synthetic"):
        experiments.path("no-such-spec")


@pytest.mark.parametrize("name", experiments.names())
def test_every_shipped_spec_validates_and_offline_ones_plan_offline(name, tmp_path):
    spec = load_spec(name, placeholder_inputs(name))
    assert spec.experiment.name == name  # the file name is the spec's name
    cells = resolve_cells(spec)
    assert cells and len({c.label for c in cells}) == len(cells)
    if not spec.experiment.offline:
        pytest.skip(f"{name} needs data the user supplies: test_shipped plans it with stand-ins of that data")
    runs = tmp_path / "runs"
    plan = plan_experiment(spec, RunSettings(out=runs, limit=2))
    assert len(plan.rows) == len(cells)
    for row in plan.rows:
        assert row.cell.run_id.startswith(row.cell.planned.name) and row.stored.state == "not run"
        assert row.count.records == 2 and row.count.calls >= 0
        assert row.count.method in ("dry run", "no LM call (simulated agents)")
    assert not runs.exists()  # planning writes nothing


def test_an_unknown_spec_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="consilience-table2-sim"):
        load_spec("no-such-spec")


def test_inputs_are_substituted_typed_and_required(tmp_path):
    text = MINIMAL.replace("n = 2", 'n = "{n}"') + '\n[inputs]\nn = { description = "tasks" }\n'
    path = write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_spec(path)
    assert str(path) in str(caught.value) and "inputs.n" in str(caught.value) and "--set n=" in str(caught.value)
    spec = load_spec(path, parse_assignments(["n=3"]))
    assert spec.data["travel"].generate.n == 3  # "{n}" alone became the number, not the text "3"
    with pytest.raises(ConfigError, match="no input 'm'"):
        load_spec(path, {"m": 1})
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_assignments(["n"])
    assert parse_assignments(["p=/data/x", "flag=true"]) == {"p": "/data/x", "flag": True}


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace('title = "a small table"', 'title = "a small table"\ncolour = "red"'), "experiment.colour"),
    (lambda t: t.replace('metrics = ["task_accuracy"]', 'metrics = []'), "layout.metrics"),
    (lambda t: t + '\n[axes]\nmethod = ["a", "b"]\n', "layout"),
    (lambda t: t.replace('[layout]', '[axes]\nmethod = ["a", "b"]\n\n[layout]\nrows = ["methd"]'), "layout.rows"),
    (lambda t: t.replace('data = "travel"\n', 'data = "nowhere"\n'), "defaults.data"),
    (lambda t: t + '\n[[reference]]\ncell = { model = "x" }\nmetric = "task_accuracy"\nvalue = 0.5\nsource = "T"\n'
                   'quote = "q"\n', "reference[0].cell"),
    (lambda t: t + '\n[[reference]]\nmetric = "rounds"\nvalue = 0.5\nsource = "T"\nquote = "q"\n',
     "reference[0].metric"),
    (lambda t: t.replace('name = "mini"', 'name = "../up"'), "experiment.name"),
    (lambda t: t.replace('metrics = ["task_accuracy"]', 'metrics = ["task_accuracy"]\nrelative = [{ name = "g", '
                         'metric = "task_accuracy", axis = "data", base = "travel" }]'), "layout.relative[0].name"),
    (lambda t: t.replace('[layout]', '[axes]\nmethod = ["a", "b"]\n\n[layout]\nrows = ["method"]').replace(
        'metrics = ["task_accuracy"]', 'metrics = ["task_accuracy", "g"]\nrelative = [{ name = "g", '
        'metric = "task_accuracy", axis = "method", base = "c" }]'), "layout.relative[0].base"),
    (lambda t: t + '\n[[reference]]\nmetric = "task_accuracy"\nvalues = { task_accuracy = 0.5 }\nsource = "T"\n'
                   'quote = "q"\n', "reference[0]"),
    (lambda t: t + '\n[[override]]\ncell = { data = "elsewhere" }\nsettings = { rounds = 2 }\n', "override[0].cell"),
    (lambda t: t.replace('metrics = ["task_accuracy"]', 'metrics = ["task_accuracy"]\npercent = ["rounds"]'),
     "layout.percent"),
])
def test_a_bad_spec_is_one_line_naming_the_file_and_the_field(tmp_path, edit, field):
    path = write(tmp_path, edit(MINIMAL))
    with pytest.raises(InputError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and f"field '{field}" in message, message


def test_a_cell_whose_settings_do_not_fit_its_task_names_the_cell_and_the_field(tmp_path):
    path = write(tmp_path, MINIMAL.replace('program = "hidden-post" }', 'program = "hidden-post", rounds = 0 }'))
    spec = load_spec(path)
    with pytest.raises(InputError) as caught:
        plan_experiment(spec, RunSettings(out=tmp_path / "runs"))
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "settings.rounds" in message and "cell" in message


def test_a_judge_for_a_task_without_one_is_refused(tmp_path):
    path = write(tmp_path, MINIMAL.replace('data = "travel"\n', 'data = "travel"\njudge = "lexical"\n', 1))
    with pytest.raises(InputError, match="takes no judge"):
        resolve_cells(load_spec(path))


def test_a_fifo_spec_is_one_line_and_never_blocks(tmp_path):
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as caught:
        load_spec(fifo)
    assert str(fifo) in str(caught.value)


def test_cells_are_the_product_of_the_axes_times_the_seeds_in_order(tmp_path):
    text = MINIMAL.replace("[layout]", '[axes]\nmax_rounds = [2, 4]\n[[axes.method]]\nlabel = "Post"\n'
                                       'settings = { program = "hidden-post" }\n[[axes.method]]\nlabel = "Rules"\n'
                                       'settings = { program = "rules" }\n\n[layout]\nrows = ["method"]\n'
                                       'columns = ["max_rounds"]')
    text = text.replace('settings = { agents = "sim", program = "hidden-post" }',
                        'settings = { agents = "sim", program = "hidden-post" }\nseeds = [0, 1]')
    text += '\n[[override]]\ncell = { method = "Rules", max_rounds = 4 }\nsettings = { sim_attention = 2 }\n'
    cells = resolve_cells(load_spec(write(tmp_path, text)))
    assert [c.settings.get("sim_attention") for c in cells] == [None] * 6 + [2, 2]  # only the cells it names
    assert [c.label for c in cells][:3] == ["max_rounds:2,method:Post,seed:0", "max_rounds:2,method:Post,seed:1",
                                            "max_rounds:2,method:Rules,seed:0"]
    assert len(cells) == 8
    rules = next(c for c in cells if c.keys["method"] == "Rules" and c.keys["max_rounds"] == "4" and c.seed == 1)
    assert rules.settings["program"] == "rules" and rules.settings["max_rounds"] == 4 and rules.settings["seed"] == 1
    assert cells[0].source is cells[-1].source  # generated once, shared by every cell


def test_models_and_lm_options_replace_the_specs(tmp_path):
    spec = load_spec("reground-table1-synthetic", {"n": 1})
    cells = resolve_cells(with_lm_options(with_models(spec, ["openai/gpt-4o", "embedded"]), "http://127.0.0.1:9/v1",
                                          30))
    hosted = [c for c in cells if c.keys["model"] == "openai/gpt-4o"]
    local = [c for c in cells if c.keys["model"] == "embedded"]
    assert len(hosted) == len(local) == 4
    assert hosted[0].lm == {"model": "openai/gpt-4o", "api_base": "http://127.0.0.1:9/v1", "timeout": 30}
    assert local[0].lm == {"model": "embedded"}  # the embedded LM takes neither
    assert all(c.settings["judge_lm"] == "lexical" for c in cells)
    no_axis = load_spec(write(tmp_path, MINIMAL))
    assert resolve_cells(with_models(no_axis, ["openai/gpt-4o"]))[0].lm["model"] == "openai/gpt-4o"
    with pytest.raises(ConfigError, match="one model"):
        with_models(no_axis, ["openai/gpt-4o", "openai/gpt-4o-mini"])
