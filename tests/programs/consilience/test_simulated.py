"""Simulated hidden-profile agents: scoring rule, determinism, action intents, common-information bias, recall."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import binomtest

from groundstate.programs.consilience.simulated import PASS_TEXT, SimAgent, SimParams, SimTeam, sim_team
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
