"""``groundstate evaluate`` reports the paired after-minus-before difference per metric, with its interval, p-value
and counts, warns when intervals rest on few records, and never prints a number that was not measured (issue 26,
item 5)."""

import json

import pytest

import groundstate as gs
from groundstate.cli import main
from groundstate.eval.benchmarks.offquery.loader import save_instances
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.paired import MIN_RELIABLE_N, PairedDifference, paired_difference
from groundstate.eval.reground.evaluate import Evaluation
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm


@pytest.fixture
def placeholder_lm(monkeypatch):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


@pytest.fixture
def saved(tmp_path, placeholder_lm, capsys):
    """A program saved by ``optimize`` (oracle, T3) and the three records it was optimized on."""
    data = tmp_path / "d.jsonl"
    save_instances(data, generate("healthcare", "main", 3))
    assert main(["optimize", "oracle", "--data", str(data), "--out", str(tmp_path / "o"), "--metric", "t3"]) == 0
    capsys.readouterr()
    return tmp_path / "o", data


def test_evaluate_prints_the_paired_difference_and_the_small_sample_warning(tmp_path, capsys, saved):
    out, data = saved
    report_dir = tmp_path / "report"
    assert main(["evaluate", str(out), "--data", str(data), "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                 "--allow-overlap", "--report-dir", str(report_dir)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("after - before, paired over the records"))
    assert "seed 0" in lines[heading] and "sign-flip p" in lines[heading]
    by_metric = {line.split(":")[0].strip(): line for line in lines[heading + 1:heading + 4]}
    assert set(by_metric) == {"T1", "T2", "T3"}
    # the program is unchanged by the optimizer, so after and before agree on every record: a difference of 0
    assert "T3: +0.000 [+0.000, +0.000], sign-flip p = 1.000 (exact); n paired = 3" in by_metric["T3"]
    warnings = [line for line in lines if line.startswith("warning:")]
    small = [line for line in warnings if f"fewer than {MIN_RELIABLE_N} records are unreliable" in line]
    assert len(small) == 1 and "as few as 3" in small[0] and "T1, T2, T3 paired on 3" in small[0]
    assert "before (unoptimized) and after (optimized) on 3" in small[0]
    report = json.loads((report_dir / "evaluate.json").read_text())
    t3 = report["differences"]["t3"]
    assert (t3["n"], t3["mean"], t3["p_value"], t3["seed"], t3["one_side"]) == (3, 0.0, 1.0, 0, 0)
    assert any("are unreliable" in w for w in report["warnings"])
    markdown = (report_dir / "evaluate.md").read_text()
    assert "#### After - before, paired" in markdown and "| T3 | +0.000 [+0.000, +0.000] | 1 (exact) | 3 |" in markdown


def test_the_python_api_returns_the_typed_differences(tmp_path, saved):
    out, data = saved
    evaluation = gs.evaluate(out, str(data), run=gs.RunSettings(out=str(tmp_path / "runs"), progress=False),
                             allow_overlap=True)
    assert isinstance(evaluation, Evaluation) and set(evaluation.differences) == {"t1", "t2", "t3"}
    t3 = evaluation.differences["t3"]
    assert isinstance(t3, PairedDifference) and t3.n == 3 and t3.p_method == "exact"
    assert t3.before_mean == t3.after_mean == evaluation.summaries["after (optimized)"]["scores"]["t3"]["mean"]
    assert any("are unreliable" in w for w in evaluation.warnings)


def test_a_metric_no_record_was_paired_on_is_not_measured_never_a_number():
    diffs = {"t2": paired_difference({"a": None, "b": None}, {"a": 0.5, "b": None}, metric="t2"),
             "t3": paired_difference({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 1.0}, metric="t3")}
    evaluation = Evaluation({}, {}, "t", differences=diffs)
    lines = evaluation.difference_lines()
    assert lines[1] == "  T2: not measured (2 failed)"
    assert lines[2].startswith("  T3: +0.500 [") and lines[2].endswith("n paired = 2")
    markdown = evaluation.difference_markdown()
    assert "| T2 | not measured (2 failed) | - | 0 | 1 | 1 | - | - |" in markdown
    assert Evaluation({}, {}, "t").difference_lines() == [] and Evaluation({}, {}, "t").difference_markdown() == ""
