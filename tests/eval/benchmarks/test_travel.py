import json
import math
from collections import Counter

import dspy
import pytest

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel.convert import check_record, to_hidden_profile
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel, generate_travel, target_letter
from groundstate.eval.benchmarks.travel.leak import leak_rates
from groundstate.eval.benchmarks.travel.lm_generator import generate_travel_lm
from groundstate.eval.benchmarks.travel.predicates import matches, score_plans
from groundstate.eval.benchmarks.travel.records import (
    OPERATORS,
    REQUIRED_ATTRIBUTES,
    TIER_WEIGHTS,
    TIERS,
    Plan,
    Preference,
    TravelTask,
)
from groundstate.eval.benchmarks.travel.statements import parse_statement, render_statement, statement_for
from groundstate.eval.benchmarks.travel.validator import audit, check_travel, fingerprint, validate_travel
from groundstate.programs.consilience.travel_builder import TravelTaskBuilder
from groundstate.records import LETTERS, HiddenProfileTask
from groundstate.testing import scripted_lm
from tests.helpers import DATA as TEST_DATA

DATA = TEST_DATA / "hiddenbench"
VALID = DATA / "travel_valid.json"


# -- helpers --------------------------------------------------------------------------------------------------
def base() -> dict:
    return json.loads(VALID.read_text())


def pref_of(data: dict, pid: str) -> dict:
    return next(p for a in data["agents"] for p in a["preferences"] if p["id"] == pid)


def task_of(data: dict, rerender: bool = True) -> TravelTask:
    """The task, with every statement rewritten to match its (possibly edited) predicate."""
    task = TravelTask.model_validate(data)
    if rerender:
        for _, pref in task.preferences():
            pref.statement = statement_for(pref, task.options)
    return task


def issues_of(data: dict, rerender: bool = True) -> list[str]:
    return validate_travel(task_of(data, rerender))


def has(issues: list[str], text: str) -> bool:
    return any(text in issue for issue in issues)


# -- operators ------------------------------------------------------------------------------------------------
def plan(**attributes) -> Plan:
    return Plan(id="A", title="t", attributes=attributes)


def pref(attribute: str, operator: str, value) -> Preference:
    return Preference(id="p", tier="prefer", attribute=attribute, operator=operator, value=value, statement="")


@pytest.mark.parametrize(("attribute", "operator", "value", "expected"), [
    ("mode", "eq", "train", True), ("mode", "eq", "flight", False),
    ("mode", "neq", "flight", True), ("mode", "neq", "train", False),
    ("free", "eq", True, True), ("free", "eq", False, False), ("days", "eq", 4, True), ("days", "eq", 4.0, True),
    ("mode", "in", ["coach", "train"], True), ("mode", "in", ["coach", "flight"], False),
    ("meals", "in", ["vegan", "halal"], True), ("meals", "in", ["vegan", "kosher"], False),
    ("mode", "not_in", ["coach", "flight"], True), ("mode", "not_in", ["train"], False),
    ("meals", "not_in", ["vegan", "kosher"], True), ("meals", "not_in", ["kosher", "halal"], False),
    ("meals", "contains", "halal", True), ("meals", "contains", "vegan", False),
    ("meals", "excludes", "vegan", True), ("meals", "excludes", "halal", False),
    ("meals", "contains_all", ["halal", "seafood"], True), ("meals", "contains_all", ["halal", "vegan"], False),
    ("meals", "contains_any", ["vegan", "seafood"], True), ("meals", "contains_any", ["vegan", "kosher"], False),
    ("days", "lte", 4, True), ("days", "lte", 3, False), ("days", "gte", 4, True), ("days", "gte", 5, False),
    ("price", "lte", 899.5, False), ("price", "gte", 899.5, True),
])
def test_operator_semantics(attribute, operator, value, expected):
    p = plan(mode="train", free=True, days=4, price=900, meals=["halal", "seafood"])
    assert matches(pref(attribute, operator, value), p) is expected


@pytest.mark.parametrize(("attribute", "operator", "value", "message"), [
    ("free", "contains", True, "'contains' needs an array attribute, 'free' is a bool"),
    ("mode", "excludes", "x", "'excludes' needs an array attribute, 'mode' is a string"),
    ("mode", "lte", 3, "'lte' needs a number attribute, 'mode' is a string"),
    ("free", "gte", 1, "'gte' needs a number attribute, 'free' is a bool"),
    ("days", "lte", "4", "'lte' needs a number value"),
    ("meals", "eq", "halal", "'eq' needs a scalar attribute, 'meals' is an array"),
    ("free", "eq", 1, "'eq' compares 'free' (a bool) with a number"),
    ("mode", "in", "train", "'in' needs a non-empty list value"),
    ("meals", "contains_all", "halal", "'contains_all' needs a non-empty list of strings"),
    ("meals", "contains", ["halal"], "'contains' needs a single string value"),
    ("missing", "eq", 1, "attribute 'missing' is missing from plan A"),
])
def test_operators_are_type_checked(attribute, operator, value, message):
    p = plan(mode="train", free=True, days=4, meals=["halal", "seafood"])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        matches(pref(attribute, operator, value), p)


def test_a_boolean_never_equals_a_number():
    p = plan(free=True, days=1)
    assert matches(pref("free", "eq", True), p)
    with pytest.raises(ValueError, match="compares 'days' \\(a number\\) with a bool"):
        matches(pref("days", "eq", True), p)
    with pytest.raises(ValueError, match="list items that are bools"):
        matches(pref("free", "in", [1]), p)
    assert not matches(pref("days", "lte", 0), p)


# -- statements -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("operator", "value", "array"), [
    ("eq", "train", False), ("neq", "self-drive car", False), ("eq", True, False), ("eq", False, False),
    ("eq", 4, False), ("lte", 1000, False), ("gte", 7.5, False), ("in", ["train", "coach"], False),
    ("in", ["a, b", "c"], True), ("not_in", ["flight"], False), ("not_in", ["x", "y", "z"], True),
    ("in", [3, 4], False), ("contains", 'the "best" tour', True), ("excludes", "vegan", True),
    ("contains_all", ["vegan", "halal", "kosher"], True), ("contains_any", ["or", "and"], True),
    ("eq", "no", False), ("eq", "is not", False), ("eq", "two  spaces\nand a newline", False), ("eq", "Zürich", False),
])
@pytest.mark.parametrize("tier", TIERS)
def test_statements_round_trip(tier, operator, value, array):
    for attribute in ("transport_mode", "price_per_person_usd", "wifi_speed"):
        text = render_statement(tier, attribute, operator, value, array_attribute=array)
        assert parse_statement(text) == (tier, attribute, operator, value), text


def test_statement_wording_is_first_person_by_tier():
    assert render_statement("must", "step_free", "eq", True) == "I need a plan whose step-free access is yes."
    assert render_statement("prefer", "activities", "contains_any", ["kayaking", "museum visits"],
                            array_attribute=True) == \
        'I\'d like a plan whose activities include any of "kayaking" or "museum visits".'
    assert render_statement("avoid", "daily_active_hours", "gte", 8) == \
        "I'd rather not take a plan whose active hours per day is at least 8."
    assert render_statement("reject", "transport_mode", "eq", "flight") == \
        'I won\'t take a plan whose transport mode is "flight".'


def test_parser_tolerates_typography_but_not_free_text():
    assert parse_statement("I won\u2019t take a plan whose transport mode is \u201cflight\u201d") == \
        ("reject", "transport_mode", "eq", "flight")
    assert parse_statement("  I need a plan  whose\nactivities include \"boat tour\" . ") == \
        ("must", "activities", "contains", "boat tour")
    for text in ("I hate flying.", "I need a plan whose transport mode is flight.",
                 "I need a plan whose transport mode is \"train\" and cheap.",
                 "I need a plan whose price per person in USD is at most 1,000.",
                 "We need a plan whose transport mode is \"train\".",
                 'I need a plan whose transport mode is "train", "coach".'):
        with pytest.raises(ValueError):
            parse_statement(text)


# -- the validator --------------------------------------------------------------------------------------------
def test_the_fixture_is_valid_and_scores_as_designed():
    data = base()
    task = task_of(data, rerender=False)
    assert validate_travel(task) == []
    assert score_plans(task) == {"A": 5, "B": 0, "C": 3, "D": 0}
    assert all(p.statement == statement_for(p, task.options) for _, p in task.preferences())


def test_tier_never_used():
    data = base()
    p = pref_of(data, "t2_reject_1")
    p.update(id="t2_avoid_1", tier="avoid")
    assert issues_of(data) == ["tier 'reject' is never used"]


def test_traveler_without_a_discriminating_preference():
    data = base()
    pref_of(data, "t2_prefer_1")["value"] = "kosher"  # no plan
    pref_of(data, "t2_reject_1")["value"] = "ferry"  # no plan
    assert issues_of(data) == ["traveler_2 has no preference that matches some but not all plans"]


def test_option_ties_the_answer():
    data = base()
    data["options"][2]["attributes"]["step_free"] = True
    assert issues_of(data) == ["option C ties the declared answer with score 5"]


def test_option_beats_the_answer():
    data = base()
    data["correct_answer"] = "C"
    assert issues_of(data) == ["option A scores 5, above the declared answer C (3)"]


def test_operator_type_errors():
    data = base()
    pref_of(data, "t1_must_1")["operator"] = "contains"
    issues = issues_of(data)
    assert "preference t1_must_1: 'contains' needs an array attribute, 'step_free' is a bool" in issues
    data = base()
    pref_of(data, "t3_must_1")["attribute"] = "hotel_category"
    assert has(issues_of(data), "preference t3_must_1: 'lte' needs a number attribute, 'hotel_category' is a string")
    data = base()
    pref_of(data, "t2_reject_1")["operator"] = "in"
    assert has(issues_of(data), "preference t2_reject_1: 'in' needs a non-empty list value")
    data = base()
    pref_of(data, "t1_prefer_1")["operator"] = "eq"
    assert has(issues_of(data), "preference t1_prefer_1: 'eq' needs a scalar attribute, 'activities' is an array")


def test_a_single_profile_identifies_the_answer():
    data = base()
    pref_of(data, "t1_prefer_1")["value"] = "museum visits"  # traveler_1 now ranks A first on their own
    task = task_of(data)
    assert validate_travel(task) == ["traveler_1's profile alone (with the public plans) identifies the answer"]
    assert validate_travel(task, single_profile_rule=False) == []


def test_only_one_profile_varies():
    data = base()
    t2, t3 = data["agents"][1]["preferences"], data["agents"][2]["preferences"]
    t2[1].update(id="t2_avoid_1", tier="avoid", attribute="activities", operator="contains", value="museum visits")
    t3[0].update(id="t3_must_2", tier="must", attribute="duration_days", operator="in", value=[4, 5])  # A, B
    t3[1].update(id="t3_reject_1", tier="reject", attribute="hotel_category", operator="in",
                 value=["midrange", "upscale"])  # A, B
    data["correct_answer"] = "B"
    issues = issues_of(data)
    assert "only 1 profile contributes non-constant scores (at least 2 must)" in issues
    assert not has(issues, "has no preference that matches")  # both constant profiles still discriminate


def test_attribute_missing_from_a_plan():
    data = base()
    for letter in "ACD":
        data["options"]["ABCD".index(letter)]["attributes"]["wifi"] = True
    data["agents"][1]["preferences"].append({"id": "t2_prefer_2", "tier": "prefer", "attribute": "wifi",
                                             "operator": "eq", "value": True, "statement": ""})
    issues = issues_of(data)
    assert "preference t2_prefer_2: attribute 'wifi' is missing from plan B" in issues
    assert "plan B lacks attribute 'wifi' that other plans have" in issues


def test_statement_that_says_something_else():
    data = base()
    pref_of(data, "t3_avoid_1")["statement"] = "I'd rather not take a plan whose active hours per day is at least 9."
    assert issues_of(data, rerender=False) == [
        'statement of t3_avoid_1 does not match its predicate (it says avoid daily_active_hours gte 9)']
    pref_of(data, "t3_avoid_1")["statement"] = "I'd prefer not to have very long days."
    issues = issues_of(data, rerender=False)
    assert len(issues) == 1 and issues[0].startswith("statement of t3_avoid_1 does not state its predicate")
    assert "I'd rather not take a plan whose active hours per day is at least 8." in issues[0]
    pref_of(data, "t3_avoid_1")["statement"] = "I need a plan whose active hours per day is at least 8."
    assert has(issues_of(data, rerender=False), "statement of t3_avoid_1 does not match its predicate (it says must")


@pytest.mark.parametrize("count", [2, 5])
def test_traveler_count(count):
    data = base()
    agents = data["agents"]
    if count == 2:
        data["agents"] = agents[:2]
    else:
        for k in (4, 5):
            data["agents"].append({"id": f"traveler_{k}", "role": "cousin", "context": "",
                                   "preferences": [
                                       {"id": f"t{k}_prefer_1", "tier": "prefer", "attribute": "hotel_category",
                                        "operator": "eq", "value": "midrange" if k == 4 else "budget",
                                        "statement": ""},
                                       {"id": f"t{k}_avoid_1", "tier": "avoid", "attribute": "hotel_category",
                                        "operator": "eq", "value": "upscale", "statement": ""}]})
    assert f"expected 3 or 4 travelers, found {count}" in issues_of(data)


def test_plan_set_and_attribute_rules():
    data = base()
    data["options"] = data["options"][:3]
    assert "expected four plans with ids A, B, C, D (found A, B, C)" in issues_of(data)

    data = base()
    data["options"][3]["id"] = "C"
    issues = issues_of(data)
    assert "duplicate plan id 'C'" in issues and "expected four plans with ids A, B, C, D (found A, B, C, C)" in issues

    data = base()
    for option in data["options"]:
        del option["attributes"]["room_arrangement"]
    assert "plan A is missing required attribute 'room_arrangement'" in issues_of(data)

    data = base()
    data["options"][2]["attributes"]["duration_days"] = "three"
    assert has(issues_of(data), "attribute 'duration_days' has different types across plans (number in A, number "
                                "in B, string in C, number in D)")

    data = base()
    data["options"][1]["attributes"]["hotel"] = {"stars": 4}
    assert has(issues_of(data), "plan B: attribute 'hotel' has an unsupported value")

    data = base()
    data["options"][3]["attributes"] = dict(data["options"][0]["attributes"])
    assert has(issues_of(data), "plans A and D have identical attributes")

    data = base()
    for option in data["options"]:
        option["attributes"]["Wifi Speed"] = 10
    assert "attribute key 'Wifi Speed' is not snake_case" in issues_of(data)


def test_preference_count_ids_and_header_rules():
    data = base()
    data["agents"][0]["preferences"] = data["agents"][0]["preferences"][:1]
    assert has(issues_of(data), "traveler_1 has 1 preference (expected 2-4)")

    data = base()
    data["agents"][2]["id"] = "traveler_1"
    pref_of(data, "t3_must_1")["id"] = "t1_must_1"
    issues = issues_of(data)
    assert "duplicate traveler id 'traveler_1'" in issues and "duplicate preference id 't1_must_1'" in issues

    data = base()
    pref_of(data, "t3_must_1")["tier"] = "prefer"
    assert has(issues_of(data), "preference t3_must_1: its id names tier 'must' but its tier is 'prefer'")

    data = base()
    data["public_information"] = data["public_information"][:1]
    assert "public_information has 1 facts (expected 2-5)" in issues_of(data)

    data = base()
    data["name"] = "Porto Trip!"
    assert "name 'Porto Trip!' is not a short snake_case name" in issues_of(data)

    data = base()
    data["correct_answer"] = "E"
    assert "declared answer 'E' is not one of A, B, C, D" in issues_of(data)


def test_repeated_statements_are_flagged():
    data = base()
    copy = dict(pref_of(data, "t1_prefer_1"), id="t2_prefer_2")
    data["agents"][1]["preferences"].append(copy)
    assert has(issues_of(data), "statement of t2_prefer_2 repeats the statement of t1_prefer_1")


def test_every_violation_is_returned_not_just_the_first():
    data = base()
    data["name"] = "Bad Name"
    data["options"][2]["attributes"]["step_free"] = True  # C ties A
    pref_of(data, "t3_avoid_1")["statement"] = "Long days are tiring."
    issues = issues_of(data, rerender=False)
    assert has(issues, "is not a short snake_case name")
    assert has(issues, "option C ties the declared answer")
    assert has(issues, "statement of t3_avoid_1 does not state its predicate")
    assert len(issues) == 3


def test_check_travel_reads_json_text_and_reports_shape_errors():
    text = "```json\n" + VALID.read_text() + "\n```"
    task, issues = check_travel(text, target="A", travelers=3)
    assert task is not None and issues == []
    _, issues = check_travel(VALID.read_text(), target="B", travelers=4)
    assert issues == ["declared answer is A but the requested answer is B", "has 3 travelers but 4 were requested"]
    assert check_travel("{oops")[1][0].startswith("not valid JSON")
    data = base()
    pref_of(data, "t1_must_1")["tier"] = "strong"
    del data["options"][0]["title"]
    task, issues = check_travel(data)
    assert task is None and len(issues) == 2
    assert has(issues, "options[0].title: Field required") and has(issues, "agents[0].preferences[0].tier")
    data = base()
    pref_of(data, "t1_must_1")["statement"] = "Stairs are hard for me."
    assert has(check_travel(data)[1], "does not state its predicate")
    assert check_travel(data, rewrite_statements=True)[1] == []


# -- conversion -----------------------------------------------------------------------------------------------
def test_to_hidden_profile_support_sums_to_the_scores():
    task = task_of(base(), rerender=False)
    record = to_hidden_profile(task, id="porto-1", provenance={"source": "test"})
    assert isinstance(record, HiddenProfileTask)
    assert record.id == "porto-1" and record.name == task.name and record.correct == "A"
    assert record.options == list(LETTERS)
    assert record.shared[0] == task.description
    assert record.shared[1:3] == task.public_information
    assert record.shared[3].startswith("Plan A (Classic 4-day train trip with museum visits): transport mode: train;")
    assert "step-free access: yes" in record.shared[3] and "meal options: vegetarian, seafood" in record.shared[3]
    assert record.private == [[p.statement for p in t.preferences] for t in task.agents]
    assert set(record.support) == {p.statement for _, p in task.preferences()}
    totals = {letter: sum(s[letter] for s in record.support.values()) for letter in LETTERS}
    assert totals == {k: float(v) for k, v in score_plans(task).items()}
    assert record.support["I won't take a plan whose transport mode is \"flight\"."] == \
        {"A": 0.0, "B": -2.0, "C": 0.0, "D": 0.0}
    assert TravelTask.model_validate(record.structure) == task
    assert check_record(record) == []
    tampered = record.model_copy(update={"correct": "C"})
    assert "field 'correct' differs from what its travel structure gives" in check_record(tampered)


# -- the generator --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def batch() -> list[TravelTask]:
    return [t for seed in range(4) for t in generate_travel(600, seed=seed)]


def test_thousands_of_seeded_tasks_are_all_valid(batch):
    assert len(batch) == 2400
    bad = {t.name: validate_travel(t) for t in batch if validate_travel(t)}
    assert bad == {}


def test_answers_are_spread_evenly(batch):
    # every aligned block of four tasks uses each letter once, so whole batches are exactly balanced ...
    for seed in range(4):
        counts = Counter(t.correct_answer for t in batch[seed * 600:(seed + 1) * 600])
        assert counts == {letter: 150 for letter in LETTERS}
    # ... and any window is within one block of balanced
    window = generate_travel(37, seed=9, start=3)
    counts = Counter(t.correct_answer for t in window)
    assert max(counts.values()) - min(counts.values()) <= 2
    # the letter is not a fixed function of the position in the block
    firsts = Counter(target_letter(0, 4 * b) for b in range(400))
    assert all(abs(firsts[letter] - 100) <= 4 * math.sqrt(400 * 0.25 * 0.75) for letter in LETTERS)


def test_no_duplicates(batch):
    assert len({fingerprint(t) for t in batch}) == len(batch)
    assert len({t.name for t in batch}) == len(batch)


def test_generated_statements_round_trip_to_their_predicates(batch):
    for task in batch[:800]:
        for _, pref in task.preferences():
            assert parse_statement(pref.statement) == pref.predicate
            assert pref.statement == statement_for(pref, task.options)


def test_generator_covers_tiers_operators_and_traveler_counts(batch):
    prefs = [p for t in batch for _, p in t.preferences()]
    assert {p.tier for p in prefs} == set(TIERS)
    assert {p.operator for p in prefs} == set(OPERATORS)
    assert Counter(len(t.agents) for t in batch).keys() == {3, 4}
    assert all(set(REQUIRED_ATTRIBUTES) <= set(p.attributes) for t in batch for p in t.options)


def test_public_only_rules_find_the_answer_at_chance(batch):
    """No rule that reads only the public plans (cheapest, cheapest step-free, most central, ...) beats chance by
    more than 3 points on the 2,400 tasks (the old generator's cheapest step-free plan was the answer in 34%).

    On 2,400 tasks 95% of sets with random answers keep their worst rule within about 2.5 points of chance.
    """
    report = leak_rates(batch, n_resamples=0)
    assert report.n == 2400 and report.chance == 0.25
    assert len(report.rates) == 35  # 4 positions, 22 attribute rules, 2 ordinal, 5 combinations, 2 centrality
    above = {name: round(rate, 4) for name, rate in report.rates.items() if rate > report.chance + 0.03}
    assert above == {}
    assert all(report.rates[f"position {letter}"] == 0.25 for letter in LETTERS)


def test_generator_is_deterministic_and_indexable():
    assert generate_travel(12, seed=5) == generate_travel(12, seed=5)
    assert generate_travel(4, seed=5, start=8) == generate_travel(12, seed=5)[8:]
    assert generate_travel(4, seed=5) != generate_travel(4, seed=6)
    assert {len(t.agents) for t in generate_travel(20, seed=1, travelers=4)} == {4}
    assert {len(t.agents) for t in generate_travel(20, seed=1, travelers=3)} == {3}
    with pytest.raises(ConfigError):
        generate_travel(3, travelers=5)
    with pytest.raises(ConfigError):
        generate_travel(-1)


def test_generated_records_carry_support_and_structure():
    records = generate_hidden_travel(8, seed=2)
    assert [r.id for r in records] == [f"travel-2-{i}" for i in range(8)]
    for record in records:
        assert check_record(record) == []
        travel = TravelTask.model_validate(record.structure)
        totals = {letter: sum(s[letter] for s in record.support.values()) for letter in LETTERS}
        assert totals == {k: float(v) for k, v in score_plans(travel).items()}
        assert record.provenance["scores"] == score_plans(travel)
        assert max(totals, key=totals.get) == record.correct


def test_audit_reports_scores_and_matches():
    task = task_of(base(), rerender=False)
    report = audit(task)
    assert report["scores"] == {"A": 5, "B": 0, "C": 3, "D": 0}
    assert report["traveler_scores"]["traveler_2"] == {"A": 1, "B": -2, "C": 1, "D": 0}
    assert report["matched_plans"]["t1_must_1"] == ["A", "B"]
    assert report["issues"] == [] and report["weights"] == TIER_WEIGHTS


# -- the LM path ----------------------------------------------------------------------------------------------
def _checker(target="A", travelers=3):
    def check(data):
        task, issues = check_travel(data, target=target, travelers=travelers)
        return task, issues, (audit(task) if task else {})

    return check


def wants(request, field: str) -> bool:
    """Whether the request asks for output ``field`` (schema-constrained or by the adapter's instructions)."""
    return field in request.output_fields or f"`{field}`" in request.user


def _lm(generated, repaired=None, review=True, review_issues=()):
    def respond(request):
        if wants(request, "task"):
            return {"task": generated}
        if wants(request, "repaired"):
            return {"repaired": repaired}
        if wants(request, "accepted"):
            return {"accepted": review, "issues": list(review_issues)}
        return None

    return scripted_lm(respond)


def test_builder_accepts_a_valid_first_candidate():
    lm = _lm(base())
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = TravelTaskBuilder(_checker())(seed="porto", index=0, target="A", travelers=3)
    assert out.task is not None and out.issues == [] and out.attempts == 1
    assert out.task == task_of(base(), rerender=False)
    assert lm.engine.calls == 2  # generate, review


def test_builder_repairs_an_invalid_candidate_with_the_validator_issues():
    broken = base()
    broken["options"][2]["attributes"]["step_free"] = True  # C ties A
    lm = _lm(broken, repaired=base())
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = TravelTaskBuilder(_checker(), max_repairs=2)(seed="porto", index=3, target="A", travelers=3)
    assert out.task is not None and out.attempts == 2
    repair_request = next(r for r in lm.engine.requests if wants(r, "repaired"))
    assert "option C ties the declared answer with score 5" in repair_request.user


def test_builder_gives_up_and_reports_issues():
    broken = base()
    broken["correct_answer"] = "C"
    lm = _lm(broken, repaired=broken)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = TravelTaskBuilder(_checker(target="C"), max_repairs=1, max_restarts=1)(
            seed="porto", index=1, target="C", travelers=3)
    assert out.task is None and out.attempts == 4  # (generate + 1 repair) x 2 starts
    assert "option A scores 5, above the declared answer C (3)" in out.issues
    # the second start is told what went wrong the first time
    generations = [r for r in lm.engine.requests if wants(r, "task")]
    assert len(generations) == 2 and "above the declared answer" in generations[1].user


def test_builder_review_rejection_restarts():
    lm = _lm(base(), review=False, review_issues=["plan B is implausible"])
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = TravelTaskBuilder(_checker(), max_restarts=1)(seed="porto", index=0, target="A", travelers=3)
    assert out.task is None and out.issues == ["review: plan B is implausible"]
    assert out.review_issues == ["plan B is implausible"]
    review_request = next(r for r in lm.engine.requests if wants(r, "accepted"))
    assert '"scores"' in review_request.user  # the reviewer sees the deterministic audit


def test_generate_travel_lm_uses_the_same_validator_and_targets():
    made = generate_travel(4, seed=0, travelers=3)
    by_target = {t.correct_answer: t.model_dump(mode="json") for t in made}
    targets = []

    def respond(request):
        if wants(request, "task"):
            targets.append(request.field("target").strip('"'))
            return {"task": by_target[targets[-1]]}
        if wants(request, "accepted"):
            return {"accepted": True, "issues": []}
        return None

    with dspy.context(lm=scripted_lm(respond), adapter=dspy.JSONAdapter()):
        tasks, failures = generate_travel_lm(4, seed=0, travelers=3)
    assert failures == [] and tasks == dict(enumerate(made))
    assert targets == [target_letter(0, i) for i in range(4)]


def test_generate_travel_lm_refuses_duplicates_and_wrong_counts(monkeypatch):
    import groundstate.eval.benchmarks.travel.lm_generator as travel

    monkeypatch.setattr(travel, "target_letter", lambda seed, index: "A")
    lm = _lm(base(), repaired=base(), review=True)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        tasks, failures = generate_travel_lm(2, seed=0, travelers=3, max_repairs=1, max_restarts=0)
    assert list(tasks) == [0] and [f["index"] for f in failures] == [1]
    assert failures[0]["issues"] == ["duplicates an accepted task"] and failures[0]["attempts"] == 2
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        tasks, failures = generate_travel_lm(1, seed=0, travelers=4, max_repairs=0, max_restarts=0)
    assert tasks == {} and failures[0]["issues"] == ["has 3 travelers but 4 were requested"]


def test_builder_treats_unreadable_output_as_a_failed_attempt():
    lm = scripted_lm(lambda request: "this is not JSON at all" if wants(request, "task") else None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = TravelTaskBuilder(_checker(), max_restarts=1)(seed="porto", index=0, target="A", travelers=3)
    assert out.task is None and out.attempts == 0 and out.blueprint is None
    assert out.issues[0].startswith("the generated task could not be read")
