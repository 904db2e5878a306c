"""``groundstate lm check``: prompt and generation rates timed apart, and a typical ReGround episode's time."""

from __future__ import annotations

import json
import re

import pytest

from groundstate.cli import main
from groundstate.eval import lm_check
from groundstate.eval.lm_check import TYPICAL_EPISODE, CheckReport, Rates, rate_lines
from groundstate.lm import contexts
from tests.conftest import requires_embedded

PROMPT_S, TOKEN_S = 2.0, 0.1  # the stand-in model's cost of a prompt and of each generated token, on a fake clock


class ClockLlama:
    """A stand-in llama.cpp context that advances a fake clock (wall and CPU alike) by what a call would cost:
    :data:`PROMPT_S` for the prompt unless the context still holds it, :data:`TOKEN_S` per generated token."""

    def __init__(self, clock: dict):
        self.clock, self.calls, self.holds_prompt = clock, [], False

    def reset(self):
        self.calls.append("reset")
        self.holds_prompt = False

    def create_chat_completion(self, messages, **kwargs):
        tokens = min(11, kwargs.get("max_tokens") or 512)
        self.calls.append(("complete", kwargs.get("max_tokens"), "grammar" in kwargs))
        self.clock["now"] += (0.0 if self.holds_prompt else PROMPT_S) + TOKEN_S * tokens
        self.holds_prompt = True
        content = json.dumps({"choice": "A", "facts": ["Mercury orbits closest"]})
        return {"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 400, "completion_tokens": tokens}}


@pytest.fixture
def clock_model(monkeypatch, tmp_path):
    clock = {"now": 0.0}
    llama = ClockLlama(clock)
    monkeypatch.setattr(contexts, "_POOLS", {})
    monkeypatch.setattr(contexts, "new_llama", lambda *a: llama)
    monkeypatch.setattr(lm_check.time, "perf_counter", lambda: clock["now"])
    monkeypatch.setattr(lm_check.time, "process_time", lambda: clock["now"])
    (tmp_path / "model.gguf").write_bytes(b"")
    monkeypatch.setenv("GROUNDSTATE_GGUF", str(tmp_path / "model.gguf"))
    return llama


def test_lm_check_times_prompt_and_generation_apart_and_estimates_an_episode(clock_model, capsys):
    assert main(["lm", "check", "--lm-quant", "shipped"]) == 0
    out = capsys.readouterr().out
    # the check's own call, then the replay: reset + prompt only (1 token), reset + the full call, with the grammar
    assert clock_model.calls[-4:] == ["reset", ("complete", 1, True), "reset", ("complete", 512, True)]
    prompt_rate = 400 / (PROMPT_S + TOKEN_S)  # the prompt-only call generates its one token too
    generation_rate = 10 / (10 * TOKEN_S)  # the full call's tokens after the first
    assert f"prompt: 400 tokens in {PROMPT_S + TOKEN_S:.2f}s: {prompt_rate:.0f} tokens/s ({prompt_rate:.0f} per " \
           "CPU-second of this process)" in out
    assert f"generation: 10 tokens in 1.00s: {generation_rate:.0f} tokens/s" in out
    episode = TYPICAL_EPISODE
    evaluated = episode.prompt_tokens - episode.reused_tokens  # reused prompt tokens are not evaluated again
    minutes = (evaluated / prompt_rate + episode.output_tokens / generation_rate) / 60
    assert re.search(rf"a typical ReGround episode \(34 calls, 18,200 prompt tokens of which 8,744 reused, "
                     rf"1,846 output tokens\): about {minutes:.1f} min on one context at the current load "
                     r"\(load average [\d.]+ on \d+ cores\)", out)
    assert "output tokens/s" not in out  # the earlier figure, which counted the prompt's time as generation's


def test_rates_that_cannot_be_timed_give_no_estimate():
    report = CheckReport(description={}, model_file="m", load_seconds=0.1, choice="A", facts=[], input_tokens=400,
                         output_tokens=1, seconds=2.0, rates=Rates(400, 2.0, 2.0, 0, 0.0, 0.0))
    lines = rate_lines(report)
    assert lines[2] == "generation: 0 tokens: too few to time" and lines[3].endswith("no estimate (a rate could "
                                                                                     "not be timed)")
    hosted = CheckReport(description={}, model_file=None, load_seconds=None, choice="A", facts=[], input_tokens=11,
                         output_tokens=3, seconds=0.5)
    assert rate_lines(hosted) == ["tokens: 11 in, 3 out; the call took 0.50s (prompt and generation are timed apart "
                                  "for the embedded LM only)"]
    assert Rates(600, 3.0, 6.0, 30, 1.0, 1.0).episode_seconds() == pytest.approx((18_200 - 8_744) / 200 + 1_846 / 30)


@pytest.mark.embedded
@requires_embedded
def test_real_model_lm_check_prints_both_rates_and_the_estimate(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the q8_0 copy is made here, not in the user's cache
    assert main(["lm", "check"]) == 0
    out = capsys.readouterr().out
    assert '"quant": "q8_0"' in out and ".q8_0.llama-cpp-python-" in out
    prompt = re.search(r"prompt: (\d+) tokens in [\d.]+s: (\d+) tokens/s \((\d+) per CPU-second", out)
    generation = re.search(r"generation: (\d+) tokens in [\d.]+s: (\d+) tokens/s", out)
    assert prompt and generation and int(prompt.group(1)) > 100 and int(generation.group(1)) >= 1
    assert re.search(r"about [\d.]+ min on one context at the current load", out)
