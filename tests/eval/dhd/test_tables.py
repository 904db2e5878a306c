"""The paper-layout tables (17, 18, 19, 23, 24-26): rows from hand-built reports with the numbers worked out, and
``dhd analyze`` / ``dhd tables`` end to end on a simulated two-benchmark cache."""

from __future__ import annotations

import json

import pytest

from groundstate.cli import main
from groundstate.eval.dhd.masking import mask_table
from groundstate.eval.dhd.tables import TableSource, paper_tables, tables_markdown, write_tables

FAST = ["--permutations", "200", "--resamples", "100", "--multiplicity-permutations", "2000"]


def _loo(groups, disagreement, boot, by_benchmark=None):
    null = {g: {"low": 1, "high": 9, "mean": 4.0} for g in ("W+", "W-", "C+", "C-")}
    null["separated"] = {"low": 10, "high": 30, "mean": 20.0}
    observed = {**{g: groups[g] for g in ("W+", "W-", "C+", "C-")}, "separated": groups["separated"]}
    return {"K": 5, "n_messages": 100, "n_blocks": 5, "groups": groups, "disagreement": disagreement,
            "bootstrap": boot, "permutation_null": {"observed": observed, "null": null, "n_permutations": 5000},
            "multiplicity": {"bh": {"W+": 3, "W-": 1, "C+": 0, "C-": 2, "off_diagonal": 4, "any_effect": 5},
                             "by": {"W+": 1, "W-": 0, "C+": 0, "C-": 1, "off_diagonal": 1, "any_effect": 2},
                             "n_tested_problems": 20},
            "fdr": {"p_values": "within-block permutation", "n_tests": 100, "n_bh": 9, "n_by": 2,
                    "counts": {"bh": {"W+": 4, "W-": 2, "C+": 3, "C-": 0, "indeterminate": 0, "separated": 9},
                               "by": {"W+": 1, "W-": 0, "C+": 1, "C-": 0, "indeterminate": 0, "separated": 2}}},
            "strict": {"W+": 2, "C-": 1, "n_strict": 90, "n_messages": 100},
            **({"by_benchmark": by_benchmark} if by_benchmark else {})}


def _report():
    groups = {"W+": 4, "W-": 2, "C+": 5, "C-": 3, "indeterminate": 86, "separated": 14}
    part = {"W+": 1, "W-": 1, "C+": 2, "C-": 1, "indeterminate": 45, "separated": 5}
    boot = {"wrong": {"mean": -0.0166, "low": -0.0291, "high": -0.0045, "n": 40},
            "correct": {"mean": 0.0134, "low": 0.0065, "high": 0.0202, "n": 60},
            "difference": {"mean": 0.03, "low": 0.0172, "high": 0.0428, "n": 100}, "strata": {"x": 10, "y": 10}}
    by = {"x": {"groups": part, "disagreement": {"rate": 0.091, "low": 0.075, "high": 0.11, "n": 500},
                "bootstrap": {"wrong": {"mean": 0.0, "low": -0.0204, "high": 0.0207, "n": 20},
                              "correct": None, "difference": None}}}
    return {"modes": {"loo": _loo(groups, {"rate": 0.073, "low": 0.066, "high": 0.08, "n": 1000}, boot, by)}}


def _crossfit(gain_main, gain_a, gain_b):
    def row(gain):
        controls = {"all_action": {"low": -0.0078, "high": 0.0082, "p_value": 0.001},
                    "removal_identity": {"low": -0.005, "high": 0.0064, "p_value": 0.002}}
        return {"full_accuracy": 0.7185, "crossfit_accuracy": 0.7185 + gain, "n_problems": 200, "n_units": 1000,
                "gain": {"mean": gain, "low": gain - 0.008, "high": gain + 0.0082, "n": 200}, "controls": controls,
                "by_benchmark": {"x": {"gain": {"mean": 0.0215}, "n_problems": 100},
                                 "y": {"gain": {"mean": 0.0275}, "n_problems": 100}}}
    return {"variants": {"main": row(gain_main), "A": row(gain_a), "B": row(gain_b)}}


def test_rows_carry_the_reports_numbers_in_the_papers_units():
    sources = [TableSource("oss", _report(), _crossfit(0.0168, 0.017, 0.0118)),
               TableSource("gemma", _report(), None, crossfit_note="too few blocks")]
    tables = paper_tables(sources)["tables"]
    t17 = tables["17"]["rows"]
    assert [(r["model"], r["benchmark"]) for r in t17] == [("oss", "x"), ("oss", "Pooled"), ("gemma", "x"),
                                                           ("gemma", "Pooled")]
    assert t17[1]["disagreement"] == 7.3 and (t17[1]["low"], t17[1]["high"]) == (6.6, 8.0)
    assert (t17[1]["W+"], t17[1]["C-"], t17[1]["indeterminate"]) == (4, 3, 86)
    t18 = tables["18"]["rows"]
    assert t18[1]["wrong"] == {"mean": -1.66, "low": -2.91, "high": -0.45, "n": 40}
    assert t18[1]["correct_minus_wrong"]["mean"] == 3.0 and t18[1]["stratified"] is True
    assert t18[0]["correct"] is None  # a benchmark without correct-answer messages has no estimate, not a zero
    t19 = tables["19"]["rows"][0]
    assert t19["separated"] == {"observed": 14, "low": 10, "high": 30}
    # the paper's BH column is per-message (its caption tests 5,000 messages); the problem level is labelled apart
    assert t19["bh"] == {"W+": 4, "W-": 2, "C+": 3, "C-": 0} and t19["by"] == {"W+": 1, "W-": 0, "C+": 1, "C-": 0}
    assert t19["problem_bh"] == {"W+": 3, "W-": 1, "C+": 0, "C-": 2} and t19["strict"] == {"W+": 2, "C-": 1}
    assert t19["problem_by"] == {"W+": 1, "W-": 0, "C+": 0, "C-": 1}
    assert t19["message_p_values"] == "within-block permutation" and t19["n_tested_messages"] == 100
    t24 = tables["24"]["rows"]
    assert len(t24) == 1 and t24[0]["full"] == 71.85 and t24[0]["crossfit"] == pytest.approx(73.53)
    assert t24[0]["gain"]["mean"] == 1.68
    assert tables["25"]["rows"] == [{"benchmark": "x", "oss": {"gain": 2.15, "n_problems": 100}},
                                    {"benchmark": "y", "oss": {"gain": 2.75, "n_problems": 100}}]
    t26 = tables["26"]["rows"]
    assert [r["arm"] for r in t26] == ["(A+B)/2", "A", "B"]
    assert t26[1]["observed"] == 1.7 and t26[2]["all_action"] == {"low": -0.78, "high": 0.82, "p_value": 0.001}
    assert "23" not in tables  # no masking run: left out, not filled in
    notes = paper_tables(sources)["notes"]
    assert any("gemma: no cross-fit (too few blocks)" in n for n in notes)
    assert any("no masking run" in n for n in notes)


def test_markdown_has_the_papers_columns():
    text = tables_markdown(paper_tables([TableSource("oss", _report(), _crossfit(0.0168, 0.017, 0.0118))]))
    assert "| Model | Benchmark | Disagreement [95% CI] | W+ | W- | C+ | C- | Indeterminate |" in text
    assert "| oss | Pooled | 7.3% [6.6, 8.0] | 4 | 2 | 5 | 3 | 86 |" in text
    assert "| oss | Pooled | -1.66 [-2.91, -0.45] | +1.34 [+0.65, +2.02] | +3.00 [+1.72, +4.28] |" in text
    assert ("| Model | Separated [null] | W+ [null] | W- [null] | C+ [null] | C- [null] | BH W+/W-/C+/C- | "
            "BY W+/W-/C+/C- | Problem-level BH W+/W-/C+/C- | Strict W+/C- |") in text
    assert "| oss | 14 [10,30] | 4 [1,9] | 2 [1,9] | 5 [1,9] | 3 [1,9] | 4/2/3/0 | 1/0/1/0 | 3/1/0/2 | 2/1 |" in text
    assert "| oss | 71.85 -> 73.53 | +1.68 [+0.88, +2.50] |" in text
    assert "| x | +2.15 |" in text
    assert "| oss / A | +1.70 | [-0.78, +0.82] | [-0.50, +0.64] |" in text


def test_a_report_from_before_the_per_message_column_shows_it_as_not_measured():
    report = _report()
    report["modes"]["loo"]["fdr"] = {"n_tests": 100, "n_bh": 0, "n_by": 0,  # the old sign-flip secondary view
                                     "counts": {"bh": dict.fromkeys(("W+", "W-", "C+", "C-"), 0),
                                                "by": dict.fromkeys(("W+", "W-", "C+", "C-"), 0)}}
    tables = paper_tables([TableSource("oss", report)])
    row = tables["tables"]["19"]["rows"][0]
    assert row["bh"] == dict.fromkeys(("W+", "W-", "C+", "C-")) and row["problem_bh"]["W+"] == 3
    assert "| -/-/-/- | -/-/-/- | 3/1/0/2 |" in tables_markdown(tables)


def test_table_23_from_a_masking_table():
    def arms(full, repeat, rest):
        out = [{"arm": "full", "variant": "full", "replicate": j, "correct": v} for j, v in enumerate(full)]
        out += [{"arm": "repeat", "variant": "repeat", "replicate": j, "correct": v} for j, v in enumerate(repeat)]
        return out + [{"arm": k, "variant": k, "replicate": 0, "correct": v} for k, v in rest.items()]

    rest = {"remove": 0, "neutral": 1, "hide_answer": 1, "hide_reasoning": 0}
    blocks = [{"problem_id": "p", "message_id": 0, "repeat": r, "category": "wrong-helpful", "K": 5,
               "arms": arms([1, 1], [1, 0], rest)} for r in range(2)]
    sample = {"pairs": [{"problem_id": "p", "message_id": 0, "category": "wrong-helpful"}]}
    rows = paper_tables([TableSource("oss", _report(), mask=mask_table(blocks, sample))])["tables"]["23"]["rows"]
    helpful = rows[0]
    assert helpful["title"] == "Wrong-helpful" and helpful["n"] == 1
    assert (helpful["full"], helpful["repeat"], helpful["remove"], helpful["hide_answer"]) == (100, 50, 0, 100)
    assert [r["category"] for r in rows] == ["wrong-helpful", "correct-helpful", "wrong-harmful", "correct-harmful",
                                             "indeterminate", "all"]  # the empty categories are shown, empty
    assert rows[3]["n"] == 0 and rows[3]["full"] is None
    # a masking table written before empty categories kept their rows gets them too
    old = mask_table(blocks, sample)
    old["rows"] = {k: v for k, v in old["rows"].items() if k in ("wrong-helpful", "all")}
    rows = paper_tables([TableSource("oss", _report(), mask=old)])["tables"]["23"]["rows"]
    assert [r["n"] for r in rows] == [1, 0, 0, 0, 0, 1] and rows[1]["title"] == "Correct-helpful"
    text = tables_markdown(paper_tables([TableSource("oss", _report(), mask=old)]))
    assert "| oss | Correct-harmful (0) | - | - | - | - | - | - |" in text


def test_analyze_writes_the_tables_and_dhd_tables_combines_caches(tmp_path, capsys):
    caches = []
    for seed in (1, 2):
        cache = tmp_path / f"model{seed}"
        assert main(["dhd", "simulate", "--cache", str(cache), "--n", "30", "--blocks", "4", "--seed",
                     str(seed), "--effects", "W+:0.3:0.8", "--benchmarks", "x", "y"]) == 0
        assert main(["dhd", "analyze", "--cache", str(cache), *FAST]) == 0
        caches.append(cache)
    out = capsys.readouterr().out
    assert "tables_markdown:" in out
    analysis = caches[0] / "analysis"
    report = json.loads((analysis / "report.json").read_text())
    tables = json.loads((analysis / "tables.json").read_text())
    loo = report["modes"]["loo"]
    assert set(loo["by_benchmark"]) == {"x", "y"}
    parts = loo["by_benchmark"].values()
    for group in ("W+", "W-", "C+", "C-", "indeterminate"):  # the benchmarks' counts add up to the pooled row
        assert sum(p["groups"][group] for p in parts) == loo["groups"][group]
    assert sum(p["disagreement"]["n"] for p in parts) == loo["disagreement"]["n"]
    pooled = [r for r in tables["tables"]["17"]["rows"] if r["benchmark"] == "Pooled"][0]
    assert pooled["disagreement"] == round(100 * loo["disagreement"]["rate"], 2)
    crossfit = json.loads((analysis / "crossfit.json").read_text())
    assert tables["tables"]["24"]["rows"][0]["gain"]["mean"] == round(100 * crossfit["variants"]["main"]["gain"]
                                                                      ["mean"], 2)
    assert {"17", "18", "19", "24", "25", "26"} <= set(tables["tables"])
    assert "settings" in report and "loo" in report["settings"]
    text = (analysis / "tables.md").read_text()
    assert "## Table 19" in text and "## Table 26" in text
    combined = tmp_path / "both"
    assert main(["dhd", "tables", "--analysis", str(caches[0] / "analysis"), str(caches[1] / "analysis"),
                 "--label", "oss", "gemma", "--report-dir", str(combined)]) == 0
    both = json.loads((combined / "tables.json").read_text())
    assert both["models"] == ["oss", "gemma"]
    assert [r["model"] for r in both["tables"]["19"]["rows"]] == ["oss", "gemma"]
    assert set(both["tables"]["25"]["rows"][0]) == {"benchmark", "oss", "gemma"}
    assert main(["dhd", "analyze", "--cache", str(caches[1]), "--report-dir", str(tmp_path / "plain"), "--no-tables",
                 *FAST]) == 0
    assert not (tmp_path / "plain" / "tables.md").exists()


def test_tables_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["dhd", "tables", "--analysis", str(tmp_path / "empty"), "--report-dir", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "report.json" in err[0] and "dhd analyze" in err[0]
    assert main(["dhd", "tables", "--analysis", str(tmp_path / "empty"), "--label", "a", "b", "--report-dir",
                 str(tmp_path / "t")]) == 2
    assert "one name per --analysis directory" in capsys.readouterr().err


def test_write_tables_without_matplotlib_charts_still_writes_text(tmp_path, monkeypatch):
    import groundstate.eval.dhd.report as report

    monkeypatch.setattr(report, "pyplot", lambda: None)
    paths = write_tables(tmp_path, [TableSource("oss", _report(), _crossfit(0.01, 0.01, 0.01))])
    assert set(paths) == {"tables_json", "tables_markdown"}
    assert "## Table 17" in (tmp_path / "tables.md").read_text()
