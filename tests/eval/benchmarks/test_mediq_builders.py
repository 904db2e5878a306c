"""MediQ -> OffQuery builders: loading, fact classification, corruption, the rule and LM builders, split tags."""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter

import dspy
import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.corruption import (
    applicable_strategies,
    corrupt_fact,
    corrupt_fact_detailed,
    corrupt_with,
)
from groundstate.eval.benchmarks.offquery.mediq import (
    DEPARTMENTS,
    MediQCase,
    classify_fact,
    is_demographic,
    load_mediq,
    partition_case,
)
from groundstate.eval.benchmarks.offquery.mediq_lm import build_lm, tag_sufficiency
from groundstate.eval.benchmarks.offquery.mediq_rule import BuildReport, build_rule, split_sentences
from groundstate.programs.reground.builder import OffQueryLMBuilder
from groundstate.testing import scripted_lm
from tests.helpers import ROOT

DATA = ROOT / "tests" / "data" / "mediq"
CASES = DATA / "cases.jsonl"
REAL = ROOT.parent / "shared" / "data" / "mediq" / "all_craft_md.jsonl"


@pytest.fixture(scope="module")
def cases() -> list[MediQCase]:
    return load_mediq(CASES)


def _field(text: str, name: str) -> str:
    """The value of one input field in a JSONAdapter user message."""
    match = re.search(rf"\[\[ ## {name} ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", text, re.S)
    return match.group(1).strip() if match else ""


# -- loading ---------------------------------------------------------------------------------------------
def test_load_fixtures_strips_numbering_and_keeps_fields(cases):
    assert [c.id for c in cases] == ["fx-001", "fx-002", "fx-003", "fx-004", "fx-005"]
    first = cases[0]
    assert first.facts[0] == "A 34-year-old woman comes to the emergency department with a productive cough."
    assert not any(re.match(r"^\d+\.", fact) for c in cases for fact in c.facts)
    assert first.gold == "A" and first.options["A"] == "Community-acquired pneumonia"
    assert first.patient == {"age": "34 years", "gender": "female"}
    assert first.context_text.endswith("right lower lobe.") and ". She reports fever" in first.context_text


def test_integer_ids_become_text(tmp_path):
    row = json.loads(CASES.read_text().splitlines()[0])
    row["id"] = 7
    path = tmp_path / "int.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert load_mediq(path)[0].id == "7"


def test_bad_json_line_names_file_and_line():
    with pytest.raises(InputError) as info:
        load_mediq(DATA / "bad_line.jsonl")
    assert "bad_line.jsonl" in str(info.value) and "line 2" in str(info.value)


def test_missing_field_names_file_record_and_field():
    with pytest.raises(InputError) as info:
        load_mediq(DATA / "missing_field.jsonl")
    err = info.value
    assert err.file.endswith("missing_field.jsonl") and err.record == "fx-002" and err.field == "facts"
    assert "missing_field.jsonl" in str(err) and "record fx-002" in str(err) and "'facts'" in str(err)


def test_option_letter_outside_a_to_d_is_rejected():
    with pytest.raises(InputError) as info:
        load_mediq(DATA / "bad_option.jsonl")
    err = info.value
    assert err.record == "fx-004" and err.field == "options" and "E" in str(err)


def test_answer_letter_outside_a_to_d_is_rejected(tmp_path):
    row = json.loads(CASES.read_text().splitlines()[1])
    row["answer_idx"] = "E"
    path = tmp_path / "answer.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(InputError) as info:
        load_mediq(path)
    assert info.value.field == "answer_idx" and info.value.record == "fx-002" and str(path) in str(info.value)


def test_record_without_id_is_named_by_position(tmp_path):
    rows = [json.loads(line) for line in CASES.read_text().splitlines()[:2]]
    del rows[1]["id"], rows[1]["question"]
    path = tmp_path / "noid.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(InputError) as info:
        load_mediq(path)
    assert info.value.record == "#2"


@pytest.mark.parametrize("name, survivors", [
    ("bad_line.jsonl", ["fx-001", "fx-003"]),
    ("missing_field.jsonl", ["fx-001", "fx-003"]),
    ("bad_option.jsonl", ["fx-001", "fx-003"]),
])
def test_skip_invalid_skips_and_reports(name, survivors):
    problems: list[str] = []
    loaded = load_mediq(DATA / name, skip_invalid=True, problems=problems)
    assert [c.id for c in loaded] == survivors
    assert len(problems) == 1 and name in problems[0]


# -- classification and partition ------------------------------------------------------------------------
@pytest.mark.parametrize("text, department", [
    ("The patient is a 22-year-old man.", "demographics"),
    ("The patient is a woman.", "demographics"),
    ("She is Hispanic.", "demographics"),
    ("Her temperature is 39.2 °C.", "vital signs"),
    ("His heart rate is 104 beats per minute.", "vital signs"),
    ("She takes metformin 500 mg twice daily.", "medication"),
    ("The patient has been using over-the-counter antifungal cream.", "medication"),
    ("A skin biopsy shows parakeratosis.", "laboratory"),
    ("The KOH test result is negative.", "laboratory"),
    ("A chest x-ray shows consolidation of the right lower lobe.", "imaging"),
    ("A CT scan shows a dilated appendix.", "imaging"),
    ("The patient has a past medical history of hypertension.", "history"),
    ("Her father has a similar rash.", "history"),
    ("The patient is a construction worker.", "other"),
    ("The patient reports going hiking eight days ago.", "other"),
    ("Physical examination reveals a firm lesion.", "physical exam"),
    ("The right inguinal lymph node was tender.", "physical exam"),
    ("The man denied having a fever.", "symptoms"),
    ("The rash is itchy.", "symptoms"),
    ("The patient is right-handed.", "other"),
])
def test_classify_fact(text, department):
    assert classify_fact(text) == department


def test_is_demographic_only_for_identity_statements():
    assert is_demographic("A 6-month-old infant presents with papules.")
    assert not is_demographic("The patient is a farmer.")
    assert not is_demographic("The rash has been present for 2 years.")


def test_partition_shares_demographics_and_chief_complaint(cases):
    partition = partition_case(cases[2].facts)
    assert partition.shared == ("The patient is a 27-year-old woman.", "She presents with a rash on her elbows.")
    roles = partition.roles
    assert roles == sorted(roles, key=DEPARTMENTS.index) and len(set(roles)) == len(roles)
    held = [fact for _, facts in partition.agents for fact in facts]
    assert sorted(held + list(partition.shared)) == sorted(cases[2].facts)  # every fact exactly once


def test_partition_merges_into_other_and_caps_agents(cases):
    full = partition_case(cases[0].facts)
    assert len(full.agents) == 8
    capped = partition_case(cases[0].facts, max_agents=4)
    assert len(capped.agents) == 4 and "other" in capped.roles
    merged = partition_case(cases[0].facts, min_agent_facts=2)
    assert all(len(facts) >= 2 for role, facts in merged.agents if role != "other")
    assert sum(len(f) for _, f in merged.agents) == sum(len(f) for _, f in full.agents)


def test_partition_reports_too_few_departments():
    reason = partition_case(["A 30-year-old man has a rash on his arm.", "The rash is itchy.", "It began 2 weeks ago."])
    assert isinstance(reason, str) and "need at least 3 agents" in reason
    with pytest.raises(ConfigError):
        partition_case(["x"], min_agents=4, max_agents=3)


# -- corruption ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, strategy, check", [
    ("Her temperature is 39.2 °C.", "numeric", lambda out: 36.0 <= float(re.search(r"\d+\.\d", out)[0]) <= 37.0),
    ("His heart rate is 120 beats per minute.", "numeric", lambda out: 64 <= int(re.search(r"\d+", out)[0]) <= 88),
    ("Her heart rate is 75 beats per minute.", "numeric",
     lambda out: not 64 <= int(re.search(r"\d+", out)[0]) <= 88),
    ("Her blood pressure is 104/66 mm Hg.", "numeric", lambda out: "104/66" not in out),
    ("The symptoms started 10 days ago.", "numeric", lambda out: re.search(r"\d+ (weeks|months|years) ago", out)),
    ("He has a 3-mm papule.", "numeric", lambda out: "3-mm" not in out and "-mm" in out),
    ("He denied fever, chills and night sweats.", "negation", lambda out: out.startswith("He reported fever")),
    ("There is no lymphadenopathy.", "negation", lambda out: out == "There is lymphadenopathy."),
    ("No rash was seen.", "negation", lambda out: out == "Rash was seen."),
    ("Multiple small, nontender lesions were identified.", "negation", lambda out: " tender lesions" in out),
    ("The patient denies any pain.", "negation", lambda out: out == "The patient reports pain."),
    ("The patient has no history of skin cancer.", "negation", lambda out: "has a history" in out),
    ("The swelling is in the left groin.", "laterality", lambda out: out == "The swelling is in the right groin."),
    ("Lesions are on the bilateral elbows.", "laterality", lambda out: "unilateral" in out),
    ("The pain is acute.", "timing", lambda out: out == "The pain is chronic."),
    ("The rash has been present for 2 days.", "timing", lambda out: out.endswith("2 years.")),
    ("The itch is worse in the morning.", "timing", lambda out: out.endswith("evening.")),
])
def test_each_strategy_changes_the_text(text, strategy, check):
    assert strategy in applicable_strategies(text)
    for seed in range(5):
        out = corrupt_with(text, strategy, random.Random(seed))
        assert out is not None and out != text and check(out), out


def test_ages_are_never_changed():
    for text in ("The patient is a 22-year-old man.", "The boy is 3 days old.", "She is 38 years old.",
                 "A 6-month-old infant has a rash."):
        assert "numeric" not in applicable_strategies(text) and "timing" not in applicable_strategies(text)
    assert corrupt_fact("The patient is a 22-year-old man.", random.Random(0)) is None
    out = corrupt_fact("A 22-year-old man has had a rash for 10 days.", random.Random(1))
    assert out is not None and "22-year-old" in out and out != "A 22-year-old man has had a rash for 10 days."


def test_left_as_a_verb_is_not_a_side():
    assert corrupt_fact("He left the hospital yesterday.", random.Random(0)) is None


def test_corrupt_fact_is_deterministic_given_rng(cases):
    facts = [fact for case in cases for fact in case.facts]
    first = [corrupt_fact_detailed(f, random.Random(f"7:{f}")) for f in facts]
    again = [corrupt_fact_detailed(f, random.Random(f"7:{f}")) for f in facts]
    assert first == again
    changed = [c for c in first if c is not None]
    assert len(changed) > len(facts) // 2
    assert all(c.corrupted != c.original for c in changed)
    assert {c.strategy for c in changed} == {"numeric", "negation", "laterality", "timing"}


# -- rule builder ----------------------------------------------------------------------------------------
def _check_instance(instance, case_facts: list[str]) -> None:
    assert instance.domain == "healthcare" and instance.variant == "main"
    assert len(instance.misleading) == 1 and 0 <= instance.misleading[0] < instance.n_agents
    assert instance.n_agents >= 3
    assert all(agent.evidence.strip() for agent in instance.agents)
    labels = Counter(fact.label for fact in instance.t2_facts)
    assert labels[0] == labels[1] >= 1 and len(instance.t2_facts) <= 10
    assert instance.corrupted_context and instance.corrupted_context != instance.shared_context
    false = {f.text for f in instance.t2_facts if f.label == 0}
    true = {f.text for f in instance.t2_facts if f.label == 1}
    assert true <= set(case_facts) and not false & set(case_facts)


def _check_rule_instance(instance, case_facts: list[str]) -> None:
    _check_instance(instance, case_facts)
    assert instance.wrong_answer is None
    corrupted = instance.provenance["corrupted"]
    assert corrupted and all(c["corrupted"] != c["original"] and c["original"] in case_facts for c in corrupted)
    misleading = instance.misleading[0]
    in_agent = [c for c in corrupted if c["target"] == "agent"]
    in_shared = [c for c in corrupted if c["target"] == "shared"]
    assert 1 <= len(in_agent) <= 3 and 1 <= len(in_shared) <= 2
    evidence = instance.agents[misleading].evidence
    assert all(c["agent"] == misleading and c["corrupted"] in evidence for c in in_agent)
    for index, agent in enumerate(instance.agents):  # only the misleading agent's evidence is corrupted
        if index != misleading:
            assert not any(c["corrupted"] in agent.evidence for c in corrupted)
    assert instance.corrupted_context.startswith(instance.shared_context)
    assert all(c["corrupted"] in instance.corrupted_context for c in in_shared)
    assert all(c["agent"] != misleading for c in in_shared) or all(
        not applicable_strategies(f) for i, a in enumerate(instance.agents) if i != misleading
        for f in split_sentences(a.evidence))
    assert {f.text for f in instance.t2_facts if f.label == 0} <= {c["corrupted"] for c in corrupted}


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 11, 123])
def test_rule_builder_invariants_on_fixtures(cases, seed):
    report = BuildReport()
    instances = build_rule(cases, seed=seed, report=report)
    assert report.built == len(instances) == len(cases) and not report.skipped
    by_id = {c.id: c for c in cases}
    for instance in instances:
        case = by_id[instance.provenance["case_id"]]
        assert instance.id == f"mediq-{case.id}-rule-s{seed}"
        assert instance.answer == case.gold and instance.options == case.options
        assert instance.provenance["builder"] == "rule" and instance.provenance["seed"] == seed
        _check_rule_instance(instance, case.facts)


def test_rule_builder_is_deterministic_and_seed_dependent(cases):
    first = [i.model_dump() for i in build_rule(cases, seed=3)]
    assert first == [i.model_dump() for i in build_rule(cases, seed=3)]
    other = [i.model_dump() for i in build_rule(cases, seed=4)]
    strip = [{k: v for k, v in d.items() if k not in ("id", "provenance")} for d in first]
    assert strip != [{k: v for k, v in d.items() if k not in ("id", "provenance")} for d in other]
    picks = {tuple(i.misleading[0] for i in build_rule(cases, seed=seed)) for seed in range(8)}
    assert len(picks) > 1  # the misleading agent depends on the seed


def test_rule_builder_respects_max_t2_facts(cases):
    for instance in build_rule(cases, seed=2, max_t2_facts=2):
        assert [f.label for f in sorted(instance.t2_facts, key=lambda f: f.label)] == [0, 1]
    with pytest.raises(ConfigError):
        build_rule(cases, max_t2_facts=1)


def test_rule_builder_skips_unbuildable_case_with_reason(caplog):
    report = BuildReport()
    with caplog.at_level("INFO", logger="groundstate.eval.benchmarks.offquery"):
        instances = build_rule(load_mediq(DATA / "sparse.jsonl"), report=report)
    assert [i.provenance["case_id"] for i in instances] == ["fx-002"]
    assert report.skipped == [{"case_id": "fx-sparse", "reason": report.skipped[0]["reason"]}]
    assert "department" in report.skipped[0]["reason"] and "fx-sparse" in caplog.text


@pytest.mark.skipif(not REAL.exists(), reason=f"the MediQ data ({REAL}) is not available")
def test_rule_builder_invariants_on_real_mediq():
    cases = load_mediq(REAL)
    assert len(cases) == 140
    by_id = {c.id: c for c in cases}
    runs = {}
    for seed in (0, 1, 2):
        report = BuildReport()
        instances = build_rule(cases, seed=seed, report=report)
        assert len(instances) + len(report.skipped) == len(cases)
        assert len(instances) >= 0.85 * len(cases), report.skipped
        for instance in instances:
            _check_rule_instance(instance, by_id[instance.provenance["case_id"]].facts)
        runs[seed] = [i.model_dump() for i in instances]
    assert runs[0] == [i.model_dump() for i in build_rule(cases, seed=0)]
    assert [i["misleading"] for i in runs[0]] != [i["misleading"] for i in runs[1]]


# -- LM builder ------------------------------------------------------------------------------------------
# a word that appears in each fixture case's context and shared context -> the case's gold letter
GOLD = {"cough": "A", "big toe": "B", "elbows": "C", "abdom": "A", "neck": "B"}


def _gold_of(text: str) -> str:
    return next(letter for key, letter in GOLD.items() if key in text)


class Responder:
    """A scripted LM for the builder: fabricates 'D' (never a fixture's gold), rewrites, reports a conflict.

    ``correct_first``: cases (by key) whose first fabrication returns the gold letter.
    ``no_conflict``: cases whose conflict check always says no conflict.
    ``fail``: cases on which the LM raises.
    """

    def __init__(self, correct_first=(), no_conflict=(), fail=()):
        self.correct_first, self.no_conflict, self.fail = set(correct_first), set(no_conflict), set(fail)
        self.fabrications: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, req):
        fields, text = req.output_fields, req.user
        if "wrong_answer" in fields:
            key = next(k for k in GOLD if k in _field(text, "case_context"))
            if key in self.fail:
                return RuntimeError("scripted LM failure")
            with self.lock:
                self.fabrications[key] += 1
                first = self.fabrications[key] == 1
            department = _field(text, "department")
            letter = _field(text, "correct_answer") if key in self.correct_first and first else "D"
            return {"wrong_answer": letter, "reason": "made up",
                    "misleading_evidence": f"The {department} findings are unremarkable. No abnormality was seen on "
                                           f"repeat review. The result was reported as normal."}
        if "corrupted_context" in fields:
            return {"corrupted_context": _field(text, "shared_context") + " A relative had a similar illness."}
        if "conflicts" in fields:
            key = next(k for k in GOLD if k in _field(text, "reliable_context"))
            if key in self.no_conflict:
                return {"conflicts": False, "conflicting_points": []}
            return {"conflicts": True, "conflicting_points": ["the findings are reported as normal"]}
        return None


def _lm_build(cases, responder, **kwargs):
    lm = scripted_lm(responder)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return build_lm(cases, **kwargs), lm


def test_lm_builder_builds_instances_with_a_wrong_answer(cases):
    report = BuildReport()
    instances, lm = _lm_build(cases, Responder(), seed=0, report=report)
    assert report.built == len(instances) == len(cases) and not report.skipped and not report.rejections
    by_id = {c.id: c for c in cases}
    for instance in instances:
        case = by_id[instance.provenance["case_id"]]
        _check_instance(instance, case.facts)
        assert instance.id == f"mediq-{case.id}-lm-s0"
        assert instance.wrong_answer == "D" != instance.answer == case.gold
        misleading = instance.agents[instance.misleading[0]]
        assert misleading.evidence.startswith(f"The {misleading.role} findings are unremarkable.")
        assert instance.corrupted_context == instance.shared_context + " A relative had a similar illness."
        assert {f.text for f in instance.t2_facts if f.label == 0} <= set(split_sentences(misleading.evidence))
        assert instance.provenance["builder"] == "lm" and instance.provenance["attempts"] == 1
        assert instance.provenance["conflicting_points"] == ["the findings are reported as normal"]
        # the other agents keep their reliable facts
        partition = partition_case(case.facts)
        for index, agent in enumerate(instance.agents):
            if index != instance.misleading[0]:
                assert agent.evidence == " ".join(partition.agents[index][1])
    assert lm.engine.calls == 3 * len(cases)


def test_lm_builder_retries_when_the_wrong_answer_is_the_gold(cases):
    report = BuildReport()
    instances, _ = _lm_build(cases, Responder(correct_first={"big toe"}), report=report)
    assert len(instances) == len(cases)
    toe = next(i for i in instances if i.provenance["case_id"] == "fx-002")
    assert toe.wrong_answer == "D" and toe.provenance["attempts"] == 2
    assert len(toe.provenance["rejections"]) == 1 and "correct answer" in toe.provenance["rejections"][0]["reason"]
    assert report.rejections == [{"case_id": "fx-002", "attempt": 1,
                                  "reason": toe.provenance["rejections"][0]["reason"]}]


def test_lm_builder_rejects_and_skips_without_retries(cases):
    report = BuildReport()
    instances, _ = _lm_build(cases, Responder(correct_first={"big toe"}), max_retries=0, report=report)
    assert "fx-002" not in {i.provenance["case_id"] for i in instances} and len(instances) == len(cases) - 1
    assert report.skipped == [{"case_id": "fx-002", "reason": "every LM attempt was rejected (1 attempt(s))"}]


def test_lm_builder_rejects_evidence_that_does_not_conflict(cases):
    report = BuildReport()
    instances, _ = _lm_build(cases, Responder(no_conflict={"elbows"}), max_retries=2, report=report)
    assert "fx-003" not in {i.provenance["case_id"] for i in instances} and len(instances) == len(cases) - 1
    rejected = [r for r in report.rejections if r["case_id"] == "fx-003"]
    assert [r["attempt"] for r in rejected] == [1, 2, 3] and all("no conflict" in r["reason"] for r in rejected)
    assert report.skipped[0]["case_id"] == "fx-003"


def test_lm_failure_on_one_case_skips_only_that_case(cases, caplog):
    report = BuildReport()
    with caplog.at_level("WARNING", logger="groundstate.eval.benchmarks.offquery"):
        instances, _ = _lm_build(cases, Responder(fail={"abdom"}), report=report)
    assert sorted(i.provenance["case_id"] for i in instances) == ["fx-001", "fx-002", "fx-003", "fx-005"]
    assert [f["case_id"] for f in report.failures] == ["fx-004"]
    assert report.skipped[0]["case_id"] == "fx-004" and report.skipped[0]["reason"].startswith("LM failure")
    assert "fx-004" in caplog.text
    with pytest.raises(Exception, match="scripted LM failure"):
        _lm_build(cases, Responder(fail={"abdom"}), skip_failed=False)


def test_lm_builder_misleading_agent_depends_on_seed(cases):
    picks = {seed: [i.misleading[0] for i in _lm_build(cases, Responder(), seed=seed)[0]] for seed in range(4)}
    assert picks[0] == [i.misleading[0] for i in _lm_build(cases, Responder(), seed=0)[0]]
    assert len({tuple(p) for p in picks.values()}) > 1


def test_builder_program_skips_later_stages_when_it_picks_the_gold():
    def respond(req):
        if "wrong_answer" in req.output_fields:
            return {"wrong_answer": "B", "misleading_evidence": "Normal.", "reason": "r"}
        raise AssertionError("later stages must not run")

    with dspy.context(lm=scripted_lm(respond), adapter=dspy.JSONAdapter()):
        out = OffQueryLMBuilder()(case_context="c", question="q", options={k: k.lower() for k in "ABCD"},
                                  correct_answer="B", department="laboratory", department_facts="f",
                                  shared_context="s")
    assert out.wrong_answer == "B" and out.corrupted_context is None and out.conflicts is False


def test_corrupted_context_naming_the_wrong_option_is_rejected(cases):
    class Naming(Responder):
        def __call__(self, req):
            if "corrupted_context" in req.output_fields:
                decision = _field(req.user, "incorrect_decision").split(": ", 1)[1]
                return {"corrupted_context": f"The picture fits {decision}."}
            return super().__call__(req)

    report = BuildReport()
    instances, _ = _lm_build(cases[:1], Naming(), max_retries=0, report=report)
    assert instances == [] and "names the incorrect option" in report.rejections[0]["reason"]


# -- HEALTHCARE-S / HEALTHCARE-I ------------------------------------------------------------------------
def test_tag_sufficiency_tags_by_correctness_from_shared_context(cases):
    instances = build_rule(cases, seed=0)
    seen: list[str] = []

    def respond(req):
        information = _field(req.user, "information")
        seen.append(information)
        if "big toe" in information:
            return RuntimeError("scripted LM failure")
        # correct for the cough and elbow cases, wrong ("D") for the others
        letter = _gold_of(information) if any(k in information for k in ("cough", "elbows")) else "D"
        return {"answer": letter, "reason": "from the shared context"}

    lm = scripted_lm(respond)
    with dspy.context(adapter=dspy.JSONAdapter()):
        tagged = tag_sufficiency(instances, lm=lm, threads=3)
    splits = {t.provenance["case_id"]: t.split for t in tagged}
    assert splits == {"fx-001": "healthcare-s", "fx-002": None, "fx-003": "healthcare-s",
                      "fx-004": "healthcare-i", "fx-005": "healthcare-i"}
    failed = next(t for t in tagged if t.provenance["case_id"] == "fx-002")
    assert "scripted LM failure" in failed.provenance["split_error"]
    assert tagged[0].provenance["sufficiency"] == {"answer": "A", "correct": True}
    assert all(i.split is None for i in instances)  # inputs are not modified
    # only the reliable shared context is shown, never the corrupted one or agents' evidence
    assert sorted(seen) == sorted(i.shared_context for i in instances)


def test_tag_sufficiency_needs_an_lm(cases):
    with pytest.raises(ConfigError):
        tag_sufficiency(build_rule(cases[:1]))


def test_tag_sufficiency_uses_the_context_lm(cases):
    lm = scripted_lm(lambda req: {"answer": "D", "reason": "r"})
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        tagged = tag_sufficiency(build_rule(cases[:2]))
    assert [t.split for t in tagged] == ["healthcare-i", "healthcare-i"] and lm.engine.calls == 2
