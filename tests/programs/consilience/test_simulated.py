"""Simulated hidden-profile agents: scoring rule, determinism, action intents, common-information bias, recall,
limits of integration (presets, attention, salience, weighting noise) and their command-line options."""

from __future__ import annotations

import argparse
import math
import random
import re

import numpy as np
import pytest
from scipy.stats import binomtest

from groundstate.programs.consilience.simulated import (
    PASS_TEXT,
    SIM_PRESETS,
    SimAgent,
    SimParams,
    SimTeam,
    sim_preset,
    sim_team,
)
from groundstate.programs.consilience.support import option_scores, supported_answer
from groundstate.records import HiddenProfileTask, Message, Transcript

ATTRIBUTES = ["has a direct train", "includes a museum day", "offers step-free rooms", "runs late into the night",
              "costs less than the others", "has vegetarian meals", "needs long walks", "starts very early"]


def make_task(seed: int, n_agents: int = 4, n_options: int = 4, n_shared: int = 3, n_private: int = 2,
              hidden: bool = True) -> HiddenProfileTask:
    """A hand-annotated hidden-profile task: shared facts favour a decoy, private facts mostly the correct option.

    The pooled support has a unique best option (``correct``); with ``hidden`` no agent's own facts alone
    rank it first, even in a tie.
    """
    rng = random.Random(seed)
    options = [chr(65 + k) for k in range(n_options)]
    for _ in range(1000):
        correct, decoy = rng.sample(options, 2)
        support: dict[str, dict[str, float]] = {}

        def fact(tag: str, favour: str, weight: float, support: dict = support) -> str:
            other = rng.choice([o for o in options if o != favour])
            text = f"{tag}: plan {favour} {rng.choice(ATTRIBUTES)} and plan {other} does not."
            support[text] = {favour: weight, **({other: -1.0} if rng.random() < 0.3 else {})}
            return text

        shared = [fact(f"Public note {j}", decoy, rng.choice([1.0, 2.0])) for j in range(n_shared)]
        private = [[fact(f"Traveller {i} note {j}", correct if rng.random() < 0.8 else rng.choice(options),
                         rng.choice([1.0, 2.0])) for j in range(n_private)] for i in range(n_agents)]
        task = HiddenProfileTask(id=f"sim-{seed}", description="Choose a trip plan for the group.", shared=shared,
                                 private=private, options=options, correct=correct, support=support)
        pooled = option_scores(task)
        if sorted(pooled.values())[-1] == sorted(pooled.values())[-2] or max(pooled, key=pooled.get) != correct:
            continue
        if hidden:
            alone = [option_scores(task, task.facts_of(i)) for i in range(n_agents)]
            if any(max(a.values()) == a[correct] for a in alone):
                continue
        return task
    raise RuntimeError("could not build a task")


def lower_bound(successes: int, n: int) -> float:
    return binomtest(successes, n).proportion_ci(method="wilson").low


def upper_bound(successes: int, n: int) -> float:
    return binomtest(successes, n).proportion_ci(method="wilson").high


def group_leader(task: HiddenProfileTask, transcript: Transcript, beta: float) -> str:
    """Independent re-implementation of the leader: the highest mean noiseless softmax belief over agents."""
    heard = {f for m in transcript.messages for f in m.facts}
    means = np.zeros(len(task.options))
    for i in range(task.n_agents):
        known = set(task.facts_of(i)) | heard
        scores = np.array([sum(task.support.get(f, {}).get(o, 0.0) for f in known) for o in task.options])
        e = np.exp(beta * scores - (beta * scores).max())
        means += e / e.sum()
    return task.options[int(np.argmax(means))]


def stated(messages: list[Message]) -> Transcript:
    return Transcript(messages=messages)


# ---------------------------------------------------------------------------------------------------------
# Scoring rule and the validator's answer
# ---------------------------------------------------------------------------------------------------------


def test_belief_follows_the_documented_softmax_of_summed_support():
    task = make_task(1)
    agent = SimAgent(2, SimParams(beta=0.7, noise=0.0))
    scores = option_scores(task, task.facts_of(2))
    logits = np.array([0.7 * scores[o] for o in task.options])
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    belief = agent.belief(task, Transcript(), 0)
    assert list(belief.probs) == task.options
    assert np.allclose([belief.probs[o] for o in task.options], expected)
    assert belief.vote == task.options[int(np.argmax(expected))]
    assert belief.confidence == pytest.approx(expected.max())
    # facts heard on the transcript count like own facts
    heard = task.private[0][0]
    after = agent.belief(task, stated([Message(speaker=0, round=1, text=heard, facts=[heard])]), 1)
    scores2 = option_scores(task, [*task.facts_of(2), heard])
    logits2 = np.array([0.7 * scores2[o] for o in task.options])
    assert np.allclose([after.probs[o] for o in task.options], np.exp(logits2) / np.exp(logits2).sum())


def test_beta_zero_gives_uniform_beliefs():
    task = make_task(2)
    belief = SimAgent(0, SimParams(beta=0.0, noise=0.0)).belief(task, Transcript(), 0)
    assert all(p == pytest.approx(0.25) for p in belief.probs.values())
    assert belief.vote == task.options[0]


def test_all_facts_known_noiseless_plurality_is_the_validators_answer():
    from groundstate.programs.consilience.protocols import run_discussion

    for seed in range(150):
        task = make_task(seed, n_agents=3 + seed % 2, n_options=2 + seed % 3)
        assert supported_answer(task) == task.correct
        result = run_discussion(task, sim_team(task.n_agents, SimParams(noise=0.0), seed), "full-info")
        assert result.answer == task.correct, task.id
        assert result.vote_accuracy == 1.0


def test_all_facts_known_small_noise_plurality_is_the_validators_answer_in_aggregate():
    from groundstate.programs.consilience.protocols import run_discussion

    n, hits, votes, good = 300, 0, 0, 0
    for seed in range(n):
        task = make_task(seed)
        result = run_discussion(task, sim_team(4, SimParams(noise=0.3), seed), "full-info")
        hits += result.answer == supported_answer(task)
        votes += len(result.votes)
        good += sum(v.vote == supported_answer(task) for v in result.votes)
    assert lower_bound(hits, n) > 0.9
    assert lower_bound(good, votes) > 0.85


def test_hidden_profile_tasks_defeat_agents_voting_alone():
    """On hidden-profile tasks no agent's own facts point to the answer, so noiseless Hidden-Pre always fails."""
    from groundstate.programs.consilience.protocols import run_discussion

    for seed in range(50):
        task = make_task(seed)
        assert not run_discussion(task, sim_team(4, SimParams(noise=0.0)), "hidden-pre").correct


# ---------------------------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------------------------


def test_same_state_and_action_give_the_same_message_and_belief():
    task = make_task(3)
    params = SimParams(noise=0.8, recall=0.6, facts_per_message=2)
    transcript = Transcript()
    for r in range(1, 3):
        for i in range(4):
            transcript = transcript.with_message(SimAgent(i, params, seed=11).speak(task, transcript, None, r))
    for action in (None, "Challenge", "Clarify", "SeekEvidence", "Route"):
        for i in range(4):
            first = SimAgent(i, params, seed=11)
            again = SimAgent(i, params, seed=11)
            assert first.speak(task, transcript, action, 3) == again.speak(task, transcript, action, 3)
            assert first.speak(task, transcript, action, 3) == first.speak(task, transcript, action, 3)
    for i in range(4):
        twin = SimAgent(i, params, 11)
        assert SimAgent(i, params, 11).belief(task, transcript, 3) == twin.belief(task, transcript, 3)
        assert SimAgent(i, params, 11).vote(task, transcript) == SimAgent(i, params, 11).vote(task, transcript)


def test_seed_and_state_change_the_draws_but_noise_zero_is_deterministic():
    tasks = [make_task(s) for s in range(30)]
    noisy = SimParams(noise=1.0)
    differ = sum(SimAgent(0, noisy, 1).belief(t, Transcript(), 0) != SimAgent(0, noisy, 2).belief(t, Transcript(), 0)
                 for t in tasks)
    assert differ == len(tasks)
    by_round = sum(SimAgent(0, noisy, 1).belief(t, Transcript(), 0) != SimAgent(0, noisy, 1).belief(t, Transcript(), 1)
                   for t in tasks)
    assert by_round == len(tasks)
    quiet = SimParams(noise=0.0)
    for t in tasks:
        assert SimAgent(0, quiet, 1).belief(t, Transcript(), 0) == SimAgent(0, quiet, 99).belief(t, Transcript(), 5)


def test_a_copy_of_the_task_with_other_facts_is_not_confused_with_the_original():
    task = make_task(4)
    copy = task.model_copy(update={"private": [list(task.private[1])] * 4})
    agent = SimAgent(0, SimParams(noise=0.0, recall=1.0))
    message = agent.speak(task, Transcript(), "SeekEvidence", 1)
    assert message.facts[0] in task.private[0]
    assert agent.speak(copy, Transcript(), "SeekEvidence", 1).facts[0] in task.private[1]


# ---------------------------------------------------------------------------------------------------------
# Action intents
# ---------------------------------------------------------------------------------------------------------


def spread(task: HiddenProfileTask, fact: str) -> float:
    values = [task.support.get(fact, {}).get(o, 0.0) for o in task.options]
    return max(values) - min(values)


def test_seek_evidence_states_one_unshared_discriminative_fact():
    params = SimParams(recall=1.0, facts_per_message=2)
    for seed in range(40):
        task = make_task(seed)
        for i in range(4):
            message = SimAgent(i, params).speak(task, Transcript(), "SeekEvidence", 1)
            assert len(message.facts) == 1 and message.facts[0] in task.private[i]
            assert spread(task, message.facts[0]) == max(spread(task, f) for f in task.private[i])
            # once that fact is on the transcript, the next one comes out
            transcript = stated([message])
            nxt = SimAgent(i, params).speak(task, transcript, "SeekEvidence", 1)
            assert nxt.facts and nxt.facts[0] in task.private[i] and nxt.facts[0] != message.facts[0]
            # all private facts said: a shared fact not yet stated is next; nothing left: a pass
            transcript = stated([Message(speaker=i, round=1, text="x", facts=list(task.private[i]))])
            assert SimAgent(i, params).speak(task, transcript, "SeekEvidence", 2).facts[0] in task.shared
            everything = stated([Message(speaker=i, round=1, text="x", facts=task.facts_of(i))])
            passed = SimAgent(i, params).speak(task, everything, "SeekEvidence", 2)
            assert passed.facts == [] and passed.text == PASS_TEXT


def test_route_states_up_to_facts_per_message_unshared_facts():
    task = make_task(5, n_private=3)
    for fpm in (1, 2):
        message = SimAgent(1, SimParams(recall=1.0, facts_per_message=fpm)).speak(task, Transcript(), "Route", 1)
        assert len(message.facts) == fpm and set(message.facts) <= set(task.private[1])
        assert message.words == sum(len(f.split()) for f in message.facts)
        assert message.text == " ".join(message.facts)
        assert message.action == "Route" and message.speaker == 1 and message.round == 1


def test_challenge_states_a_fact_against_the_group_leader():
    params = SimParams(recall=1.0, beta=0.8)
    checked = 0
    for seed in range(40):
        task = make_task(seed)
        transcript = stated([Message(speaker=0, round=1, text=f, facts=[f]) for f in task.shared[:2]])
        leader = group_leader(task, transcript, params.beta)
        heard = {f for m in transcript.messages for f in m.facts}
        for i in range(4):
            known = set(task.facts_of(i)) | heard

            def against(fact: str, task=task, leader=leader) -> float:
                row = {o: task.support.get(fact, {}).get(o, 0.0) for o in task.options}
                return max(v for o, v in row.items() if o != leader) - row[leader]

            message = SimAgent(i, params).speak(task, transcript, "Challenge", 1)
            if any(against(f) > 0 for f in known):
                checked += 1
                assert message.facts and all(against(f) > 0 for f in message.facts)
                unstated = [f for f in known if against(f) > 0 and f not in heard]
                if unstated:
                    assert message.facts[0] in unstated
            else:
                assert message.facts == [] and message.text == PASS_TEXT
    assert checked > 50


def test_clarify_states_a_fact_favouring_the_speakers_divergent_option():
    params = SimParams(recall=1.0, beta=0.8, noise=0.0)
    checked = agreed = 0
    for seed in range(80):
        task = make_task(seed, hidden=False)  # some agents then start out of line with the group
        transcript = stated([Message(speaker=0, round=1, text=task.shared[0], facts=[task.shared[0]])])
        leader = group_leader(task, transcript, params.beta)
        for i in range(4):
            agent = SimAgent(i, params)
            belief = agent.belief(task, transcript, 1)
            mine = belief.vote
            message = agent.speak(task, transcript, "Clarify", 1)
            if mine == leader:  # no divergence: it explains its edge over its own runner-up
                other = sorted(task.options, key=lambda o: (-belief.probs[o], task.options.index(o)))[1]
                agreed += 1
            else:
                other = leader
                checked += 1
                assert message.facts
            for fact in message.facts:
                row = task.support.get(fact, {})
                assert row.get(mine, 0.0) > row.get(other, 0.0)
    assert checked > 20 and agreed > 20


def test_unknown_action_is_rejected():
    with pytest.raises(ValueError, match="unknown action 'Shout'"):
        SimAgent(0).speak(make_task(0), Transcript(), "Shout", 1)


# ---------------------------------------------------------------------------------------------------------
# Common-information bias and recall
# ---------------------------------------------------------------------------------------------------------


def shared_share(bias: float, n: int = 300) -> tuple[int, int]:
    shared = 0
    for seed in range(n):
        task = make_task(seed % 60)
        message = SimAgent(seed % 4, SimParams(recall=1.0, shared_bias=bias), seed).speak(task, Transcript(), None, 1)
        shared += message.facts[0] in task.shared
    return shared, n


def test_common_information_bias_on_free_turns():
    # 3 shared and 2 private facts per agent: without bias 60% of first messages would state a shared fact
    high, n = shared_share(50.0)
    low, _ = shared_share(0.02)
    even, _ = shared_share(1.0)
    assert lower_bound(high, n) > 0.9
    assert upper_bound(low, n) < 0.1
    assert upper_bound(low, n) < lower_bound(even, n) and upper_bound(even, n) < lower_bound(high, n)


def test_free_turns_never_repeat_what_is_already_on_the_transcript():
    task = make_task(6)
    team = sim_team(4, SimParams(recall=1.0))
    transcript = Transcript()
    for r in range(1, 6):
        for agent in team:
            transcript = transcript.with_message(agent.speak(task, transcript, None, r))
    said = [f for m in transcript.messages for f in m.facts]
    assert len(said) == len(set(said)) == len(task.all_facts())
    assert transcript.messages[-1].text == PASS_TEXT


def test_recall_zero_means_nothing_new_is_said():
    from groundstate.programs.consilience.protocols import run_discussion

    params = SimParams(recall=0.0, noise=0.0)
    for seed in range(20):
        task = make_task(seed)
        for action in (None, "Challenge", "Clarify", "SeekEvidence", "Route"):
            message = SimAgent(seed % 4, params).speak(task, Transcript(), action, 1)
            assert message.facts == [] and message.text == PASS_TEXT and message.words == len(PASS_TEXT.split())
        post = run_discussion(task, sim_team(4, params), "hidden-post", rounds=2)
        pre = run_discussion(task, sim_team(4, params), "hidden-pre")
        assert [v.vote for v in post.votes] == [v.vote for v in pre.votes]
        assert post.words == 8 * len(PASS_TEXT.split())


def test_partial_recall_states_fewer_facts():
    def facts_said(recall: float) -> int:
        total = 0
        for seed in range(60):
            task = make_task(seed)
            for i in range(4):
                agent = SimAgent(i, SimParams(recall=recall), seed)
                total += len(agent.speak(task, Transcript(), "SeekEvidence", 1).facts)
        return total

    # one fact is said unless none of the agent's 2 private and 3 shared facts comes to mind: 1 - 0.7**5 at 0.3
    assert facts_said(1.0) == 240
    assert 240 * 0.7 < facts_said(0.3) < 240


# ---------------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------------


def test_a_task_without_support_is_a_clear_error():
    task = make_task(0).model_copy(update={"support": {}, "id": "plain-7"})
    with pytest.raises(ValueError, match="task 'plain-7'.*per-fact support; annotate the task or use LM agents"):
        SimAgent(0).belief(task, Transcript(), 0)


def test_support_for_an_unknown_option_is_a_clear_error():
    task = make_task(0)
    bad = task.model_copy(update={"support": {task.shared[0]: {"Z": 1.0}}})
    with pytest.raises(ValueError, match="names 'Z', which is not an option"):
        SimAgent(0).belief(bad, Transcript(), 0)


def test_unannotated_facts_support_nothing_and_unknown_transcript_facts_are_ignored():
    task = make_task(0)
    partial = task.model_copy(update={"support": {task.private[0][0]: task.support[task.private[0][0]]}})
    belief = SimAgent(1, SimParams(noise=0.0)).belief(partial, Transcript(), 0)
    assert all(p == pytest.approx(0.25) for p in belief.probs.values())
    foreign = stated([Message(speaker=2, round=1, text="made up", facts=["a fact no task has"])])
    assert SimAgent(1, SimParams(noise=0.0)).belief(task, foreign, 1).probs == \
        SimAgent(1, SimParams(noise=0.0)).belief(task, Transcript(), 1).probs


@pytest.mark.parametrize("field,value", [("beta", -1.0), ("noise", math.nan), ("recall", 1.5), ("shared_bias", 0.0),
                                         ("facts_per_message", 0), ("facts_per_message", 1.5)])
def test_bad_params_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"SimParams.{field}"):
        SimParams(**{field: value})


def test_agent_index_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        SimAgent(7).belief(make_task(0), Transcript(), 0)


def test_team_builds_one_agent_per_task_agent():
    team = SimTeam(SimParams(noise=0.0), seed=3)
    agents = team(make_task(0, n_agents=3))
    assert [a.index for a in agents] == [0, 1, 2] and all(a.seed == 3 for a in agents)


# ---------------------------------------------------------------------------------------------------------
# Limits of integration: the ideal preset is the behaviour from before the limits existed
# ---------------------------------------------------------------------------------------------------------

REG_SHARED = ["Plan A has the cheapest flights.", "Plan A is in a sunny town.", "Plan C has a late checkout."]
REG_PRIVATE = [["Plan B has step-free rooms.", "Plan A needs long walks."],
               ["Plan B offers vegetarian meals.", "Plan C is near the station."],
               ["Plan B runs a museum day.", "Plan A has noisy rooms."]]
REG_SUPPORT = {REG_SHARED[0]: {"A": 2.0}, REG_SHARED[1]: {"A": 1.0, "C": -1.0}, REG_SHARED[2]: {"C": 1.0},
               REG_PRIVATE[0][0]: {"B": 2.0}, REG_PRIVATE[0][1]: {"A": -1.0},
               REG_PRIVATE[1][0]: {"B": 1.5, "C": -0.5}, REG_PRIVATE[1][1]: {"C": 1.0},
               REG_PRIVATE[2][0]: {"B": 2.0}, REG_PRIVATE[2][1]: {"A": -2.0, "B": 0.5}}
REG_ACTIONS = ["Challenge", "Clarify", "SeekEvidence", "Route", None, "Clarify", "Challenge"]


def regression_task() -> HiddenProfileTask:
    return HiddenProfileTask(id="regression-1", description="Pick a plan.", shared=REG_SHARED, private=REG_PRIVATE,
                             options=["A", "B", "C"], correct="B", support=REG_SUPPORT)


def behaviour(params: SimParams, seed: int) -> dict:
    """Votes, confidences and stated facts of agents driven directly (no protocol code): votes alone, two
    round-robin rounds then votes, votes on a copy where everyone holds every fact, and a run of actions with
    everyone's belief before each message."""
    task = regression_task()
    agents = [SimAgent(i, params, seed) for i in range(3)]

    def votes(view: HiddenProfileTask, transcript: Transcript) -> list:
        return [(b.vote, b.confidence) for b in (a.vote(view, transcript) for a in agents)]

    transcript = Transcript()
    for r in (1, 2):
        for agent in agents:
            transcript = transcript.with_message(agent.speak(task, transcript, None, r))
    pooled = [f for facts in REG_PRIVATE for f in facts]
    everything = task.model_copy(update={"private": [list(pooled) for _ in range(3)]})
    out = {"alone": votes(task, Transcript()), "round-robin": (votes(task, transcript),
                                                                [m.facts for m in transcript.messages]),
           "everything": votes(everything, Transcript())}
    steps, transcript = [], Transcript()
    for step, action in enumerate(REG_ACTIONS):
        beliefs = [(b.vote, b.confidence) for b in (a.belief(task, transcript, step) for a in agents)]
        message = agents[step % 3].speak(task, transcript, action, step + 1)
        steps.append((beliefs, message.facts))
        transcript = transcript.with_message(message)
    out["actions"] = (steps, votes(task, transcript))
    return out


# computed with the simulated agents as they were before the limits of integration were added
EXPECTED_DEFAULT = {
    "alone": [("A", 0.4698210203738926), ("A", 0.6517326255052361), ("B", 0.8084539019749284)],
    "round-robin": ([("B", 0.9618264049210862), ("B", 0.7210210339549987), ("B", 0.900524321000148)],
                    [["Plan A has the cheapest flights."], ["Plan C is near the station."],
                     ["Plan A is in a sunny town."], ["Plan C has a late checkout."],
                     ["Plan B offers vegetarian meals."], ["Plan A has noisy rooms."]]),
    "everything": [("B", 0.9837711052647565), ("B", 0.9842088615177701), ("B", 0.9946603161716617)],
    "actions": ([([("A", 0.5077044374696994), ("A", 0.6987781051832438), ("B", 0.6454447585937524)],
                  ["Plan C has a late checkout."]),
                 ([("A", 0.5243092634199001), ("A", 0.7173001430883039), ("B", 0.7957817952511838)],
                  ["Plan A has the cheapest flights."]),
                 ([("B", 0.4992078195912016), ("A", 0.5038272985627497), ("B", 0.8790441741133103)],
                  ["Plan B runs a museum day."]),
                 ([("B", 0.7644475940975357), ("A", 0.6025586559436447), ("B", 0.7630185271879876)],
                  ["Plan A needs long walks."]),
                 ([("B", 0.8587199811206535), ("B", 0.9451840069554824), ("B", 0.8159091909103291)],
                  ["Plan C is near the station."]),
                 ([("B", 0.804226818344032), ("B", 0.9094199637255426), ("B", 0.6469381197876319)],
                  ["Plan A is in a sunny town."]),
                 ([("B", 0.9197192282552258), ("B", 0.9226621262262089), ("B", 0.6564826922065635)],
                  ["Plan A has the cheapest flights."])],
                [("B", 0.7306857751099366), ("B", 0.8690483094681216), ("B", 0.5125172174793104)]),
}
EXPECTED_NOISY = {
    "alone": [("A", 0.5167986528764655), ("C", 0.3603297967862072), ("B", 0.8514454116275788)],
    "round-robin": ([("A", 0.623870452727583), ("A", 0.6944312138577826), ("B", 0.9794395850174531)],
                    [["Plan B has step-free rooms.", "Plan A needs long walks."],
                     ["Plan C is near the station.", "Plan C has a late checkout."],
                     ["Plan A is in a sunny town.", "Plan A has the cheapest flights."], [],
                     ["Plan B offers vegetarian meals."], []]),
    "everything": [("B", 0.961278526486075), ("B", 0.9514745217770435), ("B", 0.9842816866184321)],
    "actions": ([([("B", 0.5561967491036985), ("A", 0.5870877010524117), ("A", 0.5830658338347771)],
                  ["Plan C has a late checkout."]),
                 ([("B", 0.5428217738831159), ("A", 0.9285262818309618), ("B", 0.5354341912467269)],
                  ["Plan B offers vegetarian meals."]),
                 ([("A", 0.5811588989453248), ("A", 0.7151149944928712), ("B", 0.9652696832392067)],
                  ["Plan B runs a museum day."]),
                 ([("B", 0.731905704612765), ("B", 0.8805274683226747), ("B", 0.706857396953569)],
                  ["Plan A is in a sunny town."]),
                 ([("B", 0.8549700084452573), ("A", 0.6398637788642284), ("B", 0.5185706887198301)],
                  ["Plan C is near the station."]),
                 ([("B", 0.8801530903231122), ("B", 0.8015089870681728), ("B", 0.5916436181223187)],
                  ["Plan A has noisy rooms.", "Plan B runs a museum day."]),
                 ([("B", 0.9409818027048407), ("B", 0.5472129292881628), ("B", 0.8195779447029291)],
                  ["Plan A has the cheapest flights.", "Plan A is in a sunny town."])],
                [("B", 0.9663816165835795), ("B", 0.6768795768524596), ("B", 0.6615875938246494)]),
}
NOISY = {"noise": 0.9, "recall": 0.6, "facts_per_message": 2, "beta": 0.7, "shared_bias": 3.0}


def assert_same_behaviour(got, expected):
    """Equal structure, facts and votes; confidences equal up to 1e-12 (the literals were written on one platform,
    and another libm may round the last bit of exp/log/cos differently)."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    elif isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_same_behaviour(g, e)
    elif isinstance(expected, dict):
        assert set(got) == set(expected)
        for key in expected:
            assert_same_behaviour(got[key], expected[key])
    else:
        assert got == expected


@pytest.mark.parametrize("params,seed,expected", [
    (SimParams(), 0, EXPECTED_DEFAULT),
    (sim_preset("ideal"), 0, EXPECTED_DEFAULT),
    (SimParams(**NOISY), 7, EXPECTED_NOISY),
    (sim_preset("ideal", **NOISY), 7, EXPECTED_NOISY),
])
def test_the_ideal_preset_behaves_exactly_as_before_the_limits(params, seed, expected):
    assert params.integrates_fully
    assert_same_behaviour(behaviour(params, seed), expected)


# ---------------------------------------------------------------------------------------------------------
# Limits of integration: presets, validation, each limit's definition
# ---------------------------------------------------------------------------------------------------------


def test_presets_and_overrides():
    assert set(SIM_PRESETS) == {"ideal", "limited"}
    assert SIM_PRESETS["ideal"] == SimParams() and sim_preset("ideal") == SimParams()
    limited = sim_preset("limited")
    assert limited == SIM_PRESETS["limited"] and not limited.integrates_fully
    assert limited.attention is not None and limited.salience > 0 and limited.weight_noise > 0
    assert (limited.beta, limited.noise, limited.recall) == (SimParams().beta, SimParams().noise, SimParams().recall)
    tuned = sim_preset("limited", attention=None, beta=2.0)
    assert tuned.attention is None and tuned.beta == 2.0 and tuned.weight_noise == limited.weight_noise
    assert sim_preset("limited") == limited  # overrides never change the preset itself
    with pytest.raises(TypeError):
        SIM_PRESETS["ideal"] = SimParams(beta=3.0)  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown simulated-agent preset 'sharp'; choose from ideal, limited"):
        sim_preset("sharp")
    with pytest.raises(ValueError, match="unknown SimParams field.*attentoin"):
        sim_preset("ideal", attentoin=3)
    with pytest.raises(ValueError, match="SimParams.attention must be an integer >= 1"):
        sim_preset("limited", attention=0)


@pytest.mark.parametrize("field,value", [("attention", 0), ("attention", -2), ("attention", 2.5), ("attention", True),
                                         ("attention", "3"), ("salience", -0.1), ("salience", math.inf),
                                         ("salience", "1"), ("recency", 1.5), ("recency", -0.1),
                                         ("recency", math.nan), ("weight_noise", -0.5), ("weight_noise", math.inf)])
def test_bad_limits_are_rejected(field, value):
    with pytest.raises(ValueError, match=rf"SimParams\.{field} must be .*, got {re.escape(repr(value))}"):
        SimParams(**{field: value})


def test_limits_at_their_neutral_values_equal_the_ideal_agents():
    """attention above the number of facts, any recency without salience, all give the ideal beliefs (up to the
    rounding of a different summation order)."""
    for seed in range(20):
        task = make_task(seed)
        transcript = stated([Message(speaker=1, round=1, text=f, facts=[f]) for f in task.private[1]])
        for i in range(4):
            ideal = SimAgent(i, SimParams(), seed).belief(task, transcript, 1)
            for params in (SimParams(attention=100), SimParams(recency=0.3), SimParams(attention=100, recency=0.0)):
                other = SimAgent(i, params, seed).belief(task, transcript, 1)
                assert other.vote == ideal.vote
                assert [other.probs[o] for o in task.options] == pytest.approx([ideal.probs[o] for o in task.options])


def softmax_of(task: HiddenProfileTask, weights: dict[str, float], beta: float = 1.0) -> list[float]:
    """Noiseless belief from ``{fact: weight}``, computed independently of the module."""
    scores = np.array([sum(w * task.support.get(f, {}).get(o, 0.0) for f, w in weights.items())
                       for o in task.options])
    e = np.exp(beta * scores - (beta * scores).max())
    return list(e / e.sum())


def probs(belief) -> list[float]:
    return list(belief.probs.values())


def test_attention_one_keeps_only_the_most_recently_mentioned_informative_fact():
    task = make_task(3)
    params = SimParams(attention=1, noise=0.0)
    a, b = task.private[0][0], task.private[2][1]
    unannotated = "A remark that supports no plan."
    agent = SimAgent(1, params, 5)
    said = [Message(speaker=0, round=1, text=a, facts=[a]), Message(speaker=2, round=1, text=b, facts=[b])]
    assert probs(agent.belief(task, stated(said), 1)) == pytest.approx(softmax_of(task, {b: 1.0}))
    # restating a fact makes it the most recent again; a fact that supports nothing takes no place
    again = [*said, Message(speaker=3, round=2, text=a, facts=[a])]
    assert probs(agent.belief(task, stated(again), 2)) == pytest.approx(softmax_of(task, {a: 1.0}))
    padded = task.model_copy(update={"shared": [*task.shared, unannotated]})
    tail = [*said, Message(speaker=3, round=2, text=unannotated, facts=[unannotated])]
    assert probs(agent.belief(padded, stated(tail), 2)) == pytest.approx(softmax_of(task, {b: 1.0}))
    # within one message, the first fact listed is the more salient
    both = [Message(speaker=0, round=1, text=f"{a} {b}", facts=[a, b])]
    assert probs(agent.belief(task, stated(both), 1)) == pytest.approx(softmax_of(task, {a: 1.0}))


def test_attention_prefers_own_private_facts_to_shared_ones_in_a_fixed_seeded_order():
    picked = {0: 0, 1: 0}
    for seed in range(60):
        task = make_task(seed % 10)
        agent = SimAgent(seed % 4, SimParams(attention=1, noise=0.0), seed)
        mine = task.private[seed % 4]
        # with room for two, both private facts and no shared one (shared facts support the decoy)
        two = SimAgent(seed % 4, SimParams(attention=2, noise=0.0), seed).belief(task, Transcript(), 0)
        assert probs(two) == pytest.approx(softmax_of(task, {f: 1.0 for f in mine}))
        alone = probs(agent.belief(task, Transcript(), 0))
        hits = [k for k, f in enumerate(mine) if np.allclose(alone, softmax_of(task, {f: 1.0}))]
        assert hits, task.id
        picked[hits[0]] += 1
        # the choice is fixed: the same at another round, after an uninformative message, and for a twin agent
        noise = stated([Message(speaker=0, round=1, text="x", facts=["a fact no task has"])])
        assert probs(agent.belief(task, noise, 4)) == alone
        assert probs(SimAgent(seed % 4, SimParams(attention=1, noise=0.0), seed).vote(task, Transcript())) == alone
    assert min(picked.values()) >= 10  # the seeded tie-break picks either fact (P(< 10 of 60) is about 1e-7)


def test_salience_weighs_spoken_facts_by_how_recently_they_were_said():
    task = make_task(8)
    s, r = 1.5, 0.5
    agent = SimAgent(0, SimParams(salience=s, recency=r, noise=0.0, beta=0.8))
    f1, f2, f3 = task.private[1][0], task.private[2][0], task.private[3][1]
    said = [Message(speaker=1, round=1, text=f1, facts=[f1]), Message(speaker=2, round=1, text=f2, facts=[f2]),
            Message(speaker=3, round=1, text=f3, facts=[f3]), Message(speaker=2, round=2, text=f1, facts=[f1])]
    weights = {f: 1.0 for f in task.facts_of(0)}
    weights.update({f1: 1 + s * r ** 0, f2: 1 + s * r ** 2, f3: 1 + s * r ** 1})
    assert probs(agent.belief(task, stated(said), 2)) == pytest.approx(softmax_of(task, weights, beta=0.8))
    # an own fact that is said out loud gains the boost too
    own = task.private[0][0]
    weights2 = {**{f: 1.0 for f in task.facts_of(0)}, own: 1 + s}
    spoken = stated([Message(speaker=0, round=1, text=own, facts=[own])])
    assert probs(agent.belief(task, spoken, 1)) == pytest.approx(softmax_of(task, weights2, beta=0.8))
    # recency 0: only the last message's facts are boosted; recency 1: every spoken fact equally
    flat = SimAgent(0, SimParams(salience=s, recency=1.0, noise=0.0, beta=0.8)).belief(task, stated(said), 2)
    assert probs(flat) == pytest.approx(softmax_of(task, {**weights, f1: 1 + s, f2: 1 + s, f3: 1 + s}, beta=0.8))
    last = SimAgent(0, SimParams(salience=s, recency=0.0, noise=0.0, beta=0.8)).belief(task, stated(said), 2)
    assert probs(last) == pytest.approx(softmax_of(task, {**weights, f1: 1 + s, f2: 1.0, f3: 1.0}, beta=0.8))


def single_fact_task(n: int, text: str) -> HiddenProfileTask:
    """Two agents; agent 0 holds one fact that supports A by 1, so log(p_A / p_B) is its weighting factor."""
    return HiddenProfileTask(id=f"one-fact-{n}", description="Pick.", shared=[], private=[[text], ["Nothing."]],
                             options=["A", "B"], correct="A", support={text: {"A": 1.0}})


def weighting_factor(task: HiddenProfileTask, params: SimParams, seed: int = 0,
                     transcript: Transcript | None = None, round: int = 0) -> float:
    belief = SimAgent(0, params, seed).belief(task, transcript or Transcript(), round)
    return math.log(belief.probs["A"] / belief.probs["B"])


def test_weight_noise_is_a_median_one_lognormal_factor_fixed_per_agent_task_and_fact():
    sigma = 0.6
    params = SimParams(weight_noise=sigma, noise=0.0)
    tasks = [single_fact_task(n, f"Plan A has feature {n}.") for n in range(400)]
    logs = np.array([math.log(weighting_factor(t, params)) for t in tasks]) / sigma
    # z = log(factor) / sigma should be standard normal: mean within 4 standard errors, sd within ~4 of its own
    assert abs(logs.mean()) < 4 / math.sqrt(len(logs))
    assert abs(logs.std(ddof=1) - 1.0) < 4 / math.sqrt(2 * len(logs))
    task = tasks[0]
    first = weighting_factor(task, params)
    assert first != pytest.approx(1.0)
    # stable across calls, rounds, transcripts and twin agents; another seed draws another factor
    chatter = stated([Message(speaker=1, round=1, text="Nothing.", facts=["Nothing."])])
    assert weighting_factor(task, params, transcript=chatter, round=3) == first
    assert weighting_factor(task, params) == first
    assert weighting_factor(task, params, seed=1) != first
    # the same fact text in a copy of the task (as the full-info protocol builds) keeps its factor
    copy = task.model_copy(update={"private": [[task.private[0][0]], [task.private[0][0], "Nothing."]]})
    assert weighting_factor(copy, params) == first
    assert weighting_factor(task, SimParams(noise=0.0)) == pytest.approx(1.0)


def test_weight_noise_changes_beliefs_but_every_draw_is_reproducible():
    params = SimParams(weight_noise=0.5)
    changed = 0
    for seed in range(30):
        task = make_task(seed)
        plain, noisy = SimAgent(1, SimParams(), seed), SimAgent(1, params, seed)
        changed += plain.belief(task, Transcript(), 0) != noisy.belief(task, Transcript(), 0)
        assert noisy.belief(task, Transcript(), 0) == SimAgent(1, params, seed).belief(task, Transcript(), 0)
    assert changed == 30


CROSS_PROCESS = """
from groundstate.programs.consilience.simulated import SimAgent, sim_preset
from groundstate.records import HiddenProfileTask, Message, Transcript
task = HiddenProfileTask(id="xproc", description="Pick.", shared=["S one.", "S two."],
                         private=[["P a.", "P b."], ["P c.", "P d."]], options=["A", "B", "C"], correct="B",
                         support={"S one.": {"A": 1.0}, "S two.": {"C": 0.5}, "P a.": {"B": 2.0},
                                  "P b.": {"A": -1.0, "B": 1.0}, "P c.": {"B": 1.0}, "P d.": {"C": 1.5}})
params = sim_preset("limited", attention=2)
t = Transcript(messages=[Message(speaker=1, round=1, text="P d.", facts=["P d."])])
out = [SimAgent(i, params, 3).belief(task, t, 1).probs for i in range(2)]
out.append(SimAgent(0, params, 3).speak(task, t, "Clarify", 1).facts)
print(repr(out))
"""


def test_limited_agents_are_reproducible_in_another_process():
    """The same beliefs and message in this process and in two others with different string-hash salts."""
    import contextlib
    import io
    import os
    import subprocess
    import sys

    def elsewhere(hash_seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        return subprocess.run([sys.executable, "-c", CROSS_PROCESS], capture_output=True, text=True, env=env,
                              check=True).stdout

    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(CROSS_PROCESS, {})  # the same snippet, in this process
    assert "probs" not in here.getvalue() and here.getvalue().startswith("[{")
    assert elsewhere("12345") == elsewhere("999") == here.getvalue()


def test_limits_shape_beliefs_not_what_agents_say():
    """Free turns, SeekEvidence, Route and Challenge draw on all of an agent's facts whatever the limits (Clarify
    argues from the agent's own, limited, belief)."""
    limited = sim_preset("limited", attention=1)
    for seed in range(20):
        task = make_task(seed)
        transcript = stated([Message(speaker=0, round=1, text=f, facts=[f]) for f in task.shared[:2]])
        for action in (None, "SeekEvidence", "Route", "Challenge"):
            for i in range(4):
                assert SimAgent(i, limited, seed).speak(task, transcript, action, 2) == \
                    SimAgent(i, SimParams(), seed).speak(task, transcript, action, 2)


def test_limited_agents_keep_the_determinism_contract():
    params = sim_preset("limited")
    task = make_task(11)
    transcript = Transcript()
    for r in (1, 2):
        for i in range(4):
            transcript = transcript.with_message(SimAgent(i, params, 2).speak(task, transcript, None, r))
    for action in (None, "Challenge", "Clarify", "SeekEvidence", "Route"):
        for i in range(4):
            assert SimAgent(i, params, 2).speak(task, transcript, action, 3) == \
                SimAgent(i, params, 2).speak(task, transcript, action, 3)
            twin = SimAgent(i, params, 2)
            assert SimAgent(i, params, 2).belief(task, transcript, 3) == twin.belief(task, transcript, 3)
    # a counterfactual branch does not disturb the agent: the same belief before and after exploring it
    agent = SimAgent(0, params, 2)
    before = agent.belief(task, transcript, 3)
    agent.belief(task, transcript.with_message(agent.speak(task, transcript, "Challenge", 3)), 4)
    assert agent.belief(task, transcript, 3) == before


def test_the_limited_preset_makes_full_information_imperfect_on_generated_travel_tasks():
    """Perfect integrators get nearly every generated travel task right with every fact in hand; the limited
    preset must bite. 100 tasks: the Wilson upper bound of full-info accuracy below 0.95 (the measured
    accuracy is about 0.5), and paired with the ideal agents it loses tasks it never gains."""
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.programs.consilience.protocols import run_discussion

    tasks = generate_hidden_travel(100, seed=103)
    team = SimTeam(sim_preset("limited"), seed=0)
    ideal = SimTeam(sim_preset("ideal"), seed=0)
    limited_hits = [run_discussion(t, team(t), "full-info").correct for t in tasks]
    ideal_hits = [run_discussion(t, ideal(t), "full-info").correct for t in tasks]
    assert upper_bound(sum(limited_hits), len(tasks)) < 0.95
    lost = sum(i and not lim for i, lim in zip(ideal_hits, limited_hits, strict=True))
    gained = sum(lim and not i for i, lim in zip(ideal_hits, limited_hits, strict=True))
    assert binomtest(lost, lost + gained, alternative="greater").pvalue < 0.001


# ---------------------------------------------------------------------------------------------------------
# Command-line options
# ---------------------------------------------------------------------------------------------------------


def cli_params(argv: list[str]) -> SimParams:
    from groundstate.cli.options import Parser, add_agent_options, sim_params

    parser = Parser(prog="groundstate hidden run")
    add_agent_options(parser)
    return sim_params(parser.parse_args(argv))


def test_cli_options_resolve_to_the_preset_with_explicit_overrides():
    assert cli_params([]) == SimParams()
    assert cli_params(["--sim-preset", "ideal"]) == SimParams()
    assert cli_params(["--sim-preset", "limited"]) == SIM_PRESETS["limited"]
    assert cli_params(["--sim-beta", "0.5", "--sim-noise", "0", "--sim-recall", "1", "--sim-shared-bias", "3",
                       "--sim-facts-per-message", "2"]) == SimParams(beta=0.5, noise=0.0, recall=1.0,
                                                                     shared_bias=3.0, facts_per_message=2)
    assert cli_params(["--sim-attention", "5", "--sim-salience", "0.25", "--sim-recency", "0.5",
                       "--sim-weight-noise", "0.1"]) == SimParams(attention=5, salience=0.25, recency=0.5,
                                                                  weight_noise=0.1)
    assert cli_params(["--sim-preset", "limited", "--sim-attention", "all", "--sim-noise", "0"]) == \
        sim_preset("limited", attention=None, noise=0.0)
    assert cli_params(["--sim-preset", "limited", "--sim-weight-noise", "0"]).weight_noise == 0.0


@pytest.mark.parametrize("argv,message", [
    (["--sim-attention", "0"], "argument --sim-attention: expected a whole number of at least 1 or 'all'"),
    (["--sim-weight-noise", "-1"], "argument --sim-weight-noise: expected a number of at least 0"),
    (["--sim-preset", "limited", "--sim-recency", "2"], "argument --sim-recency: expected a share from 0 to 1"),
    (["--sim-salience", "nan"], "argument --sim-salience: expected a number of at least 0"),
])
def test_cli_rejects_bad_limits_with_the_option_name(argv, message, capsys):
    """Out-of-range simulation parameters are refused when the options are parsed (one line, exit 2)."""
    with pytest.raises(SystemExit) as exc:
        cli_params(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1


def test_out_of_range_parameters_from_python_are_one_config_line():
    """The same limits hold for parameters that do not come from the command line (SimParams' own checks)."""
    from groundstate.cli.options import sim_params
    from groundstate.errors import ConfigError

    args = argparse.Namespace(sim_preset="limited", sim_recency=2.0)
    with pytest.raises(ConfigError, match=re.escape("--sim-recency must be between 0 and 1")):
        sim_params(args)


@pytest.mark.parametrize("argv", [["--sim-attention", "three"], ["--sim-preset", "sharp"]])
def test_cli_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_params(argv)
    assert exc.value.code == 2
    assert "--sim-" in capsys.readouterr().err
