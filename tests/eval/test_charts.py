"""Every chart groundstate draws, rendered as it is saved and checked the way a reader sees it (issue 26 item 8).

Each figure is checked at ``savefig``, after ``fig.canvas.draw()``: every axes title lies within the figure, every
legend lies within the figure and overlaps no bar, line, error bar, text, tick label, axis label or title (its
rendered boxes, ``get_window_extent``). :data:`CHART_SITES` lists every ``savefig`` in groundstate, so a new chart
fails :func:`test_every_chart_site_is_rendered_here` until it is added to this file.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: Every ``savefig`` call in groundstate, by file: the charts the tests below render.
CHART_SITES = {
    "groundstate/eval/report.py": 1,  # comparison_figure: compare.png (ReGround and baselines), evaluate
    "groundstate/eval/experiments/render.py": 1,  # experiment table charts (Consilience Table 2, ReGround Table 1...)
    "groundstate/eval/consilience/tables.py": 1,  # consilience evaluate/table: table_figure
    "groundstate/eval/dhd/report.py": 2,  # flip_direction.png, loo_rates.png
    "groundstate/eval/dhd/tables.py": 2,  # table18.png, table24.png
}

LONG = ("Task and vote accuracy on generated travel tasks, simulated agents (Table 2 layout) (consilience paper, "
        "Table 2) (black: the paper), with a title long enough to overflow any figure it is drawn on")


def _inside(box: Bbox, fig: Figure, slack: float = 1.0) -> bool:
    return box.x0 >= -slack and box.y0 >= -slack and box.x1 <= fig.bbox.width + slack and \
        box.y1 <= fig.bbox.height + slack


def _shrunk(box: Bbox, by: float = 1.0) -> Bbox:
    return Bbox.from_extents(box.x0 + by, box.y0 + by, box.x1 - by, box.y1 - by)


def _occupied(fig: Figure, renderer) -> list[tuple[str, Bbox]]:
    """The rendered boxes a legend must not cover: bars and patches, lines, error-bar collections, texts, titles,
    axis labels and tick labels of every axes."""
    boxes = []
    for ax in fig.axes:
        artists = [*ax.patches, *ax.lines, *ax.collections, *ax.texts, ax.title, ax.xaxis.label, ax.yaxis.label,
                   *ax.get_xticklabels(), *ax.get_yticklabels()]
        for artist in artists:
            if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
                continue
            box = artist.get_window_extent(renderer)
            if box.width > 0 or box.height > 0:
                boxes.append((f"{type(artist).__name__} {getattr(artist, 'get_text', lambda: '')()!r}", box))
    return boxes


def layout_problems(fig: Figure) -> list[str]:
    """What a reader would see wrong in ``fig``: a title outside the figure, a legend outside it or over an artist."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = []
    for ax in fig.axes:
        if ax.get_title() and not _inside(ax.title.get_window_extent(renderer), fig):
            problems.append(f"title {ax.get_title()[:40]!r} is outside the figure")
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    occupied = _occupied(fig, renderer)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not _inside(box, fig):
            problems.append("a legend is outside the figure")
        for name, other in occupied:
            if _shrunk(box).overlaps(other):
                problems.append(f"a legend covers {name}")
    return problems


@pytest.fixture
def saved(monkeypatch):
    """The layout problems of every figure saved from now on, one list per figure (the file is still written)."""
    found: list[list[str]] = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        found.append(layout_problems(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return found


def _entry(mean, low=None, high=None, n=1, failed=0):
    return {"mean": mean, "low": low, "high": high, "n": n, "failed": failed}


# -- the checker can fail -------------------------------------------------------------------------------------
def test_the_checker_sees_a_legend_on_the_bars_and_a_title_off_the_figure():
    fig, ax = plt.subplots(figsize=(3, 2))
    try:
        ax.bar([0, 1], [1.0, 0.9], label="tall")
        ax.legend(loc="upper left")
        ax.set_title("a title far too long for a figure three inches wide, so it runs off both of its edges")
        problems = layout_problems(fig)
        assert any("covers Rectangle" in p for p in problems) and any("title" in p for p in problems)
    finally:
        plt.close(fig)


def test_every_chart_site_is_rendered_here():
    sites = {}
    for path in (ROOT / "groundstate").rglob("*.py"):
        count = len(re.findall(r"\.savefig\(", path.read_text(encoding="utf-8")))
        if count:
            sites[path.relative_to(ROOT).as_posix()] = count
    assert sites == CHART_SITES, "a chart was added or removed: render it in this file and update CHART_SITES"


# -- ReGround (compare.png) ---------------------------------------------------------------------------------
def test_reground_chart_writes_values_says_not_measured_and_fits(tmp_path, saved):
    from groundstate.eval.report import comparison_figure, comparison_rows, write_report

    def summary(n, t1, t2, t3):
        return {"n_done": n, "n_error": 0, "scores": {"t1": t1, "t2": t2, "t3": t3},
                "tokens": {"per_record": 900.0}, "lm_calls": {"per_record": 35.0, "cached": 0}}

    rows = comparison_rows({
        "reground": summary(1, _entry(0.0), _entry(0.5), _entry(0.0)),  # n = 1: no intervals
        "standard collaboration with a long name": summary(30, _entry(0.4, 0.25, 0.6, 30), _entry(None, failed=30),
                                                             _entry(1.0, 0.88, 1.0, 30)),
    })
    paths = write_report(rows, tmp_path, title=LONG, subtitle="LM: embedded; T2 judge: lexical (approximate)")
    assert Path(paths["chart"]).stat().st_size > 0
    assert saved == [[]], saved
    fig = comparison_figure(rows, title=LONG)
    try:
        texts = [t.get_text() for t in fig.axes[0].texts]
        assert texts.count("0.00") == 2  # a measured 0 is written, so it is not mistaken for a missing bar
        assert texts.count("not measured") == 1  # T2 of the second program: said, not drawn as 0
        assert "no interval" in fig.axes[0].get_xlabel()
        assert [t.get_text() for t in fig.axes[0].get_xticklabels()][0].endswith("(n=1)")
    finally:
        plt.close(fig)


def test_reground_chart_with_nothing_scored_says_no_data(tmp_path, saved):
    from groundstate.eval.report import comparison_rows, write_report

    rows = comparison_rows({"reground": {"n_done": 0, "scores": {}, "tokens": {}, "lm_calls": {}}})
    write_report(rows, tmp_path, title=LONG)
    assert saved == [[]], saved


# -- Consilience ----------------------------------------------------------------------------------------------
def test_consilience_table_chart_fits(tmp_path, saved):
    """``consilience evaluate/table``'s chart (what ``write_table`` saves), a metric not measured on one row."""
    from groundstate.eval.consilience.tables import table_figure

    rows = [{"method": m, "task_accuracy": _entry(v, v - 0.1, min(1.0, v + 0.1), 40),
             "vote_accuracy": _entry(None, n=0) if m == "Rules" else _entry(0.97, 0.9, 1.0, 40)}
            for m, v in (("Hidden-Pre", 0.45), ("Hidden-Post", 0.6), ("Full-Info", 0.99), ("Rules", 0.7))]
    fig = table_figure(rows, LONG, "simulated agents, preset 'limited' (attention 3 facts, salience 0.5, recency "
                                   "0.8, weight noise 0.3)")
    try:
        assert [t.get_text() for t in fig.axes[0].texts] == ["not measured"]  # Rules' vote accuracy, not a 0
        fig.savefig(tmp_path / "table.png", dpi=120)
    finally:
        plt.close(fig)
    assert saved == [[]], saved


def test_experiment_table_chart_of_the_demo_spec_fits(tmp_path, saved):
    """The Consilience PNG of the demo (``experiment table consilience-table2-sim``), from real simulated runs."""
    from groundstate.eval.experiments.execute import run_experiment
    from groundstate.eval.experiments.load import load_spec
    from groundstate.eval.experiments.render import write_table
    from groundstate.eval.experiments.table import build_table
    from groundstate.eval.run_settings import RunSettings

    spec = load_spec("consilience-table2-sim", {"n": 3})
    run = RunSettings(out=tmp_path / "runs")
    assert not run_experiment(spec, run).failed
    paths = write_table(build_table(spec, run), tmp_path / "report")
    assert Path(paths["png"]).stat().st_size > 0
    assert saved == [[]], saved


def test_experiment_table_chart_with_many_series_and_cells_not_run_fits(tmp_path, saved):
    """ReGround's Table 1 layout (six series: two data sets x three metrics) with no stored run: every cell n/a."""
    from groundstate.eval.experiments.load import load_spec
    from groundstate.eval.experiments.render import write_table
    from groundstate.eval.experiments.table import build_table
    from groundstate.eval.run_settings import RunSettings
    from tests.eval.experiments.scripted import ScriptedLMs

    spec = load_spec("reground-table1-synthetic", {"n": 1})
    write_table(build_table(spec, RunSettings(out=tmp_path / "runs"), lms=ScriptedLMs()), tmp_path / "report")
    assert saved == [[]], saved


# -- DHD ------------------------------------------------------------------------------------------------------
def test_dhd_report_charts_fit(tmp_path, saved):
    from groundstate.eval.dhd.report import plot_flip_direction, plot_loo_rates

    flips = {name: {"n_flips": 300, "helpful": h, "harmful": 300 - h, "helpful_share": h / 300,
                    "harmful_share": 1 - h / 300, "flip_rate": 0.1} for name, h in (("wrong", 200), ("correct", 140))}
    assert plot_flip_direction(flips, tmp_path / "flips.png")
    tall = {"n_eligible": 8000, "W+": 0.033, "W-": 0.019, "C+": 0.020, "C-": 0.022}  # W+ reaches the top
    assert plot_loo_rates({5: tall}, tmp_path / "rates.png")
    assert plot_loo_rates({3: tall, 5: {**tall, "W+": 0.01}, 7: {**tall, "C-": 0.04}}, tmp_path / "rates3.png")
    assert saved == [[], [], []], saved


def test_dhd_table_charts_fit(tmp_path, saved):
    from groundstate.eval.dhd.tables import plot_table_18, plot_table_24

    wide = {"mean": 3.6, "low": 0.7, "high": 6.6}
    rows18 = [{"model": "simulated", "benchmark": "Pooled", "wrong": wide,
               "correct": {"mean": -0.3, "low": -1.5, "high": 0.8}}]
    assert plot_table_18(rows18, tmp_path / "t18.png")
    rows24 = [{"model": "simulated", "arm": arm, "observed": value,
               "all_action": {"low": -1.9, "high": high}} for arm, value, high in
              (("(A+B)/2", 1.9, 0.8), ("A", 1.4, 0.6), ("B", 1.0, 1.1))]
    assert plot_table_24(rows24, tmp_path / "t24.png")
    assert saved == [[], []], saved
