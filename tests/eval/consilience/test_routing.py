"""The speaker-routing ablation (Table 8): objective change and normalised regret per routing policy."""

import pytest

from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
from groundstate.eval.consilience.routing import routing_ablation, routing_metrics
from groundstate.programs.consilience.consilience import Consilience
from groundstate.programs.consilience.control import ROUTERS, RuleController
from groundstate.programs.consilience.simulated import SimParams, SimTeam


def test_routing_metrics_on_a_case_worked_by_hand():
    steps = [
        # J(s) = 1.0; speakers give 0.5, 1.0, 2.0 (range 1.5)
        {"J": 1.0, "outcomes": [0.5, 1.0, 2.0],
         "picks": {"action-conditional": 0, "random": 2, "round-robin": 1, "most-disagreeing": 2, "most-spoken": 1}},
        # J(s) = 0.4; speakers give 0.2, 0.6, 0.4 (range 0.4)
        {"J": 0.4, "outcomes": [0.2, 0.6, 0.4],
         "picks": {"action-conditional": 2, "random": 0, "round-robin": 1, "most-disagreeing": 1, "most-spoken": 0}},
        # every speaker gives the same J: no regret to normalise, counted as flat
        {"J": 0.3, "outcomes": [0.3, 0.3, 0.3],
         "picks": {"action-conditional": 1, "random": 1, "round-robin": 2, "most-disagreeing": 0, "most-spoken": 0}},
    ]
    m = routing_metrics(steps)
    # action-conditional: dJ = (0.5-1.0) + (0.4-0.4) + 0 = -0.5 over 3 steps; regret (0 + 0.5) / 2
    assert m["action-conditional"]["mean_dJ"] == pytest.approx(-0.5 / 3)
    assert m["action-conditional"]["normalized_regret"] == pytest.approx(0.25)
    # random: dJ = 1.0 + (-0.2) + 0 = 0.8 / 3; regret (1 + 0) / 2
    assert m["random"]["mean_dJ"] == pytest.approx(0.8 / 3) and m["random"]["normalized_regret"] == pytest.approx(0.5)
    # round-robin: dJ = 0 + 0.2 + 0; regret (1/3 + 1) / 2
    assert m["round-robin"]["mean_dJ"] == pytest.approx(0.2 / 3)
    assert m["round-robin"]["normalized_regret"] == pytest.approx((1 / 3 + 1) / 2)
    assert all(row["steps"] == 3 and row["flat_steps"] == 1 for row in m.values())
    # how often each pick is not round-robin's: action-conditional 0 != 1, 2 != 1, 1 != 2; most-spoken 0, 2
    assert m["action-conditional"]["differs_from_round_robin"] == 1.0
    assert m["most-spoken"]["differs_from_round_robin"] == pytest.approx(2 / 3)
    assert m["round-robin"]["differs_from_round_robin"] == 0.0
    assert routing_metrics([])["random"] == {"mean_dJ": None, "normalized_regret": None, "steps": 0, "flat_steps": 0,
                                             "differs_from_round_robin": None}


def test_routing_ablation_replays_the_executed_action_for_every_speaker():
    tasks = generate_hidden_travel(6, seed=5)
    team = SimTeam(SimParams(), seed=1)
    executed = []
    program = Consilience(team, RuleController(), max_rounds=4)
    for task in tasks:
        executed.extend((task.id, e["round"], e["speaker"], e["executed"]) for e in program(task=task).trace)
    metrics, steps = routing_ablation(program, tasks)
    assert program.on_round is None  # restored
    comm = [e for e in executed if e[3] != "Vote"]
    assert [(s["task"], s["round"], s["action"]) for s in steps] == [(t, r, a) for t, r, _, a in comm]
    for step, (_, _, speaker, _) in zip(steps, comm, strict=True):
        n = len(step["outcomes"])
        assert n == len(team(tasks[0])) or n in (3, 4)
        assert step["picks"]["action-conditional"] == speaker  # the program's own router chose who spoke
        assert set(step["picks"]) == set(ROUTERS)
    assert set(metrics) == set(ROUTERS) and all(row["steps"] == len(steps) for row in metrics.values())
