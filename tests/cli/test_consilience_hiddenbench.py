"""Every simulated-agent command on a HiddenBench-format file (our own fixture; the published file when
``GROUNDSTATE_HIDDENBENCH`` names it), offline."""

import json
import os
import shutil
from pathlib import Path

import dspy
import pytest

from groundstate.cli import main
from tests.conftest import requires_embedded
from tests.helpers import is_rich_table, table_row

FIXTURE = Path("tests/data/hiddenbench/hiddenbench_format.json")
PUBLISHED = os.environ.get("GROUNDSTATE_HIDDENBENCH")


@pytest.fixture()
def hb(tmp_path):
    path = tmp_path / "hb.json"
    shutil.copy(FIXTURE, path)
    return path


def summary_of(out: Path, protocol: str) -> dict:
    (path,) = [p for p in out.glob("*/summary.json") if json.loads((p.parent / "config.json").read_text())
               .get("options", {}).get("protocol") == protocol]
    return json.loads(path.read_text())


@pytest.mark.parametrize("protocol", ["hidden-pre", "hidden-post", "full-info", "hiddenbench-pre", "hiddenbench",
                                      "hiddenbench-full"])
def test_hidden_run_every_protocol_on_a_hiddenbench_file(hb, tmp_path, capsys, protocol):
    out = tmp_path / "runs"
    assert main(["hidden", "run", "--data", str(hb), "--protocol", protocol, "--agents", "sim", "--runs-dir", str(out),
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "per-fact support of 8 task(s) from the hidden-profile design default" in captured.err
    summary = summary_of(out, protocol)
    assert summary["n_done"] == 8 and summary["n_error"] == 0
    config = json.loads(next(out.glob("*/config.json")).read_text())
    assert config["options"]["agents"]["support"]["source"] == "design"  # part of the run's fingerprint
    rounds = {"hidden-post": 3, "hiddenbench": 15}.get(protocol, 0)
    assert config["options"]["rounds"] == rounds
    if protocol == "hiddenbench":
        assert "initial votes (Hidden-Pre of this run)" in captured.out
        assert "initial_task_accuracy" in summary["scores"]


def test_support_refused_when_asked_for_task_support_only(hb, tmp_path, capsys):
    code = main(["hidden", "run", "--data", str(hb), "--agents", "sim", "--support", "task", "--runs-dir",
                 str(tmp_path / "runs")])
    assert code == 2 and "need per-fact support" in capsys.readouterr().err


def test_hidden_annotate_with_an_lm_then_sim_agents_use_the_file(hb, tmp_path, capsys, monkeypatch):
    from groundstate.testing import scripted_lm

    lm = scripted_lm(lambda req: None)

    def configure(args):
        dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
        return lm, None

    monkeypatch.setattr("groundstate.cli.options.configure_lms", configure)
    assert main(["hidden", "annotate", "--data", str(hb)]) == 0
    sidecar = hb.with_name("hb.json.support.json")
    data = json.loads(sidecar.read_text())
    assert len(data["support"]) == 8 and not data["failures"]
    calls = lm.engine.calls
    assert main(["hidden", "annotate", "--data", str(hb)]) == 0 and lm.engine.calls == calls  # reused
    capsys.readouterr()
    out = tmp_path / "runs"
    assert main(["hidden", "run", "--data", str(hb), "--agents", "sim", "--runs-dir", str(out), "--no-progress"]) == 0
    assert "from hb.json.support.json" in capsys.readouterr().err
    config = json.loads(next(out.glob("*/config.json")).read_text())
    assert config["options"]["agents"]["support"]["source"] == "file"


def test_the_whole_consilience_workflow_on_a_hiddenbench_file(hb, tmp_path, capsys):
    sim = ["--agents", "sim", "--max-rounds", "4"]
    assert main(["consilience", "split", "--data", str(hb), "--train-share", "0.25", "--calibration-share",
                 "0.5", "--test-share", "0.25"]) == 0
    parts = {name: tmp_path / f"hb.{name}.jsonl" for name in ("train", "calibration", "test")}
    x, mlp = tmp_path / "x.jsonl", tmp_path / "mlp"
    assert main(["consilience", "explore", "--data", str(parts["train"]), "--out", str(x), *sim]) == 0
    assert main(["consilience", "train", "--data", str(x), "--out", str(mlp)]) == 0
    manifest = json.loads((mlp / "manifest.json").read_text())
    assert manifest["features"] == ["H", "D", "R", "G", "C", "P"]
    assert manifest["actions"] == ["Challenge", "Clarify", "SeekEvidence", "Route"]
    for controller in ("rules", "mlp"):
        assert main(["consilience", "calibrate", "--data", str(parts["calibration"]), "--controller", controller,
                     "--mlp", str(mlp), "--alpha", "0.3", "--out", str(tmp_path / f"cal-{controller}"), *sim]) == 0
    cal = ["--calibrator", f"rules={tmp_path / 'cal-rules'}", f"mlp={tmp_path / 'cal-mlp'}"]
    runs = ["--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(["consilience", "evaluate", "--data", str(parts["test"]), "--controllers", "rules", "mlp", "--mlp",
                 str(mlp), *cal, *runs, *sim]) == 0
    capsys.readouterr()
    code = main(["consilience", "coverage", "--data", str(parts["test"]), "--calibrator", str(tmp_path / "cal-rules"),
                 "--min-calibration", "2", "--json-out", str(tmp_path / "cov.json"), *sim])
    text = capsys.readouterr().out
    assert code in (0, 1) and "calibrated policy" in text and "deployed policy" in text
    report = json.loads((tmp_path / "cov.json").read_text())
    assert {r["policy"] for r in report["deployed"]} == {"deployed"} and report["calibrated"]
    assert main(["consilience", "table", "--data", str(hb), "--preset", "hiddenbench", "--controllers", "rules",
                 "mlp", "--mlp", str(mlp), *cal, "--report-dir", str(tmp_path / "table"), *runs, *sim]) == 0
    table = json.loads((tmp_path / "table" / "table.json").read_text())
    assert [r["labels"]["method"] for r in table["rows"]] == ["Hidden-Pre", "Hidden-Post", "Full-Info", "Rules",
                                                              "MLP"]
    assert (tmp_path / "table" / "table.md").read_text().count("|") > 20
    assert main(["consilience", "routing", "--data", str(parts["test"]), *sim]) == 0
    out = capsys.readouterr().out
    assert is_rich_table(out) and "normalized regret" in out and len(table_row(out, "round-robin")) == 6
    assert table_row(out, "round-robin")[-1] == "0.0%" and "picked another speaker than round-robin at" in out
    assert main(["consilience", "ablate", "actions", "--calibration-data", str(parts["calibration"]), "--data",
                 str(parts["test"]), "--controllers", "rules", "--max-rounds", "4", "--agents", "sim"]) == 0
    out = capsys.readouterr().out
    assert is_rich_table(out) and "configuration" in out and len(table_row(out, "-Route")) == 2
    assert main(["consilience", "generalize", "--data", str(hb), "--train-size", "5", "--splits", "1",
                 "--max-rounds", "3", "--agents", "sim", "--json-out", str(tmp_path / "gen.json")]) == 0
    out = capsys.readouterr().out
    assert is_rich_table(out) and "held-out MLP" in out and "mean over splits" in out
    assert table_row(out, "0")[1] != "-"  # split 0's held-out accuracy
    assert json.loads((tmp_path / "gen.json").read_text())["splits"][0]["n_test"] == 3


@pytest.mark.skipif(not PUBLISHED, reason="set GROUNDSTATE_HIDDENBENCH to the published HiddenBench file to run")
def test_the_published_hiddenbench_file(tmp_path, capsys):
    out = tmp_path / "runs"
    for protocol in ("hiddenbench", "hiddenbench-full"):
        assert main(["hidden", "run", "--data", PUBLISHED, "--protocol", protocol, "--agents", "sim", "--runs-dir",
                     str(out), "--no-progress"]) == 0
        assert summary_of(out, protocol)["n_done"] == 65
    assert main(["consilience", "table", "--data", PUBLISHED, "--preset", "hiddenbench", "--controllers", "rules",
                 "--agents", "sim", "--runs-dir", str(out), "--no-progress", "--report-dir", str(tmp_path / "t")]) == 0


@pytest.mark.embedded
@requires_embedded
def test_embedded_annotation_of_one_task(tmp_path):
    tasks = json.loads(FIXTURE.read_text())[:1]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(tasks))
    assert main(["hidden", "annotate", "--data", str(path), "--lm", "embedded", "--call-threads", "1"]) == 0
    data = json.loads((tmp_path / "one.json.support.json").read_text())
    facts = data["support"][str(tasks[0]["id"])]
    assert len(facts) == len(tasks[0]["shared_information"]) + len(tasks[0]["hidden_information"])
    assert all(set(w) == set(tasks[0]["possible_answers"]) and all(v in (-2, -1, 0, 1, 2) for v in w.values())
               for w in facts.values())
