"""Consilience Tables 6 and 8 as durable cells (issue 24, item 4): the tasks ``consilience-features`` and
``consilience-routing`` give the numbers of ``consilience ablate features`` and ``consilience routing`` on the same
seeded inputs (whatever the threads), a feature-ablation run keeps its fit and a resumed run uses it, and a stored
record that is not what the task writes is one line."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from groundstate.cli import main
from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience import ablations
from groundstate.eval.consilience.data import split_tasks
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.table import build_table
from groundstate.eval.io import write_jsonl
from groundstate.eval.run_settings import RunSettings
from groundstate.optimizers.consilience import explore_tasks
from groundstate.programs.consilience.control import ROUTERS
from groundstate.programs.consilience.simulated import SimTeam, sim_preset
from groundstate.programs.consilience.state import FEATURE_SETS

SIM = ["--agents", "sim", "--sim-preset", "limited"]

FEATURES_SPEC = """
[experiment]
name = "features-equality"
title = "Table 6 on files"
[inputs]
tasks = { description = "held-out tasks" }
calibration = { description = "calibration tasks" }
explore = { description = "exploration rows" }
[data.test]
data = "{tasks}"
[defaults]
task = "consilience-features"
data = "test"
settings = { agents = "sim", sim_preset = "limited", calibration_data = "{calibration}", explore = "{explore}", \
max_rounds = 4 }
run = { threads = 4 }
[axes]
features = ["all", "information", "belief+information", "belief+cost", "belief"]
[layout]
rows = ["features"]
metrics = ["task_accuracy", "vote_accuracy", "final_C", "final_J"]
"""

ROUTING_SPEC = """
[experiment]
name = "routing-equality"
title = "Table 8 on a file"
[inputs]
tasks = { description = "tasks" }
[data.test]
data = "{tasks}"
[defaults]
task = "consilience-routing"
data = "test"
settings = { agents = "sim", sim_preset = "limited", max_rounds = 5 }
run = { threads = 3 }
[axes]
policy = [
    { label = "action-conditional", scope = "action-conditional" }, { label = "random", scope = "random" },
    { label = "round-robin", scope = "round-robin" }, { label = "most-disagreeing", scope = "most-disagreeing" },
    { label = "most-spoken", scope = "most-spoken" },
]
[layout]
rows = ["policy"]
metrics = ["mean_dJ", "normalized_regret", "steps", "flat_steps", "differs_from_round_robin"]
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Seeded generated tasks split into files, and exploration rows of the training tasks, as a user makes them
    with ``consilience split`` and ``consilience explore``."""
    root = tmp_path_factory.mktemp("files")
    parts = split_tasks(generate_hidden_travel(30, seed=7), seed=0)
    for name, tasks in parts.items():
        save_hidden_tasks(root / f"{name}.jsonl", tasks)
    rows = explore_tasks(parts["train"], SimTeam(sim_preset("limited"), 0), max_rounds=4)
    write_jsonl(root / "explore.jsonl", rows)
    return {"tasks": str(root / "test.jsonl"), "calibration": str(root / "calibration.jsonl"),
            "explore": str(root / "explore.jsonl")}


def spec_file(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def cells(table, axis: str) -> dict[str, dict[str, dict]]:
    """``{axis key: {metric: entry}}`` of a one-column table."""
    return {row.keys[axis]: {metric: value.entry for (_, metric), value in row.values.items()} for row in table.rows}


def test_a_feature_row_per_cell_equals_ablate_features_on_the_same_files(files, tmp_path, capsys):
    out = tmp_path / "ablate.json"
    assert main(["consilience", "ablate", "features", "--data", files["tasks"], "--calibration-data",
                 files["calibration"], "--explore", files["explore"], "--max-rounds", "4", *SIM,
                 "--json-out", str(out)]) == 0
    expected = json.loads(out.read_text())
    spec = load_spec(spec_file(tmp_path, FEATURES_SPEC, "features"), files)
    run = spec.run_settings({"out": tmp_path / "runs", "progress": False})
    assert run.threads == 4 and not run_experiment(spec, run).failed
    got = cells(build_table(spec, run), "features")
    assert list(got) == list(FEATURE_SETS) == list(expected)
    for name, row in expected.items():
        for metric in ("task_accuracy", "vote_accuracy"):
            assert {k: got[name][metric][k] for k in ("mean", "low", "high", "n")} == \
                {k: row[metric][k] for k in ("mean", "low", "high", "n")}, (name, metric)
        assert got[name]["final_C"]["mean"] == row["final_C"] and got[name]["final_J"]["mean"] == row["final_J"]
    assert len({got[n]["final_J"]["mean"] for n in got}) > 1  # the rows differ: each trained on its own features

    # each run keeps its fit; a resumed run loads it (no training, no calibration) and its numbers do not move
    run_dirs = sorted((tmp_path / "runs").glob("consilience-features-*"))
    assert len(run_dirs) == 5 and all((d / "controller").is_dir() and (d / "calibrator").is_dir() for d in run_dirs)
    for d in run_dirs:
        lines = (d / "results.jsonl").read_text().splitlines()
        (d / "results.jsonl").write_text("\n".join(lines[:-2]) + "\n")  # two records to run again

    def no_fitting(*args, **kwargs):
        raise AssertionError("a resumed row fitted again")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ablations, "calibrate", no_fitting)
        patch.setattr(ablations, "train_controller", no_fitting)
        assert not run_experiment(spec, run).failed
    assert cells(build_table(spec, run), "features") == got

    # a fit saved for another row is refused with one line, before any record runs again
    everything = next(d for d in run_dirs if "-all-" in d.name)
    shutil.rmtree(everything / "controller")
    shutil.copytree(next(d for d in run_dirs if "-belief-" in d.name) / "controller", everything / "controller")
    lines = (everything / "results.jsonl").read_text().splitlines()
    (everything / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ConfigError, match="trained on") as caught:
        run_experiment(spec, run, cells=["features:all"])
    assert "\n" not in str(caught.value)
    assert len((everything / "results.jsonl").read_text().splitlines()) == len(lines) - 1


def test_the_routing_run_equals_consilience_routing_on_the_same_file(files, tmp_path, capsys):
    out = tmp_path / "routing.json"
    assert main(["consilience", "routing", "--data", files["tasks"], "--max-rounds", "5", *SIM,
                 "--json-out", str(out)]) == 0
    printed = capsys.readouterr().out
    expected = json.loads(out.read_text())["metrics"]
    method = expected["action-conditional"]
    assert 0 < method["differs_from_round_robin"] < 1
    assert (f"picked another speaker than round-robin at {round(method['differs_from_round_robin'] * method['steps'])}"
            f" of {method['steps']} steps") in printed
    spec = load_spec(spec_file(tmp_path, ROUTING_SPEC, "routing"), {"tasks": files["tasks"]})
    run = spec.run_settings({"out": tmp_path / "runs", "progress": False})
    outcome = run_experiment(spec, run)
    assert not outcome.failed and len({o.run_id for o in outcome.outcomes}) == 1  # every policy: a view of one run
    got = cells(build_table(spec, run), "policy")
    assert set(got) == set(ROUTERS) == set(expected)
    for router, metrics in expected.items():
        assert metrics["steps"] > 0
        for metric in ("mean_dJ", "normalized_regret", "steps", "flat_steps", "differs_from_round_robin"):
            assert got[router][metric]["mean"] == metrics[metric], (router, metric)
    from groundstate.eval.experiments.readers import read_cell
    from groundstate.eval.runs import load_run

    (run_dir,) = (tmp_path / "runs").glob("consilience-routing-*")
    numbers = read_cell("consilience-routing", [load_run(run_dir)])
    assert numbers["router_vs_round_robin_differ"]["mean"] == method["differs_from_round_robin"]


def test_the_offline_table6_spec_is_the_in_memory_ablation_of_its_split(tmp_path):
    spec = load_spec("consilience-table6-sim", {"tasks": 20})
    run = RunSettings(out=tmp_path / "runs", progress=False)
    assert not run_experiment(spec, run, cells=["sensitivity:base"]).failed
    got = {row.keys["features"]: {m: v.entry for (_, m), v in row.values.items()}
           for row in build_table(spec, run).rows if row.keys["sensitivity"] == "base"}
    parts = split_tasks(generate_hidden_travel(20, seed=0), (0.4, 0.3, 0.3), seed=0)
    team = SimTeam(sim_preset("limited"), 0)
    expected = ablations.feature_ablation(explore_tasks(parts["train"], team, max_rounds=10), team,
                                          parts["calibration"], parts["test"])
    for name, row in expected.items():
        assert got[name]["task_accuracy"]["mean"] == row["task_accuracy"]["mean"]
        assert (got[name]["final_C"]["mean"], got[name]["final_J"]["mean"]) == (row["final_C"], row["final_J"])


def test_a_fitted_row_pickles_without_its_lock_or_its_data(files, tmp_path):
    from groundstate.eval.assemble import assemble
    from groundstate.eval.consilience.study_tasks import FeatureRowProgram

    _, _, planned = assemble("consilience-features", {"data": files["tasks"], "calibration_data": files["calibration"],
                                                      "explore": files["explore"], "max_rounds": 3})
    program = planned.program
    assert isinstance(program, FeatureRowProgram) and program.program is None  # planning fits nothing
    task = planned.records[0]
    first = program(task=task, position=0)
    copy = pickle.loads(pickle.dumps(program))  # as Ray sends it: fitted, no lock, no way to fit again
    again = copy(task=task, position=0)
    assert (again.answer, again.final_state, again.position) == (first.answer, first.final_state, 0)


@pytest.mark.parametrize("tamper, field", [
    (lambda row: row["outputs"].pop("position"), "outputs.position"),
    (lambda row: row["outputs"]["steps"][0]["picks"].update({"random": 99}), "outputs.steps.0.picks"),
    (lambda row: row["outputs"]["steps"][0].update({"J": "low"}), "J"),
    (lambda row: row["outputs"].update({"steps": {"a": 1}}), "outputs.steps"),
])
def test_a_stored_routing_record_that_is_not_the_tasks_is_one_line(files, tmp_path, tamper, field):
    spec = load_spec(spec_file(tmp_path, ROUTING_SPEC, "routing"), {"tasks": files["tasks"]})
    run = spec.run_settings({"out": tmp_path / "runs", "progress": False})
    run_experiment(spec, run)
    (results,) = (tmp_path / "runs").glob("consilience-routing-*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    tamper(next(r for r in rows if r["outputs"]["steps"]))
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as caught:
        build_table(spec, run)
    message = str(caught.value)
    assert "\n" not in message and "results.jsonl" in message and field in message, message


def test_a_row_whose_fit_fails_fails_alone_and_fits_once(files, tmp_path, monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise ValueError("an episode broke")

    monkeypatch.setattr(ablations, "calibrate", broken)
    spec = load_spec(spec_file(tmp_path, FEATURES_SPEC, "features"), files)
    run = spec.run_settings({"out": tmp_path / "runs", "progress": False})
    outcome = run_experiment(spec, run)
    assert len(outcome.failed) == 5 and len(outcome.outcomes) == 5  # every cell tried, each reported failed
    assert len(calls) == 5  # one fit per row, not one per record
    rows = [json.loads(line) for line in next((tmp_path / "runs").glob("*/results.jsonl")).read_text().splitlines()]
    assert rows and all("fitting the row failed: ValueError: an episode broke" in r["error"] for r in rows)
    assert not list((tmp_path / "runs").glob("*/calibrator"))  # nothing saved: the next run fits again


def test_planning_the_offline_table6_fits_nothing_and_counts_no_lm_call(tmp_path, monkeypatch):
    from groundstate.eval.experiments.counting import NO_LM
    from groundstate.eval.experiments.plan import plan_experiment

    def no_fitting(*args, **kwargs):
        raise AssertionError("planning fitted a row")

    monkeypatch.setattr(ablations, "calibrate", no_fitting)
    monkeypatch.setattr(ablations, "train_controller", no_fitting)
    plan = plan_experiment(load_spec("consilience-table6-sim", {"tasks": 20}), RunSettings(out=tmp_path / "runs"))
    assert len(plan.rows) == 25 and {r.count.method for r in plan.rows} == {NO_LM}
    assert {r.count.records for r in plan.rows} == {6} and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("entry, make", [
    (".fit.lock", lambda path: __import__("os").mkfifo(path)),
    ("calibrator", lambda path: path.symlink_to(path.parent.parent / "elsewhere")),
    ("controller", lambda path: path.write_text("not a directory")),
])
def test_a_planted_entry_where_a_row_keeps_its_fit_is_one_line(files, tmp_path, entry, make):
    from groundstate.eval.experiments.cells import plan_cells, resolve_cells

    spec = load_spec(spec_file(tmp_path, FEATURES_SPEC, "features"), files)
    run = spec.run_settings({"out": tmp_path / "runs", "progress": False})
    (cell,) = plan_cells(spec, [c for c in resolve_cells(spec) if c.keys["features"] == "belief"], run)
    run_dir = tmp_path / "runs" / cell.run_id
    run_dir.mkdir(parents=True)
    (tmp_path / "runs" / "elsewhere").mkdir()
    make(run_dir / entry)
    with pytest.raises(InputError) as caught:
        run_experiment(spec, run, cells=["features:belief"])
    assert "\n" not in str(caught.value) and entry in str(caught.value)
    assert not (run_dir / "results.jsonl").exists() and not list((tmp_path / "runs" / "elsewhere").iterdir())
