import dspy
import pytest

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.metrics import gepa_metric, offquery_metric, parse_metric

INSTANCE = generate("healthcare", "main", 1, seed=0)[0]
EXAMPLE = INSTANCE.to_example()
GOOD_FACTS = [f.text for f in INSTANCE.t2_facts if f.label == 1]
BAD_FACTS = [f.text for f in INSTANCE.t2_facts if f.label == 0]


def pred(agent, state, answer):
    return dspy.Prediction(misleading_agent=agent, state=state, answer=answer)


def test_parse_metric_specs():
    assert parse_metric("t1+t2+t3") == {"t1": 1.0, "t2": 1.0, "t3": 1.0}
    assert parse_metric("0.5*t1 + 2*t3") == {"t1": 0.5, "t3": 2.0}
    for bad in ("t4", "t1+accuracy", "2*", "0*t1"):
        with pytest.raises(ConfigError):
            parse_metric(bad)


def test_weighted_metric_is_the_normalized_weighted_mean():
    wrong = "A" if INSTANCE.answer != "A" else "B"
    perfect_t1 = pred(INSTANCE.misleading[0], " ".join(GOOD_FACTS), wrong)
    metric = offquery_metric("3*t1+t3")
    assert metric(EXAMPLE, perfect_t1) == pytest.approx(0.75)
    assert offquery_metric("t2")(EXAMPLE, perfect_t1) == pytest.approx(1.0)
    assert metric(EXAMPLE, None) == 0.0


def test_gepa_feedback_names_the_mistakes():
    liar = INSTANCE.misleading[0]
    other = (liar + 1) % INSTANCE.n_agents
    wrong = INSTANCE.wrong_answer
    out = gepa_metric("t1+t2+t3")(EXAMPLE, pred(other, " ".join(BAD_FACTS), wrong), None, "resolve.choose", None)
    assert isinstance(out, dspy.Prediction) and out.score == pytest.approx(0.0)
    fb = out.feedback
    assert fb.startswith("T3 wrong")  # a resolve predictor sees its own task first
    assert f"blamed {INSTANCE.agent_label(other)} instead of {INSTANCE.agent_label(liar)}" in fb
    assert "dropped reliable facts" in fb and GOOD_FACTS[0] in fb
    assert "misleading facts survived" in fb and BAD_FACTS[0] in fb
    assert f"chose {wrong}" in fb and f"instead of {INSTANCE.answer}" in fb
    good = gepa_metric("t1")(EXAMPLE, pred(liar, "", INSTANCE.answer), None, "verify.detect", None)
    assert good.score == 1.0 and good.feedback.startswith("T1 correct")
