"""The paper-layout tables from stored runs: grouping, gains over standard, the M ablation, tokens."""

import json

import pytest

from groundstate.cli import main
from groundstate.eval.reground.tables import markdown, table1, table10, table11
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.helpers import is_rich_table


def run(program, t1, t2, t3, setting="mediQ_easy.json, unreliable", lm="gpt", tokens=(1000, 200), n=10, **options):
    summary = {"n_done": n, "scores": {m: {"mean": v, "low": v - 0.1, "high": v + 0.1}
                                       for m, v in (("t1", t1), ("t2", t2), ("t3", t3))},
               "tokens": {"input": tokens[0] * n, "output": tokens[1] * n}}
    return {"program": program, "lm": lm, "setting": setting, "options": options, "summary": summary,
            "run_id": f"{program}-{t1}-{options}"}


def test_table1_gains_are_relative_to_standard_in_the_same_lm_and_setting():
    runs = [run("reground", 0.5, 0.8, 0.7, max_candidates=3), run("standard", 0.1, 0.4, 0.6),
            run("voting", 0.2, 0.4, 0.3), run("standard", 0.4, 0.4, 0.4, lm="other"),
            run("reground", 0.9, 0.9, 0.9, max_candidates=1), run("reground", 1.0, 0.9, 0.9, oracle_t1=True)]
    rows = {(r["lm"], r["program"]): r for r in table1(runs)}
    assert set(rows) == {("gpt", "reground"), ("gpt", "standard"), ("gpt", "voting"), ("other", "standard")}
    reground = rows[("gpt", "reground")]
    assert reground["t1"]["mean"] == 0.5  # the default M = 3 run, not the ablation ones
    assert reground["gain_t1"] == pytest.approx(400.0) and reground["gain_t2"] == pytest.approx(100.0)
    assert reground["gain_t3"] == pytest.approx(100 * (0.7 - 0.6) / 0.6)
    assert rows[("gpt", "standard")]["gain_t1"] is None
    assert "+400.0%" in markdown("1", table1(runs))


def test_table10_lists_m_ascending_then_the_oracle_and_table11_tokens_per_instance():
    runs = [run("reground", 0.3, 0.6, 0.5, max_candidates=3), run("reground", 0.1, 0.5, 0.4, max_candidates=1),
            run("reground", 0.9, 0.8, 0.8, oracle_t1=True), run("reground", 0.2, 0.55, 0.45, max_candidates=2),
            run("standard", 0.1, 0.4, 0.6, tokens=(5000, 800))]
    assert [r["condition"] for r in table10(runs)] == ["M = 1", "M = 2", "M = 3", "Oracle"]
    tokens = {r["program"]: r for r in table11(runs)}
    assert tokens["standard"]["input"] == 5000 and tokens["standard"]["total"] == 5800
    assert tokens["reground"]["total"] == 1200


def test_compare_paper_tables_from_stored_runs(tmp_path, monkeypatch, capsys):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    out = tmp_path / "runs"
    common = ["--n", "1", "--runs-dir", str(out), "--no-progress"]
    assert main(["compare", "standard", "reground", *common]) == 0
    assert main(["run", "reground", "--max-candidates", "1", *common]) == 0
    assert main(["run", "reground", "--oracle-t1", *common]) == 0
    capsys.readouterr()
    assert main(["compare", "--paper-tables", "--runs-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Table 1 layout" in text and "Table 10 layout" in text and "Table 11 layout" in text
    assert is_rich_table(text) and "(no stored runs for this table)" not in text
    assert "| LM |" in (out / "paper-tables" / "table1.md").read_text()  # the files keep their Markdown
    table10_rows = json.loads((out / "paper-tables" / "table10.json").read_text())["rows"]
    assert [r["condition"] for r in table10_rows] == ["M = 1", "M = 3", "Oracle"]
    table1_rows = json.loads((out / "paper-tables" / "table1.json").read_text())["rows"]
    assert {r["program"] for r in table1_rows} == {"standard", "reground"}
    assert main(["compare", "--runs-dir", str(out)]) == 2  # neither programs nor --paper-tables
