import re
import threading
import time

import dspy
import pytest

from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.programs.reground.reground import Reconstruct, ReGround, Resolve, Verify
from groundstate.records import AgentEvidence
from groundstate.testing import scripted_lm

AGENTS = [
    AgentEvidence(agent=0, role="vital signs", evidence="Temperature is 39.2 C. Pulse is 120."),
    AgentEvidence(agent=1, role="imaging", evidence="X-ray shows consolidation."),
    AgentEvidence(agent=2, role="laboratory", evidence="WBC is 4.0. Temperature is 36.5 C."),
    AgentEvidence(agent=3, role="history", evidence="No recent travel."),
]
SHARED = "A 60-year-old man with cough. Temperature is 36.5 C. He smokes."
OPTIONS = {"A": "Pneumonia", "B": "Bronchitis", "C": "Asthma", "D": "Heart failure"}


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=\.)\s+", text) if s.strip()]


class Script:
    """A responder for ReGround's signatures, driven by a few knobs; it records what each call saw."""

    def __init__(self, pairs=((0, 2),), incorrect="second", scores=None, detect=None, verdicts=None, none=False):
        self.pairs = list(pairs)
        self.none = none  # answer "no conflict" once the listed pairs are used up (stop_early)
        self.incorrect = incorrect
        self.scores = scores or {}
        self.detect = detect
        self.verdicts = verdicts or {}
        self.lock = threading.Lock()

    def __call__(self, req):
        fields = req.output_fields
        if "statements" in fields:
            return {"statements": sentences(req.field("evidence"))}
        if "pair" in fields:
            with self.lock:
                pair = self.pairs.pop(0) if self.pairs else None
            if pair is None:
                if self.none:
                    return {"pair": "0-1", "strength": "none", "reason": "none"}
                return None  # a placeholder: the first pair the constrained schema allows
            return {"pair": f"{min(pair)}-{max(pair)}" if pair[0] != pair[1] else f"{pair[0]}-{pair[1]}",
                    "strength": "strong", "reason": "temperatures differ"}
        if "argument" in fields:
            return {"argument": f"ARG-{req.field('stance')}"}
        if "incorrect" in fields:
            return {"incorrect": self.incorrect, "reason": "outnumbered"}
        if "consistency" in fields:
            agent = int(re.search(r"\[(\d+)\]", req.field("candidate")).group(1))
            return {"consistency": self.scores.get(agent, 5), "reason": f"score for {agent}"}
        if "misleading_source" in fields:
            first = int(re.search(r"\[(\d+)\]", req.field("candidates")).group(1))
            return {"misleading_source": first if self.detect is None else self.detect, "reason": "detector"}
        if "facts" in fields:
            return {"facts": sentences(req.field("context"))}
        if "verdict" in fields:
            fact = req.field("fact")
            verdict, importance = next((v for k, v in self.verdicts.items() if k in fact), ("supported", "high"))
            return {"verdict": verdict, "importance": importance}
        if "state" in fields:
            return {"state": "STATE: " + req.field("verified_facts").replace("\n", " ")}
        if "answer" in fields:
            return {"answer": "A", "reason": "from the state"}
        raise AssertionError(f"unexpected request for {fields}")


def run(program, script, adapter=None, **kwargs):
    lm = scripted_lm(script)
    with dspy.context(lm=lm, adapter=adapter or dspy.JSONAdapter()):
        out = program(**kwargs)
    return out, lm.engine.requests


def calls(requests, field):
    return [r for r in requests if field in r.output_fields]


def test_verify_early_stop_when_no_conflict():
    out, reqs = run(Verify(max_candidates=3, stop_early=True), Script(pairs=(), none=True), agents=AGENTS)
    assert out.misleading_agent is None and out.candidates == []
    assert len(calls(reqs, "pair")) == 1
    assert not calls(reqs, "argument") and not calls(reqs, "incorrect") and not calls(reqs, "consistency")
    assert out.trace["rounds"][0]["stop"] == "no conflict found (stop_early)"
    assert out.trusted == [0, 1, 2, 3]


def test_verification_yields_a_candidate_in_every_one_of_m_rounds_by_default():
    """The conflict search cannot answer "no conflict": its answer is constrained to pairs of distinct standing
    sources, so M rounds give M candidates even when the model has nothing to say (placeholder answers)."""
    out, reqs = run(Verify(max_candidates=3), Script(pairs=()), agents=AGENTS)
    assert len(calls(reqs, "pair")) == 3 and len(out.candidates) == 3 and len(set(out.candidates)) == 3
    for request, entry in zip(calls(reqs, "pair"), out.trace["rounds"], strict=True):
        field = request.schema["properties"]["pair"]
        allowed = field.get("enum") or [field["const"]]  # a single standing pair is a const
        standing = entry["remaining"]
        assert sorted(allowed) == sorted(f"{a}-{b}" for a in standing for b in standing if a < b)
        assert "none" not in request.schema["properties"]["strength"]["enum"]
    assert out.misleading_agent in out.candidates
    assert len(calls(reqs, "misleading_source")) == 1


def test_the_detector_runs_with_a_single_candidate():
    out, reqs = run(Verify(max_candidates=1), Script(pairs=[(0, 2)], incorrect="second", detect=2), agents=AGENTS)
    assert out.candidates == [2] and len(calls(reqs, "misleading_source")) == 1
    assert out.misleading_agent == 2 and out.trace["decision"]["rule"] == "detector"


def test_verify_arguments_use_only_other_sources_and_loser_is_dropped():
    out, reqs = run(Verify(max_candidates=1), Script(pairs=[(0, 2)], incorrect="second"), agents=AGENTS)
    args = calls(reqs, "argument")
    assert len(args) == 4
    assert sorted(r.field("stance") for r in args) == ["refute", "refute", "support", "support"]
    for r in args:
        others = r.field("others")
        assert "[1]" in others and "[3]" in others
        assert "[0]" not in others and "[2]" not in others
    adjudication = calls(reqs, "incorrect")[0]
    assert "ARG-support" in adjudication.field("arguments") and "ARG-refute" in adjudication.field("arguments")
    assert out.candidates == [2] and out.misleading_agent == 2
    assert out.trusted == [0, 1, 3]


def test_verify_rounds_capped_at_m_and_pairs_among_remaining_sources():
    out, reqs = run(Verify(max_candidates=2), Script(pairs=[(0, 2), (0, 1), (1, 3)], incorrect="second",
                                                     scores={2: 1, 1: 4}, detect=2), agents=AGENTS)
    finds = calls(reqs, "pair")
    assert len(finds) == 2
    assert "[2]" in finds[0].field("sources") and "[2]" not in finds[1].field("sources")
    assert out.candidates == [2, 1]
    scored = calls(reqs, "consistency")
    assert len(scored) == 2
    for r in scored:  # scored against the sources still standing only
        verified = r.field("verified_facts")
        assert "No recent travel" in verified and "WBC is 4.0" not in verified and "X-ray" not in verified
    detector = calls(reqs, "misleading_source")[0]
    assert "consistency: 1/5" in detector.field("candidates")
    assert out.misleading_agent == 2
    assert out.trusted == [0, 1, 3]  # the other candidate returns to the trusted evidence


def test_detector_outside_pool_falls_back_to_lowest_consistency():
    out, _ = run(Verify(max_candidates=2), Script(pairs=[(0, 2), (0, 1)], scores={2: 4, 1: 2}, detect=3),
                 agents=AGENTS)
    assert out.misleading_agent == 1
    assert "lowest consistency" in out.trace["decision"]["rule"]


def test_invalid_pair_stops_search():
    out, reqs = run(Verify(max_candidates=3), Script(pairs=[(1, 1)]), agents=AGENTS)
    assert out.misleading_agent is None and "invalid pair" in out.trace["rounds"][0]["stop"]
    assert not calls(reqs, "argument")


def test_multi_misleading_flags_every_candidate():
    out, _ = run(Verify(max_candidates=2, multi_misleading=True), Script(pairs=[(0, 2), (0, 1)]), agents=AGENTS)
    assert out.misleading_agent == [2, 1] and out.trusted == [0, 3]


def test_reconstruct_filtering_rule_and_trusted_evidence():
    verdicts = {"60-year-old": ("unverifiable", "low"), "36.5": ("refuted", "high"), "smokes": ("unverifiable", "high"),
                "cough": ("supported", "high")}
    out, reqs = run(Reconstruct(), Script(verdicts=verdicts), shared_context="A 60-year-old man. Has cough. "
                    "Temperature is 36.5 C. He smokes.", trusted_statements=["Temperature is 39.2 C."])
    assert out.kept_facts == ["A 60-year-old man.", "Has cough."]
    assert out.removed_facts == ["Temperature is 36.5 C.", "He smokes."]
    for r in calls(reqs, "verdict"):
        assert r.field("evidence") == "- Temperature is 39.2 C."
    state_call = calls(reqs, "state")[0]
    assert "He smokes" not in state_call.field("verified_facts")
    assert out.state.startswith("STATE:")
    assert [c["kept"] for c in out.trace["facts"]] == [True, True, False, False]


def test_keep_rule_table():
    strict = Reconstruct(keep_rule="strict").keep
    assert strict("supported", "high") and strict("supported", "low") and strict("unverifiable", "low")
    assert not strict("unverifiable", "high") and not strict("refuted", "low") and not strict("refuted", "high")
    authors = Reconstruct().keep  # the default: supported, or low importance whatever the verdict
    assert authors("supported", "high") and authors("supported", "medium") and authors("unverifiable", "low")
    assert authors("refuted", "low")
    assert not authors("refuted", "high") and not authors("refuted", "medium") and not authors("unverifiable", "medium")


def test_the_authors_keep_rule_keeps_a_contradicted_low_importance_fact():
    verdicts = {"60-year-old": ("refuted", "low"), "36.5": ("refuted", "high"), "cough": ("supported", "medium")}
    out, reqs = run(Reconstruct(), Script(verdicts=verdicts), shared_context="A 60-year-old man. Has cough. "
                    "Temperature is 36.5 C.", trusted_statements=["Temperature is 39.2 C. Age 62."])
    assert out.kept_facts == ["A 60-year-old man.", "Has cough."] and out.removed_facts == ["Temperature is 36.5 C."]
    assert calls(reqs, "verdict")[0].schema["properties"]["importance"]["enum"] == ["high", "medium", "low"]
    strict, _ = run(Reconstruct(keep_rule="strict"), Script(verdicts=verdicts), shared_context="A 60-year-old man. "
                    "Has cough. Temperature is 36.5 C.", trusted_statements=["Temperature is 39.2 C. Age 62."])
    assert strict.kept_facts == ["Has cough."]


def test_resolve_sees_only_the_state():
    out, reqs = run(Resolve(), Script(), state="STATE ONLY", question="Which?", options=OPTIONS)
    assert out.answer == "A"
    assert reqs[0].field("information") == "STATE ONLY"


def test_reground_end_to_end_contract_and_information_flow():
    out, reqs = run(ReGround(max_candidates=1), Script(pairs=[(0, 2)], incorrect="second"),
                    agents=AGENTS, shared_context=SHARED, question="Which diagnosis?", options=OPTIONS)
    for key in ("misleading_agent", "state", "kept_facts", "removed_facts", "answer", "trace"):
        assert key in out
    assert out.misleading_agent == 2 and out.answer == "A"
    # verification never sees the shared context
    verify_fields = ("statements", "pair", "argument", "incorrect", "consistency", "misleading_source")
    for r in reqs:
        if any(f in r.output_fields for f in verify_fields):
            assert "He smokes" not in r.user
    # fact verification uses the trusted agents' statements only (agent 2 excluded)
    for r in calls(reqs, "verdict"):
        assert "WBC is 4.0" not in r.field("evidence") and "X-ray shows consolidation" in r.field("evidence")
    # the decision is made from the reconstructed state
    assert calls(reqs, "answer")[0].field("information") == out.state
    assert set(out.trace) == {"verify", "reconstruct", "resolve"}


def test_oracle_t1_skips_attribution():
    out, reqs = run(ReGround(oracle_t1=True), Script(), agents=AGENTS, shared_context=SHARED, question="Q?",
                    options=OPTIONS, misleading=[1])
    assert out.misleading_agent == 1
    assert not calls(reqs, "pair")
    for r in calls(reqs, "verdict"):
        assert "X-ray" not in r.field("evidence")
    with pytest.raises(ValueError, match="oracle_t1"):
        run(ReGround(oracle_t1=True), Script(), agents=AGENTS, shared_context=SHARED, question="Q?", options=OPTIONS)


def test_independent_calls_run_concurrently():
    active, peak = [0], [0]
    lock = threading.Lock()
    script = Script(pairs=())

    def slow(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return script(req)

    run(ReGround(), slow, agents=AGENTS, shared_context=SHARED, question="Q?", options=OPTIONS)
    assert peak[0] >= 3


def test_runs_on_synthetic_instances_with_placeholder_lm():
    instance = generate("disaster", "main", 1, seed=2)[0]
    lm = scripted_lm()  # fills every schema with placeholders
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = ReGround()(**instance.inputs("unreliable"))
    assert out.answer in "ABCD" and isinstance(out.state, str)


def test_statement_mode_refuted_rule_flags_the_statements_other_agents_refute_and_scores_them():
    """The earlier release's statement rule, kept as ``statement_rule="refuted"`` (the default adjudicates:
    tests/programs/reground/test_statement_mode.py)."""
    from groundstate.eval.reground.statements import statement_scores

    instance = generate("healthcare", "distributed", 1, seed=0)[0]
    planted = instance.misleading_statements

    def respond(req):
        fields = req.output_fields
        if "statements" in fields:
            return {"statements": sentences(req.field("evidence"))}
        if "verdict" in fields and "fact" in req.user:
            fact = req.field("fact")
            refuted = any(p.split(": ", 1)[-1].rstrip(".") in fact for p in planted)
            return {"verdict": "refuted" if refuted else "supported", "importance": "high"}
        return None

    lm = scripted_lm(respond)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = ReGround(mode="statement", statement_rule="refuted")(**instance.inputs("unreliable"))
    checks = [r for r in lm.engine.requests if "verdict" in r.output_fields and "evidence" in r.user]
    statement_checks = checks[: sum(len(sentences(a.evidence)) for a in instance.agents)]
    for r in statement_checks:  # each statement is checked against the *other* agents' statements only
        assert r.field("fact") not in r.field("evidence")
    assert sorted(out.misleading_agent) == sorted(instance.misleading)
    assert len(out.misleading_statements) == len(planted)
    scores = statement_scores(out.misleading_statements, planted)
    assert scores == {"statement_precision": 1.0, "statement_recall": 1.0}
    assert statement_scores([], planted) == {"statement_precision": None, "statement_recall": 0.0}
    # a failed record: not measured
    assert statement_scores(None, planted) == {"statement_precision": None, "statement_recall": None}
    for statement in out.misleading_statements:
        assert all(statement not in r.field("trusted_statements") for r in calls(lm.engine.requests, "state"))


class BatchScript(Script):
    """:class:`Script` that also answers the batched fact check, fact by fact with the same verdict table
    (``short`` drops the last checks, as a model that stops early would)."""

    def __init__(self, short=0, reverse=False, **kwargs):
        super().__init__(**kwargs)
        self.short, self.reverse = short, reverse

    def __call__(self, req):
        if "checks" not in req.output_fields:
            return super().__call__(req)
        facts = [line.split(". ", 1)[1] for line in req.field("facts").splitlines()]
        found = [next((v for k, v in self.verdicts.items() if k in fact), ("supported", "high")) for fact in facts]
        checks = [{"fact": k, "verdict": verdict, "importance": importance}
                  for k, (verdict, importance) in enumerate(found, 1)]
        kept = checks[:len(checks) - self.short]
        return {"checks": kept[::-1] if self.reverse else kept}  # matched by number, so order does not matter


BATCH_CONTEXT = "A 60-year-old man. Has cough. Temperature is 36.5 C."
BATCH_VERDICTS = {"60-year-old": ("refuted", "low"), "36.5": ("refuted", "high"), "cough": ("supported", "medium")}


@pytest.mark.parametrize("short, reverse", [(0, False), (2, False), (1, True)])
def test_batched_fact_checks_decide_like_one_call_per_fact(short, reverse):
    kwargs = {"shared_context": BATCH_CONTEXT, "trusted_statements": ["Temperature is 39.2 C. Age 62."]}
    single, single_reqs = run(Reconstruct(), BatchScript(verdicts=BATCH_VERDICTS), **kwargs)
    batched, reqs = run(Reconstruct(batch_facts=True),
                        BatchScript(short=short, reverse=reverse, verdicts=BATCH_VERDICTS), **kwargs)
    assert (batched.kept_facts, batched.removed_facts) == (single.kept_facts, single.removed_facts)
    assert batched.trace == single.trace
    assert len(calls(single_reqs, "verdict")) == 3 and len(calls(reqs, "checks")) == 1
    assert len(calls(reqs, "verdict")) == short  # facts the batched answer left out are checked one by one
    request = calls(reqs, "checks")[0]
    numbered = ["1. A 60-year-old man.", "2. Has cough.", "3. Temperature is 36.5 C."]
    assert request.field("facts").splitlines() == numbered
    assert request.field("evidence") == calls(single_reqs, "verdict")[0].field("evidence")


def test_batched_fact_checks_async_matches_sync():
    import asyncio

    kwargs = {"shared_context": BATCH_CONTEXT, "trusted_statements": ["Temperature is 39.2 C."]}
    program = Reconstruct(batch_facts=True)
    expected, _ = run(program, BatchScript(short=1, verdicts=BATCH_VERDICTS), **kwargs)
    lm = scripted_lm(BatchScript(short=1, verdicts=BATCH_VERDICTS))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        got = asyncio.run(program.acall(**kwargs))
    assert (got.kept_facts, got.removed_facts, got.trace) == (expected.kept_facts, expected.removed_facts,
                                                             expected.trace)
    assert ReGround(batch_facts=True).reconstruct.batch_facts and not ReGround().reconstruct.batch_facts
