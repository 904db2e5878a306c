"""The integrator's and hypothesizer's prompts (issue 25, item 11): the authors' protocol by default (think step by
step, a no-score note before every hypothesis, 4,096 output tokens, confidence as low/medium/high with a reason),
the earlier compact prompt and numeric confidence as options that reproduce the earlier calls and run settings."""

from __future__ import annotations

import pytest

from groundstate.eval.dhd.run import GenerateProgram
from groundstate.eval.dhd.settings import generation_settings, replay_settings
from groundstate.programs.dhd.deliberation import DEFAULT_MAX_TOKENS, DiverseHypothesisDeliberation
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.records import HypothesisMessage, Problem
from groundstate.signatures.deliberation import NO_SCORE_NOTE
from groundstate.testing import scripted_lm
from tests.programs.dhd.conftest import run

MESSAGE = HypothesisMessage(problem_id="p", index=0, role="Kinematics", proposed_answer="12", key_idea="IDEA",
                            confidence=None, confidence_note="medium: one method only")
PROBLEM = Problem(id="p1", question="How far? PROBLEM-TEXT", answer="12", kind="number", unit="m")


def calls(lm) -> list[tuple[dict, object]]:
    """``(JSON schema, request)`` of every request that reaches the engine, with its ``max_tokens``."""
    seen: list = []
    complete = lm.engine.complete

    def spy(request):
        seen.append(((request.config.response_format or {}).get("schema") or {}, request.config.max_tokens))
        return complete(request)

    lm.engine.complete = spy
    return seen


def respond(confidence):
    def answer(req):
        if "roles" in req.output_fields:
            return {"roles": ["Role0: a", "Role1: b"]}
        if "proposed_answer" in req.output_fields:
            return {"proposed_answer": "12", "reasoning_direction": "d", "key_idea": "k", "critical_assumption": "a",
                    "what_to_check": "c", **confidence}
        return None
    return answer


def test_the_integrator_and_solver_follow_the_authors_prompt_by_default():
    lm = scripted_lm(lambda req: {"reasoning": "step 1 ... step 9", "answer": "12"})
    seen = calls(lm)
    program = DiverseHypothesisDeliberation()
    assert program.prompts == {"integrator": "authors", "integrator_max_tokens": 4096, "confidence": "level"}
    out = run(lm, lambda: program.integrate("Q?", "a number", [MESSAGE, MESSAGE.model_copy(update={"index": 1})]))
    run(lm, lambda: program.solve("Q?", "a number"))
    integrate, solve = lm.engine.requests
    assert "Think step by step" in integrate.system and "Do not simply adopt a proposed answer" in integrate.system
    assert "some proposed answers may be wrong" in integrate.system.lower()
    shown = integrate.field("messages")
    assert shown.startswith(f"{NO_SCORE_NOTE}\nHypothesis 1 (role: Kinematics)") and shown.count(NO_SCORE_NOTE) == 2
    assert "- confidence: medium: one method only" in shown
    assert "Think step by step" in solve.system
    for request, (_, max_tokens) in zip(lm.engine.requests, seen, strict=True):  # no cap on the working
        assert "maximum length: 800" not in request.text and max_tokens == DEFAULT_MAX_TOKENS == 4096
    assert out.answer == "12" and out.response.endswith("Final answer: 12")
    budget = DiverseHypothesisDeliberation(integrator_max_tokens=1000)
    run(lm, lambda: budget.integrate("Q?", "a number", [MESSAGE]))
    assert seen[-1][1] == 1000


def test_the_compact_prompt_is_the_earlier_one():
    lm = scripted_lm(lambda req: {"reasoning": "r", "answer": "12"})
    seen = calls(lm)
    program = DiverseHypothesisDeliberation(integrator_prompt="compact")
    number = MESSAGE.model_copy(update={"confidence": 0.7, "confidence_note": ""})
    run(lm, lambda: [program.integrate("Q?", "a number", [number]), program.solve("Q?", "a number")])
    integrate, solve = lm.engine.requests
    assert "Think step by step" not in integrate.system and NO_SCORE_NOTE not in integrate.text
    assert integrate.field("messages").startswith("Message 1 (role: Kinematics)")
    assert "- confidence: 0.70" in integrate.field("messages")
    for request, (_, max_tokens) in zip(lm.engine.requests, seen, strict=True):  # the cap; the LM's own limit
        assert "maximum length: 800" in request.text and max_tokens == lm.kwargs["max_tokens"] == 512
    with pytest.raises(ValueError, match="unknown integrator prompt"):
        DiverseHypothesisDeliberation(integrator_prompt="verbose")
    with pytest.raises(ValueError, match="max_tokens"):
        DiverseHypothesisDeliberation(integrator_max_tokens=0)


def test_hypothesizers_state_confidence_in_words_by_default_or_as_a_number():
    lm = scripted_lm(respond({"confidence": "high", "confidence_reason": "  two  methods\nagree "}))
    seen = calls(lm)
    messages = run(lm, lambda: DiverseHypothesisDeliberation(k=2).generate("Q?", "a number")).messages
    assert [(m.confidence, m.confidence_note) for m in messages] == [(None, "high: two methods agree")] * 2
    proposal = next(schema for schema, _ in seen if "proposed_answer" in schema.get("properties", {}))
    assert set(proposal["properties"]) >= {"confidence", "confidence_reason"}
    assert "low" in str(proposal) and "medium" in str(proposal) and "high" in str(proposal)
    lm = scripted_lm(respond({"confidence": 40}))  # a percentage, read as 0.4
    program = DiverseHypothesisDeliberation(k=2, confidence="number")
    messages = run(lm, lambda: program.generate("Q?", "a number")).messages
    assert [(m.confidence, m.confidence_note) for m in messages] == [(0.4, "")] * 2
    with pytest.raises(ValueError, match="confidence format"):
        DiverseHypothesisDeliberation(confidence="stars")


def test_a_hypothesizer_whose_confidence_is_not_a_level_fails_and_is_recorded():
    lm = scripted_lm(respond({"confidence": "certain", "confidence_reason": "x"}))
    out = run(lm, lambda: GenerateProgram(DiverseHypothesisDeliberation(k=2), AnswerEvaluator(), k=2)(PROBLEM))
    assert all(m["error"] for m in out.messages) and out.proposal_method == ["hypothesizer-error"] * 2


def test_run_settings_name_the_new_defaults_and_keep_the_earlier_ones_unchanged():
    rules = AnswerEvaluator(mode="rules")
    earlier = {"temperatures": {"recruiter": 0.0, "hypothesizer": 0.7, "judge": None}, "evaluator": "rules",
               "judge_lm": None}
    assert generation_settings(DiverseHypothesisDeliberation(confidence="number"), rules) == earlier
    assert generation_settings(DiverseHypothesisDeliberation(), rules) == {**earlier, "confidence": "level"}
    made = generation_settings(DiverseHypothesisDeliberation(), rules)
    compact = replay_settings(DiverseHypothesisDeliberation(integrator_prompt="compact"), rules, earlier)
    assert compact == {"temperatures": {"recruiter": 0.0, "hypothesizer": 0.7, "integrator": 0.0, "judge": None},
                       "evaluator": "rules", "judge_lm": None}  # what replays recorded before: same run ids
    default = replay_settings(DiverseHypothesisDeliberation(), rules, made)
    assert default == {**compact, "confidence": "level", "integrator": {"prompt": "authors", "max_tokens": 4096}}
    budget = replay_settings(DiverseHypothesisDeliberation(integrator_prompt="compact", integrator_max_tokens=900),
                             rules, earlier)
    assert budget["integrator"] == {"prompt": "compact", "max_tokens": 900}
