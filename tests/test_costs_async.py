"""Dollar cost per record (priced vs unpriced models) and acall == call for ReGround, the collaboration baselines
and the DHD integrator."""

import asyncio

import dspy
import pytest

from groundstate.eval.results import summarize
from groundstate.metering import meter_context
from groundstate.testing import scripted_lm


def _predict(lm):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context() as meter:
        dspy.Predict("question -> answer")(question="q")
        dspy.Predict("question -> answer")(question="r")
    return meter


def test_priced_model_records_litellm_cost():
    import litellm

    meter = _predict(scripted_lm(model="openai/gpt-4o-mini", input_tokens=1000, output_tokens=500))
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1000,
                                                completion_tokens=500)
    assert meter.cost_usd() == pytest.approx(2 * (prompt + completion))
    assert meter.cost_usd() > 0


def test_unpriced_model_is_none_not_zero():
    assert _predict(scripted_lm()).cost_usd() is None


def test_summary_sums_priced_records_and_counts_unpriced():
    rows = [{"id": "a", "cost_usd": 0.25}, {"id": "b", "cost_usd": 0.5}, {"id": "c", "cost_usd": None}]
    cost = summarize(rows)["cost_usd"]
    assert cost["total"] == pytest.approx(0.75) and cost["unpriced_records"] == 1
    assert summarize([{"id": "c", "cost_usd": None}])["cost_usd"]["total"] is None


def _both(program, responder=None, **kwargs):
    def run_sync():
        lm = scripted_lm(responder)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return program(**kwargs), [r.text for r in lm.engine.requests]

    async def run_async():
        lm = scripted_lm(responder)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return await program.acall(**kwargs), [r.text for r in lm.engine.requests]

    return run_sync(), asyncio.run(run_async())


AGENTS = [{"agent": i, "evidence": f"evidence {i}"} for i in range(3)]
CASE = dict(agents=AGENTS, shared_context="a shared context", question="which?", options={"A": "a", "B": "b"})


def _mixed_modes(request):
    """Agent 1 debates, the others reflect (so self-reflect runs both branches); every other call is filled."""
    if "mode" in (request.schema or {}).get("properties", {}):
        return {"mode": "debate" if request.user.startswith("[[ ## agent ## ]]\nAgent 1\n") else "reflect"}
    return None


def _programs():
    from groundstate.programs.reground.baselines import BASELINES
    from groundstate.programs.reground.reground import ReGround

    programs = {"reground": ReGround(), **{name: cls() for name, cls in BASELINES.items()},
                "standard-chain": BASELINES["standard"](rounds=1, topology="chain"),
                "standard-tree": BASELINES["standard"](rounds=1, topology="tree", ordering="shared-first"),
                "robin-2": BASELINES["robin"](rounds=2, ordering="private-first"),
                "manager-2": BASELINES["manager"](rounds=2), "instructor-4": BASELINES["instructor"](turns=4),
                "oracle-gold": BASELINES["oracle"](oracle_t1="gold")}
    return programs


@pytest.mark.parametrize("name", sorted(_programs()))
def test_acall_equals_call(name):
    program = _programs()[name]
    kwargs = dict(CASE)
    if name.startswith("oracle"):
        kwargs.update(reliable_information="the reliable information", misleading=[2])
    (sync, sync_requests), (async_, async_requests) = _both(program, _mixed_modes, **kwargs)
    assert async_requests, "the async run made no LM call"
    assert sorted(sync_requests) == sorted(async_requests)
    assert sync.toDict() == async_.toDict()
    if name == "self-reflect":
        modes = [t["output"]["mode"] for t in sync.trace["turns"] if t["step"] == "choose_mode"]
        assert {"reflect", "debate"} == set(modes)


def test_integrator_acall_equals_call():
    from groundstate.programs.dhd.deliberation import Integrator

    (sync, sync_requests), (async_, async_requests) = _both(Integrator(), problem="1+1?", answer_format="a number",
                                                            messages=[])
    assert async_requests and sync_requests == async_requests
    assert sync.toDict() == async_.toDict()


def test_runs_under_mlflow_autolog(tmp_path):
    """One trace per program call, holding every LM call (those of thread_map's workers too)."""
    mlflow = pytest.importorskip("mlflow")
    from groundstate.programs.reground.reground import ReGround

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")  # MLflow 3's file store records no spans
    mlflow.dspy.autolog()
    try:
        lm = scripted_lm()
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            assert ReGround()(**CASE).answer is not None
        mlflow.flush_trace_async_logging(terminate=False)
        traces = mlflow.search_traces(return_type="list")
    finally:
        mlflow.dspy.autolog(disable=True)
    assert len(traces) == 1
    names = [span.name for span in traces[0].data.spans]
    assert "ReGround.forward" in names and names.count("LM.__call__") == len(lm.engine.requests) > 3


# -- the LM pieces of Consilience ----------------------------------------------------------------------------
def _travel_task():
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel

    return generate_hidden_travel(2, seed=7)[1]


@pytest.mark.parametrize("vote", [None, "Z"])  # "Z" fails the options-bound signature: the retry runs too
def test_lm_agent_acall_equals_call(vote):
    from groundstate.programs.consilience.agents import LMAgent
    from groundstate.records import Message, Transcript

    task = _travel_task()
    transcript = Transcript(messages=[Message(speaker=1, action=None, round=1, text="I know something.", words=3)])

    def respond(request):
        if "message" in request.output_fields:
            return {"message": "Consider option A."}
        return {"vote": vote} if vote and "vote" in request.output_fields else None

    agent = LMAgent(0).with_presentation("shuffled", seed=3)
    (sync, sync_requests), (async_, async_requests) = _both(agent, respond, task=task, transcript=transcript)
    assert async_requests and sorted(sync_requests) == sorted(async_requests)
    assert len(sync_requests) == (2 if vote else 1)
    assert sync.toDict() == async_.toDict()

    async def pieces():
        return (await agent.abelief(task, transcript, 2), await agent.aspeak(task, transcript, "Clarify", 2))

    with dspy.context(lm=scripted_lm(respond), adapter=dspy.JSONAdapter()):
        expected = (agent.belief(task, transcript, 2), agent.speak(task, transcript, "Clarify", 2))
        assert asyncio.run(pieces()) == expected
        with pytest.raises(ValueError, match="unknown action"):
            asyncio.run(agent.aspeak(task, transcript, "Shout", 2))


def test_support_annotator_and_llm_controller_acall_equal_call():
    from groundstate.programs.consilience.annotate import SupportAnnotator
    from groundstate.programs.consilience.control import ControlContext, LLMController, admissible_actions
    from groundstate.programs.consilience.state import CollectiveState
    from groundstate.records import Belief, Transcript

    task = _travel_task()
    (sync, _), (async_, requests) = _both(SupportAnnotator(), task=task, fact=task.shared[0])
    assert requests and sync.toDict() == async_.toDict()

    state = CollectiveState(round=1, H=0.2, D=0.01, R=0.0, G=0.5, C=0.1, P=0.0, p_star=0.9, leader="A", J=0.0,
                            max_rounds=4)
    beliefs = [Belief.from_scores(task.options, [1.0] * len(task.options)) for _ in range(task.n_agents)]
    ctx = ControlContext(task, Transcript(), beliefs, [0] * task.n_agents, admissible_actions(False))
    for action in ("Route", "Vote"):  # admissible, and a fallback
        controller = LLMController()
        (sync, _), (async_, requests) = _both(controller, lambda request, a=action: {"action": a}, state=state,
                                              ctx=ctx)
        assert requests and sync.action == async_.action == ("Route" if action == "Route" else "Challenge")
        assert controller.fallbacks == (0 if action == "Route" else 2)  # one per path


@pytest.mark.parametrize("protocol", ["hidden-post", "hiddenbench", "consilience"])
def test_discussion_programs_acall_equals_call(protocol):
    from groundstate.programs.consilience.agents import LMTeam
    from groundstate.programs.consilience.consilience import Consilience
    from groundstate.programs.consilience.control import RuleController
    from groundstate.programs.consilience.protocols import HiddenProfileProtocol

    task = _travel_task()
    team = LMTeam()
    program = Consilience(team, RuleController(), max_rounds=2) if protocol == "consilience" else \
        HiddenProfileProtocol(protocol, rounds=1, team=team)

    def respond(request):
        return {"message": "I can add a fact."} if "message" in request.output_fields else None

    (sync, sync_requests), (async_, async_requests) = _both(program, respond, task=task)
    assert async_requests and sorted(sync_requests) == sorted(async_requests)
    assert sync.toDict() == async_.toDict()
