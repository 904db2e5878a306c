"""Standard's footing (issue 25, items 3 and 4): Standard's opinions are uncapped by default (the cap is an
option), and the other baselines share Standard's ordering, summarizer and updater contract by default, with the
earlier behaviour as options."""

from __future__ import annotations

import json
import re

import dspy
import pytest

from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.settings import BaselineSettings
from groundstate.programs.reground.baselines import Instructor, Manager, Robin, SelfReflect, Voting
from groundstate.programs.reground.standard import Confidence, StandardCollaboration
from groundstate.programs.reground.turns import NOT_SHARED_YET
from groundstate.testing import scripted_lm

LONG = "The patient's finding is reported in full detail here. " * 20  # about 1,100 characters


def instance():
    return generate("healthcare", "main", 1, seed=0)[0]


def run(program, responder=None, adapter=None):
    lm = scripted_lm(responder)
    with dspy.context(lm=lm, adapter=adapter or dspy.JSONAdapter()):
        out = program(**instance().inputs("unreliable"))
    return out, lm.engine.requests


def opinion_requests(requests):
    return [r for r in requests if "opinion" in r.output_fields]


# -- item 3: Standard's opinions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [StandardCollaboration, Confidence])
def test_opinions_are_uncapped_by_default_and_the_cap_is_an_option(cls):
    _, requests = run(cls(rounds=1))
    assert opinion_requests(requests)
    for request in opinion_requests(requests):
        assert "600" not in request.system and "maximum length" not in request.system
    _, requests = run(cls(rounds=1, opinion_cap=True))
    for request in opinion_requests(requests):
        assert "at most 600 characters" in request.system and "maximum length: 600" in request.system


def test_a_long_opinion_reaches_the_peers_and_the_updater_whole():
    def respond(req):
        if "opinion" in req.output_fields:
            return {"opinion": f"{req.field('agent')} says: {LONG}"}
        return None

    out, requests = run(StandardCollaboration(rounds=1), respond)
    (updater,) = [r for r in requests if r.output_fields == ["state"]]
    assert updater.field("opinions").count(LONG.strip()) >= 2
    assert all(len(t["output"]["opinion"]) > 1000 for t in out.trace["turns"] if t["step"] == "opinion")


def test_the_opinion_cap_is_a_run_option_only_when_on():
    assert "opinion_cap" not in BaselineSettings().baseline_options("standard")
    assert BaselineSettings(opinion_cap=True).baseline_options("standard")["opinion_cap"] is True
    assert BaselineSettings(opinion_cap=True).baseline_options("confidence")["opinion_cap"] is True
    assert "opinion_cap" not in BaselineSettings(opinion_cap=True).baseline_options("robin")  # Robin has none
    assert BaselineSettings(opinion_cap=True).baseline_arguments("standard")["opinion_cap"] is True


def test_a_standard_program_saved_before_the_option_loads_capped(tmp_path):
    from groundstate.optimizers.artifacts import MANIFEST, load_program, save_program

    save_program(StandardCollaboration(opinion_cap=True), tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / MANIFEST).read_text())
    del manifest["program"]["kwargs"]["opinion_cap"]  # as written before the option existed
    (tmp_path / "old" / MANIFEST).write_text(json.dumps(manifest))
    assert load_program(tmp_path / "old").opinion_cap is True
    save_program(StandardCollaboration(), tmp_path / "new")
    assert load_program(tmp_path / "new").opinion_cap is False


# -- item 4: the other baselines on Standard's footing -----------------------------------------------------------
EVIDENCE = re.compile(r"\[EVID-(\d+)\]")
MESSAGE = re.compile(r"<MSG-(\d+)>")


def tagged_inputs():
    data = instance().inputs("unreliable")
    data["agents"] = [a.model_copy(update={"evidence": f"[EVID-{a.agent}] {a.evidence}"}) for a in data["agents"]]
    return data


def outputs(req):
    """The output fields a request asks for, under either adapter (the JSON schema, or ChatAdapter's list)."""
    if req.schema:
        return req.output_fields
    listed = req.system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    return re.findall(r"^\d+\. `(\w+)`", listed, re.M)


def speaker(req):
    return int(re.search(r"Agent (\d+)", req.field("agent")).group(1))


class Scripted:
    """Replies by output fields; messages carry ``<MSG-i>``, the summarizer names ``named``."""

    def __init__(self, named=5):
        self.named = named

    def __call__(self, req):
        out = set(outputs(req))
        if "assessment" in out:
            return {"assessment": f"<MSG-{speaker(req)}> my view", "answer": "B", "suspected_misleading": -1}
        if out == {"misleading_agent", "reason"}:
            return {"misleading_agent": self.named, "reason": "conflicts"}
        if out == {"state"}:
            return {"state": f"STATE-{req.index}"}
        if out == {"updated_state"}:
            return {"updated_state": f"RECORD-{req.index}"}
        if out == {"mode"}:
            return {"mode": "debate"}
        if out == {"target_agent", "focused_question"}:
            return {"target_agent": 0, "focused_question": "What did you see?"}
        if out == {"reply"}:
            return {"reply": f"<MSG-{speaker(req)}> reply"}
        if out == {"answer", "reason"}:
            return {"answer": "C", "reason": "r"}
        raise AssertionError(f"unexpected request for {out}")


def run_tagged(program, named=5, adapter=None):
    lm = scripted_lm(Scripted(named))
    with dspy.context(lm=lm, adapter=adapter or dspy.JSONAdapter()):
        out = program(**tagged_inputs())
    return out, lm.engine.requests


def of(requests, *outputs):
    return [r for r in requests if set(r.output_fields) == set(outputs)]


FOOTED = {"voting": Voting, "robin": Robin, "self-reflect": SelfReflect}
CLOSED = {"robin": Robin, "self-reflect": SelfReflect, "instructor": Instructor}


@pytest.mark.parametrize("name", sorted(FOOTED))
def test_the_discussion_is_private_first_by_default(name):
    out, requests = run_tagged(FOOTED[name]())
    turns = [r for r in requests if "assessment" in r.output_fields]
    assert turns
    shared = instance().inputs("unreliable")["shared_context"]
    for r in turns:
        assert r.field("shared_context") == NOT_SHARED_YET and shared not in r.user
    assert all(not t.get("saw_shared_context") for t in out.trace["turns"] if t["step"] in ("assess", "debate"))
    _, requests = run_tagged(FOOTED[name](ordering="shared-first"))  # the earlier default, an option
    assert all(shared in r.user for r in requests if "assessment" in r.output_fields)


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_the_closing_follows_standards_summarizer_and_updater_contract(name):
    out, requests = run_tagged(CLOSED[name]())
    (summarizer,) = of(requests, "misleading_agent", "reason")
    (updater,) = of(requests, "state")
    assert summarizer.field("opinions") is not None and summarizer.field("discussion") is None
    assert summarizer.schema["properties"]["misleading_agent"]["enum"] == list(range(6))
    assert summarizer.index < updater.index  # the updater depends on the summarizer's verdict
    assert out.misleading_agent == 5
    seen = {int(i) for i in MESSAGE.findall(updater.field("opinions"))}
    assert 5 not in seen and seen  # every final message but the named agent's
    assert not EVIDENCE.findall(updater.user) and updater.field("shared_context")  # no raw evidence
    (decide,) = of(requests, "answer", "reason")
    assert decide.field("information") == out.state == f"STATE-{updater.index}"


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_the_earlier_closing_stays_an_option(name):
    out, requests = run_tagged(CLOSED[name](summarizer="open", updater="evidence"), named=-1)
    (summarizer,) = of(requests, "misleading_agent", "reason")
    (updater,) = of(requests, "state")
    assert summarizer.field("discussion") is not None and out.misleading_agent is None  # "no one" is an answer
    assert updater.field("agent_information") is not None


@pytest.mark.parametrize("answer", [-1, 99, "none"])
@pytest.mark.parametrize("name", sorted(CLOSED))
def test_the_standard_summarizer_always_names_an_agent(name, answer):
    out, _ = run_tagged(CLOSED[name](), named=answer)
    assert out.misleading_agent == 0  # an answer naming no agent falls back to agent 0, as the authors' code does


def test_the_standard_summarizer_reads_agent_phrasings_through_the_chat_adapter():
    out, requests = run_tagged(Robin(), named="Agent 3", adapter=dspy.ChatAdapter())
    assert out.misleading_agent == 3
    assert len([r for r in requests if "misleading_agent" in outputs(r)]) == 1  # parsed by ChatAdapter itself


def test_voting_on_standards_footing():
    out, requests = run_tagged(Voting())
    states = of(requests, "state")
    assert len(states) == 6
    for r in states:  # an agent's own state: the shared context and its own assessment, never raw evidence
        assert not EVIDENCE.findall(r.user) and len(set(MESSAGE.findall(r.field("opinions")))) == 1
    (summarizer,) = of(requests, "misleading_agent", "reason")
    assert {int(i) for i in MESSAGE.findall(summarizer.field("opinions"))} == set(range(6))
    assert out.misleading_agent == 5 and out.answer == "C"
    earlier, requests = run_tagged(Voting(ordering="shared-first", summarizer="open", updater="evidence"))
    assert not of(requests, "misleading_agent", "reason")  # the earlier Voting: the plurality of suspicions
    assert earlier.misleading_agent is None and all(EVIDENCE.findall(r.user) for r in of(requests, "state"))


def test_manager_names_an_agent_from_the_latest_reports():
    out, requests = run_tagged(Manager())
    (summarizer,) = of(requests, "misleading_agent", "reason")
    assert summarizer.schema["properties"]["misleading_agent"]["enum"] == list(range(6))
    assert out.misleading_agent == 5 and out.state.startswith("RECORD-")


def test_footing_options_in_the_run_config_and_saved_programs(tmp_path):
    from groundstate.optimizers.artifacts import MANIFEST, load_program, save_program

    assert BaselineSettings().baseline_options("voting") == {}  # as earlier versions wrote it
    assert BaselineSettings(ordering="shared-first", summarizer="open", updater="evidence").baseline_options(
        "voting") == {"ordering": "shared-first", "summarizer": "open", "updater": "evidence"}
    assert BaselineSettings(summarizer="open").baseline_options("robin") == {"rounds": 1, "ordering": "private-first",
                                                                             "summarizer": "open"}
    assert "updater" not in BaselineSettings(updater="evidence").baseline_options("manager")  # it has none
    save_program(Voting(ordering="shared-first", summarizer="open", updater="evidence"), tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / MANIFEST).read_text())
    manifest["program"]["kwargs"] = {}  # a Voting saved before it had options
    (tmp_path / "old" / MANIFEST).write_text(json.dumps(manifest))
    old = load_program(tmp_path / "old")
    assert (old.ordering, old.summarizer, old.updater) == ("shared-first", "open", "evidence")
    assert not hasattr(old, "summarize")
