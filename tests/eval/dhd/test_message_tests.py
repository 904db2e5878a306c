"""Per-message within-block permutation p-values (Table 19's BH column): exact, valid, and able to select.

Data sets come from :mod:`groundstate.eval.dhd.simulate`, a generative model of the real design (problems with their
own accuracies, five messages sharing each block's two full-pool calls, five blocks), in two difficulty mixes:
accuracies uniform on (0, 1) and the U-shaped mix of near-certain and near-hopeless problems with a few borderline
ones (Beta(0.15, 0.06): about 7% identical-input disagreement, inside the paper's 1.6-17.5%). Tolerances are three
standard errors of the simulated sample sizes; messages of one problem share their calls, so null rates are counted
on one message per problem (independent problems: a binomial count).
"""

from __future__ import annotations

import math
from itertools import combinations, product

import numpy as np
import pytest

from groundstate.eval.dhd.effects import EffectTable, pair_effects
from groundstate.eval.dhd.message_tests import block_permutation_p_values
from groundstate.eval.dhd.simulate import DesignSpec, PlantedEffect, simulate
from groundstate.eval.dhd.values import fdr_selection, message_values

MIXES = {"uniform": (1.0, 1.0), "u-shaped": (0.15, 0.06)}
Q = 0.05


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def loo_table(full: np.ndarray, removal: np.ndarray, proposal: list[bool | None], mode: str = "mean") -> EffectTable:
    n_blocks, k = removal.shape
    a, b = np.tile(full[:, 0], (k, 1)), np.tile(full[:, 1], (k, 1))
    effects = (a + b) / 2 - removal.T if mode == "mean" else a - removal.T
    return EffectTable(keys=[("p", m) for m in range(k)], effects=effects, proposal_correct=proposal,
                       problem_index=None, with_correct=a, without_correct=removal.T, full_b=b, mode="loo", K=k,
                       full=mode)


def enumerate_p_values(outcomes: np.ndarray, n_base: int, sign: int) -> list[float]:
    """Two-sided p-values by visiting every within-block permutation of the evaluable calls (slots: baseline
    call(s), then one per message; NaN = failed)."""
    n_blocks, n_slots = outcomes.shape
    factor = 2 // n_base
    per_block = []
    for row in outcomes:
        evaluable = [i for i in range(n_slots) if not np.isnan(row[i])]
        per_block.append([set(c) for c in combinations(evaluable, int(np.nansum(row)))])

    def deltas(cells: np.ndarray) -> np.ndarray:
        base = cells[:, :n_base].sum(axis=1, keepdims=True)
        terms = sign * (factor * base - 2 * cells[:, n_base:])
        counted = ~np.isnan(outcomes[:, :n_base]).any(axis=1, keepdims=True) & ~np.isnan(outcomes[:, n_base:])
        return np.where(counted, np.nan_to_num(terms), 0).sum(axis=0)

    observed = deltas(np.nan_to_num(outcomes))
    hits = np.zeros(n_slots - n_base)
    total = 0
    for chosen in product(*per_block):
        cells = np.array([[1.0 if i in c else 0.0 for i in range(n_slots)] for c in chosen])
        hits += np.abs(deltas(cells)) >= np.abs(observed)
        total += 1
    return list(hits / total)


def test_p_values_are_the_exact_within_block_permutation_distribution():
    # LOO, both replicates: three blocks, block 2 with a failed removal call (message 2 not evaluable there, its
    # successes permuted among the four evaluable calls) and block 1 fully informative
    full = np.array([[1, 1], [1, 0], [1, 1]], dtype=float)
    removal = np.array([[0, 1, 1], [0, 0, 1], [1, 0, np.nan]])
    p = block_permutation_p_values(loo_table(full, removal, [False, True, True]))
    exact = enumerate_p_values(np.concatenate([full, removal], axis=1), n_base=2, sign=1)
    np.testing.assert_allclose(p, exact, rtol=1e-12)
    # replicate A only: two slots per baseline-and-message pair, the deltas doubled
    p = block_permutation_p_values(loo_table(full, removal, [False, True, True], mode="a"))
    exact = enumerate_p_values(np.concatenate([full[:, :1], removal], axis=1), n_base=1, sign=1)
    np.testing.assert_allclose(p, exact, rtol=1e-12)


def test_single_mode_permutes_the_independent_call_with_the_only_calls():
    outcomes = {0: (0, [1, 0, 1]), 1: (1, [1, 1, 0]), 2: (0, [0, 1, 1]), 3: (np.nan, [1, 1, 1])}
    rows = [{"problem_id": "s", "message_id": m, "mode": "single", "K": 3, "block": block,
             "with_correct": only[m], "without_correct": None if np.isnan(independent) else independent,
             "proposal_correct": m == 2} for block, (independent, only) in outcomes.items() for m in range(3)]
    p = block_permutation_p_values(pair_effects(rows, mode="single"))
    cells = np.array([[independent, *only] for independent, only in outcomes.values()], dtype=float)
    np.testing.assert_allclose(p, enumerate_p_values(cells, n_base=1, sign=-1), rtol=1e-12)


def test_five_helpful_blocks_reach_one_seventh_to_the_fifth_where_the_sign_flip_stops_at_0_0625():
    full = np.ones((5, 2))
    removal = np.ones((5, 5))
    removal[:, 0] = 0  # message 0: both full-pool calls right, its removal the one wrong call, five times
    table = loo_table(full, removal, [False, True, True, True, True])
    p = block_permutation_p_values(table)
    assert p[0] == pytest.approx((1 / 7) ** 5, rel=1e-9)
    np.testing.assert_allclose(p[1:], 1.0)
    assert message_values(table)["p_value"][0] == pytest.approx(0.0625)
    # one-sided: the same tail for the helpful side, nothing below the observed value for the harmful side
    assert block_permutation_p_values(table, "greater")[0] == pytest.approx((1 / 7) ** 5, rel=1e-9)
    assert block_permutation_p_values(table, "less")[0] == pytest.approx(1.0)
    # the mirror image: a wrong-harmful message (full pool wrong, its removal the one right call)
    mirrored = loo_table(1 - full, 1 - removal, [False] * 5)
    assert block_permutation_p_values(mirrored)[0] == pytest.approx((1 / 7) ** 5, rel=1e-9)
    assert block_permutation_p_values(mirrored, "less")[0] == pytest.approx((1 / 7) ** 5, rel=1e-9)


def test_no_evaluable_block_is_no_test_and_bad_arguments_are_refused():
    full = np.array([[np.nan, 1], [1, np.nan]])
    removal = np.array([[0, 1], [1, 0]], dtype=float)
    table = loo_table(full, removal, [False, True])
    assert np.isnan(block_permutation_p_values(table)).all()
    assert fdr_selection(block_permutation_p_values(table))["n_tests"] == 0
    with pytest.raises(ValueError, match="alternative"):
        block_permutation_p_values(table, "both")
    bare = EffectTable(keys=[("p", 0)], effects=[[0.0]], proposal_correct=[True], problem_index=None)
    with pytest.raises(ValueError, match="arms"):
        block_permutation_p_values(bare)


@pytest.mark.parametrize("mix", MIXES)
def test_null_p_values_are_uniform_or_conservative(mix):
    n_sets, n_problems = 150, 100
    spec = DesignSpec(n_problems=n_problems, accuracy=MIXES[mix])
    first = np.concatenate([block_permutation_p_values(simulate(spec, 900 + s).table())[::5] for s in range(n_sets)])
    n = len(first)
    for alpha in (0.001, 0.01, 0.05, 0.1, 0.2, 0.5):
        rate = float((first <= alpha).mean())
        assert rate <= alpha + 3 * se(alpha, n), (alpha, rate)


def test_bh_and_by_under_the_global_null_rarely_select_anything():
    # under the global null every selection is false, so the FDR is the chance of any selection: at most q
    n_sets = 200
    spec = DesignSpec(n_problems=100, accuracy=MIXES["uniform"])
    any_bh = any_by = 0
    for s in range(n_sets):
        selection = fdr_selection(block_permutation_p_values(simulate(spec, 1_300 + s).table()), q=Q)
        assert selection["n_by"] <= selection["n_bh"]
        any_bh += selection["n_bh"] > 0
        any_by += selection["n_by"] > 0
    assert any_bh / n_sets <= Q + 3 * se(Q, n_sets)
    assert any_by / n_sets <= Q + 3 * se(Q, n_sets)


@pytest.mark.parametrize("mix", MIXES)
def test_bh_keeps_the_fdr_under_planted_effects_and_finds_strong_ones(mix):
    effects = tuple(PlantedEffect(group, 0.05, 0.9) for group in ("W+", "W-", "C+", "C-"))
    spec = DesignSpec(n_problems=200, accuracy=MIXES[mix], effects=effects)
    n_sets = 40
    proportions, found, strong_total, wrong_sign, sign_flip_selected = [], 0, 0, 0, 0
    for s in range(n_sets):
        sim = simulate(spec, 1_700 + s)
        table = sim.table()
        values = message_values(table)
        selection = fdr_selection(block_permutation_p_values(table), q=Q, values=values)
        planted = sim.planted.ravel()
        chosen = selection["bh"]
        proportions.append(float((chosen & (planted == 0)).sum() / max(chosen.sum(), 1)))
        strong = (planted != 0) & (np.abs(sim.true_value.ravel()) >= 0.8)
        found += int((chosen & strong).sum())
        strong_total += int(strong.sum())
        wrong_sign += int((chosen & (np.sign(values["estimate"].to_numpy()) * planted < 0)).sum())
        sign_flip_selected += fdr_selection(values["p_value"], q=Q)["n_bh"]
    proportions = np.asarray(proportions)
    assert proportions.mean() <= Q + 3 * max(proportions.std(ddof=1), se(Q, 200)) / math.sqrt(n_sets)
    assert wrong_sign == 0
    assert found / strong_total >= (0.75 if mix == "u-shaped" else 0.5), found / strong_total
    assert sign_flip_selected == 0  # the floor of 0.0625 never passes BH over hundreds of messages
