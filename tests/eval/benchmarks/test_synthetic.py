from collections import Counter

import pytest
from scipy import stats

from groundstate.eval.benchmarks.offquery.synthetic import (
    VARIANTS,
    check_instance,
    generate,
    parse_facts,
    reference_solve,
    solve_texts,
)

DOMAINS = ("healthcare", "disaster")


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_generator_is_valid_over_many_seeds(domain, variant):
    for seed in range(5):
        for instance in generate(domain, variant, 40, seed=seed):
            assert check_instance(instance) == [], instance.id


@pytest.mark.parametrize("domain", DOMAINS)
def test_reference_solver_proves_reliable_and_corrupted_answers_from_texts(domain):
    for instance in generate(domain, "main", 50, seed=11):
        criteria = instance.provenance["structure"]["criteria"]
        truthful = instance.provenance["structure"]["reliable_evidence"]
        reliable = [instance.shared_context] + [truthful.get(str(a.agent), a.evidence) for a in instance.agents]
        assert solve_texts(reliable, criteria, domain) == instance.answer
        liar = instance.agents[instance.misleading[0]].evidence
        assert solve_texts(reliable + [liar], criteria, domain) == instance.wrong_answer
        # the corrupted shared context alone also pushes the wrong option
        assert solve_texts(reliable + [instance.corrupted_context], criteria, domain) == instance.wrong_answer
        # the misleading evidence contradicts another agent's statement about the same attribute
        liar_pairs = dict(parse_facts([liar], domain))
        others = [p for a in instance.agents if a.agent not in instance.misleading
                  for p in parse_facts([a.evidence], domain)]
        assert any(attr in liar_pairs and liar_pairs[attr] != value for attr, value in others)


def test_checker_catches_broken_instances():
    instance = generate("healthcare", "main", 1, seed=3)[0]
    wrong_answer = instance.model_copy(update={"answer": instance.wrong_answer,
                                               "wrong_answer": instance.answer})
    assert any("correct option" in p for p in check_instance(wrong_answer))
    other = (instance.misleading[0] + 1) % instance.n_agents
    wrong_agent = instance.model_copy(update={"misleading": [other]})
    assert any("misleading" in p for p in check_instance(wrong_agent))
    unbalanced = instance.model_copy(update={"t2_facts": [f for f in instance.t2_facts if f.label == 1]})
    assert any("balanced" in p for p in check_instance(unbalanced))
    flipped = instance.model_copy(update={"t2_facts": [f.model_copy(update={"label": 1 - f.label})
                                                       for f in instance.t2_facts]})
    assert any("T2 label wrong" in p for p in check_instance(flipped))


def test_variants_have_the_declared_misleading_structure():
    assert all(len(x.misleading) == 1 for x in generate("healthcare", "main", 30))
    assert all(x.misleading == [] for x in generate("healthcare", "misleading-shared", 30))
    assert all(len(x.misleading) == 3 for x in generate("disaster", "multi-misleading", 30))
    for x in generate("disaster", "distributed", 30):
        assert len(x.misleading) >= 2 and len(x.misleading_statements) == len(x.misleading)
        for statement in x.misleading_statements:
            holders = [a.agent for a in x.agents if statement in a.evidence]
            assert len(holders) == 1 and holders[0] in x.misleading


def test_t2_facts_balanced_and_bounded():
    for domain, limit in (("healthcare", 10), ("disaster", 16)):
        for x in generate(domain, "main", 60, seed=5):
            labels = Counter(f.label for f in x.t2_facts)
            assert labels[0] == labels[1] >= 1
            assert len(x.t2_facts) <= limit


def test_deterministic_and_seed_dependent():
    a = generate("healthcare", "main", 10, seed=7)
    b = generate("healthcare", "main", 10, seed=7)
    c = generate("healthcare", "main", 10, seed=8)
    assert [x.model_dump() for x in a] == [x.model_dump() for x in b]
    assert [x.model_dump() for x in a] != [x.model_dump() for x in c]
    ids = [x.id for d in DOMAINS for v in VARIANTS for x in generate(d, v, 20)]
    assert len(ids) == len(set(ids))


def test_answers_are_spread_over_the_options():
    answers = Counter(x.answer for x in generate("healthcare", "main", 800, seed=1))
    counts = [answers[k] for k in "ABCD"]
    assert stats.chisquare(counts).pvalue > 0.001, counts


def test_reference_solve_ties_give_no_answer():
    criteria = {"A": {"x": "1", "y": "1"}, "B": {"x": "1", "z": "1"}}
    assert reference_solve({"x": "1", "y": "1"}, criteria) == "A"
    assert reference_solve({"x": "1"}, criteria) is None
