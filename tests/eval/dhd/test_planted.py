"""A simulated cache's selections scored against the effects ``dhd simulate`` planted (issue 26 item 8): the counts
by hand, the figures ``dhd analyze`` prints and writes, and a hostile ``simulation.json`` as one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from groundstate.cli import main
from groundstate.errors import InputError
from groundstate.eval.dhd.planted import MEANING, planted_recall, read_truth, recall_cells

FAST = ["--permutations", "200", "--resamples", "100", "--multiplicity-permutations", "2000"]


def _values(rows):
    return pd.DataFrame(rows, columns=["problem_id", "message_id", "proposal_correct", "estimate", "group"])


def test_counts_by_hand():
    keys = [("p0", 0), ("p0", 1), ("p1", 0), ("p1", 1), ("p2", 0)]
    values = _values([
        ("p0", 0, False, 0.6, "W+"),  # planted W+, separated W+: true
        ("p0", 1, True, -0.2, "indeterminate"),  # not planted
        ("p1", 0, False, -0.4, "W-"),  # planted W+ but selected with the other sign: false
        ("p1", 1, True, -0.5, "C-"),  # not planted: false
        ("p2", 0, True, 0.0, "indeterminate"),  # planted C-, clipped to nothing: not an effect
    ])
    truth = [{"problem_id": "p0", "message_id": 0, "planted": 1, "group": "W+", "true_value": 0.6},
             {"problem_id": "p1", "message_id": 0, "planted": 1, "group": "W+", "true_value": 0.6},
             {"problem_id": "p2", "message_id": 0, "planted": -1, "group": "C-", "true_value": -1e-12},
             {"problem_id": "p9", "message_id": 3, "planted": -1, "group": "C-", "true_value": -0.5}]  # not analysed
    fdr = {"bh": np.array([True, False, False, True, False]), "by": np.zeros(5, dtype=bool)}
    families = {"W+": {"selected_bh": [{"problem_id": "p1"}], "selected_by": []},
                "C-": {"selected_bh": [{"problem_id": "p1"}], "selected_by": []}}
    result = planted_recall(truth, keys, values, fdr, {"families": families})
    assert (result["n_planted"], result["n_clipped"], result["n_not_analyzed"]) == (2, 1, 1)
    s = result["selections"]
    assert (s["separated"]["n_selected"], s["separated"]["true"], s["separated"]["false"]) == (3, 1, 2)
    assert s["separated"]["recall"] == 0.5 and s["separated"]["fdp"] == pytest.approx(2 / 3)
    assert (s["bh_messages"]["true"], s["bh_messages"]["false"]) == (1, 1)  # p0/0 as W+; p1/1 as C-
    assert (s["by_messages"]["n_selected"], s["by_messages"]["fdp"], s["by_messages"]["recall"]) == (0, None, 0.0)
    problems = s["bh_problems"]  # p1 in W+ (it has a planted W+ message) and in C- (it has none)
    assert (problems["n_selected"], problems["true"], problems["false"], problems["n_planted"]) == (2, 1, 1, 2)
    assert s["by_problems"]["recall"] == 0.0
    header, rows = recall_cells(result)
    assert header[-1] == "recall" and rows[0][-1] == "1/2 (50%)" and rows[0][-2] == "2 (67%)"


def test_under_the_null_every_selection_is_false_and_recall_is_not_a_number():
    keys = [("p0", 0)]
    values = _values([("p0", 0, True, 0.5, "C+")])
    result = planted_recall([], keys, values, {"bh": np.array([True]), "by": np.array([False])}, {})
    assert result["n_planted"] == 0
    assert result["selections"]["separated"]["recall"] is None and result["selections"]["separated"]["false"] == 1


def test_simulate_then_analyze_prints_and_writes_recall(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "60", "--blocks", "8", "--seed", "1",
                 "--effects", "W+:0.3:0.9", "C-:0.3:0.9", "--accuracy", "2", "2"]) == 0
    capsys.readouterr()
    assert main(["dhd", "analyze", "--cache", str(cache), "--label", "sim", *FAST]) == 0
    out = capsys.readouterr().out
    assert "selections against the" in out and "false discoveries (FDP)" in out and "recall: the share" in out
    report = json.loads((cache / "analysis" / "report.json").read_text())
    planted = report["planted_truth"]["loo"]
    truth = {(t["problem_id"], t["message_id"]): t["group"]
             for t in json.loads((cache / "simulation.json").read_text())["planted"] if abs(t["true_value"]) >= 0.01}
    assert planted["n_planted"] == len(truth) > 0
    labels = [json.loads(line) for line in (cache / "analysis" / "labels.jsonl").read_text().splitlines()]
    separated = [(r["problem_id"], r["message_id"], r["group"]) for r in labels if r["group"] != "indeterminate"]
    hits = sum(truth.get((p, m)) == g for p, m, g in separated)
    assert (planted["selections"]["separated"]["true"], planted["selections"]["separated"]["n_selected"]) == \
        (hits, len(separated))
    bh = planted["selections"]["bh_messages"]
    assert bh["n_selected"] == report["modes"]["loo"]["fdr"]["n_bh"] and bh["true"] > 0  # power: something real
    tables = (cache / "analysis" / "tables.md").read_text()
    assert "Selections against the planted truth (sim, loo" in tables and MEANING[1:40] in tables
    assert "Selections against the planted truth (loo" in (cache / "analysis" / "report.md").read_text()


def test_a_real_cache_has_no_planted_truth(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "10", "--blocks", "3"]) == 0
    (cache / "simulation.json").unlink()  # what a replayed (real) cache looks like: no truth beside it
    capsys.readouterr()
    assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 0
    assert "planted" not in capsys.readouterr().out
    assert "planted_truth" not in json.loads((cache / "analysis" / "report.json").read_text())
    assert "planted truth" not in (cache / "analysis" / "tables.md").read_text()


@pytest.mark.parametrize("change, field", [
    (lambda t: t["planted"][0].update(message_id="3"), "planted[0].message_id"),
    (lambda t: t["planted"][0].update(group="X+"), "planted[0].group"),
    (lambda t: t["planted"][0].update(planted=0), "planted[0].planted"),
    (lambda t: t.pop("planted"), "planted"),
])
def test_a_hostile_truth_file_is_one_line_before_anything_is_written(tmp_path, capsys, change, field):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "10", "--blocks", "3", "--effects",
                 "C+:0.5:0.5"]) == 0
    truth = json.loads((cache / "simulation.json").read_text())
    assert truth["planted"]
    change(truth)
    (cache / "simulation.json").write_text(json.dumps(truth))
    capsys.readouterr()
    assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "simulation.json" in err and field in err and "Traceback" not in err
    assert not (cache / "analysis").exists()  # refused before the analysis wrote anything


def test_a_truth_path_that_is_no_regular_file_is_refused(tmp_path):
    (tmp_path / "simulation.json").mkdir()
    with pytest.raises(InputError, match="simulation.json"):
        read_truth(tmp_path)
    os.rmdir(tmp_path / "simulation.json")
    os.mkfifo(tmp_path / "simulation.json")
    with pytest.raises(InputError, match="simulation.json"):  # never blocks on a FIFO
        read_truth(tmp_path)
    assert read_truth(tmp_path / "nowhere") is None


def test_dhd_tables_refuses_a_report_with_a_malformed_planted_truth(tmp_path, capsys):
    cache = tmp_path / "sim"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "10", "--blocks", "3", "--effects",
                 "C+:0.5:0.5"]) == 0
    assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 0
    path = cache / "analysis" / "report.json"
    report = json.loads(path.read_text())
    report["planted_truth"]["loo"]["selections"]["separated"]["true"] = "many"
    path.write_text(json.dumps(report))
    capsys.readouterr()
    assert main(["dhd", "tables", "--analysis", str(cache / "analysis"), "--report-dir", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "report.json" in err and "planted_truth" in err
