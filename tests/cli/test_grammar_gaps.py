"""The grammar's gaps (issue 26, item 6), as a user meets them: ``--no-progress`` silences the consilience steps and
``optimize``, ``optimize --data synthetic`` resolves like ``run``, ``optimize`` shows one groundstate progress line
and holds DSPy's output back unless ``-v``, and ``consilience coverage`` says why it exits 1. The static walks are in
tests/cli/test_grammar.py; Ray's live LM calls in tests/eval/test_ray_backend.py."""

import json
import sys

import pytest

from groundstate.cli import main
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm

SIM = ["--agents", "sim", "--max-rounds", "3"]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "6", "--seed", "3", "--out", str(path)]) == 0
    return path


@pytest.fixture
def placeholder_lm(monkeypatch):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


def progress_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[groundstate] ")]


@pytest.mark.parametrize("quiet", [False, True], ids=["shown", "no-progress"])
def test_the_consilience_steps_show_progress_and_no_progress_silences_it(tmp_path, tasks, capsys, quiet):
    flag = ["--no-progress"] if quiet else []
    steps = [
        ["explore", "--out", str(tmp_path / "x.jsonl")],
        ["train", "--data", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "mlp")],
        ["calibrate", "--alpha", "0.3", "--out", str(tmp_path / "cal")],
        ["coverage", "--calibrator", str(tmp_path / "cal"), "--min-calibration", "1000"],  # nothing checked: exit 0
    ]
    seen = {}
    for step in steps:
        data = [] if step[0] == "train" else ["--data", str(tasks), *SIM]
        capsys.readouterr()
        assert main(["consilience", *step, *data, *flag]) == 0, step[0]
        seen[step[0]] = progress_lines(capsys.readouterr().err)
    if quiet:
        assert seen == {"explore": [], "train": [], "calibrate": [], "coverage": []}
        return
    assert seen["explore"][-1].startswith("[groundstate] consilience explore: 6/6 tasks, 0 LM calls, 0 tokens")
    assert seen["calibrate"][-1].startswith("[groundstate] consilience calibrate: 6/6 tasks, 0 LM calls")
    assert [line.split(":")[0] for line in seen["coverage"]] == [
        f"[groundstate] consilience coverage ({policy} policy)" for policy in ("calibrated", "deployed")]
    assert seen["train"] == []  # training shows no progress: the option is accepted, nothing to silence


def test_coverage_below_target_says_which_rounds_before_exit_1(tmp_path, capsys):
    tasks = tmp_path / "t.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "30", "--seed", "3", "--out", str(tasks)]) == 0
    cal = tmp_path / "cal"
    assert main(["consilience", "calibrate", "--data", str(tasks), *SIM, "--out", str(cal), "--no-progress"]) == 0
    params = json.loads((cal / "params.json").read_text())  # a calibrator that certifies far too little
    params.update(alpha=0.05, thresholds={round_: 0.0 for round_ in params["thresholds"]})
    (cal / "params.json").write_text(json.dumps(params))
    capsys.readouterr()
    report = tmp_path / "coverage.json"
    code = main(["consilience", "coverage", "--data", str(tasks), *SIM, "--calibrator", str(cal), "--min-calibration",
                 "2", "--policy", "calibrated", "--json-out", str(report), "--no-progress"])
    err = capsys.readouterr().err
    below = [r for r in json.loads(report.read_text())["calibrated"] if r["checked"] and not r["ok"]]
    assert code == 1 and below
    lines = [line for line in err.splitlines() if "coverage below target" in line]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err
    assert "target 1 - alpha = 0.95" in lines[0] and f"in {len(below)} checked round(s)" in lines[0]
    for r in below:
        assert f"round {r['round']} (calibrated policy) coverage {r['coverage']:.3f} <" in lines[0]


def test_optimize_reads_synthetic_data_as_run_does(tmp_path, capsys, placeholder_lm):
    from groundstate.eval.reground.settings import OffQueryData
    from groundstate.eval.reground.tasks import load_offquery_data

    out = tmp_path / "o"
    assert main(["optimize", "oracle", "--data", "synthetic", "--val-data", "synthetic", "--n", "3", "--metric", "t3",
                 "--out", str(out), "--no-progress"]) == 0
    data = json.loads((out / "manifest.json").read_text())["data"]
    as_run = [x.id for x in load_offquery_data(OffQueryData(data="synthetic", n=3))[0]]
    assert data["train"]["ids"] == as_run and data["train"]["file"] == "synthetic"
    assert data["train"]["synthetic"] == {"domains": ["healthcare"], "variants": ["main"], "n": 3, "seed": 0}
    assert data["val"]["synthetic"]["seed"] == 1 and not set(data["val"]["ids"]) & set(as_run)
    capsys.readouterr()
    assert main(["optimize", "oracle", "--data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing.jsonl" in err and "\n" not in err  # a file that is not there is still one line


DSPY_CHATTER = ("Bootstrapped", "Average Metric", "it/s]", "dspy.evaluate")


@pytest.mark.parametrize("argv, shown, chatter", [
    ([], True, False), (["--no-progress"], False, False), (["-v"], True, True)], ids=["default", "no-progress", "-v"])
def test_optimize_shows_one_progress_line_and_dspy_only_with_verbose(tmp_path, capsys, placeholder_lm, argv, shown,
                                                                     chatter):
    from dspy.utils.logging_utils import DSPY_LOGGING_STREAM

    stdout = sys.stdout
    assert main(["optimize", "oracle", "--data", "synthetic", "--n", "3", "--metric", "t3", "--out",
                 str(tmp_path / "o"), *argv]) == 0
    out, err = capsys.readouterr()
    lines = progress_lines(err)
    if shown:
        last = lines[-1]
        assert last.startswith("[groundstate] optimize oracle (bootstrap): scoring the optimized program, ")
        assert " metric calls (0 raised), " in last and " LM calls (0 failed), " in last and "elapsed" in last
        calls = json.loads((tmp_path / "o" / "manifest.json").read_text())["cost"]["lm_calls"]
        assert f" {calls} LM calls " in last  # every call the manifest counts, none missed or double counted
    else:
        assert lines == []
    assert any(text in out + err for text in DSPY_CHATTER) is chatter, (out, err)
    assert sys.stdout is stdout and DSPY_LOGGING_STREAM.enabled  # streams and DSPy's logging restored


def test_an_optimize_refused_before_any_work_prints_no_progress(tmp_path, capsys, placeholder_lm):
    assert main(["optimize", "oracle", "--data", "synthetic", "--n", "3", "--optimizer", "mipro",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "needs a validation set" in err and "\n" not in err and "[groundstate]" not in err
