"""``consilience table`` as a front-end of the experiment layer (issue 24, item 7): its in-memory spec plans the
runs an equivalent spec file plans, its numbers are ``experiment table``'s, and a cell two stored runs claim is
refused in one line."""

from __future__ import annotations

import shutil

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.settings import EvaluationSettings
from groundstate.eval.consilience.table_spec import table_spec, tabulate
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.table import build_table
from groundstate.eval.run_settings import RunSettings

EQUIVALENT = """
[experiment]
name = "equivalent"
title = "the front-end's table as a spec file"

[inputs]
tasks = { description = "the travel tasks" }

[data.travel]
data = "{tasks}"

[defaults]
task = "consilience"
data = "travel"
settings = { agents = "sim", sim_preset = "limited" }

[[axes.method]]
label = "Hidden-Pre"
settings = { program = "hidden-pre" }

[[axes.method]]
label = "Hidden-Post"
settings = { program = "hidden-post" }

[[axes.method]]
label = "Full-Info"
settings = { program = "full-info" }

[[axes.method]]
label = "Rules"
settings = { program = "rules" }

[layout]
rows = ["method"]
metrics = ["task_accuracy", "vote_accuracy", "messages", "words"]

[sensitivity]
sim_attention = ["all", 5, 3, 2]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("consilience-table")
    tasks = root / "travel.jsonl"
    save_hidden_tasks(tasks, generate_hidden_travel(10, seed=0))
    spec_file = root / "equivalent.toml"
    spec_file.write_text(EQUIVALENT)
    return tasks, load_spec(spec_file, {"tasks": str(tasks)})


def _entries(table, metric: str) -> dict[tuple[str, str], dict]:
    return {(row.keys.get("sensitivity", "base"), row.labels["method"]): row.values[(0, metric)].entry
            for row in table.rows}


def test_the_front_end_plans_the_runs_of_the_equivalent_spec_and_gives_its_numbers(world, tmp_path):
    tasks, equivalent = world
    run = RunSettings(out=tmp_path / "runs")
    assert not run_experiment(equivalent, run).failed
    stored = sorted(p.name for p in run.out.iterdir())
    settings = EvaluationSettings(data=str(tasks), agents="sim", sim_preset="limited")
    spec = table_spec(settings, "groundstate", sensitivity=True)
    outcome = run_experiment(spec, run)
    assert not outcome.failed and sorted(p.name for p in run.out.iterdir()) == stored  # nothing new ran
    assert all(o.summary["n_done"] == 10 for o in outcome.outcomes)
    built = tabulate(spec, settings, run)
    reference = build_table(equivalent, run)
    for metric in ("task_accuracy", "vote_accuracy", "messages", "words"):
        ours, theirs = _entries(built.table, metric), _entries(reference, metric)
        assert ours == theirs and len(ours) == 20 and all(e and e["mean"] is not None for e in ours.values())
    assert set(built.table.runs.values()) == set(reference.runs.values())
    assert built.table.spec.experiment.title == ("travel.jsonl: task accuracy / vote accuracy (sim agents, "
                                                 "groundstate protocols, 10 tasks)")
    assert built.provenance["preset"] == "limited" and built.table.subtitle == built.provenance["agents"]
    variants = [r["variant"] for r in built.sensitivity]
    assert variants == ["sim_attention=all", "sim_attention=5", "sim_attention=3", "sim_attention=2"]
    three = {m: e["mean"] for m, e in built.sensitivity[2]["scores"].items()}
    assert three == {m: e["mean"] for (s, m), e in _entries(reference, "task_accuracy").items()
                     if s == "sim_attention=3"}
    assert built.uncertified == ["Rules"]


def test_a_cell_two_stored_runs_claim_is_refused_in_one_line(world, tmp_path):
    tasks, _ = world
    run = RunSettings(out=tmp_path / "runs")
    settings = EvaluationSettings(data=str(tasks), agents="sim", baselines=[], controllers=["rules"])
    spec = table_spec(settings, "groundstate")
    run_experiment(spec, run)
    (run_id,) = tabulate(spec, settings, run).table.runs.values()
    shutil.copytree(run.out / run_id, run.out / f"{run_id}-merged")
    with pytest.raises(ConfigError) as caught:
        tabulate(spec, settings, run)
    message = str(caught.value)
    assert "\n" not in message and "two stored runs claim it" in message and f"{run_id}-merged" in message


def test_hiddenbench_pre_is_the_initial_votes_of_the_hidden_post_run(tmp_path):
    from tests.helpers import DATA

    data = tmp_path / "hb.json"
    shutil.copy(DATA / "hiddenbench" / "hiddenbench_format.json", data)
    run = RunSettings(out=tmp_path / "runs")
    settings = EvaluationSettings(data=str(data), agents="sim", controllers=[],
                                  baselines=["hiddenbench", "hiddenbench-full"])
    spec = table_spec(settings, "hiddenbench")
    run_experiment(spec, run)
    built = tabulate(spec, settings, run, preset="hiddenbench")
    runs = built.table.runs
    assert runs["method:hidden-pre"] == runs["method:hiddenbench"] != runs["method:hiddenbench-full"]
    from groundstate.eval.experiments.readers import read_cell
    from groundstate.eval.runs import load_run

    numbers = read_cell("consilience", [load_run(run.out / runs["method:hiddenbench"])])
    pre = next(r for r in built.table.rows if r.keys["method"] == "hidden-pre")
    assert pre.values[(0, "task_accuracy")].entry == numbers["initial_task_accuracy"]
    assert pre.values[(0, "messages")].status == "not reported"  # no discussion before the initial votes
    assert built.provenance["fixed_by_construction"] and built.table.spec.experiment.title.endswith(
        "results fixed by construction")
