"""The shipped specs (issue 24, item 4): each one plans without any LM call (the ones that need the user's data with
small stand-ins of it), the offline ones run end to end and tabulate with a scripted LM or simulated agents, and
the package ships them (setuptools' package data names the folder)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from groundstate import experiments
from groundstate.eval.experiments.cells import resolve_cells
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.plan import plan_experiment
from groundstate.eval.experiments.table import build_table
from groundstate.eval.run_settings import RunSettings
from tests.eval.experiments.scripted import ScriptedLMs

DATA = Path(__file__).resolve().parents[2] / "data"
ROOT = Path(__file__).resolve().parents[3]

#: Inputs that name things only a real experiment has (a trained MLP, fitted calibrators): cells that use them are
#: validated but not planned here.
ARTIFACTS = ("mlp", "calibrators")


@pytest.fixture(scope="module")
def user_data(tmp_path_factory, dhd_world):
    """Stand-ins for what the user supplies: a small OffQuery clone in the published layout, HiddenBench tasks (the
    held-out and the calibration ones) and exploration rows."""
    root = tmp_path_factory.mktemp("user")
    clone = root / "OffQuery"
    (clone / "datasets").mkdir(parents=True)
    (clone / "task2_evaluation" / "truth").mkdir(parents=True)
    for name, source in (("mediQ_easy", "mediQ_easy"), ("mediQ_hard", "mediQ_easy"), ("CrisisFact", "CrisisFact")):
        shutil.copy(DATA / "offquery" / f"{source}.json", clone / "datasets" / f"{name}.json")
        shutil.copy(DATA / "offquery" / f"{source}_t2.json", clone / "task2_evaluation" / "truth" / f"{name}.json")
    explore = root / "explore.jsonl"  # exploration rows (consilience explore's format): the Table 6 rows train on
    explore.write_text("".join(json.dumps({"features": [0.1 * (i % 7), 0.2, 0.3, 0.1, 0.5, 0.0, 0.4, 0.1 * i],
                                           "rewards": [0.1 * i, -0.2, 0.05 * i, 0.3]}) + "\n" for i in range(12)))
    return {"offquery": str(clone), "hiddenbench": str(DATA / "hiddenbench" / "sample.json"),
            "calibration": str(DATA / "hiddenbench" / "sample.json"), "explore": str(explore),
            "mlp": str(root / "mlp"), "calibrators": str(root / "calibrators"), **dhd_world.inputs}


def raw(name: str) -> dict:
    return tomllib.loads(Path(experiments.path(name)).read_text())


OFFLINE = [name for name in experiments.names() if raw(name)["experiment"].get("offline")]
ONLINE = [name for name in experiments.names() if name not in OFFLINE]


def inputs_of(name: str, user: dict[str, str]) -> dict[str, str]:
    return {k: user[k] for k, v in raw(name).get("inputs", {}).items() if "default" not in v}


@pytest.mark.parametrize("name", ONLINE)
def test_a_spec_on_the_users_data_plans_without_any_lm_call(name, user_data, tmp_path):
    spec = load_spec(name, inputs_of(name, user_data))
    cells = [c for c in resolve_cells(spec)
             if not any(user_data[a] in str(v) for a in ARTIFACTS for v in c.settings.values())]
    if not cells:
        pytest.skip(f"every cell of {name} needs a trained artifact ({', '.join(ARTIFACTS)})")
    runs = tmp_path / "runs"
    plan = plan_experiment(spec, RunSettings(out=runs, limit=1), cells=[c.label for c in cells])
    assert {r.label for r in plan.rows} == {c.label for c in cells}
    for row in plan.rows:
        assert row.stored.state == "not run"
        # a masking run draws its sample (its records) when it starts; every other cell has its one record
        assert row.count.records == (0 if row.cell.task.name == "dhd-mask" else 1)
        if row.cell.task.name.startswith("dhd-"):  # a DHD step's calls are not counted (its plan says so)
            assert row.count.method.startswith("not counted") and row.count.calls == 0
        else:
            assert row.count.method == "dry run" and row.count.calls > 0, row.label  # LM agents, LM programs
    assert not runs.exists()


@pytest.mark.parametrize("name", OFFLINE)
def test_an_offline_spec_runs_end_to_end_and_tabulates(name, tmp_path):
    small = {k: 2 for k in raw(name).get("inputs", {}) if k == "n"}
    spec = load_spec(name, small)
    run = RunSettings(out=tmp_path / "runs")
    outcome = run_experiment(spec, run, lms=ScriptedLMs())
    assert not outcome.failed
    table = build_table(spec, run, lms=ScriptedLMs())
    shown = [v for row in table.rows for v in row.values.values()]
    # every number measured (a relative number of a scripted run may have a base of 0: it says so)
    assert shown and all(v.status in ("measured", "base") or "its base cell is 0" in (v.note or "")
                         for v in shown), name
    placed = [v for v in shown if v.reference is not None]
    assert len(placed) + len(table.paper_only) == len(spec.references())


def test_the_team_of_a_heterogeneous_spec_is_one_lm_per_agent_role():
    spec = load_spec("consilience-heterogeneous", {"hiddenbench": "/x/tasks.json"})
    teams = {c.keys["team"]: c.roles for c in resolve_cells(spec)}
    assert teams["homogeneous"] == {}
    assert teams["strong"]["agent.1"] == {"model": "hosted_vllm/meta-llama/Llama-3.3-70B-Instruct",
                                          "temperature": 0.0}


def test_the_package_data_ships_every_spec():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "*.toml" in config["tool"]["setuptools"]["package-data"]["groundstate.experiments"]
    shipped = sorted(p.stem for p in (ROOT / "groundstate" / "experiments").glob("*.toml"))
    assert shipped == experiments.names() and len(shipped) >= 10
