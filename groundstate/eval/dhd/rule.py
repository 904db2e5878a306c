"""The per-message separation rule, exact and shared by the observed groups and every permutation null.

**The rule** (the paper's "repeated-call interval", Table 17; the authors' ``labels.py``). A message is *separated*
when its interval lies wholly above 0 (direction +1, ``stable_helpful``) or wholly below 0 (direction -1,
``stable_harmful``); otherwise it is indeterminate. Two rules are available:

- ``method="bootstrap"`` (default): the percentile bootstrap interval of the mean of the message's evaluable block
  effects, ``scipy.stats.bootstrap(method="percentile")`` with ``n_resamples=9999`` (scipy's default; the authors
  use 10,000) and a fixed seed, on the block effects in sorted order. No interval with fewer than 2 blocks.
- ``method="sign-flip"``: separated when the exact two-sided sign-flip p-value is below ``1 - confidence``, in the
  direction of the estimate, with at least 2 evaluable blocks. With ``B = 5`` blocks the smallest p-value is
  ``2 / 32 = 0.0625``, so at ``confidence=0.95`` this rule separates nothing; it needs ``B >= 6``.

**Exactness.** Block effects take the five values -1, -0.5, 0, 0.5, 1 (see :mod:`groundstate.eval.dhd.effects`), so
a message's interval, p-value and direction depend only on the *multiset* of its evaluable effects: the counts
``(c_-1, c_-0.5, c_0, c_0.5, c_1)`` (the bootstrap of the mean depends on the whole multiset, not on its sum; the
resamples are drawn with one fixed seed per multiset size on the sorted effects, so equal multisets always get
equal intervals). A multiset is encoded as the integer ``code = sum_v c_v (B+1)^v`` (``v`` = 0..4 for the five
values in order), which :func:`effect_codes` computes per message as a sum over blocks. :class:`SeparationRule`
evaluates scipy once per multiset, lazily (only the multisets that occur, in batches) and keeps the result in a
dense direction table over codes, so the null's millions of lookups are one numpy gather. Up to
:data:`MAX_BLOCKS` blocks.

**p-values** are the exact two-sided sign-flip test of mean effect 0 (all ``2^n`` sign patterns of the nonzero
effects, zero effects staying zero): with integer scores ``x = 2 * effect``, ``n2`` effects of size 1 and ``n1`` of
size 0.5, the flipped sum is ``2 (2 K2 - n2) + (2 K1 - n1)`` with independent ``K2 ~ Bin(n2, 1/2)``,
``K1 ~ Bin(n1, 1/2)`` (``scipy.stats.binom``), and ``p = P(|T*| >= |T|)``; this equals
``scipy.stats.permutation_test(permutation_type="samples", n_resamples=inf)`` (the tests check it) without the
``2^B`` enumeration.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import EFFECT_VALUES

METHODS = ("bootstrap", "sign-flip")
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
MAX_BLOCKS = 24
UNKNOWN = np.int8(2)
N_VALUES = len(EFFECT_VALUES)


def value_index(effects: np.ndarray) -> np.ndarray:
    """int8 index 0..4 of each effect in -1, -0.5, 0, 0.5, 1 (``2 * effect + 2``), -1 for NaN.

    Raises:
        ValueError: an effect that is not one of the five values or NaN.
    """
    effects = np.asarray(effects, dtype=float)
    finite = ~np.isnan(effects)
    doubled = np.where(finite, 2 * effects + 2, -1)
    index = np.rint(doubled)
    if not (np.isin(index[finite], np.arange(N_VALUES)) & (np.abs(index - doubled)[finite] < 1e-9)).all():
        raise ValueError("DHD block effects must be -1, -0.5, 0, 0.5, 1 or NaN ((A + B) / 2 - removal, or "
                         "with - without)")
    return index.astype(np.int8)


def effect_codes(effects: np.ndarray, n_blocks: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(code, n_eval)`` per row of a (messages x blocks) effect array: the multiset code (module notes)."""
    effects = np.asarray(effects, dtype=float)
    base = (effects.shape[-1] if n_blocks is None else n_blocks) + 1
    index = value_index(effects)
    powers = base ** np.arange(N_VALUES, dtype=np.int64)
    codes = np.where(index >= 0, powers[np.maximum(index, 0)], 0).sum(axis=-1)
    return codes.astype(np.int64), (index >= 0).sum(axis=-1)


def sign_flip_p_value(counts: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value of one multiset ``(c_-1, c_-0.5, c_0, c_0.5, c_1)``; NaN if empty."""
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    c = [int(x) for x in counts]
    if sum(c) == 0:
        return float("nan")
    n2, n1 = c[0] + c[4], c[1] + c[3]
    observed = abs(2 * (c[4] - c[0]) + (c[3] - c[1]))
    k2, k1 = np.arange(n2 + 1), np.arange(n1 + 1)
    flipped = np.abs(2 * (2 * k2[:, None] - n2) + (2 * k1[None, :] - n1))
    weight = stats.binom.pmf(k2, n2, 0.5)[:, None] * stats.binom.pmf(k1, n1, 0.5)[None, :]
    return float(min(1.0, weight[flipped >= observed].sum()))


class SeparationRule:
    """Interval, p-value and direction per effect multiset, computed with scipy on first use and cached.

    Attributes:
        n_blocks: ``B``; codes are base ``B + 1``.
        confidence: interval level (``1 - confidence`` is the sign-flip rule's alpha).
        method: ``"bootstrap"`` or ``"sign-flip"``.
    """

    def __init__(self, n_blocks: int, confidence: float = 0.95, method: str = "bootstrap"):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        if not 0 <= n_blocks <= MAX_BLOCKS:
            raise ValueError(f"the separation rule supports 0 to {MAX_BLOCKS} blocks, got {n_blocks}")
        self.n_blocks, self.confidence, self.method = int(n_blocks), float(confidence), method
        self.base = self.n_blocks + 1
        self._direction = np.full(self.base ** N_VALUES, UNKNOWN, dtype=np.int8)
        self._stats: dict[int, tuple[float, float, float]] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        """One sentence naming the rule (stored in reports)."""
        if self.method == "bootstrap":
            return (f"separated when the {self.confidence:.0%} percentile bootstrap interval of the mean block effect "
                    f"(scipy.stats.bootstrap, {BOOTSTRAP_RESAMPLES} resamples) lies wholly above or below 0")
        return (f"separated when the exact within-block sign-flip p-value is below {1 - self.confidence:.3g}, "
                f"in the direction of the estimate")

    def counts(self, codes: np.ndarray) -> np.ndarray:
        """(..., 5) value counts of each code."""
        codes = np.asarray(codes, dtype=np.int64)
        return np.stack([(codes // self.base ** v) % self.base for v in range(N_VALUES)], axis=-1)

    def code(self, counts: Any) -> int:
        """The code of one multiset given as five counts."""
        return int(sum(int(c) * self.base ** v for v, c in enumerate(counts)))

    def direction(self, codes: np.ndarray) -> np.ndarray:
        """int8 direction (+1 / -1 / 0) of every code (any shape); computes unseen multisets first."""
        codes = np.asarray(codes, dtype=np.int64)
        out = self._direction[codes]
        missing = out == UNKNOWN
        if missing.any():
            self._fill(np.unique(codes[missing]))
            out = self._direction[codes]
        return out

    def stats(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(low, high, p_value)`` per code (1-d): the bootstrap interval (NaN below 2 blocks) and the p-value."""
        codes = np.asarray(codes, dtype=np.int64)
        self.direction(codes)
        unique, inverse = np.unique(codes, return_inverse=True)
        table = np.asarray([self._stats[int(c)] for c in unique], dtype=float).reshape(-1, 3)
        return table[inverse, 0], table[inverse, 1], table[inverse, 2]

    def _fill(self, codes: np.ndarray) -> None:
        with self._lock:
            codes = np.asarray([c for c in codes.tolist() if self._direction[c] == UNKNOWN], dtype=np.int64)
            if not len(codes):
                return
            counts = self.counts(codes)
            n_eval = counts.sum(axis=1)
            low, high = np.full(len(codes), np.nan), np.full(len(codes), np.nan)
            for n in np.unique(n_eval[n_eval >= 2]):
                rows = np.flatnonzero(n_eval == n)
                low[rows], high[rows] = _bootstrap_intervals(counts[rows], int(n), self.confidence)
            p_value = np.asarray([sign_flip_p_value(c) for c in counts])
            doubled = counts @ np.asarray([-2, -1, 0, 1, 2])
            if self.method == "bootstrap":
                direction = (low > 0).astype(np.int8) - (high < 0).astype(np.int8)
            else:
                hit = (p_value < 1 - self.confidence) & (n_eval >= 2)
                direction = (np.sign(doubled) * hit).astype(np.int8)
            for c, lo, hi, p in zip(codes.tolist(), low.tolist(), high.tolist(), p_value.tolist(), strict=True):
                self._stats[c] = (lo, hi, p)
            self._direction[codes] = direction


def _bootstrap_intervals(counts: np.ndarray, n: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals of the mean for multisets of size ``n`` (scipy, sorted data, fixed seed)."""
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    values = np.asarray(EFFECT_VALUES)
    data = np.stack([np.repeat(values, c) for c in counts])  # sorted ascending
    low, high = np.empty(len(data)), np.empty(len(data))
    step = max(1, 50_000_000 // (BOOTSTRAP_RESAMPLES * n * 8))  # rows per scipy call (memory of the resamples)
    for start in range(0, len(data), step):
        chunk = data[start:start + step]
        res = stats.bootstrap((chunk,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, vectorized=True, axis=-1,
                              confidence_level=confidence, method="percentile",
                              rng=np.random.default_rng(BOOTSTRAP_SEED))
        low[start:start + step] = res.confidence_interval.low
        high[start:start + step] = res.confidence_interval.high
    return low, high


@lru_cache(maxsize=16)
def separation_rule(n_blocks: int, confidence: float = 0.95, method: str = "bootstrap") -> SeparationRule:
    """The shared :class:`SeparationRule` for ``B = n_blocks`` (one per setting, so its cache is reused)."""
    return SeparationRule(n_blocks, confidence, method)


def group_labels(code: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Group label per message from proposal code (0 W, 1 C, -1 unknown) and direction."""
    out = np.full(np.shape(code), "indeterminate", dtype=object)
    for c, letter in ((0, "W"), (1, "C")):
        out[(code == c) & (direction > 0)] = f"{letter}+"
        out[(code == c) & (direction < 0)] = f"{letter}-"
    return out
