"""Standard's footing (issue 25, items 3 and 4): Standard's opinions are uncapped by default (the cap is an
option), and the other baselines share Standard's ordering, summarizer and updater contract by default, with the
earlier behaviour as options."""

from __future__ import annotations

import json

import dspy
import pytest

from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.reground.settings import BaselineSettings
from groundstate.programs.reground.standard import Confidence, StandardCollaboration
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
