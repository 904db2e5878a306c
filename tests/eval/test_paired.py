"""The paired after-minus-before difference (groundstate.eval.paired): counting, formatting, and its statistical
properties on many seeded data sets drawn from the design it serves (issue 26, item 5)."""

import math

import numpy as np
import pytest
from scipy import stats

from groundstate.eval.paired import (
    MIN_RELIABLE_N,
    format_difference,
    paired_difference,
    paired_differences,
    small_sample_warning,
)

# -- the generative model of a held-out evaluation ---------------------------------------------------------------
# Each record has a difficulty shared by both runs (five levels, equally likely); given it, the unoptimized program
# (before) solves the record with probability sigmoid(-difficulty) and the optimized one (after) with
# sigmoid(shift - difficulty), independently. Outcomes are binary, as T1 and T3 are. shift = 0: no true difference.
LEVELS = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def true_difference(shift: float) -> float:
    """E[after - before] over the records' population: exact, the difficulty being uniform on five levels."""
    return float(np.mean(sigmoid(shift - LEVELS) - sigmoid(-LEVELS)))


def draw(rng, n: int, shift: float):
    difficulty = rng.choice(LEVELS, size=n)
    before = (rng.random(n) < sigmoid(-difficulty)).astype(float)
    after = (rng.random(n) < sigmoid(shift - difficulty)).astype(float)
    ids = [f"case-{i:03d}" for i in range(n)]
    return dict(zip(ids, before.tolist(), strict=True)), dict(zip(ids, after.tolist(), strict=True))


def sign_test_size(m: int, alpha: float) -> float:
    """The exact probability, with ``m`` records whose binary outcomes differ and no true difference, that the
    two-sided sign-flip p-value is at most ``alpha``: each record's difference is +1 or -1 with probability 1/2, so
    the number of +1 is Binomial(m, 1/2) and the sign-flip p of k of them is 2 min(P(K <= k), P(K >= k))."""
    k = np.arange(m + 1)
    p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, m, 0.5), stats.binom.sf(k - 1, m, 0.5)))
    return float(stats.binom.pmf(k, m, 0.5)[p <= alpha + 1e-12].sum())


N_SETS = 400
RESAMPLES = 1999


def test_sign_flip_p_values_hold_their_level_when_there_is_no_difference():
    """400 seeded data sets of 60 records with no true difference. The sign-flip test of binary outcomes is
    discrete, so its p-values are uniform only on the lattice they can take: the share at or below each level must
    not exceed the level by more than three binomial standard errors (a valid test), and the rejections at 0.05 must
    match what the exact sign test of each data set's discordant records gives (within four standard errors of that
    expectation, plus the Monte-Carlo p's jitter near 0.05): the p-value is the sign-flip one, not a cruder one."""
    rng = np.random.default_rng(2026)
    p_values, expected = [], []
    for k in range(N_SETS):
        before, after = draw(rng, 60, 0.0)
        diff = paired_difference(before, after, seed=k, n_resamples=RESAMPLES)
        p_values.append(diff.p_value)
        discordant = sum(before[i] != after[i] for i in before)
        expected.append(sign_test_size(discordant, 0.05))
    p_values = np.asarray(p_values)
    for alpha in (0.05, 0.1, 0.2, 0.5):
        share = float(np.mean(p_values <= alpha))
        assert share <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / N_SETS), (alpha, share)
    rejected = int(np.sum(p_values <= 0.05))
    expected = np.asarray(expected)
    spread = math.sqrt(float(np.sum(expected * (1 - expected))))
    assert abs(rejected - expected.sum()) <= 4 * spread + 0.01 * N_SETS, (rejected, expected.sum())
    assert 0.01 < rejected / N_SETS <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / N_SETS)


def test_bootstrap_interval_covers_the_true_difference_about_95_percent_of_the_time():
    """400 seeded data sets of 80 records with a true difference (shift 0.8 on the logit scale): the paired
    bootstrap interval covers E[after - before] in 95% of them, within three binomial standard errors."""
    rng = np.random.default_rng(7)
    truth = true_difference(0.8)
    covered, rejected = 0, 0
    for k in range(N_SETS):
        before, after = draw(rng, 80, 0.8)
        diff = paired_difference(before, after, seed=k, n_resamples=RESAMPLES)
        covered += diff.low <= truth <= diff.high
        rejected += diff.p_value <= 0.05
    tolerance = 3 * math.sqrt(0.95 * 0.05 / N_SETS)
    assert abs(covered / N_SETS - 0.95) <= tolerance, covered / N_SETS
    assert rejected / N_SETS > 0.3  # and the test has power against a true difference of about 0.14


def test_a_wrong_interval_fails_the_coverage_check():
    """The coverage check can fail: the same interval at 80% confidence, on the same data sets, falls outside the
    tolerance around 95%."""
    rng = np.random.default_rng(7)
    truth = true_difference(0.8)
    narrow = 0
    for k in range(200):
        before, after = draw(rng, 80, 0.8)
        diff = paired_difference(before, after, seed=k, n_resamples=RESAMPLES, confidence=0.8)
        narrow += diff.low <= truth <= diff.high
    assert abs(narrow / 200 - 0.95) > 3 * math.sqrt(0.95 * 0.05 / 200)


# -- counting and formatting --------------------------------------------------------------------------------------
def test_records_not_measured_on_a_side_are_excluded_and_counted():
    before = {"a": 1.0, "b": 0.0, "c": None, "d": 1.0, "e": float("nan"), "f": None}
    after = {"a": 1.0, "b": 1.0, "c": 1.0, "e": 0.0, "f": None, "g": 1.0}
    diff = paired_difference(before, after, metric="t3", seed=3)
    # paired: a, b; one side: c, d (missing after), e (NaN before), g (missing before); neither: f
    assert (diff.n, diff.one_side, diff.neither, diff.not_paired) == (2, 4, 1, 5)
    assert diff.mean == 0.5 and diff.before_mean == 0.5 and diff.after_mean == 1.0
    assert diff.p_method == "exact" and diff.p_value == 1.0  # one discordant record: both signs are as extreme
    text = format_difference(diff)
    assert "n paired = 2 (4 not measured on one side, 1 on neither)" in text and text.startswith("+0.500 [")
    assert diff.as_dict()["failed"] == 5 and diff.as_dict()["seed"] == 3


def test_no_paired_record_is_not_measured_never_a_number():
    diff = paired_difference({"a": None, "b": 1.0}, {"a": 1.0, "b": None}, metric="t2")
    assert diff.n == 0 and diff.mean is None and diff.low is None and diff.p_value is None
    assert format_difference(diff) == "not measured (2 failed)"
    assert format_difference(paired_difference({}, {})) == "-"
    one = paired_difference({"a": 0.0}, {"a": 1.0})
    assert format_difference(one).startswith("+1.000 (n=1, no interval), sign-flip p = 1.000 (exact)")


def test_exact_p_value_and_an_interval_of_identical_differences():
    before = {f"r{i}": 0.0 for i in range(6)}
    after = {f"r{i}": 1.0 for i in range(6)}
    diff = paired_difference(before, after)
    assert diff.p_method == "exact" and diff.p_value == pytest.approx(2 / 2 ** 6)  # all six flipped the same way
    assert (diff.low, diff.high, diff.mean) == (1.0, 1.0, 1.0)
    tied = paired_difference(before, dict(before))
    assert tied.mean == 0.0 and tied.p_value == 1.0 and (tied.low, tied.high) == (0.0, 0.0)


def test_the_result_depends_on_the_seed_and_records_not_on_their_order():
    rng = np.random.default_rng(1)
    before, after = draw(rng, 40, 0.5)
    first = paired_difference(before, after, seed=11)
    shuffled = dict(reversed(list(before.items())))
    assert paired_difference(shuffled, after, seed=11) == first
    assert paired_difference(before, after, seed=12).low != first.low or \
        paired_difference(before, after, seed=12).high != first.high


def test_paired_differences_reads_run_rows_and_skips_metrics_neither_side_defines():
    before = [{"id": "a", "scores": {"t1": 1.0, "t3": 0.0}}, {"id": "b", "scores": {"t1": 0.0},
                                                                "score_errors": {"t3": "judge failed"}}]
    after = [{"id": "a", "scores": {"t1": 1.0, "t3": 1.0}}, {"id": "b", "scores": {"t1": 1.0, "t3": 1.0}}]
    diffs = paired_differences(before, after, ("t1", "t2", "t3"))
    assert list(diffs) == ["t1", "t3"]
    assert diffs["t1"].n == 2 and diffs["t1"].mean == 0.5
    assert diffs["t3"].n == 1 and diffs["t3"].one_side == 1


def test_small_sample_warning_names_the_paired_and_per_run_counts():
    rng = np.random.default_rng(0)
    small = paired_differences(*([{"id": i, "scores": {"t3": v}} for i, v in side.items()]
                                 for side in draw(rng, 5, 0.0)), ("t3",))
    summaries = {"before": {"scores": {"t3": {"mean": 0.4, "low": 0.0, "high": 0.8, "n": 5}}},
                 "after": {"scores": {"t3": {"mean": 0.4, "low": None, "high": None, "n": 1}}}}
    line = small_sample_warning(small, summaries, label=str.upper)
    assert f"fewer than {MIN_RELIABLE_N} records are unreliable" in line and "as few as 5" in line
    assert "T3 paired on 5" in line and "before on 5" in line and "after" not in line and "\n" not in line
    big = paired_differences(*([{"id": i, "scores": {"t3": v}} for i, v in side.items()]
                               for side in draw(rng, MIN_RELIABLE_N, 0.0)), ("t3",))
    assert small_sample_warning(big, {"x": {"scores": {"t3": {"mean": 0.5, "low": 0.3, "high": 0.7,
                                                             "n": MIN_RELIABLE_N}}}}) is None
