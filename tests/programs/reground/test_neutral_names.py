"""Agents reach prompts under neutral ids only: on the published layout, where the misleading agent is an extra
agent without a category, no prompt of any OffQuery program can tell it apart by name or role."""

import json

import dspy
import pytest

from groundstate.eval.benchmarks.offquery.published import load_offquery
from groundstate.programs.reground.baselines import BASELINES
from groundstate.programs.reground.oracle import Oracle
from groundstate.programs.reground.reground import ReGround
from groundstate.testing import scripted_lm
from tests.helpers import DATA

PUBLISHED = DATA / "offquery" / "published"


def instances():
    return load_offquery(PUBLISHED / "datasets" / "ward.json",
                         t2_truth=PUBLISHED / "task2_evaluation" / "truth" / "ward.json")


def prompts(program_factory, instance, roles: bool):
    """Every request the program sends (sorted: threads reorder independent calls), with or without roles."""
    agents = instance.agents if roles else [a.model_copy(update={"role": None}) for a in instance.agents]
    case = instance.model_copy(update={"agents": agents})
    kwargs = Oracle.inputs_for(case) if isinstance(program_factory(), Oracle) else case.inputs("unreliable")
    lm = scripted_lm()  # placeholder answers: the same outputs whatever the names
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        program_factory()(**kwargs)
    return sorted(json.dumps(r.messages, sort_keys=True) for r in lm.engine.requests)


def test_the_fixture_has_the_published_shape():
    for instance in instances():
        (liar,) = instance.misleading
        assert instance.agents[liar].role is None
        assert all(a.role for a in instance.agents if a.agent != liar)


PROGRAMS = {"reground": lambda: ReGround(max_candidates=2), **{name: cls for name, cls in BASELINES.items()}}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_prompt_depends_on_roles(name):
    instance = instances()[0]
    with_roles = prompts(PROGRAMS[name], instance, roles=True)
    without = prompts(PROGRAMS[name], instance, roles=False)
    assert with_roles == without
    text = "\n".join(with_roles)
    for agent in instance.agents:
        assert f"Agent {agent.agent} (" not in text
    roles = {a.role for a in instance.agents if a.role}
    assert not any(f"({role})" in text for role in roles)
