"""The §5.5 ablations with a calibrator per configuration, and unseen-task generalisation (§5.4)."""

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience import ablations
from groundstate.eval.consilience.generalize import unseen_task_generalization
from groundstate.optimizers.consilience import explore_tasks
from groundstate.programs.consilience.control import RuleController, build_controller
from groundstate.programs.consilience.simulated import SimParams, SimTeam
from groundstate.programs.consilience.state import FEATURE_SETS

TEAM = SimTeam(SimParams(), seed=0)
TASKS = generate_hidden_travel(40, seed=31)


def test_every_action_ablation_row_is_calibrated_for_its_own_configuration(monkeypatch):
    seen = []
    original = ablations.calibrate

    def spy(tasks, team, controller, config, alpha=0.1, seed=0):
        seen.append(config.to_dict())
        return original(tasks, team, controller, config, alpha=alpha, seed=seed)

    monkeypatch.setattr(ablations, "calibrate", spy)
    rows = explore_tasks(TASKS[:6], TEAM, max_rounds=3)
    from groundstate.optimizers.consilience import train_controller

    mlp = train_controller(rows, max_iter=200)
    table = ablations.action_ablation({"rules": RuleController, "mlp": lambda: build_controller("mlp", mlp)}, TEAM,
                                      TASKS[6:26], TASKS[26:], alpha=0.2, max_rounds=4)
    assert list(table) == ["full", "-Challenge", "-Clarify", "-SeekEvidence", "-Route", "-Vote"]
    assert table["-Vote"]["mlp"] is None  # the MLP never votes: NA, as in Table 7
    removed = sorted((c["controller"], tuple(c["removed_actions"])) for c in seen)
    expected = sorted([(name, ()) for name in ("rules", "mlp")]
                      + [(name, (a,)) for name in ("rules", "mlp") for a in ("Challenge", "Clarify", "SeekEvidence",
                                                                              "Route")]
                      + [("rules", ("Vote",))])
    assert removed == expected  # one calibration per row, for exactly that row's configuration
    full = table["full"]["rules"]
    assert full["n"] == 14 and 0 <= full["task_accuracy"]["mean"] <= 1 and full["certified_rounds"]


def test_feature_and_sampling_ablations():
    rows = explore_tasks(TASKS[:8], TEAM, max_rounds=3)
    table = ablations.feature_ablation(rows, TEAM, TASKS[8:26], TASKS[26:], alpha=0.2, max_rounds=4, max_iter=200)
    assert list(table) == list(FEATURE_SETS)
    assert table["belief"]["features"] == ["H", "D"] and table["belief+cost"]["features"] == ["H", "D", "C"]
    for row in table.values():
        assert row["final_C"] >= 0 and "final_J" in row and row["n"] == 14
    sampled = ablations.sampling_ablation({"rules": RuleController}, TEAM, TASKS[8:26], TASKS[26:], alpha=0.2,
                                          max_rounds=4)
    assert sampled["rules"]["messages"] > 0


def test_unseen_task_generalisation():
    result = unseen_task_generalization(TASKS[:14], TEAM, train_size=5, splits=2, max_rounds=3, max_iter=200)
    assert len(result["splits"]) == 2 and all(r["n_test"] == 9 and len(r["train"]) == 5 for r in result["splits"])
    assert result["splits"][0]["train"] != result["splits"][1]["train"]  # different seeded subsets
    assert 0 <= result["held_out_mean"] <= 1 and result["all_task_all_tasks"]["n"] == 14
    assert "uncertified" in result["note"]
    with pytest.raises(ConfigError, match="train-size"):
        unseen_task_generalization(TASKS[:5], TEAM, train_size=5)
