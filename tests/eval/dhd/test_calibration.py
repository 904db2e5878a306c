"""Calibration of the DHD nulls and of the problem-level BH/BY selections on the real design.

Data sets come from :mod:`groundstate.eval.dhd.simulate` (problems with their own accuracies, five messages sharing
each block's two full-pool calls), never from a simpler model; tolerances are 3 standard errors of the number of
simulated data sets. The within-block null is also checked against exact enumeration on designs small enough to
enumerate every permutation.
"""

from __future__ import annotations

import math
from itertools import combinations, product

import numpy as np
import pytest

from groundstate.eval.dhd.effects import EffectTable
from groundstate.eval.dhd.multiplicity import FAMILIES, multiplicity
from groundstate.eval.dhd.null import permutation_null
from groundstate.eval.dhd.rule import effect_codes, separation_rule
from groundstate.eval.dhd.simulate import DesignSpec, PlantedEffect, simulate
from groundstate.eval.dhd.values import message_values


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def loo_table(full: np.ndarray, removal: np.ndarray, proposal: list[bool | None]) -> EffectTable:
    """One problem's LOO table from its calls: ``full`` (B x 2: A, B), ``removal`` (B x K); NaN = failed."""
    n_blocks, k = removal.shape
    a, b = np.tile(full[:, 0], (k, 1)), np.tile(full[:, 1], (k, 1))
    without = removal.T
    return EffectTable(keys=[("p", m) for m in range(k)], effects=(a + b) / 2 - without, proposal_correct=proposal,
                       problem_index=None, with_correct=a, without_correct=without, full_b=b, mode="loo", K=k)


def placements(evaluable: list[int], successes: int) -> list[set[int]]:
    return [set(c) for c in combinations(evaluable, successes)]


def test_block_null_is_the_exact_within_block_permutation_distribution():
    # one problem, three messages (one wrong, two correct), three blocks; block 2 has a failed removal call, so its
    # successes are permuted among its four evaluable calls only and message 2 stays non-evaluable there
    full = np.array([[1, 1], [1, 0], [1, 1]], dtype=float)
    removal = np.array([[0, 1, 1], [0, 1, 0], [1, 0, np.nan]])
    table = loo_table(full, removal, [False, True, True])
    outcomes = np.concatenate([full, removal], axis=1)  # slots: A, B, removal 0..2
    per_block = []
    for row in outcomes:
        evaluable = [i for i in range(5) if not np.isnan(row[i])]
        per_block.append(placements(evaluable, int(np.nansum(row))))
    rule = separation_rule(3)
    counts = []
    for chosen in product(*per_block):
        cells = np.array([[1.0 if i in c else 0.0 for i in range(5)] for c in chosen])
        cells[np.isnan(outcomes)] = np.nan
        effects = (cells[:, :2].mean(axis=1, keepdims=True) - cells[:, 2:]).T  # (messages, blocks)
        direction = rule.direction(effect_codes(effects, 3)[0])
        counts.append([direction[0] > 0, direction[0] < 0, (direction[1:] > 0).sum(), (direction[1:] < 0).sum()])
    counts = np.asarray(counts, dtype=float)
    exact = np.append(counts.mean(axis=0), counts.sum(axis=1).mean())
    n = 40_000
    out = permutation_null(table, n_permutations=n, seed=3, return_null=True)
    got = out["null_counts"].mean(axis=0)
    sd = np.append(counts.std(axis=0), counts.sum(axis=1).std()) / math.sqrt(n)
    assert np.all(np.abs(got - exact) <= 4 * sd + 1e-9), (got, exact)
    separated = counts.sum(axis=1)
    for value in range(4):  # the whole distribution of the separated count, not only its mean
        p = (separated == value).mean()
        assert abs((out["null_counts"][:, 4] == value).mean() - p) <= 4 * se(p, n) + 1e-9
    assert out["observed"]["separated"] == int((message_values(table)["direction"] != 0).sum())


def null_share_outside(null: str, n_sets: int = 200) -> tuple[float, float]:
    """Share of simulated null data sets whose observed separated count leaves its 95% null range."""
    spec = DesignSpec(n_problems=300, accuracy=(1.0, 1.0))  # accuracies U(0, 1), five messages, five blocks
    outside = 0
    for seed in range(n_sets):
        out = permutation_null(simulate(spec, seed).table(), n_permutations=400, seed=seed, null=null)
        low, high = out["null"]["separated"]["low"], out["null"]["separated"]["high"]
        outside += not low <= out["observed"]["separated"] <= high
    return outside / n_sets, 0.05 + 3 * se(0.05, n_sets)


def test_within_block_null_keeps_the_separated_count_in_its_range_and_the_sign_flip_null_does_not():
    share, limit = null_share_outside("block")
    assert share <= limit, share
    # regression check of the test itself: the per-message sign flip ignores the shared full-pool calls and fails
    share, limit = null_share_outside("sign-flip")
    assert share > limit, share


def test_problem_level_p_values_match_the_exact_permutation_distribution():
    # complete problem: (A, B, removal 0, removal 1) per block; message 0 wrong, message 1 correct
    #   b0 (1, 1, 0, 1): d0 = 1 + 1 - 0 = 2, d1 = 0;  b1 (1, 0, 0, 1): d0 = 1, d1 = -1;  b2 (0, 0, 0, 0): 0, 0
    # delta sums (3, -1): W+ = 3, W- = -3, C+ = -1, C- = 1, off-diagonal = max(3, 1) = 3, any = 3
    full = np.array([[1, 1], [1, 0], [0, 0]], dtype=float)
    removal = np.array([[0, 1], [0, 1], [0, 0]], dtype=float)
    table = loo_table(full, removal, [False, True])
    n = 200_000
    out = multiplicity(table, n_permutations=n, seed=1)
    entry = out["problems"][0]
    assert entry["statistics"] == {"W+": 3, "W-": -3, "C+": -1, "C-": 1, "off_diagonal": 3, "any_effect": 3}
    assert entry["argmax"]["W+"] == [0] and entry["argmax"]["C-"] == [1]
    # exact: block 0 has 3 successes among 4 calls (4 placements), block 1 has 2 (6), block 2 is constant
    deltas = []
    for first in placements([0, 1, 2, 3], 3):
        for second in placements([0, 1, 2, 3], 2):
            d = np.zeros(2)
            for chosen in (first, second):
                bits = [1 if i in chosen else 0 for i in range(4)]
                d += [bits[0] + bits[1] - 2 * bits[2], bits[0] + bits[1] - 2 * bits[3]]
            deltas.append(d)
    deltas = np.asarray(deltas)
    exact = {"W+": deltas[:, 0], "W-": -deltas[:, 0], "C+": deltas[:, 1], "C-": -deltas[:, 1],
             "off_diagonal": np.maximum(deltas[:, 0], -deltas[:, 1]), "any_effect": np.abs(deltas).max(axis=1)}
    assert (exact["W+"] >= 3).mean() == pytest.approx(1 / 8)  # X = 2 (1 of 4) and Y >= 1 (3 of 6)
    for family in FAMILIES:
        p = (exact[family] >= entry["statistics"][family]).mean()
        assert abs(entry["p_values"][family] - p) <= 4 * se(p, n) + 1e-5, family


def test_problem_level_analysis_excludes_incomplete_problems_and_shares_patterns():
    spec = DesignSpec(n_problems=120, fail_rate=0.01)
    sim = simulate(spec, 4)
    out = multiplicity(sim.table(), n_permutations=500, seed=0)
    incomplete = np.isnan(sim.full).any(axis=(1, 2)) | np.isnan(sim.removal).any(axis=(1, 2))
    assert out["n_excluded"] == int(incomplete.sum()) > 0
    assert out["n_tested_problems"] + out["n_excluded"] == 120
    first = out["excluded"][0]
    assert {"problem_id", "block", "arm", "message_id"} <= set(first)
    assert out["n_patterns"] < out["n_tested_problems"]  # problems with one pattern share one null histogram
    # a problem's p-values depend on its own pattern only: the same problem alone gets the same p-values
    tested = [e for e in out["problems"]][:3]
    table = sim.table()
    for entry in tested:
        alone = multiplicity(table.select([k[0] == entry["problem_id"] for k in table.keys]), n_permutations=500)
        assert alone["problems"][0]["p_values"] == entry["p_values"]


def test_bh_and_by_selections_under_the_null_stay_within_q():
    q, n_sets = 0.05, 200
    spec = DesignSpec(n_problems=40, accuracy=(1.0, 1.0))
    any_bh = dict.fromkeys(FAMILIES, 0)
    selected, tested = dict.fromkeys(FAMILIES, 0), dict.fromkeys(FAMILIES, 0)
    for seed in range(n_sets):
        out = multiplicity(simulate(spec, 500 + seed).table(), n_permutations=2000, seed=seed, q=q)
        for family, info in out["families"].items():
            assert info["n_by"] <= info["n_bh"]
            any_bh[family] += info["n_bh"] > 0
            selected[family] += info["n_bh"]
            tested[family] += info["n_tested"]
    for family in FAMILIES:
        # under the global null every selection is false: P(any) is the FDR, and at most q
        assert any_bh[family] / n_sets <= q + 3 * se(q, n_sets), family
        assert selected[family] <= q * tested[family], family


def test_bh_finds_strong_planted_effects_with_ten_blocks():
    spec = DesignSpec(n_problems=40, n_blocks=10, accuracy_range=(0.6, 1.0), accuracy=(1.0, 1.0),
                      effects=(PlantedEffect("W+", 0.3, 0.8), PlantedEffect("C-", 0.3, 0.8)))
    found, planted, false, selections = 0, 0, 0, 0
    for seed in range(15):
        sim = simulate(spec, seed)
        out = multiplicity(sim.table(), n_permutations=5000, seed=seed)
        ids = sim.problem_ids
        wrong_helpful = {ids[p] for p in range(len(ids)) if ((sim.planted[p] > 0) & ~sim.proposal[p]).any()}
        selected = {s["problem_id"] for s in out["families"]["W+"]["selected_bh"]}
        found += len(selected & wrong_helpful)
        planted += len(wrong_helpful)
        false += len(selected - wrong_helpful)
        selections += len(selected)
    assert found / planted >= 0.8
    assert false <= 0.1 * selections + 3


def test_single_mode_permutes_the_independent_call_with_the_only_calls():
    rows = []
    outcomes = {0: (0, [1, 0, 1]), 1: (1, [1, 1, 0]), 2: (0, [0, 1, 1])}  # block: (independent, only 0..2)
    for block, (independent, only) in outcomes.items():
        rows += [{"problem_id": "s", "message_id": m, "mode": "single", "K": 3, "block": block,
                  "with_correct": only[m], "without_correct": independent, "proposal_correct": m == 2}
                 for m in range(3)]
    from groundstate.eval.dhd.effects import pair_effects

    table = pair_effects(rows, mode="single")
    blocks = table.block_outcomes()
    assert blocks.n_base == 1 and blocks.sign == -1
    np.testing.assert_array_equal(blocks.effects()[0].T, table.effects)  # only - independent
    np.testing.assert_array_equal(table.effects, [[1, 0, 0], [0, 0, 1], [1, -1, 1]])
    out = permutation_null(table, n_permutations=2000, seed=0)
    assert out["observed"]["separated"] == int((message_values(table)["direction"] != 0).sum())
    entry = multiplicity(table, n_permutations=2000)["problems"][0]
    # delta sums are 2 x the sum of a message's effects: 2, 2 (wrong messages 0 and 1) and 2 (correct message 2)
    assert (entry["statistics"]["W+"], entry["statistics"]["W-"], entry["statistics"]["C+"]) == (2, -2, 2)
