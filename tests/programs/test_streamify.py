"""``dspy.streamify`` works on every shipped program (issue 26, item 7): wrapped as DSPy wraps a synchronous
program (on an AnyIO worker thread) and as an async one (``acall``), each program of the registry streams its LM
output and ends with a Prediction equal to the direct call's, with the same LM requests.

What this caught: the fan-outs on ``thread_map`` ran on plain threads, from which DSPy cannot hand a chunk to the
stream (every such LM call failed); programs without ``aforward`` could not be streamed as async programs; the
LLM controller returned a bare string, which streamify never delivers (the stream waited forever); and the
scripted LM's async stream was not an async iterator.
"""

from __future__ import annotations

import asyncio

import dspy
import pytest

from groundstate.registry import BUILTIN, resolve
from groundstate.testing import scripted_lm

AGENTS = [{"agent": i, "evidence": f"evidence {i}"} for i in range(3)]
CASE = dict(agents=AGENTS, shared_context="a shared context", question="which?", options={"A": "a", "B": "b"})
PROBLEM = dict(problem="What is 1+1?", answer_format="a number")


def _controller_inputs() -> dict:
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.programs.consilience.control import ControlContext, admissible_actions
    from groundstate.programs.consilience.state import CollectiveState
    from groundstate.records import Belief, Transcript

    task = generate_hidden_travel(2, seed=7)[1]
    state = CollectiveState(round=1, H=0.2, D=0.01, R=0.0, G=0.5, C=0.1, P=0.0, p_star=0.9, leader="A", J=0.0,
                            max_rounds=4)
    beliefs = [Belief.from_scores(task.options, [1.0] * len(task.options)) for _ in range(task.n_agents)]
    return dict(state=state, ctx=ControlContext(task, Transcript(), beliefs, [0] * task.n_agents,
                                                admissible_actions(False)))


#: Each registered program: (build arguments, inputs). A program added to the registry must be added here.
CASES = {
    "QuestionAnswering": ({}, lambda: dict(question="why?")),
    "ReGround": ({}, lambda: CASE),
    "Verify": ({}, lambda: dict(agents=AGENTS)),
    "Reconstruct": ({}, lambda: dict(shared_context="a. b. c.", trusted_statements=["x", "y"])),
    "Resolve": ({}, lambda: dict(state="s", question="q?", options={"A": "a", "B": "b"})),
    "VerifyStatements": ({}, lambda: dict(agents=AGENTS)),
    "Oracle": ({}, lambda: dict(CASE, reliable_information="reliable", misleading=[2])),
    "StandardCollaboration": ({}, lambda: CASE),
    "Confidence": ({}, lambda: CASE),
    "Voting": ({}, lambda: CASE),
    "Robin": ({}, lambda: CASE),
    "Manager": ({}, lambda: CASE),
    "Instructor": ({}, lambda: CASE),
    "SelfReflect": ({}, lambda: CASE),
    "Recruiter": ({}, lambda: dict(PROBLEM, k=3)),
    "Hypothesizer": ({}, lambda: dict(PROBLEM, role="a careful mathematician")),
    "Integrator": ({}, lambda: dict(PROBLEM, messages=[])),
    "IndependentSolver": ({}, lambda: PROBLEM),
    "DiverseHypothesisDeliberation": ({"k": 2}, lambda: PROBLEM),
    "AnswerEvaluator": ({"mode": "judge"}, lambda: dict(candidate="2", gold="2", question="What is 1+1?")),
    "LLMController": ({}, _controller_inputs),
}
PROGRAMS = sorted(path for path, kind in BUILTIN.items() if kind == "program")


def test_every_registered_program_has_a_case():
    assert sorted(path.split(":")[1] for path in PROGRAMS) == sorted(CASES)


async def _stream(program, is_async: bool, kwargs: dict) -> tuple[dspy.Prediction | None, list]:
    final, chunks = None, []
    async for value in dspy.streamify(program, is_async_program=is_async)(**kwargs):
        if isinstance(value, dspy.Prediction):
            final = value
        else:
            chunks.append(value)
    return final, chunks


def _run(make, kwargs: dict, streamed: bool, is_async: bool = False):
    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        if not streamed:
            return make()(**kwargs), [], lm.engine.requests
        final, chunks = asyncio.run(asyncio.wait_for(_stream(make(), is_async, kwargs), 120))
    return final, chunks, lm.engine.requests


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.split(":")[1])
def test_streamify_ends_with_the_direct_calls_prediction(path, is_async):
    cls = resolve(path, "program")
    arguments, inputs = CASES[cls.__name__]
    kwargs = inputs()
    direct, _, direct_requests = _run(lambda: cls(**arguments), kwargs, streamed=False)
    final, chunks, requests = _run(lambda: cls(**arguments), kwargs, streamed=True, is_async=is_async)
    assert isinstance(direct, dspy.Prediction) and isinstance(final, dspy.Prediction)
    assert final.toDict() == direct.toDict()
    assert requests and sorted(r.text for r in requests) == sorted(r.text for r in direct_requests)
    assert len(chunks) >= len(requests)  # every LM call, those on fan-out threads too, reached the stream


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_streamify_runs_consilience_with_lm_agents_and_the_llm_controller(is_async):
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.programs.consilience.agents import LMTeam
    from groundstate.programs.consilience.consilience import Consilience
    from groundstate.programs.consilience.control import LLMController

    task = generate_hidden_travel(2, seed=7)[1]

    def make():
        return Consilience(LMTeam(), LLMController(allow_vote=True), max_rounds=2)

    direct, _, direct_requests = _run(make, dict(task=task), streamed=False)
    final, chunks, requests = _run(make, dict(task=task), streamed=True, is_async=is_async)
    assert final.toDict() == direct.toDict() and len(requests) == len(direct_requests) and chunks


def test_thread_map_workers_stream_under_an_anyio_worker_thread():
    """The fan-out's workers are AnyIO threads while the caller streams, plain pool threads otherwise."""
    from groundstate.concurrency import in_anyio_worker, thread_map

    seen = []

    class FanOut(dspy.Module):
        def __init__(self):
            super().__init__()
            self.answer = dspy.Predict("question -> answer")

        def forward(self, n: int):
            answers = thread_map(lambda i: (seen.append(in_anyio_worker()), self.answer(question=f"q{i}"))[1],
                                 range(n), max_workers=3)
            return dspy.Prediction(answers=[a.answer for a in answers])

    final, chunks, requests = _run(FanOut, dict(n=5), streamed=True)
    assert len(requests) == 5 and len(final.answers) == 5 and len(chunks) >= 5
    assert seen == [True] * 5
    seen.clear()
    _run(FanOut, dict(n=5), streamed=False)
    assert seen == [False] * 5


def test_thread_map_under_streaming_raises_the_first_failure_in_item_order():
    from groundstate.concurrency import thread_map

    def fail_on_odd(i: int) -> int:
        if i % 2:
            raise ValueError(f"item {i}")
        return i

    class Failing(dspy.Module):
        def forward(self):
            return dspy.Prediction(values=thread_map(fail_on_odd, range(6), max_workers=3))

    with dspy.context(lm=scripted_lm()), pytest.raises(ValueError, match="item 1"):
        asyncio.run(_stream(Failing(), False, {}))
