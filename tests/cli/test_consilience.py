import json

from groundstate.cli import main
from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks


def test_consilience_workflow(tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "60", "--seed", "3", "--out", str(tasks)]) == 0
    assert main(["consilience", "split", "--data", str(tasks), "--train-share", "0.3", "--calibration-share",
                 "0.4", "--test-share", "0.3"]) == 0
    parts = {name: tmp_path / f"tasks.{name}.jsonl" for name in ("train", "calibration", "test")}
    ids = [{t.id for t in load_hidden_tasks(p)} for p in parts.values()]
    assert sum(map(len, ids)) == 60 and not ids[0] & ids[1] and not ids[1] & ids[2] and not ids[0] & ids[2]
    sim = ["--agents", "sim", "--max-rounds", "5"]
    assert main(["consilience", "explore", "--data", str(parts["train"]), "--out", str(tmp_path / "x.jsonl"),
                 *sim]) == 0
    rows = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert len(rows) == 18 * 5 and len(rows[0]["rewards"]) == 4 and rows[0]["actions"][-1] == "Route"
    assert main(["consilience", "train", "--data", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "mlp"),
                 "--drop-features", "cost"]) == 0
    manifest = json.loads((tmp_path / "mlp" / "manifest.json").read_text())
    assert "C" not in manifest["features"] and manifest["dropped_feature_groups"] == ["cost"]
    for controller in ("rules", "mlp"):
        assert main(["consilience", "calibrate", "--data", str(parts["calibration"]), "--controller", controller,
                     "--mlp", str(tmp_path / "mlp"), "--alpha", "0.2", "--out", str(tmp_path / f"cal-{controller}"),
                     *sim]) == 0
    params = json.loads((tmp_path / "cal-rules" / "params.json").read_text())
    assert params["alpha"] == 0.2 and params["config"]["controller"] == "rules" and params["counts"]["0"] == 24
    capsys.readouterr()
    assert main(["consilience", "evaluate", "--data", str(parts["test"]), "--controllers", "rules", "mlp",
                 "--mlp", str(tmp_path / "mlp"), "--calibrator", f"rules={tmp_path / 'cal-rules'}",
                 f"mlp={tmp_path / 'cal-mlp'}", "--runs-dir", str(tmp_path / "runs"), "--report-dir",
                 str(tmp_path / "report"), "--no-progress", *sim]) == 0
    out = capsys.readouterr().out
    for name in ("hidden-pre", "hidden-post", "full-info", "rules", "mlp", "task accuracy", "vote accuracy"):
        assert name in out
    assert "|" not in out and "TASK_ACCURACY" not in out and "task_accuracy" not in out  # a rich table
    report = json.loads((tmp_path / "report" / "consilience.json").read_text())
    assert all(r["n"] == 18 and r["errors"] == 0 for r in report["rows"])
    # ablations: a removed action, another router, sampling from the conformal set (uncertified: no calibrator)
    assert main(["consilience", "evaluate", "--data", str(parts["test"]), "--controllers", "rules",
                 "--baselines", "--remove-action", "Route", "--router", "random", "--sample-from-set",
                 "--runs-dir", str(tmp_path / "runs"), "--no-progress", *sim[:2], "--max-rounds", "5"]) == 0
    assert "rules (uncertified) [sampled every-round]" in capsys.readouterr().out
    code = main(["consilience", "coverage", "--data", str(parts["test"]), "--calibrator", str(tmp_path / "cal-rules"),
                 "--min-calibration", "20", *sim])
    text = capsys.readouterr().out
    assert "calibrated policy" in text and "deployed policy" in text and code in (0, 1)


def test_calibrator_used_with_another_configuration_is_refused(tmp_path, capsys):
    tasks = tmp_path / "t.jsonl"
    main(["hidden", "generate", "travel", "--n", "8", "--out", str(tasks)])
    main(["consilience", "calibrate", "--data", str(tasks), "--agents", "sim", "--out", str(tmp_path / "cal"),
          "--max-rounds", "3"])
    capsys.readouterr()
    code = main(["consilience", "evaluate", "--data", str(tasks), "--agents", "sim", "--controllers", "rules",
                 "--calibrator", f"rules={tmp_path / 'cal'}", "--router", "round-robin", "--max-rounds", "3",
                 "--runs-dir", str(tmp_path / "runs")])
    assert code == 2
    err = capsys.readouterr().err
    assert "fitted for another configuration" in err and "router" in err


def test_a_refitted_calibrator_at_the_same_path_is_a_new_run(tmp_path, capsys):
    """The run id hashes the calibrator's contents, not only its path: a refit is never read as the old run."""
    tasks = tmp_path / "t.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "12", "--seed", "1", "--out", str(tasks)]) == 0
    sim = ["--agents", "sim", "--max-rounds", "3"]

    def evaluate_with(alpha: str) -> set[str]:
        assert main(["consilience", "calibrate", "--data", str(tasks), "--alpha", alpha, "--out",
                     str(tmp_path / "cal"), *sim]) == 0
        assert main(["consilience", "evaluate", "--data", str(tasks), "--controllers", "rules", "--calibrator",
                     f"rules={tmp_path / 'cal'}", "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                     *sim]) == 0
        return {p.name for p in (tmp_path / "runs").iterdir() if p.name.startswith("consilience-rules")}

    first = evaluate_with("0.2")
    second = evaluate_with("0.4")
    assert len(first) == 1 and len(second) == 2  # the refit made a run of its own
    config = json.loads((tmp_path / "runs" / next(iter(first)) / "config.json").read_text())
    assert len(config["options"]["artifacts"]["calibrator"]) == 16
