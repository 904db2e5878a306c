"""What a DHD run configuration records about how answers were produced and graded.

Every DHD step's run configuration carries these fields (so runs with other settings get another run id, and
:func:`~groundstate.eval.dhd.run.replay_run_dirs` refuses to mix runs of different configurations):

- ``temperatures``: the sampling temperature of each stage the step's results depend on, by stage name
  (:data:`TEMPERATURE_KEYS`): ``recruiter`` and ``hypothesizer`` (the messages; a replay reads them from the
  cache, where each stored problem records them), ``integrator`` (replays; the independent solver shares it)
  and ``judge`` (``None`` under the ``rules`` evaluator, which calls no LM). ``None`` for a stage also means the
  LM's own setting was used, or, for messages generated before these were recorded, that it is unknown.
- ``evaluator``: ``judge`` or ``rules`` (:attr:`~groundstate.programs.dhd.evaluator.AnswerEvaluator.resolved_mode`).
- ``judge_lm``: :func:`~groundstate.lm.specs.describe_lm` of the judge's own LM, or ``None`` (the step's default
  LM judges, or no LM does).
- ``confidence`` (generate, and replays of a cache that records it): how the hypothesizers stated their confidence,
  ``"level"`` (the default since issue 25). Absent for the earlier numeric format, so a ``dhd generate
  --confidence number`` run has the configuration (and run id) it had before, and can add problems to a cache
  made before.
- ``integrator`` (replay, mask): ``{"prompt", "max_tokens"}`` of the integrator and solver calls
  (:func:`~groundstate.programs.dhd.deliberation.resolve_max_tokens`). Absent for the earlier compact prompt with
  the LM's own output limit, so runs made with ``--integrator-prompt compact`` keep their earlier run ids; with
  the default (the authors' prompt, 4,096 tokens) a replay or masking run gets a new run id.

A cache's messages record the settings they were generated and graded with (``generator["settings"]`` of each
:class:`~groundstate.eval.dhd.cache.PoolEntry`): :func:`generation_settings` of the generate step. A cache holds
messages of one setting only: :func:`cache_generation` reads it and refuses a mixture.

The typed settings of the steps (what ``dhd generate``, ``replay`` and ``mask`` take; each field's description is
its ``--help`` text) are :class:`GenerateSettings`, :class:`ReplaySettings` and :class:`MaskSettings`, with the
evaluator's options in :class:`EvaluatorSettings` and the integrator's in :class:`SamplingSettings`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.problems import FORMATS
from groundstate.eval.settings import Settings
from groundstate.lm.specs import describe_lm
from groundstate.programs.dhd.deliberation import (
    CONFIDENCE_FORMATS,
    DEFAULT_CONFIDENCE,
    DEFAULT_HYPOTHESIZER_TEMPERATURE,
    DEFAULT_INTEGRATOR_TEMPERATURE,
    DEFAULT_K,
    DEFAULT_PROMPT,
    DEFAULT_RECRUITER_TEMPERATURE,
    PROMPTS,
)
from groundstate.programs.dhd.evaluator import DEFAULT_JUDGE_TEMPERATURE

TEMPERATURE_KEYS: tuple[str, ...] = ("recruiter", "hypothesizer", "integrator", "judge")


def evaluator_settings(evaluator: Any) -> dict[str, Any]:
    """``{"evaluator", "judge_lm"}`` of an :class:`~groundstate.programs.dhd.evaluator.AnswerEvaluator`."""
    mode = evaluator.resolved_mode
    judge_lm = getattr(evaluator.judge, "lm", None) if mode == "judge" else None
    return {"evaluator": mode, "judge_lm": describe_lm(judge_lm) if judge_lm is not None else None}


def judge_temperature(evaluator: Any) -> float | None:
    """The judge's temperature, or ``None`` when the evaluator runs by rules."""
    return evaluator.temperature if evaluator.resolved_mode == "judge" else None


def stage_temperatures(program: Any) -> dict[str, float | None]:
    """The recruiter's, hypothesizers' and integrator's temperatures of a DHD program (``None`` if it has none)."""
    temperatures = getattr(program, "temperatures", None)
    return dict(temperatures) if isinstance(temperatures, Mapping) else {}


def stage_prompts(program: Any) -> dict[str, Any]:
    """The prompt choices of a DHD program (``{}`` if it has none): see
    :attr:`~groundstate.programs.dhd.deliberation.DiverseHypothesisDeliberation.prompts`."""
    prompts = getattr(program, "prompts", None)
    return dict(prompts) if isinstance(prompts, Mapping) else {}


def generation_settings(program: Any, evaluator: Any) -> dict[str, Any]:
    """The settings of ``dhd generate``: recruiter, hypothesizer and (proposal) judge temperatures, evaluator, and
    the confidence format unless it is the earlier numeric one (module notes)."""
    stages = stage_temperatures(program)
    temperatures = {"recruiter": stages.get("recruiter"), "hypothesizer": stages.get("hypothesizer"),
                    "judge": judge_temperature(evaluator)}
    out = {"temperatures": temperatures, **evaluator_settings(evaluator)}
    confidence = stage_prompts(program).get("confidence")
    if confidence not in (None, "number"):
        out["confidence"] = confidence
    return out


def replay_settings(program: Any, evaluator: Any, generation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of a replay (or mask) step: all four temperatures (the messages' two from ``generation``,
    the cache's :func:`cache_generation`), the evaluator and the judge LM, the messages' confidence format when
    ``generation`` records one, and the integrator's prompt and output budget unless they are the earlier compact
    prompt with the LM's own limit (module notes)."""
    made = dict((generation or {}).get("temperatures") or {})
    temperatures = {"recruiter": made.get("recruiter"), "hypothesizer": made.get("hypothesizer"),
                    "integrator": stage_temperatures(program).get("integrator"), "judge": judge_temperature(evaluator)}
    out = {"temperatures": temperatures, **evaluator_settings(evaluator)}
    if (generation or {}).get("confidence") is not None:
        out["confidence"] = generation["confidence"]
    prompts = stage_prompts(program)
    integrator = {"prompt": prompts.get("integrator"), "max_tokens": prompts.get("integrator_max_tokens")}
    if prompts and (integrator["prompt"], integrator["max_tokens"]) != ("compact", None):
        out["integrator"] = integrator
    return out


def cache_generation(entries: Mapping[str, Any], source: str = "the cache") -> dict[str, Any]:
    """The generation settings recorded by a cache's entries (``{}`` when none recorded them).

    Raises:
        ConfigError: the entries were generated with different settings.
    """
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries.values():
        settings = dict((entry.generator or {}).get("settings") or {})
        seen.setdefault(json.dumps(settings, sort_keys=True, default=str), settings)
    if len(seen) > 1:
        shown = "; ".join(_describe(s) for s in seen.values())
        raise ConfigError(f"{source} holds messages generated with different settings ({shown}); use one cache per "
                          "setting")
    return next(iter(seen.values()), {})


def check_generation(existing: Mapping[str, Any], settings: Mapping[str, Any], have_entries: bool,
                     source: str) -> None:
    """Refuse to add messages generated with ``settings`` to a cache whose messages were made otherwise."""
    if have_entries and dict(existing) != dict(settings):
        raise ConfigError(f"{source} holds messages generated with {_describe(existing)}; this run would use "
                          f"{_describe(settings)}. Use another --cache, or the same temperatures, evaluator and "
                          "--confidence")


def _describe(settings: Mapping[str, Any]) -> str:
    if not settings:
        return "unrecorded settings"
    temperatures = ", ".join(f"{k} {v}" for k, v in (settings.get("temperatures") or {}).items())
    return (f"temperatures {temperatures}; evaluator {settings.get('evaluator')}; confidence "
            f"{settings.get('confidence', 'number')}")


# -- the steps' typed settings -----------------------------------------------------------------------------------
TEMPERATURE = {"ge": 0, "le": 2, "json_schema_extra": {"metavar": "T"}}


class EvaluatorSettings(Settings):
    """How a DHD step grades answers."""

    evaluator: Literal["judge", "rules"] | None = Field(
        None, description="how answers are graded: judge (an LM judge sees the problem, the gold answer and the whole "
        "response, as in the paper; a proposal is judged from its proposed answer alone) or rules (tolerance, "
        "option sets, exact match; no LM). In both an answer with no usable value, or hedging between several "
        "values, is wrong. Default: judge when a judge LM is given (--judge-lm or the --lm-config role 'judge'), "
        "else rules")
    no_judge: bool = Field(False, description="the same as --evaluator rules (the earlier spelling)")
    judge_lm: str | None = Field(None, description="LM spec of the judge, like --lm (for more settings use the "
                                 "--lm-config role 'judge'); makes judge the default evaluator",
                                 json_schema_extra={"metavar": "SPEC"})
    judge_api_base: str | None = Field(None, description="server URL of the --judge-lm (default: --api-base when "
                                       "the judge has the LM's provider, else the provider's own endpoint)",
                                       json_schema_extra={"metavar": "URL"})
    judge_temperature: float = Field(DEFAULT_JUDGE_TEMPERATURE, description="the judge's sampling temperature "
                                     "(default 0, as the authors run it)", **TEMPERATURE)

    def evaluator_mode(self) -> str | None:
        """The evaluator's mode (``None``: judge when a judge LM is given, else rules).

        Raises:
            ConfigError: ``no_judge`` with ``evaluator="judge"``.
        """
        if self.no_judge and self.evaluator == "judge":
            raise ConfigError("--no-judge and --evaluator judge contradict each other; give one")
        if self.judge_api_base and not self.judge_lm:
            raise ConfigError("--judge-api-base needs --judge-lm (a judge in --lm-config gives its server in its "
                              "role)")
        return "rules" if self.no_judge else self.evaluator


class SamplingSettings(EvaluatorSettings):
    """How a replaying step (``replay``, ``mask``) samples the integrator."""

    integrator_temperature: float = Field(
        DEFAULT_INTEGRATOR_TEMPERATURE, description="the integrator's (and independent solver's) sampling temperature "
        "(default 0, as the authors run it); every replay is a separate call with its own rollout id at any "
        "temperature, so at 0 repeats differ only by the model's own variation.", **TEMPERATURE)
    integrator_prompt: Literal[PROMPTS] = Field(
        DEFAULT_PROMPT, description="the integrator's (and independent solver's) prompt: authors (the authors' "
        "protocol: think step by step, a no-score note before every hypothesis, 4096 output tokens per call) or "
        "compact (the prompt before issue 25: at most 800 characters of reasoning, the LM's own output limit; runs "
        "made with it keep their run ids)")
    integrator_max_tokens: int | None = Field(None, ge=1, description="output tokens per integrator and solver call "
                                              "(default: 4096 with the authors' prompt, the LM's own limit with "
                                              "compact)", json_schema_extra={"metavar": "N"})
    vary_seed: Literal["auto", "on", "off"] = Field("auto", description="derive the sampling seed from the rollout id "
                                                    "(auto: on for the embedded LM, whose sampler would otherwise "
                                                    "repeat itself at a temperature above 0)")


class GenerateSettings(EvaluatorSettings):
    """``dhd generate``: the problems, the cache, and how messages are made."""

    data: str = Field(description="SciBench JSON, JEEBench JSON or JSONL problems",
                      json_schema_extra={"metavar": "FILE"})
    format: Literal[(*FORMATS, "auto")] = Field("auto", description="problem file format (default auto)")
    k: int = Field(DEFAULT_K, ge=1, description="roles and messages per problem (default 5)")
    cache: str = Field(description="the message cache directory", json_schema_extra={"metavar": "DIR"})
    skip_invalid: bool = Field(False, description="report bad problem records and use the rest")
    recruiter_temperature: float = Field(DEFAULT_RECRUITER_TEMPERATURE, description="the recruiter's sampling "
                                         "temperature (default 0, as the authors run it)", **TEMPERATURE)
    hypothesizer_temperature: float = Field(DEFAULT_HYPOTHESIZER_TEMPERATURE, description="the hypothesizers' "
                                            "sampling temperature (default 0.7, as the authors run it)", **TEMPERATURE)
    confidence: Literal[CONFIDENCE_FORMATS] = Field(
        DEFAULT_CONFIDENCE, description="how hypothesizers state their confidence: level (low, medium or high with a "
        "short reason, the authors' format) or number (0 to 1, the format before issue 25; a cache made before "
        "takes more problems only with it)")


class ReplaySettings(SamplingSettings):
    """``dhd replay``: which replays of the cached messages to run."""

    cache: str = Field(description="the message cache directory", json_schema_extra={"metavar": "DIR"})
    mode: Literal["loo", "single"] = Field(description="replay mechanism")
    repeats: int = Field(1, ge=1, description="replay blocks per problem and K (default 1)",
                         json_schema_extra={"metavar": "B"})
    k: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="pool sizes (default from the cache's k: 1..k for loo, k for single; 5 if the cache does "
        "not record k)", json_schema_extra={"metavar": "K"})


class MaskSettings(SamplingSettings):
    """``dhd mask``: the sample of labelled messages and the repetitions of component masking."""

    cache: str = Field(description="the message cache directory", json_schema_extra={"metavar": "DIR"})
    per_category: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description="messages per category: one number for all, or five for W+ C+ W- C- indeterminate "
        "(default 10 3 3 2 4, the paper's sample)", json_schema_extra={"metavar": "N"})
    sample: int | None = Field(None, ge=1, description="N messages in all, spread round-robin over the five "
                               "categories", json_schema_extra={"metavar": "N"})
    repeats: int = Field(5, ge=1, description="repetitions per message (default 5)", json_schema_extra={"metavar": "R"})
    labels: str | None = Field(None, description="labels.jsonl written by `dhd analyze` from repeated LOO replay "
                               "(default <cache>/analysis/labels.jsonl)", json_schema_extra={"metavar": "FILE"})
    k: int | None = Field(None, ge=1, description="pool size (default: the pool size of the labels)")
    same_problem: bool = Field(False, description="allow several sampled messages from one problem (default: at most "
                               "one per problem, as in the authors' control manifest)")
    seed: int = Field(0, ge=0, description="seed for anything random (default 0)")

