"""DHD replay bookkeeping with scripted LMs: the integrator sees exactly the intended subset, the cache never
collapses repeats, resume re-runs nothing, failures stay separate from wrong answers."""

from __future__ import annotations

import json
import re
from collections import Counter

import dspy
import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.dhd.cache import MessageCache, PoolEntry
from groundstate.eval.dhd.replay import flip_label, pair_rows, repeat_pairs, replay_arms
from groundstate.eval.dhd.run import collect_pairs, generate, load_blocks, replay
from groundstate.eval.results import read_results
from groundstate.eval.run_settings import RunSettings
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.records import HypothesisMessage, Problem
from groundstate.testing import scripted_lm

GOLD = "4321"
WRONG = "17"


def proposal(i: int) -> str:
    return str(7000 + i)


class World:
    """A scripted DHD world. Message ``i`` carries the marker ``MARK<i>X`` in its reasoning and proposes
    ``700<i>``; the integrator's answer is decided by ``rule(shown, request)`` (default: right iff message 0 is
    shown); ``failing`` maps a shown set to an exception or an answer text used instead."""

    def __init__(self, rule=None, failing=None, roles=5):
        self.rule = rule or (lambda shown, req: 0 in shown)
        self.failing = failing or {}
        self.roles = roles

    def __call__(self, req):
        fields = req.output_fields
        if "roles" in fields:
            return {"roles": [f"Role{i}: angle {i}" for i in range(self.roles)]}
        if "proposed_answer" in fields:
            i = int(re.search(r"Role(\d+)", req.field("role")).group(1))
            return {"proposed_answer": proposal(i), "reasoning_direction": f"MARK{i}X", "key_idea": f"idea {i}",
                    "critical_assumption": "none", "what_to_check": "units", "confidence": "medium",
                    "confidence_reason": "one method only"}
        if "verdict" in fields:  # the judge: right iff the gold number is in the response; JUDGE-FAIL breaks it
            response = req.field("response") or ""
            if "JUDGE-FAIL" in response:
                return RuntimeError("judge down")
            gold = req.field("reference_answer").split()[0]
            return {"final_answer": response[-20:], "verdict": "correct" if gold in response else "incorrect"}
        if "answer" in fields:
            shown = shown_set(req)
            if shown in self.failing:
                outcome = self.failing[shown]
                return outcome if isinstance(outcome, BaseException) else {"reasoning": "r", "answer": outcome}
            return {"reasoning": "r", "answer": GOLD if self.rule(shown, req) else WRONG}
        return None


def shown_set(req) -> frozenset[int]:
    return frozenset(int(x) for x in re.findall(r"MARK(\d+)X", req.field("messages") or ""))


def integrator_requests(lm, problem_marker: str | None = None):
    out = [r for r in lm.engine.requests if "answer" in r.output_fields and "roles" not in r.output_fields
           and "proposed_answer" not in r.output_fields]
    return [r for r in out if problem_marker is None or problem_marker in r.field("problem")]


def make_problems(tag: str, n: int = 2) -> list[Problem]:
    return [Problem(id=f"{tag}-{j}", question=f"Problem {tag}-{j}: how long is the rod?", answer=GOLD, kind="number",
                    unit="cm", source="tiny") for j in range(n)]


@pytest.fixture(autouse=True)
def _fresh_dspy_cache():
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()


def within(lm, fn):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return fn()


@pytest.fixture
def world_cache(tmp_path):
    """A cache of two problems with five messages each (message 0 wrong, the others wrong too)."""
    cache = MessageCache(tmp_path / "cache")
    lm = scripted_lm(World(), cache=True)
    within(lm, lambda: generate(cache, make_problems("w"), run=RunSettings(threads=2)))
    return cache


# -- the message cache ---------------------------------------------------------------------------------------------
def test_messages_are_generated_once_and_reused(tmp_path):
    cache = MessageCache(tmp_path / "cache")
    lm = scripted_lm(World())
    problems = make_problems("g")
    result, counts = within(lm, lambda: generate(cache, problems, run=RunSettings(threads=2)))
    assert counts["generated"] == 2 and lm.engine.calls == 2 * 6  # recruiter + 5 hypothesizers per problem
    entries = cache.entries()
    assert entries["g-0"].proposal_correct == [0, 0, 0, 0, 0]
    assert [m.reasoning_direction for m in entries["g-0"].pool()] == [f"MARK{i}X" for i in range(5)]
    again, counts = within(lm, lambda: generate(cache, problems, run=RunSettings(threads=2)))
    assert again is None and counts["cached_before"] == 2 and lm.engine.calls == 12  # nothing regenerated
    changed = [problems[0].model_copy(update={"answer": "1"})]
    with pytest.raises(InputError, match="record g-0.*differs from the problem with the same id"):
        generate(cache, changed)


def test_failed_hypothesizers_are_stored_and_left_out_of_pools(tmp_path):
    class Flaky(World):
        def __call__(self, req):
            if "proposed_answer" in req.output_fields and "Role1" in req.field("role"):
                return RuntimeError("hypothesizer down")
            return super().__call__(req)

    cache = MessageCache(tmp_path / "cache")
    _, counts = within(scripted_lm(Flaky()), lambda: generate(cache, make_problems("f", 1)))
    assert counts["failed_messages"] == 1
    entry = cache.entries()["f-0"]
    assert entry.messages[1].error and entry.proposal_correct[1] is None
    assert [m.index for m in entry.pool()] == [0, 2, 3, 4] and [m.index for m in entry.pool(2)] == [0, 2]
    _, short = within(scripted_lm(World(), cache=True), lambda: replay(cache, "loo", [4, 5], 1))
    assert short == {4: 0, 5: 1}  # the problem has only four usable messages


def test_cache_store_is_first_write_wins_and_survives_a_torn_line(tmp_path):
    cache = MessageCache(tmp_path / "c")
    message = HypothesisMessage(problem_id="p", index=0, role="r", proposed_answer="1")
    first = PoolEntry(problem_id="p", roles=["r"], messages=[message], proposal_correct=[1])
    assert cache.put([first]) == 1
    assert cache.put([first.model_copy(update={"roles": ["other"]})]) == 0
    with open(tmp_path / "c" / "messages.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"problem_id": "q", "roles": [')  # a torn last line
    assert list(cache.entries()) == ["p"] and cache.entries()["p"].roles == ["r"]
    second = first.model_copy(update={"problem_id": "q"})
    assert cache.put([second]) == 1 and set(cache.entries()) == {"p", "q"}


# -- who the integrator sees ---------------------------------------------------------------------------------------
def test_loo_integrator_sees_exactly_the_intended_nested_subsets(world_cache):
    lm = scripted_lm(World(), cache=True)
    result, _ = within(lm, lambda: replay(world_cache, "loo", [1, 2, 3, 4, 5], 1, run=RunSettings(threads=3)))
    assert result.summary["n_done"] == 2 * 5
    for pid in ("w-0", "w-1"):
        seen = Counter(shown_set(r) for r in integrator_requests(lm, pid))
        expected: Counter = Counter()
        for k in range(1, 6):
            pool = frozenset(range(k))  # nested: the first K messages
            expected[pool] += 2  # the full pool and its repeat
            for i in range(k):
                expected[pool - {i}] += 1
        assert seen == expected
    for request in integrator_requests(lm):
        assert GOLD not in request.text  # nothing says which answer is right
        shown = request.field("messages")
        if shown is not None:
            headers = re.findall(r"Message (\d+)", shown)
            assert headers == [str(n) for n in range(1, len(headers) + 1)]
    solver = [r for r in integrator_requests(lm) if r.field("messages") is None]
    assert len(solver) == 2  # K=1 without its only message = independent solving, once per problem


def test_single_mode_shows_one_message_or_none(world_cache):
    lm = scripted_lm(World(), cache=True)
    within(lm, lambda: replay(world_cache, "single", [5], 2))
    seen = Counter(shown_set(r) for r in integrator_requests(lm, "w-0"))
    assert seen == Counter({frozenset(): 2, **{frozenset({i}): 2 for i in range(5)}})
    independent = [r for r in integrator_requests(lm, "w-0") if not shown_set(r)]
    assert all(r.field("messages") is None and "MARK" not in r.text for r in independent)


# -- the cache never collapses repeats; resume is free --------------------------------------------------------------
def test_repeats_reach_the_engine_and_resume_reruns_nothing(world_cache):
    lm = scripted_lm(World(), cache=True)  # DSPy's cache is ON
    options = RunSettings(threads=2)
    result, _ = within(lm, lambda: replay(world_cache, "loo", [5], 2, run=options))
    calls = integrator_requests(lm)
    assert len(calls) == 2 * 2 * (2 + 5)  # problems x blocks x (full, full_b, 5 removals): none collapsed
    texts = Counter(r.text for r in calls)
    assert max(texts.values()) == 4  # the full pool: identical prompt, 2 arms x 2 blocks, 4 separate samples
    keys = [a["key"] for row in result.rows for a in row["outputs"]["arms"]]
    assert len(keys) == len(set(keys)) and all("|11111|" in k or "|11111|" not in k for k in keys)
    assert {a["pattern"] for row in result.rows for a in row["outputs"]["arms"]} == {
        "11111", "01111", "10111", "11011", "11101", "11110"}
    before = lm.engine.calls

    again, _ = within(lm, lambda: replay(world_cache, "loo", [5], 2, run=options))
    assert again.skipped == 4 and lm.engine.calls == before and again.run_dir == result.run_dir

    results = again.run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write, blocks lost
    resumed, _ = within(lm, lambda: replay(world_cache, "loo", [5], 2, run=options))
    assert resumed.skipped == 1 and len(resumed.rows) == 4
    assert lm.engine.calls == before  # the re-run blocks came back from DSPy's cache (same rollout keys)

    more, _ = within(lm, lambda: replay(world_cache, "loo", [5], 3, run=options))
    assert more.run_dir == result.run_dir and more.skipped == 4
    assert lm.engine.calls == before + 2 * 7  # only the new block ran
    assert len(read_results(results)) == 6


def test_different_masks_are_different_samples_even_with_identical_text(tmp_path):
    """Two messages with identical text: hiding one or the other gives the same prompt, but not the same sample."""

    cache = MessageCache(tmp_path / "cache")
    problem = make_problems("t", 1)[0]
    cache.add_problems([problem])
    twin = {"problem_id": problem.id, "role": "Same role", "proposed_answer": "7009", "reasoning_direction": "MARK9X"}
    cache.put([PoolEntry(problem_id=problem.id, roles=["Same role"] * 2, proposal_correct=[0, 0],
                         messages=[HypothesisMessage(index=i, **twin) for i in range(2)])])
    lm = scripted_lm(World(), cache=True)
    within(lm, lambda: replay(cache, "loo", [2], 1))
    calls = integrator_requests(lm)
    # full == full_b, and hiding message 0 == hiding message 1: two prompts, each sent twice, none collapsed
    assert len(calls) == 4 and sorted(Counter(r.text for r in calls).values()) == [2, 2]


# -- failures stay separate ----------------------------------------------------------------------------------------
def test_failures_are_recorded_apart_from_wrong_answers(world_cache):
    from groundstate.eval.dhd import effects, report

    pool = frozenset(range(5))
    failing = {pool - {2}: RuntimeError("LM down"), pool - {3}: "I cannot say"}
    lm = scripted_lm(World(failing=failing), cache=True)
    result, _ = within(lm, lambda: replay(world_cache, "loo", [5], 1))
    assert all(row["error"] is None for row in result.rows)  # the blocks themselves finished
    rows, blocks = collect_pairs(world_cache)
    assert len(rows) == 10
    by_message = {(r["problem_id"], r["message_id"]): r for r in rows}
    lost = by_message[("w-0", 2)]
    assert lost["without_correct"] is None and lost["label"] is None and lost["without_failure"].startswith("lm-error")
    unparsed = by_message[("w-0", 3)]  # no number in the answer: a wrong answer, not a failure
    assert (unparsed["without_correct"], unparsed["without_failure"], unparsed["label"]) == (0, None, "helpful")
    arms = {(b["problem_id"], a["arm"], a["message_id"]): a for b in blocks for a in b["arms"]}
    assert arms[("w-0", "without", 3)]["method"] == "no-answer"
    helpful = by_message[("w-0", 0)]
    assert (helpful["with_correct"], helpful["without_correct"], helpful["label"]) == (1, 0, "helpful")
    assert helpful["proposal_correct"] is False and helpful["benchmark"] == "tiny"  # wrong but useful
    neutral = by_message[("w-0", 1)]
    assert neutral["label"] == "neutral" and neutral["with_correct_b"] == 1
    table = effects.pair_effects(rows, mode="loo", K=5)
    flips = report.flip_direction(table)
    assert flips["all"]["n_evaluable"] == 10 - 2 and flips["wrong"]["helpful"] == 4 and flips["all"]["harmful"] == 0


def test_judge_mode_grades_the_whole_response_and_judge_failures_stay_failures(world_cache):
    pool = frozenset(range(5))
    failing = {pool - {2}: RuntimeError("LM down"), pool - {3}: "JUDGE-FAIL", pool - {4}: "I cannot say"}
    lm = scripted_lm(World(failing=failing), cache=True)
    result, _ = within(lm, lambda: replay(world_cache, "loo", [5], 1, evaluator=AnswerEvaluator(mode="judge")))
    assert result.config["evaluator"] == "judge" and result.config["temperatures"]["judge"] == 0.0
    rows, blocks = collect_pairs(world_cache)
    by_message = {(r["problem_id"], r["message_id"]): r for r in rows}
    assert by_message[("w-0", 2)]["without_failure"].startswith("lm-error")
    judge_lost = by_message[("w-0", 3)]
    assert judge_lost["without_correct"] is None and judge_lost["label"] is None
    assert judge_lost["without_failure"].startswith("judge-error: ") and "judge down" in judge_lost["without_failure"]
    assert by_message[("w-0", 4)]["without_correct"] == 0  # judged wrong, not a failure
    assert by_message[("w-0", 0)]["label"] == "helpful"
    judged = [r for r in lm.engine.requests if "verdict" in r.output_fields]
    full = next(a for b in blocks if b["problem_id"] == "w-0" for a in b["arms"] if a["arm"] == "full")
    assert full["response"] == f"r\n\nFinal answer: {GOLD}" and full["method"] == "judge"
    assert any(r.field("response") == full["response"] and "Problem w-0" in r.field("problem") for r in judged)


def test_flip_label():
    assert [flip_label(1, 0), flip_label(0, 1), flip_label(1, 1), flip_label(0, 0), flip_label(None, 1),
            flip_label(1, None)] == ["helpful", "harmful", "neutral", "neutral", None, None]


def test_pair_rows_contract_and_repeat_pairs():
    arms = [{"arm": "full", "correct": 1}, {"arm": "full_b", "correct": 0},
            {"arm": "without", "message_id": 0, "correct": 0}, {"arm": "without", "message_id": 1, "correct": None,
                                                                "failure": "judge-error: verdict 'maybe'"}]
    single = [{"arm": "independent", "correct": 0}, {"arm": "only", "message_id": 1, "correct": 1}]
    entry = PoolEntry(problem_id="p", roles=["a", "b"], proposal_correct=[0, 1],
                      messages=[HypothesisMessage(problem_id="p", index=i, role="r") for i in range(2)])
    blocks = [{"problem_id": "p", "mode": "loo", "K": 2, "block": 0, "arms": arms},
              {"problem_id": "p", "mode": "single", "K": 2, "block": 3, "arms": single}]
    rows = pair_rows(blocks, {"p": entry})
    assert rows == [
        {"problem_id": "p", "message_id": 0, "mode": "loo", "K": 2, "block": 0, "with_correct": 1,
         "without_correct": 0, "proposal_correct": False, "label": "helpful", "with_failure": None,
         "without_failure": None, "with_correct_b": 0},
        {"problem_id": "p", "message_id": 1, "mode": "loo", "K": 2, "block": 0, "with_correct": 1,
         "without_correct": None, "proposal_correct": True, "label": None, "with_failure": None,
         "without_failure": "judge-error: verdict 'maybe'", "with_correct_b": 0},
        {"problem_id": "p", "message_id": 1, "mode": "single", "K": 2, "block": 3, "with_correct": 1,
         "without_correct": 0, "proposal_correct": True, "label": "helpful", "with_failure": None,
         "without_failure": None}]
    assert repeat_pairs(blocks) == [(1, 0)] and repeat_pairs(blocks, k=5) == []


def test_disagreement_pairs_come_from_identical_inputs(world_cache):
    from groundstate.eval.dhd import effects

    state = {"n": 0}

    def alternate(shown, req):
        state["n"] += 1
        return state["n"] % 2 == 0

    lm = scripted_lm(World(rule=alternate), cache=True)
    within(lm, lambda: replay(world_cache, "loo", [5], 3, run=RunSettings(threads=1, call_threads=1)))
    blocks = load_blocks(world_cache)
    pairs = repeat_pairs(blocks, 5)
    assert len(pairs) == 6
    rate = effects.disagreement_rate(pairs)
    assert rate["n"] == 6 and rate["rate"] == sum(a != b for a, b in pairs) / 6 > 0


def test_arms_and_keys():
    arms = replay_arms("p", [0, 1, 2], "loo", 3, 4)
    assert [(a.name, a.message_id, a.pattern) for a in arms] == [
        ("full", None, "111"), ("full_b", None, "111"), ("without", 0, "011"), ("without", 1, "101"),
        ("without", 2, "110")]
    assert arms[0].key == "dhd|p|loo|K3|111|b4|r0" and arms[1].key == "dhd|p|loo|K3|111|b4|r1"
    single = replay_arms("p", [0, 2, 5], "single", 2, 0)
    assert [(a.name, a.shown, a.pattern) for a in single] == [("independent", (), "00"), ("only", (0,), "10"),
                                                              ("only", (2,), "01")]
    with pytest.raises(ValueError, match="fewer than K=4"):
        replay_arms("p", [0, 1], "loo", 4, 0)


def test_replay_needs_messages_and_valid_options(tmp_path):
    empty = MessageCache(tmp_path / "nothing")
    with pytest.raises(InputError, match="is not a DHD message cache"):
        replay(empty, "loo", [5], 1)
    empty.ensure()
    with pytest.raises(ConfigError, match="holds no messages"):
        replay(empty, "loo", [5], 1)
    with pytest.raises(ConfigError, match="--mode"):
        replay(empty, "both", [5], 1)
    with pytest.raises(ConfigError, match="--repeats"):
        replay(empty, "loo", [5], 0)


# component masking: tests/eval/dhd/test_masking.py
def test_results_rows_are_json(world_cache):
    lm = scripted_lm(World(), cache=True)
    result, _ = within(lm, lambda: replay(world_cache, "single", [3], 1))
    for row in read_results(result.run_dir / "results.jsonl"):
        json.dumps(row)
        assert {a["arm"] for a in row["outputs"]["arms"]} == {"independent", "only"}
