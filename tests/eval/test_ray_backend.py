"""The Ray backend of the durable runner: same results as threads, dead workers, secrets, bad addresses.

One local Ray (2 CPUs) is shared by the session's Ray modules (``local_ray`` in ``tests/eval/conftest.py``);
skipped when Ray is not installed.
"""

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("cloudpickle")

from groundstate.errors import ConfigError  # noqa: E402
from groundstate.eval import ray_backend  # noqa: E402
from groundstate.eval.ray_backend import RayOptions  # noqa: E402
from groundstate.eval.results import RESULTS, read_results  # noqa: E402
from groundstate.eval.runner import Runner, RunSettings, durable_run  # noqa: E402
from groundstate.programs.qa import QuestionAnswering  # noqa: E402
from tests.helpers import ROOT, echo_number_lm, json_adapter, qa_records, qa_score  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("local_ray")]


def scripted_setup():
    """Worker setup: the deterministic scripted LM (built once per worker process)."""
    return {"lm": echo_number_lm(), "adapter": json_adapter()}


def question(record):
    return {"question": record["question"]}


class CrashOn(QuestionAnswering):
    """Kills its worker process (``os._exit``) on one question while a marker file exists."""

    def __init__(self, needle: str, marker: str):
        super().__init__()
        self.needle, self.marker = needle, marker

    def forward(self, question):
        if self.needle in question and os.path.exists(self.marker):
            os._exit(1)
        return super().forward(question=question)


def gold_label(record):
    return {"gold": record["answer"]}


def ray_runner(tmp_path, program=None, **kwargs):
    return Runner(program or QuestionAnswering(), {"program": "qa", "data": "test"}, out=tmp_path / "runs",
                  threads=2, inputs=question, scorer=qa_score, labels=gold_label,
                  ray=RayOptions(worker_setup=scripted_setup, **kwargs))


def test_threads_and_ray_give_the_same_records_and_scores(tmp_path):
    records = qa_records(12, fail={4})
    threads = Runner(QuestionAnswering(), {"program": "qa", "data": "test"}, out=tmp_path / "threads", threads=2,
                     inputs=question, scorer=qa_score, lm=echo_number_lm(), adapter=json_adapter()).run(records)
    settings = RunSettings(out=tmp_path / "ray", threads=2, backend="ray", worker_setup=scripted_setup)
    on_ray = durable_run(QuestionAnswering(), {"program": "qa", "data": "test"}, records, settings,
                         inputs=question, scorer=qa_score)
    assert on_ray.run_id == threads.run_id  # the backend is not part of the run's identity

    def by_id(result):
        return {r["id"]: (r["outputs"], r["scores"], bool(r["error"]), r["lm_calls"], r["input_tokens"],
                          r["output_tokens"]) for r in read_results(result.run_dir / RESULTS)}

    assert by_id(on_ray) == by_id(threads)
    assert len(by_id(on_ray)) == 12
    assert on_ray.row("r001")["lm_calls"] == 1 and on_ray.row("r001")["input_tokens"] == 10  # metered on workers
    assert on_ray.summary["scores"] == threads.summary["scores"]
    assert on_ray.summary["tokens"] == threads.summary["tokens"]


def test_a_dead_worker_is_that_records_error_and_resume_retries_it(tmp_path):
    marker = tmp_path / "crash"
    marker.write_text("x")
    program = CrashOn("question number 3", str(marker))
    records = qa_records(6)
    first = ray_runner(tmp_path, program).run(records)
    errors = {r["id"]: r["error"] for r in first.rows if r["error"]}
    # every record running or queued on the dead worker process: r003 and at most 3 more (2 threads x 2 each)
    assert "r003" in errors and len(errors) <= 4
    for rid, error in errors.items():
        assert f"record {rid}" in error and "worker died" in error and "node" in error
        assert "unknown node" not in error
    # a lost record is not scored 0: its metric is not measured, as on the threads backend
    assert first.row("r003")["scores"] == {} and list(first.row("r003")["score_errors"]) == ["exact_match"]
    assert sum(1 for r in first.rows if not r["error"]) == 6 - len(errors)  # a replacement ran the rest
    # every row carries its label, a dead worker's error rows (made by the driver) too
    assert {r["id"]: r["gold"] for r in first.rows} == {r["id"]: r["answer"] for r in records}

    marker.unlink()
    again = ray_runner(tmp_path, program).run(records)
    assert again.run_id == first.run_id and again.skipped == 6 - len(errors)
    assert again.summary["n_error"] == 0 and again.row("r003")["attempt"] == 2
    lines = [row["id"] for row in read_results(again.run_dir / RESULTS)]
    assert Counter(lines) == Counter(r["id"] for r in records)  # every id exactly once


class HoldsKey(QuestionAnswering):
    def __init__(self, key: str):
        super().__init__()
        self.key = key


def test_secret_env_values_never_reach_payloads_or_files(tmp_path, monkeypatch):
    canary = "canary-" + os.urandom(8).hex()
    monkeypatch.setenv("GROUNDSTATE_CANARY_API_KEY", canary)
    password = "pw-" + os.urandom(8).hex()
    monkeypatch.setenv("CANARY_PASSWORD", password)
    seen: list[bytes] = []
    original = ray_backend.check_payload

    def recording(payload, what, *rest):
        seen.append(payload)
        original(payload, what, *rest)

    monkeypatch.setattr(ray_backend, "check_payload", recording)
    result = ray_runner(tmp_path).run(qa_records(4))
    assert result.summary["n_error"] == 0
    assert len(seen) == 5  # the job and each of the four records
    assert not any(canary.encode() in blob for blob in seen)
    for path in result.run_dir.iterdir():
        if path.is_file():
            assert canary not in path.read_text(encoding="utf-8", errors="replace")

    seen.clear()
    with pytest.raises(ConfigError) as info:
        ray_runner(tmp_path, HoldsKey(password)).run(qa_records(2))
    message = str(info.value)
    assert "refusing to send the program" in message and "$CANARY_PASSWORD" in message
    assert password not in message and "\n" not in message
    assert len(seen) == 1  # refused before any record was submitted


def test_unreachable_ray_address_is_one_line_exit_2(tmp_path):
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in qa_records(2)))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-m", "groundstate.cli", "run", "qa", "--data", str(data), "--lm",
                           "openai/gpt-4o-mini", "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                           "--backend", "ray", "--ray-address", "127.0.0.1:9"], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--ray-address 127.0.0.1:9" in lines[0] and "ray start --head" in lines[0]


def test_missing_ray_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'groundstate\[ray\]'"):
        ray_backend.require_ray()


def broken_setup():
    from groundstate.errors import LMSetupError

    raise LMSetupError("model file /nowhere/model.gguf not found")


def test_a_worker_that_cannot_build_its_lm_stops_the_run_with_one_line_keeping_results(tmp_path):
    from groundstate.errors import LMSetupError

    runner = Runner(QuestionAnswering(), {"program": "qa", "data": "test"}, out=tmp_path / "runs", threads=2,
                    inputs=question, scorer=qa_score, ray=RayOptions(worker_setup=broken_setup))
    with pytest.raises(LMSetupError) as info:
        runner.run(qa_records(3))
    message = str(info.value)
    assert "a Ray worker cannot build the LM" in message and "/nowhere/model.gguf" in message
    assert "Ray node" in message and "\n" not in message
    assert LMSetupError("x").exit_code == 2


def test_run_options_reach_run_settings_with_lm_specs_and_no_keys(monkeypatch):
    from groundstate.cli import build_parser
    from groundstate.cli.options import run_settings

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-000000000000")
    args = build_parser().parse_args(["run", "qa", "--backend", "ray", "--ray-address", "head:6379",
                                      "--max-inflight", "3", "--ray-workers", "5", "--lm", "openai/gpt-4o-mini",
                                      "--temperature", "0.5"])
    settings = run_settings(args)
    assert (settings.backend, settings.ray_address, settings.max_inflight) == ("ray", "head:6379", 3)
    assert settings.lm_spec["default"] == {"model": "openai/gpt-4o-mini", "temperature": 0.5}
    assert "sk-canary" not in json.dumps(settings.lm_spec)
    options = settings.ray_options()
    assert options.address == "head:6379" and options.max_inflight == 3 and options.workers == 5
    threads = run_settings(build_parser().parse_args(["run", "qa"]))
    assert threads.backend == "threads" and threads.ray_options() is None and threads.lm_spec is None


class NoLM(QuestionAnswering):
    """Answers without an LM (like a simulated agent)."""

    def forward(self, question):
        import dspy

        return dspy.Prediction(answer=question.split()[-1])


def test_a_run_that_needs_no_lm_goes_on_when_workers_cannot_build_one(tmp_path):
    runner = Runner(NoLM(), {"program": "nolm", "data": "test"}, out=tmp_path / "runs", threads=2,
                    inputs=question, scorer=qa_score, ray=RayOptions(worker_setup=broken_setup))
    result = runner.run(qa_records(4))
    assert result.summary["n_error"] == 0 and result.summary["scores"]["exact_match"]["mean"] == 1.0


GAUGE = "groundstate-test-gauge"


class Gauge:
    """Concurrent LM calls right now and at most, across every worker process."""

    def __init__(self):
        self.now = self.peak = 0

    def enter(self):
        self.now += 1
        self.peak = max(self.peak, self.now)

    def leave(self):
        self.now -= 1

    def max_seen(self):
        return self.peak


def gauged_setup():
    """A scripted LM (50 ms a call) that reports each call to the :class:`Gauge` actor."""
    import time

    from groundstate.testing import scripted_lm

    def respond(request):
        gauge = ray.get_actor(GAUGE, namespace="groundstate-test")
        ray.get(gauge.enter.remote())
        time.sleep(0.05)
        ray.get(gauge.leave.remote())
        return {"answer": request.user.split("question number")[-1].split()[0].strip()}

    return {"lm": scripted_lm(respond), "adapter": json_adapter()}


@pytest.mark.parametrize("bound", [None, 2])
def test_max_inflight_bounds_concurrent_lm_calls_across_workers(tmp_path, bound):
    gauge = ray.remote(Gauge).options(name=GAUGE, namespace="groundstate-test", num_cpus=0).remote()
    try:
        runner = Runner(QuestionAnswering(), {"program": "qa", "bound": bound}, out=tmp_path / "runs", threads=3,
                        inputs=question, scorer=qa_score,
                        ray=RayOptions(worker_setup=gauged_setup, workers=2, max_inflight=bound))
        result = runner.run(qa_records(18))
        assert result.summary["n_error"] == 0
        peak = ray.get(gauge.max_seen.remote())
    finally:
        ray.kill(gauge)
    if bound is None:
        assert peak > 2  # 2 workers x 3 threads: unbounded, more than two calls overlap
    else:
        assert peak == bound


DRIVER = '''
import os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import dspy, ray
from groundstate.eval.runner import RunSettings, durable_run
from groundstate.programs.qa import QuestionAnswering
from groundstate.testing import scripted_lm


def setup():
    def respond(request):
        return {"answer": request.user.split("question number")[-1].split()[0].strip()}
    return {"lm": scripted_lm(respond, sleep=0.1), "adapter": dspy.JSONAdapter()}


def question(record):
    return {"question": record["question"]}


ray.init(address=sys.argv[2], log_to_driver=False,
         runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
records = [{"id": f"r{i:03d}", "question": f"question number {i}", "answer": str(i)} for i in range(int(sys.argv[3]))]
settings = RunSettings(out=sys.argv[1], threads=2, backend="ray", ray_workers=2, worker_setup=setup)
durable_run(QuestionAnswering(), {"program": "qa", "data": "sigkill"}, records, settings, inputs=question)
'''


def resume_setup():
    return {"lm": echo_number_lm(), "adapter": json_adapter()}


def test_sigkill_of_the_driver_then_resume_on_ray_runs_every_record_exactly_once(tmp_path):
    import signal
    import time

    n = 80
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / "runs"
    address = ray.get_runtime_context().gcs_address
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([sys.executable, str(script), str(out), address, str(n)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    written = 0
    deadline = time.monotonic() + 120
    try:
        while written < 6 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            files = list(out.glob(f"*/{RESULTS}"))
            written = len(files[0].read_text().splitlines()) if files else 0
        assert proc.poll() is None, proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    results = next(out.glob(f"*/{RESULTS}"))
    before = [row["id"] for row in read_results(results)]
    assert 6 <= len(before) < n and len(set(before)) == len(before)

    records = qa_records(n)
    settings = RunSettings(out=out, threads=2, backend="ray", ray_workers=2, worker_setup=resume_setup)
    again = durable_run(QuestionAnswering(), {"program": "qa", "data": "sigkill"}, records, settings,
                        inputs=question)
    assert again.run_dir == results.parent and again.skipped >= len(before) - 1  # a torn last line is re-run
    lines = [row["id"] for row in read_results(results)]
    assert Counter(lines) == Counter(r["id"] for r in records)  # every record exactly once
    assert again.summary["n_done"] == n and again.summary["n_error"] == 0


class CallsThenWaits(QuestionAnswering):
    """Three LM calls, then a wait (120 s at most) for the marker the driver writes once its progress display has
    seen those calls, so they are seen while the record is still running on its worker."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def forward(self, question):
        import time

        for _ in range(3):
            prediction = super().forward(question=question)
        deadline = time.monotonic() + 120
        while not os.path.exists(self.marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        return prediction


def test_progress_shows_the_lm_calls_of_a_record_still_running_on_a_worker(tmp_path, monkeypatch):
    """Issue 26, item 6: under Ray the progress showed "0 LM calls" until records returned."""
    from groundstate.eval.progress import RunProgress

    marker, seen, bars = tmp_path / "seen", [], []

    class Watching(RunProgress):
        def on_worker_totals(self, calls, failed, tokens):
            super().on_worker_totals(calls, failed, tokens)
            seen.append((self.done, calls, failed, tokens))
            if calls >= 3:
                marker.write_text("seen")

    def watching(self, description, total, done, tokens=0):
        bars.append(Watching(description, total, done, enabled=self.progress, tokens=tokens))
        return bars[-1]

    monkeypatch.setattr(Runner, "_progress", watching)
    runner = ray_runner(tmp_path, CallsThenWaits(str(marker)))
    runner.progress = True
    result = runner.run(qa_records(1))
    assert result.summary["n_error"] == 0 and result.row("r000")["lm_calls"] == 3
    assert (0, 3, 0, 45) in seen  # the worker's three calls, before its record came back
    # counted once, not once per source
    assert re.search(r"1/1 records, 3 LM calls, 45 tokens \([\d,.]+ tokens/s\), 0 errors", bars[-1].line())
