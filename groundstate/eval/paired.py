"""Paired after-minus-before differences: the quantity a paper reports when two programs ran on the same records.

When an optimized program (after) and its unoptimized version (before) are scored on the same held-out records,
the records' difficulty is shared by both runs, so the honest comparison is per record: the mean of
``after - before`` over the records both runs measured, with an interval and a test that resample records, not
runs. :func:`paired_difference` computes it for one metric from per-record scores keyed by record id;
:func:`paired_differences` does it for every metric two runs' ``results.jsonl`` rows hold;
:func:`format_difference` and :func:`small_sample_warning` say it in one line each. Nothing here is ReGround's:
Consilience and DHD comparisons of two runs over the same records can use it as it is.

Guarantees:

- A record is *paired* when both sides hold a finite number for it; every other record the two sides name is
  excluded and counted (on one side only, or on neither), never treated as 0.
- The interval is a percentile bootstrap that resamples record indices jointly for both sides
  (``scipy.stats.bootstrap`` with ``paired=True``); the p-value is a two-sided sign-flip (paired permutation) test
  of the mean difference (``scipy.stats.permutation_test`` with ``permutation_type="samples"`` on the differences).
  Records whose difference is 0 flip to themselves, so only the non-zero differences are flipped: the p-value is
  the same, and it is exact (every one of the ``2**m`` sign patterns of the ``m`` non-zero differences) whenever
  ``2**m <= n_resamples``, Monte-Carlo otherwise. Both use numpy Generators seeded from ``seed``, which the
  result records; records are taken in sorted id order, so the result does not depend on row order.
- A metric with no paired record has no mean, interval or p-value (``None``), and is formatted as
  ``not measured (N failed)``, never as a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MIN_RELIABLE_N = 30
"""The fewest records an interval or a p-value is shown on without a warning (:func:`small_sample_warning`).

Why 30: a percentile bootstrap treats the n records at hand as the whole population, so with few records its
intervals come out too narrow (their coverage falls below the nominal 95%), worst for binary scores near 0 or 1,
whose resampled means take only a handful of values. About 30 records is where the sampling distribution of a mean
of bounded scores is usually close enough to normal for such an interval to be near its nominal coverage. A
sign-flip test on few records is weak in the other direction: with ``m`` records whose scores differ, its smallest
two-sided p-value is ``2 / 2**m``, so a large p on a small set says little. The threshold triggers a warning; it is
not a guarantee that 30 records suffice (at 30 records, a difference of binary scores is still only known to within
about +/-0.25)."""

N_RESAMPLES = 9999
"""Bootstrap resamples, and the sign flips of a Monte-Carlo p-value (exact below ``2**13`` patterns)."""


@dataclass(frozen=True)
class PairedDifference:
    """One metric's paired difference ``after - before`` over the records both sides measured.

    Attributes:
        metric: the metric's name (``t3``).
        mean: the mean of ``after - before`` over the paired records; ``None`` when none is paired.
        low, high: its percentile bootstrap interval at ``confidence``; ``None`` with fewer than two paired records.
        n: the paired records (measured on both sides).
        one_side: records measured on one side only (excluded).
        neither: records named by either side but measured on neither (excluded).
        before_mean, after_mean: each side's mean over the paired records only (so ``mean`` is their difference).
        p_value: the two-sided sign-flip p-value; ``None`` when none is paired.
        p_method: ``exact`` (all sign patterns) or ``monte-carlo`` (``n_resamples`` random flips); ``None`` with it.
        confidence: the interval's confidence level.
        n_resamples: bootstrap resamples (and Monte-Carlo sign flips).
        seed: the seed of the numpy Generators behind the interval and the p-value.
    """

    metric: str
    mean: float | None
    low: float | None
    high: float | None
    n: int
    one_side: int
    neither: int
    before_mean: float | None
    after_mean: float | None
    p_value: float | None
    p_method: str | None
    confidence: float
    n_resamples: int
    seed: int

    @property
    def not_paired(self) -> int:
        """Records excluded because at least one side did not measure them."""
        return self.one_side + self.neither

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict, with ``failed`` (= :attr:`not_paired`) as run summaries count it."""
        return {**asdict(self), "failed": self.not_paired}


def _measured(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def paired_difference(before: Mapping[str, Any], after: Mapping[str, Any], *, metric: str = "",
                      confidence: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = 0) -> PairedDifference:
    """The paired difference ``after - before`` of one metric (see the module docstring for its guarantees).

    Args:
        before, after: each side's score per record id; a missing id, ``None``, NaN or a non-number is "not
            measured" on that side.
        metric: the metric's name, carried into the result.
        confidence: the interval's confidence level.
        n_resamples: bootstrap resamples, and the most sign flips a p-value uses (exact when ``2**m`` is fewer).
        seed: seeds the bootstrap's Generator and (a stream derived from it) the sign flips'.
    """
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    ids = sorted(set(before) | set(after), key=str)
    paired = [i for i in ids if _measured(before.get(i)) and _measured(after.get(i))]
    one_side = sum(_measured(before.get(i)) != _measured(after.get(i)) for i in ids)
    neither = len(ids) - len(paired) - one_side
    b = np.asarray([float(before[i]) for i in paired], dtype=float)
    a = np.asarray([float(after[i]) for i in paired], dtype=float)
    common = {"metric": metric, "n": len(paired), "one_side": one_side, "neither": neither,
              "confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    if not paired:
        return PairedDifference(mean=None, low=None, high=None, before_mean=None, after_mean=None, p_value=None,
                                p_method=None, **common)
    diffs = a - b
    mean = float(diffs.mean())
    low = high = None
    if len(paired) >= 2 and np.all(diffs == diffs[0]):
        low = high = mean  # every resample gives the same mean
    elif len(paired) >= 2:
        res = stats.bootstrap((b, a), _mean_difference, paired=True, vectorized=True, method="percentile",
                              confidence_level=confidence, n_resamples=n_resamples, rng=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    nonzero = diffs[diffs != 0]
    if nonzero.size <= 1:  # no sign pattern gives a mean further from 0 than the observed one (scipy needs two)
        p_value, method = 1.0, "exact"
    else:
        test = stats.permutation_test((nonzero,), np.mean, permutation_type="samples", vectorized=True,
                                      n_resamples=n_resamples, alternative="two-sided",
                                      rng=np.random.default_rng([seed, 1]))
        p_value = min(1.0, float(test.pvalue))
        method = "exact" if 2 ** nonzero.size <= n_resamples else "monte-carlo"
    return PairedDifference(mean=mean, low=low, high=high, before_mean=float(b.mean()), after_mean=float(a.mean()),
                            p_value=p_value, p_method=method, **common)


def _mean_difference(before: np.ndarray, after: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(after - before, axis=axis)


def scores_by_id(rows: Iterable[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """``{record id: score}`` of ``metric`` from ``results.jsonl`` rows (``None`` where the row has no score)."""
    return {str(r["id"]): (r.get("scores") or {}).get(metric) for r in rows if "id" in r}


def paired_differences(before_rows: Sequence[Mapping[str, Any]], after_rows: Sequence[Mapping[str, Any]],
                       metrics: Sequence[str], *, confidence: float = 0.95, n_resamples: int = N_RESAMPLES,
                       seed: int = 0) -> dict[str, PairedDifference]:
    """:func:`paired_difference` of each of ``metrics`` that either side's rows score or fail (``scores`` or
    ``score_errors``), in the order of ``metrics``; a metric neither side defines is left out."""
    defined = {k for r in (*before_rows, *after_rows) for part in ("scores", "score_errors")
               for k in (r.get(part) or {})}
    return {m: paired_difference(scores_by_id(before_rows, m), scores_by_id(after_rows, m), metric=m,
                                 confidence=confidence, n_resamples=n_resamples, seed=seed)
            for m in metrics if m in defined}


def format_p(p: float) -> str:
    """``0.031``; ``< 0.001`` below that (a Monte-Carlo p is never shown as 0)."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def format_estimate(diff: PairedDifference, digits: int = 3) -> str:
    """The difference and its interval: ``+0.100 [-0.050, +0.250]``; ``+1.000 (n=1, no interval)`` on one paired
    record; ``not measured (N failed)`` on none (``-`` when no record was named at all)."""
    if diff.mean is None:
        return f"not measured ({diff.not_paired} failed)" if diff.not_paired else "-"
    if diff.low is None:
        return f"{diff.mean:+.{digits}f} (n={diff.n}, no interval)"
    return f"{diff.mean:+.{digits}f} [{diff.low:+.{digits}f}, {diff.high:+.{digits}f}]"


def format_difference(diff: PairedDifference, digits: int = 3) -> str:
    """One line: ``+0.100 [-0.050, +0.250], sign-flip p = 0.310 (exact); n paired = 20 (2 not measured on one
    side)`` (:func:`format_estimate`, then the p-value and the counts); with no paired record only ``not measured (N
    failed)``, never a number."""
    text = format_estimate(diff, digits)
    if diff.mean is None:
        return text
    text += f", sign-flip p = {format_p(diff.p_value)} ({diff.p_method}); n paired = {diff.n}"
    excluded = [f"{diff.one_side} not measured on one side"] if diff.one_side else []
    excluded += [f"{diff.neither} on neither"] if diff.neither else []
    return text + (f" ({', '.join(excluded)})" if excluded else "")


def small_sample_warning(differences: Mapping[str, PairedDifference],
                         summaries: Mapping[str, Mapping[str, Any]] | None = None,
                         label: Callable[[str], str] = str, minimum: int = MIN_RELIABLE_N) -> str | None:
    """One line saying that intervals on fewer than ``minimum`` records are unreliable, naming where they are shown
    on fewer: a paired difference measured on 1 to ``minimum - 1`` records, or a side's score (a run summary's
    ``scores`` entry, under ``summaries``' label) whose interval rests on fewer. ``None`` when there is none."""
    paired: dict[int, list[str]] = {}
    for metric, diff in differences.items():
        if 0 < diff.n < minimum:
            paired.setdefault(diff.n, []).append(label(metric))
    sides: dict[int, list[str]] = {}
    for name, summary in (summaries or {}).items():
        shown = [int(e.get("n") or 0) for e in (summary.get("scores") or {}).values()
                 if isinstance(e, Mapping) and e.get("low") is not None and int(e.get("n") or 0) < minimum]
        if shown:
            sides.setdefault(min(shown), []).append(name)
    if not paired and not sides:
        return None
    where = [f"{', '.join(names)} paired on {n}" for n, names in sorted(paired.items())]
    where += [f"{' and '.join(names)} on {n}" for n, names in sorted(sides.items())]
    return (f"intervals and p-values on fewer than {minimum} records are unreliable, and these rest on as few as "
            f"{min([*paired, *sides])} ({'; '.join(where)}): treat them as a rough guide, not a result")
