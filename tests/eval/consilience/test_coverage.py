"""Held-out coverage of the round-wise conformal calibrator on simulated Consilience trajectories, under the
calibrated policy (every proposal executed) and the deployed one (accept or replace).

The data follow the real design: generated travel tasks of mixed difficulty (3 or 4 travelers, different
margins), simulated agents whose beliefs depend on the shared discussion, calibration and held-out tasks
drawn from the same generator, several seeds (agents and splits)."""

import math

import numpy as np
import pytest

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.coverage import coverage, coverage_report, uncertified_rounds
from groundstate.eval.consilience.evaluate import run_tasks
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.consilience import Configuration, calibrate
from groundstate.programs.consilience.control import RuleController
from groundstate.programs.consilience.simulated import SimParams, SimTeam

ALPHA = 0.1


@pytest.fixture(scope="module")
def reports():
    tasks = generate_hidden_travel(300, seed=11)
    out = []
    for seed in range(4):
        team = SimTeam(SimParams(noise=0.5 + 0.1 * seed), seed=seed)
        order = np.random.default_rng(seed).permutation(len(tasks))
        cal_tasks, test_tasks = [tasks[i] for i in order[:150]], [tasks[i] for i in order[150:]]
        config = Configuration.of("rules", RuleController(), max_rounds=6)
        calibrator = calibrate(cal_tasks, team, RuleController(), config, alpha=ALPHA, seed=seed)
        calibrated = config.program(team, RuleController(), calibrator=None, seed=seed)
        deployed = config.program(team, RuleController(), calibrator=calibrator, seed=seed)
        out.append(coverage_report(calibrator, [p.trace for p in run_tasks(calibrated, test_tasks)],
                                   [p.trace for p in run_tasks(deployed, test_tasks)], min_calibration=50))
    return out


@pytest.mark.parametrize("policy", ["calibrated", "deployed"])
def test_coverage_per_round_under_both_policies(reports, policy):
    checked = 0
    pooled: dict[int, list[tuple[int, int]]] = {}
    for report in reports:
        for row in report[policy]:
            assert row["policy"] == policy and row["n_reached"] == row["n_test"]
            assert row["ci_low"] <= row["coverage"] <= row["ci_high"]
            if row["certified"] and policy == "deployed":
                assert row["executed_coverage"] == 1.0  # acceptance never executes an action above threshold
            if row["checked"]:
                checked += 1
                assert row["ok"], row
                pooled.setdefault(row["round"], []).append((row["hits"], row["n_reached"]))
    assert checked >= 8
    for t, parts in pooled.items():  # pooled over seeds, a tighter check of each round
        hits, n = sum(h for h, _ in parts), sum(k for _, k in parts)
        se = math.sqrt(ALPHA * (1 - ALPHA) * (1 / n + 1 / (150 * len(parts))))
        assert hits / n >= 1 - ALPHA - 3 * se, (t, hits, n)


def test_uncertified_rounds_are_reported():
    cal = RoundwiseConformal(alpha=0.2).fit([0] * 9 + [1] * 2, [0.1] * 9 + [0.2, 0.3])
    traces = [[{"round": 0, "proposal": "Route", "executed": "Route", "regrets": {"Route": 0.05}},
               {"round": 1, "proposal": "Route", "executed": "Clarify", "regrets": {"Route": 5.0, "Clarify": 0.0}}]]
    rows = coverage(cal, traces, min_calibration=5)
    assert [r["certified"] for r in rows] == [True, False] and uncertified_rounds(rows) == [1]
    assert rows[1]["coverage"] == 1.0 and rows[1]["threshold"] is None  # infinite threshold: trivially covered
    assert rows[0]["hits"] == 1 and rows[0]["checked"] and not rows[1]["checked"]
    report = coverage_report(cal, traces, traces, min_calibration=5)
    assert report["uncertified_rounds"] == [1] and report["all_checked_ok"]
    with pytest.raises(ValueError, match="unknown policy"):
        coverage(cal, traces, policy="hopeful")
