"""DHD run configurations carry the temperatures and the evaluator, so runs of other settings never mix."""

from __future__ import annotations

import dspy
import pytest

from groundstate.errors import ConfigError
from groundstate.eval.dhd.cache import MessageCache, PoolEntry
from groundstate.eval.dhd.run import generate, load_blocks, replay, replay_run_settings
from groundstate.eval.dhd.settings import cache_generation
from groundstate.eval.run_settings import RunSettings
from groundstate.programs.dhd.deliberation import DiverseHypothesisDeliberation
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.testing import scripted_lm
from tests.eval.dhd.test_replay import World, make_problems, within


@pytest.fixture(autouse=True)
def _fresh_dspy_cache():
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()


@pytest.fixture
def cache(tmp_path):
    return MessageCache(tmp_path / "cache")


def test_generate_and_replay_configs_record_every_temperature_and_the_evaluator(cache):
    lm = scripted_lm(World(), cache=True)
    result, _ = within(lm, lambda: generate(cache, make_problems("s"), run=RunSettings(threads=2)))
    assert result.config["temperatures"] == {"recruiter": 0.0, "hypothesizer": 0.7, "judge": None}
    assert (result.config["evaluator"], result.config["judge_lm"]) == ("rules", None)
    stored = cache.entries()["s-0"].generator["settings"]
    assert stored == {k: result.config[k] for k in ("temperatures", "evaluator", "judge_lm", "confidence")}
    assert stored["confidence"] == "level"  # the hypothesizers' confidence in words (issue 25)
    replayed, _ = within(lm, lambda: replay(cache, "loo", [5], 1))
    assert replayed.config["temperatures"] == {"recruiter": 0.0, "hypothesizer": 0.7, "integrator": 0.0,
                                               "judge": None}
    assert replayed.config["evaluator"] == "rules" and "temperature" not in replayed.config
    assert replay_run_settings(cache)["loo"]["temperatures"] == replayed.config["temperatures"]  # what analyze shows

    judge = AnswerEvaluator(mode="judge", temperature=0.2)
    judged, _ = within(lm, lambda: replay(cache, "single", [5], 1, evaluator=judge))
    assert judged.config["temperatures"]["judge"] == 0.2 and judged.config["evaluator"] == "judge"
    own = AnswerEvaluator()
    own.judge.lm = lm  # a judge LM of its own: judge mode by default, and the LM is in the configuration
    assert replay_config(cache, lm, evaluator=own)["judge_lm"]["model"] == lm.model


def replay_config(cache, lm, mode="loo", **kwargs):
    result, _ = within(lm, lambda: replay(cache, mode, [5], 1, **kwargs))
    return result.config


def test_another_temperature_is_another_run_and_runs_never_mix(cache):
    lm = scripted_lm(World(), cache=True)
    within(lm, lambda: generate(cache, make_problems("m")))
    first, _ = within(lm, lambda: replay(cache, "loo", [5], 1))
    hotter = DiverseHypothesisDeliberation(integrator_temperature=0.5)
    second, _ = within(lm, lambda: replay(cache, "loo", [5], 1, program=hotter))
    assert second.run_dir != first.run_dir and second.config["temperatures"]["integrator"] == 0.5
    assert second.skipped == 0  # nothing reused from the temperature-0 run
    with pytest.raises(ConfigError, match="different configurations"):
        load_blocks(cache)  # two settings of the same mode: the analysis must choose one
    assert len(load_blocks(cache, run_ids=[first.run_id])) == 2
    judged_cold, _ = within(lm, lambda: replay(cache, "single", [5], 1, evaluator=AnswerEvaluator(mode="judge")))
    judged_warm, _ = within(lm, lambda: replay(cache, "single", [5], 1,
                                               evaluator=AnswerEvaluator(mode="judge", temperature=0.3)))
    assert judged_cold.run_dir != judged_warm.run_dir


def test_a_cache_holds_messages_of_one_generation_setting(cache):
    lm = scripted_lm(World(), cache=True)
    within(lm, lambda: generate(cache, make_problems("a", 1)))
    warmer = DiverseHypothesisDeliberation(hypothesizer_temperature=1.0)
    with pytest.raises(ConfigError, match="holds messages generated with temperatures recruiter 0.0, hypothesizer "
                                          "0.7"):
        within(lm, lambda: generate(cache, make_problems("b", 1), program=warmer))
    with pytest.raises(ConfigError, match="evaluator rules"):
        within(lm, lambda: generate(cache, make_problems("b", 1), evaluator=AnswerEvaluator(mode="judge")))
    _, counts = within(lm, lambda: generate(cache, make_problems("b", 1)))  # the same settings: allowed
    assert counts["generated"] == 1 and set(cache.entries()) == {"a-0", "b-0"}
    odd = PoolEntry(problem_id="c-0", roles=[], messages=[], generator={"settings": {"evaluator": "judge"}})
    cache.put([odd])  # written around generate's check
    with pytest.raises(ConfigError, match="different settings"):
        cache_generation(cache.entries())
    with pytest.raises(ConfigError, match="different settings"):
        within(lm, lambda: replay(cache, "loo", [5], 1))


def test_the_judge_takes_its_own_server_or_inherits_the_default_one_of_its_provider(monkeypatch):
    """``--judge-api-base`` serves the DHD judge; without it a judge of the LM's provider is served where the LM is,
    one of another provider by its own endpoint (the user's server never receives another provider's key)."""
    from groundstate.eval.dhd.settings import SamplingSettings as ReplaySettings
    from groundstate.eval.dhd.steps import dhd_program
    from groundstate.lm.config import LMConfig

    built: list[tuple[str, dict]] = []

    def fake_get_lm(spec, **options):
        built.append((spec, options))
        return scripted_lm(World())

    monkeypatch.setattr("groundstate.lm.config.get_lm", fake_get_lm)
    served = LMConfig(default={"model": "hosted_vllm/qwen", "api_base": "http://gpu:8000/v1"})

    def judge_options(**settings):
        del built[:]
        dhd_program(ReplaySettings(**settings), None, served)
        return dict(next(o for s, o in built if s == settings["judge_lm"]))

    assert judge_options(judge_lm="hosted_vllm/judge")["api_base"] == "http://gpu:8000/v1"
    assert judge_options(judge_lm="hosted_vllm/judge", judge_api_base="http://judge:9000/v1")["api_base"] == \
        "http://judge:9000/v1"
    assert "api_base" not in judge_options(judge_lm="openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="needs --judge-lm"):
        ReplaySettings(judge_api_base="http://judge:9000/v1").evaluator_mode()
