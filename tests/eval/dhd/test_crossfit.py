"""Cross-fitted one-removal analysis (the paper's Tables 24-26): hand-worked variants, controls, exclusions.

Statistical properties are checked over seeded simulations with tolerances from the number of cases (3 standard
errors unless stated); the hand-built tables have their numbers worked out in comments.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from groundstate.eval.dhd.crossfit import crossfit_keep_or_remove
from groundstate.eval.dhd.effects import pair_effects


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def row(problem: str, message: int, block: int, a: int | None, removal: int | None, b: int | None, k: int = 2,
        **extra) -> dict:
    """One LOO pair row: ``a``/``b`` the block's two full-pool replicates, ``removal`` the pool without the message."""
    return {"problem_id": problem, "message_id": message, "mode": "loo", "K": k, "block": block, "with_correct": a,
            "without_correct": removal, "with_correct_b": b, "proposal_correct": False, **extra}


def block_rows(problem: str, a: list, b: list, removals: list[list], **extra) -> list[dict]:
    """Rows of one problem: ``a[h]``, ``b[h]`` per block and ``removals[m][h]`` per message and block."""
    k = len(removals)
    return [row(problem, m, h, a[h], removals[m][h], b[h], k=k, **extra) for m in range(k) for h in range(len(a))]


def run(rows: list[dict], **kwargs) -> dict:
    kwargs.setdefault("n_resamples", 200)
    kwargs.setdefault("n_shuffles", 200)
    return crossfit_keep_or_remove(pair_effects(rows), **kwargs)


def sim_rows(rng: np.random.Generator, n_problems: int, k: int = 5, n_blocks: int = 5, harmful_share: float = 0.0,
             drop: float = 0.5, fail: float = 0.0) -> list[dict]:
    """Two full-pool replicates and K removals per block, every call of a problem Bernoulli with the problem's
    accuracy; in a problem with a planted harmful message both replicates are ``drop`` less accurate and removing
    that message restores the accuracy."""
    rows = []
    for p in range(n_problems):
        base = rng.uniform(0.55, 0.95)
        harmful = int(rng.integers(k)) if rng.random() < harmful_share else -1
        pool = base - drop if harmful >= 0 else base
        for h in range(n_blocks):
            a, b = (int(rng.random() < pool) for _ in range(2))
            for m in range(k):
                removal = int(rng.random() < (base if m == harmful else pool))
                rows.append(row(f"q{p}", m, h, a, None if rng.random() < fail else removal, b, k=k,
                                benchmark="X" if p % 2 else "Y"))
    return rows


# Problem "a" (K=2, 3 blocks): A = [1, 1, 0], B = [0, 0, 0], removal of message 0 = [1, 0, 1], of message 1 = 0.
# Message 1's effects are never negative in any variant, so only message 0 can be removed.
#   main: full = (A+B)/2 = [.5, .5, 0]; effects of m0 = [-.5, .5, -1]
#     h=0: mean(.5, -1) = -.25 -> remove m0, scores 1 (full .5): +.5
#     h=1: mean(-.5, -1) = -.75 -> remove m0, scores 0 (full .5): -.5
#     h=2: mean(-.5, .5) = 0 -> keep, scores 0: 0
#   A: full = [1, 1, 0]; effects of m0 = [0, 1, -1]
#     h=0: mean(1, -1) = 0 -> keep: 0;  h=1: mean(0, -1) -> remove, 0 vs 1: -1;  h=2: mean(0, 1) -> keep: 0
#   B: full = [0, 0, 0]; effects of m0 = [-1, 0, -1]
#     h=0: remove, 1 vs 0: +1;  h=1: remove, 0 vs 0: 0;  h=2: remove, 1 vs 0: +1
# Problem "b" (K=2): A = [1, 0, 1], B = [0, 1, 1], every removal wrong: always kept; under main the kept pool scores
# .5 on blocks 0 and 1 (the replicates disagree) and 1 on block 2.
# Micro-pooled over the 6 units:
#   main: full (1 + 2) / 6 = .5, cross-fit (1 + 2) / 6 = .5, gain 0
#   A:    full (2 + 2) / 6,      cross-fit (1 + 2) / 6,      gain -1/6
#   B:    full (0 + 2) / 6,      cross-fit (2 + 2) / 6,      gain +2/6
HAND = (block_rows("a", [1, 1, 0], [0, 0, 0], [[1, 0, 1], [0, 0, 0]], benchmark="S")
        + block_rows("b", [1, 0, 1], [0, 1, 1], [[0, 0, 0], [0, 0, 0]], benchmark="T"))


def test_main_estimate_scores_the_full_pool_as_the_mean_of_both_replicates():
    out = run(HAND)
    main = out["variants"]["main"]
    assert out["headline"] == "main" and out["gain"] == main["gain"]
    assert main["full_accuracy"] == pytest.approx(0.5) and main["crossfit_accuracy"] == pytest.approx(0.5)
    assert main["gain"]["mean"] == pytest.approx(0.0) and main["n_units"] == 6 and main["n_problems"] == 2
    decisions = {(d["problem_id"], d["held_out_block"]): d for d in main["decisions"]}
    assert [decisions["a", h]["removed_message_id"] for h in range(3)] == [0, 0, None]
    assert [decisions["a", h]["value"] for h in range(3)] == [1.0, 0.0, 0.0]
    kept = decisions["b", 0]  # A = 1, B = 0 on this block: a kept pool scores 0.5
    assert kept["removed_message_id"] is None and kept["value"] == kept["full_value"] == 0.5
    assert main["removal_share"] == pytest.approx(2 / 6)
    # baselines (the authors' per-fold random_all6_value / random_removal_value), worked out per unit:
    # random action: a: (.5+1+0)/3, (.5+0+0)/3, (0+1+0)/3; b: (.5)/3, (.5)/3, 1/3 -> total 5/3 over 6 units
    assert main["baselines"]["random_action_accuracy"] == pytest.approx(5 / 18)
    assert main["baselines"]["random_removal_accuracy"] == pytest.approx((0.5 + 0 + 0.5) / 6)
    json.dumps(out)


def test_replicate_rows_use_one_replicate_for_training_and_scoring():
    out = run(HAND)
    a, b = out["variants"]["A"], out["variants"]["B"]
    assert (a["full_accuracy"], a["crossfit_accuracy"], a["gain"]["mean"]) == pytest.approx((4 / 6, 3 / 6, -1 / 6))
    assert (b["full_accuracy"], b["crossfit_accuracy"], b["gain"]["mean"]) == pytest.approx((2 / 6, 4 / 6, 2 / 6))
    removed = {name: [d["removed_message_id"] for d in out["variants"][name]["decisions"] if d["problem_id"] == "a"]
               for name in ("A", "B")}
    assert removed == {"A": [None, 0, None], "B": [0, 0, 0]}
    assert "mean of replicates A and B" in out["variants"]["main"]["full_pool"]
    assert "replicate B only" in b["full_pool"]


def test_equal_replicates_give_three_equal_variants():
    # a: the full pool always fails, removing message 1 always succeeds -> removed on every held-out block (+1);
    # b: everything succeeds -> kept. Full 4/8, cross-fit 8/8, gain 1/2 in every variant.
    rows = [row("a", m, h, 0, int(m == 1), 0, k=3) for h in range(4) for m in range(3)]
    rows += [row("b", m, h, 1, 1, 1, k=3) for h in range(4) for m in range(3)]
    out = run(rows, n_shuffles=50)
    for variant in out["variants"].values():
        assert (variant["full_accuracy"], variant["crossfit_accuracy"], variant["gain"]["mean"]) == (0.5, 1.0, 0.5)
        assert {d["removed_message_id"] for d in variant["decisions"] if d["problem_id"] == "a"} == {1}
        assert {d["removed_message_id"] for d in variant["decisions"] if d["problem_id"] == "b"} == {None}


def test_per_benchmark_gains_partition_the_pooled_gain():
    out = run(HAND)
    main = out["variants"]["main"]
    assert out["benchmarks"] == ["S", "T"] and set(main["by_benchmark"]) == {"S", "T"}
    s, t = main["by_benchmark"]["S"], main["by_benchmark"]["T"]
    assert (s["gain"]["mean"], s["n_units"], s["n_problems"]) == (0.0, 3, 1)
    assert out["variants"]["B"]["by_benchmark"]["S"]["gain"]["mean"] == pytest.approx(2 / 3)
    assert t["gain"]["mean"] == 0.0 and t["full_accuracy"] == pytest.approx(2 / 3)
    rows = sim_rows(np.random.default_rng(7), 60, harmful_share=0.5)
    out = run(rows, n_shuffles=0)
    for name, variant in out["variants"].items():
        parts = variant["by_benchmark"].values()
        assert sum(p["gain"]["mean"] * p["n_units"] for p in parts) == pytest.approx(
            variant["gain"]["mean"] * variant["n_units"]), name


def test_without_a_second_replicate_the_headline_is_replicate_a_and_says_so():
    rows = [{k: v for k, v in r.items() if k != "with_correct_b"} for r in HAND]
    table = pair_effects(rows, full="a")
    assert table.full_b is None
    out = crossfit_keep_or_remove(table, n_resamples=100, n_shuffles=20)
    assert set(out["variants"]) == {"A"} and out["headline"] == "A" and "cannot be formed" in out["note"]
    assert out["gain"]["mean"] == pytest.approx(-1 / 6)
    # the variants come from the arms, not from the table's own block effect: a replicate-A table with B still
    # gets all three
    out = crossfit_keep_or_remove(pair_effects(HAND, full="a"), n_resamples=100, n_shuffles=20)
    assert out["headline"] == "main" and out["gain"]["mean"] == pytest.approx(0.0)


def _two_problems(k: int, p_rows: tuple[list, list, list[list]], n_blocks: int) -> list[dict]:
    q = ([1] + [0] * (n_blocks - 1), [1] + [0] * (n_blocks - 1), [[1] * n_blocks for _ in range(k)])
    return block_rows("p", *p_rows) + block_rows("q", *q)


@pytest.mark.parametrize("draw", ["problem", "block"])
def test_all_action_control_permutes_the_actions_within_each_problem(draw):
    # p (K=2, 5 blocks): the full pool always fails, both removals succeed: the policy removes message 0 (ties: the
    # lowest position) on every block, gain +1 per unit; a relabeled action keeps the gain unless it becomes "keep".
    # q: the full pool succeeds only on block 0, both removals always succeed: training favours removing on every
    # held-out block (mean effect -1 or -3/4), so q removes too: gain 0 on block 0 and +1 on blocks 1-4.
    # Observed (5 + 4) / 10 = 0.9. Taking the other problem's actions would always be a removal (both remove), so
    # "keep" -- a null below the observed gain -- only appears when each problem's own three actions are permuted.
    # Per-problem draw: p keeps its 5 with probability 2/3, q its 4 -> null mean (2/3 * 9) / 10 = 0.6, null 0 with
    # probability 1/9, null >= 0.9 with probability 4/9.
    k, n_blocks = 2, 5
    rows = _two_problems(k, ([0] * n_blocks, [0] * n_blocks, [[1] * n_blocks for _ in range(k)]), n_blocks)
    out = run(rows, n_shuffles=3000, control_draw=draw)
    control = out["variants"]["main"]["controls"]["all_action"]
    assert out["gain"]["mean"] == pytest.approx(0.9) and control["observed"] == pytest.approx(0.9)
    assert control["mean"] == pytest.approx(0.6, abs=4 * 0.31 / math.sqrt(3000))
    if draw == "problem":  # one relabeling per problem: all of a problem's blocks turn to "keep" together
        assert control["low"] == pytest.approx(0.0) and control["high"] == pytest.approx(0.9)
        assert control["p_value"] == pytest.approx(4 / 9, abs=0.04)
    else:  # a fresh relabeling per held-out block: 9 independent gains, each lost w.p. 1/3 (P(>= 7 lost) < 0.01)
        assert control["low"] >= 0.2
    # the removal-identity control keeps every removal a removal (both succeed): its null is the observed gain
    identity = out["variants"]["main"]["controls"]["removal_identity"]
    assert (identity["low"], identity["high"], identity["mean"]) == pytest.approx((0.9, 0.9, 0.9))
    assert identity["p_value"] == 1.0


def test_removal_identity_control_keeps_the_keep_decisions_and_permutes_the_removed_message():
    # p (K=3, 5 blocks): full pool always fails, only removing message 0 succeeds -> the policy removes message 0
    # everywhere (+1 per unit); relabeled among the three removals it keeps its gain with probability 1/3 (a problem's
    # blocks share one relabeling), so the null is 0.5 w.p. 1/3 and 0 otherwise.
    # q: block 0: full fails and every removal succeeds; blocks 1-4: full succeeds, every removal fails. Training
    # favours keeping on every held-out block (mean effect +1 or +1/2), so q keeps (gain 0); relabeling a keep as a
    # removal would cost 3 units (-1 x 4, +1 on block 0). Removal identity never does: its null never goes below 0.
    k = 3
    p = ([0] * 5, [0] * 5, [[1] * 5, [0] * 5, [0] * 5])
    q = ([0, 1, 1, 1, 1], [0, 1, 1, 1, 1], [[1, 0, 0, 0, 0] for _ in range(k)])
    rows = block_rows("p", *p) + block_rows("q", *q)
    out = run(rows, n_shuffles=3000)
    main = out["variants"]["main"]
    removed = {(d["problem_id"], d["removed_message_id"]) for d in main["decisions"]}
    assert removed == {("p", 0), ("q", None)} and main["gain"]["mean"] == pytest.approx(0.5)
    identity = main["controls"]["removal_identity"]
    assert identity["low"] == pytest.approx(0.0) and identity["high"] == pytest.approx(0.5)
    assert identity["mean"] == pytest.approx(1 / 6, abs=4 * math.sqrt(2 / 9 / 3000) * 0.5)
    assert identity["p_value"] == pytest.approx(1 / 3, abs=0.04)
    # all-action relabels q's keeps too: q loses 3 units w.p. 3/4, so the null reaches below zero
    assert main["controls"]["all_action"]["low"] < 0


def test_incomplete_problems_are_excluded_and_listed():
    rows = block_rows("ok", [1, 0, 1], [1, 1, 0], [[0, 1, 1], [1, 1, 1], [0, 0, 0]], benchmark="S")
    failed_b = block_rows("fb", [1, 1, 1], [1, None, 1], [[0, 0, 0]] * 3, benchmark="S")
    failed_r = block_rows("fr", [1, 1, 1], [1, 1, 1], [[0, 0, 0], [0, 1, None], [0, 0, 0]], benchmark="T")
    short = block_rows("short", [1, 1, 1], [1, 1, 1], [[0, 0, 0]] * 2, benchmark="T")
    for r in short:
        r["K"] = 3
    no_block = [r for r in block_rows("nb", [1, 1, 1], [1, 1, 1], [[0, 0, 0]] * 3, benchmark="T") if r["block"] != 1]
    out = run(rows + failed_b + failed_r + short + no_block)
    assert out["n_problems"] == 1 and out["n_units"] == 3 and out["n_excluded_problems"] == 4
    excluded = {e["problem_id"]: e for e in out["excluded_problems"]}
    assert (excluded["fb"]["block"], excluded["fb"]["message_id"]) == (1, None)
    assert "replicate B" in excluded["fb"]["reason"]
    assert (excluded["fr"]["block"], excluded["fr"]["message_id"], excluded["fr"]["n_missing_cells"]) == (2, 1, 1)
    assert "removal" in excluded["fr"]["reason"]
    assert "2 of K=3 messages" in excluded["short"]["reason"] and excluded["short"]["block"] is None
    assert excluded["nb"]["block"] == 1 and "not replayed" in excluded["nb"]["reason"]
    assert out["n_excluded_by_benchmark"] == {"S": 1, "T": 3}
    assert out["variants"]["main"]["by_benchmark"]["S"]["n_problems"] == 1
    empty = out["variants"]["main"]["by_benchmark"]["T"]  # no complete problem left there: an empty cell
    assert empty["n_units"] == 0 and empty["gain"]["mean"] is None and empty["full_accuracy"] is None

    everything = run(rows + failed_b + failed_r + no_block, complete_only=False)
    assert everything["n_excluded_problems"] == 0 and everything["n_incomplete_problems"] == 3
    assert everything["variants"]["main"]["n_problems"] == 4
    # replicate B failed on fb's block 1 and nb has no block 1: neither unit can be scored by B or by the mean of
    # both replicates (no value is imputed); replicate A scores fb's block 1
    dropped = {name: [(d["problem_id"], d["held_out_block"]) for d in everything["variants"][name]["dropped_units"]]
               for name in ("main", "A", "B")}
    assert dropped == {"main": [("fb", 1), ("nb", 1)], "A": [("nb", 1)], "B": [("fb", 1), ("nb", 1)]}
    assert everything["variants"]["main"]["dropped_units"][0]["reason"] == "full-pool outcome failed or missing"


def test_a_block_whose_messages_disagree_on_the_full_pool_is_refused_in_one_line():
    rows = block_rows("a", [1, 0, 1], [1, 1, 0], [[0, 1, 1], [1, 1, 1], [0, 0, 0]])
    rows[[i for i, r in enumerate(rows) if r["message_id"] == 2 and r["block"] == 1][0]]["with_correct"] = 1
    with pytest.raises(ValueError, match=r"problem 'a', block 1: messages 0 and 2 .*replicate A") as info:
        run(rows)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="at least two replay blocks"):
        run([r for r in rows if r["block"] == 0])
    with pytest.raises(ValueError, match="loo"):
        crossfit_keep_or_remove(pair_effects([{**rows[0], "mode": "single"}], mode="single"))
    with pytest.raises(ValueError, match="control_draw"):
        run(HAND, control_draw="unit")


def test_crossfit_gains_when_harmful_messages_are_planted():
    positive, above_controls = 0, 0
    for seed in range(12):
        out = run(sim_rows(np.random.default_rng(seed), 120, harmful_share=0.5), seed=seed, n_resamples=500,
                  n_shuffles=300)
        for variant in out["variants"].values():
            assert variant["crossfit_accuracy"] - variant["full_accuracy"] == pytest.approx(variant["gain"]["mean"])
        positive += out["gain"]["low"] > 0
        controls = out["controls"]
        above_controls += all(out["gain"]["mean"] > controls[c]["high"] for c in controls)
    assert positive >= 11 and above_controls >= 11


def test_crossfit_gain_and_controls_are_near_zero_without_effects():
    n_sims, covered, gains, controls = 40, 0, [], []
    for seed in range(n_sims):
        out = run(sim_rows(np.random.default_rng(500 + seed), 80, fail=0.01), seed=seed, n_resamples=400,
                  n_shuffles=200)
        assert out["n_excluded_problems"] > 0 and out["n_problems"] + out["n_excluded_problems"] == 80
        covered += out["gain"]["low"] <= 0 <= out["gain"]["high"]
        gains.append(out["gain"]["mean"])
        controls.append([out["controls"][c]["mean"] for c in ("all_action", "removal_identity")])
    assert covered / n_sims >= 0.95 - 3 * se(0.95, n_sims)
    assert abs(np.mean(gains)) <= 3 * np.std(gains, ddof=1) / math.sqrt(n_sims)
    controls = np.asarray(controls)
    assert np.all(np.abs(controls.mean(axis=0)) <= 3 * controls.std(axis=0, ddof=1) / math.sqrt(n_sims))
