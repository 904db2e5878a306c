import math

import dspy
import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.evaluate import run_tasks
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.consilience import (
    Configuration,
    calibrate,
    check_config,
    explore_tasks,
    features_without,
    train_controller,
)
from groundstate.programs.consilience.consilience import Consilience, evaluate_branches, explore, proposal_scores
from groundstate.programs.consilience.control import (
    ControlContext,
    LLMController,
    RuleController,
    admissible_actions,
    build_controller,
    route,
    vote_permitted,
)
from groundstate.programs.consilience.simulated import SimParams, SimTeam
from groundstate.programs.consilience.state import LossWeights, collective_state
from groundstate.records import ACTIONS, COMM_ACTIONS, Belief, Message, Transcript
from groundstate.testing import scripted_lm

TASKS = generate_hidden_travel(40, seed=7)
TEAM = SimTeam(SimParams(), seed=0)


def belief(*probs):
    options = ["A", "B", "C", "D"][: len(probs)]
    return Belief.from_scores(options, list(probs))


# ---------------------------------------------------------------------------------------------------------
# state
# ---------------------------------------------------------------------------------------------------------


def test_state_features_hand_computed():
    task = TASKS[0].model_copy(update={"private": TASKS[0].private[:2]})
    beliefs = [belief(0.7, 0.1, 0.1, 0.1), belief(0.1, 0.7, 0.1, 0.1)]
    state = collective_state(task, beliefs, Transcript(), 0, 10)
    mean = np.array([0.4, 0.4, 0.1, 0.1])
    assert state.H == pytest.approx(-(mean * np.log(mean)).sum() / np.log(4))
    d = np.mean([jensenshannon(np.array(list(b.probs.values())), mean, base=2) ** 2 for b in beliefs])
    assert state.D == pytest.approx(d)
    assert state.R == 0 and state.G == 0 and state.C == 0 and state.P == 0
    assert state.J == pytest.approx(state.H + state.D)


def test_premature_consensus_and_weights():
    task = TASKS[0]
    agreed = [belief(0.9, 0.04, 0.03, 0.03)] * task.n_agents
    fact = task.shared[-1]  # a shared fact: redundant, no gain
    transcript = Transcript().with_message(Message(speaker=0, round=1, text=fact, words=len(fact.split()),
                                                   facts=[fact]))
    state = collective_state(task, agreed, transcript, 1, 10)
    assert state.R == 1.0 and state.G == 0.0
    assert state.P == pytest.approx(0.9)  # p* (1 - G) with p* > 0.7, G < 0.3, t < K + 2
    late = collective_state(task, agreed, transcript, len(task.options) + 2, 10)
    assert late.P == 0.0
    weighted = collective_state(task, agreed, transcript, 1, 10, LossWeights(H=0, D=0, R=2, G=1, C=0, P=3))
    assert weighted.J == pytest.approx(2 * 1.0 + 3 * 0.9)
    private_fact = next(f for f in task.private[1] if any(v != 0 for v in task.support.get(f, {}).values()))
    gain = Transcript().with_message(Message(speaker=1, round=1, text=private_fact, words=5, facts=[private_fact]))
    s = collective_state(task, agreed, gain, 1, 10)
    assert s.R == 0.0 and s.G == 1.0


def test_lexical_estimators_for_lm_transcripts():
    from groundstate.records import HiddenProfileTask

    task = HiddenProfileTask(id="lex", description="Pick a suspect.", shared=["The butler was home."],
                             private=[["The gardener owns muddy boots."], ["The cook left early."]],
                             options=["butler", "gardener"], correct="gardener")
    flat = [Belief.from_scores(["butler", "gardener"], [1, 1])] * 2
    said = "The gardener owns muddy boots."
    once = Transcript().with_message(Message(speaker=0, round=1, text=said, words=5))
    state = collective_state(task, flat, once, 1, 10)
    assert state.G == pytest.approx(1.0) and state.R == 0.0  # content words: gardener, owns, muddy, boots
    twice = once.with_message(Message(speaker=1, round=2, text=said, words=5))
    repeated = collective_state(task, flat, twice, 2, 10)
    assert repeated.R == 1.0 and repeated.G == 0.0
    mixed = Transcript().with_message(Message(speaker=1, round=1, text="The butler has muddy boots", words=5))
    partial = collective_state(task, flat, mixed, 1, 10)
    assert partial.R == pytest.approx(1 / 3) and partial.G == pytest.approx(2 / 3)  # butler old; muddy, boots new


# ---------------------------------------------------------------------------------------------------------
# routing and controllers
# ---------------------------------------------------------------------------------------------------------


def ctx_for(beliefs, spoken, admissible=ACTIONS):
    task = TASKS[0]
    return ControlContext(task, Transcript(), beliefs, spoken, list(admissible))


def test_action_conditional_routing():
    beliefs = [belief(0.3, 0.3, 0.2, 0.2), belief(0.1, 0.1, 0.1, 0.7), belief(0.3, 0.3, 0.2, 0.2)]
    ctx = ctx_for(beliefs, spoken=[2, 0, 1])
    assert route("Challenge", ctx) == 1 and route("Clarify", ctx) == 1  # most divergent
    ctx = ctx_for(beliefs, spoken=[2, 3, 1])
    assert route("SeekEvidence", ctx) == 2 and route("Route", ctx) == 2  # least participating
    assert route("Vote", ctx) is None
    assert route("Route", ctx, "most-spoken") == 1
    assert route("Route", ctx, "most-disagreeing") == 1
    assert route("Route", ctx, "random") == route("Route", ctx, "random")  # seeded
    with pytest.raises(ValueError, match="unknown router"):
        route("Route", ctx, "loudest")


def test_rule_controller_thresholds():
    task = TASKS[0]
    rules = RuleController(min_rounds=2)
    ctx = ctx_for([belief(0.25, 0.25, 0.25, 0.25)] * 3, [0, 0, 0])

    def state(**kw):
        base = dict(round=3, H=0.2, D=0.01, R=0.0, G=0.5, C=0.1, P=0.0, p_star=0.9, leader="A", J=0.0, max_rounds=10)
        from groundstate.programs.consilience.state import CollectiveState

        return CollectiveState(**{**base, **kw})

    assert rules.propose(state(), ctx) == "Vote"
    assert rules.propose(state(round=1), ctx) != "Vote"  # not before the minimum rounds
    assert rules.propose(state(P=0.5, G=0.1), ctx) == "Challenge"  # confident but weak evidence
    assert rules.propose(state(p_star=0.5, D=0.3), ctx) == "Clarify"
    assert rules.propose(state(p_star=0.5, D=0.01, R=0.8, G=0.1), ctx) == "SeekEvidence"
    assert rules.propose(state(p_star=0.5, D=0.01, R=0.0, G=0.6), ctx) == "Route"
    no_vote = ctx_for(ctx.beliefs, ctx.spoken, admissible_actions(False))
    assert rules.propose(state(), no_vote) != "Vote"
    assert task is not None


def make_state(**kw):
    from groundstate.programs.consilience.state import CollectiveState

    base = dict(round=3, H=0.2, D=0.01, R=0.0, G=0.5, C=0.1, P=0.0, p_star=0.9, leader="A", J=0.0, max_rounds=10)
    return CollectiveState(**{**base, **kw})


def test_admissible_actions():
    assert admissible_actions(False) == ["Challenge", "Clarify", "SeekEvidence", "Route"]
    assert admissible_actions(True) == ["Challenge", "Clarify", "SeekEvidence", "Route", "Vote"]
    assert admissible_actions(True, removed=["Route"]) == ["Challenge", "Clarify", "SeekEvidence", "Vote"]
    assert admissible_actions(True, removed=["Vote"]) == list(COMM_ACTIONS)
    with pytest.raises(ValueError, match="nothing is admissible"):
        admissible_actions(False, removed=list(COMM_ACTIONS))


def test_vote_is_admissible_only_where_the_termination_rule_allows_it():
    rules = RuleController()  # min_rounds 3, vote_confidence 0.7, vote_max_disagreement 0.1
    assert vote_permitted(rules, make_state(round=3))
    assert not vote_permitted(rules, make_state(round=2))  # too early for the rule controller
    assert not vote_permitted(rules, make_state(p_star=0.5))  # no strong leader
    assert not vote_permitted(rules, make_state(D=0.3))  # disagreement
    assert not vote_permitted(rules, make_state(P=0.2))  # premature consensus
    assert not vote_permitted(rules, make_state(round=5), min_vote_round=6)  # an extra bound on top
    assert not vote_permitted(RuleController(allow_vote=False), make_state())
    assert not vote_permitted(build_controller("llm"), make_state())
    llm_vote = build_controller("llm+vote")
    assert not vote_permitted(llm_vote, make_state(round=0)) and vote_permitted(llm_vote, make_state(round=1))


def test_no_executed_vote_where_the_configuration_forbids_it():
    """A rejected proposal is never replaced by a Vote before the rule controller's own vote rule allows it
    (issue 14, item 3): calibrate, deploy, and check every executed Vote's state."""
    tasks = generate_hidden_travel(160, seed=21)
    config = Configuration.of("rules", RuleController(), max_rounds=8)
    calibrator = calibrate(tasks[:100], TEAM, RuleController(), config, alpha=0.3)
    program = config.program(TEAM, RuleController(), calibrator=calibrator)
    replaced = votes = 0
    rules = RuleController()
    for out in run_tasks(program, tasks[100:]):
        for entry in out.trace:
            state = make_state(**{k: entry["state"][k] for k in ("round", "H", "D", "R", "G", "C", "P", "p_star",
                                                                    "leader", "J", "max_rounds")})
            assert ("Vote" in entry["admissible"]) == rules.permits_vote(state)
            if entry["executed"] == "Vote":
                votes += 1
                assert rules.permits_vote(state) and entry["round"] >= rules.min_rounds
            replaced += not entry["proposal_accepted"]
    assert replaced > 0 and votes > 0  # the check above was exercised both ways


def test_llm_controller_with_scripted_lm():
    lm = scripted_lm(lambda req: {"action": "Clarify" if "Clarify" in req.field("allowed") else "Route"})
    program = Consilience(TEAM, LLMController(allow_vote=True), max_rounds=2)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = program(task=TASKS[0])
    assert [e["proposal"] for e in out.trace] == ["Clarify", "Clarify"]
    seen = lm.engine.requests[0]
    assert "Agent 0:" in seen.field("beliefs") and "H=" in seen.field("state")
    assert seen.field("allowed") == "Challenge, Clarify, SeekEvidence, Route"  # Vote not yet admissible
    assert "Vote" in lm.engine.requests[1].field("allowed")
    bad = scripted_lm(lambda req: {"action": "Vote"})
    controller = LLMController(allow_vote=False)
    with dspy.context(lm=bad, adapter=dspy.JSONAdapter()):
        out = Consilience(TEAM, controller, max_rounds=1)(task=TASKS[0])
    assert out.trace[0]["proposal"] == "Challenge" and controller.fallbacks == 1


def test_llm_controller_sees_the_whole_transcript_cut_to_its_context():
    from groundstate.programs.consilience.control import fit_transcript, transcript_budget

    messages = [Message(speaker=i % 3, round=i + 1, text=f"message number {i} " + "x" * 40, words=3)
                for i in range(30)]
    transcript = Transcript(messages=messages)
    whole, dropped = fit_transcript(transcript, 100_000)
    assert dropped == 0 and whole == transcript.text() and "message number 0 " in whole  # all 30, not the last 12
    cut, dropped = fit_transcript(transcript, 600)
    kept = cut.splitlines()
    assert dropped == 30 - (len(kept) - 1) and dropped > 0
    assert kept[0] == f"(the {dropped} earliest of 30 messages are left out to fit the model's context)"
    assert kept[-1].startswith("Agent 2: message number 29") and len("\n".join(kept[1:])) <= 600
    assert fit_transcript(Transcript(), 10) == ("(no messages yet)", 0)

    class Engine:
        n_ctx = 4096

    class FakeLM:
        engine = Engine()

    assert transcript_budget(FakeLM()) == 4096 * 2 and transcript_budget(None) == 24_000
    lm = scripted_lm(lambda req: {"action": "Route"})
    controller = LLMController(max_transcript_chars=300)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        Consilience(TEAM, controller, max_rounds=6)(task=TASKS[0])
    shown = [r.field("transcript") for r in lm.engine.requests]
    assert controller.truncations >= 1 and any("earliest of" in s for s in shown)
    assert shown[0] == "(no messages yet)"


# ---------------------------------------------------------------------------------------------------------
# counterfactual branches and acceptance
# ---------------------------------------------------------------------------------------------------------


class Counting:
    """Wraps an agent and counts speak calls per transcript length (to prove nothing is resampled)."""

    def __init__(self, agent, log):
        self.agent, self.index, self.log = agent, agent.index, log
        self.is_simulated = True

    def belief(self, task, transcript, round):
        return self.agent.belief(task, transcript, round)

    def vote(self, task, transcript):
        return self.agent.vote(task, transcript)

    def speak(self, task, transcript, action, round):
        self.log.append((len(transcript.messages), action, self.index))
        return self.agent.speak(task, transcript, action, round)


def test_executed_branch_is_the_evaluated_branch():
    log = []
    program = Consilience(lambda task: [Counting(a, log) for a in TEAM(task)], RuleController(), max_rounds=5)
    out = program(task=TASKS[2])
    messages = out.transcript["messages"]
    for entry in out.trace:
        if entry["executed"] == "Vote":
            continue
        n = entry["round"]
        # one speak call per admissible communication action at this state, and no extra one afterwards
        calls = [c for c in log if c[0] == n]
        assert sorted(c[1] for c in calls) == sorted(a for a in entry["admissible"] if a != "Vote")
        assert messages[n]["text"] == entry["message"] and messages[n]["speaker"] == entry["speaker"]
        assert min(entry["regrets"].values()) == 0.0


def test_regrets_are_j_differences_and_vote_keeps_the_state():
    task = TASKS[3]
    agents = TEAM(task)
    beliefs = [a.belief(task, Transcript(), 0) for a in agents]
    state = collective_state(task, beliefs, Transcript(), 0, 10)
    branches = evaluate_branches(task, agents, Transcript(), beliefs, state, list(ACTIONS), 0, 10)
    assert branches["Vote"].state is state and branches["Vote"].speaker is None
    for action in ("Challenge", "Clarify", "SeekEvidence", "Route"):
        b = branches[action]
        assert len(b.transcript.messages) == 1 and b.transcript.messages[0].speaker == b.speaker
        assert b.state.J == pytest.approx(collective_state(task, b.beliefs, b.transcript, 1, 10).J)


def test_executed_regret_within_threshold_every_time():
    calibration, test = TASKS[:25], TASKS[25:]
    config = Configuration("rules", max_rounds=6)
    calibrator = calibrate(calibration, TEAM, RuleController(), config, alpha=0.2)
    program = Consilience(TEAM, RuleController(), calibrator=calibrator, max_rounds=6)
    rejected = 0
    for out in run_tasks(program, test):
        for entry in out.trace:
            eps = math.inf if entry["threshold"] is None else entry["threshold"]
            assert entry["regrets"][entry["executed"]] <= eps
            assert entry["certified"] == math.isfinite(eps)
            assert entry["executed"] in entry["conformal_set"]
            if not entry["proposal_accepted"]:
                rejected += 1
                assert entry["executed"] == min(entry["conformal_set"], key=lambda a: entry["regrets"][a])
    assert rejected > 0


def test_set_sampling_happens_every_round():
    """The paper's conformal-sampling ablation draws from the conformal set at every round, not only on
    rejection: with an uncertified calibrator (every action in the set) the executed action differs from an
    accepted proposal in a sizeable share of rounds, and is always in the set."""
    tasks = TASKS[:20]
    sampled = Consilience(TEAM, RuleController(), max_rounds=6, set_sampling="every-round")
    rounds = differs = 0
    for out in run_tasks(sampled, tasks):
        for entry in out.trace:
            assert entry["proposal_accepted"] and entry["executed"] in entry["conformal_set"]
            assert entry["set_sampling"] == "every-round"
            rounds += 1
            differs += entry["executed"] != entry["proposal"]
    # uniform over 4-5 actions: the executed action differs from the proposal with probability >= 3/4
    assert differs / rounds > 0.5
    plain = Consilience(TEAM, RuleController(), max_rounds=6)
    assert all(e["executed"] == e["proposal"] for out in run_tasks(plain, tasks) for e in out.trace)
    legacy = Consilience(TEAM, RuleController(), max_rounds=6, sample_from_set=True)
    assert legacy.set_sampling == "every-round"
    with pytest.raises(ValueError, match="set_sampling"):
        Consilience(TEAM, RuleController(), set_sampling="sometimes")


# ---------------------------------------------------------------------------------------------------------
# conformal calibration
# ---------------------------------------------------------------------------------------------------------


def test_threshold_formula_and_uncertified_rounds():
    scores = [0.5, 0.1, 0.3, 0.2, 0.4, 0.0, 0.6, 0.9, 0.7, 0.8]  # n = 10
    cal = RoundwiseConformal(alpha=0.2).fit([0] * 10 + [1] * 3, scores + [0.1, 0.2, 0.3])
    # k = ceil(11 * 0.8) = 9 -> the 9th smallest of round 0 is 0.8; round 1: k = ceil(4 * 0.8) = 4 > 3 -> inf
    assert cal.threshold(0) == pytest.approx(0.8)
    assert math.isinf(cal.threshold(1)) and not cal.certified(1)
    assert math.isinf(cal.threshold(7))
    again = RoundwiseConformal.from_params(cal.to_params())
    assert again.thresholds_ == cal.thresholds_ and again.counts_ == cal.counts_
    with pytest.raises(ValueError):
        RoundwiseConformal(alpha=1.5).fit([0], [0.1])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        RoundwiseConformal().threshold(0)


def test_conformal_coverage_over_many_seeds_exchangeable_scores():
    """P(Q <= threshold) >= 1 - alpha for exchangeable scores, checked over many seeded draws."""
    alpha, n_cal, n_test, seeds = 0.1, 80, 200, 200
    coverages = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        draw = lambda n, rng=rng: np.where(rng.random(n) < 0.5, 0.0, rng.exponential(1.0, n))  # noqa: E731
        cal = RoundwiseConformal(alpha).fit(np.zeros(n_cal, int), draw(n_cal))
        coverages.append(np.mean(draw(n_test) <= cal.threshold(0)))
    mean = float(np.mean(coverages))
    se = math.sqrt(alpha * (1 - alpha) * (1 / (n_test * seeds) + 1 / ((n_cal + 1) * seeds)))
    assert mean >= 1 - alpha - 3 * se
    assert mean <= 1 - alpha + 1 / (n_cal + 1) + 3 * se + 0.05  # not trivially conservative




def test_calibrator_refuses_another_configuration():
    cal = RoundwiseConformal(0.1, config=Configuration("rules").to_dict()).fit([0, 0], [0.1, 0.2])
    check_config(cal, Configuration("rules"))
    with pytest.raises(ConfigError, match="router: calibrated 'action-conditional', now 'random'"):
        check_config(cal, Configuration("rules", router="random"))


# ---------------------------------------------------------------------------------------------------------
# the MLP controller
# ---------------------------------------------------------------------------------------------------------


def test_exploration_rows_and_mlp_controller():
    from groundstate.programs.consilience.state import FEATURES, STORED_FEATURES

    rows = explore_tasks(TASKS[:10], TEAM, max_rounds=4)
    # the paper's MLP targets: one reward per communication action, no always-zero Vote column
    assert len(rows) == 40 and all(r["actions"] == list(COMM_ACTIONS) and len(r["rewards"]) == 4 for r in rows)
    assert all(len(r["features"]) == len(STORED_FEATURES) for r in rows)
    model = train_controller(rows, max_iter=300)
    assert model.features_ == list(FEATURES) == ["H", "D", "R", "G", "C", "P"] and model.n_features_in_ == 6
    assert model.actions_ == list(COMM_ACTIONS)
    assert model.predict_rewards(np.array([rows[0]["features"][:6]])).shape == (1, 4)
    controller = build_controller("mlp", model)
    out = Consilience(TEAM, controller, max_rounds=3)(task=TASKS[11])
    assert all(e["proposal"] in COMM_ACTIONS for e in out.trace)
    extended = train_controller(rows, list(STORED_FEATURES), max_iter=200)
    assert extended.n_features_in_ == 8
    reduced = features_without(["cost", "extra"])
    model2 = train_controller(rows, reduced, max_iter=200)
    assert model2.features_ == reduced and model2.n_features_in_ == len(reduced)
    with pytest.raises(ConfigError):
        features_without(["colour"])


def test_mlp_follows_sklearn_conventions_and_learns():
    from sklearn.exceptions import NotFittedError

    from groundstate.optimizers.controller import MLPActionValue

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    best = (X[:, 0] > 0).astype(int)  # action 0 is best when x0 > 0, else action 1
    Y = np.zeros((400, 4))
    Y[np.arange(400), best] = 1.0
    model = MLPActionValue(hidden_layer_sizes=(16,), max_iter=1000, random_state=0)
    with pytest.raises(NotFittedError):
        model.predict(X)
    assert model.fit(X, Y) is model
    accuracy = np.mean(model.predict_action(X) == np.array([COMM_ACTIONS[i] for i in best]))
    assert accuracy > 0.9
    again = MLPActionValue(hidden_layer_sizes=(16,), max_iter=1000, random_state=0).fit(X, Y)
    assert np.allclose(again.predict_rewards(X), model.predict_rewards(X))
    assert model.get_params()["hidden_layer_sizes"] == (16,)
    with pytest.raises(ValueError):
        MLPActionValue().fit(X, Y[:, :3])
    # rewards are standardized on the training data (appendix C.1) and predictions mapped back: a reward
    # scale of 1000 gives the same choices and 1000x the predictions (in the columns that vary; a constant
    # column is left unscaled by StandardScaler)
    scaled = MLPActionValue(hidden_layer_sizes=(16,), max_iter=1000, random_state=0).fit(X, 1000 * Y)
    assert np.array_equal(scaled.predict_action(X), model.predict_action(X))
    assert np.allclose(scaled.predict_rewards(X)[:, :2], 1000 * model.predict_rewards(X)[:, :2], rtol=1e-6,
                       atol=1e-6)
    raw = MLPActionValue(hidden_layer_sizes=(16,), max_iter=1000, random_state=0, normalize_rewards=False)
    assert not np.allclose(raw.fit(X, 1000 * Y).predict_rewards(X), scaled.predict_rewards(X))


def test_proposal_scores_extracts_the_proposals_regret():
    traces = [[{"round": 0, "proposal": "Route", "regrets": {"Route": 0.2, "Clarify": 0.0}}],
              [{"round": 0, "proposal": "Clarify", "regrets": {"Route": 0.1, "Clarify": 0.0}},
               {"round": 1, "proposal": "Route", "regrets": {"Route": 0.5}}]]
    assert proposal_scores(traces) == ([0, 0, 1], [0.2, 0.0, 0.5])


def test_explore_best_policy_runs():
    rows = explore(TASKS[5], TEAM(TASKS[5]), max_rounds=3, policy="best")
    assert [r["round"] for r in rows] == [0, 1, 2]


def test_consilience_runs_with_lm_agents():
    from groundstate.programs.consilience.agents import LMTeam

    task = TASKS[4]

    def respond(req):
        fields = req.output_fields
        if "message" in fields:
            return {"message": f"I can add that {task.private[0][0]}"}
        return None  # beliefs and votes: schema placeholders (repaired into valid beliefs)

    lm = scripted_lm(respond)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = Consilience(LMTeam(lambda i: lm), RuleController(), max_rounds=2)(task=task)
    assert len(out.trace) == 2 and out.answer in task.options
    assert out.transcript["messages"][0]["text"].startswith("I can add that")
    assert lm.engine.calls > 2 * task.n_agents  # beliefs for every branch, messages, final votes
