"""A seeded, LM-free generator of OffQuery-style instances whose answers are provably right.

**The decision rule.** Every option is a hypothesis defined by criteria (attribute = value), listed in the
option text. A set of facts fixes a value per attribute (a later fact about an attribute overrides an
earlier one). An option's score is the share of its criteria the facts satisfy; the answer is the option
with the highest score, and a tie means "no answer". :func:`reference_solve` applies the rule to an
attribute -> value mapping, :func:`solve_texts` to fact sentences (it parses the generator's sentences).

**How an instance is made.** Pick a correct hypothesis *c* and a wrong one *w* that disagree on at least one
attribute (a *pivot*), and two distractors. The reliable world satisfies every criterion of *c* and all of
*w*'s criteria except the pivots, so *w* is the plausible near miss. Corrupting the pivots to *w*'s values
makes *w* win instead. Attributes are observed by roles (departments, stakeholders), one agent per role.
Pivot facts are also stated by a second agent (a corroborating cross-reference), so misleading evidence
always contradicts some other agent. Every instance is checked with the rule before it is returned:
reliable facts -> the correct option; reliable facts overridden by the corrupted ones -> the wrong option.

**Variants.**

- ``main``: one misleading agent (the owner of the pivots) reports corrupted values (and, where the rule
  allows, one more false value of its own); the corrupted shared context repeats the corrupted pivot
  facts (it supports the wrong option without naming it).
- ``misleading-shared``: every agent is reliable; only the corrupted shared context carries the corruption
  (T1's gold answer is "no misleading agent").
- ``multi-misleading``: three misleading agents (the pivot owner and two agents echoing its false values),
  at least two reliable agents stating the true values.
- ``distributed``: at least two corrupted statements, each in a different agent whose other evidence is
  reliable (statement-level misinformation, listed in ``misleading_statements``).

T2 facts are a balanced sample (equal numbers of label 1 and 0, at most 10 for healthcare and 16 for
disaster): reliable sentences (the true pivot values first) and corrupted sentences. Everything is
deterministic given ``(domain, variant, seed, index)``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from typing import Any

from groundstate.eval.benchmarks.offquery.domains import COMPLAINTS, DOMAINS, EVENTS, TOWNS, Domain, Hypothesis
from groundstate.records import LETTERS, AgentEvidence, OffQueryInstance, T2Fact

VARIANTS = ("main", "misleading-shared", "multi-misleading", "distributed")
MAX_ATTEMPTS = 2000


# ---------------------------------------------------------------------------------------------------------
# The rule
# ---------------------------------------------------------------------------------------------------------


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
# The generator
# ---------------------------------------------------------------------------------------------------------


def generate(domain: str = "healthcare", variant: str = "main", n: int = 10, seed: int = 0,
             start: int = 0) -> list[OffQueryInstance]:
    """``n`` instances of ``domain`` (healthcare | disaster) and ``variant`` (see the module docstring)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain '{domain}'; choose from {sorted(DOMAINS)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant '{variant}'; choose from {list(VARIANTS)}")
    if n < 0:
        raise ValueError("n must be >= 0")
    return [generate_one(domain, variant, seed, i) for i in range(start, start + n)]


def generate_one(domain: str, variant: str, seed: int, index: int) -> OffQueryInstance:
    """One instance, fully determined by its arguments."""
    dom = DOMAINS[domain]
    rng = random.Random(f"offquery-synthetic:{domain}:{variant}:{seed}:{index}")
    for _ in range(MAX_ATTEMPTS):
        built = _attempt(dom, variant, rng, seed, index)
        if built is not None:
            return built
    raise RuntimeError(f"could not generate a valid {domain}/{variant} instance (seed {seed}, index {index})")


def _attempt(dom: Domain, variant: str, rng: random.Random, seed: int, index: int) -> OffQueryInstance | None:
    hyps = list(dom.hypotheses)
    correct, wrong = rng.sample(hyps, 2)
    pivots = [a for a in correct.criteria if a in wrong.criteria and correct.criteria[a] != wrong.criteria[a]]
    if len(pivots) < (2 if variant == "distributed" else 1):
        return None
    distractors = rng.sample([h for h in hyps if h not in (correct, wrong)], 2)
    chosen: list[Hypothesis] = [correct, wrong, *distractors]
    rng.shuffle(chosen)
    letters = dict(zip(LETTERS, chosen, strict=True))
    criteria = {k: dict(h.criteria) for k, h in letters.items()}
    answer = next(k for k, h in letters.items() if h is correct)
    wrong_letter = next(k for k, h in letters.items() if h is wrong)

    # the reliable world: c fully satisfied, w satisfied off the pivots, the rest at random
    world: dict[str, str] = dict(correct.criteria)
    for a, v in wrong.criteria.items():
        world.setdefault(a, v)
    for h in distractors:
        for a in h.criteria:
            if a not in world:
                world[a] = rng.choice(sorted(dom.attributes[a].values))

    # which pivots get corrupted, and who owns them
    owners = {a: dom.attributes[a].role for a in pivots}
    if variant in ("main", "multi-misleading"):
        bad_role = rng.choice(sorted(set(owners.values())))
        flips = [a for a in pivots if owners[a] == bad_role]
    else:
        bad_role = None
        flips = list(pivots)
    corrupted = {a: wrong.criteria[a] for a in flips}

    # enough agents: add neutral attributes of roles not yet present
    wanted = {"multi-misleading": 6, "distributed": 5}.get(variant, rng.choice((4, 5)))
    roles = sorted({dom.attributes[a].role for a in world})
    spare = [a for a in dom.attributes.values() if a.name not in world and a.role not in roles]
    rng.shuffle(spare)
    for attribute in spare:
        if len(roles) >= wanted:
            break
        if attribute.role in roles:
            continue
        world[attribute.name] = rng.choice(sorted(attribute.values))
        roles.append(attribute.role)
    if len(roles) < wanted:
        return None

    # up to two more false values: of the misleading agent's own attributes (main / multi-misleading) and in
    # the corrupted shared context, each kept only if the rule still picks the wrong option
    # (a lie never un-satisfies one of w's criteria: it moves a value toward w or away from c)
    def add_lies(pool: list[str], base: dict[str, str]) -> dict[str, str]:
        pool = sorted(a for a in pool if wrong.criteria.get(a) != world[a])
        rng.shuffle(pool)
        lies = dict(base)
        for a in pool:
            if len(lies) - len(base) >= 2:
                break
            other = [v for v in sorted(dom.attributes[a].values) if v != world[a]]
            candidate = {**lies, a: wrong.criteria.get(a) or rng.choice(other)}
            if reference_solve({**world, **candidate}, criteria) == wrong_letter:
                lies = candidate
        return lies

    if bad_role is not None:
        corrupted_private = add_lies([a for a in world if dom.attributes[a].role == bad_role and a not in corrupted],
                                     corrupted)
    else:
        corrupted_private = {} if variant == "misleading-shared" else dict(corrupted)
    corrupted_shared = add_lies([a for a in world if a not in corrupted_private], corrupted)
    if reference_solve(world, criteria) != answer:
        return None
    for view in (corrupted_private, corrupted_shared):
        if view and reference_solve({**world, **view}, criteria) != wrong_letter:
            return None

    return _assemble(dom, variant, rng, seed, index, letters, criteria, answer, wrong_letter, world, roles,
                     bad_role, flips, corrupted_private, corrupted_shared)


def _sentence(dom: Domain, attribute: str, value: str, rng: random.Random) -> str:
    return rng.choice(dom.attributes[attribute].values[value].sentences)


def _assemble(dom, variant, rng, seed, index, letters, criteria, answer, wrong_letter, world, roles, bad_role,
              flips, corrupted_private, corrupted_shared) -> OffQueryInstance | None:
    rng.shuffle(roles)
    if bad_role is not None:  # keep the misleading agent somewhere random but not always first
        roles.remove(bad_role)
        roles.insert(rng.randrange(len(roles) + 1), bad_role)
    by_role: dict[str, list[str]] = {r: [] for r in roles}
    true_text = {a: _sentence(dom, a, v, rng) for a, v in world.items()}

    # shared facts: one or two attributes that are neither corrupted nor the only fact of their role
    candidates = [a for a in world if a not in corrupted_private and a not in corrupted_shared]
    rng.shuffle(candidates)
    shared_attrs: list[str] = []
    counts = {r: sum(dom.attributes[a].role == r for a in world) for r in roles}
    for a in candidates:
        role = dom.attributes[a].role
        if counts[role] > 1 and len(shared_attrs) < rng.choice((1, 2)):
            shared_attrs.append(a)
            counts[role] -= 1
    for a in world:
        if a not in shared_attrs:
            by_role[dom.attributes[a].role].append(a)

    statements: dict[str, list[str]] = {r: [] for r in roles}
    true_statements: dict[str, list[str]] = {r: [] for r in roles}  # each agent's evidence without its lies
    for role in roles:
        for a in by_role[role]:
            value = corrupted_private.get(a, world[a]) if role == bad_role else world[a]
            statements[role].append(_sentence(dom, a, value, rng) if value != world[a] else true_text[a])
            true_statements[role].append(true_text[a])

    misleading_roles: list[str] = []
    misleading_statements: list[str] = []
    others = [r for r in roles if r != bad_role]
    prefixes = dom.corroboration_prefixes

    def cross(role: str, attribute: str, value: str) -> str:
        text = rng.choice(prefixes) + _sentence(dom, attribute, value, rng)
        statements[role].append(text)
        if value == world[attribute]:
            true_statements[role].append(text)
        return text

    owner_of = {a: dom.attributes[a].role for a in flips}
    if variant == "main":
        misleading_roles = [bad_role]
        for a in flips:
            cross(rng.choice(others), a, world[a])
    elif variant == "misleading-shared":
        for a in flips:
            cross(rng.choice([r for r in roles if r != owner_of[a]]), a, world[a])
    elif variant == "multi-misleading":
        echoes = rng.sample(others, 2)
        misleading_roles = [bad_role, *echoes]
        reliable = [r for r in others if r not in echoes]
        if len(reliable) < 2:
            return None
        for a in flips:
            for role in echoes:
                cross(role, a, corrupted_private[a])
            for role in rng.sample(reliable, 2):
                cross(role, a, world[a])
    elif variant == "distributed":
        pool = [r for r in roles if r not in owner_of.values()]
        if len(pool) < len(flips):
            return None
        carriers = rng.sample(pool, len(flips))
        for a, role in zip(flips, carriers, strict=True):
            misleading_statements.append(cross(role, a, corrupted_shared[a]))
        misleading_roles = carriers

    for role in roles:
        rng.shuffle(statements[role])
    reliable_evidence = {str(roles.index(r)): " ".join(true_statements[r]) for r in misleading_roles}

    # shared contexts
    if dom.name == "healthcare":
        setting = dom.settings[0].format(age=rng.randint(24, 88), sex=rng.choice(("man", "woman")),
                                         complaint=rng.choice(COMPLAINTS))
    else:
        setting = dom.settings[0].format(day=rng.randint(1, 5), event=rng.choice(EVENTS), town=rng.choice(TOWNS))
    shared_sentences = [setting] + [true_text[a] for a in shared_attrs]
    shared = " ".join(shared_sentences)
    corrupt_sentences = [_sentence(dom, a, v, rng) for a, v in corrupted_shared.items()
                         if variant != "distributed" or a not in flips[1:]]
    corrupted_context = " ".join(shared_sentences + corrupt_sentences)

    # T2 facts: balanced, true pivot values first among the positives
    negatives = list(dict.fromkeys(
        [_canonical(dom, a, v) for a, v in {**corrupted_private, **corrupted_shared}.items()]))
    positives = list(dict.fromkeys([_canonical(dom, a, world[a]) for a in flips]
                                   + [_canonical(dom, a, world[a]) for a in shared_attrs]
                                   + [_canonical(dom, a, world[a]) for a in rng.sample(sorted(world), len(world))]))
    k = min(len(negatives), len(positives), dom.max_t2_facts // 2)
    negatives = rng.sample(negatives, k)
    facts = [T2Fact(text=t, label=1) for t in positives[:k]] + [T2Fact(text=t, label=0) for t in negatives]
    rng.shuffle(facts)

    agents = [AgentEvidence(agent=i, role=r, evidence=" ".join(statements[r])) for i, r in enumerate(roles)]
    misleading = sorted(roles.index(r) for r in misleading_roles)
    structure = {
        "criteria": criteria,
        "reliable": dict(world),
        "corrupted_private": dict(corrupted_private),
        "corrupted_shared": dict(corrupted_shared),
        "pivots": list(flips),
        "shared_attributes": shared_attrs,
        "reliable_evidence": reliable_evidence,
    }
    return OffQueryInstance(
        id=f"synthetic-{dom.name}-{variant}-s{seed}-{index:05d}",
        domain=dom.name,
        split="synthetic",
        agents=agents,
        shared_context=shared,
        corrupted_context=corrupted_context,
        question=dom.question,
        options={k: dom.option_text(h) for k, h in letters.items()},
        answer=answer,
        wrong_answer=wrong_letter,
        misleading=misleading,
        misleading_statements=misleading_statements,
        t2_facts=facts,
        variant=variant,
        provenance={"source": "synthetic", "generator": "groundstate.synthetic/1", "seed": seed, "index": index,
                    "structure": structure},
    )


def _canonical(dom: Domain, attribute: str, value: str) -> str:
    return dom.attributes[attribute].values[value].sentences[0]


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
