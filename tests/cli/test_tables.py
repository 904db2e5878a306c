"""Terminal tables through rich with human headers; charts without empty panels; intervals that say when absent."""

from __future__ import annotations

import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from groundstate.cli.tables import console, human, print_table  # noqa: E402
from groundstate.eval.report import comparison_figure, comparison_rows, has_tokens_panel  # noqa: E402
from groundstate.eval.stats import format_ci, mean_ci  # noqa: E402


def _summary(tokens: int, cached: int = 0, calls: int = 0) -> dict:
    score = {"mean": 0.5, "low": 0.2, "high": 0.8, "n": 4}
    return {"n_done": 4, "n_error": 0, "scores": {"task_accuracy": score, "vote_accuracy": score},
            "tokens": {"per_record": tokens / 4}, "lm_calls": {"per_record": calls / 4, "cached": cached}}


def test_human_headers():
    assert human("TASK_ACCURACY") == "task accuracy" and human("vote_accuracy") == "vote accuracy"
    assert human("T2 retention") == "T2 retention"
    assert (human("K"), human("W+"), human("C-")) == ("K", "W+", "C-")  # symbols keep their case


def test_print_table_is_rich_not_markdown(capsys):
    print_table([{"task_accuracy": "0.5", "n_cal": 3}], title="t", out=console(width=100))
    out = capsys.readouterr().out
    assert "task accuracy" in out and "n cal" in out and "|" not in out and "TASK_ACCURACY" not in out


def test_simulated_agents_get_no_tokens_panel():
    rows = comparison_rows({"rules": _summary(0), "mlp": _summary(0)}, metrics=("task_accuracy", "vote_accuracy"))
    assert not has_tokens_panel(rows)
    fig = comparison_figure(rows, ("task_accuracy", "vote_accuracy"), title="Consilience")
    try:
        assert len(fig.axes) == 1  # no empty tokens panel
        assert any("no LM tokens (simulated agents)" in t.get_text() for t in fig.texts)
        legend = fig.axes[0].get_legend()
        assert [t.get_text() for t in legend.get_texts()] == ["task accuracy", "vote accuracy"]
        assert legend.get_bbox_to_anchor().y0 >= fig.axes[0].get_window_extent().y1 - 1  # above the bars
    finally:
        plt.close(fig)


def test_cached_run_is_marked_not_shown_as_free():
    rows = comparison_rows({"lm": _summary(400, calls=8), "again": _summary(0, cached=8, calls=8)})
    assert has_tokens_panel(rows)
    fig = comparison_figure(rows)
    try:
        assert len(fig.axes) == 2
        assert any("cached" in t.get_text() for t in fig.axes[1].texts)
    finally:
        plt.close(fig)


def test_empty_chart_says_no_data():
    rows = comparison_rows({"x": {"n_done": 0, "scores": {}, "tokens": {}, "lm_calls": {}}})
    fig = comparison_figure(rows)
    try:
        assert any(t.get_text() == "no data" for t in fig.axes[0].texts)
    finally:
        plt.close(fig)


def test_missing_interval_is_said():
    assert format_ci(mean_ci([0.5])) == "0.500 (n=1, no interval)"
    assert format_ci(mean_ci([0.0, 1.0])).count("[") == 1


def test_consilience_typo_is_gone():
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(["grep", "-rIl", "Consil" + "ence", str(root / "groundstate"), str(root / "README.md")],
                           capture_output=True, text=True).stdout
    assert found == ""
