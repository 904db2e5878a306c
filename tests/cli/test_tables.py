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
    found = subprocess.run(["grep", "-rIl", "Consil" + "ence", str(root / "groundstate"), str(root / "README.md"),
                            str(root / "docs")],
                           capture_output=True, text=True).stdout
    assert found == ""


def _saved_texts(monkeypatch) -> list[str]:
    """Every text drawn in the axes of the figures saved from now on (charts that save and close their figure)."""
    texts: list[str] = []

    def savefig(fig, *args, **kwargs):
        texts.extend(t.get_text() for ax in fig.axes for t in ax.texts)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return texts


def test_dhd_charts_without_data_say_so(tmp_path, monkeypatch):
    from groundstate.eval.dhd.report import plot_flip_direction, plot_loo_rates
    from groundstate.eval.dhd.tables import plot_table_18, plot_table_24

    texts = _saved_texts(monkeypatch)
    assert plot_flip_direction({"wrong": {"n_flips": 0}}, tmp_path / "flips.png")
    assert texts[-1].startswith("no data")
    assert plot_loo_rates({3: {"n_eligible": 0, "W+": None, "W-": None, "C+": None, "C-": None}}, tmp_path / "r.png")
    assert texts[-1] == "no data"  # no share drawn as a share of 0
    assert plot_table_18([{"model": "m", "benchmark": "b", "wrong": None, "correct": None}], tmp_path / "t18.png")
    assert texts[-1] == "no data"
    assert plot_table_24([{"model": "m", "arm": "(A+B)/2", "observed": None}], tmp_path / "t24.png")
    assert texts[-1] == "no data"


def test_paper_tables_count_cached_calls_and_print_as_rich(capsys):
    """Table 11 of ``compare --paper-tables`` shows the calls served from DSPy's cache (they bill no tokens) beside
    the tokens, read from the run's records (:func:`groundstate.eval.experiments.readers.cost_entries`)."""
    from groundstate.cli.experiment import print_built_table
    from groundstate.eval.experiments.readers import cost_entries

    rows = [{"input_tokens": 0, "output_tokens": 0, "lm_calls": 3, "cached_calls": 3},
            {"input_tokens": 100, "output_tokens": 20, "lm_calls": 3, "cached_calls": 0}]
    entries = cost_entries(rows)
    assert entries["cached_calls"]["mean"] == 1.5 and entries["tokens_total"]["mean"] == 60.0
    table = _token_table(entries)
    print_built_table(table, console(width=160))
    out = capsys.readouterr().out
    assert "┏" in out and "cached calls (not billed)" in out and "|" not in out and "1.5" in out


def _token_table(entries: dict):
    """A built Table 11 with one cell holding ``entries`` (no run behind it: the layout alone)."""
    from groundstate.eval.experiments.table import Row, Table, Value
    from groundstate.eval.reground.settings import CompareSettings
    from groundstate.eval.reground.tables import paper_specs

    spec = paper_specs(CompareSettings(), ["standard"], "m")["11"]
    metrics = list(spec.layout.metrics)
    row = Row({"model": "m", "method": "standard"}, {"model": "m", "method": "Standard"},
              {(0, m): Value(entries[m], "measured") for m in metrics})
    table = Table(spec, ["judge: lexical"], ["model", "method"], ["data"], [{"data": ("setting", "setting")}],
                  metrics, [row], [], {})
    table.show_paper = False
    return table


def test_an_unscored_program_is_marked_not_drawn_as_zero():
    empty = {"n_done": 0, "scores": {}, "tokens": {}, "lm_calls": {}}
    rows = comparison_rows({"scored": _summary(0), "x": empty}, metrics=("task_accuracy", "vote_accuracy"))
    fig = comparison_figure(rows, ("task_accuracy", "vote_accuracy"))
    try:
        marks = [t for t in fig.axes[0].texts if t.get_text() == "no data"]
        assert len(marks) == 1 and marks[0].get_position()[0] == 1  # over the second program only
    finally:
        plt.close(fig)
