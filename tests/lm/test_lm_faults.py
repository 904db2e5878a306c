"""LM faults against a real HTTP server on 127.0.0.1: garbage, 500s, 401s that echo headers, hangs, and correct
OpenAI chat completions. Every test is bounded in time; nothing leaves the loopback interface."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from groundstate.cli import main
from groundstate.errors import LMSetupError, RunInUseError, scrub_secrets
from groundstate.eval.lock import RunLock
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import DEFAULT_TIMEOUT_S, get_lm
from groundstate.testing import scripted_lm
from tests.conftest import requires_embedded
from tests.fake_server import FakeServer
from tests.helpers import ROOT

CANARY = "sk-canary-5b7e2d91c4a8f0"



@pytest.fixture(autouse=True)
def canary_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there any more: connection refused


def lm_toml(path: Path, api_base: str, model: str = "openai/test-model", **extra) -> Path:
    lines = ['[default]', f'model = "{model}"', f'api_base = "{api_base}"', "num_retries = 0"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def qa_file(path: Path, n: int = 3) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": "alpha"}) + "\n"
                            for i in range(n)))
    return path


def cli(args: list[str], tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real command in a fresh process (its own stderr, its own DSPy cache under ``tmp_path``)."""
    env = {**os.environ, "OPENAI_API_KEY": CANARY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "DSPY_CACHEDIR": str(tmp_path / "dspy-cache"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "groundstate.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=tmp_path)


def run_rows(out: Path) -> tuple[list[dict], dict, Path]:
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return rows, json.loads((run_dir / "summary.json").read_text()), run_dir


def assert_no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text


def one_line(text: str) -> str:
    text = text.strip()
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


# ---------------------------------------------------------------------------------------------------------
# lm check: one line, exit 2
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode,expected", [
    ("closed", "cannot reach the server"),
    ("401", "refused the API key"),
    ("garbage", "not a valid chat completion"),
    ("500", "the server failed"),
    ("hang", "no answer within 2s"),
])
def test_lm_check_fault_is_one_line_exit_2(tmp_path, servers, mode, expected):
    url = closed_port_url() if mode == "closed" else servers(mode).url
    config = lm_toml(tmp_path / "lm.toml", url)
    started = time.monotonic()
    done = cli(["lm", "check", "--lm-config", str(config), "--lm-timeout", "2"], tmp_path)
    assert time.monotonic() - started < 60
    assert done.returncode == 2, done.stderr
    err = one_line(done.stderr)
    assert err.startswith("groundstate: error: lm check failed for openai/test-model at " + url)
    assert expected in err
    assert_no_canary(done.stdout, done.stderr)
    if mode == "401":
        assert "Bearer [redacted]" in err  # the server did echo the header: scrubbed, not dropped


def test_lm_check_against_a_working_server(tmp_path, servers, capsys):
    server = servers(content='[[ ## choice ## ]]\nA\n\n[[ ## facts ## ]]\n["Mercury orbits closest"]\n\n'
                              '[[ ## completed ## ]]')
    assert main(["lm", "check", "--lm-config", str(lm_toml(tmp_path / "lm.toml", server.url))]) == 0
    out = capsys.readouterr().out
    assert "choice='A'" in out and "tokens: 11 in, 3 out" in out
    assert server.requests[0]["path"] == "/v1/chat/completions" and server.requests[0]["authorization"] == (
        f"Bearer {CANARY}")


# ---------------------------------------------------------------------------------------------------------
# runs: timeouts, secrets, failed calls, the cache key
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_hanging_server_records_each_error_and_finishes(tmp_path, servers, capsys):
    server = servers("hang")
    started = time.monotonic()
    code = main(["run", "qa", "--data", str(qa_file(tmp_path / "qa.jsonl", 3)), "--runs-dir", str(tmp_path / "runs"),
                 "--lm-config", str(lm_toml(tmp_path / "lm.toml", server.url)), "--lm-timeout", "2",
                 "--threads", "3", "--no-progress"])
    elapsed = time.monotonic() - started
    assert code == 1 and elapsed < 30  # three concurrent 2 s timeouts, not three 600 s stalls; all failed: exit 1
    rows, summary, _ = run_rows(tmp_path / "runs")
    assert len(rows) == 3 and len(server.requests) == 3
    for row in rows:
        assert "timed out" in row["error"] and row["failed_calls"] == row["lm_calls"] == 1
        assert row["cached_calls"] == 0
    assert summary["n_error"] == 3 and summary["lm_calls"]["failed"] == 3 and summary["lm_calls"]["cached"] == 0
    assert "3 of 3 failed" in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_echoed_key_never_reaches_results_summary_or_terminal(tmp_path, servers, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    server = servers("401")
    code = main(["-vv", "run", "qa", "--data", str(qa_file(tmp_path / "qa.jsonl", 2)),
                 "--runs-dir", str(tmp_path / "runs"), "--lm-config", str(lm_toml(tmp_path / "lm.toml", server.url)),
                 "--no-progress"])
    captured = capsys.readouterr()
    assert "record q0 failed" in caplog.text  # the debug log of the failure (with its traceback) was written
    assert code == 1  # every record failed
    assert server.requests and all(r["authorization"] == f"Bearer {CANARY}" for r in server.requests)
    rows, _, run_dir = run_rows(tmp_path / "runs")
    assert all("Bearer [redacted]" in r["error"] for r in rows)  # the echo happened and was scrubbed
    assert_no_canary(captured.out, captured.err, caplog.text,
                     *(p.read_text() for p in run_dir.iterdir() if p.is_file()))


@pytest.mark.timeout(60)
def test_failed_calls_are_failures_not_cache_hits(tmp_path, servers, capsys):
    server = servers("500")
    data, config = qa_file(tmp_path / "qa.jsonl", 4), lm_toml(tmp_path / "lm.toml", server.url)
    assert main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / "runs"), "--lm-config", str(config),
                 "--no-progress"]) == 1  # every record failed
    rows, summary, _ = run_rows(tmp_path / "runs")
    assert [r["cached_calls"] for r in rows] == [0] * 4 and [r["failed_calls"] for r in rows] == [1] * 4
    assert summary["lm_calls"] == {**summary["lm_calls"], "total": 4, "failed": 4, "cached": 0}
    out = capsys.readouterr().out
    assert "from cache" not in out and "4 of 4 failed" in out


@pytest.mark.timeout(60)
def test_cache_key_includes_the_server(tmp_path, servers, capsys):
    first = servers(content="[[ ## answer ## ]]\nalpha\n\n[[ ## completed ## ]]")
    second = servers(content="[[ ## answer ## ]]\nbeta\n\n[[ ## completed ## ]]")
    data = qa_file(tmp_path / "qa.jsonl", 3)
    model = f"openai/cache-test-{uuid.uuid4().hex[:8]}"  # no entry from another test can answer

    def run(server: FakeServer, out: str) -> list[dict]:
        config = lm_toml(tmp_path / f"{out}.toml", server.url, model=model)
        assert main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / out), "--lm-config", str(config),
                     "--no-progress", "--threads", "1"]) == 0
        return run_rows(tmp_path / out)[0]

    a = run(first, "a")
    b = run(second, "b")  # the same command against another server: its own answers, not the cache's
    assert [r["outputs"]["answer"] for r in a] == ["alpha"] * 3
    assert [r["outputs"]["answer"] for r in b] == ["beta"] * 3
    assert len(first.requests) == 3 and len(second.requests) == 3
    again = run(first, "c")  # the cache is on: the first server's answers come back without a request
    assert [r["outputs"]["answer"] for r in again] == ["alpha"] * 3 and len(first.requests) == 3
    assert all(r["cached_calls"] == r["lm_calls"] == 1 and r["failed_calls"] == 0 for r in again)
    assert "3 of 3 from cache" in capsys.readouterr().out


def test_decoding_settings_and_rollout_ids_stay_in_the_key(servers):
    import dspy

    server = servers(content="one")
    lm = get_lm(f"openai/key-test-{uuid.uuid4().hex[:8]}", api_base=server.url, num_retries=0, temperature=0.0)
    assert lm("same") == ["one"]
    server.content = "two"
    assert lm("same") == ["one"]  # cached
    assert lm.copy(temperature=0.5)("same") == ["two"]  # other decoding settings: another entry
    assert lm("same", rollout_id=1, temperature=0.7) == ["two"]  # the caller's rollout id still makes a sample
    assert isinstance(lm, dspy.LM) and len(server.requests) == 3


# ---------------------------------------------------------------------------------------------------------
# Concurrent runs, merges, show
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_second_process_on_a_run_in_use_exits_2(tmp_path, servers, capsys):
    server = servers()
    args = ["run", "qa", "--data", str(qa_file(tmp_path / "qa.jsonl", 3)), "--runs-dir", str(tmp_path / "runs"),
            "--lm-config", str(lm_toml(tmp_path / "lm.toml", server.url)), "--no-progress"]
    assert main(args) == 0
    _, _, run_dir = run_rows(tmp_path / "runs")
    before = (run_dir / "results.jsonl").read_text()
    with RunLock(run_dir):
        done = cli(args, tmp_path)
    assert done.returncode == 2
    err = one_line(done.stderr)
    assert f"run {run_dir.name} is in use by another groundstate process (pid {os.getpid()})" in err
    assert "another --runs-dir" in err
    assert (run_dir / "results.jsonl").read_text() == before
    assert main(args) == 0  # released: the same command runs (and finds everything done)
    assert (run_dir / "results.jsonl").read_text() == before


def test_run_lock_is_exclusive_and_released(tmp_path):
    with RunLock(tmp_path, "r1"):
        with pytest.raises(RunInUseError, match=f"run r1 is in use .*pid {os.getpid()}"):
            RunLock(tmp_path, "r1").acquire()
    with RunLock(tmp_path, "r1"):  # released on exit
        pass


@pytest.fixture
def two_shards(tmp_path, monkeypatch, capsys):
    lm = scripted_lm(lambda req: {"answer": "alpha"})
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    data = qa_file(tmp_path / "qa.jsonl", 12)
    out = tmp_path / "runs"
    for i in range(2):
        assert main(["run", "qa", "--data", str(data), "--runs-dir", str(out), "--shard", f"{i}/2",
                     "--no-progress"]) == 0
    capsys.readouterr()
    shard = {json.loads((p / "config.json").read_text())["shard"][0]: p for p in out.iterdir()}
    return out, shard[0], shard[1]


def test_merge_refuses_a_shard_given_twice(tmp_path, two_shards, capsys):
    out, s0, s1 = two_shards
    assert main(["runs", "merge", s0.name, s0.name, "--runs-dir", str(out)]) == 2
    assert "given twice" in one_line(capsys.readouterr().err)
    assert main(["runs", "merge", s0.name, str(s0), "--runs-dir", str(out)]) == 2  # the same directory, spelled twice
    assert "given twice" in one_line(capsys.readouterr().err)
    copy = tmp_path / "elsewhere" / s0.name
    shutil.copytree(s0, copy)
    assert main(["runs", "merge", str(s0), str(copy), "--runs-dir", str(out)]) == 2  # shard 0/2 twice, two places
    assert "shard 0/2 is given twice" in one_line(capsys.readouterr().err)
    assert not any(p.name.endswith("-merged") for p in out.iterdir())


def test_merge_refuses_overlapping_shards(two_shards, capsys):
    out, s0, s1 = two_shards
    stolen = (s0 / "results.jsonl").read_text().splitlines()[0]
    with open(s1 / "results.jsonl", "a", encoding="utf-8") as handle:
        handle.write(stolen + "\n")
    assert main(["runs", "merge", s0.name, s1.name, "--runs-dir", str(out)]) == 2
    err = one_line(capsys.readouterr().err)
    assert f"record '{json.loads(stolen)['id']}' is in both" in err and "overlap" in err
    assert not any(p.name.endswith("-merged") for p in out.iterdir())


def test_runs_show_missing_path_is_one_line(tmp_path, capsys):
    missing = tmp_path / "does" / "not" / "exist"
    assert main(["runs", "show", str(missing)]) == 2
    assert str(missing) in one_line(capsys.readouterr().err)
    assert main(["runs", "show", "no-such-run", "--runs-dir", str(tmp_path)]) == 2
    assert "no run 'no-such-run'" in one_line(capsys.readouterr().err)


# ---------------------------------------------------------------------------------------------------------
# Settings, scrubbing, optimize
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field,value,message", [
    ("temperature", '"hot"', "a number from 0 to 2"),
    ("temperature", "2.5", "a number from 0 to 2"),
    ("max_tokens", "0", "a positive integer"),
    ("max_tokens", "1.5", "a positive integer"),
    ("timeout", "-1", "a positive number of seconds"),
    ("num_retries", "true", "an integer >= 0"),
])
def test_lm_config_settings_are_checked_when_read(tmp_path, field, value, message):
    path = tmp_path / "lm.toml"
    path.write_text(f'[default]\nmodel = "openai/m"\n\n[roles."agent.1"]\nmodel = "openai/m"\n{field} = {value}\n')
    with pytest.raises(LMSetupError) as info:
        LMConfig.load(path)
    text = str(info.value)
    assert str(path) in text and '[roles.agent.1]' in text and f"field '{field}'" in text and message in text


def test_embedded_settings_are_checked_and_lm_timeout_is_validated(tmp_path, capsys):
    path = tmp_path / "lm.toml"
    path.write_text('[default]\nmodel = "embedded"\nn_ctx = 0\n')
    with pytest.raises(LMSetupError, match=r"section \[default\]: field 'n_ctx' must be a positive integer"):
        LMConfig.load(path)
    with pytest.raises(SystemExit) as info:  # refused when the options are parsed
        main(["lm", "check", "--lm", "openai/m", "--lm-timeout", "0"])
    assert info.value.code == 2 and "argument --lm-timeout: expected a number above 0" in capsys.readouterr().err


def test_hosted_lms_get_a_timeout():
    assert get_lm("openai/m").kwargs["timeout"] == DEFAULT_TIMEOUT_S == 120
    assert get_lm("openai/m", timeout=7).kwargs["timeout"] == 7


@requires_embedded
def test_embedded_lm_ignores_the_timeout():
    lm = get_lm("embedded", timeout=5)
    assert "timeout" not in lm.kwargs


def test_scrub_secrets_removes_configured_keys_and_token_shapes(monkeypatch):
    monkeypatch.setenv("MYPROVIDER_API_KEY", "plain-canary-value-8842")
    monkeypatch.setenv("HF_TOKEN", "hf_canaryTOKENvalue77")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be a key: left alone
    text = ("failed: key plain-canary-value-8842 rejected; Authorization: Bearer eyJhbGciOi.x-y_z; "
            "hf hf_canaryTOKENvalue77; project key sk-proj-AbC123xyz789; x-api-key: zzzz9999yyyy; abc; "
            "connection refused")
    clean = scrub_secrets(text)
    for secret in ("plain-canary-value-8842", "eyJhbGciOi", "hf_canaryTOKENvalue77", "sk-proj-AbC123xyz789",
                   "zzzz9999yyyy"):
        assert secret not in clean
    assert "Bearer [redacted]" in clean and "abc;" in clean and "connection refused" in clean
    assert scrub_secrets("nothing secret here") == "nothing secret here"


@pytest.mark.timeout(120)
def test_optimize_with_every_call_failing_exits_2_and_saves_nothing(tmp_path, monkeypatch, capsys):
    from groundstate.eval.benchmarks.offquery.loader import save_instances
    from groundstate.eval.benchmarks.offquery.synthetic import generate

    lm = scripted_lm(lambda req: RuntimeError(f"upstream said: Bearer {CANARY}"))
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    train = tmp_path / "train.jsonl"
    save_instances(train, generate("healthcare", "main", 3, seed=0))
    out = tmp_path / "opt"
    code = main(["optimize", "reground", "--stage", "resolve", "--data", str(train), "--out", str(out),
                 "--max-demos", "1", "-v"])  # -v: DSPy's own output is shown (hidden by default since issue 26)
    assert code == 2
    stderr = capsys.readouterr().err  # DSPy's progress bars and its log of each failed example, then our line
    err = one_line(stderr.strip().splitlines()[-1])
    # it stops as soon as the starting program is scored: every metric call failed, past --max-failed-share
    assert re.match(r"groundstate: error: optimization with 'bootstrap' stopped while scoring the starting "
                    r"program: (\d+) of \1 metric calls failed", err), err  # all of them (retries vary the count)
    assert "nothing to save" in err and "Bearer [redacted]" in err and "groundstate lm check" in err
    assert "upstream said" in stderr.replace(err, "")  # DSPy did log the failures: scrubbed, too
    assert_no_canary(stderr)
    assert lm.engine.calls > 0
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("content", ["", "\n\n# only a comment\n"])
def test_empty_lm_config_is_refused(tmp_path, content):
    path = tmp_path / "lm.toml"
    path.write_text(content)
    with pytest.raises(LMSetupError, match=r"lm\.toml: the LM config is empty"):
        LMConfig.load(path)
