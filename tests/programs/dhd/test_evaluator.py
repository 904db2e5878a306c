"""The DHD evaluator: rules and judge modes, no-answer and hedged answers, tolerance boundaries, mode selection."""

from __future__ import annotations

import pytest

from groundstate.programs.dhd.evaluator import (
    AnswerEvaluator,
    extract_number,
    number_candidates,
    numbers_match,
    option_letters,
    unit_scale,
)
from groundstate.records import Problem
from groundstate.testing import scripted_lm
from tests.programs.dhd.conftest import run


def configs(lm) -> list[tuple[tuple[str, ...], float | None]]:
    """Record (output fields, temperature) of every request that reaches ``lm``'s engine."""
    seen: list = []
    complete = lm.engine.complete

    def spy(request):
        schema = (request.config.response_format or {}).get("schema") or {}
        seen.append((tuple(schema.get("properties", {})), request.config.temperature))
        return complete(request)

    lm.engine.complete = spy
    return seen


def number(answer: str, tolerance: float = 0.05, abs_tolerance: float | None = None, unit: str | None = None):
    metadata = {"abs_tolerance": abs_tolerance} if abs_tolerance is not None else {}
    return Problem(id="n", question="How long? QUESTION-TOKEN", answer=answer, kind="number", unit=unit,
                   tolerance=tolerance, metadata=metadata)


RULES = AnswerEvaluator(mode="rules")


def rules(problem: Problem, answer: str, response: str | None = None) -> tuple[int | None, str]:
    verdict = RULES.evaluate(problem, answer, response=response)
    return verdict.correct, verdict.method


# -- reading numbers -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [
    ("3.2 \\times 10^{-3}", 3.2e-3), ("$3.2 \\times 10^{-3}$ mol", 3.2e-3), ("1.2e-3", 1.2e-3), ("2.5 × 10³", 2500),
    ("ΔH = +65.49 kJ/mol", 65.49), ("p(C2H6) = 50.7 atm", 50.7), ("\\boxed{\\frac{3}{2}}", 1.5), ("1,250 m", 1250),
    ("10^{5} Pa", 1e5), ("−4.1", -4.1), ("no idea", None), ("", None)])
def test_extract_number(text, value):
    got = extract_number(text)
    assert got == pytest.approx(value) if value is not None else got is None


@pytest.mark.parametrize(("text", "values"), [
    ("0.123 or 0.246", [0.123, 0.246]), ("x = 2 or x = 3", [2, 3]), ("either 5 or 7", [5, 7]),
    ("between 3 and 5", [3, 5]), ("1.5; 2.5", [1.5, 2.5]), ("42 or 42.0", [42, 42]),
    ("9.8 m/s^2", [9.8]), ("3.2 \\times 10^{-3} mol", [3.2e-3]), ("12 m/s (about 43 km/h)", [12]),
    ("12 m/s, i.e. 43 km/h", [43]), ("12 m/s or equivalently 43 km/h", [43]), ("2 moles, i.e. 0.123", [0.123]),
    ("0.123, to 3 significant figures", [0.123]), ("12.5%", [12.5]),
    ("0.123 (3 s.f.)", [0.123]), ("v = 3 \\times 4 = 12 m/s", [12]), ("2.5 ± 0.1", [2.5]), ("E_2 = 3.4 eV", [3.4]),
    ("\\boxed{0.5} first, finally \\boxed{0.7}", [0.7]), ("no idea", [])])
def test_number_candidates(text, values):
    assert number_candidates(text) == pytest.approx(values)


# -- tolerance boundaries ------------------------------------------------------------------------------------------
def test_relative_tolerance_boundary_is_inclusive():
    problem = number("8", tolerance=0.25)  # allowed difference exactly 2 (binary-exact numbers)
    assert [rules(problem, t)[0] for t in ("10", "6", "10.001", "5.999")] == [1, 1, 0, 0]
    assert numbers_match(4.80, 4.93, 0.05) and not numbers_match(4.50, 4.93, 0.05)


def test_absolute_tolerance_boundary_and_the_larger_bound_wins():
    jee = number("2.25", tolerance=0.0, abs_tolerance=0.5)  # JEEBench style: an absolute tolerance only
    assert [rules(jee, t)[0] for t in ("2.75", "1.75", "2.7501", "1.7499")] == [1, 1, 0, 0]
    both = number("1", tolerance=0.25, abs_tolerance=0.5)  # relative allows 0.25, absolute 0.5: the larger wins
    assert [rules(both, t)[0] for t in ("1.5", "0.5", "1.5001")] == [1, 1, 0]
    small = number("100", tolerance=0.25, abs_tolerance=0.5)  # here the relative bound (25) is the larger
    assert [rules(small, t)[0] for t in ("125", "125.01")] == [1, 0]


def test_unit_scale_accepts_either_form():
    problem = number("3.52", unit="$10^{-19} \\mathrm{~J}$")
    assert unit_scale(problem.unit) == pytest.approx(1e-19) and unit_scale("$\\mathrm{atm}$") is None
    assert rules(problem, "3.5") == (1, "numeric") and rules(problem, "3.52 \\times 10^{-19} J") == (1, "numeric")
    assert rules(problem, "3.52 or 3.52 \\times 10^{-19} J") == (1, "numeric")  # one value in two forms
    assert rules(problem, "4.1") == (0, "numeric")


# -- no answer and hedging -----------------------------------------------------------------------------------------
def test_no_usable_value_is_a_wrong_answer_in_rules_mode():
    assert rules(number("12"), "I cannot tell") == (0, "no-answer")
    assert rules(number("12"), "") == (0, "no-answer")
    assert rules(Problem(id="o", question="q", answer="B", kind="option"), "unsure") == (0, "no-answer")
    assert rules(Problem(id="t", question="q", answer="Paris", kind="text"), "  ") == (0, "no-answer")


def test_no_usable_value_is_a_wrong_answer_in_judge_mode():
    lm = scripted_lm(lambda req: {"final_answer": "none", "verdict": "incorrect"})
    judge = AnswerEvaluator(mode="judge")
    empty = run(lm, lambda: judge.evaluate(number("12"), "", response="  "))
    assert (empty.correct, empty.method) == (0, "no-answer") and lm.engine.calls == 0  # nothing to judge
    vague = run(lm, lambda: judge.evaluate(number("12"), "I cannot tell"))
    assert (vague.correct, vague.method) == (0, "judge") and lm.engine.calls == 1


@pytest.mark.parametrize(("answer", "gold"), [("0.123 or 0.246", "0.123"), ("x = 0.123 or x = 0.246", "0.123"),
                                              ("0.246 or 0.123", "0.123"), ("between 0.1 and 0.2", "0.1"),
                                              ("\\boxed{0.123 \\text{ or } 0.246}", "0.123")])
def test_hedged_numbers_are_wrong_not_scored_by_their_first_value(answer, gold):
    assert rules(number(gold), answer) == (0, "hedged")


def test_hedged_answers_are_wrong_in_judge_mode_too_whatever_the_judge_says():
    lm = scripted_lm(lambda req: {"final_answer": "0.123", "verdict": "correct"})  # a lenient judge
    judge = AnswerEvaluator(mode="judge")
    hedged = run(lm, lambda: judge.evaluate(number("0.123"), "0.123 or 0.246", response="r\n\n0.123 or 0.246"))
    letters = run(lm, lambda: judge.evaluate(Problem(id="o", question="q", answer="A", kind="option"), "A or C"))
    assert [(v.correct, v.method) for v in (hedged, letters)] == [(0, "hedged"), (0, "hedged")]
    assert lm.engine.calls == 0
    committed = run(lm, lambda: judge.evaluate(number("0.123"), "0.123 m", response="r\n\n0.123 m"))
    assert (committed.correct, committed.method) == (1, "judge") and lm.engine.calls == 1


@pytest.mark.parametrize("answer", ["0.123", "0.123 or 0.123", "0.123 m", "1.23 \\times 10^{-1} m", "\\boxed{0.123}",
                                    "x = 12.3 cm, i.e. 0.123", "0.123, to 3 significant figures",
                                    "\\boxed{0.5} at first; finally \\boxed{0.123}", "0.1225 or 0.1235"])
def test_repeated_values_units_and_notation_are_not_hedging(answer):
    assert rules(number("0.123"), answer) == (1, "numeric")  # the last one: two values within tolerance of each other


# -- issue 25: the final stated value, ranges as hedges, percents against fractions --------------------------------
@pytest.mark.parametrize(("answer", "gold", "unit", "expected"), [
    # the final stated value is the answer
    ("2 moles, i.e. 0.123", "0.123", None, (1, "numeric")),
    ("2 moles, i.e. 0.123", "2", None, (0, "numeric")),
    ("n = 2 mol; therefore c = 0.123 M", "0.123", None, (1, "numeric")),
    ("2 mol of gas, so 0.123 M", "0.123", None, (1, "numeric")),
    ("0.123, which is about 12%", "0.123", None, (1, "numeric")),
    ("x = 5 - 3 = 2", "2", None, (1, "numeric")),
    ("0.123 m, i.e. 12.3 cm", "0.123", "m", (0, "numeric")),  # the restated number: rules cannot convert units
    ("\\boxed{0.5} first, then \\boxed{0.123}", "0.123", None, (1, "numeric")),
    # a range is a hedge, however narrow
    ("approximately 0.12-0.13", "0.12", None, (0, "hedged")),
    ("approximately 0.12-0.13", "0.125", None, (0, "hedged")),
    ("0.12\u20130.13", "0.125", None, (0, "hedged")),
    ("0.12 to 0.13", "0.125", None, (0, "hedged")),
    ("0.124 to 0.126", "0.125", None, (0, "hedged")),
    ("between 0.124 and 0.126", "0.125", None, (0, "hedged")),
    ("from 3 to 5 m", "4", None, (0, "hedged")),
    ("0.12 m - 0.13 m", "0.125", None, (0, "hedged")),
    ("12-13%", "0.125", None, (0, "hedged")),
    ("3.2 \\times 10^{-3} - 3.4 \\times 10^{-3}", "0.0033", None, (0, "hedged")),
    ("2 mol, i.e. 0.12-0.13", "0.125", None, (0, "hedged")),
    # single values that only look like ranges
    ("1.2e-3", "0.0012", None, (1, "numeric")), ("-0.12", "-0.12", None, (1, "numeric")),
    ("x = -5", "-5", None, (1, "numeric")), ("2.5 \u00b1 0.1", "2.5", None, (1, "numeric")),
    ("10^{-3} mol", "0.001", None, (1, "numeric")), ("a 10-fold rise: 10", "10", None, (1, "numeric")),
    ("3.2 \\times 10^{-3} mol", "0.0032", None, (1, "numeric")), ("\u22124.1", "-4.1", None, (1, "numeric")),
    # percents compare with fractions, both ways
    ("12.5%", "0.125", None, (1, "numeric")), ("12.5\\%", "0.125", None, (1, "numeric")),
    ("12.5 percent", "0.125", None, (1, "numeric")), ("12.5%", "12.5", None, (1, "numeric")),
    ("0.125", "12.5", "%", (1, "numeric")), ("0.125", "12.5", "\\%", (1, "numeric")),
    ("0.125", "12.5%", None, (1, "numeric")), ("12.5%", "12.5", "%", (1, "numeric")),
    ("0.125 or 12.5%", "0.125", None, (1, "numeric")),  # one value stated twice, not a hedge
    ("25%", "0.125", None, (0, "numeric")), ("0.125", "12.5", None, (0, "numeric")),
    ("12.5% or 25%", "0.125", None, (0, "hedged")),
])
def test_rules_read_the_final_value_refuse_ranges_and_compare_percents(answer, gold, unit, expected):
    assert rules(number(gold, unit=unit), answer) == expected


def test_a_range_is_wrong_in_judge_mode_without_asking_the_judge():
    lm = scripted_lm(lambda req: {"final_answer": "0.125", "verdict": "correct"})  # a lenient judge
    judge = AnswerEvaluator(mode="judge")
    verdict = run(lm, lambda: judge.evaluate(number("0.125"), "approximately 0.12-0.13", response="r\n\n0.12-0.13"))
    assert (verdict.correct, verdict.method) == (0, "hedged") and lm.engine.calls == 0
    restated = run(lm, lambda: judge.evaluate(number("0.125"), "2 moles, i.e. 0.125", response="r"))
    assert (restated.correct, restated.method) == (1, "judge") and lm.engine.calls == 1  # not a hedge: judged


def test_hedged_option_letters_are_wrong():
    one = Problem(id="o", question="q", answer="A", kind="option")
    assert rules(one, "either A or C") == (0, "hedged") and rules(one, "A or C") == (0, "hedged")
    assert rules(one, "A, C") == (0, "hedged")  # two letters where exactly one is expected
    assert rules(one, "A") == (1, "options") and rules(one, "(A)") == (1, "options")
    several = Problem(id="m", question="q", answer="ACD", kind="options")
    assert [rules(several, t) for t in ("A, C and D", "AC", "DCA", "A or C or D", "maybe A, C, D")] == [
        (1, "options"), (0, "options"), (1, "options"), (0, "hedged"), (0, "hedged")]


@pytest.mark.parametrize(("text", "letters"), [("B", {"B"}), ("(b)", {"B"}), ("Options A and C", {"A", "C"}),
                                               ("ACD", {"A", "C", "D"}), ("A sensible choice is C", {"C"}),
                                               ("The answer is (D)", {"D"}), ("A or C", {"A", "C"}),
                                               ("Either A or C", {"A", "C"}), ("none of them", None)])
def test_option_letters(text, letters):
    assert option_letters(text) == letters


def test_rules_for_text_and_expressions_never_call_an_lm():
    lm = scripted_lm()
    expr = Problem(id="e", question="q", answer="x + 1", kind="expression")
    assert run(lm, lambda: rules(expr, "X+1")) == (1, "exact")
    assert run(lm, lambda: rules(expr, "1 + x")) == (0, "exact")  # a rewritten expression: rules cannot tell
    plain = Problem(id="t", question="q", answer="42", kind="text")
    assert run(lm, lambda: rules(plain, "about 42")) == (1, "numeric")
    assert lm.engine.calls == 0


def test_rules_read_the_last_boxed_answer_of_the_response_when_the_answer_field_has_none():
    response = "Try \\boxed{0.5}; no, a check gives \\boxed{0.123}.\n\nFinal answer: see above"
    assert rules(number("0.123"), "see above", response=response) == (1, "numeric")


def test_a_number_problem_without_a_gold_number_is_bad_input():
    with pytest.raises(ValueError, match="has no number"):
        RULES.evaluate(number("lots"), "3")


# -- judge mode ----------------------------------------------------------------------------------------------------
def test_judge_sees_the_problem_the_gold_answer_and_the_full_response():
    def respond(req):
        assert req.output_fields == ["final_answer", "verdict"]
        ok = "REASON-TOKEN" in req.field("response") and "QUESTION-TOKEN" in req.field("problem")
        return {"final_answer": "0.123", "verdict": "correct" if ok else "incorrect"}

    lm = scripted_lm(respond)
    seen = configs(lm)
    response = "REASON-TOKEN: the rod shrinks.\n\nFinal answer: 0.123"
    verdict = run(lm, lambda: AnswerEvaluator(mode="judge").evaluate(number("0.123", unit="m"), "0.123", response))
    assert (verdict.correct, verdict.method, verdict.value) == (1, "judge", "0.123")
    request = lm.engine.requests[0]
    assert request.field("reference_answer") == "0.123 m" and "5%" in request.field("equivalence_rule")
    assert request.field("response") == response  # the whole response, reasoning included
    assert seen == [(("final_answer", "verdict"), 0.0)]  # the judge runs at temperature 0 by default
    run(lm, lambda: AnswerEvaluator(mode="judge", temperature=0.4).evaluate(number("0.123"), "1", "r\n\n1"))
    assert seen[-1][1] == 0.4


def test_judge_decides_even_what_rules_would_call_wrong():
    lm = scripted_lm(lambda req: {"final_answer": "1+x", "verdict": "correct"})
    expr = Problem(id="e", question="q", answer="x + 1", kind="expression")
    assert run(lm, lambda: AnswerEvaluator(mode="judge").evaluate(expr, "1 + x")).correct == 1
    assert run(lm, lambda: RULES.evaluate(expr, "1 + x")).correct == 0


@pytest.mark.parametrize("reply", [RuntimeError("judge down"), {"final_answer": "x", "verdict": "maybe"}, "garbage"])
def test_a_failed_or_unparseable_judge_call_is_an_operational_failure(reply):
    lm = scripted_lm(lambda req: reply)
    verdict = run(lm, lambda: AnswerEvaluator(mode="judge").evaluate(number("12"), "12"))
    assert verdict.correct is None and verdict.method == "judge-error" and verdict.error


def test_default_mode_is_judge_exactly_when_the_judge_has_an_lm():
    lm = scripted_lm(lambda req: {"final_answer": "12", "verdict": "incorrect"})
    default = AnswerEvaluator()
    assert default.resolved_mode == "rules"
    assert run(lm, lambda: default.evaluate(number("12"), "12")).method == "numeric" and lm.engine.calls == 0
    default.judge.lm = lm  # what --judge-lm or the --lm-config role "judge" does
    assert default.resolved_mode == "judge"
    assert default.evaluate(number("12"), "12").method == "judge" and lm.engine.calls == 1
    forced = AnswerEvaluator(mode="rules")
    forced.judge.lm = lm
    assert forced.resolved_mode == "rules" and forced.evaluate(number("12"), "12").correct == 1
    assert AnswerEvaluator(mode="judge").resolved_mode == "judge"  # uses DSPy's configured LM
    with pytest.raises(ValueError, match="unknown evaluator mode"):
        AnswerEvaluator(mode="vote")
