"""Summary statistics shared by reports: means with bootstrap intervals, Wilson intervals.

Everything comes from :mod:`scipy.stats`; nothing here re-implements a resampling scheme.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def mean_ci(values: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000,
            seed: int = 0) -> dict[str, float | int | None]:
    """Mean of ``values`` with a percentile bootstrap interval (``scipy.stats.bootstrap``).

    With fewer than two values, or values that are all equal, the interval is degenerate and reported as
    ``[mean, mean]`` (n=1 gives no interval: ``None``).
    """
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    data = np.asarray([float(v) for v in values], dtype=float)
    n = int(data.size)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = float(data.mean())
    if n == 1:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    if np.all(data == data[0]):
        return {"mean": mean, "low": mean, "high": mean, "n": n}
    res = stats.bootstrap((data,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return {"mean": mean, "low": low, "high": high, "n": n}


def wilson_ci(successes: int, n: int, confidence: float = 0.95) -> dict[str, float | int | None]:
    """Proportion with a Wilson score interval (``scipy.stats.binomtest(...).proportion_ci``)."""
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    if n == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return {"mean": successes / n, "low": float(ci.low), "high": float(ci.high), "n": n}


def format_ci(entry: dict | None, digits: int = 3) -> str:
    """``0.512 [0.410, 0.600]``; a mean shown without an interval says why (``0.500 (n=1, no interval)``).

    An entry that counts failures (``failed``, as run summaries do) says how many: ``0.512 [0.410, 0.600] (2
    failed)``, and one with nothing measured is ``not measured (3 failed)``, never a number. ``-``: no entry, or
    nothing measured and nothing failed.
    """
    failed = int((entry or {}).get("failed") or 0)
    if not entry or entry.get("mean") is None:
        return f"not measured ({failed} failed)" if failed else "-"
    mean = f"{entry['mean']:.{digits}f}"
    if entry.get("low") is None or (isinstance(entry["low"], float) and math.isnan(entry["low"])):
        n = entry.get("n")
        why = [f"n={n}, no interval" if n is not None else "no interval"] + ([f"{failed} failed"] if failed else [])
        return f"{mean} ({', '.join(why)})"
    text = f"{mean} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"
    return f"{text} ({failed} failed)" if failed else text
