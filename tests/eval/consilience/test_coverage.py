"""Held-out coverage of the round-wise conformal calibrator on simulated Consilience trajectories."""

import numpy as np

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.coverage import coverage
from groundstate.eval.consilience.evaluate import run_tasks
from groundstate.optimizers.consilience import Configuration, calibrate
from groundstate.programs.consilience.consilience import Consilience
from groundstate.programs.consilience.control import RuleController
from groundstate.programs.consilience.simulated import SimParams, SimTeam


def test_conformal_coverage_on_simulated_trajectories():
    """Held-out trajectories: every round with >= 50 calibration scores covers at least 1 - alpha - 3 SE."""
    tasks = generate_hidden_travel(240, seed=11)
    checked = 0
    for seed in range(2):
        team = SimTeam(SimParams(), seed=seed)
        order = np.random.default_rng(seed).permutation(len(tasks))
        cal_tasks, test_tasks = [tasks[i] for i in order[:120]], [tasks[i] for i in order[120:]]
        config = Configuration("rules", max_rounds=6)
        calibrator = calibrate(cal_tasks, team, RuleController(), config, alpha=0.1, seed=seed)
        program = Consilience(team, RuleController(), max_rounds=6, seed=seed)
        rows = coverage(calibrator, [p.trace for p in run_tasks(program, test_tasks)], min_calibration=50)
        for row in rows:
            if row["checked"]:
                checked += 1
                assert row["ok"], row
    assert checked >= 4
