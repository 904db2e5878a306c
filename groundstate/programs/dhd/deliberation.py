"""Diverse Hypothesis Deliberation (DHD): recruiter -> hypothesizers -> integrator, plus an independent solver.

The stages, each usable alone and composed by :class:`DiverseHypothesisDeliberation`:

1. :class:`Recruiter` assigns ``K`` (default 5) problem-specific roles. It sees the problem and the form of the
   answer, never the gold answer. If the LM returns fewer than ``K`` distinct roles (a role needs at least three
   letters), generic fallback roles fill the panel (``padded`` counts them).
2. :class:`Hypothesizer` writes one structured message from one role (proposed answer, reasoning direction, key
   idea, critical assumption, what to check, confidence) with no access to peers or the gold answer. The ``K``
   hypothesizers run concurrently; one that fails yields a message with ``error`` set (callers leave such
   messages out of every pool).
3. :class:`Integrator` synthesizes a chosen subset of messages into one final answer. It is told nothing about
   which messages are right. Each message can be shown whole or with one component masked (see
   :data:`VIEWS`); messages are numbered 1..m in the order given.
4. :class:`IndependentSolver` answers with no messages at all (the baseline of single-message replay, and what
   an empty pool means).

The evaluator is :class:`~groundstate.programs.dhd.evaluator.AnswerEvaluator`; it lives apart because it
needs the gold answer, which no stage here ever receives.

**Prompts** (issue 25). By default the integrator follows the authors' protocol (``configs/paper/dhd_config.yaml``
and ``src/dhd/protocol.py`` of their public code, in groundstate's own words): it is told that some proposed answers
may be wrong while their reasoning may still help, not to copy an answer but to verify, reconcile and synthesize,
and to think step by step, with no length cap on its working and the authors' output budget of 4,096 tokens per
call (:data:`DEFAULT_MAX_TOKENS`); every hypothesis is preceded by the authors' score-free note
(:data:`~groundstate.signatures.deliberation.NO_SCORE_NOTE`, their live protocol's "placebo" preamble) and numbered
"Hypothesis n". The independent solver, the integrator's no-message case, thinks step by step with the same budget
(the authors' configuration has no separate solver prompt; groundstate's choice, for a like-for-like baseline).
``integrator_prompt="compact"`` keeps the earlier prompt (at most 800 characters of reasoning, "Message n", no note,
the LM's own output limit) exactly as before, so runs made with it keep their run ids and DSPy cache entries.
The hypothesizer states its confidence as low, medium or high with a short reason by default (the authors'
"Confidence / uncertainty" line), stored as the message's ``confidence_note``; ``confidence="number"`` keeps the
earlier number from 0 to 1. The integrator shows whichever the message holds (a cache made before shows numbers).

**Temperatures.** Each stage has its own sampling temperature, sent with every one of its calls (it overrides the
LM's own ``temperature``; ``None`` keeps the LM's). The defaults are the authors' public configuration: recruiter
0 (:data:`DEFAULT_RECRUITER_TEMPERATURE`), hypothesizers 0.7 (:data:`DEFAULT_HYPOTHESIZER_TEMPERATURE`),
integrator 0 (:data:`DEFAULT_INTEGRATOR_TEMPERATURE`); the independent solver, the integrator's no-message
case, uses the integrator's temperature. (The judge's, also 0, is the evaluator's.)

**Independent calls.** A replay repeated on the same input must be a fresh call to the model, not DSPy's cached
copy of the first. :meth:`Integrator.forward` and :meth:`IndependentSolver.forward` take a ``rollout`` key (any
string; callers build it from the problem, the mask pattern, the block and the repeat). With a key, the call
carries ``rollout_id`` = a stable hash of the key. DSPy puts the rollout id in its cache key at every
temperature, so distinct keys are distinct calls that reach the model and the same key is served from the
cache (a resumed run costs nothing). DSPy warns once that "rollout_id has no effect when temperature=0"; for
DSPy 3.4's cache that is not so (the tests check that repeats at temperature 0 reach the engine), though greedy
decoding may of course return the same text. At the default temperature 0 the variation between repeats is
therefore the model's own (batching, numerics), as in the paper, not sampling noise. ``vary_seed`` also sends
the hash as the sampling ``seed``, for engines such as the embedded llama.cpp one that would otherwise repeat the
same sample for the same prompt at a temperature above 0.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import ThreadedAsync, acall_stage, as_data, saveable
from groundstate.programs.dhd.views import DEFAULT_PROMPT as DEFAULT_PROMPT
from groundstate.programs.dhd.views import FIELD_LABELS as _FIELD_LABELS
from groundstate.programs.dhd.views import PROMPTS as PROMPTS
from groundstate.programs.dhd.views import VIEWS as VIEWS
from groundstate.programs.dhd.views import check_prompt as _check_prompt
from groundstate.programs.dhd.views import render_message as render_message
from groundstate.programs.dhd.views import render_pool as render_pool
from groundstate.records import HypothesisMessage, Problem
from groundstate.signatures.deliberation import (
    IntegrateHypotheses,
    ProposeHypothesis,
    ProposeScoredHypothesis,
    RecruitRoles,
    SolveProblem,
    SolveStepByStep,
    SynthesizeHypotheses,
)

logger = logging.getLogger(__name__)

DEFAULT_K = 5
DEFAULT_RECRUITER_TEMPERATURE = 0.0
DEFAULT_HYPOTHESIZER_TEMPERATURE = 0.7
DEFAULT_INTEGRATOR_TEMPERATURE = 0.0
DEFAULT_TEMPERATURE = DEFAULT_INTEGRATOR_TEMPERATURE
"""The integrator's default (kept for callers of the single ``temperature`` of earlier versions)."""
DEFAULT_MAX_TOKENS = 4096
"""The output budget per integrator and solver call with the authors' prompt (their configuration's ``max_tokens``)."""
CONFIDENCE_FORMATS: tuple[str, ...] = ("level", "number")
"""How a hypothesizer states its confidence: low/medium/high with a reason (default, the authors') or 0-1."""
DEFAULT_CONFIDENCE = "level"
FALLBACK_ROLES: tuple[str, ...] = (
    "Direct solver: works the problem step by step from first principles",
    "Skeptical checker: looks for traps, unit slips and hidden assumptions",
    "Estimator: bounds the answer with order-of-magnitude reasoning",
    "Alternative-method solver: reaches the answer by a different route than the obvious one",
    "Theorist: identifies the governing principle or formula and its conditions",
)
# -- what the stages are shown ------------------------------------------------------------------------------------
def answer_format(kind: str, unit: str | None = None) -> str:
    """The answer-form instruction every stage gets (never the answer itself)."""
    if kind == "number":
        return "a single number" + (f", expressed in the unit {unit} (give only the number in that unit)"
                                    if unit else "")
    if kind == "option":
        return "exactly one option letter"
    if kind == "options":
        return "one or more option letters: every option that is correct (for example AC)"
    if kind == "expression":
        return "a mathematical expression in simplest form"
    return "a short final answer"


def problem_inputs(problem: Problem) -> dict[str, str]:
    """``{"problem", "answer_format"}``: everything about ``problem`` a DHD stage may see (no gold answer)."""
    return {"problem": as_data(problem.question), "answer_format": answer_format(problem.kind, problem.unit)}


# -- sampling ----------------------------------------------------------------------------------------------------
def rollout_number(key: str) -> int:
    """A stable non-negative integer for a rollout key (the ``rollout_id`` DSPy's cache sees)."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:15], 16)


def sampling_config(rollout: str | None, temperature: float | None, vary_seed: bool = False,
                    max_tokens: int | None = None) -> dict[str, Any]:
    """The per-call ``config``: the ``temperature`` (unless ``None``), the output budget ``max_tokens`` (unless
    ``None``), and with a rollout key its rollout id (and, with ``vary_seed``, a seed derived from it)."""
    config: dict[str, Any] = {} if temperature is None else {"temperature": float(temperature)}
    if max_tokens is not None:
        config["max_tokens"] = int(max_tokens)
    if rollout is not None:
        config["rollout_id"] = rollout_number(rollout)
        if vary_seed:
            config["seed"] = rollout_number(rollout) % (2**31 - 1)
    return config


def full_response(reasoning: str, answer: str) -> str:
    """The integrator's whole response as the judge reads it: its reasoning, then its final answer."""
    reasoning, answer = str(reasoning or "").strip(), str(answer or "").strip()
    if not reasoning:
        return answer
    return f"{reasoning}\n\nFinal answer: {answer}" if answer else reasoning


def _clean_roles(roles: Any, k: int) -> list[str]:
    seen: dict[str, None] = {}
    for role in roles if isinstance(roles, list | tuple) else []:
        text = " ".join(str(role).split())[:200]
        if len(re.findall(r"[^\W\d_]", text)) >= 3 and text.lower() not in {s.lower() for s in seen}:
            seen.setdefault(text, None)
    return list(seen)[:k]


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.5
    if not math.isfinite(number):
        return 0.5
    if 1.0 < number <= 100.0:  # a percentage
        number /= 100.0
    return min(1.0, max(0.0, number))


# -- the stages ----------------------------------------------------------------------------------------------------
@saveable
class Recruiter(ThreadedAsync, dspy.Module):
    """``Recruiter(temperature=0)(problem, answer_format, k=5)`` -> ``Prediction(roles, padded)``: ``k`` roles."""

    def __init__(self, temperature: float | None = DEFAULT_RECRUITER_TEMPERATURE):
        super().__init__()
        self.temperature = temperature
        self.recruit = dspy.Predict(RecruitRoles)

    def forward(self, problem: str, answer_format: str = "", k: int = DEFAULT_K) -> dspy.Prediction:
        if k < 1:
            raise ValueError("k must be at least 1")
        out = self.recruit(problem=problem, answer_format=answer_format, n_roles=k,
                           config=sampling_config(None, self.temperature))
        roles = _clean_roles(out.roles, k)
        padded = 0
        for fallback in FALLBACK_ROLES * (k // len(FALLBACK_ROLES) + 1):
            if len(roles) >= k:
                break
            candidate = fallback if fallback not in roles else f"{fallback} ({len(roles) + 1})"
            roles.append(candidate)
            padded += 1
        return dspy.Prediction(roles=roles, padded=padded)


@saveable
class Hypothesizer(ThreadedAsync, dspy.Module):
    """``Hypothesizer(temperature=0.7, confidence="level")(problem, answer_format, role)`` -> ``Prediction``: the
    message fields, with ``confidence_note`` (``"high: two methods agree"``; ``confidence`` ``None``) for
    ``confidence="level"`` or a number ``confidence`` (``confidence_note`` empty) for ``"number"``."""

    def __init__(self, temperature: float | None = DEFAULT_HYPOTHESIZER_TEMPERATURE,
                 confidence: str = DEFAULT_CONFIDENCE):
        super().__init__()
        if confidence not in CONFIDENCE_FORMATS:
            raise ValueError(f"unknown confidence format '{confidence}' (choose from {', '.join(CONFIDENCE_FORMATS)})")
        self.temperature, self.confidence = temperature, confidence
        self.propose = dspy.Predict(ProposeHypothesis if confidence == "level" else ProposeScoredHypothesis)

    def forward(self, problem: str, answer_format: str, role: str) -> dspy.Prediction:
        out = self.propose(problem=problem, answer_format=answer_format, role=role,
                           config=sampling_config(None, self.temperature))
        fields = {name: " ".join(str(getattr(out, name) or "").split()) for name, _ in _FIELD_LABELS}
        if self.confidence == "number":
            stated = {"confidence": _confidence(out.confidence), "confidence_note": ""}
        else:
            level = str(out.confidence or "").strip().lower()
            reason = " ".join(str(getattr(out, "confidence_reason", "") or "").split())
            stated = {"confidence": None, "confidence_note": f"{level}: {reason}" if reason else level}
        return dspy.Prediction(proposed_answer=str(out.proposed_answer or "").strip(), **fields, **stated)


def resolve_max_tokens(prompt: str, max_tokens: int | None) -> int | None:
    """The output budget a prompt's calls send: ``max_tokens`` when given, else :data:`DEFAULT_MAX_TOKENS` for the
    authors' prompt and ``None`` (the LM's own limit) for the compact one."""
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        return max_tokens
    return DEFAULT_MAX_TOKENS if _check_prompt(prompt) == "authors" else None


@saveable
class Integrator(dspy.Module):
    """Synthesizes a subset of messages into a final answer.

    Args:
        temperature: sampling temperature of every call (default 0; ``None``: the LM's own).
        vary_seed: also derive the sampling seed from the rollout key.
        prompt: ``"authors"`` (default) or ``"compact"`` (see the module notes).
        max_tokens: output budget of every call (default: 4,096 with the authors' prompt, the LM's own with the
            compact one; :func:`resolve_max_tokens`).

    ``forward(problem, answer_format, messages, views=None, rollout=None)`` -> ``Prediction(answer, reasoning,
    response, rollout_id)``; ``response`` is :func:`full_response` (what the judge grades).
    """

    def __init__(self, temperature: float | None = DEFAULT_INTEGRATOR_TEMPERATURE, vary_seed: bool = False,
                 prompt: str = DEFAULT_PROMPT, max_tokens: int | None = None):
        super().__init__()
        self.temperature, self.vary_seed, self.prompt = temperature, vary_seed, _check_prompt(prompt)
        self.max_tokens = resolve_max_tokens(prompt, max_tokens)
        self.integrate = dspy.Predict(SynthesizeHypotheses if prompt == "authors" else IntegrateHypotheses)

    def _inputs(self, problem: str, answer_format: str, messages: Sequence[HypothesisMessage],
                views: Sequence[str] | None, rollout: str | None) -> dict[str, Any]:
        return {"problem": problem, "answer_format": answer_format,
                "messages": render_pool(messages, views, self.prompt),
                "config": sampling_config(rollout, self.temperature, self.vary_seed, self.max_tokens)}

    def forward(self, problem: str, answer_format: str, messages: Sequence[HypothesisMessage],
                views: Sequence[str] | None = None, rollout: str | None = None) -> dspy.Prediction:
        inputs = self._inputs(problem, answer_format, messages, views, rollout)
        return _answer(self.integrate(**inputs), inputs["config"])

    async def aforward(self, problem: str, answer_format: str, messages: Sequence[HypothesisMessage],
                       views: Sequence[str] | None = None, rollout: str | None = None) -> dspy.Prediction:
        """:meth:`forward` for ``await integrator.acall(...)``: the one call goes through the LM's async path."""
        inputs = self._inputs(problem, answer_format, messages, views, rollout)
        return _answer(await acall_stage(self.integrate, **inputs), inputs["config"])


@saveable
class IndependentSolver(ThreadedAsync, dspy.Module):
    """Answers with no messages: ``forward(problem, answer_format, rollout=None)`` -> ``Prediction(answer, ...)``
    as the :class:`Integrator`'s (same temperature default, same ``prompt`` choice and output budget: step by step
    with the authors' prompt)."""

    def __init__(self, temperature: float | None = DEFAULT_INTEGRATOR_TEMPERATURE, vary_seed: bool = False,
                 prompt: str = DEFAULT_PROMPT, max_tokens: int | None = None):
        super().__init__()
        self.temperature, self.vary_seed, self.prompt = temperature, vary_seed, _check_prompt(prompt)
        self.max_tokens = resolve_max_tokens(prompt, max_tokens)
        self.solve = dspy.Predict(SolveStepByStep if prompt == "authors" else SolveProblem)

    def forward(self, problem: str, answer_format: str, rollout: str | None = None) -> dspy.Prediction:
        config = sampling_config(rollout, self.temperature, self.vary_seed, self.max_tokens)
        out = self.solve(problem=problem, answer_format=answer_format, config=config)
        return _answer(out, config)


def _answer(out: Any, config: dict[str, Any]) -> dspy.Prediction:
    answer, reasoning = str(out.answer or "").strip(), str(out.reasoning or "")
    return dspy.Prediction(answer=answer, reasoning=reasoning, response=full_response(reasoning, answer),
                           rollout_id=config.get("rollout_id"))


@saveable
class DiverseHypothesisDeliberation(ThreadedAsync, dspy.Module):
    """The DHD program: roles, independent messages, integration.

    Args:
        k: roles and messages per problem (default 5).
        recruiter_temperature, hypothesizer_temperature, integrator_temperature: each stage's sampling temperature
            (defaults 0, 0.7, 0; ``None``: the LM's own; see the module notes). The solver uses the integrator's.
        integrator_prompt: ``"authors"`` (default) or ``"compact"``: the integrator's and the solver's prompt.
        integrator_max_tokens: their output budget per call (default: 4,096 with the authors' prompt, the LM's own
            with the compact one).
        confidence: how hypothesizers state their confidence, ``"level"`` (default) or ``"number"``.
        vary_seed: derive the sampling seed from the rollout key too (see the module notes).
        max_workers: threads for the concurrent hypothesizer calls.
        temperature: the earlier single setting, an alias of ``integrator_temperature`` (used when given).

    ``forward(problem, answer_format="", k=None)`` -> ``Prediction(roles, messages, answer, reasoning, trace)``.
    The stages are also available alone: :meth:`generate`, :meth:`integrate`, :meth:`solve`.
    """

    def __init__(self, k: int = DEFAULT_K, *, recruiter_temperature: float | None = DEFAULT_RECRUITER_TEMPERATURE,
                 hypothesizer_temperature: float | None = DEFAULT_HYPOTHESIZER_TEMPERATURE,
                 integrator_temperature: float | None = DEFAULT_INTEGRATOR_TEMPERATURE, vary_seed: bool = False,
                 max_workers: int = 8, temperature: float | None = None, integrator_prompt: str = DEFAULT_PROMPT,
                 integrator_max_tokens: int | None = None, confidence: str = DEFAULT_CONFIDENCE):
        super().__init__()
        if k < 1:
            raise ValueError("k must be at least 1")
        if temperature is not None:
            integrator_temperature = temperature
        self.k, self.max_workers = k, max_workers
        self.recruiter = Recruiter(temperature=recruiter_temperature)
        self.hypothesizer = Hypothesizer(temperature=hypothesizer_temperature, confidence=confidence)
        self.integrator = Integrator(temperature=integrator_temperature, vary_seed=vary_seed,
                                     prompt=integrator_prompt, max_tokens=integrator_max_tokens)
        self.solver = IndependentSolver(temperature=integrator_temperature, vary_seed=vary_seed,
                                        prompt=integrator_prompt, max_tokens=integrator_max_tokens)

    @property
    def temperatures(self) -> dict[str, float | None]:
        """``{"recruiter", "hypothesizer", "integrator"}``: the temperature each stage sends."""
        return {"recruiter": self.recruiter.temperature, "hypothesizer": self.hypothesizer.temperature,
                "integrator": self.integrator.temperature}

    @property
    def prompts(self) -> dict[str, Any]:
        """``{"integrator", "integrator_max_tokens", "confidence"}``: the prompt choices the stages use."""
        return {"integrator": self.integrator.prompt, "integrator_max_tokens": self.integrator.max_tokens,
                "confidence": self.hypothesizer.confidence}

    def generate(self, problem: str, answer_format: str = "", k: int | None = None,
                 problem_id: str = "") -> dspy.Prediction:
        """Roles, then one message per role (concurrently). A failed hypothesizer gives a message with ``error``.

        Returns ``Prediction(roles, padded, messages)`` with ``messages`` a list of
        :class:`~groundstate.records.HypothesisMessage` in role order (``index`` 0..K-1).
        """
        k = self.k if k is None else k
        recruited = self.recruiter(problem=problem, answer_format=answer_format, k=k)

        def hypothesize(item: tuple[int, str]) -> HypothesisMessage:
            index, role = item
            try:
                out = self.hypothesizer(problem=problem, answer_format=answer_format, role=as_data(role))
            except Exception as exc:  # one failed hypothesizer is recorded on its message; the others stand
                logger.debug("hypothesizer %d failed: %s", index, exc)
                return HypothesisMessage(problem_id=problem_id, index=index, role=role,
                                         error=f"{type(exc).__name__}: {exc}"[:500])
            return HypothesisMessage(problem_id=problem_id, index=index, role=role,
                                     **{k: out[k] for k in ("proposed_answer", "confidence", "confidence_note",
                                                            *dict(_FIELD_LABELS))})

        messages = thread_map(hypothesize, list(enumerate(recruited.roles)), self.max_workers)
        return dspy.Prediction(roles=list(recruited.roles), padded=recruited.padded, messages=messages)

    def integrate(self, problem: str, answer_format: str, messages: Sequence[HypothesisMessage],
                  views: Sequence[str] | None = None, rollout: str | None = None) -> dspy.Prediction:
        """The integrator over ``messages`` (under ``views``); an empty pool is solved independently."""
        if not messages:
            return self.solver(problem=problem, answer_format=answer_format, rollout=rollout)
        return self.integrator(problem=problem, answer_format=answer_format, messages=messages, views=views,
                               rollout=rollout)

    def solve(self, problem: str, answer_format: str, rollout: str | None = None) -> dspy.Prediction:
        """The independent solver (no messages)."""
        return self.solver(problem=problem, answer_format=answer_format, rollout=rollout)

    def forward(self, problem: str, answer_format: str = "", k: int | None = None) -> dspy.Prediction:
        generated = self.generate(problem, answer_format, k)
        pool = [m for m in generated.messages if m.error is None]
        out = self.integrate(problem, answer_format, pool)
        trace = {"roles": generated.roles, "padded_roles": generated.padded,
                 "failed_messages": [m.index for m in generated.messages if m.error is not None]}
        return dspy.Prediction(roles=generated.roles, messages=generated.messages, answer=out.answer,
                               reasoning=out.reasoning, trace=trace)
