"""Statement mode adjudicates (issue 25, item 2; paper §E.4): each contradicting pair of statements is settled as
agent-level verification settles a pair of sources, and only the side judged misleading is removed."""

import re

import dspy
import pytest

from groundstate.eval.benchmarks.offquery.synthetic import generate, parse_facts
from groundstate.eval.reground.statements import statement_scores
from groundstate.programs.reground.reground import ReGround, VerifyStatements
from groundstate.programs.reground.statements import (
    Statement,
    contradiction_pairs,
    read_contradictions,
    settle,
)
from groundstate.testing import scripted_lm


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=\.)\s+", text or "") if s.strip()]


def claim(text):
    """The (attribute, value) a generated sentence states, or None."""
    found = parse_facts([text], "healthcare")
    return found[0] if found else None


def conflicts(a, b):
    """The symmetric, consistent checker: two statements conflict when they give one attribute two values."""
    ca, cb = claim(a), claim(b)
    return ca is not None and cb is not None and ca[0] == cb[0] and ca[1] != cb[1]


def statement_of(block):
    return block.split("\n- ", 1)[1].strip()


class Checker:
    """Scripted replies: a symmetric contradiction finder (and, for the refuted rule, a symmetric refuter), and an
    adjudicator that is either consistent with the reliable world or always answers ``fixed``."""

    def __init__(self, world, fixed=None):
        self.world, self.fixed = world, fixed
        self.arguments = []

    def __call__(self, req):
        fields = req.output_fields
        if "statements" in fields:
            return {"statements": sentences(req.field("evidence"))}
        if "contradicting" in fields:
            mine = statement_of(req.field("statement"))
            others = [re.match(r"(\d+)\. \[\d+\] Agent \d+: (.*)", line).groups()
                      for line in req.field("others").splitlines()]
            return {"contradicting": [int(n) for n, text in others if conflicts(mine, text)]}
        if "argument" in fields:
            self.arguments.append((statement_of(req.field("target")), req.field("others")))
            return {"argument": f"{req.field('stance')} argument"}
        if "incorrect" in fields:
            if self.fixed:
                return {"incorrect": self.fixed, "reason": "fixed"}
            first = claim(statement_of(req.field("first")))
            return {"incorrect": "first" if self.world.get(first[0]) != first[1] else "second", "reason": "world"}
        if "verdict" in fields and req.field("fact"):  # the refuted rule's symmetric checker
            fact = req.field("fact")
            refuted = any(conflicts(fact, line[2:]) for line in req.field("evidence").splitlines())
            return {"verdict": "refuted" if refuted else "supported", "importance": "high"}
        return None


def distributed(seed=0):
    instance = generate("healthcare", "distributed", 1, seed=seed)[0]
    return instance, instance.provenance["structure"]["reliable"]


def true_counterparts(instance):
    """The reliable statements a planted one contradicts."""
    planted = [claim(p) for p in instance.misleading_statements]
    return [s for a in instance.agents for s in sentences(a.evidence)
            if s not in instance.misleading_statements and any(conflicts(s, p) for p in instance.misleading_statements)
            and claim(s)[0] in {c[0] for c in planted}]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_symmetric_checker_and_a_consistent_adjudicator_remove_only_the_planted_statements(seed):
    instance, world = distributed(seed)
    counterparts = true_counterparts(instance)
    assert counterparts  # the planted statements contradict reliable ones: a symmetric checker sees both sides
    checker = Checker(world)
    lm = scripted_lm(checker)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = ReGround(mode="statement")(**instance.inputs("unreliable"))
    assert sorted(out.misleading_statements) == sorted(instance.misleading_statements)
    assert statement_scores(out.misleading_statements, instance.misleading_statements) == {
        "statement_precision": 1.0, "statement_recall": 1.0}
    assert sorted(out.misleading_agent) == sorted(instance.misleading)
    (rebuilt,) = [r for r in lm.engine.requests if "state" in r.output_fields]
    trusted = rebuilt.field("trusted_statements")
    for statement in counterparts:  # the true side of every contradiction is retained
        assert statement in trusted
    for statement in instance.misleading_statements:
        assert statement not in trusted
    conflicts_seen = [c for c in out.trace["verify"]["conflicts"] if "incorrect" in c]
    assert len(conflicts_seen) >= len(instance.misleading_statements)
    for target, others in checker.arguments:  # arguments use the other standing statements only
        assert target not in others


@pytest.mark.parametrize("seed", [0, 1])
def test_the_earlier_refuted_rule_removes_both_sides_with_the_same_checker(seed):
    """What the adjudication fixes: with the same symmetric checker, flagging every refuted statement removes the
    true side too (precision 0.50 when each planted statement has one true counterpart)."""
    instance, world = distributed(seed)
    lm = scripted_lm(Checker(world))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = VerifyStatements(rule="refuted")(agents=instance.agents)
    scores = statement_scores(out.misleading_statements, instance.misleading_statements)
    assert scores["statement_recall"] == 1.0 and scores["statement_precision"] <= 0.5
    assert any(s in out.misleading_statements for s in true_counterparts(instance))


@pytest.mark.parametrize("fixed", ["first", "second"])
def test_each_contradiction_removes_exactly_one_side(fixed):
    instance, world = distributed(0)
    lm = scripted_lm(Checker(world, fixed=fixed))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = VerifyStatements()(agents=instance.agents)
    settled = [c for c in out.trace["conflicts"] if "incorrect" in c]
    assert len(out.misleading_statements) == len(settled) > 0
    for c in settled:
        assert c["incorrect"] == c["pair"][0 if fixed == "first" else 1]
    kept = set(out.trusted)
    for c in settled:  # the other side of each settled pair is still trusted
        winner = c["pair"][1 if fixed == "first" else 0]
        (text,) = [x["statement"] for x in out.trace["checks"] if x["number"] == winner]
        assert text in kept


def test_contradictions_found_from_both_sides_come_first_and_a_resolved_pair_is_skipped():
    assert contradiction_pairs({1: [4], 4: [1], 2: [3], 3: []}) == [(1, 4), (2, 3)]
    items = [Statement(1, 0, "a"), Statement(2, 1, "b"), Statement(3, 2, "c")]
    item = items[0]
    assert read_contradictions(item, [2, "3", 1, 9, True, "x", 2], items) == [2, 3]  # own, unknown, bool ignored
    assert read_contradictions(item, "2", items) == []

    class Fixed:
        def __init__(self, **out):
            self.out = out
            self.calls = 0

        def __call__(self, **kwargs):
            self.calls += 1
            return dspy.Prediction(**self.out)

    argue, judge = Fixed(argument="x"), Fixed(incorrect="first", reason="r")
    removed, log = settle([(1, 2), (1, 3), (2, 3)], items, argue, argue, judge)
    assert removed == [1, 2] and judge.calls == 2  # (1, 3) was resolved when 1 went
    assert log[1]["skipped"].startswith("already resolved")
    removed, log = settle([(1, 2), (1, 3)], items, argue, argue, Fixed(incorrect="second", reason="r"),
                          max_conflicts=1)
    assert removed == [2] and log[1]["skipped"] == "max_conflicts reached"


def test_statement_rule_is_checked():
    with pytest.raises(ValueError, match="rule"):
        VerifyStatements(rule="both")
    with pytest.raises(ValueError, match="max_conflicts"):
        VerifyStatements(max_conflicts=0)


def test_a_statement_mode_program_saved_before_the_rule_existed_loads_with_the_rule_it_was_built_with(tmp_path):
    import json

    from groundstate.optimizers.artifacts import MANIFEST, load_program, save_program

    save_program(ReGround(mode="statement", statement_rule="refuted"), tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / MANIFEST).read_text())
    assert manifest["program"]["kwargs"].pop("statement_rule") == "refuted"  # as a manifest before the option
    (tmp_path / "old" / MANIFEST).write_text(json.dumps(manifest))
    loaded = load_program(tmp_path / "old")
    assert loaded.verify.rule == "refuted" and hasattr(loaded.verify, "check")
    save_program(ReGround(mode="statement"), tmp_path / "new")  # today's manifests record the rule they use
    assert load_program(tmp_path / "new").verify.rule == "adjudicate"


def test_the_statement_rule_setting_names_the_earlier_rule_in_the_run_options_only_in_statement_mode():
    from groundstate.eval.reground.settings import ReGroundSettings

    assert "statement_rule" not in ReGroundSettings(mode="statement").reground_options()
    old = ReGroundSettings(mode="statement", statement_rule="refuted")
    assert old.reground_options()["statement_rule"] == "refuted" and old.reground_program().verify.rule == "refuted"
    assert "statement_rule" not in ReGroundSettings(statement_rule="refuted").reground_options()  # agent mode
    assert ReGroundSettings(mode="statement").reground_program().verify.rule == "adjudicate"


def test_verify_statements_keeps_its_earlier_import_path_and_saved_name():
    from groundstate import registry
    from groundstate.programs.reground import reground

    assert reground.VerifyStatements is VerifyStatements
    assert registry.resolve("groundstate.programs.reground.reground:VerifyStatements", "program") is VerifyStatements
