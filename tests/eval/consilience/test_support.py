"""Per-fact support for tasks without it: the design default, the LM annotator and support files."""

import json
import shutil

import dspy
import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.consilience.data import load_tasks
from groundstate.eval.consilience.support import annotate_tasks, apply_support, read_support_file, support_path
from groundstate.programs.consilience.annotate import SupportAnnotator, design_support
from groundstate.programs.consilience.protocols import run_discussion
from groundstate.programs.consilience.simulated import SimParams, sim_team
from groundstate.programs.consilience.support import option_scores
from groundstate.testing import scripted_lm

FIXTURE = "tests/data/hiddenbench/hiddenbench_format.json"


@pytest.fixture()
def copied(tmp_path):
    path = tmp_path / "hb.json"
    shutil.copy(FIXTURE, path)
    return path


def test_design_default_is_a_hidden_profile():
    """Shared facts plus one private fact favour a wrong option; all private facts pooled favour the right one,
    and so does any set of more than (m + 1) / 2 of them."""
    tasks, _ = load_tasks(FIXTURE)
    for task in tasks:
        annotated = task.model_copy(update={"support": design_support(task)})
        assert set(annotated.support) == set(task.all_facts())
        m = len({f for facts in task.private for f in facts})
        for i in range(task.n_agents):
            scores = option_scores(annotated, task.facts_of(i))
            assert max(scores, key=scores.get) != task.correct
        pooled = option_scores(annotated)
        assert max(pooled, key=pooled.get) == task.correct
        majority = task.shared + [f for facts in task.private[: (m + 1) // 2 + 1] for f in facts]
        scores = option_scores(annotated, majority)
        assert max(scores, key=scores.get) == task.correct
        wrong = [o for o in task.options if o != task.correct]
        total = option_scores(annotated, task.shared)
        assert total[task.correct] == 0 and all(total[o] == pytest.approx((m + 1) / 2) for o in wrong)
        # simulated agents reproduce the profile: wrong before discussion, right with every fact
        team = sim_team(task.n_agents, SimParams(noise=0.0))
        assert not run_discussion(annotated, team, "hidden-pre").correct
        assert run_discussion(annotated, team, "full-info").correct


def test_annotator_never_sees_the_answer_or_rationale_and_files_are_reused(copied):
    tasks, _ = load_tasks(copied)
    prompts = []

    def respond(req):
        prompts.append(req.user)
        return {"ratings": {label: (2 if label == "A" else -1) for label in ("A", "B", "C", "D")
                            if label in req.schema["$defs"]["OptionRatings"]["properties"]}}

    lm = scripted_lm(respond)
    with dspy.context(adapter=dspy.JSONAdapter()):
        data = annotate_tasks(tasks, copied, SupportAnnotator(), lm)
    facts = sum(len(t.all_facts()) for t in tasks)
    assert len(prompts) == facts and not data["failures"]
    rationale = next(t.rationale for t in tasks if t.rationale)
    assert not any(rationale in p for p in prompts)
    for task in tasks:  # the correct answer is never singled out: each prompt is the scenario, options and fact
        for fact in task.all_facts():
            prompt = next(p for p in prompts if fact in p)
            assert all(option in prompt for option in task.options)
            assert "correct" not in prompt.lower() and task.correct not in prompt.split("[[ ## options ## ]]")[0]
    stored = read_support_file(support_path(copied))
    first = tasks[0]
    assert stored["support"][first.id][first.shared[0]][first.options[0]] == 2.0
    assert stored["tasks_sha256"] and stored["annotator"]["lm"]["model"] == "scripted/engine"
    # a second run asks nothing: every fact is already rated by the same annotator
    with dspy.context(adapter=dspy.JSONAdapter()):
        annotate_tasks(tasks, copied, SupportAnnotator(), lm)
    assert len(prompts) == facts
    # another LM's file is not mixed in silently
    other = scripted_lm(respond)
    other.kwargs["temperature"] = 0.7
    with pytest.raises(ConfigError, match="another annotator"):
        annotate_tasks(tasks, copied, SupportAnnotator(), other)


def test_annotation_failures_are_recorded_and_retried(copied):
    tasks, _ = load_tasks(copied)
    target = tasks[1].private[0][0]
    calls = {"n": 0}

    def flaky(req):
        calls["n"] += 1
        if target in req.user and calls.get("failed") is None:
            calls["failed"] = True
            return RuntimeError("the model went away")
        return None

    lm = scripted_lm(flaky)
    with dspy.context(adapter=dspy.JSONAdapter()):
        data = annotate_tasks(tasks, copied, SupportAnnotator(), lm)
    assert [f["fact"] for f in data["failures"]] == [target] and "went away" in data["failures"][0]["error"]
    assert target not in data["support"][tasks[1].id]  # nothing invented for it
    with pytest.raises(InputError, match="no support for the fact"):
        apply_support(tasks, copied, "file")
    before = calls["n"]
    with dspy.context(adapter=dspy.JSONAdapter()):
        data = annotate_tasks(tasks, copied, SupportAnnotator(), lm)
    assert calls["n"] - before == 1 and not data["failures"]  # only the failed fact was asked again
    annotated, described = apply_support(tasks, copied, "auto")
    assert described["source"] == "file" and all(t.support for t in annotated)


def test_support_modes(copied, tmp_path):
    tasks, _ = load_tasks(copied)
    annotated, described = apply_support(tasks, copied)  # no file beside it: the design default
    assert described == {"own": 0, "source": "design", "tasks": len(tasks)}
    assert annotated[0].support == design_support(tasks[0]) and not tasks[0].support  # copies, not mutations
    with pytest.raises(InputError, match="need per-fact support"):
        apply_support(tasks, copied, "task")
    with pytest.raises(InputError, match="no support file"):
        apply_support(tasks, copied, "file")
    with pytest.raises(ConfigError, match="unknown support mode"):
        apply_support(tasks, copied, "guess")
    own = [annotated[0], *tasks[1:]]
    mixed, described = apply_support(own, copied, "design")
    assert described["own"] == 1 and mixed[0] is annotated[0]
    bad = tmp_path / "bad.support.json"
    bad.write_text(json.dumps({"format": "groundstate-support/1", "support": {"1": {"x": {"A": "high"}}}}))
    with pytest.raises(InputError, match="not a finite number"):
        apply_support(tasks, copied, "file", support_file=bad)
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not a support file"):
        apply_support(tasks, copied, "file", support_file=bad)
