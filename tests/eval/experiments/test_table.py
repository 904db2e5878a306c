"""``experiment table`` (issue 24, item 3): exactly the spec's cells, each run checked against its cell (judge,
Standard's rounds, temperature: one line each), cells checked against each other, the paper's numbers beside ours,
averages over an axis with the per-value rows kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import dspy
import pytest

from groundstate.errors import ConfigError
from groundstate.eval.experiments.cells import resolve_cells
from groundstate.eval.experiments.checks import check_across, varying_axes
from groundstate.eval.experiments.execute import run_experiment
from groundstate.eval.experiments.load import load_spec
from groundstate.eval.experiments.render import NOT_IN_TEXT, cells, markdown, ours, paper, write_table
from groundstate.eval.experiments.table import Value, build_table
from groundstate.eval.run_settings import RunSettings
from tests.eval.experiments.scripted import ScriptedLMs

SPEC = "reground-table1-synthetic"
CELL = "model:embedded,data:healthcare,method:Standard"


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """The spec run with a scripted LM, and runs of its Standard/healthcare cell that each differ from the cell in
    one thing only: the judge, Standard's rounds, the temperature, the data, the model."""
    from groundstate.eval.assemble import run_task
    from groundstate.eval.reground.judges import LexicalJudge
    from groundstate.eval.task import RunContext
    from groundstate.lm.adapters import json_adapter

    runs = tmp_path_factory.mktemp("experiment") / "runs"
    spec = load_spec(SPEC, {"n": 2})
    run = RunSettings(out=runs)
    assert not run_experiment(spec, run, lms=ScriptedLMs()).failed
    settings = next(c for c in resolve_cells(spec) if c.label == CELL).settings
    variants = {}
    for name, lms, changes, judge in (("judge", ScriptedLMs(), {}, LexicalJudge(threshold=0.5)),
                                      ("rounds", ScriptedLMs(), {"rounds": 1}, None),
                                      ("temperature", ScriptedLMs(temperature=0.7), {}, None),
                                      ("data", ScriptedLMs(), {"n": 3}, None),
                                      ("lm", ScriptedLMs(model="openai/gpt-4o-mini"), {}, None)):
        context = RunContext(make_lms=lambda lms=lms: lms(None), judge=judge)
        with dspy.context(lm=lms.lm, adapter=json_adapter()):
            variants[name] = run_task("standard", {**settings, **changes}, run, context=context).run_id
    return spec, run, variants


@pytest.mark.parametrize("variant, field, kind", [("judge", "options.judge", "judge"),
                                                  ("rounds", "options.rounds", "protocol options"),
                                                  ("temperature", "lm.temperature", "decoding"),
                                                  ("data", "data.synthetic.n", "data"),
                                                  ("lm", "lm.model", "LM")])
def test_an_adopted_run_that_differs_from_its_cell_refuses_the_table_in_one_line(stored, variant, field, kind):
    spec, run, variants = stored
    with pytest.raises(ConfigError) as caught:
        build_table(spec, run, lms=ScriptedLMs(), use_runs=[f"{CELL}={variants[variant]}"])
    message = str(caught.value)
    assert "\n" not in message and CELL in message and variants[variant] in message
    assert f"field '{field}'" in message and f"in the {kind}:" in message, message


def test_the_spec_can_adopt_a_run_in_its_runs_table_too(stored):
    spec, run, variants = stored
    adopting = spec.model_copy(update={"runs": {CELL: variants["rounds"]}})
    with pytest.raises(ConfigError, match="options.rounds"):
        build_table(adopting, run, lms=ScriptedLMs())


def test_adopting_a_run_that_matches_its_cell_is_accepted(stored):
    spec, run, _ = stored
    table = build_table(spec, run, lms=ScriptedLMs())
    own = table.runs[CELL]
    adopted = build_table(spec, run, lms=ScriptedLMs(), use_runs=[f"{CELL}={own}"])
    assert adopted.runs == table.runs


def test_a_stored_run_under_the_planned_id_is_checked_too(stored, tmp_path):
    spec, run, variants = stored
    runs = tmp_path / "runs"
    shutil.copytree(run.out, runs)
    planted = RunSettings(out=runs)
    own = build_table(spec, planted, lms=ScriptedLMs()).runs[CELL]
    shutil.rmtree(runs / own)
    shutil.copytree(runs / variants["judge"], runs / own)  # another run's files under the cell's run id
    with pytest.raises(ConfigError, match=r"stored run .* in the judge"):
        build_table(spec, planted, lms=ScriptedLMs())


def test_a_selector_must_name_one_cell(stored):
    spec, run, variants = stored
    with pytest.raises(ConfigError, match="names 2 cells"):
        build_table(spec, run, lms=ScriptedLMs(), use_runs=[f"method:Standard={variants['judge']}"])
    with pytest.raises(ConfigError, match="no axis 'methd'"):
        build_table(spec, run, lms=ScriptedLMs(), use_runs=[f"methd:Standard={variants['judge']}"])


def test_cells_that_differ_in_judge_or_decoding_need_an_axis_that_varies_it():
    lexical, lm = {"options": {"judge": "lexical"}}, {"options": {"judge": "lm:openai/gpt-4o"}}
    a, b = {"method": "Standard", "seed": "0"}, {"method": "ReGround", "seed": "0"}
    with pytest.raises(ConfigError) as caught:
        check_across([("method:Standard", a, lexical), ("method:ReGround", b, lm)], {"judge": set()})
    assert "\n" not in str(caught.value) and "method:Standard and method:ReGround" in str(caught.value)
    assert "different judges" in str(caught.value)
    check_across([("method:Standard", a, lexical), ("method:ReGround", b, lm)], {"judge": {"method"}})
    warm = {"lm": {"model": "m", "temperature": 0.7}, "options": {"judge": "lexical"}}
    cold = {"lm": {"model": "m", "temperature": 0.0}, "options": {"judge": "lexical"}}
    with pytest.raises(ConfigError, match="different decodings"):
        check_across([("a", a, warm), ("b", b, cold)], {"decoding": {"model"}})
    # the plan decides which axes vary what: a model axis whose judge is the model under test varies the judge
    plan = [({"model": "x", "method": "S"}, {"options": {"judge": "lm:x"}}),
            ({"model": "y", "method": "S"}, {"options": {"judge": "lm:y"}}),
            ({"model": "x", "method": "R"}, {"options": {"judge": "lm:x"}})]
    assert varying_axes(plan) == {"judge": {"model"}, "decoding": set()}


def test_the_table_puts_the_papers_numbers_beside_ours(stored, tmp_path):
    spec, run, _ = stored
    text = Path(spec.source).read_text().replace('model = "openai/gpt-5"', 'model = "embedded"')
    moved = tmp_path / "spec.toml"
    moved.write_text(text)
    table = build_table(load_spec(moved, {"n": 2}), run, lms=ScriptedLMs())
    header, body = cells(table)
    assert header[:2] == ["model", "method"] and "HEALTHCARE (synthetic) · T3 paper (Δ)" in header
    row = next(r for r in table.rows if r.keys["method"] == "Standard")
    t3 = row.values[(0, "t3")]
    assert t3.reference is not None and t3.reference.value == pytest.approx(0.862)
    ours_t3 = 100 * t3.entry["mean"]
    assert paper(table, t3) == f"86.2 (Δ {ours_t3 - 86.2:+.1f})"
    assert paper(table, row.values[(1, "t3")]) == NOT_IN_TEXT  # the disaster column has no reference
    assert not table.paper_only
    assert "judge: lexical" in table.header[0] and "embedded/smollm2-135m-instruct" in table.header[1]
    paths = write_table(table, tmp_path / "report")
    assert Path(paths["png"]).stat().st_size > 0
    assert NOT_IN_TEXT in Path(paths["md"]).read_text()


def test_cells_not_run_say_so_and_references_of_other_cells_are_listed(stored):
    spec, run, _ = stored
    table = build_table(spec, run)  # the spec's own embedded LM: none of its cells is stored under these run ids
    assert {v.status for r in table.rows for v in r.values.values()} == {"not run"}
    assert len(table.paper_only) == 3  # GPT-5's cells are not in this table
    assert "not run" in markdown(table) and "86.2" in markdown(table)
    assert table.header[0].startswith("planned (no cell is run yet): judge: lexical")


def test_a_metric_measured_on_no_record_is_not_measured(tmp_path):
    spec = load_spec(SPEC, {"n": 2})
    run = RunSettings(out=tmp_path / "runs", max_error_rate=0.0)
    lms = ScriptedLMs(fail=lambda request: RuntimeError("down") if "opinion" in request.output_fields else None)
    run_experiment(spec, run, lms=lms, cells=["method:Standard"])
    table = build_table(spec, run, lms=lms)
    standard = next(r for r in table.rows if r.keys["method"] == "Standard")
    assert ours(table, standard.values[(0, "t1")]) == "not measured (2 failed)"
    assert ours(table, Value({"mean": None, "failed": 0}, "not measured")) == "not measured"


AVERAGED = """
[experiment]
name = "averaged"
title = "two presets, averaged"

[defaults]
task = "consilience"
data = "travel"
settings = { agents = "sim" }
seeds = [0, 1]

[data.travel]
generate = { kind = "travel", n = 3 }

[axes]
sim_preset = ["ideal", "limited"]

[[axes.method]]
label = "Hidden-Post"
settings = { program = "hidden-post" }

[[axes.method]]
label = "Rules"
settings = { program = "rules" }

[layout]
rows = ["sim_preset", "method"]
metrics = ["task_accuracy", "vote_accuracy", "rounds", "gain"]
average = ["sim_preset"]
relative = [{ name = "gain", metric = "task_accuracy", axis = "method", base = "Hidden-Post", kind = "difference" }]

[[reference]]
cell = { sim_preset = "average", method = "Rules" }
metric = "task_accuracy"
value = 0.5
source = "made up"
quote = "made up"
"""


def test_averages_over_an_axis_keep_the_per_value_rows_and_seeds_are_pooled(tmp_path):
    path = tmp_path / "averaged.toml"
    path.write_text(AVERAGED)
    spec = load_spec(path)
    run = RunSettings(out=tmp_path / "runs")
    assert not run_experiment(spec, run).failed
    table = build_table(spec, run)
    names = [(r.keys["sim_preset"], r.keys["method"]) for r in table.rows]
    assert names == [("ideal", "Hidden-Post"), ("ideal", "Rules"), ("limited", "Hidden-Post"), ("limited", "Rules"),
                     ("average", "Hidden-Post"), ("average", "Rules")]
    rows = {key: row for key, row in zip(names, table.rows, strict=True)}
    for method in ("Hidden-Post", "Rules"):
        for metric in ("task_accuracy", "vote_accuracy", "rounds"):
            means = [rows[(p, method)].values[(0, metric)].entry["mean"] for p in ("ideal", "limited")]
            assert rows[("average", method)].values[(0, metric)].entry["mean"] == pytest.approx(sum(means) / 2)
    for preset in ("ideal", "limited"):  # the relative metric: ours minus the base cell's, the base says so
        rules, post = (rows[(preset, m)].values[(0, "task_accuracy")].entry["mean"] for m in ("Rules", "Hidden-Post"))
        assert rows[(preset, "Rules")].values[(0, "gain")].entry["mean"] == pytest.approx(rules - post)
        assert ours(table, rows[(preset, "Hidden-Post")].values[(0, "gain")]) == "base"
    gains = [rows[(p, "Rules")].values[(0, "gain")].entry["mean"] for p in ("ideal", "limited")]
    assert rows[("average", "Rules")].values[(0, "gain")].entry["mean"] == pytest.approx(sum(gains) / 2)
    assert ours(table, rows[("average", "Hidden-Post")].values[(0, "gain")]) == "base"
    assert rows[("ideal", "Rules")].values[(0, "task_accuracy")].entry["n"] == 6  # 3 tasks x 2 seeds, pooled
    assert rows[("average", "Rules")].values[(0, "task_accuracy")].reference.value == 0.5
    assert rows[("ideal", "Rules")].values[(0, "task_accuracy")].reference is None
    assert "average (sim_preset)" in markdown(table)
    # the same runs with the methods as columns, averaged too: the corner averages all four cells
    path.write_text(AVERAGED.replace('rows = ["sim_preset", "method"]', 'rows = ["sim_preset"]\ncolumns = ["method"]')
                    .replace('average = ["sim_preset"]', 'average = ["sim_preset", "method"]'))
    crossed = build_table(load_spec(path), run)
    assert [c["method"][1] for c in crossed.columns] == ["Hidden-Post", "Rules", "average"]
    corner = crossed.rows[-1].values[(2, "task_accuracy")]
    every = [rows[(p, m)].values[(0, "task_accuracy")].entry["mean"] for p in ("ideal", "limited")
             for m in ("Hidden-Post", "Rules")]
    assert crossed.rows[-1].keys["sim_preset"] == "average" and corner.entry["mean"] == pytest.approx(sum(every) / 4)
    assert "average · task accuracy" in " ".join(cells(crossed)[0])


def test_the_header_names_the_judge_the_lms_the_decoding_and_a_self_judging_model():
    from groundstate.eval.experiments.table import header_lines

    def config(model, judge, temperature=0.0, roles=None):
        return {"config": {"lm": {"model": model, "temperature": temperature, "max_tokens": 512},
                           "options": {"judge": judge}, "lm_config": {"roles": roles or {}}}}

    lines = header_lines([], [config("openai/gpt-4o", "lm:openai/gpt-4o"), config("gemini/x", "lm:gemini/x")])
    assert lines[0] == ("judge: lm:openai/gpt-4o (judge = model under test); lm:gemini/x (judge = model under "
                        "test)")
    assert lines[1] == "LM: openai/gpt-4o; gemini/x"
    assert lines[2] == ("decoding: openai/gpt-4o: temperature 0.0, max tokens 512; gemini/x: temperature 0.0, max "
                        "tokens 512")
    lines = header_lines([], [config("openai/gpt-4o", "lm:openai/gpt-4o-2", roles={"agent.0": {"model": "m/a"}})])
    assert "model under test" not in lines[0] and lines[1] == "LM: openai/gpt-4o; m/a (role agent.0)"
    assert lines[2].endswith("m/a (role agent.0): temperature default, max tokens default")


def test_a_table_of_simulated_runs_names_the_agents_and_warns_on_design_default_support(stored):
    """Item 6 in the experiment layer: the header uses the one agents label of every hidden-profile output, and the
    title of a table any of whose runs had simulated agents on design-default support carries the warning."""
    from dataclasses import replace

    from groundstate.eval.consilience.provenance import FIXED_BY_CONSTRUCTION, describe_agents
    from groundstate.eval.experiments.render import title
    from groundstate.eval.experiments.table import header_lines

    spec, run, _ = stored
    table = build_table(spec, run, lms=ScriptedLMs())
    assert FIXED_BY_CONSTRUCTION not in title(table)
    agents = {"kind": "sim", "params": {"attention": 3, "salience": 0.5, "recency": 0.8, "weight_noise": 0.3},
              "support": {"source": "design"}}
    config = {"program": "consilience-rules", "options": {"agents": agents}}
    warned = replace(table, configs={**table.configs, "extra": config})
    assert title(warned).endswith(FIXED_BY_CONSTRUCTION)
    assert title(warned).count(FIXED_BY_CONSTRUCTION) == 1
    lines = header_lines([], [{"config": config}])
    assert f"agents: {describe_agents(agents)}" in lines
    annotated = {**agents, "support": {"source": "annotated"}}
    assert FIXED_BY_CONSTRUCTION not in title(replace(table, configs={"x": {"options": {"agents": annotated}}}))


def test_a_specs_runs_table_names_exact_run_ids_never_a_prefix(stored):
    """A name from a file is not a pattern: ``[runs]`` with a prefix of a stored run id finds no run, while the
    same prefix typed as ``--use-run`` is the user's own convenience and resolves."""
    from groundstate.errors import InputError

    spec, run, variants = stored
    prefix = variants["rounds"][:-3]
    with pytest.raises(InputError, match="no run"):
        build_table(spec.model_copy(update={"runs": {CELL: prefix}}), run, lms=ScriptedLMs())
    with pytest.raises(ConfigError, match="options.rounds"):
        build_table(spec, run, lms=ScriptedLMs(), use_runs=[f"{CELL}={prefix}"])
