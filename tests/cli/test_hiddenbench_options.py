"""``groundstate hidden run`` with HiddenBench's protocols (issue 25, item 8): the options that depart from its
script are part of the run's identity, a bad combination is one line, and LM agents hold their chat through a
real (fake) OpenAI-compatible server."""

import json

from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
from groundstate.eval.consilience.data import load_tasks
from groundstate.eval.results import read_results
from tests.test_hostile_files import assert_one_clean_line, run_cli

FIXTURE = "tests/data/hiddenbench/hiddenbench_format.json"


def one_task(tmp_path) -> str:
    tasks, _ = load_tasks(FIXTURE)
    save_hidden_tasks(tmp_path / "tasks.jsonl", [next(t for t in tasks if t.n_agents == 3)])
    return "tasks.jsonl"


def configs(runs) -> dict:
    return {p.name: json.loads((p / "config.json").read_text()) for p in runs.iterdir()}


def test_the_options_are_part_of_the_run_and_refused_in_one_line(tmp_path):
    data = one_task(tmp_path)
    base = ["hidden", "run", "--data", data, "--agents", "sim", "--runs-dir", "runs", "--no-progress"]
    code, out, err = run_cli([*base, "--protocol", "hiddenbench-full", "--full-discussion", "--rounds", "2"], tmp_path)
    assert code == 0, err[-2000:]
    (config,) = configs(tmp_path / "runs").values()
    assert config["options"]["rounds"] == 2 and config["options"]["hiddenbench"]["full_discussion"] is True
    (row,) = read_results(next((tmp_path / "runs").iterdir()) / "results.jsonl")
    assert len(row["outputs"]["transcript"]["messages"]) == 6 and "initial_task_accuracy" in row["scores"]
    code, out, err = run_cli([*base, "--protocol", "hiddenbench-full"], tmp_path)  # the paper's: no discussion
    assert code == 0, err[-2000:]
    code, out, err = run_cli([*base, "--protocol", "hiddenbench", "--rounds", "1"], tmp_path)
    assert code == 0, err[-2000:]
    code, out, err = run_cli([*base, "--protocol", "hiddenbench", "--rounds", "1", "--fixed-holders"], tmp_path)
    assert code == 0, err[-2000:]
    runs = configs(tmp_path / "runs")
    assert len(runs) == 4  # each option set is a run of its own
    default = next(c for c in runs.values() if c["options"]["protocol"] == "hiddenbench-full"
                   and not c["options"]["hiddenbench"]["full_discussion"])
    assert default["options"]["rounds"] == 0
    argv = [*base, "--protocol", "hiddenbench", "--special-share", "0.5"]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "--special-prompt must be given" in err and len(configs(tmp_path / "runs")) == 4


def chat_reply(request: dict) -> str:
    system = request["messages"][0]["content"]
    if "`rationale`" in system:
        return "[[ ## vote ## ]]\nB\n\n[[ ## rationale ## ]]\nIt fits the facts I hold.\n\n[[ ## completed ## ]]"
    turn = sum(m["role"] == "assistant" for m in request["messages"]) + 1
    return f"[[ ## message ## ]]\nTurn {turn}: I hold a fact. It matters. It really does.\n\n[[ ## completed ## ]]"


def test_lm_agents_hold_their_chat_through_a_hosted_lm(tmp_path, servers, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    server = servers(responder=chat_reply)
    data = one_task(tmp_path)
    argv = ["hidden", "run", "--data", data, "--protocol", "hiddenbench", "--rounds", "2", "--agents", "lm",
            "--lm", "openai/chat-model", "--api-base", server.url, "--runs-dir", "runs", "--no-progress"]
    code, out, err = run_cli(argv, tmp_path)
    assert code == 0, err[-2000:]
    bodies = [json.loads(r["body"]) for r in server.requests]
    assert len(bodies) == 3 * 4  # per agent: the initial vote, two turns, the final vote
    shapes = sorted(tuple(m["role"] for m in b["messages"]) for b in bodies)
    assert shapes.count(("system", "user")) == 6  # initial votes and first turns
    assert shapes.count(("system", "user", "assistant", "user")) == 3  # second turns
    assert shapes.count(("system", "user", "assistant", "user", "assistant", "user")) == 3  # final votes
    (run_dir,) = (tmp_path / "runs").iterdir()
    (row,) = read_results(run_dir / "results.jsonl")
    texts = [m["text"] for m in row["outputs"]["transcript"]["messages"]]
    assert texts[:3] == ["Turn 1: I hold a fact. It matters. It really does."] * 3  # whole: three sentences
    assert row["outputs"]["hiddenbench"]["rationales"] == ["It fits the facts I hold."] * 3
    assert row["outputs"]["answer"] == row["outputs"]["initial_answer"] and row["error"] is None
