"""HiddenBench's protocol as its simulation script (sim.py) runs it (issue 25, item 8), one test per difference the
issue lists, each on scripted LMs whose every request is captured: the clues dealt afresh, the special agents'
extra instruction, the initial-vote reminder with its rationale, an initial vote that says nothing of a
discussion, messages kept whole, a multi-turn chat per agent, and Full-Info (the paper's: no discussion; sim.py's:
a discussion, as an option)."""

import itertools

import dspy
import pytest

from groundstate.eval.consilience.data import load_tasks
from groundstate.programs.consilience.agents import LMTeam
from groundstate.programs.consilience.hiddenbench import FIRST_SPEAKER, HIDDENBENCH_ROUNDS, HiddenBenchOptions
from groundstate.programs.consilience.protocols import HiddenProfileProtocol, default_rounds, run_discussion
from groundstate.testing import scripted_lm

FIXTURE = "tests/data/hiddenbench/hiddenbench_format.json"
LONG = ("It is the only plan that works for all of us, and here is why in some detail: " + "really " * 40 +
        "it matters. Second sentence. Third sentence! A fourth one?")


@pytest.fixture(scope="module")
def task():
    tasks, _ = load_tasks(FIXTURE)
    return next(t for t in tasks if t.n_agents == 3)


def is_vote(request) -> bool:
    return "rationale" in request.output_fields or "`rationale`" in request.system


def team(n: int, message=None):
    """One scripted LM per agent (so each agent's requests are its own): votes B with a reason naming the agent;
    messages ``m<agent>.<turn>`` followed by ``message`` (default: nothing)."""
    lms = []
    for i in range(n):
        turns = itertools.count(1)

        def respond(request, i=i, turns=turns):
            if is_vote(request):
                return {"vote": "B", "rationale": f"reason of agent {i}"}
            return {"message": f"m{i}.{next(turns)} " + (message or "")}

        lms.append(scripted_lm(respond))
    return LMTeam(lms), [lm.engine.requests for lm in lms]


def run(task, protocol="hiddenbench", adapter=None, **kwargs):
    agents, requests = team(task.n_agents, kwargs.pop("message", None))
    with dspy.context(adapter=adapter or dspy.JSONAdapter()):
        result = run_discussion(task, agents(task), protocol, threads=1, **kwargs)
    return result, requests


def roles(request) -> list[str]:
    return [m["role"] for m in request.messages]


# 1. the clue holders are dealt afresh for every discussion (and the speaking order follows) --------------------


def test_the_clues_are_dealt_afresh_and_the_speaking_order_follows(task):
    deals = set()
    for seed in range(8):
        result, requests = run(task, "hiddenbench-pre", seed=seed)
        holders = result.hiddenbench["holders"]
        assert sorted(holders) == [0, 1, 2]
        deals.add(tuple(holders))
        for i in range(3):  # agent i was given the clue of task agent holders[i], and no other
            facts = requests[i][0].field("facts")
            assert task.private[holders[i]][0] in facts
            assert not any(task.private[j][0] in facts for j in range(3) if j != holders[i])
        again, _ = run(task, "hiddenbench-pre", seed=seed)
        assert again.hiddenbench["holders"] == holders  # seeded
    assert len(deals) >= 3
    # whoever holds the first clue speaks in the first position: the first message comes from agent 0's deal
    result, requests = run(task, rounds=1, seed=1)
    first_turn = requests[0][1]
    assert task.private[result.hiddenbench["holders"][0]][0] in first_turn.field("facts")
    fixed, requests = run(task, "hiddenbench-pre", seed=1, hiddenbench=HiddenBenchOptions(fixed_holders=True))
    assert fixed.hiddenbench["holders"] == [0, 1, 2] and task.private[0][0] in requests[0][0].field("facts")


# 2. the special agents' extra instruction ---------------------------------------------------------------------


def test_special_agents_get_their_instruction_at_every_turn(task):
    extra = "Doubt whatever option the group likes best."
    options = HiddenBenchOptions(special_share=0.5, special_prompt=extra)
    result, requests = run(task, rounds=2, seed=4, hiddenbench=options)
    special = result.hiddenbench["special"]
    assert len(special) == 2  # ceil(3 * 0.5), as sim.py rounds
    for i in range(3):
        initial, turn1, turn2, final = requests[i]
        if i in special:
            assert initial.field("instruction") == extra  # sim.py: in the system prompt, so at the initial vote
            assert turn1.field("instruction") == extra and turn2.field("instruction") == extra
            assert final.field("instruction") is None and extra in final.text  # in the conversation it votes after
        else:
            assert extra not in " ".join(r.text for r in requests[i])
    assert run(task, rounds=2, seed=4, hiddenbench=options)[0].hiddenbench["special"] == special  # seeded
    assert run(task, rounds=1, seed=4)[0].hiddenbench["special"] == []  # none by default
    with pytest.raises(ValueError, match="special_prompt"):
        HiddenBenchOptions(special_share=0.3)
    with pytest.raises(ValueError, match="special_share"):
        HiddenBenchOptions(special_share=1.5, special_prompt=extra)


# 3. the initial-vote reminder carries the rationale; 4. the initial vote says nothing of a discussion -----------


def test_the_initial_vote_asks_only_for_a_decision_and_is_recalled_with_its_rationale(task):
    result, requests = run(task, rounds=2, seed=2)
    b = task.options[1]
    for i in range(3):
        initial, turn1, turn2, _ = requests[i]
        assert roles(initial) == ["system", "user"]  # no conversation yet
        assert initial.field("messages") is None and initial.field("options").startswith("A: ")
        assert "over" not in initial.text.lower() and "discussion" not in initial.user.lower()
        assert initial.field("facts") and initial.field("scenario") == task.description
        reminder = turn1.field("initial_vote")
        assert reminder == f"B: {b}. Your reason: reason of agent {i}"  # the vote *and* its rationale
        assert turn2.field("initial_vote") is None  # said once, at the first turn; it stays in the conversation
    assert result.hiddenbench["initial_rationales"] == [f"reason of agent {i}" for i in range(3)]
    assert [v.vote for v in result.initial_votes] == [b] * 3


# 5. messages are kept whole -------------------------------------------------------------------------------------


def test_messages_are_kept_whole(task):
    result, _ = run(task, rounds=1, seed=0, message=LONG)
    texts = [m.text for m in result.transcript.messages]
    assert all(t.endswith(LONG.split()[-1]) and len(t) > 300 and t.count(".") >= 3 for t in texts)
    flat, _ = run(task, rounds=1, seed=0, message=LONG, hiddenbench=HiddenBenchOptions(flat=True))
    assert all(len(m.text) <= 301 for m in flat.transcript.messages)  # groundstate's cut, on request only


# 6. a multi-turn chat per agent -----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter", [dspy.JSONAdapter, dspy.ChatAdapter])
def test_each_agent_holds_a_multi_turn_chat(task, adapter):
    result, requests = run(task, rounds=2, seed=5, adapter=adapter())
    spoken = [(m.speaker, m.text.split()[0]) for m in result.transcript.messages]
    assert spoken == [(0, "m0.1"), (1, "m1.1"), (2, "m2.1"), (0, "m0.2"), (1, "m1.2"), (2, "m2.2")]
    for i in range(3):
        initial, turn1, turn2, final = requests[i]
        assert roles(turn1) == ["system", "user"]
        assert roles(turn2) == ["system", "user", "assistant", "user"]
        assert roles(final) == ["system", "user", "assistant", "user", "assistant", "user"]
        # the first user turn opens the conversation with the scenario and the facts; later ones carry only news
        opening = turn2.messages[1]["content"]
        assert task.description in opening and turn1.field("facts") in opening
        assert turn2.field("facts") is None and turn2.field("scenario") is None
        # the agent's own earlier messages are its assistant turns, formatted as the turns they were (also in the
        # vote, whose signature is another one)
        assert f"m{i}.1" in turn2.messages[2]["content"] and "message" in turn2.messages[2]["content"]
        assert f"m{i}.2" in final.messages[4]["content"] and "vote" not in final.messages[4]["content"]
    # what each turn shows: round 1, the messages of the round so far; then the others' latest, next agent first
    shown = {(i, r): requests[i][r].field("messages") for i in range(3) for r in (1, 2)}
    assert shown[(0, 1)] == FIRST_SPEAKER
    assert shown[(1, 1)] == "Person 1: m0.1" and shown[(2, 1)] == "Person 1: m0.1\nPerson 2: m1.1"
    assert shown[(0, 2)] == "Person 2: m1.1\nPerson 3: m2.1"
    assert shown[(1, 2)] == "Person 3: m2.1\nPerson 1: m0.2"
    assert shown[(2, 2)] == "Person 1: m0.2\nPerson 2: m1.2"
    for i in range(3):  # the final vote: the last round's messages, the agent's own included
        assert requests[i][3].field("messages") == "Person 1: m0.2\nPerson 2: m1.2\nPerson 3: m2.2"


def test_a_heterogeneous_team_keeps_each_agents_lm(task):
    _, requests = run(task, rounds=1, seed=0)
    assert [len(r) for r in requests] == [3, 3, 3]  # every agent's calls reached its own LM only


# 7. full information -----------------------------------------------------------------------------------------------


def test_full_info_does_not_discuss_by_default_and_discusses_on_request(task):
    result, requests = run(task, "hiddenbench-full", seed=3)
    assert result.rounds == 0 and not result.transcript.messages
    assert [len(r) for r in requests] == [1, 1, 1]  # the initial vote only: the paper's Full-Info
    for i in range(3):
        facts = requests[i][0].field("facts")
        assert all(clue[0] in facts for clue in task.private)
    assert HiddenProfileProtocol("hiddenbench-full").rounds == 0 == default_rounds("hiddenbench-full")
    options = HiddenBenchOptions(full_discussion=True)
    assert HiddenProfileProtocol("hiddenbench-full", hiddenbench=options).rounds == HIDDENBENCH_ROUNDS == 15
    discussed, requests = run(task, "hiddenbench-full", seed=3, rounds=2, hiddenbench=options)  # sim.py's condition
    assert discussed.rounds == 2 and len(discussed.transcript.messages) == 6
    assert [len(r) for r in requests] == [4, 4, 4]
    assert all(clue[0] in requests[0][1].field("facts") for clue in task.private)
    assert discussed.initial_votes is not None and discussed.answer == task.options[1]


def test_the_chat_predictors_belong_to_the_program(task):
    program = HiddenProfileProtocol("hiddenbench", rounds=1, team=LMTeam())
    names = [name for name, _ in program.named_predictors()]
    assert "chat.turn" in names and "chat.ballot" in names
    flat = HiddenProfileProtocol("hiddenbench", rounds=1, team=LMTeam(), hiddenbench=HiddenBenchOptions(flat=True))
    assert not any(name.startswith("chat.") for name, _ in flat.named_predictors())
    assert not any(name.startswith("chat.") for name, _ in HiddenProfileProtocol("hidden-post").named_predictors())
