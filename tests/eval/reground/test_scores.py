import math

import dspy
import pytest

from groundstate.eval.reground.agreement import (
    aggregate,
    aggregate_spearman,
    cohens_kappa,
    judge_agreement,
    pairwise_mae,
)
from groundstate.eval.reground.judges import Judge, LexicalJudge, LMJudge, stem
from groundstate.eval.reground.metrics import make_t2_metric, t1_metric, t2_metric, t3_metric
from groundstate.eval.reground.scores import make_scorer, offquery_scores
from groundstate.eval.reground.t1 import is_no_agent, resolve_agent, resolve_agents, t1_score
from groundstate.eval.reground.t2 import T2_MAX_FACTS, t2_from_support, t2_score
from groundstate.eval.reground.t3 import option_letter, t3_score
from groundstate.eval.scoring import ScoringError
from groundstate.records import AgentEvidence, OffQueryInstance, T2Fact
from groundstate.signatures.judging import JudgeSupportedFacts
from groundstate.testing import scripted_lm

ROLES = ["nursing", "Laboratory", "imaging", "Emergency and Trauma"]


class FixedJudge:
    """Supports exactly the facts whose text is in ``supported_texts`` (records what it was asked)."""

    def __init__(self, supported_texts):
        self.supported_texts = set(supported_texts)
        self.calls = []

    def supported(self, state, facts):
        self.calls.append((state, list(facts)))
        return [f in self.supported_texts for f in facts]


class FailingJudge:
    def supported(self, state, facts):
        raise RuntimeError("judge LM down")


def facts(*pairs):
    return [T2Fact(text=t, label=y) for t, y in pairs]


def make_instance(misleading=(1,), t2=None, domain="healthcare", answer="B"):
    agents = [AgentEvidence(agent=i, role=r, evidence=f"evidence {i}") for i, r in enumerate(ROLES)]
    return OffQueryInstance(
        id="case-1", domain=domain, agents=agents, shared_context="shared", question="q?",
        options={"A": "a", "B": "b", "C": "c", "D": "d"}, answer=answer, misleading=list(misleading),
        t2_facts=t2 if t2 is not None else facts(("Temperature 39.1 C", 1), ("Cough for three days", 1),
                                                  ("Temperature 37.0 C", 0), ("Chest X-ray shows no infiltrate", 0)),
    )


GOOD_STATE = "The patient has a temperature of 39.1 C. She has had a cough for 3 days."


# -- T1 ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("predicted, expected", [
    (1, 1.0),
    ("1", 1.0),
    ("Agent 1", 1.0),
    ("agent 1 (laboratory)", 1.0),
    ("LABORATORY", 1.0),
    (" laboratory ", 1.0),
    ([1], 1.0),
    ("The misleading source is Agent 1.", 1.0),
    (2, 0.0),
    ("Agent 2", 0.0),
    ("imaging", 0.0),
    ("none", 0.0),
    (None, 0.0),
    ([1, 2], 0.0),
    ("Agent 7", 0.0),  # out of range for four agents
    ("somebody", 0.0),
    (True, 0.0),
])
def test_t1_single_gold(predicted, expected):
    assert t1_score(predicted, [1], ROLES) == expected


@pytest.mark.parametrize("predicted, expected", [
    (None, 1.0), ("none", 1.0), ("None", 1.0), ([], 1.0), ("", 1.0), ("No agent is misleading", 1.0),
    (0, 0.0), ("Agent 0", 0.0), ("nursing", 0.0), ("gibberish", 0.0),
])
def test_t1_all_reliable_gold(predicted, expected):
    assert t1_score(predicted, [], ROLES) == expected


@pytest.mark.parametrize("predicted, expected", [
    ([1, 3], 1.0), ([3, 1], 1.0), ({1, 3}, 1.0), ("Agent 1, Agent 3", 1.0), ("1 and 3", 1.0),
    (["laboratory", "Emergency and Trauma"], 1.0),
    ([1], 0.0), (1, 0.0), ([1, 2, 3], 0.0), ([1, "nobody-known"], 0.0),
])
def test_t1_multi_gold_is_set_equality(predicted, expected):
    assert t1_score(predicted, [1, 3], ROLES) == expected


def test_resolve_agent_forms():
    assert resolve_agent("Agent 3 (Emergency and Trauma)", ROLES) == 3
    assert resolve_agent("emergency and trauma", ROLES) == 3  # a role containing "and" is not split
    assert resolve_agent("the imaging agent", ROLES) == 2
    assert resolve_agent(2.0, ROLES) == 2
    assert resolve_agent("5") == 5  # no roles: no range check
    assert resolve_agent("5", ROLES) is None
    assert resolve_agent([0, "Agent 2"], ROLES) == {0, 2}
    assert resolve_agent("Agent 0 and Agent 2", ROLES) == {0, 2}
    assert resolve_agent("none", ROLES) is None and is_no_agent("none")
    assert resolve_agent("xyz", ROLES) is None and not is_no_agent("xyz")
    assert resolve_agents("Agent 2 because it contradicts Agent 1", ROLES) is None  # ambiguous
    assert resolve_agents(None) == set()


# -- T3 ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("predicted, expected", [
    ("B", 1.0), (" b ", 1.0), ("B: Pneumonia", 1.0), ("(B)", 1.0), ("b) pneumonia", 1.0), ("Answer: B", 1.0),
    ("[B]", 1.0), ("B - evacuate", 1.0),
    ("C", 0.0), ("(c)", 0.0), (None, 0.0), ("", 0.0), ("E", 0.0), ("Because of fever", 0.0), ("b fever", 0.0),
])
def test_t3_letter_match(predicted, expected):
    assert t3_score(predicted, "B") == expected


def test_option_letter_ignores_words_starting_with_a_letter():
    assert option_letter("A patient with fever") is None
    assert option_letter("a") == "A"
    assert option_letter("d.") == "D"


# -- the lexical judge ------------------------------------------------------------------------------------


def test_stem_folds_inflections():
    assert stem("reports") == stem("reported") == stem("reporting") == stem("report")
    assert stem("increase") == stem("increased") == stem("increases")
    assert stem("evacuated") == stem("evacuation")
    assert stem("swelling") == "swell" and stem("running") == "run"


def test_lexical_judge_supported_and_number_mismatch():
    judge = LexicalJudge()
    state = "Vitals: temperature 39.0 C, heart rate 112. Chest X-ray shows a right lower lobe infiltrate."
    assert judge.supported(state, ["Temperature 39 C", "Heart rate is 112", "Temperature 39.1 C",
                                   "Temperature 37.0 C", "Right lower lobe infiltrate on chest X-ray"]) == [
        True, True, False, False, True]


def test_lexical_judge_number_mismatch_391_vs_370():
    judge = LexicalJudge()
    assert judge.supported("Temperature was 37.0 C on arrival.", ["Temperature 39.1 C on arrival"]) == [False]
    assert judge.supported("Temperature was 39.1 C on arrival.", ["Temperature 39.1 C on arrival"]) == [True]


def test_lexical_judge_negation_agreement_both_ways():
    judge = LexicalJudge()
    assert judge.supported("The patient denies chest pain.", ["Patient reports chest pain", "No chest pain"]) == [
        False, True]
    assert judge.supported("The patient has chest pain.", ["Patient reports chest pain", "No chest pain"]) == [
        True, False]
    assert judge.supported("Blood culture negative.", ["Blood culture negative", "Blood culture positive"]) == [
        True, False]
    assert judge.supported("The patient doesn't smoke.", ["Patient smokes", "Patient does not smoke"]) == [
        False, True]


def test_lexical_judge_is_sentence_local():
    judge = LexicalJudge()
    assert judge.supported("No fever. Cough present.", ["Fever present", "Cough present", "No fever"]) == [
        False, True, True]
    assert judge.supported("No fever, cough present.", ["Fever present", "Cough present"]) == [False, True]
    # the two halves of the fact sit in different sentences: not supported
    assert judge.supported("Temperature is normal. Reading 39.1 on the lab sheet.", ["Temperature 39.1"]) == [False]
    assert judge.supported("The reading of the temperature is 39.1.", ["Temperature 39.1"]) == [True]


def test_lexical_judge_paraphrase_with_reordering():
    judge = LexicalJudge()
    state = "For three days, the patient has reported a severe headache."
    assert judge.supported(state, ["Patient reports severe headache for 3 days",
                                   "Patient reports severe headache for 2 days",
                                   "Patient denies headache"]) == [True, False, False]
    state = "Evacuation ordered for 1,200 residents in Zone B; bridges closed."
    assert judge.supported(state, ["1200 residents evacuated from Zone B", "Bridges are not closed"]) == [True, False]


def test_lexical_judge_threshold_and_empty_inputs():
    state = "Severe headache."
    assert LexicalJudge(threshold=0.75).supported(state, ["severe headache with nausea"]) == [False]  # 2 of 3
    assert LexicalJudge(threshold=0.6).supported(state, ["severe headache with nausea"]) == [True]
    assert LexicalJudge().supported("", ["headache"]) == [False]
    assert LexicalJudge().supported(state, ["the of and"]) == [False]  # nothing to match
    assert LexicalJudge().supported(state, []) == []
    with pytest.raises(ValueError):
        LexicalJudge(threshold=0.0)
    assert isinstance(LexicalJudge(), Judge)


# -- T2 ---------------------------------------------------------------------------------------------------


def test_t2_hand_computed_half():
    gold = facts(("f0", 1), ("f1", 1), ("f2", 0), ("f3", 0))
    # supported: f0 (correct, label 1), f2 (wrong, label 0); unsupported: f1 (wrong), f3 (correct) -> 2/4
    assert t2_score("some state", gold, FixedJudge({"f0", "f2"})) == 0.5
    assert t2_score("some state", gold, FixedJudge({"f0", "f1"})) == 1.0
    assert t2_score("some state", gold, FixedJudge({"f2", "f3"})) == 0.0
    assert t2_score("some state", gold, FixedJudge(set())) == 0.5
    assert t2_score("some state", [f.model_dump() for f in gold], FixedJudge({"f0"})) == 0.75  # dict facts


def test_t2_missing_state_scores_zero_and_an_empty_one_as_the_authors_judge_reads_it():
    """Issue 25 item 5 changed the empty state: it supports no fact (the authors' judge lists none for an empty
    text), so it scores the share of label-0 facts; a missing state (None) still scores 0."""
    gold = facts(("f0", 1), ("f1", 0))
    judge = FixedJudge(set())
    assert t2_score(None, gold, judge) == 0.0
    for state in ("", "   \n", [], ["", " "]):
        assert t2_score(state, gold, judge) == 0.5
    assert t2_score("", facts(("f0", 1), ("f1", 0), ("f2", 0), ("f3", 0)), judge) == 0.75  # the label-0 share
    assert judge.calls == []  # neither reaches the judge
    assert t2_score("x", [], judge) is None


def test_t2_max_facts_keeps_the_first_ones():
    gold = facts(*[(f"f{i}", 1) for i in range(12)])
    judge = FixedJudge({f"f{i}" for i in range(10)})  # supports the first ten only
    assert t2_score("s", gold, judge) == pytest.approx(10 / 12)
    assert t2_score("s", gold, judge, max_facts=10) == 1.0
    assert judge.calls[-1][1] == [f"f{i}" for i in range(10)]
    assert T2_MAX_FACTS == {"healthcare": 10, "disaster": 16}


def test_t2_with_lexical_judge_on_a_state():
    gold = make_instance().t2_facts  # labels 1, 1, 0, 0
    assert t2_score(GOOD_STATE, gold, LexicalJudge()) == 1.0
    bad_state = "Temperature 37.0 C. Cough for 3 days. Chest X-ray shows no infiltrate."
    assert t2_score(bad_state, gold, LexicalJudge()) == 0.25  # only the cough fact is judged right


def test_t2_judge_length_mismatch_raises():
    class Short:
        def supported(self, state, facts):
            return [True]

    with pytest.raises(ValueError):
        t2_score("s", facts(("a", 1), ("b", 0)), Short())
    assert t2_from_support([True, False], [1, 1]) == 0.5


# -- the LM judge ---------------------------------------------------------------------------------------


def test_lm_judge_ids_are_one_based_and_out_of_range_ignored():
    lm = scripted_lm(lambda req: {"supported_ids": [1, 3, 0, 9, -2]})
    judge = LMJudge(lm=lm)
    assert judge.supported("state text", ["a", "b", "c", "d"]) == [True, False, True, False]
    request = lm.engine.requests[0]
    assert "1. a\n2. b\n3. c\n4. d" in request.user
    assert "state text" in request.user


def test_lm_judge_with_json_adapter_in_context_and_t2():
    lm = scripted_lm(lambda req: {"supported_ids": [1, 3]})
    gold = facts(("f0", 1), ("f1", 1), ("f2", 0), ("f3", 0))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        assert t2_score("a state", gold, LMJudge()) == 0.5
    assert lm.engine.requests[0].schema is not None  # the JSON adapter sent a schema
    assert "supported_ids" in lm.engine.requests[0].output_fields


def test_lm_judge_empty_state_makes_no_call_and_failure_raises():
    lm = scripted_lm(lambda req: RuntimeError("judge LM down"))
    judge = LMJudge(lm=lm, adapter=dspy.JSONAdapter())
    assert judge.supported("  ", ["a", "b"]) == [False, False]
    assert judge.supported("s", []) == []
    assert lm.engine.calls == 0
    with pytest.raises(Exception, match="judge LM down"):
        judge.supported("s", ["a"])


def test_judge_signature_fields():
    assert set(JudgeSupportedFacts.input_fields) == {"state", "facts"}
    assert set(JudgeSupportedFacts.output_fields) == {"supported_ids"}
    assert JudgeSupportedFacts.__doc__.strip()


# -- offquery_scores and the scorer hook -------------------------------------------------------------------


def test_offquery_scores_all_correct_and_partly_wrong():
    inst = make_instance()
    good = dspy.Prediction(misleading_agent="Agent 1 (laboratory)", state=GOOD_STATE, answer="B")
    assert offquery_scores(inst, good) == {"t1": 1.0, "t2": 1.0, "t3": 1.0}
    wrong = {"misleading_agent": 2, "state": "Temperature 37.0 C.", "answer": "(C)"}
    # facts: 39.1 (1, unsupported: wrong), cough (1, unsupported: wrong), 37.0 (0, supported: wrong),
    # "no infiltrate" (0, unsupported: right) -> 1/4
    assert offquery_scores(inst, wrong) == {"t1": 0.0, "t2": 0.25, "t3": 0.0}


def test_failed_prediction_is_not_measured_never_zero():
    # a record whose program failed names the metrics it would have had, none with a value
    assert offquery_scores(make_instance(), None) == {"t1": None, "t2": None, "t3": None}
    assert offquery_scores(make_instance(t2=[]), None) == {"t1": None, "t3": None}
    assert make_scorer(halves=True)(make_instance(), None) == {"t1": None, "t2": None, "t2_retention": None,
                                                               "t2_exclusion": None, "t3": None}


def test_missing_state_and_missing_t1_field_score_zero():
    inst = make_instance(misleading=())
    assert offquery_scores(inst, {"misleading_agent": None, "state": None, "answer": "B"}) == {
        "t1": 1.0, "t2": 0.0, "t3": 1.0}
    # no misleading_agent field at all: not read as "no agent"
    assert offquery_scores(inst, {"state": GOOD_STATE, "answer": "B"})["t1"] == 0.0
    assert offquery_scores(inst, dspy.Prediction(state=GOOD_STATE, answer="B"))["t1"] == 0.0


def test_an_empty_state_scores_half_on_balanced_facts_with_its_halves_reported():
    inst = make_instance()  # two facts to keep, two to exclude, as the published T2 facts are balanced
    judge = FixedJudge({"Temperature 39.1 C"})
    for state in ("", "  \n ", []):
        scores = make_scorer(judge, halves=True)(inst, {"misleading_agent": 1, "state": state, "answer": "B"})
        assert scores == {"t1": 1.0, "t2": 0.5, "t2_retention": 0.0, "t2_exclusion": 1.0, "t3": 1.0}
    assert judge.calls == []
    missing = make_scorer(judge, halves=True)(inst, {"misleading_agent": 1, "state": None, "answer": "B"})
    assert missing == {"t1": 1.0, "t2": 0.0, "t2_retention": 0.0, "t2_exclusion": 0.0, "t3": 1.0}


def test_offquery_scores_uses_domain_fact_limit_and_judge():
    many = facts(*[(f"f{i}", 1) for i in range(20)])
    judge = FixedJudge({f"f{i}" for i in range(16)})
    pred = {"misleading_agent": 1, "state": "s", "answer": "B"}
    assert offquery_scores(make_instance(t2=many, domain="disaster"), pred, judge)["t2"] == 1.0
    assert judge.calls[-1][1] == [f"f{i}" for i in range(16)]
    assert offquery_scores(make_instance(t2=many, domain="healthcare"), pred, judge)["t2"] == 1.0
    assert len(judge.calls[-1][1]) == 10
    assert offquery_scores(make_instance().model_dump(), pred, FixedJudge({"Temperature 39.1 C"}))["t2"] == 0.75


def test_judge_failure_fails_t2_only_and_t1_t3_are_scored():
    scorer = make_scorer(FailingJudge(), halves=True)
    with pytest.raises(ScoringError) as info:
        scorer(make_instance(), {"misleading_agent": 1, "state": "s", "answer": "B"})
    assert info.value.scores == {"t1": 1.0, "t3": 1.0}
    assert set(info.value.errors) == {"t2", "t2_retention", "t2_exclusion"}
    assert all("judge LM down" in text for text in info.value.errors.values())
    assert isinstance(info.value.__cause__, RuntimeError)
    assert scorer(make_instance(), None)["t2"] is None  # the failed-record path never calls the judge
    assert scorer.from_outputs  # it reads only the stored outputs: a resume re-scores without re-running


# -- DSPy metrics -----------------------------------------------------------------------------------------


def test_dspy_metrics_on_examples():
    example = make_instance(misleading=(2,)).to_example(condition="reliable")
    good = dspy.Prediction(misleading_agent="Imaging", state=GOOD_STATE, answer="B: b")
    bad = dspy.Prediction(misleading_agent="Agent 1", state="", answer="A")
    assert (t1_metric(example, good), t2_metric(example, good), t3_metric(example, good)) == (1.0, 1.0, 1.0)
    # the empty state supports no fact: the label-0 half of the facts is right (issue 25 item 5, as the authors)
    assert (t1_metric(example, bad), t2_metric(example, bad), t3_metric(example, bad)) == (0.0, 0.5, 0.0)
    assert (t1_metric(example, None), t2_metric(example, None), t3_metric(example, None)) == (0.0, 0.0, 0.0)


def test_t1_metric_role_from_misleading_roles_only():
    example = dspy.Example(misleading=[2], misleading_roles=["imaging"], answer="B", domain="healthcare",
                           t2_facts=[])
    assert t1_metric(example, {"misleading_agent": "IMAGING"}) == 1.0
    assert t1_metric(example, {"misleading_agent": 3}) == 0.0
    assert t1_metric(dspy.Example(misleading=[], misleading_roles=[]), {"misleading_agent": "none"}) == 1.0


def test_make_t2_metric_uses_the_given_judge():
    example = make_instance().to_example(condition="reliable")
    metric = make_t2_metric(FixedJudge({"Temperature 39.1 C", "Temperature 37.0 C"}))
    assert metric(example, dspy.Prediction(state="anything")) == 0.5
    assert make_t2_metric()(example, dspy.Prediction(state=GOOD_STATE)) == 1.0
    assert metric(make_instance(t2=[]).to_example(condition="reliable"), dspy.Prediction(state="x")) == 0.0


# -- aggregation ------------------------------------------------------------------------------------------


def test_aggregate_means_intervals_and_missing():
    rows = [{"t1": 1.0, "t2": 0.5, "t3": 1.0}, {"t1": 0.0, "t2": 0.25, "t3": 1.0},
            {"t1": 1.0, "t3": 0.0}, {"t1": 1.0, "t2": None, "t3": 1.0}, {"t3": 1.0, "t1": 0.0, "t2": 1.0}]
    out = aggregate(rows)
    assert list(out) == ["t1", "t2", "t3"]
    assert out["t1"]["mean"] == pytest.approx(0.6) and out["t1"]["n"] == 5 and out["t1"]["missing"] == 0
    assert out["t2"]["mean"] == pytest.approx(1.75 / 3) and out["t2"]["n"] == 3 and out["t2"]["missing"] == 2
    for entry in out.values():
        assert entry["low"] <= entry["mean"] <= entry["high"]
        assert entry["low"] < entry["high"]
    assert aggregate([]) == {}
    assert aggregate([{"t1": 1.0}, {"t1": 1.0}])["t1"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 2,
                                                           "missing": 0}


# -- judge agreement --------------------------------------------------------------------------------------


def test_pairwise_mae_hand_computed():
    assert pairwise_mae([1.0, 0.5, 0.0], [0.5, 0.5, 0.25]) == pytest.approx(0.25)
    assert pairwise_mae([1.0, None, 0.0], [0.5, 0.9, 0.0]) == pytest.approx(0.25)  # None pairs skipped
    with pytest.raises(ValueError):
        pairwise_mae([1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        pairwise_mae([None], [1.0])


def test_aggregate_spearman_hand_computed():
    a = {"oracle": 0.9, "reground": 0.7, "debate": 0.5, "solo": 0.3}
    same_order = {"oracle": 0.8, "reground": 0.6, "debate": 0.2, "solo": 0.1, "extra": 0.99}
    assert aggregate_spearman(a, same_order) == pytest.approx(1.0)
    reversed_order = {"oracle": 0.1, "reground": 0.2, "debate": 0.6, "solo": 0.8}
    assert aggregate_spearman(a, reversed_order) == pytest.approx(-1.0)
    # ranks (4,3,2,1) vs (4,3,1,2): d^2 = 0+0+1+1 = 2, rho = 1 - 6*2/(4*15) = 0.8
    swapped = {"oracle": 0.9, "reground": 0.7, "debate": 0.3, "solo": 0.5}
    assert aggregate_spearman(a, swapped) == pytest.approx(0.8)
    assert math.isnan(aggregate_spearman(a, {k: 0.5 for k in a}))
    with pytest.raises(ValueError):
        aggregate_spearman(a, {"oracle": 0.9})


def test_cohens_kappa_hand_computed():
    assert cohens_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert cohens_kappa([1, 1, 1], [1, 1, 1]) == 1.0  # single class, identical
    # p_o = 0.5, p_e = 0.5 -> 0
    assert cohens_kappa([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.0)
    assert cohens_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    # a: 1 1 1 0 0 0, b: 1 1 0 0 0 1 -> p_o = 4/6, p_e = 0.5 -> kappa = 1/3
    assert cohens_kappa([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        cohens_kappa([1], [1, 0])


def test_judge_agreement_report():
    cases = [
        ("s1", facts(("a", 1), ("b", 0))),
        ("s2", facts(("c", 1), ("d", 0))),
        (None, facts(("e", 1), ("f", 0))),
        ("s4", []),  # skipped: no facts
    ]
    judges = {"j1": FixedJudge({"a", "c"}), "j2": FixedJudge({"a", "d"}), "j3": FixedJudge({"a", "c"})}
    report = judge_agreement(judges, cases)
    assert report["n_cases"] == 3 and report["n_facts"] == 6
    assert report["judges"]["j1"]["scores"] == [1.0, 1.0, 0.0]
    assert report["judges"]["j2"]["scores"] == [1.0, 0.0, 0.0]
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    assert set(pairs) == {("j1", "j2"), ("j1", "j3"), ("j2", "j3")}
    assert pairs[("j1", "j2")]["mae"] == pytest.approx(1 / 3)
    # labels j1: T F T F F F, j2: T F F T F F -> 4 of 6 alike
    assert pairs[("j1", "j2")]["label_agreement"] == pytest.approx(4 / 6)
    # p_o = 4/6; both label 2 of 6 True: p_e = (2/6)^2 + (4/6)^2 = 20/36 -> kappa = (24/36-20/36)/(16/36) = 0.25
    assert pairs[("j1", "j2")]["kappa"] == pytest.approx(0.25)
    assert pairs[("j1", "j3")] == {"a": "j1", "b": "j3", "mae": 0.0, "label_agreement": 1.0, "kappa": 1.0}
    assert judges["j1"].calls == [("s1", ["a", "b"]), ("s2", ["c", "d"])]  # the missing state is not judged
    with pytest.raises(ValueError):
        judge_agreement({"j1": judges["j1"]}, cases)
    with pytest.raises(ValueError):
        judge_agreement(judges, [("s", [])])
