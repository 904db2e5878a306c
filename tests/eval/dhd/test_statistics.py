"""DHD replay statistics on synthetic replay outcomes with known effects.

Statistical properties are checked over many seeded simulations, with tolerances derived from the number of
simulated cases (3 standard errors unless stated), never on one lucky seed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from groundstate.eval.dhd.bootstrap import hierarchical_bootstrap
from groundstate.eval.dhd.effects import EffectTable, disagreement_rate, pair_effects
from groundstate.eval.dhd.report import flip_direction, loo_rates_by_K, plot_flip_direction, plot_loo_rates
from groundstate.eval.dhd.values import (
    fdr_selection,
    group_counts,
    labels_rows,
    message_values,
    permutation_null,
    separation_rule,
    strict_counts,
)


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def draw_effects(rng: np.random.Generator, plus: np.ndarray, minus: np.ndarray, n_blocks: int) -> np.ndarray:
    """Ternary block effects: +1 with probability ``plus``, -1 with ``minus`` (per message), else 0."""
    u = rng.random((len(plus), n_blocks))
    return np.where(u < plus[:, None], 1.0, np.where(u < (plus + minus)[:, None], -1.0, 0.0))


def make_table(effects: np.ndarray, proposal: np.ndarray | list, per_problem: int = 5) -> EffectTable:
    keys = [(f"p{i // per_problem}", i % per_problem) for i in range(len(effects))]
    return EffectTable(keys=keys, effects=effects, proposal_correct=list(proposal), problem_index=None)


def null_table(rng: np.random.Generator, n_messages: int, n_blocks: int) -> EffectTable:
    """Symmetric effects (the null): each message flips in a block with its own probability, either way alike."""
    flip = rng.uniform(0.0, 0.8, n_messages)
    return make_table(draw_effects(rng, flip / 2, flip / 2, n_blocks), rng.random(n_messages) < 0.5)


def planted_table(rng: np.random.Generator, n_messages: int, n_blocks: int, share: float = 0.1,
                  strength: float = 0.9, opposite: float = 0.0,
                  null_flip: tuple[float, float] = (0.0, 0.6)) -> tuple[EffectTable, np.ndarray]:
    """Null messages (symmetric flips, probability drawn from ``null_flip``) plus a share of planted helpful (+1) or
    harmful (-1) ones that flip their way with probability ``strength`` and the other way with ``opposite``; returns
    the table and the truth."""
    flip = rng.uniform(*null_flip, n_messages)
    truth = np.where(rng.random(n_messages) < share, rng.choice([-1, 1], n_messages), 0)
    plus = np.where(truth == 1, strength, np.where(truth == -1, opposite, flip / 2))
    minus = np.where(truth == -1, strength, np.where(truth == 1, opposite, flip / 2))
    return make_table(draw_effects(rng, plus, minus, n_blocks), rng.random(n_messages) < 0.5), truth


SAME = object()


def row(problem: str, message: int, block: int, with_: int | None, without: int | None,
        proposal: bool | None = False, mode: str = "loo", k: int = 3, with_b: object = SAME, **extra) -> dict:
    """A pair row; LOO rows carry replicate B (``with_b``, by default equal to replicate A ``with_``)."""
    out = {"problem_id": problem, "message_id": message, "mode": mode, "K": k, "block": block,
           "with_correct": with_, "without_correct": without, "proposal_correct": proposal, **extra}
    if mode == "loo":
        out["with_correct_b"] = with_ if with_b is SAME else with_b
    return out


def loo_rows(rng: np.random.Generator, n_problems: int, k: int = 5, n_blocks: int = 5, harmful_share: float = 0.0,
             drop: float = 0.5, fail: float = 0.0) -> list[dict]:
    """LOO replays: two full-pool calls (replicates A and B) per block; in a problem with a planted harmful message the
    full pool is ``drop`` less accurate and removing that message restores the accuracy; every other reduced pool has
    the full pool's accuracy (a null message)."""
    rows = []
    for p in range(n_problems):
        base = rng.uniform(0.55, 0.95)
        harmful = int(rng.integers(k)) if rng.random() < harmful_share else -1
        pool = base - drop if harmful >= 0 else base
        proposal = rng.random(k) < 0.5
        for b in range(n_blocks):
            full, full_b = int(rng.random() < pool), int(rng.random() < pool)
            for m in range(k):
                without = int(rng.random() < (base if m == harmful else pool))
                rows.append(row(f"q{p}", m, b, full, None if rng.random() < fail else without,
                                bool(proposal[m]), k=k, with_b=full_b, benchmark="A" if p % 2 else "B"))
    return rows


# ---------------------------------------------------------------- tables, failures, disagreement


def test_block_effect_is_the_mean_of_both_full_pool_replicates_minus_the_removal():
    # problem a, two messages, three blocks: (A, B, removal of 0, removal of 1) per block
    #   b0: (1, 0, 0, 1) -> effects 0.5 - 0 = 0.5 and 0.5 - 1 = -0.5
    #   b1: (1, 1, 0, 1) -> 1 and 0
    #   b2: (0, 1, 1, failed) -> -0.5 and not evaluable (no value imputed)
    outcomes = [(1, 0, 0, 1), (1, 1, 0, 1), (0, 1, 1, None)]
    rows = [row("a", m, b, a, (r0, r1)[m], with_b=bb, k=2, proposal=bool(m)) for b, (a, bb, r0, r1) in
            enumerate(outcomes) for m in (0, 1)]
    # problem c: replicate B failed in b0, so no message of c is evaluable there (not scored on replicate A alone)
    rows += [row("c", m, b, 1, m, with_b=None if b == 0 else 1, k=2) for b in range(3) for m in (0, 1)]
    table = pair_effects(rows)
    np.testing.assert_array_equal(table.effects, [[0.5, 1, -0.5], [-0.5, 0, np.nan],
                                                  [np.nan, 1, 1], [np.nan, 0, 0]])
    values = message_values(table)
    assert values.estimate.tolist()[:2] == [pytest.approx(1 / 3), -0.25]
    assert values.n_blocks.tolist() == [3, 2, 2, 2] and values.n_helpful.tolist() == [2, 0, 2, 0]
    np.testing.assert_array_equal(table.full_b[:2], [[0, 1, 1], [0, 1, 1]])
    np.testing.assert_array_equal(table.with_correct[0], [1, 1, 0])  # replicate A, what cross-fitting reads as A
    # replicate A only (the definition before issue 15): A - removal, in {-1, 0, 1}
    only_a = pair_effects(rows, full="a")
    np.testing.assert_array_equal(only_a.effects, [[1, 1, -1], [0, 0, np.nan], [1, 1, 1], [0, 0, 0]])
    assert only_a.full == "a" and only_a.full_b is not None
    blocks = table.block_outcomes()  # the shared calls regrouped: A, B, then one removal slot per message
    np.testing.assert_array_equal(blocks.outcomes[0], [[1, 0, 0, 1], [1, 1, 0, 1], [0, 1, 1, np.nan]])
    np.testing.assert_array_equal(blocks.effects()[0].T, table.effects[:2])
    with pytest.raises(ValueError, match="full='a'"):  # an old cache: no second replicate anywhere
        pair_effects([{k: v for k, v in r.items() if k != "with_correct_b"} for r in rows])
    clash = [row("d", 0, 0, 1, 0), row("d", 1, 0, 0, 0)]  # two messages, two different "shared" full-pool calls
    with pytest.raises(ValueError, match="different baseline"):
        pair_effects(clash).block_outcomes()


def test_failed_arms_are_not_evaluable_never_wrong():
    rows = [row("a", 0, b, 1, 0) for b in range(4)] + [row("a", 0, 4, 1, None)]  # one failed reduced-pool arm
    rows += [row("a", 1, b, 1, 1, proposal=None) for b in range(5)]
    rows += [row("b", 0, b, None if b == 0 else 0, 1, proposal=True) for b in range(5)]
    rows += [row("b", 1, b, None if b == 0 else 0, 0, proposal=True, with_b=None if b == 0 else 1) for b in range(5)]
    table = pair_effects(rows)
    assert table.n_blocks == 5 and table.keys == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert np.isnan(table.effects[0, 4]) and np.isnan(table.effects[2, 0])
    values = message_values(table)
    first = values.iloc[0]
    assert first.n_blocks == 4 and not first.strict and first.estimate == 1.0  # the failure is not a 0 or a -1
    assert values.iloc[2].n_blocks == 4 and values.iloc[2].estimate == -1.0
    assert values.iloc[3].n_blocks == 4 and values.iloc[3].estimate == 0.5  # (0 + 1) / 2 - 0 in blocks 1-4
    assert values.iloc[1].group == "indeterminate" and "unknown" in values.iloc[1].note
    assert flip_direction(table)["all"]["n_evaluable"] == 17
    assert strict_counts(table, values)["n_strict"] == 1
    rate = disagreement_rate([(1, 1), (1, None), (None, 0), (0, 1), (True, False)])
    assert (rate["n"], rate["n_failed"], rate["rate"]) == (3, 2, pytest.approx(2 / 3))


def test_pair_effects_validates_and_accepts_frames():
    rows = [row("a", 0, 0, 1, 0), row("a", 0, 1, 0, 0), row("a", 1, 0, 0, 1, proposal=True),
            row("a", 0, 0, 1, 1, mode="single"), row("z", 0, 0, 1, 0, k=5)]
    with pytest.raises(ValueError, match="pass K="):
        pair_effects(rows)
    table = pair_effects(rows, K=3)
    assert table.keys == [("a", 0), ("a", 1)] and table.K == 3
    np.testing.assert_array_equal(table.effects, [[1, 0], [-1, np.nan]])
    assert pair_effects(rows, mode="single").effects.tolist() == [[0.0]]
    import pandas as pd

    frame = pair_effects(pd.DataFrame(rows), K=3)
    np.testing.assert_array_equal(frame.effects, table.effects)
    with pytest.raises(ValueError, match="duplicate"):
        pair_effects([row("a", 0, 0, 1, 0), row("a", 0, 0, 1, 1)])
    with pytest.raises(ValueError, match="with_correct"):
        pair_effects([row("a", 0, 0, 2, 0)])
    with pytest.raises(ValueError, match="conflicts"):
        pair_effects([row("a", 0, 0, 1, 0, proposal=True), row("a", 0, 1, 1, 0, proposal=False)])
    with pytest.raises(ValueError, match="-1, -0.5, 0, 0.5, 1"):
        message_values(make_table(np.array([[0.25, 1.0]]), [True]))
    with pytest.raises(ValueError, match="full must be"):
        pair_effects(rows, K=3, full="b")


def test_wilson_disagreement_interval_covers_the_rate_at_nominal_level():
    n_sims, n_pairs, truth = 400, 150, 0.08
    hits = 0
    for seed in range(n_sims):
        rng = np.random.default_rng(seed)
        first = (rng.random(n_pairs) < 0.7).astype(int)
        second = np.where(rng.random(n_pairs) < truth, 1 - first, first)
        pairs = [(int(a), None if rng.random() < 0.05 else int(b)) for a, b in zip(first, second, strict=True)]
        out = disagreement_rate(pairs)
        evaluable = [(a, b) for a, b in pairs if b is not None]
        ci = stats.binomtest(sum(a != b for a, b in evaluable), len(evaluable)).proportion_ci(method="wilson")
        assert (out["low"], out["high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
        hits += out["low"] <= truth <= out["high"]
    assert abs(hits / n_sims - 0.95) <= 3 * se(0.95, n_sims)


# ---------------------------------------------------------------- p-values, FDR, planted messages


def test_sign_flip_p_values_are_exact():
    rng = np.random.default_rng(0)
    table = null_table(rng, 60, 7)
    table.effects[::7, 3] = np.nan
    values = message_values(table)
    data = np.nan_to_num(table.effects)
    direct = stats.permutation_test((data,), lambda x, axis: x.sum(axis=axis), permutation_type="samples",
                                    vectorized=True, n_resamples=np.inf, axis=-1).pvalue
    np.testing.assert_allclose(values["p_value"], np.minimum(direct, 1.0))
    sign_test = [stats.binomtest(int(p), int(p + m)).pvalue if p + m else 1.0
                 for p, m in zip(values["n_helpful"], values["n_harmful"], strict=True)]
    np.testing.assert_allclose(values["p_value"], sign_test)
    # effects in halves too (the mean of two full-pool replicates minus a removal): exact against scipy
    halves = rng.choice([-1, -0.5, 0, 0.5, 1], size=(80, 7), p=[0.1, 0.25, 0.3, 0.25, 0.1])
    halves[::9, 2] = np.nan
    table = make_table(halves, np.zeros(80, bool))
    direct = stats.permutation_test((np.nan_to_num(halves),), lambda x, axis: x.sum(axis=axis),
                                    permutation_type="samples", vectorized=True, n_resamples=np.inf, axis=-1).pvalue
    np.testing.assert_allclose(message_values(table)["p_value"], np.minimum(direct, 1.0))
    # a multiset has one interval and p-value whatever B is
    rule_12, rule_14 = separation_rule(12), separation_rule(14)
    counts = [(1, 2, 3, 4, 2), (0, 0, 5, 0, 7), (3, 0, 0, 0, 0)]
    a = rule_12.stats(np.asarray([rule_12.code(c) for c in counts]))
    b = rule_14.stats(np.asarray([rule_14.code(c) for c in counts]))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), equal_nan=True)


def test_null_p_values_are_uniform_enough():
    n_blocks, n = 8, 12_000
    values = message_values(null_table(np.random.default_rng(1), n, n_blocks))
    p = values["p_value"].to_numpy()
    for a in (0.01, 0.05, 0.1, 0.2, 0.5):
        assert (p <= a).mean() <= a + 3 * se(a, n)
    # where every block flips, the exact test attains its levels: P(p <= a_k) = a_k, not merely <= a_k
    rng = np.random.default_rng(2)
    full = message_values(make_table(draw_effects(rng, np.full(n, 0.5), np.full(n, 0.5), n_blocks),
                                     np.zeros(n, bool)))["p_value"].to_numpy()
    for level in (2 / 256, 18 / 256, 74 / 256):
        assert abs((full <= level + 1e-12).mean() - level) <= 3 * se(level, n)


def test_bh_keeps_the_false_discovery_share_at_or_below_q():
    # null messages flip in most blocks, so their exact p-values nearly attain their levels: selecting p <= q
    # without adjustment has a false-discovery share near 0.17 here, BH must stay at or below q
    q, n_sims, fdp, power = 0.1, 80, [], []
    for seed in range(n_sims):
        table, truth = planted_table(np.random.default_rng(seed), 400, 12, share=0.2, strength=0.9, opposite=0.1,
                                     null_flip=(0.6, 1.0))
        values = message_values(table)
        sel = fdr_selection(values["p_value"], q=q, values=values)
        assert not (sel["by"] & ~sel["bh"]).any()
        bh = sel["bh"]
        fdp.append((bh & (truth == 0)).sum() / max(bh.sum(), 1))
        power.append((bh & (truth != 0)).sum() / max((truth != 0).sum(), 1))
        assert sel["counts"]["bh"]["separated"] + sel["counts"]["bh"]["indeterminate"] == bh.sum()
    fdp = np.asarray(fdp)
    assert fdp.mean() <= q + 3 * fdp.std(ddof=1) / math.sqrt(n_sims)
    assert np.mean(power) > 0.5  # the control is not bought by selecting nothing


def test_fdr_selection_is_scipys_and_skips_missing_p_values():
    p = np.array([0.001, 0.04, np.nan, 0.03, 0.5, 0.0001])
    out = fdr_selection(p, q=0.05)
    finite = ~np.isnan(p)
    for method in ("bh", "by"):
        expected = stats.false_discovery_control(p[finite], method=method) <= 0.05
        np.testing.assert_array_equal(out[method][finite], expected)
        assert not out[method][2]
    assert out["n_tests"] == 5


@pytest.mark.parametrize("method", ["bootstrap", "sign-flip"])
def test_planted_helpful_and_harmful_messages_are_found_with_the_right_sign(method):
    found, wrong_sign, null_separated, n_planted, n_null = 0, 0, 0, 0, 0
    for seed in range(10):
        table, truth = planted_table(np.random.default_rng(100 + seed), 300, 10, share=0.2, strength=0.9)
        values = message_values(table, method=method)
        direction = values["direction"].to_numpy()
        found += (direction[truth != 0] == truth[truth != 0]).sum()
        wrong_sign += (direction * truth < 0).sum()
        null_separated += (direction[truth == 0] != 0).sum()
        n_planted, n_null = n_planted + (truth != 0).sum(), n_null + (truth == 0).sum()
        groups = values["group"].to_numpy()
        wrong = ~values["proposal_correct"].astype(bool).to_numpy()
        assert set(groups[(truth == 1) & (direction == 1) & wrong]) == {"W+"}
        assert set(groups[(truth == -1) & (direction == -1) & ~wrong]) == {"C-"}
        rows = labels_rows(table, values)
        assert {r["label"] for r, t, d in zip(rows, truth, direction, strict=True) if t == 1 and d == 1} == {"helpful"}
    assert wrong_sign == 0
    assert found / n_planted >= 0.9
    assert null_separated / n_null <= 0.05


def test_paper_sized_blocks_find_repeatable_effects_with_the_interval_rule():
    table, truth = planted_table(np.random.default_rng(7), 2000, 5, share=0.1, strength=0.95)
    direction = message_values(table)["direction"].to_numpy()
    assert (direction[truth != 0] == truth[truth != 0]).mean() >= 0.9
    assert (direction * truth < 0).sum() == 0
    # with five blocks no exact two-sided sign-flip p-value is below 0.05: that rule separates nothing
    assert (message_values(table, method="sign-flip")["direction"] == 0).all()


def test_message_interval_is_scipys_bootstrap_and_decides_the_group():
    table = null_table(np.random.default_rng(3), 40, 6)
    table.effects[0, :5] = np.nan
    values = message_values(table)
    for i in range(1, 40, 7):
        effects = np.sort(table.effects[i][~np.isnan(table.effects[i])])
        if np.all(effects == effects[0]):
            continue
        ci = stats.bootstrap((effects,), np.mean, method="percentile", n_resamples=9999,
                             rng=np.random.default_rng(0)).confidence_interval
        assert (values.low[i], values.high[i]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert np.isnan(values.low[0]) and values.group[0] == "indeterminate"
    np.testing.assert_array_equal(values.direction, (values.low > 0).astype(int) - (values.high < 0).astype(int))
    flip = message_values(table, method="sign-flip")
    np.testing.assert_array_equal(flip.direction, np.sign(flip.estimate) * (flip.p_value < 0.05) * (flip.n_blocks > 1))


def test_message_intervals_are_exploratory_with_few_blocks_and_tighten_with_more():
    """Per-message percentile intervals over B ternary block effects under-cover for small B (documented)."""
    coverage = {}
    n = 6000
    for n_blocks in (5, 12):
        rng = np.random.default_rng(n_blocks)
        plus, minus = rng.uniform(0, 0.5, n), rng.uniform(0, 0.5, n)
        values = message_values(make_table(draw_effects(rng, plus, minus, n_blocks), np.zeros(n, bool)))
        coverage[n_blocks] = ((values.low <= plus - minus) & (plus - minus <= values.high)).mean()
    assert coverage[12] >= 0.85 and coverage[12] > coverage[5] + 0.05 and coverage[5] < 0.95 - 3 * se(0.95, n)


# ---------------------------------------------------------------- hierarchical bootstrap


def _hier_params(rng, n_problems, k=5):
    u = rng.random(n_problems)[:, None] * np.ones((1, k))
    correct = rng.random((n_problems, k)) < 0.5
    helpful = rng.random((n_problems, k)) < np.where(correct, 0.4, 0.2)
    return correct, np.where(helpful, 0.1 + 0.6 * u, 0.05), np.where(helpful, 0.05, 0.05 + 0.3 * u)


def test_hierarchical_bootstrap_covers_the_group_means():
    correct, plus, minus = _hier_params(np.random.default_rng(12345), 400_000)
    truth = {"wrong": (plus - minus)[~correct].mean(), "correct": (plus - minus)[correct].mean()}
    truth["difference"] = truth["correct"] - truth["wrong"]
    n_sims, hits = 150, dict.fromkeys(truth, 0)
    for seed in range(n_sims):
        rng = np.random.default_rng(seed)
        correct, plus, minus = _hier_params(rng, 50)
        effects = draw_effects(rng, plus.ravel(), minus.ravel(), 5)
        effects[rng.random(effects.shape) < 0.02] = np.nan
        table = make_table(effects, correct.ravel())
        out = hierarchical_bootstrap(table, message_values(table), n_resamples=300, seed=seed)
        for name in truth:
            hits[name] += out[name]["low"] <= truth[name] <= out[name]["high"]
    for name in truth:
        assert hits[name] / n_sims >= 0.9, (name, hits[name] / n_sims)


def test_hierarchical_bootstrap_matches_blocks_and_stratifies():
    rng = np.random.default_rng(5)
    shared = draw_effects(rng, np.full(30, 0.3), np.full(30, 0.3), 5)
    table = make_table(np.repeat(shared, 2, axis=0), [False, True] * 30, per_problem=2)  # identical W and C
    out = hierarchical_bootstrap(table, message_values(table), n_resamples=300)
    assert out["difference"]["low"] == pytest.approx(0) and out["difference"]["high"] == pytest.approx(0)
    assert out["wrong"]["high"] - out["wrong"]["low"] > 0.1
    effects = np.where(np.arange(40)[:, None] < 20, 1.0, -1.0) * np.ones((40, 5))
    table = make_table(effects, [False] * 40, per_problem=1)
    labels = ["x" if i < 20 else "y" for i in range(40)]
    flat = hierarchical_bootstrap(table, message_values(table), n_resamples=300, stratify=labels)
    assert flat["wrong"]["low"] == pytest.approx(0) == flat["wrong"]["high"] and flat["strata"] == {"x": 20, "y": 20}
    loose = hierarchical_bootstrap(table, message_values(table), n_resamples=300)
    assert loose["wrong"]["high"] - loose["wrong"]["low"] > 0.3 and loose["correct"]["mean"] is None
    table = pair_effects(loo_rows(np.random.default_rng(0), 30))  # rows carry a benchmark: the default strata
    parts = table.by_stratum()
    assert sorted(parts) == ["A", "B"] and sum(p.n_messages for p in parts.values()) == table.n_messages
    out = hierarchical_bootstrap(table, message_values(table), n_resamples=200, stratify=True)
    assert out["strata"] == {"B": 15, "A": 15}


# ---------------------------------------------------------------- permutation null


def _expected_null_means(table: EffectTable, values) -> np.ndarray:
    """Exact expectation and variance of the W+, W-, C+, C- counts under independent sign flips.

    A message with ``n2`` effects of size 1 and ``n1`` of size 0.5 keeps its zeros; ``k2`` of the first and ``k1`` of
    the second end up positive with binomial probabilities; the rule's direction of each resulting multiset
    ``(c_-1, c_-0.5, c_0, c_0.5, c_1) = (n2 - k2, n1 - k1, zeros, k1, k2)`` is looked up.
    """
    rule = separation_rule(table.n_blocks)
    effects = table.effects
    code = table.proposal_code
    mean, var = np.zeros(4), np.zeros(4)
    for i in range(table.n_messages):
        if code[i] < 0:
            continue
        e = effects[i][~np.isnan(effects[i])]
        n2, n1, zeros = int((np.abs(e) == 1).sum()), int((np.abs(e) == 0.5).sum()), int((e == 0).sum())
        k2, k1 = np.meshgrid(np.arange(n2 + 1), np.arange(n1 + 1), indexing="ij")
        weight = stats.binom.pmf(k2, n2, 0.5) * stats.binom.pmf(k1, n1, 0.5)
        codes = np.asarray([rule.code((n2 - a, n1 - b, zeros, b, a)) for a, b in zip(k2.ravel(), k1.ravel(),
                                                                                      strict=True)])
        direction = rule.direction(codes).reshape(weight.shape) if len(e) >= 2 else np.zeros(weight.shape)
        for sign, offset in ((1, 0), (-1, 1)):
            prob = weight[direction == sign].sum()
            mean[2 * code[i] + offset] += prob
            var[2 * code[i] + offset] += prob * (1 - prob)
    return mean, var


def test_permutation_null_uses_the_same_rule_and_has_the_exact_null_mean():
    rng = np.random.default_rng(9)
    table = null_table(rng, 800, 5)
    table.effects[rng.random(table.effects.shape) < 0.05] = np.nan
    table.proposal_correct[::11] = None
    table.effects[::3] /= 2  # halves too: the sign flip keeps each effect's size
    values = message_values(table)
    out = permutation_null(table, n_permutations=4000, seed=1, return_null=True, null="sign-flip")
    counts = group_counts(values["group"])
    assert out["observed"] == {g: counts[g] for g in ("W+", "W-", "C+", "C-", "separated")}
    mean, var = _expected_null_means(table, values)
    got = out["null_counts"][:, :4].mean(axis=0)
    assert np.all(np.abs(got - mean) <= 4 * np.sqrt(var / 4000) + 1e-9)
    assert out["null_counts"][:, :4].var(axis=0) == pytest.approx(var, rel=0.15)


def test_sign_flip_null_ranges_hold_for_independent_symmetric_effects():
    """The sign-flip null is right when messages are independent and their effects symmetric (this table has no
    shared full-pool calls); under the real design it is not (tests/eval/dhd/test_calibration.py)."""
    n_sims, inside, small_p = 100, 0, 0
    for seed in range(n_sims):
        table = null_table(np.random.default_rng(1000 + seed), 400, 5)
        out = permutation_null(table, n_permutations=500, seed=seed, null="sign-flip")
        low, high = out["null"]["separated"]["low"], out["null"]["separated"]["high"]
        inside += low <= out["observed"]["separated"] <= high
        small_p += out["p_value"] <= 0.05
    assert inside / n_sims >= 0.95 - 3 * se(0.95, n_sims)
    assert small_p / n_sims <= 0.05 + 3 * se(0.05, n_sims)
    for seed in range(5):
        table, _ = planted_table(np.random.default_rng(2000 + seed), 400, 5, share=0.1)
        out = permutation_null(table, n_permutations=500, seed=seed, null="sign-flip")
        assert out["observed"]["separated"] > out["null"]["separated"]["high"] and out["p_value"] < 0.01


def test_permutation_null_sign_flip_rule_and_summary():
    table, _ = planted_table(np.random.default_rng(4), 300, 8, share=0.1)
    values = message_values(table, method="sign-flip")
    out = permutation_null(table, n_permutations=300, method="sign-flip", null="sign-flip")
    assert out["observed"]["separated"] == group_counts(values["group"])["separated"]
    with pytest.raises(ValueError, match="arms"):  # the within-block null needs the calls, not only the effects
        permutation_null(table, n_permutations=10)
    with pytest.raises(ValueError, match="null must be"):
        permutation_null(table, n_permutations=10, null="shuffle")
    assert out["null"]["separated"]["low"] <= out["null"]["separated"]["mean"] <= out["null"]["separated"]["high"]
    json.dumps(out)


# ---------------------------------------------------------------- labels and report data


def test_labels_rows_are_json_lines():
    rows = loo_rows(np.random.default_rng(3), 20, harmful_share=0.5, fail=0.05)
    table = pair_effects(rows)
    values = message_values(table)
    labels = labels_rows(table, values)
    assert len(labels) == table.n_messages
    text = "\n".join(json.dumps(r, allow_nan=False) for r in labels)
    assert {"estimate", "low", "high", "label", "proposal_correct", "group", "strict", "n_blocks"} <= set(
        json.loads(text.splitlines()[0]))
    with pytest.raises(ValueError, match="do not match"):
        labels_rows(table, values.iloc[1:])


def test_flip_direction_and_loo_rates_by_k(tmp_path):
    rows = [row("a", 0, 0, 1, 0), row("a", 1, 0, 0, 1), row("a", 2, 0, 1, 1, proposal=True),
            row("b", 0, 0, 1, 0, proposal=True), row("b", 1, 0, 1, 0), row("b", 2, 0, 1, None, proposal=None),
            row("c", 0, 0, 0, 1, proposal=None, k=2), row("c", 1, 0, 1, 1, proposal=True, k=2)]
    flips = flip_direction(pair_effects(rows, K=3))
    assert (flips["wrong"]["helpful"], flips["wrong"]["harmful"], flips["wrong"]["n_evaluable"]) == (2, 1, 3)
    assert flips["wrong"]["helpful_share"] == pytest.approx(2 / 3)
    assert flips["correct"]["flip_rate"] == pytest.approx(0.5) and flips["unknown"]["n_evaluable"] == 0
    rates = loo_rates_by_K(rows)
    assert list(rates) == [2, 3]
    assert rates[3]["n_eligible"] == 5 and rates[3]["W+"] == pytest.approx(2 / 5)
    assert rates[3]["C+"] == pytest.approx(1 / 5) and rates[2]["n_eligible"] == 1
    pytest.importorskip("matplotlib")
    assert plot_flip_direction(flips, tmp_path / "flips.png") and (tmp_path / "flips.png").stat().st_size > 0
    assert plot_loo_rates(rates, tmp_path / "rates.png") and (tmp_path / "rates.png").stat().st_size > 0
