"""Simulated results say what they are: every table, chart and terminal summary of simulated agents names the
preset and its limits of integration; on design-default support (HiddenBench) the titles say the results are
fixed by construction; ``consilience table --sensitivity`` adds the attention-limit rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from groundstate.cli import main
from groundstate.eval.consilience.provenance import FIXED_BY_CONSTRUCTION
from groundstate.programs.consilience.simulated import SIM_PRESETS
from tests.helpers import DATA

L = SIM_PRESETS["limited"]
LIMITED = (f"simulated agents, preset 'limited' (attention {L.attention} facts, salience {L.salience:g}, recency "
           f"{L.recency:g}, weight noise {L.weight_noise:g})")
IDEAL = "simulated agents, preset 'ideal' (attention unlimited, salience 0, recency 1, weight noise 0)"


def value(row: dict, metric: str) -> dict:
    """One value of a row of the experiment layer's table JSON (its first column)."""
    return next(v for v in row["values"] if v["metric"] == metric and v["column"] == 0)


def data_rows(report: Path) -> list[dict]:
    return json.loads((report / "table.json").read_text())["rows"]


def flat(text: str) -> str:
    """``text`` without whitespace, so a rich caption or a chart title wrapped over lines still matches."""
    return "".join(text.split())


@pytest.fixture(scope="module")
def travel(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("travel") / "travel.jsonl"
    assert main(["hidden", "generate", "travel", "--n", "12", "--seed", "0", "--out", str(path)]) == 0
    return path


@pytest.fixture()
def titles(monkeypatch) -> list[str]:
    """The titles of the charts as drawn (read back from each figure as it is saved: the table's chart is the
    experiment layer's, :func:`groundstate.eval.experiments.render.chart`)."""
    import matplotlib.figure

    seen: list[str] = []
    save = matplotlib.figure.Figure.savefig

    def record(fig, *args, **kwargs):
        seen.append(fig.axes[0].get_title())
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    return seen


def test_a_simulated_table_names_the_preset_and_its_limits_everywhere(travel, tmp_path, capsys, titles):
    report = tmp_path / "table"
    assert main(["consilience", "table", "--data", str(travel), "--agents", "sim", "--sim-preset", "limited",
                 "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(report), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert flat(LIMITED) in flat(out) and FIXED_BY_CONSTRUCTION not in out
    assert "--sensitivity adds rows at attention limits unlimited, 5, 3 and 2" in out
    lines = (report / "table.md").read_text().splitlines()
    assert lines[0].startswith("### travel.jsonl") and lines[2].startswith(LIMITED)  # the line under the title
    assert "paper (Δ)" not in lines[0] and data_rows(report)  # a front-end table: no paper columns, rows as built
    data = json.loads((report / "table.json").read_text())
    assert data["provenance"]["agents"].startswith(LIMITED) and data["provenance"]["preset"] == "limited"
    assert not data["provenance"]["fixed_by_construction"] and "sensitivity" not in data
    assert len(titles) == 1 and flat(LIMITED) in flat(titles[0]) and (report / "table.png").stat().st_size > 0


def test_sensitivity_rows_vary_the_attention_limit_with_the_same_seeds(travel, tmp_path, capsys):
    report = tmp_path / "table"
    assert main(["consilience", "table", "--data", str(travel), "--agents", "sim", "--sim-preset", "limited",
                 "--runs-dir", str(tmp_path / "runs"), "--report-dir", str(report), "--no-progress", "--no-png",
                 "--sensitivity"]) == 0
    out = capsys.readouterr().out
    data = json.loads((report / "table.json").read_text())
    rows = data["sensitivity"]["rows"]
    assert [r["changes"] for r in rows] == [{"sim_attention": v} for v in ("all", 5, 3, 2)]
    means = [tuple(entry["mean"] for entry in r["scores"].values()) for r in rows]
    assert len(set(means)) > 1 and means[0] != means[3]  # the preset's limit changes the results
    base = {r["labels"]["method"]: value(r, "task_accuracy")["entry"]["mean"] for r in data["rows"]
            if r["keys"]["sensitivity"] == "base"}
    assert rows[2]["scores"] and {m: e["mean"] for m, e in rows[2]["scores"].items()} == base  # limited = 3 facts
    for title in ("attention unlimited", "attention 5 facts", "attention 3 facts", "attention 2 facts"):
        assert f"│ {title} " in out and f"| {title} |" in (report / "table.md").read_text()
    assert "sensitivity to the attention limit" in out and "ordering (best first)" in out
    assert data["sensitivity"]["conclusion"] in out


def test_sensitivity_needs_simulated_agents(travel, tmp_path, capsys):
    runs = tmp_path / "runs"
    code = main(["consilience", "table", "--data", str(travel), "--agents", "lm", "--sensitivity", "--runs-dir",
                 str(runs), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "--sensitivity" in err and "--agents sim" in err and len(err.strip().splitlines()) == 1
    assert not runs.exists() or not any(runs.iterdir())  # refused before anything ran


def test_evaluate_and_the_studies_name_the_agents(travel, tmp_path, capsys, monkeypatch):
    from groundstate.eval import report as report_module

    seen: list[str] = []
    draw = report_module.comparison_figure

    def record(*args, **kwargs):
        fig = draw(*args, **kwargs)
        seen.append(fig.axes[0].get_title())
        return fig

    monkeypatch.setattr(report_module, "comparison_figure", record)
    sim = ["--agents", "sim", "--sim-preset", "limited"]
    report = tmp_path / "evaluate"
    assert main(["consilience", "evaluate", "--data", str(travel), *sim, "--runs-dir", str(tmp_path / "runs"),
                 "--report-dir", str(report), "--no-progress"]) == 0
    assert flat(LIMITED) in flat(capsys.readouterr().out)
    assert (report / "consilience.md").read_text().splitlines()[2].startswith(LIMITED)
    assert json.loads((report / "consilience.json").read_text())["config"]["provenance"]["preset"] == "limited"
    assert len(seen) == 1 and flat(LIMITED) in flat(seen[0])
    assert main(["consilience", "routing", "--data", str(travel), *sim, "--json-out", str(tmp_path / "r.json")]) == 0
    assert flat(LIMITED) in flat(capsys.readouterr().out)
    assert json.loads((tmp_path / "r.json").read_text())["provenance"]["agents"].startswith(LIMITED)


@pytest.fixture()
def hb(tmp_path) -> Path:
    path = tmp_path / "hb.json"
    shutil.copy(DATA / "hiddenbench" / "hiddenbench_format.json", path)
    return path


def test_design_default_support_is_fixed_by_construction_in_every_output(hb, tmp_path, capsys, titles):
    report, runs = tmp_path / "table", tmp_path / "runs"
    assert main(["consilience", "table", "--data", str(hb), "--preset", "hiddenbench", "--agents", "sim",
                 "--runs-dir", str(runs), "--report-dir", str(report), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert flat(FIXED_BY_CONSTRUCTION) in flat(out) and flat(IDEAL) in flat(out)
    first = (report / "table.md").read_text().splitlines()[0]
    assert first.startswith("### hb.json") and first.endswith(FIXED_BY_CONSTRUCTION)
    data = json.loads((report / "table.json").read_text())
    assert data["title"].endswith(FIXED_BY_CONSTRUCTION) and data["provenance"]["fixed_by_construction"]
    assert "design default for 8 task(s)" in data["provenance"]["agents"]
    assert len(titles) == 1 and flat(FIXED_BY_CONSTRUCTION) in flat(titles[0]) and flat(IDEAL) in flat(titles[0])
    assert main(["hidden", "run", "--data", str(hb), "--protocol", "hiddenbench", "--agents", "sim", "--runs-dir",
                 str(runs), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert flat(FIXED_BY_CONSTRUCTION) in flat(out) and flat(IDEAL) in flat(out)
    run_id = next(p.name for p in runs.iterdir() if p.name.startswith("hiddenbench-sim"))
    assert main(["runs", "show", run_id, "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert flat(FIXED_BY_CONSTRUCTION) in flat(out) and flat(IDEAL) in flat(out)


def test_annotated_support_is_not_called_fixed(hb, tmp_path, capsys):
    facts = json.loads(hb.read_text())
    support = {str(t["id"]): {f: {o: 0.0 for o in t["possible_answers"]}
                              for f in [*t["shared_information"], *t["hidden_information"]]} for t in facts}
    sidecar = {"format": "groundstate-support/1", "tasks_file": hb.name, "tasks_sha256": "", "annotator": {},
               "support": support, "failures": []}
    hb.with_name("hb.json.support.json").write_text(json.dumps(sidecar))
    assert main(["hidden", "run", "--data", str(hb), "--agents", "sim", "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert FIXED_BY_CONSTRUCTION not in out.replace("\n", " ") and flat("support: the annotation hb.json.support.json")\
        in flat(out)
