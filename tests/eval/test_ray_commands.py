"""``--backend ray`` on the commands whose per-task loop is not a durable run (``consilience explore``,
``calibrate``, ``coverage``) and on ``dhd replay``: the same results as threads (the serial loop).

Uses the session's local Ray (``local_ray`` in ``tests/eval/conftest.py``); skipped when Ray is not installed.
"""

import json
import os
import re
import shutil
import time

import dspy
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("cloudpickle")

import tests.cli.test_dhd as dhd_tests  # noqa: E402
from groundstate.cli import main  # noqa: E402
from groundstate.errors import WorkerLostError  # noqa: E402
from groundstate.eval.ray_backend import RayOptions  # noqa: E402
from groundstate.eval.task_map import backend_map, map_on_ray  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402
from tests.cli.test_dhd import SCIBENCH, Solver  # noqa: E402

PICKLE_BY_VALUE = (dhd_tests,)
pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("local_ray")]
RAY = ["--backend", "ray", "--ray-workers", "2", "--threads", "2"]


def square(x):
    if x == "boom":
        raise KeyError("boom")
    return x * x


def test_map_on_ray_keeps_order_and_raises_the_first_error_unchanged():
    options = RayOptions(workers=2)
    assert map_on_ray(square, range(9), options, threads=2) == [x * x for x in range(9)]
    assert map_on_ray(square, [], options) == []
    with pytest.raises(KeyError, match="boom"):
        map_on_ray(square, [1, "boom", 3], options, threads=2)
    assert backend_map("threads", 3)(square, range(5)) == [0, 1, 4, 9, 16]


def dies_on_three(x):
    if x == 3:
        # let the worker send its previous task's result first: an exit right after it can lose that result too,
        # and the error then rightly names the earlier task (Ray returns results asynchronously)
        time.sleep(1.0)
        os._exit(1)
    return x


def test_a_dead_worker_is_one_line_naming_the_task_and_node():
    with pytest.raises(WorkerLostError) as info:
        map_on_ray(dies_on_three, range(5), RayOptions(workers=2), threads=1)
    message = str(info.value)
    assert "task 3" in message and "worker died on" in message and "node" in message and "\n" not in message
    assert "run the command again" in message and "resume" not in message
    assert map_on_ray(square, range(4), RayOptions(workers=2)) == [0, 1, 4, 9]  # a replacement worker took over


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tasks")
    path = tmp / "tasks.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "6", "--seed", "3", "--out", str(path)]) == 0
    return path


SIM = ["--agents", "sim", "--max-rounds", "4"]


def test_explore_calibrate_coverage_give_the_same_results_on_threads_and_ray(tmp_path, tasks, capsys):
    for name, backend in (("serial", ["--threads", "1"]), ("threads", ["--threads", "3"]), ("ray", RAY)):
        assert main(["consilience", "explore", "--data", str(tasks), "--out", str(tmp_path / f"{name}.jsonl"),
                     *SIM, *backend]) == 0
        assert main(["consilience", "calibrate", "--data", str(tasks), "--alpha", "0.3",
                     "--out", str(tmp_path / f"cal-{name}"), *SIM, *backend]) == 0
        code = main(["consilience", "coverage", "--data", str(tasks), "--calibrator", str(tmp_path / "cal-serial"),
                     "--min-calibration", "2", "--json-out", str(tmp_path / f"cov-{name}.json"), *SIM, *backend])
        assert code in (0, 1)
    capsys.readouterr()
    explored = (tmp_path / "serial.jsonl").read_text()
    assert len(explored.splitlines()) == 6 * 4
    params = json.loads((tmp_path / "cal-serial" / "params.json").read_text())
    coverage = json.loads((tmp_path / "cov-serial.json").read_text())
    assert coverage["calibrated"] and coverage["deployed"]
    for name in ("threads", "ray"):
        assert (tmp_path / f"{name}.jsonl").read_text() == explored  # same rows, same order, same numbers
        assert json.loads((tmp_path / f"cal-{name}" / "params.json").read_text()) == params
        assert json.loads((tmp_path / f"cov-{name}.json").read_text()) == coverage


def dhd_setup():
    """Worker setup: the scripted DHD LM (built once per worker process)."""
    return {"lm": scripted_lm(Solver(), cache=True), "adapter": dspy.JSONAdapter()}


def test_dhd_replay_on_ray_gives_the_same_pairs_as_threads(tmp_path, monkeypatch, capsys):
    from groundstate.cli import options
    from groundstate.lm.config import LMConfig

    dspy.cache.reset_memory_cache()
    model = scripted_lm(Solver(), cache=True)

    def configure(args):
        dspy.configure(lm=model, adapter=dspy.JSONAdapter())
        return model, LMConfig()

    monkeypatch.setattr("groundstate.cli.options.configure_lms", configure)
    original = options.backend_settings

    def with_setup(args):  # the scripted LM is no LM spec: workers build it with worker_setup instead
        fields = original(args)
        return {**fields, "lm_spec": None, "worker_setup": dhd_setup} if fields["backend"] == "ray" else fields

    monkeypatch.setattr(options, "backend_settings", with_setup)
    threads, on_ray = tmp_path / "threads", tmp_path / "ray"
    common = ["--no-progress", "--threads", "2"]
    assert dhd_tests.run(["generate", "--data", str(SCIBENCH), "--k", "3", "--cache", str(threads),
                          *common]) == 0
    shutil.copytree(threads, on_ray)
    replay = ["replay", "--mode", "loo", "--repeats", "2", "--k", "2", "3", *common]
    assert dhd_tests.run([*replay, "--cache", str(threads)]) == 0
    calls = model.engine.calls
    assert dhd_tests.run([*replay, "--cache", str(on_ray), "--backend", "ray", "--ray-workers", "2"]) == 0
    assert model.engine.calls == calls  # every replay ran on the workers
    for cache in (threads, on_ray):
        assert dhd_tests.run(["analyze", "--cache", str(cache), "--permutations", "50", "--resamples", "20"]) == 0
    capsys.readouterr()

    def pairs(cache):
        rows = [json.loads(line) for line in (cache / "analysis" / "pairs.jsonl").read_text().splitlines()]
        return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))

    assert len(pairs(threads)) == 4 * 2 * (2 + 3)
    assert pairs(on_ray) == pairs(threads)
    dspy.cache.reset_memory_cache()


def qa_setup():
    from tests.helpers import echo_number_lm

    return {"lm": echo_number_lm(), "adapter": dspy.JSONAdapter()}


def ask(x):
    from groundstate.programs.qa import QuestionAnswering

    return QuestionAnswering()(question=f"question number {x}").answer


def test_a_task_map_shows_the_same_lm_calls_on_ray_as_on_threads(capsys):
    """The task maps of consilience explore/calibrate/coverage: the workers' calls reach the progress line."""
    lines = {}
    for backend in ("threads", "ray"):
        capsys.readouterr()
        with dspy.context(**qa_setup()):
            shown = backend_map(backend, 2, RayOptions(workers=2, worker_setup=qa_setup), progress="demo")
            assert shown(ask, range(4)) == ["0", "1", "2", "3"]
        lines[backend] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[groundstate] demo")][-1]
    for line in lines.values():
        assert re.search(r"4/4 tasks, 4 LM calls, 60 tokens \([\d,.]+ tokens/s\), 0 errors", line), lines
