"""``groundstate lm check``: which LM was built, one structured round trip, and what that pace means for a run.

The round trip asks :class:`~groundstate.signatures.checks.StructuredCheck` (a ``Literal`` and a ``list[str]``
field), so a check that passes proves the LM answers in a form the adapters parse. A failed call becomes one
:class:`~groundstate.errors.LMCallError` line (:func:`~groundstate.lm.faults.lm_failure`).

For the embedded LM, the same request is then replayed twice on one of the engine's contexts, reset first so the
whole prompt is evaluated: once with ``max_tokens=1`` (the prompt, plus one token) and once in full. The first
gives the prompt rate, the difference the generation rate (all tokens but the first), each per wall-clock second
and per CPU-second of this process (``time.process_time``: the work this process did, whatever else runs). The
two differ by what the machine's load takes. Simplification: one short call is timed, so the rates are a reading of
the moment, not a benchmark (``bench/embedded_quant.py`` measures them over groundstate's own prompts). From the
wall rates and :data:`TYPICAL_EPISODE` comes the time of one ReGround episode on one context at the current load.
A hosted LM's prompt and generation cannot be timed apart from outside, so only the call's tokens and time are
reported for it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from groundstate.lm.embedded import EmbeddedEngine
from groundstate.lm.faults import lm_failure
from groundstate.lm.specs import default_adapter, describe_lm


def _minutes(seconds: float) -> str:
    """``1.6 min`` below ten minutes, ``12 min`` above."""
    minutes = seconds / 60
    return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"


class EpisodeBudget(NamedTuple):
    """The LM work of one ReGround episode."""

    calls: int
    prompt_tokens: int
    output_tokens: int
    reused_tokens: int = 0  # prompt tokens served from an evaluated prefix (groundstate.lm.prefix)


TYPICAL_EPISODE = EpisodeBudget(calls=34, prompt_tokens=18_200, output_tokens=1_846, reused_tokens=8_744)
"""One synthetic ReGround episode with the embedded LM: the demo's episode (``make demo``, its run's summary) with
the default q8_0 file and prefix reuse, on 2 contexts, on 2026-12-02: 48% of its prompt tokens reused. Other types
and settings answer differently, so their counts differ (the shipped q4_1 file: 37 calls, 17,702 prompt and 2,841
output tokens, ``bench/demo_budget.py --embedded``). The reused tokens are not evaluated, so the estimate leaves
them out; it counts model time only (the demo's episode took 1 min 51 s of wall time on 2 contexts, about 110
CPU-seconds, where lm check's rates at that moment estimated about 1.6 min on one context)."""


@dataclass
class Rates:
    """Prompt and generation timings of one replayed request (seconds of wall clock and of this process's CPU)."""

    prompt_tokens: int
    prompt_wall_s: float
    prompt_cpu_s: float
    generated_tokens: int
    generation_wall_s: float
    generation_cpu_s: float

    @staticmethod
    def _rate(tokens: int, seconds: float) -> float | None:
        return tokens / seconds if tokens > 0 and seconds > 0 else None

    @property
    def prompt_per_s(self) -> float | None:
        return self._rate(self.prompt_tokens, self.prompt_wall_s)

    @property
    def prompt_per_cpu_s(self) -> float | None:
        return self._rate(self.prompt_tokens, self.prompt_cpu_s)

    @property
    def generation_per_s(self) -> float | None:
        return self._rate(self.generated_tokens, self.generation_wall_s)

    @property
    def generation_per_cpu_s(self) -> float | None:
        return self._rate(self.generated_tokens, self.generation_cpu_s)

    def episode_seconds(self, episode: EpisodeBudget = TYPICAL_EPISODE) -> float | None:
        """Seconds of ``episode`` on one context at these wall rates (``None`` if either was not measured)."""
        if self.prompt_per_s is None or self.generation_per_s is None:
            return None
        evaluated = episode.prompt_tokens - episode.reused_tokens
        return evaluated / self.prompt_per_s + episode.output_tokens / self.generation_per_s


@dataclass
class CheckReport:
    """What :func:`check_lm` measured."""

    description: dict[str, Any]
    model_file: str | None
    load_seconds: float | None
    choice: Any
    facts: Any
    input_tokens: int
    output_tokens: int
    seconds: float
    rates: Rates | None = None
    load_average: float | None = None


class _Recorder:
    """An engine around the embedded one that keeps the last request it passed on."""

    def __init__(self, inner: EmbeddedEngine):
        self.inner, self.request = inner, None

    def complete(self, request):
        self.request = request
        return self.inner.complete(request)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def timed_completion(llama: Any, messages: list[dict[str, str]], kwargs: dict[str, Any]) -> tuple[dict, float, float]:
    """``(completion, wall seconds, CPU seconds of this process)`` of one call on a reset context (the whole prompt
    evaluated, not only what differs from the context's previous one); ``lm check`` and the engine benches."""
    llama.reset()
    wall, cpu = time.perf_counter(), time.process_time()
    out = llama.create_chat_completion(messages=messages, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def measure_rates(engine: EmbeddedEngine, request: Any) -> Rates:
    """Replay ``request`` on a context of ``engine``: prompt only, then in full (see the module docstring)."""
    messages, kwargs = engine.llama_arguments(request)
    with engine.pool().context() as llama:
        first, p_wall, p_cpu = timed_completion(llama, messages, {**kwargs, "max_tokens": 1})
        full, f_wall, f_cpu = timed_completion(llama, messages,
                                               {**kwargs, "max_tokens": kwargs.get("max_tokens") or 512})
    return Rates(prompt_tokens=int(first["usage"]["prompt_tokens"]), prompt_wall_s=p_wall, prompt_cpu_s=p_cpu,
                 generated_tokens=max(0, int(full["usage"]["completion_tokens"]) - 1),
                 generation_wall_s=max(0.0, f_wall - p_wall), generation_cpu_s=max(0.0, f_cpu - p_cpu))


def check_lm(lm: Any) -> CheckReport:
    """Load the model (embedded LM), make one structured call, time its prompt and generation apart (embedded
    LM), and report.

    Raises:
        LMCallError: the call failed (one line: what failed, which LM, how to fix it).
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    from groundstate.signatures.checks import StructuredCheck  # noqa: PLC0415 (heavy: dspy)

    model_file, load_seconds, recorder, called = None, None, None, lm
    engine = getattr(lm, "engine", None)
    if isinstance(engine, EmbeddedEngine):
        started = time.perf_counter()
        with engine.pool().context():  # loads the first context (or finds it loaded)
            pass
        model_file, load_seconds = engine.resolved_path(), time.perf_counter() - started
        recorder = _Recorder(engine)
        called = lm.copy(engine=recorder, cache=False)  # the request reaches the engine, to be replayed
    predict = dspy.Predict(StructuredCheck)
    with dspy.context(lm=called, adapter=default_adapter(lm)), dspy.track_usage() as usage:
        started = time.perf_counter()
        try:
            out = predict(question="Which planet is closest to the Sun?",
                          options="A: Mercury\nB: Venus\nC: Earth\nD: Mars")
        except Exception as exc:  # a refused connection, a bad key, a hang, garbage: one line, not a traceback
            raise lm_failure(exc, lm, "lm check") from None
        elapsed = time.perf_counter() - started
    totals = usage.get_total_tokens().get(lm.model, {})
    rates = measure_rates(engine, recorder.request) if recorder is not None and recorder.request else None
    return CheckReport(description=describe_lm(lm), model_file=model_file, load_seconds=load_seconds,
                       choice=out.choice, facts=out.facts, input_tokens=int(totals.get("prompt_tokens") or 0),
                       output_tokens=int(totals.get("completion_tokens") or 0), seconds=elapsed, rates=rates,
                       load_average=_load_average())


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None


def rate_lines(report: CheckReport, cores: int | None = None) -> list[str]:
    """The lines ``lm check`` prints about the pace: the call, and for the embedded LM its prompt and generation
    rates and the estimate of a typical ReGround episode."""
    lines = [f"tokens: {report.input_tokens} in, {report.output_tokens} out; the call took {report.seconds:.2f}s"]
    rates = report.rates
    if rates is None:
        return [lines[0] + " (prompt and generation are timed apart for the embedded LM only)"]

    def pace(tokens: int, wall: float, per_s: float | None, per_cpu: float | None) -> str:
        if per_s is None:
            return f"{tokens} tokens: too few to time"
        cpu = f"{per_cpu:.0f} per CPU-second of this process" if per_cpu is not None else "CPU time not measured"
        return f"{tokens} tokens in {wall:.2f}s: {per_s:.0f} tokens/s ({cpu})"

    lines.append("prompt: " + pace(rates.prompt_tokens, rates.prompt_wall_s, rates.prompt_per_s,
                                   rates.prompt_per_cpu_s))
    lines.append("generation: " + pace(rates.generated_tokens, rates.generation_wall_s, rates.generation_per_s,
                                       rates.generation_per_cpu_s))
    seconds = rates.episode_seconds()
    episode = TYPICAL_EPISODE
    what = (f"a typical ReGround episode ({episode.calls} calls, {episode.prompt_tokens:,} prompt tokens of which "
            f"{episode.reused_tokens:,} reused, {episode.output_tokens:,} output tokens)")
    if seconds is None:
        lines.append(f"{what}: no estimate (a rate could not be timed)")
    else:
        load = "" if report.load_average is None else \
            f" (load average {report.load_average:.1f}{f' on {cores} cores' if cores else ''})"
        lines.append(f"{what}: about {_minutes(seconds)} on one context at the current load{load}")
    return lines
