"""The public-only leak measure (travel/leak.py) and its report in `groundstate hidden validate`."""

import json

import pytest

from groundstate import cli
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel, generate_travel
from groundstate.eval.benchmarks.travel.leak import LeakReport, leak_rates, rule_picks
from groundstate.eval.benchmarks.travel.records import Plan, TravelTask
from groundstate.records import LETTERS, HiddenProfileTask
from tests.helpers import DATA as TEST_DATA


def plans_of(prices: list[int], step_free: list[bool] | None = None, **extra) -> list[Plan]:
    step_free = step_free or [True, False, True, False]
    return [Plan(id=letter, title=f"plan {letter}",
                 attributes={"price_per_person_usd": price, "duration_days": 4, "step_free": free,
                             "transport_mode": "train", "activities": ["a", "b"],
                             **{key: values[i] for key, values in extra.items()}})
            for i, (letter, price, free) in enumerate(zip(LETTERS, prices, step_free, strict=True))]


def task_of(plans: list[Plan], answer: str) -> TravelTask:
    return TravelTask(name="t", description="d", options=plans, agents=[], correct_answer=answer)


def test_the_cheapest_plan_always_the_answer_scores_one():
    prices = [[500, 700, 900, 1100], [900, 400, 800, 1200], [1000, 950, 300, 600], [800, 900, 700, 650]]
    tasks = [task_of(plans_of(p), LETTERS[p.index(min(p))]) for p in prices]
    report = leak_rates(tasks, n_resamples=0)
    assert report.n == 4 and report.chance == 0.25
    assert report.rates["lowest price_per_person_usd"] == 1.0
    assert report.rates["highest price_per_person_usd"] == 0.0
    assert report.worst_rate == 1.0 and report.excess == 0.75 and report.leaks() and report.p_value is None
    assert [report.rates[f"position {x}"] for x in LETTERS] == [0.25, 0.25, 0.25, 0.25]  # A, B, C, D once each
    # the same day count on every plan: a four-way tie, so a quarter of a hit every time
    assert report.rates["lowest duration_days"] == report.rates["highest duration_days"] == 0.25


def test_ties_share_the_credit_and_empty_filters_fall_back_to_every_plan():
    tied = plans_of([400, 400, 900, 900], [False, False, False, False])
    picks = rule_picks(tied)
    assert picks["lowest price_per_person_usd"] == ["A", "B"]
    assert picks["step_free yes"] == ["A", "B", "C", "D"]  # no step-free plan: a blind guess
    assert picks["cheapest step-free"] == ["A", "B"]  # ... and the cheapest of all plans
    assert picks["modal transport_mode"] == picks["rarest transport_mode"] == ["A", "B", "C", "D"]
    report = leak_rates([task_of(tied, "A"), task_of(tied, "C")], n_resamples=0)
    assert report.rates["lowest price_per_person_usd"] == 0.25  # half a hit, then none
    assert report.rates["step_free yes"] == 0.25


def test_categorical_list_ordinal_and_central_rules():
    plans = plans_of([500, 600, 700, 800], hotel_category=["budget", "upscale", "budget", "midrange"],
                     meal_options=[["vegan"], ["vegan", "halal", "seafood"], ["halal"], ["vegan", "halal"]])
    picks = rule_picks(plans)
    assert picks["modal hotel_category"] == ["A", "C"] and picks["rarest hotel_category"] == ["B", "D"]
    assert picks["lowest hotel_category"] == ["A", "C"] and picks["highest hotel_category"] == ["B"]
    assert picks["most meal_options"] == ["B"] and picks["fewest meal_options"] == ["A", "C"]
    assert picks["lowest price per day"] == ["A"] and picks["priciest step-free"] == ["C"]
    assert picks["step-free with most activities"] == ["A", "C"]
    # distances: numbers by their gap over the range, strings 0 or 1; B and C sit in the middle, D far out
    spread = [Plan(id=letter, title="t", attributes={"x": x, "kind": kind})
              for letter, x, kind in zip(LETTERS, [0, 1, 2, 10], ["a", "a", "a", "b"], strict=True)]
    picks = rule_picks(spread)
    assert picks["most central"] == ["B", "C"] and picks["odd one out"] == ["D"]
    assert "cheapest step-free" not in picks and picks["lowest x"] == ["A"] and picks["rarest kind"] == ["D"]


def test_records_without_a_travel_structure_are_left_out_and_missing_attributes_count_at_chance():
    first = task_of(plans_of([500, 700, 900, 1100], hotel_category=["budget"] * 4), "A")
    second = task_of(plans_of([900, 400, 800, 1200]), "B")  # no hotel category: its rules guess
    plain = HiddenProfileTask(id="x", description="d", private=[["a"], ["b"]], options=["A", "B"], correct="A")

    def record(task: TravelTask) -> HiddenProfileTask:
        return HiddenProfileTask(id="r", description="d", private=[["a"], ["b"]], options=list(LETTERS),
                                 correct=task.correct_answer, structure=task.model_dump(mode="json"))

    report = leak_rates([record(first), plain, record(second)], n_resamples=0)
    assert report.n == 2
    assert report.rates["lowest price_per_person_usd"] == 1.0
    assert report.rates["lowest hotel_category"] == (0.25 + 0.25) / 2
    assert leak_rates([plain]) == LeakReport(n=0, chance=0.0) and LeakReport(n=0, chance=0.0).lines() == []


def test_500_generated_tasks_show_no_leak_beyond_luck():
    """The brief's 500-task check, made statistical: the worst of 35 rules on 500 leak-free tasks is typically
    3-5 points above chance by luck alone (95% stay within about 5.5), so the test asks for no evidence of a
    leak: random answers on the same plans do at least as well at least 1% of the time. The old generator
    (cheapest step-free plan: 34% against 25%) gets p = 0.001, the smallest p of 999 resamples."""
    tasks = generate_travel(500, seed=0)
    report = leak_rates(tasks)
    assert report.n == 500 and report.chance == 0.25
    assert report.p_value is not None and report.p_value >= 0.01, report.lines()
    assert report.excess < report.luck
    assert report.rates["cheapest step-free"] <= 0.28 and report.rates["most central"] <= 0.28


def test_a_biased_set_is_flagged():
    """Relabel half of the tasks to their cheapest plan: the measure finds it and calls it a leak."""
    tasks = generate_travel(200, seed=3)
    for task in tasks[::2]:
        prices = [p.attributes["price_per_person_usd"] for p in task.options]
        task.correct_answer = task.options[prices.index(min(prices))].id
    report = leak_rates(tasks)
    assert report.worst in ("lowest price_per_person_usd", "cheapest step-free", "lowest price per day")
    assert report.excess > 0.2 and report.p_value is not None and report.p_value <= 0.01
    lines = report.lines()
    assert lines[0].startswith(f"public-only leak: worst rule '{report.worst}' finds the answer in ")
    assert lines[1].startswith("warning: the public plans alone point to the answer")


def test_noise_is_a_note_not_a_warning():
    report = LeakReport(n=500, chance=0.25, rates={"lowest x": 0.29, "position A": 0.25}, worst="lowest x",
                        p_value=0.3, luck=0.055)
    lines = report.lines()
    assert "+4.0 points" in lines[0] and "p = 0.3" in lines[0] and "95% stay within +5.5" in lines[0]
    assert lines[1].startswith("note: 'lowest x' beats chance by 4.0 points (more than 3)")
    assert report.lines(max_leak=0.05)[1:] == []


# -- the CLI report -------------------------------------------------------------------------------------------
def test_validate_reports_the_leak_without_changing_the_exit_status(tmp_path, capsys):
    out = tmp_path / "travel.jsonl"
    out.write_text("".join(json.dumps(t.model_dump(mode="json")) + "\n" for t in generate_hidden_travel(40, seed=2)))
    assert cli.main(["hidden", "validate", "--data", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("public-only leak: worst rule '") and "of 40 travel tasks (chance 25.0%" in lines[0]
    assert lines[-1].startswith("40 tasks loaded (40 checked against the travel validator), 0 problem(s)")
    # --max-leak turns a leak above POINTS into a problem: 0 points is always exceeded by the worst rule
    assert cli.main(["hidden", "validate", "--data", str(out), "--max-leak", "0"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{out}: public-only rule '") and lines[0].endswith("(--max-leak 0)")
    assert lines[-1].startswith("40 tasks loaded (40 checked against the travel validator), 1 problem(s)")
    assert cli.main(["hidden", "validate", "--data", str(out), "--max-leak", "100"]) == 0
    capsys.readouterr()


def test_validate_has_no_leak_line_without_travel_tasks(capsys):
    assert cli.main(["hidden", "validate", "--data", str(TEST_DATA / "hiddenbench" / "sample.json")]) == 0
    assert "public-only leak" not in capsys.readouterr().out


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_bad_max_leak_is_one_line_exit_2(tmp_path, capsys, value):
    out = tmp_path / "travel.jsonl"
    out.write_text("")
    with pytest.raises(SystemExit) as info:  # refused when the options are parsed, before the file is read
        cli.main(["hidden", "validate", "--data", str(out), "--allow-empty", "--max-leak", value])
    assert info.value.code == 2 and "argument --max-leak: expected a number of at least 0" in capsys.readouterr().err
