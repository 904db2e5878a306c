"""The deterministic, LM-free OffQuery builder from MediQ cases (no LM; corrupts facts with rules).

:func:`build_rule` distributes a case's facts over department agents
(:func:`~groundstate.eval.benchmarks.offquery.mediq.partition_case`), gives one agent a corrupted version of its
evidence (:func:`~groundstate.eval.benchmarks.offquery.corruption.corrupt_fact`), corrupts the shared context,
and labels balanced T2 facts. Its choices are our design where the paper is silent
(the paper's builder is an LM; see :mod:`~groundstate.eval.benchmarks.offquery.mediq_lm`): the corruption does
not target a particular wrong option.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.offquery.corruption import (
    Corruption,
    applicable_strategies,
    corrupt_fact_detailed,
)
from groundstate.eval.benchmarks.offquery.mediq import DEPARTMENTS, CasePartition, MediQCase, partition_case
from groundstate.records import AgentEvidence, OffQueryInstance, T2Fact

logger = logging.getLogger(__name__)


@dataclass
class BuildReport:
    """What a builder did beyond the instances it returned.

    Attributes:
        built: the number of instances built.
        skipped: ``{"case_id", "reason"}`` per skipped case.
        rejections: ``{"case_id", "attempt", "reason"}`` per rejected LM attempt (LM builder only).
        failures: ``{"case_id", "error"}`` per case whose LM calls raised (LM builder only; also in ``skipped``).
    """

    built: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences (at ``.``, ``!`` or ``?`` followed by a capital letter or a digit)."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", text.strip())
    return [p.strip() for p in parts if len(p.strip()) > 3]


def balanced_t2(rng: random.Random, false: list[str], reliable: list[str], max_t2_facts: int,
                 preferred: Sequence[str] = (), originals: dict[str, str] | None = None) -> list[T2Fact]:
    """``n`` false statements (label 0) and ``n`` reliable facts (label 1), shuffled, with
    ``n = min(#false, #reliable, max_t2_facts // 2)``.

    The reliable facts are, in order of preference: the originals of the sampled false statements
    (``originals`` maps a false statement to the fact it corrupts), the ``preferred`` facts, then a random sample
    of the rest of ``reliable``.
    """
    originals = originals or {}
    false = list(dict.fromkeys(false))
    excluded = {t.lower() for t in false}
    pool = [t for t in dict.fromkeys([*preferred, *reliable]) if t.lower() not in excluded]
    n = min(len(false), len(pool), max_t2_facts // 2)
    zeros = rng.sample(false, n)
    first = list(dict.fromkeys([originals[z] for z in zeros if originals.get(z) in pool]
                               + [t for t in preferred if t in pool]))[:n]
    rest = [t for t in pool if t not in first]
    ones = first + rng.sample(rest, n - len(first))
    facts = [T2Fact(text=t, label=1) for t in ones] + [T2Fact(text=t, label=0) for t in zeros]
    rng.shuffle(facts)
    return facts


def check_t2_budget(max_t2_facts: int) -> None:
    if max_t2_facts < 2:
        raise ConfigError(f"max_t2_facts must be at least 2 (one fact per label), got {max_t2_facts}")


def agents_of(partition: CasePartition, replace: dict[int, str] | None = None) -> list[AgentEvidence]:
    replace = replace or {}
    return [AgentEvidence(agent=i, role=role, evidence=replace.get(i, " ".join(facts)))
            for i, (role, facts) in enumerate(partition.agents)]


def _corrupt_new(text: str, rng: random.Random, forbidden: set[str]) -> Corruption | None:
    """A corruption of ``text`` whose result is not one of the case's facts (compared case-insensitively)."""
    corruption = corrupt_fact_detailed(text, rng)
    if corruption is None or corruption.corrupted.lower() in forbidden:
        return None
    return corruption


def _build_rule_case(case: MediQCase, seed: int, min_agents: int, max_agents: int, min_agent_facts: int,
                     max_t2_facts: int) -> OffQueryInstance | str:
    partition = partition_case(case.facts, min_agents, max_agents, min_agent_facts)
    if isinstance(partition, str):
        return partition
    rng = random.Random(f"{seed}:{case.id}")
    corruptible = [[j for j, fact in enumerate(facts) if applicable_strategies(fact)]
                   for _, facts in partition.agents]
    candidates = [i for i, found in enumerate(corruptible) if found]
    if not candidates:
        return "no agent has a fact the corruption rules can change"
    misleading = rng.choice(candidates)
    role, facts = partition.agents[misleading]
    forbidden = {fact.lower() for fact in case.facts}

    # 1-3 of the misleading agent's facts are replaced by corrupted versions; when no other agent has a
    # corruptible fact, one of the misleading agent's is kept back for the shared context
    others = [(i, j) for i, found in enumerate(corruptible) if i != misleading for j in found]
    available = len(corruptible[misleading]) - (0 if others else 1)
    if available < 1:
        return "only one fact can be corrupted, but the agent and the shared context each need one"
    wanted = rng.randint(1, min(3, available))
    order = rng.sample(corruptible[misleading], len(corruptible[misleading]))
    in_agent: dict[int, Corruption] = {}
    for j in order:
        if len(in_agent) == wanted:
            break
        corruption = _corrupt_new(facts[j], rng, forbidden)
        if corruption is not None:
            in_agent[j] = corruption
            forbidden.add(corruption.corrupted.lower())
    if not in_agent:
        return f"no corruption of the {role} agent's facts differs from every fact of the case"
    evidence = " ".join(in_agent[j].corrupted if j in in_agent else fact for j, fact in enumerate(facts))

    # 1-2 corrupted facts from other agents' domains join the shared context (the misleading agent's own
    # uncorrupted facts are the fallback when no other agent has a corruptible fact)
    pool = others or [(misleading, j) for j in corruptible[misleading] if j not in in_agent]
    wanted_shared = rng.randint(1, 2)
    in_shared: list[tuple[int, Corruption]] = []
    for i, j in rng.sample(pool, len(pool)):
        if len(in_shared) == wanted_shared:
            break
        corruption = _corrupt_new(partition.agents[i][1][j], rng, forbidden)
        if corruption is not None:
            in_shared.append((i, corruption))
            forbidden.add(corruption.corrupted.lower())
    if not in_shared:
        return "no fact outside the misleading agent's corrupted ones can be corrupted for the shared context"
    corrupted_context = " ".join([partition.shared_context, *(c.corrupted for _, c in in_shared)]).strip()

    agent_corruptions = [in_agent[j] for j in sorted(in_agent)]
    false = [c.corrupted for c in agent_corruptions] + [c.corrupted for _, c in in_shared]
    originals = {c.corrupted: c.original for c in [*agent_corruptions, *(c for _, c in in_shared)]}
    t2 = balanced_t2(rng, false, list(case.facts), max_t2_facts, originals=originals)
    corrupted = ([{**c.as_dict(), "target": "agent", "agent": misleading, "role": role} for c in agent_corruptions]
                 + [{**c.as_dict(), "target": "shared", "agent": i, "role": partition.agents[i][0]}
                    for i, c in in_shared])
    return OffQueryInstance(
        id=f"mediq-{case.id}-rule-s{seed}",
        domain="healthcare",
        agents=agents_of(partition, {misleading: evidence}),
        shared_context=partition.shared_context,
        corrupted_context=corrupted_context,
        question=case.question,
        options=dict(case.options),
        answer=case.gold,
        wrong_answer=None,
        misleading=[misleading],
        t2_facts=t2,
        variant="main",
        provenance={"source": "mediq", "case_id": case.id, "builder": "rule", "seed": seed, "corrupted": corrupted},
    )


def build_rule(cases: Iterable[MediQCase], seed: int = 0, min_agents: int = 3, max_agents: int = len(DEPARTMENTS),
               max_t2_facts: int = 10, min_agent_facts: int = 1,
               report: BuildReport | None = None) -> list[OffQueryInstance]:
    """Build OffQuery instances from MediQ cases with deterministic rules (no LM).

    Per case: the facts are partitioned with :func:`partition_case` (one agent per department with facts; the
    shared context is the demographics and the chief complaint). The misleading agent is chosen with
    ``random.Random(f"{seed}:{case.id}")`` among the agents that hold at least one fact
    :func:`~groundstate.eval.benchmarks.offquery.corruption.corrupt_fact` can change; 1-3 of its facts are replaced by
    corrupted versions in its evidence. The corrupted shared context is the reliable shared context followed by
    1-2 corrupted versions of facts from *other* agents' domains, stated as if known: this makes the shared
    context conflict with the reliable global state (and with a reliable agent), as the paper's corrupted
    shared context does, while the misleading agent stays the only misleading private source. T2 facts are the
    corrupted statements (label 0) and reliable facts (label 1, the originals of the sampled corruptions first),
    in equal numbers, at most ``max_t2_facts`` in all, sampled and shuffled with the same random source.

    The rule builder corrupts facts, not the decision: it does **not** target a particular wrong option, so
    ``wrong_answer`` is ``None`` (use :func:`build_lm` for instances that push a chosen wrong option).

    Cases that cannot be built (too few departments, nothing corruptible) are skipped; each is logged and, when
    ``report`` is given, recorded in ``report.skipped``.

    Args:
        cases: MediQ cases (:func:`load_mediq`).
        seed: the seed; the same seed gives identical instances.
        min_agents: the fewest agents per instance.
        max_agents: the most agents per instance.
        max_t2_facts: the most T2 facts per instance (at least 2).
        min_agent_facts: see :func:`partition_case`.
        report: receives the number built and the skipped cases with reasons.

    Returns:
        One instance per buildable case, in case order, with ids ``mediq-<case id>-rule-s<seed>``.
    """
    check_t2_budget(max_t2_facts)
    report = report if report is not None else BuildReport()
    instances = []
    for case in cases:
        result = _build_rule_case(case, seed, min_agents, max_agents, min_agent_facts, max_t2_facts)
        if isinstance(result, str):
            logger.info("mediq rule builder: case %s skipped: %s", case.id, result)
            report.skipped.append({"case_id": case.id, "reason": result})
            continue
        instances.append(result)
    report.built += len(instances)
    return instances
