"""DHD's appendix tables from specs (issue 24, items 3-4): a replay cell's analysis fills Tables 17-19 and 24-26 (the
same statistics ``dhd analyze`` computes, on exactly the cell's run), a masking cell fills Table 23; counts print as
counts; rows a cache cannot give (benchmarks its problems do not name) say so instead of showing a number."""

from __future__ import annotations

import json

from groundstate.eval.dhd.analysis import analyze
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.render import ours
from groundstate.eval.experiments.table import build_table


def table_of(world, name):
    inputs = load_spec(name, world.inputs if name == "dhd-table23" else
                       {k: v for k, v in world.inputs.items() if k != "cache"})
    return build_table(inputs, world.run, lms=world.lms)


def row(table, **keys):
    return next(r for r in table.rows if all(r.keys.get(k) == v for k, v in keys.items()))


def test_one_replay_run_fills_every_view_of_it(dhd_world):
    assert not dhd_world.replayed.failed
    assert len({o.run_id for o in dhd_world.replayed.outcomes}) == 1  # 2 models x 6 benchmarks: one run (one LM)
    table = table_of(dhd_world, "dhd-table17")
    assert table.header[0] == "judge: rules (no LM)"
    pooled = row(table, model="OSS", benchmark="Pooled")
    report = analyze(dhd_world.cache, dhd_world.run.out.parent / "check", runs_dir=dhd_world.run.out,
                     with_tables=False)["modes"]["loo"]
    assert pooled.values[(0, "W+")].entry["mean"] == report["groups"]["W+"] > 0  # message 0 of each problem
    assert ours(table, pooled.values[(0, "W+")], "W+") == str(report["groups"]["W+"])  # a count, no decimals
    assert pooled.values[(0, "disagreement")].entry["mean"] == report["disagreement"]["rate"]
    assert pooled.values[(0, "W+")].reference.value == 23  # the paper's OSS pooled row beside ours
    assert row(table, model="OSS", benchmark="JEEBench").values[(0, "W+")].status == "not reported"


def test_tables_19_and_24_read_the_same_run(dhd_world):
    t19 = table_of(dhd_world, "dhd-table19")
    oss = row(t19, model="OSS")
    assert oss.values[(0, "separated")].status == "measured" and oss.values[(0, "separated")].entry["integer"]
    assert oss.values[(0, "separated")].reference.value == 170
    # the paper's BH column is per-message; BY beside it ("retains none"); the problem level is a labelled extra
    report = analyze(dhd_world.cache, dhd_world.run.out.parent / "check19", runs_dir=dhd_world.run.out,
                     with_tables=False)["modes"]["loo"]
    for group in ("W+", "W-", "C+", "C-"):
        assert oss.values[(0, f"BH {group}")].entry["mean"] == report["fdr"]["counts"]["bh"][group]
        assert oss.values[(0, f"BY {group}")].reference.value == 0
        problem = oss.values[(0, f"problem BH {group}")]
        assert problem.entry["mean"] == report["multiplicity"]["bh"][group] and problem.reference is None
    assert oss.values[(0, "BH W+")].reference.value == 0
    assert row(t19, model="Gemma").values[(0, "BH W-")].reference.value == 20
    assert set(t19.runs.values()) == {o.run_id for o in dhd_world.replayed.outcomes}
    t24 = table_of(dhd_world, "dhd-table24")
    gain = row(t24, model="Gemma").values[(0, "gain")]
    assert gain.status == "measured" and gain.reference.value == 0.0261


def test_a_masking_cell_fills_table_23(dhd_world):
    spec = load_spec("dhd-table23", {"cache": dhd_world.inputs["cache"]})
    assert not run_experiment(spec, dhd_world.run, lms=dhd_world.lms).failed
    table = build_table(spec, dhd_world.run, lms=dhd_world.lms)
    helpful = row(table, category="wrong-helpful")
    assert helpful.values[(0, "full")].status == "measured" and helpful.values[(0, "remove")].entry["mean"] == 0
    assert helpful.values[(0, "full")].reference.value == 0.82
    empty = row(table, category="correct-harmful")  # none sampled: shown empty, n = 0, beside the paper's 2
    assert empty.values[(0, "full")].status == "not measured" and empty.values[(0, "n")].entry["mean"] == 0
    assert empty.values[(0, "n")].reference.value == 2 and helpful.values[(0, "n")].entry["mean"] > 0


def test_a_masking_table_from_before_empty_rows_reads_its_empty_categories_as_empty(tmp_path):
    from groundstate.eval.experiments.dhd_readers import mask_reader

    variants = ["full", "repeat", "remove", "neutral", "hide_answer", "hide_reasoning"]
    cell = {"success": 50.0, "correct": 1, "n": 2, "failures": 0}
    table = {"variants": variants, "rows": {"wrong-helpful": {"title": "Wrong-helpful", "pairs": 1, "sampled": 1,
                                                              **{v: cell for v in variants}}}}
    (tmp_path / "mask_table.json").write_text(json.dumps(table))
    numbers = mask_reader([{"dir": str(tmp_path)}])
    assert numbers["wrong-helpful:n"]["mean"] == 1 and numbers["wrong-helpful:full"]["mean"] == 0.5
    assert numbers["correct-harmful:n"]["mean"] == 0 and numbers["correct-harmful:n"]["integer"]
    assert numbers["correct-harmful:full"]["mean"] is None  # shown empty (not measured), never missing
