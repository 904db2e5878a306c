"""What produced a hidden-profile result: the agents' label, the design-default warning, the attention
sensitivity's variants and rows, and titles that fit their figure."""

from __future__ import annotations

from dataclasses import asdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from groundstate.errors import InputError  # noqa: E402
from groundstate.eval.consilience.provenance import (  # noqa: E402
    FIXED_BY_CONSTRUCTION,
    agents_of,
    describe_agents,
    is_fixed_by_construction,
    provenance,
    runs_provenance,
    warned_title,
)
from groundstate.eval.consilience.sensitivity import (  # noqa: E402
    ATTENTION_SENSITIVITY,
    holds_line,
    ordering,
    ordering_holds,
    sensitivity_cells,
    sensitivity_rows,
    sensitivity_variants,
)
from groundstate.eval.consilience.settings import EvaluationSettings  # noqa: E402
from groundstate.eval.consilience.tables import table_figure  # noqa: E402
from groundstate.eval.report import comparison_figure, comparison_rows  # noqa: E402
from groundstate.programs.consilience.simulated import SIM_PRESETS, sim_preset  # noqa: E402

LIMITED = SIM_PRESETS["limited"]


def sim(params, support=None) -> dict:
    return {"kind": "sim", "params": asdict(params), "seed": 0, "support": support or {"own": 8}}


def test_the_label_names_the_preset_and_every_limit():
    assert describe_agents(sim(LIMITED)) == (
        f"simulated agents, preset 'limited' (attention {LIMITED.attention} facts, salience {LIMITED.salience:g}, "
        f"recency {LIMITED.recency:g}, weight noise {LIMITED.weight_noise:g}); support: the tasks' own")
    assert describe_agents(sim(SIM_PRESETS["ideal"])).startswith(
        "simulated agents, preset 'ideal' (attention unlimited, salience 0, recency 1, weight noise 0);")


def test_a_changed_value_is_marked_against_its_preset():
    label = describe_agents(sim(sim_preset("limited", attention=5, beta=2.0)))
    assert "preset 'limited' (attention 5 facts [preset: 3 facts], salience 0.5," in label
    assert "beta 2 [preset: 1]" in label and "recall" not in label  # unchanged non-limits stay out
    assert "preset 'ideal' (attention 1 fact [preset: unlimited]," in describe_agents(sim(sim_preset("ideal",
                                                                                                     attention=1)))


def test_lm_agents_name_their_models():
    assert describe_agents({"kind": "lm", "lm_config": None}, {"model": "openai/gpt-4o"}) == "LM agents: openai/gpt-4o"
    config = {"default": {"model": "embedded"}, "roles": {"agent.2": {"model": "ollama_chat/qwen3:8b"},
                                                          "verify.*": {"model": "x"}}}
    assert describe_agents({"kind": "lm", "lm_config": config}) == \
        "LM agents: embedded (default), agent.2: ollama_chat/qwen3:8b"
    assert not provenance({"kind": "lm"})["simulated"] and not is_fixed_by_construction({"kind": "lm"})


def test_the_design_default_is_fixed_by_construction():
    design = sim(LIMITED, {"own": 0, "source": "design", "tasks": 8})
    assert is_fixed_by_construction(design)
    assert warned_title("T", design) == f"T: {FIXED_BY_CONSTRUCTION}"
    assert "support: the hidden-profile design default for 8 task(s)" in describe_agents(design)
    about = provenance(design)
    assert about["fixed_by_construction"] and about["warning"] == FIXED_BY_CONSTRUCTION and about["preset"] == "limited"
    annotated = sim(LIMITED, {"own": 0, "source": "file", "tasks": 8, "file": "t.json.support.json"})
    assert not is_fixed_by_construction(annotated) and warned_title("T", annotated) == "T"
    assert "support: the annotation t.json.support.json for 8 task(s)" in describe_agents(annotated)


def test_the_runs_of_one_table():
    design = sim(SIM_PRESETS["ideal"], {"own": 0, "source": "design", "tasks": 8})
    configs = [{"options": {"agents": sim(LIMITED)}}, {"options": {"agents": sim(LIMITED)}},
               {"options": {"agents": design}}, {"options": {"judge": "lexical"}}, None]
    about = runs_provenance(configs)
    assert len(about["agents"]) == 2 and about["agents"][0].startswith("simulated agents, preset 'limited'")
    assert about["simulated"] and about["fixed_by_construction"] and about["warning"] == FIXED_BY_CONSTRUCTION
    assert runs_provenance([{"options": {}}]) == {"agents": [], "simulated": False, "fixed_by_construction": False,
                                                  "warning": None}


def test_hostile_descriptions_give_one_line_or_nothing():
    assert agents_of({"options": {"agents": {"kind": "robot"}}}) is None and agents_of("x") is None
    assert describe_agents(None) == "" and describe_agents({"kind": "robot"}) == ""
    label = describe_agents({"kind": "sim", "params": {"attention": "3\n\x1b[2J", "salience": [1], "evil": 1},
                             "support": {"source": "file", "file": "a\nb", "tasks": "many"}})
    assert "\n" not in label and "\x1b" not in label and "evil" not in label


def test_variants_of_a_spec_mapping_and_of_settings():
    base = {"agents": "sim", "sim_preset": "limited", "data": "t.jsonl", "seed": 3}
    variants = sensitivity_variants(base, {"sim_attention": ["all", 5, 3, 2]})
    assert [v.title for v in variants] == ["attention unlimited", "attention 5 facts", "attention 3 facts",
                                           "attention 2 facts"]
    assert [v.settings["sim_attention"] for v in variants] == ["all", 5, 3, 2]
    assert all(v.settings["seed"] == 3 and v.settings["sim_preset"] == "limited" for v in variants)
    assert base == {"agents": "sim", "sim_preset": "limited", "data": "t.jsonl", "seed": 3}  # untouched
    two = sensitivity_variants(base, {"sim_attention": [5, 2], "sim_salience": [0, 1]})
    assert [v.label for v in two] == ["sim_attention=5, sim_salience=0", "sim_attention=5, sim_salience=1",
                                      "sim_attention=2, sim_salience=0", "sim_attention=2, sim_salience=1"]
    settings = EvaluationSettings(data="t.jsonl", sim_preset="limited")
    models = sensitivity_variants(settings)
    assert [m.settings.sim_params().attention for m in models] == [None, 5, 3, 2]
    assert all(isinstance(m.settings, EvaluationSettings) for m in models)
    assert "agents" not in models[0].settings.model_fields_set  # unset stays unset
    assert dict(ATTENTION_SENSITIVITY) == {"sim_attention": ("all", 5, 3, 2)}


@pytest.mark.parametrize(("sensitivity", "base", "message"), [
    ({"sim_attention": []}, {}, "non-empty list"),
    ({"sim_attention": "all"}, {}, "non-empty list"),
    ({"sim_attention": [5, 5]}, {}, "repeated"),
    ({"data": ["a", "b"]}, {}, "only simulated-agent settings"),
    ({"sim_attentionx": [1]}, {}, "only simulated-agent settings"),
    ({"sim_attention": [0]}, {}, "sim_attention"),
    ({"sim_recency": [2.0]}, {}, "sim_recency"),
    ({"sim_attention": [3]}, {"agents": "lm"}, "LM agents"),
    ({}, {}, "names no setting"),
])
def test_bad_sensitivities_are_one_line(sensitivity, base, message):
    with pytest.raises(InputError) as info:
        sensitivity_variants(base, sensitivity, file="spec.toml")
    text = str(info.value)
    assert message in text and text.startswith("spec.toml") and "\n" not in text


def _row(method: str, mean: float | None) -> dict:
    return {"method": method, "task_accuracy": {"mean": mean, "low": None, "high": None}}


def test_rows_show_each_method_and_whether_the_ordering_holds():
    variants = sensitivity_variants({}, {"sim_attention": ["all", 3]})
    rows = sensitivity_rows([(variants[0], [_row("Full-Info", 0.9), _row("Rules", 0.8), _row("MLP", None)]),
                             (variants[1], [_row("Full-Info", 0.5), _row("Rules", 0.8), _row("MLP", 0.5)])])
    assert [r["ordering"] for r in rows] == ["Full-Info > Rules", "Rules > Full-Info = MLP"]
    assert not ordering_holds(rows) and "changes with the attention limit" in holds_line(rows)
    header, body = sensitivity_cells(rows)
    assert header == ["variant", "Full-Info", "Rules", "MLP", "ordering (best first)"]
    assert body[0] == ["attention unlimited", "0.900", "0.800", "not measured", "Full-Info > Rules"]
    same = sensitivity_rows([(v, [_row("A", 0.7), _row("B", 0.2)]) for v in variants])
    assert ordering_holds(same) and "the same at every value" in holds_line(same)
    assert ordering({"A": 0.5004, "B": 0.5001, "C": 0.9}) == "C > A = B"


LONG = "hb.json: task accuracy / vote accuracy (sim agents, HiddenBench protocols, 65 tasks): " + FIXED_BY_CONSTRUCTION
SUB = describe_agents(sim(LIMITED, {"own": 0, "source": "design", "tasks": 65}))


def _inside(fig, text) -> bool:
    box = text.get_window_extent(fig.canvas.get_renderer())
    return 0 <= box.x0 and box.x1 <= fig.bbox.width and 0 <= box.y0 and box.y1 <= fig.bbox.height


def _overflows(text: str, fontsize: float) -> bool:
    """Whether ``text`` on one line is wider than the figure: the case the wrapping exists for."""
    fig = plt.figure(figsize=(5.0, 3.6))
    try:
        drawn = fig.text(0.5, 0.5, text, ha="center", fontsize=fontsize)
        return drawn.get_window_extent(fig.canvas.get_renderer()).width > fig.bbox.width
    finally:
        plt.close(fig)


def test_the_table_chart_title_fits_its_figure():
    entry = {"mean": 0.5, "low": 0.3, "high": 0.7}
    rows = [{"method": m, "task_accuracy": entry, "vote_accuracy": entry} for m in ("Hidden-Pre", "Rules")]
    assert _overflows(LONG, 10)
    fig = table_figure(rows, LONG, SUB)
    try:
        title = fig.axes[0].title
        assert _inside(fig, title)
        shown = "".join(title.get_text().split())
        assert "".join(FIXED_BY_CONSTRUCTION.split()) in shown and "preset'limited'(attention3facts" in shown
    finally:
        plt.close(fig)


def test_the_comparison_chart_title_fits_its_figure():
    score = {"mean": 0.5, "low": 0.2, "high": 0.8, "n": 4}
    summary = {"n_done": 4, "n_error": 0, "scores": {"task_accuracy": score}, "tokens": {"per_record": 0},
               "lm_calls": {"per_record": 0, "cached": 0}}
    rows = comparison_rows({"rules": summary}, metrics=("task_accuracy",))
    fig = comparison_figure(rows, ("task_accuracy",), title=LONG * 2, subtitle=SUB)
    try:
        assert _inside(fig, fig.axes[0].title)
        assert "".join(SUB.split()) in "".join(fig.axes[0].get_title().split())
    finally:
        plt.close(fig)
