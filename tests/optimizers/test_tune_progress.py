"""What ``tune`` tells a progress listener, and ``quiet=True``: DSPy's logs, prints and bars held back, then restored
(issue 26, item 6: ``optimize`` showed DSPy's logs and tqdm bars but no groundstate progress)."""

import sys
import threading

import dspy
import pytest
from dspy.utils.logging_utils import DSPY_LOGGING_STREAM

from groundstate.eval.reground.metrics import offquery_metric
from groundstate.optimizers.quiet import quiet_dspy
from groundstate.optimizers.tune import Budget, tune
from groundstate.programs.reground.oracle import Oracle
from groundstate.testing import scripted_lm
from tests.optimizers.test_tune import Learner, make_data

DSPY_CHATTER = ("Bootstrapped", "Average Metric", "it/s]")


class Heard:
    """A listener that keeps what it was told."""

    def __init__(self):
        self.lock = threading.Lock()
        self.phases, self.metric, self.lm, self.tokens = [], [], [], 0

    def on_phase(self, text):
        self.phases.append(text)

    def on_metric_call(self, raised):
        with self.lock:
            self.metric.append(raised)

    def on_lm_call(self, failed):
        with self.lock:
            self.lm.append(failed)

    def on_lm_usage(self, input_tokens, output_tokens):
        with self.lock:
            self.tokens += input_tokens + output_tokens


def bootstrap(examples, instances, **kwargs):
    with dspy.context(lm=scripted_lm(Learner(instances)), adapter=dspy.JSONAdapter()):
        return tune(Oracle(), examples, metric=offquery_metric("t3"), optimizer="bootstrap",
                    budget=Budget(max_bootstrapped_demos=1), threads=2, **kwargs)


def test_a_listener_hears_each_phase_metric_call_and_lm_call():
    instances, examples = make_data(6)
    heard = Heard()
    result = bootstrap(examples, instances, progress=False, listener=heard)
    assert heard.phases == ["scoring the starting program", "optimizing", "scoring the optimized program"]
    assert len(heard.lm) == result.lm_calls and not any(heard.lm)
    assert heard.tokens == result.input_tokens + result.output_tokens > 0
    assert len(heard.metric) >= 2 * len(examples) and not any(heard.metric)  # before + after, plus bootstrapping


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_holds_dspy_output_back_and_restores_the_streams(capsys, quiet):
    instances, examples = make_data(6)
    stdout, stderr = sys.stdout, sys.stderr
    bootstrap(examples, instances, progress=True, quiet=quiet)
    out, err = capsys.readouterr()
    assert any(text in out + err for text in DSPY_CHATTER) is not quiet, (out, err)
    assert sys.stdout is stdout and sys.stderr is stderr and DSPY_LOGGING_STREAM.enabled


def test_quiet_dspy_restores_dspy_logging_as_it_was_even_on_an_error(capsys):
    stdout = sys.stdout
    with pytest.raises(KeyError), quiet_dspy():
        print("held back")
        assert not DSPY_LOGGING_STREAM.enabled
        raise KeyError("boom")
    assert sys.stdout is stdout and DSPY_LOGGING_STREAM.enabled and capsys.readouterr().out == ""
    dspy.disable_logging()
    try:
        with quiet_dspy():
            pass
        assert not DSPY_LOGGING_STREAM.enabled  # disabled before: still disabled
    finally:
        dspy.enable_logging()
    with quiet_dspy(enabled=False):
        print("shown")
    assert capsys.readouterr().out == "shown\n"
