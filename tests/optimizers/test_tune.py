import dspy
import pytest

from groundstate.errors import ConfigError, OptimizationFailed
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.metrics import offquery_metric
from groundstate.eval.reground.optimize import examples_for
from groundstate.optimizers.tune import Budget, gepa_feedback_metric, state_hash, tune
from groundstate.programs.reground.oracle import Oracle
from groundstate.programs.reground.reground import ReGround
from groundstate.testing import scripted_lm


def oracle_inputs(instance):
    easy = "EASY " if instance.provenance["index"] % 3 == 0 else ""
    return {**instance.inputs("unreliable"), "reliable_information": easy + instance.reliable_information(),
            "misleading": list(instance.misleading)}


class Learner:
    """Answers correctly when the case is marked EASY, when it has been shown demos, or when its instruction
    has been rewritten to contain NEW INSTRUCTION; otherwise it answers wrong."""

    def __init__(self, instances):
        self.gold = {x.reliable_information()[:80]: x.answer for x in instances}
        self.gold.update({x.shared_context[:60]: x.answer for x in instances})

    def lookup(self, text):
        for key, answer in self.gold.items():
            if key[:60] in text:
                return answer
        return None

    def __call__(self, req):
        fields = req.output_fields
        if "answer" in fields and "reason" in fields:
            gold = self.lookup(req.user) or "A"
            knows = ("EASY" in req.user or len(req.messages) > 2 or "NEW INSTRUCTION" in req.system)
            wrong = "B" if gold != "B" else "C"
            return {"answer": gold if knows else wrong, "reason": "because"}
        if "proposed_instruction" in fields:
            return {"proposed_instruction": "Use the NEW INSTRUCTION and choose the option all findings support."}
        if "state" in fields:
            return {"state": "STATE " + (req.field("verified_facts") or "")}
        if "facts" in fields:
            return {"facts": [req.field("context")]}
        if "verdict" in fields:
            return {"verdict": "supported", "importance": "high"}
        return None  # placeholders for everything else


def reflect(req):
    """A reflection LM that proposes an instruction containing the marker the Learner responds to."""
    text = "Use the NEW INSTRUCTION and weigh every finding."
    return {field: text for field in req.output_fields} if req.output_fields else f"```\n{text}\n```"


def make_data(n=9, seed=0):
    instances = generate("healthcare", "main", n, seed=seed)
    return instances, examples_for(instances, oracle_inputs)


def test_bootstrap_changes_the_program_and_train_metric_does_not_drop():
    instances, examples = make_data()
    lm = scripted_lm(Learner(instances))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        result = tune(Oracle(), examples, metric=offquery_metric("t3"), optimizer="bootstrap",
                      budget=Budget(max_bootstrapped_demos=2), progress=False)
    assert len(result.program.decide.demos) == 2
    before, after = result.scores["train"]["before"], result.scores["train"]["after"]
    assert before == pytest.approx(3 / 9) and after == pytest.approx(1.0)
    assert result.lm_calls >= 9 + 9 and result.input_tokens > 0
    assert result.settings["optimizer"] == "bootstrap" and result.settings["metric"] == "t3"


def test_stage_wise_tuning_touches_only_the_trainable_predictors():
    instances = generate("healthcare", "main", 6, seed=1)
    marked = [x.model_copy(update={"corrupted_context": ("EASY " if i % 2 == 0 else "") + x.corrupted_context})
              for i, x in enumerate(instances)]
    examples = examples_for(marked, lambda x: x.inputs("unreliable"))
    lm = scripted_lm(Learner(marked))
    program = ReGround(max_candidates=1)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        result = tune(program, examples, metric=offquery_metric("t3"), optimizer="bootstrap", trainable=["resolve.*"],
                      budget=Budget(max_bootstrapped_demos=1), progress=False)
    states = {name: p.dump_state() for name, p in result.program.named_predictors()}
    assert len(states) == 11  # nothing is left frozen or hidden afterwards
    assert states["resolve.choose"]["demos"]
    for name, state in states.items():
        if name != "resolve.choose":
            assert state["demos"] == [], name
    assert result.settings["trainable"] == ["resolve.choose"]
    assert result.scores["train"]["after"] >= result.scores["train"]["before"]
    assert all(not p.demos for _, p in program.named_predictors())  # the input program is unchanged


def test_random_search_mipro_and_gepa_run_within_budget():
    instances, examples = make_data(12, seed=2)
    train, val = examples[:8], examples[8:]
    for optimizer, budget in (("random-search", Budget(num_candidate_programs=2, max_bootstrapped_demos=1)),
                              ("mipro", Budget(num_candidates=2, num_trials=2, max_bootstrapped_demos=1)),
                              ("gepa", Budget(max_metric_calls=40))):
        lm = scripted_lm(Learner(instances))
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            result = tune(Oracle(), train, val, metric=offquery_metric("t3"), optimizer=optimizer, budget=budget,
                          reflection_lm=scripted_lm(reflect),
                          progress=False)
        instructions = result.program.decide.signature.instructions
        if optimizer == "gepa":  # GEPA rewrites instructions only
            assert "NEW INSTRUCTION" in instructions
        else:
            assert result.program.decide.demos or "NEW INSTRUCTION" in instructions, optimizer
        assert result.scores["val"]["after"] >= result.scores["val"]["before"], optimizer
        assert result.lm_calls > 0


def test_bad_configurations_are_refused():
    _, examples = make_data(3)
    with pytest.raises(ConfigError, match="unknown metric 't4'"):
        tune(Oracle(), examples, metric=offquery_metric("t1+t4"))
    with pytest.raises(ConfigError, match="needs a validation set"):
        tune(Oracle(), examples, optimizer="mipro")
    with pytest.raises(ConfigError, match="max-metric-calls > 0"):
        tune(Oracle(), examples, examples, optimizer="gepa", budget=Budget(max_metric_calls=0))
    with pytest.raises(ConfigError, match="zero demos"):
        tune(Oracle(), examples, optimizer="bootstrap", budget=Budget(max_bootstrapped_demos=0))
    with pytest.raises(ConfigError, match="unknown optimizer"):
        tune(Oracle(), examples, optimizer="simba")
    with pytest.raises(ConfigError, match="matches no predictor"):
        tune(Oracle(), examples, trainable=["verify.*"])


def test_no_configured_lm_is_one_config_error():
    _, examples = make_data(3)
    assert dspy.settings.lm is None
    with pytest.raises(ConfigError, match="no LM is configured"):
        tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False)


def test_gepa_refuses_a_reflection_lm_that_fails_its_probe():
    instances, examples = make_data(6)
    lm = scripted_lm(Learner(instances))
    dead = scripted_lm(lambda req: ConnectionError("connection refused"))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        with pytest.raises(ConfigError, match="reflection LM failed a probe call"):
            tune(Oracle(), examples[:4], examples[4:], metric=offquery_metric("t3"), optimizer="gepa",
                 budget=Budget(max_metric_calls=20), reflection_lm=dead, progress=False)
    assert lm.engine.calls == 0  # refused before any program call


def test_a_high_share_of_failed_metric_calls_stops_tuning():
    instances, examples = make_data(9)
    learner = Learner(instances)
    failing = [x.shared_context[:60] for x in instances[:6]]  # six of the nine instances always fail

    def flaky_answer(req):
        return TimeoutError("timed out") if any(key in req.user for key in failing) else learner(req)

    flaky = scripted_lm(flaky_answer)
    with dspy.context(lm=flaky, adapter=dspy.JSONAdapter()):
        with pytest.raises(OptimizationFailed, match=r"6 of 9 metric calls failed .*max-failed-share 0.5"):
            tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False)
        # the same failures under a looser threshold are tolerated and reported
        result = tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False, max_failed_share=0.9)
    assert 0.5 < result.failed_share <= 0.9


def test_a_result_equal_to_the_start_is_flagged_unchanged():
    instances, examples = make_data(6)
    hopeless = scripted_lm(lambda req: {"answer": "Z", "reason": "no"} if "answer" in req.output_fields else None)
    with dspy.context(lm=hopeless, adapter=dspy.JSONAdapter()):
        result = tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False)
    assert result.unchanged and not result.program.decide.demos
    with dspy.context(lm=scripted_lm(Learner(instances)), adapter=dspy.JSONAdapter()):
        changed = tune(Oracle(), examples, metric=offquery_metric("t3"), progress=False)
    assert not changed.unchanged and state_hash(changed.program) != state_hash(Oracle())


def test_gepa_with_an_exported_or_a_plain_metric_calls_it_with_gepas_arguments(caplog):
    import groundstate as gs

    instances, examples = make_data(12, seed=2)
    train, val = examples[:8], examples[8:]
    seen = []

    def plain(example, prediction, trace=None):  # a user's metric: three arguments, a bare score
        seen.append(trace)
        return gs.t3_metric(example, prediction, trace)

    for metric in (gs.t3_metric, plain):
        with dspy.context(lm=scripted_lm(Learner(instances)), adapter=dspy.JSONAdapter()):
            result = tune(Oracle(), train, val, metric=metric, optimizer="gepa", budget=Budget(max_metric_calls=40),
                          reflection_lm=scripted_lm(reflect), progress=False)
        assert not result.unchanged and result.failed_share == 0.0
        assert "NEW INSTRUCTION" in result.program.decide.signature.instructions
    assert "TypeError" not in caplog.text and seen
    feedback = gepa_feedback_metric(gs.t3_metric.feedback)
    out = feedback(val[0], dspy.Prediction(answer="Z"), None, "decide.predict", [])
    assert out.score == 0.0 and "T3 wrong" in out.feedback  # the text `--optimizer gepa` gives, not a bare score
    wrapped = gepa_feedback_metric(plain)(val[0], dspy.Prediction(answer="Z"), None, "decide.predict", [])
    assert wrapped.score == 0.0 and "score of 0" in wrapped.feedback


def test_a_metric_failing_as_the_optimizer_calls_it_stops_tuning_in_one_line():
    instances, examples = make_data(9)

    def always_fails(example, prediction, trace=None):
        raise KeyError("gold_answer")

    def fails_under_the_optimizer(example, prediction, trace=None):  # dspy.Evaluate passes no trace
        if trace is not None:
            raise KeyError("gold_answer")
        return offquery_metric("t3")(example, prediction, trace)

    def feedback_fails(gold, pred, trace=None, pred_name=None, pred_trace=None):
        raise ValueError("no feedback")

    cases = [(always_fails, {}, "scoring the starting program"),
             (fails_under_the_optimizer, {}, "optimizing: 6 of 6 of its own metric calls failed"),
             (offquery_metric("t3"), {"optimizer": "gepa", "feedback_metric": feedback_fails,
                                      "budget": Budget(max_metric_calls=30)}, "optimizing")]
    for metric, options, where in cases:
        with dspy.context(lm=scripted_lm(Learner(instances)), adapter=dspy.JSONAdapter()):
            with pytest.raises(OptimizationFailed) as info:
                tune(Oracle(), examples[:6], examples[6:], metric=metric, progress=False,
                     reflection_lm=scripted_lm(reflect), **options)
        message = str(info.value)
        assert where in message and "the metric raised" in message and "\n" not in message, message


def test_a_miprov2_preset_runs_mipro_with_its_own_counts(monkeypatch):
    instances, examples = make_data(8, seed=3)
    seen = []
    real = dspy.MIPROv2

    class Spy(real):
        def compile(self, student, **kwargs):
            seen.append((self.auto, self.num_candidates, kwargs.get("num_trials")))
            return super().compile(student, **kwargs)

    monkeypatch.setattr(dspy, "MIPROv2", Spy)
    with dspy.context(lm=scripted_lm(Learner(instances)), adapter=dspy.JSONAdapter()):
        result = tune(Oracle(), examples[:5], examples[5:], metric=offquery_metric("t3"), optimizer="mipro",
                      budget=Budget(auto="light", max_bootstrapped_demos=1), progress=False)
    assert seen == [("light", None, None)] and result.settings["budget"]["auto"] == "light"
    with pytest.raises(ConfigError, match="not both"):
        Budget(auto="light", num_trials=4)
    with pytest.raises(ConfigError, match="unknown MIPROv2 preset"):
        Budget(auto="extreme")
    with pytest.raises(ConfigError, match="is MIPROv2's"):
        tune(Oracle(), examples, examples, metric=offquery_metric("t3"), optimizer="gepa", budget=Budget(auto="heavy"))
    assert Budget().num_candidates == 3 and Budget().num_trials == 6  # the explicit defaults are unchanged
