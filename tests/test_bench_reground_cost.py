"""bench/reground_cost.py scripts Standard's opinions at the lengths it says (issue 27 item 6), and its calibration
of those lengths reproduces the paper's Standard totals. LM-free: a scripted LM, one small instance."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import dspy
import pytest

from groundstate.programs.reground.standard import StandardCollaboration
from groundstate.testing import CHARS_PER_TOKEN, scripted_lm

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


@pytest.fixture(scope="module")
def bench():
    return load("reground_cost")


def test_the_calibrated_opinion_length_gives_back_table_11s_standard_totals():
    opinions = load("standard_opinions")
    calibration = opinions.calibrate()
    for name, setting in calibration.items():
        size = {k: setting[k] for k in ("agents", "evidence", "context", "question")}
        tokens = opinions.authors_standard_chars(**size, revised=setting["revised_chars"]) / CHARS_PER_TOKEN
        assert tokens == pytest.approx(setting["standard_tokens"], rel=0.002), name
    # the harder split's larger total means longer opinions; the disaster calibration agrees with HEALTHCARE-S's
    assert calibration["healthcare_i"]["revised_chars"] > calibration["healthcare_s"]["revised_chars"] * 1.3
    assert calibration["disaster"]["revised_chars"] == pytest.approx(calibration["healthcare_s"]["revised_chars"],
                                                                     rel=0.05)


def opinions_written(bench, lengths: dict, instance) -> tuple[list[str], list[str]]:
    """The opening and the revised opinions the scripted LM wrote for one Standard run."""
    lm = scripted_lm(bench.realistic(lengths), input_tokens=None, output_tokens=None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        StandardCollaboration()(**instance.inputs("unreliable"))
    opening, revised = [], []
    for request in lm.engine.requests:
        if "opinion" in request.output_fields:
            reply = json.loads(request.reply)
            assert set(reply) == {"opinion"}  # nothing Standard does not ask for
            (revised if request.field("previous_opinion") is not None else opening).append(reply["opinion"])
    return opening, revised


def test_standard_opinions_are_scripted_at_the_calibrated_lengths(bench):
    lengths = bench.standard_lengths(bench.calibrate())
    instance = bench.sized_instances(1, 4, 2)[0]
    for name in ("central", "long"):
        opening, revised = opinions_written(bench, lengths[name], instance)
        assert sorted(opening) == sorted(a.evidence for a in instance.agents)  # openings restate the evidence
        target = lengths[name]["revised"][1]
        assert len(revised) == 3 * 4 and all(target - 1 <= len(text) <= target for text in revised), name


def test_the_paper_ratio_region_is_read_per_agent_count(bench):
    rows = [{"agents": 9, "facts_per_agent": s, "by_length": {"central": {"ratio": r}}}
            for s, r in ((1, 0.30), (2, 0.35), (3, 0.40), (4, 0.43), (5, 0.50))]
    assert bench.region({"rows": rows}) == {"9": {"holds": [2, 3], "below": [1], "above": [4, 5]}}
    assert bench.spans([1, 2, 3, 6, 8, 9]) == "1-3, 6, 8-9"
    assert bench.spans([]) == "no"
