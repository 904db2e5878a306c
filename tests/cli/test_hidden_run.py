"""``groundstate hidden run``, wired on a throwaway parser (the ``hidden`` group itself lives in cli_hidden)."""

from __future__ import annotations

import json

import pytest

from groundstate.cli.hidden import register_run
from groundstate.cli.options import Parser as _Parser
from groundstate.errors import GroundstateError
from groundstate.eval.results import read_results
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.conftest import requires_embedded
from tests.programs.consilience.test_simulated import make_task


def parse(argv: list[str]):
    parser = _Parser(prog="groundstate")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    hidden = sub.add_parser("hidden")
    register_run(hidden.add_subparsers(dest="hidden_command", parser_class=_Parser))
    return parser.parse_args(["hidden", "run", *argv])


def run(argv: list[str]) -> int:
    args = parse(argv)
    try:
        return args.func(args)
    except GroundstateError as exc:
        print(f"groundstate: error: {exc}")
        return exc.exit_code


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    tasks = [make_task(s, n_agents=3 + s % 2) for s in range(6)]
    path.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    return path, tasks


def test_hidden_run_with_simulated_agents(tasks_file, tmp_path, capsys):
    path, tasks = tasks_file
    argv = ["--data", str(path), "--protocol", "hidden-post", "--agents", "sim", "--rounds", "2",
            "--sim-noise", "0", "--runs-dir", str(tmp_path / "runs"), "--threads", "2", "--no-progress"]
    assert run(argv) == 0
    out = capsys.readouterr().out
    for metric in ("task accuracy", "vote accuracy", "rounds", "words"):  # the summary table's human headers
        assert metric in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("hidden-post-sim-")
    rows = {r["id"]: r for r in read_results(run_dir / "results.jsonl")}
    assert set(rows) == {t.id for t in tasks}
    for task in tasks:
        row = rows[task.id]
        assert row["error"] is None and row["lm_calls"] == 0
        speakers = [m["speaker"] for m in row["outputs"]["transcript"]["messages"]]
        assert speakers == list(range(task.n_agents)) * 2
        assert row["scores"]["rounds"] == 2 and row["scores"]["task_accuracy"] == float(row["outputs"]["correct"])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["options"]["agents"]["params"]["noise"] == 0.0 and config["lm"] == {"model": None}
    # the same command resumes (nothing to redo); another protocol is another run
    assert run(argv) == 0
    assert len(read_results(run_dir / "results.jsonl")) == len(tasks)
    assert run([*argv[:2], "--protocol", "full-info", *argv[4:]]) == 0
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_hidden_run_simulated_needs_support(tmp_path, capsys):
    path = tmp_path / "plain.jsonl"
    task = make_task(0).model_copy(update={"support": {}, "id": "plain-1"})
    path.write_text(task.model_dump_json() + "\n")
    assert run(["--data", str(path), "--agents", "sim", "--support", "task", "--runs-dir", str(tmp_path / "runs")]) == 2
    out = capsys.readouterr().out
    assert "record plain-1" in out and "field 'support'" in out and "per-fact support" in out
    # by default a task without support runs on the hidden-profile design default, and says so
    assert run(["--data", str(path), "--agents", "sim", "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    assert "design default" in capsys.readouterr().err


def test_hidden_run_bad_options_are_one_line_errors(tasks_file, tmp_path, capsys):
    path, _ = tasks_file
    with pytest.raises(SystemExit) as info:  # refused when the options are parsed
        run(["--data", str(path), "--agents", "sim", "--sim-recall", "2", "--runs-dir", str(tmp_path)])
    assert info.value.code == 2 and "argument --sim-recall: expected a share from 0 to 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        parse(["--data", str(path), "--protocol", "debate"])
    assert info.value.code == 2


def test_hidden_run_with_lm_agents_uses_one_lm_per_agent_role(tasks_file, tmp_path, monkeypatch, capsys):
    path, tasks = tasks_file
    lms = {f"agent.{i}": scripted_lm(lambda req, i=i: {"vote": "ABCD"[i], "confidence": 0.5, "message": f"m{i}"})
           for i in range(4)}
    default = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lms.get(role, default))
    argv = ["--data", str(path), "--protocol", "hidden-post", "--agents", "lm", "--rounds", "1", "--limit", "2",
            "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert run(argv) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = {r["id"]: r for r in read_results(run_dir / "results.jsonl")}
    assert set(rows) == {t.id for t in tasks[:2]} and all(r["error"] is None for r in rows.values())
    for task in tasks[:2]:
        row = rows[task.id]
        assert [v["vote"] for v in row["outputs"]["votes"]] == list("ABCD"[: task.n_agents])
        assert [m["text"] for m in row["outputs"]["transcript"]["messages"]] == [f"m{i}" for i in range(task.n_agents)]
        assert row["lm_calls"] == 2 * task.n_agents and row["input_tokens"] > 0
    for i in range(3):
        assert {r.field("agent") for r in lms[f"agent.{i}"].engine.requests} == {f"Agent {i}"}
    assert default.engine.calls == 0


@pytest.mark.embedded
@requires_embedded
def test_embedded_hidden_post_end_to_end(tmp_path, capsys):
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.convert import to_hidden_profile
    from groundstate.eval.benchmarks.travel.generator import generate_travel

    path = tmp_path / "travel.jsonl"
    save_hidden_tasks(path, [to_hidden_profile(t) for t in generate_travel(1, seed=0, travelers=3)])
    out = tmp_path / "runs"
    assert run(["--data", str(path), "--protocol", "hidden-post", "--agents", "lm", "--rounds", "1",
                "--runs-dir", str(out), "--no-progress"]) == 0
    summary = json.loads(next(out.glob("*/summary.json")).read_text())
    assert summary["n_done"] == 1 and summary["n_error"] == 0, summary
    assert summary["lm_calls"]["total"] == 6 and summary["tokens"]["total"] > 0
    (row,) = read_results(next(out.glob("*/results.jsonl")))
    assert [m["speaker"] for m in row["outputs"]["transcript"]["messages"]] == [0, 1, 2]
    assert all(v["vote"] in "ABCD" for v in row["outputs"]["votes"])


def test_hidden_run_defaults_to_simulated_agents_and_says_so(tmp_path, capsys):
    path = tmp_path / "tasks.jsonl"
    path.write_text(make_task(0).model_dump_json() + "\n")
    args = parse(["--data", str(path)])
    assert args.agents == "sim"
    assert run(["--data", str(path), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0  # offline: no LM
    assert "agents: sim" in capsys.readouterr().err
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["n_done"] == 1 and summary["lm_calls"]["total"] == 0
    assert parse(["--data", str(path), "--agents", "lm"]).agents == "lm"  # LM agents stay one flag away
    assert run(["--data", str(path), "--agents", "sim", "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    assert "agents: sim" not in capsys.readouterr().err  # the note is for the default only


def test_hidden_run_help_names_the_sim_default(capsys):
    with pytest.raises(SystemExit):
        parse(["--help"])
    assert "default sim" in " ".join(capsys.readouterr().out.split())
