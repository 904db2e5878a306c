"""A calibrator is accepted only for the agents it was fitted on (issue 25, item 7): the calibrated configuration
holds the simulated agents' parameters (the preset and its limits, by value) or every agent role's LM, and a
calibrator of another team, or of the earlier format that recorded only "sim" or "lm", is refused in one line."""

import json
import re

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.lm.config import LMConfig
from groundstate.optimizers.artifacts import load_params, save_params
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.consilience import Configuration, calibrate, check_config
from groundstate.programs.consilience.agents import LMTeam
from groundstate.programs.consilience.control import RuleController
from groundstate.programs.consilience.identity import agents_identity
from groundstate.programs.consilience.simulated import SimTeam, sim_preset
from tests.test_hostile_files import assert_one_clean_line, run_cli

SIM = ["--agents", "sim", "--max-rounds", "3"]


@pytest.fixture()
def travel(tmp_path):
    save_hidden_tasks(tmp_path / "travel.jsonl", generate_hidden_travel(6, seed=2))
    return "travel.jsonl"


def test_a_calibrator_fitted_on_ideal_agents_is_refused_for_limited_ones(tmp_path, travel):
    code, out, err = run_cli(["consilience", "calibrate", "--data", travel, "--out", "cal", *SIM,
                              "--sim-preset", "ideal"], tmp_path)
    assert code == 0, err[-2000:]
    manifest = json.loads((tmp_path / "cal" / "manifest.json").read_text())
    recorded = manifest["configuration"]["agents"]
    assert recorded["kind"] == "sim" and recorded["params"]["attention"] is None
    assert recorded["params"]["salience"] == 0.0 and "seed" not in recorded  # the preset by value, not the seed
    for command in (["routing"], ["coverage"]):
        argv = ["consilience", *command, "--data", travel, "--calibrator", "cal", *SIM, "--sim-preset", "limited"]
        code, out, err = run_cli(argv, tmp_path)
        assert_one_clean_line(argv, code, out, err)
        assert "fitted for another configuration" in err and "agents.params.attention: calibrated None, now 3" in err
        assert "calibrate again" in err
    # one limit changed alone is another team too
    argv = ["consilience", "routing", "--data", travel, "--calibrator", "cal", *SIM, "--sim-weight-noise", "0.1"]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "agents.params.weight_noise: calibrated 0.0, now 0.1" in err
    # the same agents (another seed: fresh discussions of the same agents) are accepted
    argv = ["consilience", "routing", "--data", travel, "--calibrator", "cal", *SIM, "--seed", "5"]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 0, err[-2000:]
    # the durable evaluation refuses it the same way before anything runs
    argv = ["consilience", "evaluate", "--data", travel, "--controllers", "rules", "--calibrator", "rules=cal",
            "--baselines", *SIM, "--sim-preset", "limited", "--runs-dir", "runs"]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "agents.params.attention" in err and not (tmp_path / "runs").exists()


def test_a_calibrator_of_the_earlier_format_is_refused_with_a_hint(tmp_path, travel):
    config = Configuration("rules").to_dict()
    for old in ("sim", "lm"):
        cal = RoundwiseConformal(0.1, config={**config, "agents": old}).fit([0, 0, 1], [0.1, 0.2, 0.3])
        save_params(cal, tmp_path / f"old-{old}", purpose="consilience calibration", configuration=cal.config)
        argv = ["consilience", "routing", "--data", travel, "--calibrator", f"old-{old}", *SIM]
        code, out, err = run_cli(argv, tmp_path)
        assert_one_clean_line(argv, code, out, err)
        assert f"records its agents only as '{old}'" in err and "calibrate again" in err


LETTERS = re.compile(r"^([A-Z]): ", re.M)


def scripted_reply(request: dict) -> str:
    """A ChatAdapter answer to whichever agent prompt this is (belief, message or final vote)."""
    system = request["messages"][0]["content"]
    user = request["messages"][-1]["content"]
    letters = LETTERS.findall(user.split("[[ ## options ## ]]", 1)[-1]) or ["A", "B"]
    if "`probabilities`" in system:
        probs = {x: round(1 / len(letters), 4) for x in letters}
        return (f"[[ ## probabilities ## ]]\n{json.dumps(probs)}\n\n[[ ## vote ## ]]\n{letters[0]}\n\n"
                "[[ ## confidence ## ]]\n0.5\n\n[[ ## completed ## ]]")
    if "`message`" in system:
        return "[[ ## message ## ]]\nI hold a fact about the first option.\n\n[[ ## completed ## ]]"
    return f"[[ ## vote ## ]]\n{letters[0]}\n\n[[ ## confidence ## ]]\n0.5\n\n[[ ## completed ## ]]"


def test_lm_agents_with_another_model_are_refused(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers(responder=scripted_reply)
    tasks = generate_hidden_travel(2, seed=4, travelers=3)
    save_hidden_tasks(tmp_path / "tasks.jsonl", tasks)
    lm = ["--agents", "lm", "--api-base", server.url, "--max-rounds", "1"]
    code, out, err = run_cli(["consilience", "calibrate", "--data", "tasks.jsonl", "--out", "cal", *lm,
                              "--lm", "openai/model-a"], tmp_path)
    assert code == 0, err[-2000:]
    assert server.requests and {json.loads(r["body"])["model"] for r in server.requests} == {"model-a"}
    recorded = json.loads((tmp_path / "cal" / "manifest.json").read_text())["configuration"]["agents"]
    assert recorded == {"kind": "lm", "default": {"model": "openai/model-a", "temperature": 0.0}, "roles": {}}
    calls = len(server.requests)
    for other in (["--lm", "openai/model-b"], ["--lm", "openai/model-a", "--temperature", "0.7"]):
        argv = ["consilience", "routing", "--data", "tasks.jsonl", "--calibrator", "cal", *lm, *other]
        code, out, err = run_cli(argv, tmp_path)
        assert_one_clean_line(argv, code, out, err)
        assert "agents.default." in err and "calibrate again" in err
    # one agent's role on another model is another team as well
    (tmp_path / "team.toml").write_text('[default]\nmodel = "openai/model-a"\n[roles."agent.1"]\nmodel = '
                                        f'"openai/model-b"\napi_base = "{server.url}"\n')
    argv = ["consilience", "routing", "--data", "tasks.jsonl", "--calibrator", "cal", *lm, "--lm-config", "team.toml",
            "--lm", "openai/model-a"]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "agents.roles.agent.1.model: calibrated 'absent', now 'openai/model-b'" in err
    assert len(server.requests) == calls  # refused before any LM call
    # where the model is served is not part of it: the same model at another address is the same team
    cal = load_params(tmp_path / "cal")
    moved = LMTeam(lm_config=LMConfig.from_options(lm="openai/model-a", api_base="http://127.0.0.1:9/v1"))
    check_config(cal, Configuration.of("rules", RuleController(), max_rounds=1), team=moved)


def test_the_identity_of_a_team():
    ideal, limited = SimTeam(sim_preset("ideal"), seed=0), SimTeam(sim_preset("limited"), seed=9)
    assert agents_identity(ideal)["params"]["attention"] is None and agents_identity(limited)["params"]["attention"]
    assert agents_identity(SimTeam(sim_preset("limited"), seed=1)) == agents_identity(limited)  # the seed is not
    config = LMConfig()
    config.default = {"model": "openai/a", "api_base": "http://h/v1", "timeout": 30, "api_key": "sk-x"}
    config.roles = {"agent.2": {"model": "openai/b", "temperature": 0.3}, "verify.*": {"model": "openai/c"}}
    described = agents_identity(LMTeam(lm_config=config))
    assert described == {"kind": "lm", "default": {"model": "openai/a", "temperature": 0.0},
                         "roles": {"agent.2": {"model": "openai/b", "temperature": 0.3}}}  # no server, key, non-agent
    assert agents_identity(LMTeam(lambda i: None)) is None
    embedded = LMConfig()
    embedded.roles = {"agent.1": {"model": "embedded", "quant": "shipped"}}
    # the embedded model's revision is part of what its agents are: revision 2 answers differently from earlier ones
    assert agents_identity(LMTeam(lm_config=embedded))["roles"]["agent.1"] == {"model": "embedded", "revision": 2}
    with pytest.raises(ConfigError, match="cannot tell which agents"):
        calibrate(generate_hidden_travel(2, seed=1), LMTeam(lambda i: None), RuleController(), Configuration("rules"))


def test_a_heterogeneous_simulated_team_is_its_own_team(tmp_path, travel):
    code, out, err = run_cli(["consilience", "calibrate", "--data", travel, "--out", "cal", *SIM,
                              "--sim-agent-presets", "limited", "ideal"], tmp_path)
    assert code == 0, err[-2000:]
    recorded = json.loads((tmp_path / "cal" / "manifest.json").read_text())["configuration"]["agents"]
    assert [p["attention"] for p in recorded["per_agent"]] == [3, None]
    argv = ["consilience", "routing", "--data", travel, "--calibrator", "cal", *SIM]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "agents.per_agent" in err
    code, out, err = run_cli([*argv, "--sim-agent-presets", "limited", "ideal"], tmp_path)
    assert code == 0, err[-2000:]
    assert "agent 0 'limited', agent 1 'ideal'" in " ".join(out.split())  # the table names the team
