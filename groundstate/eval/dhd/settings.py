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

A cache's messages record the settings they were generated and graded with (``generator["settings"]`` of each
:class:`~groundstate.eval.dhd.cache.PoolEntry`): :func:`generation_settings` of the generate step. A cache holds
messages of one setting only: :func:`cache_generation` reads it and refuses a mixture.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from groundstate.errors import ConfigError
from groundstate.lm.specs import describe_lm

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


def generation_settings(program: Any, evaluator: Any) -> dict[str, Any]:
    """The settings of ``dhd generate``: recruiter, hypothesizer and (proposal) judge temperatures, evaluator."""
    stages = stage_temperatures(program)
    temperatures = {"recruiter": stages.get("recruiter"), "hypothesizer": stages.get("hypothesizer"),
                    "judge": judge_temperature(evaluator)}
    return {"temperatures": temperatures, **evaluator_settings(evaluator)}


def replay_settings(program: Any, evaluator: Any, generation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of a replay (or mask) step: all four temperatures (the messages' two from ``generation``,
    the cache's :func:`cache_generation`), the evaluator and the judge LM."""
    made = dict((generation or {}).get("temperatures") or {})
    temperatures = {"recruiter": made.get("recruiter"), "hypothesizer": made.get("hypothesizer"),
                    "integrator": stage_temperatures(program).get("integrator"), "judge": judge_temperature(evaluator)}
    return {"temperatures": temperatures, **evaluator_settings(evaluator)}


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
                          f"{_describe(settings)}. Use another --cache, or the same temperatures and evaluator")


def _describe(settings: Mapping[str, Any]) -> str:
    if not settings:
        return "unrecorded settings"
    temperatures = ", ".join(f"{k} {v}" for k, v in (settings.get("temperatures") or {}).items())
    return f"temperatures {temperatures}; evaluator {settings.get('evaluator')}"
