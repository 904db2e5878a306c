"""A seeded, LM-free generator of OffQuery-style instances whose answers are provably right.

**The decision rule** (every option is a hypothesis defined by criteria; the answer is the option whose criteria
the facts satisfy best) and :func:`check_instance`, which checks an instance against it, live in
:mod:`~groundstate.eval.benchmarks.offquery.synthetic_rule` and are re-exported here.

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

from groundstate.eval.benchmarks.offquery.domains import COMPLAINTS, DOMAINS, EVENTS, TOWNS, Domain, Hypothesis
from groundstate.eval.benchmarks.offquery.synthetic_rule import (  # noqa: F401 (re-exported: imported from here)
    check_instance,
    instance_world,
    option_scores,
    parse_facts,
    reference_solve,
    solve_texts,
)
from groundstate.records import LETTERS, AgentEvidence, OffQueryInstance, T2Fact

VARIANTS = ("main", "misleading-shared", "multi-misleading", "distributed")
MAX_ATTEMPTS = 2000


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

