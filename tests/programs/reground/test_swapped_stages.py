"""A stage swapped for the user's own module runs under ``acall`` too (issue 26, item 4): a module with only
``forward`` runs on a worker thread (``dspy.asyncify``) with the caller's DSPy context."""

import asyncio
import threading

import dspy

from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.programs.reground.reground import ReGround
from groundstate.testing import scripted_lm


class PickOption(dspy.Signature):
    """Pick the option the information supports."""

    information: str = dspy.InputField()
    answer: str = dspy.OutputField()


class MyResolve(dspy.Module):
    """A user's stage 3: only ``forward``, one LM call through its own predictor, and where it ran."""

    def __init__(self):
        super().__init__()
        self.pick = dspy.Predict(PickOption)
        self.threads = []

    def forward(self, state, question, options):
        self.threads.append(threading.get_ident())
        out = self.pick(information=state)
        return dspy.Prediction(answer=out.answer, reason="mine")


class MyRegenerate(dspy.Module):
    """A user's predictor inside stage 2, without ``aforward``: writes the state itself."""

    def forward(self, verified_facts, trusted_statements):
        return dspy.Prediction(state="USER STATE " + verified_facts)


def answer_d(req):
    return {"answer": "D"} if "Pick the option" in req.system else None


def test_a_swapped_stage_without_aforward_runs_under_acall():
    instance = generate("healthcare", "main", 1, seed=0)[0]
    inputs = instance.inputs("unreliable")
    rg = ReGround()
    rg.resolve = MyResolve()
    rg.reconstruct.regenerate = MyRegenerate()
    lm = scripted_lm(answer_d)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        expected = rg(**inputs)
        got = asyncio.run(rg.acall(**inputs))
    assert got.answer == expected.answer == "D"  # the user's predictor reached the context's LM, both ways
    assert got.state.startswith("USER STATE") and got.state == expected.state
    assert rg.resolve.threads[-1] != threading.get_ident()  # the sync stage ran on a worker thread, not the loop's
    assert sum("Pick the option" in r.system for r in lm.engine.requests) == 2


class MyDecide(dspy.Module):
    """A user's decision predictor without ``aforward``: always option B, whatever it is shown."""

    def forward(self, **inputs):
        return dspy.Prediction(answer="B", reason="mine", reasoning="mine")


def test_a_baselines_predictor_swapped_for_a_module_without_aforward_runs_under_acall():
    """The collaboration baselines await each predictor through ``acall_stage`` (issue 26, item 7: streamify as an
    async program), so a swapped predictor runs on a worker thread instead of raising AttributeError."""
    from groundstate.programs.reground.baselines import BASELINES

    agents = [{"agent": i, "evidence": f"evidence {i}"} for i in range(3)]
    case = dict(agents=agents, shared_context="context", question="which?", options={"A": "a", "B": "b"})
    for name, cls in BASELINES.items():
        kwargs = dict(case, reliable_information="reliable", misleading=[1]) if name == "oracle" else case
        program = cls()
        program.decide = MyDecide()
        with dspy.context(lm=scripted_lm(lambda req: {"answer": "A"}), adapter=dspy.JSONAdapter()):
            expected = program(**kwargs)
            got = asyncio.run(program.acall(**kwargs))
        assert expected.answer == got.answer == "B", name  # the user's module decided, both ways
        assert got.toDict() == expected.toDict(), name
