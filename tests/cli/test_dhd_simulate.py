"""``groundstate dhd simulate`` then ``groundstate dhd analyze`` on the simulated cache, through the real entry point;
bad input is one line and exit status 2."""

from __future__ import annotations

import json

from groundstate.cli import main
from groundstate.eval.results import RESULTS, read_results

FAST = ["--permutations", "300", "--resamples", "100", "--multiplicity-permutations", "5000"]


def test_simulate_then_analyze(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "40", "--blocks", "5", "--seed", "3",
                 "--effects", "W+:0.3:0.8", "C-:0.3:0.8", "--accuracy-range", "0.5", "1", "--fail-rate", "0.01",
                 "--benchmarks", "a", "b"]) == 0
    out = capsys.readouterr().out
    assert "simulated 40 problems x 5 messages x 5 blocks" in out and "simulation.json" in out
    assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("│ loo "))  # the rich table's LOO row
    assert [c.strip() for c in row.strip("│").split("│")][:4] == ["loo", "5", "200", "5"]
    assert "BH problems W+/W-/C+/C-" in out and "failed calls" in out
    report = json.loads((cache / "analysis" / "report.json").read_text())
    loo = report["modes"]["loo"]
    assert loo["effect"]["full"] == "mean" and loo["permutation_null"]["null_kind"] == "block"
    assert {"bh", "by", "families", "excluded", "n_tested_problems", "n_patterns"} <= set(loo["multiplicity"])
    assert loo["multiplicity"]["n_permutations"] == 5000 and loo["failures"]["n_failed_calls"] > 0
    assert loo["multiplicity"]["bh"]["W+"] > 0  # strong planted effects are found
    assert loo["bootstrap"]["strata"] == {"a": 20, "b": 20}
    truth = json.loads((cache / "simulation.json").read_text())
    planted = {(m["problem_id"], m["message_id"]) for m in truth["planted"] if m["group"] == "W+"}
    selected = {s["problem_id"] for s in loo["multiplicity"]["families"]["W+"]["selected_bh"]}
    assert len(selected - {p for p, _ in planted}) <= 1  # (BH at q = 0.05: a false selection is possible)
    assert (cache / "analysis" / "multiplicity.jsonl").is_file()
    assert main(["dhd", "analyze", "--cache", str(cache), "--report-dir", str(tmp_path / "flip"), "--null", "sign-flip",
                 "--full", "a", *FAST]) == 0
    report = json.loads((tmp_path / "flip" / "report.json").read_text())
    assert report["modes"]["loo"]["permutation_null"]["null_kind"] == "sign-flip"
    assert report["modes"]["loo"]["effect"]["full"] == "a"


def test_the_default_simulation_is_realistic(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "20"]) == 0
    settings = json.loads((cache / "simulation.json").read_text())["settings"]
    assert settings["accuracy"] == [0.15, 0.06] and settings["proposal_correct"] is None
    assert settings["proposal_range"] == [0.05, 0.85]
    assert main(["dhd", "simulate", "--cache", str(tmp_path / "old"), "--n", "20", "--accuracy", "2", "1",
                 "--proposal-correct", "0.6"]) == 0
    settings = json.loads((tmp_path / "old" / "simulation.json").read_text())["settings"]
    assert settings["accuracy"] == [2.0, 1.0] and settings["proposal_correct"] == 0.6


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "5", "--blocks", "2"]) == 0
    capsys.readouterr()
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "5"]) == 2  # never into a used directory
    assert "not empty" in capsys.readouterr().err
    assert main(["dhd", "simulate", "--cache", str(tmp_path / "x"), "--effects", "W+:2:0.5"]) == 2
    assert "share and size" in capsys.readouterr().err
    run_dir = next((cache / "runs").iterdir())
    rows = read_results(run_dir / RESULTS)
    for row in rows:
        if row["outputs"]["problem_id"] == "sim0003" and row["outputs"]["block"] == 1:
            row["outputs"]["arms"] = [a for a in row["outputs"]["arms"] if a.get("message_id") != 2]
    (run_dir / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "problem 'sim0003', message 2, block 1" in err
