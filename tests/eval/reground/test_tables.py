"""``compare --paper-tables`` (issue 24, item 7): Tables 1, 10 and 11 are experiment specs built from compare's
options and tabulated by the experiment layer: the same numbers as ``experiment table`` on the equivalent shipped
spec, a stored run of other options is no cell (never the newest-wins baseline), and a cell two stored runs claim
is refused in one line."""

from __future__ import annotations

import json
import shutil

import dspy
import pytest

from groundstate.cli import main
from groundstate.errors import ConfigError
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.render import markdown
from groundstate.eval.experiments.table import build_table
from groundstate.eval.reground.settings import CompareSettings
from groundstate.eval.reground.tables import paper_specs, paper_tables, stray_runs, write_tables
from groundstate.eval.run_settings import RunSettings
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.eval.experiments.scripted import ScriptedLMs
from tests.helpers import is_rich_table

SETTINGS = CompareSettings(n=2, domain="healthcare")
PROGRAMS = ["standard", "reground"]


def _value(table, method_axis: str, key: str, metric: str, column: int = 0):
    row = next(r for r in table.rows if r.keys[method_axis] == key)
    return row.values[(column, metric)]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The shipped ``reground-table1-synthetic`` spec run with a scripted LM (its healthcare column is compare's
    ``--n 2 --domain healthcare`` on the embedded LM), and runs of Standard that differ in one option or the judge."""
    from groundstate.eval.assemble import run_task
    from groundstate.eval.reground.judges import LexicalJudge
    from groundstate.eval.task import RunContext
    from groundstate.lm.adapters import json_adapter

    run = RunSettings(out=tmp_path_factory.mktemp("paper") / "runs")
    spec = load_spec("reground-table1-synthetic", {"n": 2})
    assert not run_experiment(spec, run, lms=ScriptedLMs()).failed
    others = {}
    for name, changes, judge in (("rounds", {"rounds": 1, "ordering": "shared-first"}, None),
                                 ("judge", {}, LexicalJudge(threshold=0.5))):
        lms = ScriptedLMs()
        context = RunContext(make_lms=lambda lms=lms: lms(None), judge=judge)
        with dspy.context(lm=lms.lm, adapter=json_adapter()):
            settings = {**SETTINGS.model_dump(include={"n", "domain"}), **changes}
            others[name] = run_task("standard", settings, run, context=context).run_id
    return spec, run, others


def test_the_front_end_gives_the_numbers_of_experiment_table_on_the_same_runs(stored):
    spec, run, _ = stored
    reference = build_table(spec, run, lms=ScriptedLMs())
    tables = paper_tables(SETTINGS, PROGRAMS, run, lms=ScriptedLMs(), model="embedded")
    table1 = tables["1"]
    for method, key in (("Standard", "standard"), ("ReGround", "reground")):
        for metric in ("t1", "t2", "t3"):
            ours = _value(table1, "method", key, metric)
            theirs = _value(reference, "method", method, metric)  # column 0: the healthcare data
            assert ours.status == theirs.status == "measured" and ours.entry == theirs.entry
    assert set(table1.runs.values()) == {reference.runs[f"model:embedded,data:healthcare,method:{m}"]
                                         for m in ("Standard", "ReGround")}
    for metric in ("t1", "t2", "t3"):  # the gain over standard, from the same two cells
        base = _value(table1, "method", "standard", metric).entry["mean"]
        gain = _value(table1, "method", "reground", f"gain_{metric}")
        if base:
            ours = _value(table1, "method", "reground", metric).entry["mean"]
            assert gain.entry["mean"] == pytest.approx((ours - base) / base)
        else:
            assert gain.status == "not measured" and gain.note == "its base cell is 0"
        assert _value(table1, "method", "standard", f"gain_{metric}").status == "base"
    assert table1.header == reference.header and not table1.show_paper
    text = markdown(table1)
    assert "paper (Δ)" not in text and "T1 gain (%)" in text


def test_table10_plans_every_m_and_the_oracle_and_shows_what_is_stored(stored):
    from groundstate.eval.assemble import run_task

    spec, run, _ = stored
    tables = paper_tables(SETTINGS, PROGRAMS, run, lms=ScriptedLMs(), model="embedded")
    table10 = tables["10"]
    assert [r.labels["variant"] for r in table10.rows] == ["M = 1", "M = 2", "M = 3", "M = 4", "M = 5", "Oracle"]
    statuses = {r.keys["variant"]: r.values[(0, "t1")].status for r in table10.rows}
    assert statuses == {"M1": "not run", "M2": "not run", "M3": "measured", "M4": "not run", "M5": "not run",
                        "oracle": "not run"}
    assert _value(table10, "variant", "M3", "t2").entry == _value(tables["1"], "method", "reground", "t2").entry
    from groundstate.lm.adapters import json_adapter

    lms = ScriptedLMs()
    with dspy.context(lm=lms.lm, adapter=json_adapter()):
        oracle = run_task("reground", {"n": 2, "domain": "healthcare", "oracle_t1": True}, run,
                          context=_context(lms)).run_id
    again = paper_tables(SETTINGS, PROGRAMS, run, lms=ScriptedLMs(), model="embedded")["10"]
    assert _value(again, "variant", "oracle", "t1").status == "measured"
    assert again.runs["model:embedded,data:setting,variant:oracle"] == oracle
    shutil.rmtree(run.out / oracle)


def _context(lms):
    from groundstate.eval.task import RunContext

    return RunContext(make_lms=lambda: lms(None))


def test_table11_is_tokens_per_record_of_the_cells_runs(stored):
    from groundstate.eval.runs import load_run

    spec, run, _ = stored
    table11 = paper_tables(SETTINGS, None, run, lms=ScriptedLMs(), model="embedded")["11"]
    assert [r.keys["method"] for r in table11.rows] == ["standard", "voting", "robin", "manager", "instructor",
                                                       "self-reflect", "confidence", "reground"]
    stored_run = load_run(run.out / table11.runs["model:embedded,data:setting,method:standard"])
    rows = stored_run["rows"]
    total = sum(r["input_tokens"] + r["output_tokens"] for r in rows) / len(rows)
    assert _value(table11, "method", "standard", "tokens_total").entry["mean"] == pytest.approx(total)
    assert _value(table11, "method", "voting", "tokens_total").status == "not run"


def test_a_run_of_other_options_or_another_judge_is_never_the_baseline(stored):
    """The issue's cases: a Standard run with --rounds 1 --ordering shared-first, or scored by another judge, was
    the newest run and silently became the baseline of ReGround's gains; now it is no cell and is named."""
    spec, run, others = stored
    tables = paper_tables(SETTINGS, PROGRAMS, run, lms=ScriptedLMs(), model="embedded")
    standard = tables["1"].runs["model:embedded,data:setting,method:standard"]
    assert standard not in others.values()
    assert set(others.values()) <= set(stray_runs(run.out, tables))
    assert not set(tables["1"].runs.values()) & set(stray_runs(run.out, tables))


def test_a_cell_two_stored_runs_claim_is_refused_in_one_line(stored, tmp_path):
    spec, run, _ = stored
    runs = tmp_path / "runs"
    shutil.copytree(run.out, runs)
    copy = RunSettings(out=runs)
    own = paper_tables(SETTINGS, PROGRAMS, copy, lms=ScriptedLMs(), model="embedded")["1"].runs[
        "model:embedded,data:setting,method:standard"]
    shutil.copytree(runs / own, runs / f"{own}-merged")  # the same cell's merged shards beside it
    with pytest.raises(ConfigError) as caught:
        paper_tables(SETTINGS, PROGRAMS, copy, lms=ScriptedLMs(), model="embedded")
    message = str(caught.value)
    assert "\n" not in message and "two stored runs claim it" in message
    assert f"{own} (" in message and f"{own}-merged" in message and "method:standard" in message
    assert "same configuration" in message


def test_the_specs_carry_compares_options_into_every_cell():
    settings = CompareSettings(n=3, domain="disaster", rounds=2, max_candidates=4, judge_lm="same-as-lm", seed=1)
    specs = paper_specs(settings, ["standard", "reground", "voting"], "openai/gpt-4o")
    one = specs["1"]
    assert one.defaults.judge == "same-as-lm" and one.defaults.seeds == [1] and one.axes["model"] == ["openai/gpt-4o"]
    methods = {v.name: v for v in one.axis_values()["method"]}
    assert methods["standard"].settings["rounds"] == 2 and methods["reground"].settings["max_candidates"] == 4
    assert one.data["setting"].settings()["domain"] == "disaster"
    assert [v.settings.get("max_candidates") for v in specs["10"].axis_values()["variant"]] == [1, 2, 3, 4, 5, 4]
    assert not paper_specs(settings, ["reground"], "m")["1"].layout.relative  # no Standard: no gains


def test_compare_paper_tables_from_stored_runs(tmp_path, monkeypatch, capsys):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    out = tmp_path / "runs"
    common = ["--n", "1", "--runs-dir", str(out), "--no-progress"]
    assert main(["compare", "standard", "reground", *common]) == 0
    assert main(["run", "reground", "--max-candidates", "1", *common]) == 0
    assert main(["run", "reground", "--oracle-t1", *common]) == 0
    assert main(["run", "standard", "--rounds", "1", *common]) == 0  # other options: no cell of the tables
    capsys.readouterr()
    assert main(["compare", "--paper-tables", *common]) == 0  # no program: nothing runs, the paper's programs
    text = capsys.readouterr().out
    assert "Table 1 layout" in text and "Table 10 layout" in text and "Table 11 layout" in text
    assert is_rich_table(text) and "not run" in text and "judge: lexical" in text
    assert "1 stored OffQuery run(s)" in text and "another LM, decoding, judge" in text
    tables = out / "paper-tables"
    assert "| model | method |" in (tables / "table1.md").read_text()
    table10 = json.loads((tables / "table10.json").read_text())
    measured = [r["labels"]["variant"] for r in table10["rows"]
                if next(v for v in r["values"] if v["metric"] == "t1")["status"] == "measured"]
    assert measured == ["M = 1", "M = 3", "Oracle"]
    table1 = json.loads((tables / "table1.json").read_text())
    assert [r["keys"]["method"] for r in table1["rows"]] == ["standard", "reground"]
    assert all(v["status"] in ("measured", "base", "not measured") for r in table1["rows"] for v in r["values"])
    assert (tables / "table1.png").stat().st_size > 0
    assert main(["compare", "--runs-dir", str(out)]) == 2  # neither programs nor --paper-tables
    capsys.readouterr()
    assert main(["compare", "--paper-tables", "--runs-dir", str(out), "--no-progress"]) == 0  # n = 20: not stored
    table1 = json.loads((tables / "table1.json").read_text())
    assert {v["status"] for r in table1["rows"] for v in r["values"]} == {"not run", "base"}


def test_written_files_keep_their_names(stored, tmp_path):
    _, run, _ = stored
    tables = paper_tables(SETTINGS, PROGRAMS, run, lms=ScriptedLMs(), model="embedded")
    paths = write_tables(tables, tmp_path / "t", png=False)
    assert sorted(p.rsplit("/", 1)[1] for p in paths.values()) == ["table1.json", "table1.md", "table10.json",
                                                                   "table10.md", "table11.json", "table11.md"]


def test_a_corrupt_run_directory_that_is_no_cell_does_not_stop_the_tables(stored, tmp_path):
    _, run, others = stored
    runs = tmp_path / "runs"
    shutil.copytree(run.out, runs)
    (runs / "broken").mkdir()
    (runs / "broken" / "config.json").write_text("{not json")
    copy = RunSettings(out=runs)
    tables = paper_tables(SETTINGS, PROGRAMS, copy, lms=ScriptedLMs(), model="embedded")
    assert _value(tables["1"], "method", "standard", "t1").status == "measured"
    strays = stray_runs(runs, tables)
    assert "broken" not in strays and set(others.values()) <= set(strays)
