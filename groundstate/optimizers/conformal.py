"""Round-wise conformal acceptance thresholds (Consilience §3.1.3, Proposition 1).

From calibration trajectories of one fixed configuration (controller, router, agents, loss weights), each
round ``t`` contributes the scores ``Q = regret of the controller's proposal``. With ``n_t`` scores at round
``t`` and ``k = ceil((n_t + 1)(1 - alpha))``, the threshold is the ``k``-th smallest score, or ``+inf`` when
``k > n_t`` (too few trajectories reached round ``t``: every action is admissible there, and the round is
reported as uncertified). For a new trajectory of the same configuration that reaches round ``t``,
``P(Q_t <= threshold_t) >= 1 - alpha`` (exchangeability within the round).

The calibrator follows scikit-learn's conventions (``fit`` returns ``self``, fitted attributes end in ``_``,
``check_is_fitted`` guards the rest) and saves as plain JSON parameters (``to_params`` / ``from_params``),
together with the configuration it is valid for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted


class RoundwiseConformal(BaseEstimator):
    """Per-round conformal thresholds on one-step regret.

    Args:
        alpha: the miscoverage level (0 < alpha < 1).
        config: the configuration the calibration is valid for (controller, router, weights, agents...).
    """

    def __init__(self, alpha: float = 0.1, config: Mapping[str, Any] | None = None):
        self.alpha = alpha
        self.config = config

    def fit(self, rounds: Sequence[int], scores: Sequence[float]) -> RoundwiseConformal:
        """Fit thresholds from calibration scores, one ``(round, score)`` pair per trajectory and round."""
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be between 0 and 1")
        rounds = np.asarray(rounds, dtype=int)
        scores = np.asarray(scores, dtype=float)
        if rounds.shape != scores.shape or rounds.ndim != 1:
            raise ValueError("rounds and scores must be 1-d arrays of the same length")
        if np.any(~np.isfinite(scores)) or np.any(scores < 0):
            raise ValueError("scores (regrets) must be finite and non-negative")
        self.thresholds_: dict[int, float] = {}
        self.counts_: dict[int, int] = {}
        for t in sorted(set(rounds.tolist())):
            values = np.sort(scores[rounds == t])
            n = len(values)
            k = math.ceil((n + 1) * (1 - self.alpha))
            self.thresholds_[t] = float(values[k - 1]) if k <= n else math.inf
            self.counts_[t] = n
        return self

    def threshold(self, round: int) -> float:
        """The acceptance threshold at ``round`` (``+inf`` for a round no calibration trajectory reached)."""
        check_is_fitted(self, "thresholds_")
        return self.thresholds_.get(int(round), math.inf)

    def certified(self, round: int) -> bool:
        """Whether ``round`` has a finite threshold (enough calibration trajectories reached it)."""
        return math.isfinite(self.threshold(round))

    def min_trajectories(self) -> int:
        """The fewest scores a round needs for a finite threshold: ``ceil((1 - alpha) / alpha)``."""
        return math.ceil((1 - self.alpha) / self.alpha)

    # -- saving as JSON (no pickles) -----------------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        check_is_fitted(self, "thresholds_")
        return {"alpha": self.alpha, "config": dict(self.config or {}),
                "thresholds": {str(t): (None if math.isinf(v) else v) for t, v in self.thresholds_.items()},
                "counts": {str(t): n for t, n in self.counts_.items()}}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RoundwiseConformal:
        obj = cls(alpha=float(params["alpha"]), config=params.get("config") or {})
        obj.thresholds_ = {int(t): (math.inf if v is None else float(v)) for t, v in params["thresholds"].items()}
        obj.counts_ = {int(t): int(n) for t, n in params["counts"].items()}
        return obj
