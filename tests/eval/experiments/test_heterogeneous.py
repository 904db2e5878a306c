"""The heterogeneous-agent study (§5.5.4, issue 25 item 9) as specs of the experiment layer: simulated agents take
per-agent presets (the offline spec runs end to end), LM agents per-role LMs (the LM spec runs, each agent's calls
reaching its own role's LM)."""

import json
from pathlib import Path

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.experiments.cells import resolve_cells
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.table import build_table
from groundstate.eval.run_settings import RunSettings
from groundstate.lm.config import LMConfig
from groundstate.lm.embedded import EMBEDDED_MODEL_NAME
from groundstate.optimizers.consilience import Configuration, calibrate, check_config
from groundstate.programs.consilience.control import RuleController
from groundstate.programs.consilience.simulated import SimTeam, sim_preset
from groundstate.testing import scripted_lm

DATA = Path(__file__).resolve().parents[2] / "data"


def test_the_offline_spec_runs_per_agent_presets_end_to_end(tmp_path):
    spec = load_spec("consilience-heterogeneous-sim", {"n": 4})
    run = RunSettings(out=tmp_path / "runs", progress=False)
    outcome = run_experiment(spec, run)
    assert not outcome.failed and len(outcome.outcomes) == 12
    teams = {}
    for run_dir in (tmp_path / "runs").iterdir():
        if not (run_dir / "config.json").is_file():
            continue
        agents = json.loads((run_dir / "config.json").read_text())["options"]["agents"]
        key = tuple(p["attention"] for p in agents.get("per_agent", [])) or agents["params"]["attention"]
        teams.setdefault(key, set()).add(run_dir.name)
    # the four teams: ideal, limited, and the two mixed ones agent by agent (each with its three methods)
    assert set(teams) == {None, 3, (None, 3, 3), (3, None, None)} and all(len(v) == 3 for v in teams.values())
    table = build_table(spec, run)
    shown = {(row.labels["team"], key): v for row in table.rows for key, v in row.values.items()}
    assert shown and all(v.status == "measured" for v in shown.values())
    # the team is in every cell's caption: a heterogeneous team names each agent's preset
    assert any("agent 0 'limited', agent 1 'ideal', agent 2 'ideal'" in line for line in table.header)


def test_per_agent_presets_reach_the_agents_and_the_calibration():
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel

    tasks = generate_hidden_travel(6, seed=1, travelers=4)
    mixed = SimTeam(sim_preset("ideal"), seed=0, per_agent=[sim_preset("limited"), sim_preset("ideal")])
    agents = mixed(tasks[0])
    assert [a.params.attention for a in agents] == [3, None, None, None]  # agents past the list: the team's params
    calibrator = calibrate(tasks, mixed, RuleController(), Configuration("rules", max_rounds=3))
    assert [p["attention"] for p in calibrator.config["agents"]["per_agent"]] == [3, None]
    check_config(calibrator, Configuration("rules", max_rounds=3), team=mixed)
    swapped = SimTeam(sim_preset("ideal"), seed=0, per_agent=[sim_preset("ideal"), sim_preset("limited")])
    with pytest.raises(ConfigError, match="agents.per_agent.0.attention: calibrated 3, now None"):
        check_config(calibrator, Configuration("rules", max_rounds=3), team=swapped)


class RoleLMs:
    """A cell's LMs: one scripted LM per model the spec names (agent roles included), so each model's calls are
    counted apart; every LM answers as the embedded one (JSON adapter, the schema filled)."""

    def __init__(self):
        self.by_model: dict[str, object] = {}

    def lm(self, model: str):
        if model not in self.by_model:
            self.by_model[model] = scripted_lm(model=EMBEDDED_MODEL_NAME)
        return self.by_model[model]

    def __call__(self, cell):
        lms = self

        class Config(LMConfig):
            def lm_for(self, role=None):
                return lms.lm(self.spec_for(role)["model"])

        config = Config(default={"model": cell.lm["model"]}, roles={k: dict(v) for k, v in cell.roles.items()})
        return config.lm_for(None), config


def test_the_lm_spec_runs_each_agent_on_its_roles_lm(tmp_path):
    spec = load_spec("consilience-heterogeneous", {"hiddenbench": str(DATA / "hiddenbench" / "sample.json")})
    cells = [c for c in resolve_cells(spec) if c.keys["team"] == "strong" and c.keys["method"] == "Hidden-Post"]
    assert len(cells) == 1 and set(cells[0].roles) == {"agent.0", "agent.1", "agent.2"}
    lms = RoleLMs()
    run = RunSettings(out=tmp_path / "runs", progress=False, limit=1)
    outcome = run_experiment(spec, run, lms=lms, cells=["team:strong,method:Hidden-Post"])
    assert not outcome.failed
    calls = {model: lm.engine.calls for model, lm in lms.by_model.items()}
    roles = cells[0].roles
    # HiddenBench's protocol, 15 rounds: every agent's initial vote, 15 turns and final vote on its own model
    for role in ("agent.0", "agent.1", "agent.2"):
        assert calls[roles[role]["model"]] == 1 + 15 + 1, (role, calls)
    assert calls.get(spec.defaults.lm, 0) == 0  # the first task has three agents: the default LM is never asked
