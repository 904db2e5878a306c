"""One assembly path (issue 23, item 2): every durable command (``run``, ``evaluate``, the DHD steps, ``hidden run``,
``consilience evaluate``) plans its run through :func:`groundstate.eval.assemble.assemble` from typed settings, and
the run configurations are the ones earlier versions wrote."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import dspy
import pytest

import groundstate.eval.assemble as assembly
from groundstate.cli import main
from groundstate.eval.consilience.settings import EvaluationSettings, ProtocolSettings
from groundstate.eval.run_settings import RunSettings
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm

SCIBENCH = Path(__file__).resolve().parents[1] / "data" / "dhd" / "scibench_small.json"


@pytest.fixture
def planned(monkeypatch):
    """The task name and run config of every run planned through the assembly function."""
    seen: list[tuple[str, dict]] = []
    real = assembly.assemble

    def spy(task, *args, **kwargs):
        result = real(task, *args, **kwargs)
        seen.append((result[0].name, result[2].config))
        return result

    monkeypatch.setattr(assembly, "assemble", spy)
    return seen


def run_ids(*dirs: Path) -> set[str]:
    return {p.name for d in dirs if d.is_dir() for p in d.iterdir() if (p / "config.json").is_file()}


def test_hidden_and_consilience_runs_are_planned_by_the_assembly(tmp_path, planned, capsys):
    tasks, runs = tmp_path / "tasks.jsonl", tmp_path / "runs"
    assert main(["hidden", "generate", "travel", "--n", "4", "--seed", "3", "--out", str(tasks)]) == 0
    assert main(["hidden", "run", "--data", str(tasks), "--runs-dir", str(runs), "--no-progress"]) == 0
    assert main(["consilience", "evaluate", "--data", str(tasks), "--controllers", "rules", "--max-rounds", "2",
                 "--runs-dir", str(runs), "--report-dir", str(tmp_path / "report"), "--no-progress"]) == 0
    names = [name for name, _ in planned]
    assert names == ["hidden-protocol", *["consilience"] * 4]
    made = run_ids(runs)  # every run directory is one of the planned runs
    assert len(made) == 5 and {p.rsplit("-", 1)[0] for p in made} == {c["program"] for _, c in planned}
    err = capsys.readouterr().err
    assert err.count("agents: sim, the default") == 2  # once per command, not once per program


def test_the_hidden_run_config_is_what_earlier_versions_wrote(tmp_path, planned):
    tasks = tmp_path / "tasks.jsonl"
    main(["hidden", "generate", "travel", "--n", "4", "--seed", "3", "--out", str(tasks)])
    assert main(["hidden", "run", "--data", str(tasks), "--agents", "sim", "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    ((_, config),) = planned
    params = {"attention": None, "beta": 1.0, "facts_per_message": 1, "noise": 0.5, "recall": 0.8, "recency": 1.0,
              "salience": 0.0, "shared_bias": 2.0, "weight_noise": 0.0}
    assert config["program"] == "hidden-post-sim" and config["lm"] == {"model": None} and config["seed"] == 0
    assert config["options"] == {"protocol": "hidden-post", "rounds": 3,
                                 "agents": {"kind": "sim", "params": params, "seed": 0, "support": {"own": 4}}}
    assert set(config) == {"program", "program_state", "lm", "data", "seed", "options"}


def test_python_settings_run_the_same_hidden_and_consilience_runs_as_the_command(tmp_path):
    from groundstate.eval.assemble import run_task
    from groundstate.eval.consilience.evaluate import evaluate_programs

    tasks, runs = tmp_path / "tasks.jsonl", tmp_path / "runs"
    main(["hidden", "generate", "travel", "--n", "4", "--seed", "3", "--out", str(tasks)])
    assert main(["hidden", "run", "--data", str(tasks), "--protocol", "full-info", "--sim-preset", "limited",
                 "--runs-dir", str(runs), "--no-progress"]) == 0
    assert main(["consilience", "evaluate", "--data", str(tasks), "--controllers", "rules", "--baselines",
                 "hidden-pre", "--max-rounds", "2", "--runs-dir", str(runs), "--report-dir", str(tmp_path / "r"),
                 "--no-progress"]) == 0
    before = run_ids(runs)
    result = run_task("hidden-protocol", ProtocolSettings(data=str(tasks), protocol="full-info", sim_preset="limited"),
                      RunSettings(out=runs))
    evaluation = evaluate_programs(EvaluationSettings(data=str(tasks), baselines=["hidden-pre"], max_rounds=2),
                                   RunSettings(out=runs))
    assert result.run_id in before and run_ids(runs) == before  # the same three runs, resumed
    assert evaluation.labels == ["hidden-pre", "rules (uncertified)"]


def test_every_program_of_an_evaluation_is_built_before_any_runs(tmp_path, capsys):
    tasks, runs = tmp_path / "tasks.jsonl", tmp_path / "runs"
    main(["hidden", "generate", "travel", "--n", "4", "--out", str(tasks)])
    assert main(["consilience", "calibrate", "--data", str(tasks), "--agents", "sim", "--out", str(tmp_path / "cal"),
                 "--max-rounds", "3"]) == 0
    capsys.readouterr()
    code = main(["consilience", "evaluate", "--data", str(tasks), "--controllers", "rules", "--calibrator",
                 f"rules={tmp_path / 'cal'}", "--router", "round-robin", "--max-rounds", "3", "--runs-dir", str(runs)])
    assert code == 2 and "fitted for another configuration" in capsys.readouterr().err
    assert not run_ids(runs)  # the reference protocols did not run before the refusal


# -- DHD ----------------------------------------------------------------------------------------------------
@pytest.fixture
def solver(monkeypatch):
    from tests.cli.test_dhd import Solver

    dspy.cache.reset_memory_cache()
    model = scripted_lm(Solver(), cache=True)

    def configure(args):
        dspy.configure(lm=model, adapter=dspy.JSONAdapter())
        return model, LMConfig()

    monkeypatch.setattr("groundstate.cli.options.configure_lms", configure)
    yield model
    dspy.cache.reset_memory_cache()


def test_dhd_steps_are_planned_by_the_assembly_and_leave_no_warning_filter(tmp_path, planned, solver):
    from tests.cli.test_dhd import run

    cache = tmp_path / "cache"
    common = ["--cache", str(cache), "--no-progress"]
    filters = list(warnings.filters)
    assert run(["generate", "--data", str(SCIBENCH), "--k", "3", *common]) == 0
    assert run(["replay", "--mode", "loo", "--repeats", "5", "--k", "3", *common]) == 0
    assert main(["dhd", "analyze", "--cache", str(cache), "--permutations", "50", "--resamples", "50",
                 "--multiplicity-permutations", "50", "--no-tables"]) == 0
    assert run(["mask", "--sample", "2", "--repeats", "1", *common]) == 0
    assert [name for name, _ in planned] == ["dhd-generate", "dhd-replay", "dhd-mask"]
    assert {c["program"] for _, c in planned} == {p.rsplit("-", 1)[0] for p in run_ids(cache / "runs")}
    assert warnings.filters == filters  # the rollout warning is silenced only while a DHD run goes on
    assert run(["generate", "--data", str(SCIBENCH), "--k", "3", *common]) == 0  # nothing left: no new run
    assert len(run_ids(cache / "runs")) == 3


def test_a_dhd_judge_lm_never_changes_the_callers_lm_configuration():
    from groundstate.eval.dhd.settings import ReplaySettings
    from groundstate.eval.dhd.steps import dhd_program

    lm = scripted_lm()
    config = LMConfig(roles={"integrator.*": {"model": "openai/integrator"}})
    program, evaluator, _ = dhd_program(ReplaySettings(cache="c", mode="loo", judge_lm="openai/judge"), lm, config)
    assert config.roles == {"integrator.*": {"model": "openai/integrator"}}  # untouched
    assert evaluator.resolved_mode == "judge" and evaluator.judge.lm.model == "openai/judge"
    assert json.dumps(config.describe()).count("judge") == 0
