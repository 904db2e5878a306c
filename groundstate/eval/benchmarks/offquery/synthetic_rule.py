"""The decision rule of the synthetic OffQuery instances, and the check that an instance keeps its guarantees.

**The decision rule.** Every option is a hypothesis defined by criteria (attribute = value), listed in the
option text. A set of facts fixes a value per attribute (a later fact about an attribute overrides an
earlier one). An option's score is the share of its criteria the facts satisfy; the answer is the option
with the highest score, and a tie means "no answer". :func:`reference_solve` applies the rule to an
attribute -> value mapping, :func:`solve_texts` to fact sentences (it parses the generator's sentences).

:func:`check_instance` checks a generated instance against the rule, from the structure the generator stores in
its provenance *and* from its texts: what the generator
(:mod:`~groundstate.eval.benchmarks.offquery.synthetic`) guarantees, checked again wherever an instance is
loaded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from groundstate.eval.benchmarks.offquery.domains import DOMAINS, Domain
from groundstate.records import OffQueryInstance

__all__ = ["check_instance", "instance_world", "option_scores", "parse_facts", "reference_solve", "solve_texts"]


def option_scores(world: Mapping[str, str], criteria: Mapping[str, Mapping[str, str]]) -> dict[str, float]:
    """Each option's share of satisfied criteria under ``world`` (attribute -> value)."""
    return {letter: sum(world.get(a) == v for a, v in crit.items()) / len(crit) for letter, crit in criteria.items()}


def reference_solve(world: Mapping[str, str], criteria: Mapping[str, Mapping[str, str]]) -> str | None:
    """The option the rule picks for ``world``; ``None`` when the best score is tied."""
    scores = option_scores(world, criteria)
    best = max(scores.values())
    winners = [k for k, v in scores.items() if v == best]
    return winners[0] if len(winners) == 1 else None


_INDEXES: dict[int, tuple[Domain, dict[str, tuple[str, str]]]] = {}  # built once per domain (read on every load)


def _sentence_index(domain: Domain) -> dict[str, tuple[str, str]]:
    if _INDEXES.get(id(domain), (None,))[0] is not domain:
        _INDEXES[id(domain)] = (domain, {_norm(sentence): (attribute.name, key)
                                         for attribute in domain.attributes.values()
                                         for key, value in attribute.values.items() for sentence in value.sentences})
    return _INDEXES[id(domain)][1]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip()).rstrip(".").lower()


_SENTENCE_SPLIT = re.compile(r"(?<=[.])\s+(?=[A-Z])")


def parse_facts(texts: Iterable[str], domain: str | Domain) -> list[tuple[str, str]]:
    """The (attribute, value) pairs stated by the generator's sentences in ``texts``, in order.

    Sentences the generator did not write (setting, demographics) are ignored; a corroboration prefix
    ("Also recorded at handover: ...") is stripped first.
    """
    dom = DOMAINS[domain] if isinstance(domain, str) else domain
    index = _sentence_index(dom)
    found = []
    for text in texts:
        for sentence in _SENTENCE_SPLIT.split(text or ""):
            body = sentence
            for prefix in dom.corroboration_prefixes:
                if body.startswith(prefix):
                    body = body[len(prefix):]
            hit = index.get(_norm(body))
            if hit:
                found.append(hit)
    return found


def solve_texts(texts: Iterable[str], criteria: Mapping[str, Mapping[str, str]], domain: str | Domain) -> str | None:
    """Apply the rule to fact sentences (later statements about an attribute override earlier ones)."""
    return reference_solve(dict(parse_facts(texts, domain)), criteria)

# ---------------------------------------------------------------------------------------------------------
# Checking an instance with the rule
# ---------------------------------------------------------------------------------------------------------


def check_instance(instance: OffQueryInstance) -> list[str]:
    """Every way ``instance`` breaks the generator's guarantees (empty when it is valid).

    Checks, from the stored structure *and* from the texts themselves: reliable facts give the correct
    option; reliable facts overridden by the corrupted ones give the wrong option; the misleading agents
    are exactly the agents that state a false value; T2 facts are balanced, within the limit, and
    corrupted facts differ from reliable ones.
    """
    structure = instance.provenance.get("structure")
    if not structure:
        return ["no generator structure in provenance"]
    try:
        return _check_structure(instance, structure)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError, ZeroDivisionError) as exc:
        # a hand-edited or foreign provenance.structure: report it as a problem of this record
        return [f"provenance.structure is not a generator structure ({type(exc).__name__}: {str(exc)[:80]})"]


def _check_structure(instance: OffQueryInstance, structure: Any) -> list[str]:
    problems: list[str] = []
    dom = DOMAINS[instance.domain]
    criteria, world = structure["criteria"], structure["reliable"]
    if reference_solve(world, criteria) != instance.answer:
        problems.append("reliable world does not give the correct option")
    for key in ("corrupted_private", "corrupted_shared"):
        view = structure[key]
        if view and reference_solve({**world, **view}, criteria) != instance.wrong_answer:
            problems.append(f"{key} does not give the wrong option")
        if any(world.get(a) == v for a, v in view.items()):
            problems.append(f"{key} repeats a reliable value")

    # from the texts
    stated = {i: parse_facts([a.evidence], dom) for i, a in enumerate(instance.agents)}
    liars = sorted(i for i, pairs in stated.items() if any(world.get(a) != v for a, v in pairs))
    if liars != sorted(instance.misleading):
        problems.append(f"agents stating false values {liars} != misleading {instance.misleading}")
    truthful = structure.get("reliable_evidence", {})
    reliable_texts = [instance.shared_context] + [truthful.get(str(a.agent), a.evidence) for a in instance.agents]
    if any(world.get(x) != v for x, v in parse_facts(reliable_texts, dom)):
        problems.append("the reliable versions of the texts state a false value")
    if solve_texts(reliable_texts, criteria, dom) != instance.answer:
        problems.append("reliable texts do not give the correct option")
    if instance.misleading:
        misleading_texts = [a.evidence for a in instance.agents if a.agent in instance.misleading]
        if solve_texts(reliable_texts + misleading_texts, criteria, dom) != instance.wrong_answer:
            problems.append("reliable texts overridden by the misleading agents do not give the wrong option")
    if instance.corrupted_context is not None and instance.corrupted_context != instance.shared_context:
        if solve_texts(reliable_texts + [instance.corrupted_context], criteria, dom) != instance.wrong_answer \
                and instance.variant != "distributed":
            problems.append("the corrupted shared context does not give the wrong option")
    if instance.variant == "distributed":
        carriers = sorted(i for i, a in enumerate(instance.agents)
                          if any(s in a.evidence for s in instance.misleading_statements))
        if carriers != sorted(instance.misleading) or len(instance.misleading_statements) < 2:
            problems.append("distributed statements do not match the misleading agents")

    labels = [f.label for f in instance.t2_facts]
    if labels.count(0) != labels.count(1) or not labels:
        problems.append(f"T2 labels not balanced: {labels}")
    if len(labels) > dom.max_t2_facts:
        problems.append(f"{len(labels)} T2 facts exceed the limit {dom.max_t2_facts}")
    true_facts = {f.text for f in instance.t2_facts if f.label == 1}
    for fact in instance.t2_facts:
        pairs = parse_facts([fact.text], dom)
        if len(pairs) != 1:
            problems.append(f"T2 fact not parseable: {fact.text}")
            continue
        a, v = pairs[0]
        if (world.get(a) == v) != (fact.label == 1):
            problems.append(f"T2 label wrong for: {fact.text}")
        if fact.label == 0 and fact.text in true_facts:
            problems.append(f"corrupted fact equals a reliable one: {fact.text}")
    return problems


def instance_world(instance: OffQueryInstance) -> dict[str, Any]:
    """The generator's stored structure of ``instance`` (criteria, reliable and corrupted values)."""
    return dict(instance.provenance.get("structure") or {})
