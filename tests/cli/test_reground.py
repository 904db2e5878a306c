import json

import pytest

from groundstate.cli import main
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.conftest import requires_embedded


@pytest.fixture
def placeholder_lm(monkeypatch):
    lm = scripted_lm()  # fills every output schema with placeholders
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


def test_run_reground_on_synthetic_prints_scores_and_stores_run(tmp_path, capsys, placeholder_lm):
    out = tmp_path / "runs"
    assert main(["run", "reground", "--data", "synthetic", "--n", "3", "--runs-dir", str(out), "--threads", "2"]) == 0
    text = capsys.readouterr().out
    for metric in ("t1", "t2", "t3", "LM calls / record", "tokens / record", "stored in"):
        assert metric in text
    run_dir = next(out.iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_done"] == 3 and summary["n_error"] == 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["options"]["condition"] == "unreliable" and config["options"]["judge"].startswith("lexical")
    row = json.loads((run_dir / "results.jsonl").read_text().splitlines()[0])
    assert set(row["outputs"]) == {"misleading_agent", "state", "kept_facts", "removed_facts", "answer"}
    assert set(row["trace"]) == {"verify", "reconstruct", "resolve"}


def test_condition_and_knobs_change_the_run_id(tmp_path, placeholder_lm):
    out = tmp_path / "runs"
    base = ["run", "reground", "--n", "1", "--runs-dir", str(out), "--no-progress"]
    assert main(base) == 0
    assert main([*base, "--condition", "reliable"]) == 0
    assert main([*base, "--max-candidates", "2"]) == 0
    assert len(list(out.iterdir())) == 3


def test_compare_writes_table_json_chart_and_reuses_runs(tmp_path, capsys, placeholder_lm):
    out = tmp_path / "runs"
    report = tmp_path / "report"
    args = ["compare", "reground", "oracle", "--n", "2", "--runs-dir", str(out), "--report-dir", str(report),
            "--oracle-attribution", "gold"]
    capsys.readouterr()
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "T2 retention" in text and "oracle (upper" in text
    assert "|" not in text and "t2_retention" not in text  # a rich table with human headers, not Markdown
    table = (report / "compare.md").read_text()
    assert "| reground |" in table and "| oracle (upper bound; T1/T2 from ground truth) |" in table
    data = json.loads((report / "compare.json").read_text())
    oracle = next(r for r in data["rows"] if r["name"] == "oracle")
    assert oracle["t1"]["mean"] == 1.0  # the oracle's T1 comes from ground truth
    assert (report / "compare.png").stat().st_size > 1000
    calls = placeholder_lm.engine.calls
    assert main(args) == 0  # the stored runs are reused: no new LM calls
    assert placeholder_lm.engine.calls == calls


def test_compare_rejects_unknown_program(tmp_path, capsys):
    assert main(["compare", "reground", "nosuch", "--runs-dir", str(tmp_path)]) == 2
    assert "unknown program 'nosuch'" in capsys.readouterr().err


@pytest.mark.embedded
@requires_embedded
def test_embedded_run_reground_end_to_end(tmp_path, capsys):
    out = tmp_path / "runs"
    # the minimum that proves the path (1 record, M = 1): the embedded model is a plumbing LM
    assert main(["run", "reground", "--data", "synthetic", "--n", "1", "--max-candidates", "1", "--runs-dir", str(out),
                 "--threads", "2", "--no-progress"]) == 0
    summary = json.loads(next(out.glob("*/summary.json")).read_text())
    assert summary["n_done"] == 1
    assert summary["n_error"] == 0, summary
    assert summary["tokens"]["total"] > 0 and summary["lm_calls"]["per_record"] >= 8
    for metric in ("t1", "t2", "t3"):
        assert summary["scores"][metric]["n"] == 1


def test_compare_all_baselines_with_placeholder_lm(tmp_path, placeholder_lm):
    report = tmp_path / "report"
    programs = ["reground", "standard", "voting", "robin", "manager", "instructor", "self-reflect", "confidence",
                "oracle"]
    assert main(["compare", *programs, "--n", "1", "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(report),
                 "--no-progress"]) == 0
    rows = json.loads((report / "compare.json").read_text())["rows"]
    assert [r["name"] for r in rows] == programs
    assert all(r["errors"] == 0 and r["n"] == 1 for r in rows)
