"""``runs show RUN --trace``, ``run reground --show-trace`` and ``compare --show-trace``: a stored run's per-stage
trace beside the gold labels, as the demo prints it (issue 26 item 8, issue 27 item 3); bad input is one line."""

from __future__ import annotations

import json

import pytest

from groundstate.cli import main
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.eval.reground.test_trace import responder
from tests.test_hostile_files import run_cli

FIRST = "synthetic-healthcare-main-s0-00000"


@pytest.fixture
def lm(monkeypatch):
    lm = scripted_lm(responder)
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "synthetic.jsonl"
    assert main(["data", "generate", "offquery", "--domain", "both", "--variant", "all", "--n", "2", "--out",
                 str(path)]) == 0
    return path


def _run_dir(runs):
    return next(p for p in runs.iterdir() if (p / "config.json").is_file())


def test_compare_show_trace_prints_each_stage_beside_the_gold_and_writes_the_chart(tmp_path, capsys, lm, data):
    report = tmp_path / "report"
    assert main(["compare", "reground", "--data", str(data), "--limit", "1", "--runs-dir", str(tmp_path / "runs"),
                 "--report-dir", str(report), "--max-candidates", "1", "--show-trace", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"record {FIRST}" in out and "(n=1, no interval)" in out
    assert "round 1: conflict pair" in out and "judged incorrect" in out and "blamed: agent 5" in out
    assert "gold misleading: agent 5 -> right (T1 1)" in out  # the first episode's planted agent is agent 5
    assert "kept    Troponin is normal." in out and "dropped The patient had surgery." in out
    assert "T3 resolution: answered C" in out and "gold answer: C -> right (T3 1)" in out
    assert "\u202e" not in out and "they disagree\\u202e" in out  # the model's text escaped, never sent as is
    assert (report / "compare.png").stat().st_size > 0


def test_runs_show_trace_with_the_runs_data_a_record_and_refusals(tmp_path, capsys, lm, data):
    runs = tmp_path / "runs"
    assert main(["run", "reground", "--data", str(data), "--limit", "2", "--runs-dir", str(runs), "--max-candidates",
                 "1", "--no-progress"]) == 0
    run_id = _run_dir(runs).name
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--runs-dir", str(runs), "--trace", "--data", str(data), "--record",
                 FIRST]) == 0
    out = capsys.readouterr().out
    assert out.count("record synthetic-") == 1 and "gold misleading: agent 5" in out and "gold answer: C" in out
    assert main(["runs", "show", run_id, "--runs-dir", str(runs), "--trace"]) == 0  # a file run without --data:
    out = capsys.readouterr().out  # the gold labels its rows store (issue 26 item 5)
    assert out.count("record synthetic-") == 2 and "gold misleading: agent 5" in out and "T1 1" in out

    other = tmp_path / "other.jsonl"
    assert main(["data", "generate", "offquery", "--n", "1", "--seed", "4", "--out", str(other)]) == 0
    for argv, words in (
        (["--trace", "--data", str(other)], ("other.jsonl", "is not the data run")),
        (["--trace", "--record", "nosuch"], ("no record 'nosuch'", "results.jsonl")),
        (["--record", FIRST], ("--record and --data go with --trace",)),
        (["--trace", "--json"], ("--trace shows the traces as text",)),
        (["--trace", "--data", str(tmp_path / "missing.jsonl")], ("missing.jsonl",)),
    ):
        capsys.readouterr()
        assert main(["runs", "show", run_id, "--runs-dir", str(runs), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and all(w in err for w in words), err


def test_run_show_trace_on_synthetic_data_regenerates_the_gold(tmp_path, capsys, lm):
    assert main(["run", "reground", "--data", "synthetic", "--n", "1", "--runs-dir", str(tmp_path / "runs"),
                 "--max-candidates", "1", "--show-trace", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"record {FIRST}" in out and "gold misleading: agent 5 -> right (T1 1)" in out


def test_a_hostile_results_file_is_shown_escaped_never_a_traceback(tmp_path, lm, data):
    runs = tmp_path / "runs"
    assert main(["run", "reground", "--data", str(data), "--limit", "1", "--runs-dir", str(runs), "--max-candidates",
                 "1", "--no-progress"]) == 0
    run_dir = _run_dir(runs)
    row = json.loads((run_dir / "results.jsonl").read_text())
    row["trace"]["verify"]["rounds"] = [{"round": "x", "pair": [[1]], "conflict_reason": "\x1b]0;owned\x07[red]x[/]"},
                                        "not a round"]
    row["trace"]["reconstruct"]["facts"] = [{"fact": "a\u202eb", "kept": True}, 5]
    row["outputs"]["misleading_agent"] = {"agent": "\x1b[2J"}
    (run_dir / "results.jsonl").write_text(json.dumps(row) + "\n")
    code, out, err = run_cli(["runs", "show", run_dir.name, "--runs-dir", str(runs), "--trace"], tmp_path)
    assert code == 0, err
    assert "Traceback" not in err and "\x1b" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07[red]x[/]" in out and "a\\u202eb" in out  # shown as text, not run as markup
