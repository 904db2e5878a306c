"""HiddenBench's own protocol: visibility, initial and final votes, fact presentation and the tie rule."""

import dspy
import pytest

from groundstate.eval.consilience.data import load_tasks
from groundstate.programs.common import plurality
from groundstate.programs.consilience.agents import LMTeam
from groundstate.programs.consilience.hiddenbench import HiddenBenchOptions
from groundstate.programs.consilience.protocols import (
    HIDDENBENCH_ROUNDS,
    HiddenProfileProtocol,
    default_rounds,
    run_discussion,
)
from groundstate.records import Belief, Message
from groundstate.testing import scripted_lm

FIXTURE = "tests/data/hiddenbench/hiddenbench_format.json"


class Recorder:
    """A scripted agent: logs every call with the messages it was shown (as (speaker, round) pairs) and
    votes as told."""

    is_simulated = True

    def __init__(self, index, log, votes=None):
        self.index, self.log, self.votes = index, log, votes or {}

    def _seen(self, transcript):
        return [(m.speaker, m.round) for m in transcript.messages]

    def belief(self, task, transcript, round):
        raise AssertionError("the reference protocols never elicit beliefs")

    def speak(self, task, transcript, action, round):
        self.log.append(("speak", self.index, round, self._seen(transcript)))
        assert action is None  # free turns only
        return Message(speaker=self.index, round=round, text=f"{self.index}@{round}", words=1)

    def vote(self, task, transcript):
        stage = "final" if any(entry[0] == "speak" for entry in self.log) else "initial"
        self.log.append((stage, self.index, None, self._seen(transcript)))
        option = self.votes.get((stage, self.index), task.options[0])
        return Belief.from_scores(task.options, [1.0 if o == option else 0.0 for o in task.options], vote=option)


def team(n, log, votes=None):
    return [Recorder(i, log, votes) for i in range(n)]


@pytest.fixture(scope="module")
def task():
    tasks, _ = load_tasks(FIXTURE)
    return next(t for t in tasks if t.n_agents == 3)


def test_defaults_follow_the_published_configuration():
    assert HIDDENBENCH_ROUNDS == 15 == default_rounds("hiddenbench")
    assert default_rounds("hidden-post") == 3 and default_rounds("hiddenbench-pre") == 0
    assert HiddenProfileProtocol("hiddenbench").rounds == 15
    assert HiddenProfileProtocol("hidden-post").rounds == 3  # groundstate's protocol is unchanged


def test_visibility_with_memory_is_everything_said_before_in_speaking_order(task):
    log = []
    result = run_discussion(task, team(3, log), "hiddenbench", rounds=2)
    speaks = [(i, r, seen) for kind, i, r, seen in log if kind == "speak"]
    assert [(i, r) for i, r, _ in speaks] == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]
    order = [(i, r) for i, r, _ in speaks]
    for position, (_, _, seen) in enumerate(speaks):
        assert seen == order[:position]  # every earlier message, in the order spoken, and nothing later
    finals = [seen for kind, _, _, seen in log if kind == "final"]
    assert finals == [order] * 3  # before the final vote everyone is shown the last round
    assert [m.text for m in result.transcript.messages] == [f"{i}@{r}" for i, r in order]
    assert result.rounds == 2 and result.protocol == "hiddenbench"


def test_visibility_without_memory_is_the_others_latest_messages(task):
    log = []
    run_discussion(task, team(3, log), "hiddenbench", rounds=3, memory=False)
    shown = {(i, r): seen for kind, i, r, seen in log if kind == "speak"}
    assert shown[(0, 1)] == [] and shown[(1, 1)] == [(0, 1)] and shown[(2, 1)] == [(0, 1), (1, 1)]
    # from round 2: the latest message of every other agent, starting with the next one in order
    assert shown[(0, 2)] == [(1, 1), (2, 1)]
    assert shown[(1, 2)] == [(2, 1), (0, 2)]
    assert shown[(2, 2)] == [(0, 2), (1, 2)]
    assert shown[(1, 3)] == [(2, 2), (0, 3)]
    finals = [seen for kind, _, _, seen in log if kind == "final"]
    assert finals == [[(0, 3), (1, 3), (2, 3)]] * 3  # the final round's messages


def test_initial_votes_come_first_and_are_hidden_pre(task):
    log = []
    votes = {("initial", 0): task.options[1], ("initial", 1): task.options[1], ("initial", 2): task.options[0],
             ("final", 0): task.correct, ("final", 1): task.correct, ("final", 2): task.options[1]}
    result = run_discussion(task, team(3, log, votes), "hiddenbench", rounds=1)
    kinds = [entry[0] for entry in log]
    assert kinds[:3] == ["initial"] * 3 and all(seen == [] for kind, *_, seen in log if kind == "initial")
    assert kinds[3:6] == ["speak"] * 3 and kinds[6:] == ["final"] * 3
    assert result.initial_answer == task.options[1] and result.answer == task.correct
    prediction = result.to_prediction()
    assert prediction.initial_answer == task.options[1] and len(prediction.initial_votes) == 3
    pre = run_discussion(task, team(3, [], votes), "hiddenbench-pre")
    assert pre.answer == task.options[1] and pre.rounds == 0 and not pre.transcript.messages


def test_full_info_gives_every_fact_and_does_not_discuss(task):
    seen = []

    class Facts(Recorder):
        def vote(self, t, transcript):
            seen.append(sorted(t.facts_of(self.index)))
            return super().vote(t, transcript)

    result = run_discussion(task, [Facts(i, []) for i in range(3)], "hiddenbench-full")
    assert all(facts == sorted(task.all_facts()) for facts in seen) and result.rounds == 0


def test_first_vote_tie_rule_ignores_confidence(task):
    a, b, c = task.options
    ballots = [Belief.from_scores(task.options, [0.2, 0.8, 0.0], vote=b),
               Belief.from_scores(task.options, [0.9, 0.1, 0.0], vote=a),
               Belief.from_scores(task.options, [0.0, 0.0, 1.0], vote=c)]
    # a three-way tie: HiddenBench takes the first vote cast (b); the Consilience rule the most confident (c)
    assert plurality(ballots, task.options, tie="first-vote") == b
    assert plurality(ballots, task.options) == c
    two = [Belief.from_scores(task.options, [0.6, 0.4, 0], vote=a)] + ballots
    assert plurality(two, task.options, tie="first-vote") == a  # counts first
    with pytest.raises(ValueError, match="tie rule"):
        plurality(ballots, task.options, tie="coin")
    votes = {("final", 0): c, ("final", 1): b, ("final", 2): a}
    result = run_discussion(task, team(3, [], votes), "hiddenbench", rounds=1)
    assert result.answer == c and result.tie == "first-vote"


FLAT = HiddenBenchOptions(flat=True, fixed_holders=True)


def test_flat_lm_agents_get_one_shuffled_numbered_fact_list_and_their_initial_vote(task):
    """groundstate's earlier presentation, kept as an option (``flat``): the chat of sim.py is the default
    (tests/programs/consilience/test_hiddenbench_chat.py)."""
    lm = scripted_lm(lambda req: {"vote": "B", "confidence": 0.6} if "vote" in req.output_fields else None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        run_discussion(task, LMTeam()(task), "hiddenbench", rounds=1, threads=1, seed=3, hiddenbench=FLAT)
    requests = lm.engine.requests
    first = requests[0]
    assert first.field("shared_facts") is None and first.field("own_facts") is None
    listed = first.field("facts").splitlines()
    assert [line.split(":", 1)[0] for line in listed] == [f"Fact {k}" for k in range(1, len(listed) + 1)]
    assert sorted(line.split(": ", 1)[1] for line in listed) == sorted(task.facts_of(0))
    speaking = [r for r in requests if "message" in r.output_fields]
    assert speaking and all(r.field("discussion").startswith("Before the discussion you voted for") for r in speaking)
    # the shuffle is seeded per agent: the same seed gives the same order, another seed (usually) another
    again = scripted_lm(lambda req: None)
    with dspy.context(lm=again, adapter=dspy.JSONAdapter()):
        run_discussion(task, LMTeam()(task), "hiddenbench-pre", threads=1, seed=3, hiddenbench=FLAT)
    assert again.engine.requests[0].field("facts") == first.field("facts")
    orders = set()
    for seed in range(6):
        other = scripted_lm(lambda req: None)
        with dspy.context(lm=other, adapter=dspy.JSONAdapter()):
            run_discussion(task, LMTeam()(task), "hiddenbench-pre", threads=1, seed=seed, hiddenbench=FLAT)
        orders.add(other.engine.requests[0].field("facts"))
    assert len(orders) > 1
    # groundstate's own protocols keep the labelled presentation
    plain = scripted_lm(lambda req: None)
    with dspy.context(lm=plain, adapter=dspy.JSONAdapter()):
        run_discussion(task, LMTeam()(task), "hidden-pre", threads=1)
    assert plain.engine.requests[0].field("facts") is None and plain.engine.requests[0].field("own_facts")


def test_bad_rounds_are_refused(task):
    with pytest.raises(ValueError, match="at least one round"):
        run_discussion(task, team(3, []), "hiddenbench", rounds=0)
    with pytest.raises(ValueError, match="rounds must be"):
        HiddenProfileProtocol("hiddenbench", rounds=-2)
