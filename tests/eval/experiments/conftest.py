"""Fixtures of the experiment tests."""

import pytest

from tests.eval.experiments.scripted import ScriptedLMs


@pytest.fixture
def scripted():
    return ScriptedLMs()


class DHDWorld:
    """A replayed and analysed DHD message cache made with a scripted world (message 0 of every problem is the one
    the integrator needs: removing it breaks the answer), the runs directory of its replay, and the LM factory."""

    def __init__(self, root):
        import dspy

        from groundstate.eval.dhd.analysis import analyze
        from groundstate.eval.dhd.cache import MessageCache
        from groundstate.eval.dhd.run import generate
        from groundstate.eval.experiments.execute import run_experiment
        from groundstate.eval.experiments.load import load_spec
        from groundstate.eval.run_settings import RunSettings
        from groundstate.lm.config import LMConfig
        from groundstate.testing import scripted_lm
        from tests.eval.dhd.test_replay import World, make_problems

        self.cache = MessageCache(root / "cache")
        self.lm = scripted_lm(World())
        with dspy.context(lm=self.lm, adapter=dspy.JSONAdapter()):
            generate(self.cache, make_problems("w", 6), run=RunSettings(threads=2))
        self.lms = lambda cell: (self.lm, LMConfig())
        self.run = RunSettings(out=root / "runs")
        self.inputs = dict.fromkeys(("oss_cache", "gemma_cache", "cache"), str(self.cache.dir))
        spec = load_spec("dhd-table17", {k: v for k, v in self.inputs.items() if k != "cache"})
        self.replayed = run_experiment(spec, self.run, lms=self.lms)
        analyze(self.cache, runs_dir=self.run.out, with_tables=False)  # the labels dhd-table23 samples from


@pytest.fixture(scope="session")
def dhd_world(tmp_path_factory):
    return DHDWorld(tmp_path_factory.mktemp("dhd"))
