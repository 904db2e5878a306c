"""The LM OffQuery builder of appendix B.2 and the HEALTHCARE-S / HEALTHCARE-I sufficiency tagging of appendix D.1.

:func:`build_lm` has an LM (:class:`~groundstate.programs.reground.builder.OffQueryLMBuilder`) write the misleading
evidence and the corrupted context for a target wrong option, checks the result and retries; :func:`tag_sufficiency`
asks an LM to answer from the shared context alone and tags the split by whether it is right.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterable
from typing import Any

from groundstate.concurrency import thread_map
from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.offquery.mediq import (
    DEPARTMENTS,
    SPLIT_INSUFFICIENT,
    SPLIT_SUFFICIENT,
    MediQCase,
    partition_case,
)
from groundstate.eval.benchmarks.offquery.mediq_rule import (
    BuildReport,
    agents_of,
    balanced_t2,
    check_t2_budget,
    split_sentences,
)
from groundstate.records import LETTERS, OffQueryInstance, default_question, options_text

logger = logging.getLogger(__name__)


def _validate_lm_output(prediction: Any, case: MediQCase, shared_context: str) -> str | None:
    """Why an LM builder output is unusable, or ``None`` if it is usable."""
    wrong = getattr(prediction, "wrong_answer", None)
    if wrong not in LETTERS:
        return f"wrong_answer {wrong!r} is not an option letter"
    if wrong == case.gold:
        return f"the 'incorrect' decision {wrong} is the correct answer"
    misleading = (getattr(prediction, "misleading_text", None) or "").strip()
    if not misleading:
        return "the misleading evidence is empty"
    if not getattr(prediction, "conflicts", False):
        return "the conflict check found no conflict between the misleading evidence and the reliable context"
    corrupted = (getattr(prediction, "corrupted_context", None) or "").strip()
    if not corrupted:
        return "the corrupted shared context is empty"
    if corrupted == shared_context.strip():
        return "the corrupted shared context is the reliable one"
    if case.options[wrong].strip().lower() in corrupted.lower():
        return f"the corrupted shared context names the incorrect option ({case.options[wrong]})"
    return None


def _attempt_context(attempt: int):
    """Later attempts use a fresh rollout at temperature 1 so a retry is not served from the cache."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    lm = dspy.settings.lm
    if attempt == 0 or lm is None or not hasattr(lm, "copy"):
        return contextlib.nullcontext()
    return dspy.context(lm=lm.copy(rollout_id=attempt, temperature=1.0))


def _build_lm_case(case: MediQCase, builder: Any, seed: int, max_retries: int, min_agents: int, max_agents: int,
                   min_agent_facts: int, max_t2_facts: int, rejections: list[dict]) -> OffQueryInstance | str:
    partition = partition_case(case.facts, min_agents, max_agents, min_agent_facts)
    if isinstance(partition, str):
        return partition
    rng = random.Random(f"{seed}:{case.id}:lm")
    misleading = rng.randrange(len(partition.agents))
    role, facts = partition.agents[misleading]
    shared = partition.shared_context
    prediction, attempts = None, 0
    for attempt in range(max_retries + 1):
        attempts = attempt + 1
        with _attempt_context(attempt):
            candidate = builder(case_context=case.context_text, question=case.question, options=dict(case.options),
                                correct_answer=case.gold, department=role, department_facts=" ".join(facts),
                                shared_context=shared)
        reason = _validate_lm_output(candidate, case, shared)
        if reason is None:
            prediction = candidate
            break
        logger.info("mediq LM builder: case %s attempt %d rejected: %s", case.id, attempts, reason)
        rejections.append({"case_id": case.id, "attempt": attempts, "reason": reason})
    if prediction is None:
        return f"every LM attempt was rejected ({attempts} attempt(s))"
    misleading_text = prediction.misleading_text.strip()
    reliable = {f.lower() for f in case.facts}
    false = [s for s in split_sentences(misleading_text) if s.lower() not in reliable] or [misleading_text]
    t2 = balanced_t2(rng, false, list(case.facts), max_t2_facts, preferred=facts)
    case_rejections = [r for r in rejections if r["case_id"] == case.id]
    return OffQueryInstance(
        id=f"mediq-{case.id}-lm-s{seed}",
        domain="healthcare",
        agents=agents_of(partition, {misleading: misleading_text}),
        shared_context=shared,
        corrupted_context=prediction.corrupted_context.strip(),
        question=case.question,
        options=dict(case.options),
        answer=case.gold,
        wrong_answer=prediction.wrong_answer,
        misleading=[misleading],
        t2_facts=t2,
        variant="main",
        provenance={
            "source": "mediq", "case_id": case.id, "builder": "lm", "seed": seed, "department": role,
            "replaced_facts": list(facts), "reason": getattr(prediction, "reason", None),
            "conflicting_points": list(getattr(prediction, "conflicting_points", None) or []),
            "attempts": attempts, "rejections": [{k: r[k] for k in ("attempt", "reason")} for r in case_rejections],
        },
    )


def build_lm(cases: Iterable[MediQCase], seed: int = 0, builder: Any = None, max_retries: int = 1,
             skip_failed: bool = True, min_agents: int = 3, max_agents: int = len(DEPARTMENTS),
             max_t2_facts: int = 10, min_agent_facts: int = 1, threads: int = 4,
             report: BuildReport | None = None) -> list[OffQueryInstance]:
    """Build OffQuery instances from MediQ cases with an LM (appendix B.2), using the LM in ``dspy.settings``.

    The agents are the rule builder's partition (:func:`partition_case`); the misleading agent is chosen with
    ``random.Random(f"{seed}:{case.id}:lm")`` among all agents. The builder program
    (:class:`~groundstate.programs.reground.builder.OffQueryLMBuilder`) fabricates an incorrect decision and
    misleading evidence for that agent's department, writes a corrupted shared context that supports the
    incorrect decision without naming it, and checks that the misleading evidence conflicts with the reliable
    case. An attempt is rejected when the "incorrect" decision is the gold answer, the check finds no conflict,
    the misleading evidence or the corrupted context is empty, the corrupted context equals the reliable one or
    names the incorrect option; a rejected case is retried up to ``max_retries`` times (each retry at a fresh
    rollout, temperature 1) and skipped when every attempt is rejected.

    The misleading agent's evidence is the LM's text; ``corrupted_context`` and ``wrong_answer`` come from the LM.
    T2 facts: reliable facts (label 1; the replaced department facts first) and the sentences of the misleading
    evidence (label 0), balanced, at most ``max_t2_facts``. Rejected attempts are listed in each instance's
    ``provenance["rejections"]`` and, with every skipped or failed case, in ``report``.

    Args:
        cases: MediQ cases.
        seed: the seed (choice of misleading agent, T2 sampling).
        builder: the program; default a fresh ``OffQueryLMBuilder()``.
        max_retries: extra attempts after a rejected one.
        skip_failed: when the LM raises on a case, log it and skip the case (``False`` re-raises).
        min_agents, max_agents, min_agent_facts: see :func:`partition_case`.
        max_t2_facts: the most T2 facts per instance (at least 2).
        threads: cases processed concurrently.
        report: receives the number built, skipped cases, rejected attempts and failures.

    Returns:
        One instance per case that was built, in case order, with ids ``mediq-<case id>-lm-s<seed>``.
    """
    from groundstate.programs.reground.builder import OffQueryLMBuilder  # noqa: PLC0415 (heavy: dspy)

    check_t2_budget(max_t2_facts)
    if max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
    builder = builder if builder is not None else OffQueryLMBuilder()
    report = report if report is not None else BuildReport()
    cases = list(cases)

    def one(case: MediQCase) -> tuple[OffQueryInstance | str, list[dict], str | None]:
        rejections: list[dict] = []
        try:
            result = _build_lm_case(case, builder, seed, max_retries, min_agents, max_agents, min_agent_facts,
                                    max_t2_facts, rejections)
            return result, rejections, None
        except Exception as exc:  # an LM failure on one case never aborts the build
            if not skip_failed:
                raise
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("mediq LM builder: case %s failed and was skipped: %s", case.id, error)
            return f"LM failure: {error}", rejections, error

    instances = []
    for case, (result, rejections, error) in zip(cases, thread_map(one, cases, max_workers=threads), strict=True):
        report.rejections.extend(rejections)
        if error is not None:
            report.failures.append({"case_id": case.id, "error": error})
        if isinstance(result, str):
            if error is None:
                logger.info("mediq LM builder: case %s skipped: %s", case.id, result)
            report.skipped.append({"case_id": case.id, "reason": result})
            continue
        instances.append(result)
    report.built += len(instances)
    return instances


def tag_sufficiency(instances: Iterable[OffQueryInstance], lm: Any = None, threads: int = 4) -> list[OffQueryInstance]:
    """Tag each instance HEALTHCARE-S or HEALTHCARE-I (appendix D.1).

    An LM answers the question (``ChooseOption``) from the *reliable shared context only*; the instance's
    ``split`` becomes ``"healthcare-s"`` when the answer is correct (the shared information suffices) and
    ``"healthcare-i"`` otherwise. The chosen letter is kept in ``provenance["sufficiency"]``. When the LM fails
    on an instance, its ``split`` is ``None``, the error is in ``provenance["split_error"]`` and a warning is
    logged; the other instances are still tagged.

    Args:
        instances: the instances (not modified; tagged copies are returned).
        lm: the LM to ask; default the LM in ``dspy.settings``. The paper uses GPT-4o at temperature 0.
        threads: instances asked concurrently.

    Returns:
        Tagged copies, in the same order.

    Raises:
        ConfigError: no LM is given or configured.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    from groundstate.signatures.resolution import ChooseOption  # noqa: PLC0415 (heavy: dspy)

    if lm is None and dspy.settings.lm is None:
        raise ConfigError("tag_sufficiency needs an LM: pass lm= or configure one with dspy.configure/dspy.context")
    predictor = dspy.Predict(ChooseOption)

    def ask(instance: OffQueryInstance) -> OffQueryInstance:
        provenance = {k: v for k, v in instance.provenance.items() if k not in ("split_error", "sufficiency")}
        try:
            answer = predictor(information=instance.shared_context,
                               question=instance.question or default_question(instance.domain),
                               options=options_text(instance.options)).answer
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("tag_sufficiency: instance %s left untagged: %s", instance.id, error)
            return instance.model_copy(update={"split": None, "provenance": {**provenance, "split_error": error}})
        correct = answer == instance.answer
        provenance["sufficiency"] = {"answer": answer, "correct": correct}
        return instance.model_copy(update={"split": SPLIT_SUFFICIENT if correct else SPLIT_INSUFFICIENT,
                                           "provenance": provenance})

    with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
        tagged = thread_map(ask, list(instances), max_workers=threads)
    failures = sum(1 for t in tagged if t.split is None)
    if failures:
        logger.warning("tag_sufficiency: %d of %d instances could not be tagged", failures, len(tagged))
    return tagged
