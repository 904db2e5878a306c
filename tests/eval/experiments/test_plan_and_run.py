"""``experiment plan`` and ``run`` (issue 24, items 1-2): the plan's counts are what a scripted run makes; a resumed
run makes no new call for finished cells; a failed cell is reported while the others run; no plan calls an LM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundstate.eval.experiments.cells import with_lm_options, with_models
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.plan import plan_experiment
from groundstate.eval.run_settings import RunSettings
from tests.eval.experiments.scripted import ScriptedLMs

SPEC = "reground-table1-synthetic"


@pytest.fixture
def spec():
    return load_spec(SPEC, {"n": 2})


def test_plan_counts_equal_what_a_scripted_run_of_the_spec_makes(spec, tmp_path):
    run = RunSettings(out=tmp_path / "runs", threads=2)
    planning = ScriptedLMs()
    plan = plan_experiment(spec, run, lms=planning)
    assert planning.calls == 0  # the plan's dry run used stand-ins, never the cells' LM
    running = ScriptedLMs()
    outcome = run_experiment(spec, run, lms=running)
    assert not outcome.failed
    by_cell = {o.label: o.summary for o in outcome.outcomes}
    for row in plan.rows:
        summary = by_cell[row.label]
        assert row.count.records == summary["n_done"] == 2
        assert row.count.calls == summary["lm_calls"]["total"] > 0, row.label  # exactly
        assert abs(row.count.input_tokens - summary["tokens"]["input"]) <= 0.1 * summary["tokens"]["input"]
        assert abs(row.count.output_tokens - summary["tokens"]["output"]) <= 0.1 * summary["tokens"]["output"]
    assert sum(r.count.calls for r in plan.rows) == running.calls
    assert plan.totals()["calls"] == running.calls


def test_a_resumed_run_makes_no_new_call_for_finished_cells(spec, tmp_path):
    run = RunSettings(out=tmp_path / "runs")
    lms = ScriptedLMs()
    first = run_experiment(spec, run, lms=lms, cells=["method:Standard"])
    assert [o.label.split(",")[-1] for o in first.outcomes] == ["method:Standard"] * 2
    made = lms.calls
    plan = plan_experiment(spec, run, lms=ScriptedLMs())
    left = sum(r.count.calls for r in plan.rows if not r.stored.complete)
    assert {r.stored.state for r in plan.rows if "Standard" in r.label} == {"complete"}
    assert plan.totals(only_to_run=True)["calls"] == left
    run_experiment(spec, run, lms=lms)
    assert lms.calls - made == left  # only the cells not run before called the LM
    before = lms.calls
    again = run_experiment(spec, run, lms=lms)
    assert lms.calls == before  # every cell finished: no new call
    assert all(o.summary["n_done"] == 2 for o in again.outcomes)


def test_a_failed_cell_is_reported_and_the_other_cells_still_run(spec, tmp_path):
    from groundstate.cli.output import report_failed_runs

    # Standard collaboration's first stage (every agent shares an opinion) fails; ReGround never asks for one
    lms = ScriptedLMs(fail=lambda request: RuntimeError("down") if "opinion" in request.output_fields else None)
    outcome = run_experiment(spec, RunSettings(out=tmp_path / "runs", max_error_rate=0.0), lms=lms)
    assert set(outcome.failed) == {o.label for o in outcome.outcomes if "Standard" in o.label}
    done = [o for o in outcome.outcomes if "ReGround" in o.label]
    assert len(done) == 2 and all(o.summary["n_ok"] == 2 and not o.failed for o in done)
    assert report_failed_runs(outcome.summaries()) == 1


def test_plan_prices_hosted_models_without_calling_them(spec, tmp_path, servers):
    server = servers("ok")
    hosted = with_lm_options(with_models(spec, ["openai/gpt-4o-mini", "embedded"]), f"{server.url}/v1")
    plan = plan_experiment(hosted, RunSettings(out=tmp_path / "runs"))
    assert server.requests == []  # no request reached the server
    priced = [r for r in plan.rows if r.cell.cell.keys["model"] == "openai/gpt-4o-mini"]
    local = [r for r in plan.rows if r.cell.cell.keys["model"] == "embedded"]
    assert all(r.count.cost is not None and r.count.cost > 0 and r.count.exact for r in priced)
    assert all(r.count.cost is None and not r.count.exact for r in local)  # the embedded model has no price
    assert plan.totals()["cost"] is None
    for hosted_row, local_row in zip(priced, local, strict=True):  # one dry run, counted per model
        assert hosted_row.count.calls == local_row.count.calls > 0
        assert hosted_row.cell.run_id != local_row.cell.run_id


def test_simulated_agents_cost_nothing_and_share_runs_of_equal_settings(tmp_path):
    spec = load_spec("consilience-table2-sim", {"n": 3})
    plan = plan_experiment(spec, RunSettings(out=tmp_path / "runs"))
    assert {r.count.method for r in plan.rows} == {"no LM call (simulated agents)"}
    assert plan.totals()["calls"] == 0 and plan.totals()["cost"] == 0.0
    runs = {r.cell.run_id for r in plan.rows}
    assert len(runs) < len(plan.rows) == 20  # the preset's own attention limit (3) is one of the sensitivity values
    assert plan.totals()["runs"] == len(runs)


def test_plan_says_per_cell_what_is_stored(spec, tmp_path):
    run = RunSettings(out=tmp_path / "runs")
    run_experiment(spec, run, lms=ScriptedLMs(), cells=["method:Standard,data:healthcare", "method:ReGround"])
    plan = plan_experiment(spec, run, lms=ScriptedLMs())
    partial = next(r for r in plan.rows if r.label.endswith("data:healthcare,method:ReGround"))
    run_dir = Path(partial.stored.run_dir)
    results = (run_dir / "results.jsonl").read_text().splitlines()
    (run_dir / "results.jsonl").write_text(results[0] + "\n")  # killed after one of its two records
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "finished": False, "n_done": 1}))
    plan = plan_experiment(spec, run, lms=ScriptedLMs())
    states = {r.label.split(",", 1)[1]: r.stored.describe() for r in plan.rows}
    assert states == {"data:healthcare,method:Standard": "complete", "data:healthcare,method:ReGround":
                      "1 of 2 done (killed)", "data:disaster,method:Standard": "not run",
                      "data:disaster,method:ReGround": "complete"}
    left = plan.totals(only_to_run=True)
    calls = {r.label.split(",", 1)[1]: r.count.calls for r in plan.rows}
    assert left["runs"] == 2  # the partial cell counts its remaining half
    assert left["calls"] == calls["data:disaster,method:Standard"] + round(calls["data:healthcare,method:ReGround"] / 2)


def test_shards_run_their_part_and_the_table_reads_the_merged_run(spec, tmp_path):
    from groundstate.eval.experiments.table import build_table
    from groundstate.eval.runs import merge_runs

    runs = tmp_path / "runs"
    cell = "method:ReGround,data:healthcare"
    dirs = []
    for i in range(2):
        shard = RunSettings(out=runs, shard=(i, 2))
        plan = plan_experiment(spec, shard, lms=ScriptedLMs(), cells=[cell])
        assert [r.count.records for r in plan.rows] == [1]
        outcome = run_experiment(spec, shard, lms=ScriptedLMs(), cells=[cell])
        assert [o.summary["n_done"] for o in outcome.outcomes] == [1]
        dirs.append(runs / outcome.outcomes[0].run_id)
    whole = RunSettings(out=runs)
    label = "model:embedded,data:healthcare,method:ReGround"

    def value():
        table = build_table(spec, whole, lms=ScriptedLMs())
        row = next(r for r in table.rows if r.keys["method"] == "ReGround")
        return table.runs.get(label), row.values[(0, "t3")]

    assert value()[1].status == "not run"  # a shard is not the cell's run
    merged = merge_runs(dirs, runs)
    run_id, t3 = value()
    assert run_id == merged["run_id"] and run_id.endswith("-merged")
    assert t3.status == "measured" and t3.entry["n"] == 2


def test_plan_names_a_cell_claimed_by_its_run_and_its_merged_shards(spec, tmp_path):
    """A cell whose run and its ``<id>-merged`` both exist is not reported as one of them (the table refuses it)."""
    import shutil

    runs = tmp_path / "runs"
    cell = "method:ReGround,data:healthcare"
    outcome = run_experiment(spec, RunSettings(out=runs), lms=ScriptedLMs(), cells=[cell])
    run_id = outcome.outcomes[0].run_id
    row = plan_experiment(spec, RunSettings(out=runs), lms=ScriptedLMs(), cells=[cell]).rows[0]
    assert row.stored.complete
    shutil.copytree(runs / run_id, runs / f"{run_id}-merged")
    row = plan_experiment(spec, RunSettings(out=runs), lms=ScriptedLMs(), cells=[cell]).rows[0]
    assert not row.stored.complete and row.stored.done == 0
    assert row.stored.describe().startswith("two stored runs") and f"{run_id}-merged" in row.stored.describe()
