"""Round-wise conformal acceptance thresholds (Consilience §3.1.3, Proposition 1).

From calibration trajectories of one fixed configuration (controller, router, agents, loss weights), each
round ``t`` contributes the scores ``Q = regret of the controller's proposal``. With ``n_t`` scores at round
``t`` and ``k = ceil((n_t + 1)(1 - alpha))``, the threshold is the ``k``-th smallest score, or ``+inf`` when
``k > n_t`` (too few trajectories reached round ``t``: every action is admissible there, and the round is
reported as uncertified). For a new trajectory of the same configuration that reaches round ``t``,
``P(Q_t <= threshold_t) >= 1 - alpha`` (exchangeability within the round).

The calibrator has a scikit-learn interface (``fit(X, y)`` with ``X`` the rounds and ``y`` the scores,
``predict(X)`` the thresholds of rounds ``X``, ``get_params``/``set_params``/``clone``, ``NotFittedError``
before ``fit``; see :class:`RoundwiseConformal` for which ``check_estimator`` checks apply) and saves
as plain JSON parameters (``to_params`` / ``from_params``), together with the configuration it is valid for.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from sklearn.base import BaseEstimator
from sklearn.utils import check_scalar
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted

#: ``check_estimator`` checks that do not apply to :class:`RoundwiseConformal`, with the reason (used by the
#: tests as ``expected_failed_checks``; the docstring below explains why).
NOT_APPLICABLE_CHECKS: dict[str, str] = {
    name: "the checks fit continuous multi-feature X; the calibrator's one feature is an integer round index"
    for name in (
        "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_dtype_object",
        "check_pipeline_consistency", "check_estimators_pickle", "check_f_contiguous_array_estimator",
        "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_fit2d_1sample",
        "check_fit2d_1feature", "check_dict_unchanged", "check_fit_idempotent", "check_fit_check_is_fitted",
        "check_n_features_in", "check_fit2d_predict1d", "check_estimators_nan_inf",
    )
}


class RoundwiseConformal(BaseEstimator):
    """Per-round conformal thresholds on one-step regret.

    Args:
        alpha: the miscoverage level (0 < alpha < 1).
        config: the configuration the calibration is valid for (controller, router, weights, agents...).

    Attributes:
        thresholds_: ``{round: threshold}`` for every round seen in ``fit`` (``+inf`` when uncertified).
        counts_: ``{round: number of calibration scores}``.
        n_features_in_: always 1 (the round index).

    scikit-learn interface: ``fit(X, y)`` takes ``X`` = the round of each calibration score, shape
    (n_samples,) or (n_samples, 1), integer-valued, and ``y`` = the scores (one-step regrets of the
    controller's proposals), shape (n_samples,), finite and non-negative; one ``(round, score)`` pair per
    trajectory and round. ``predict(X)`` returns each round's threshold. ``fit(rounds, scores)`` as before is
    the same call.

    ``sklearn.utils.estimator_checks.check_estimator`` (scikit-learn 1.9: 42 checks) -- 18 pass: the
    construction, parameter, clone, repr, tag and ``set_params`` checks, ``check_estimators_unfitted``,
    ``check_estimators_empty_data_messages``, ``check_complex_data``, ``check_fit1d``,
    ``check_estimator_sparse_*``, ``check_requires_y_none``, ``check_fit_non_negative`` and the
    ``__init__``/``set_params`` checks; ``check_array_api_input`` is skipped unless ``SCIPY_ARRAY_API`` is set.
    The other 23 do not apply (listed in :data:`NOT_APPLICABLE_CHECKS`): they fit on generated continuous data
    with two or more features (``make_blobs`` and ``uniform`` draws: fit/predict consistency, dtypes, object
    dtype, pickling, memmaps, F-contiguity, sample-order and subset invariance, idempotence,
    ``n_features_in_``, one sample, one feature, NaN/inf after a clean fit, positive-only input...), while
    the calibrator has exactly one feature, the integer round index, and refuses fractional or multi-column
    ``X`` with a ValueError, as it must: a threshold is an order statistic of the scores of one round, so a
    fractional round or an extra feature has no meaning.

    The tests run ``check_estimator`` with these as ``expected_failed_checks`` and also run the same
    behaviours (returns self, idempotence, pickling, clone, order invariance) on valid round data.
    """

    def __init__(self, alpha: float = 0.1, config: Mapping[str, Any] | None = None):
        self.alpha = alpha
        self.config = config

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.single_output = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    @staticmethod
    def _rounds(X) -> np.ndarray:
        """``X`` as 1-d integer rounds (shape (n,) or (n, 1), whole numbers) or a ValueError."""
        X = check_array(X, ensure_2d=False, dtype=None, input_name="X")
        if X.ndim == 2:
            if X.shape[1] != 1:
                raise ValueError(f"X has {X.shape[1]} features, but RoundwiseConformal is expecting 1 feature "
                                 "(the round index) as input")
            X = X[:, 0]
        elif X.ndim != 1:
            raise ValueError(f"X must be 1-d or one column, got shape {X.shape}")
        if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
            raise ValueError(f"X (the rounds) must be numeric, got dtype {X.dtype}")
        if np.any(X != np.round(X)):
            raise ValueError("X (the rounds) must be whole numbers")
        return X.astype(int)

    def fit(self, X, y) -> RoundwiseConformal:
        """Fit thresholds from calibration scores ``y`` at rounds ``X`` (one pair per trajectory and round)."""
        check_scalar(self.alpha, "alpha", numbers.Real, min_val=0.0, max_val=1.0, include_boundaries="neither")
        if self.config is not None and not isinstance(self.config, Mapping):
            raise TypeError(f"config must be a mapping or None, got {type(self.config).__name__}")
        if y is None:
            raise ValueError("RoundwiseConformal requires y to be passed, but the target y is None")
        rounds = self._rounds(X)
        scores = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        if scores.ndim != 1:
            raise ValueError(f"y (the scores) must be 1-d, got shape {scores.shape}")
        check_consistent_length(rounds, scores)
        if np.any(scores < 0):
            raise ValueError("y (the scores, regrets) must be non-negative")
        self.thresholds_: dict[int, float] = {}
        self.counts_: dict[int, int] = {}
        for t in sorted(set(rounds.tolist())):
            values = np.sort(scores[rounds == t])
            n = len(values)
            k = math.ceil((n + 1) * (1 - self.alpha))
            self.thresholds_[t] = float(values[k - 1]) if k <= n else math.inf
            self.counts_[t] = n
        self.n_features_in_ = 1
        return self

    def predict(self, X) -> np.ndarray:
        """The acceptance threshold of each round in ``X`` (``+inf`` where uncertified), shape (n_samples,)."""
        check_is_fitted(self, "thresholds_")
        return np.array([self.thresholds_.get(t, math.inf) for t in self._rounds(X).tolist()], dtype=float)

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
        """The calibrator :meth:`to_params` described.

        Raises:
            pydantic.ValidationError: ``params`` does not fit :class:`CalibratorParams` (the loader reports the
                field in one line).
        """
        checked = CalibratorParams.model_validate(params)
        obj = cls(alpha=checked.alpha, config=checked.config)
        obj.thresholds_ = {t: (math.inf if v is None else v) for t, v in checked.thresholds.items()}
        obj.counts_ = dict(checked.counts)
        obj.n_features_in_ = 1
        return obj


Round = Annotated[int, BeforeValidator(lambda key: int(key) if isinstance(key, str) and key.isdigit() else key),
                  Field(strict=True, ge=0)]


class CalibratorParams(BaseModel):
    """``params.json`` of a saved :class:`RoundwiseConformal`: ``alpha`` in (0, 1), the configuration it was fitted
    for, and per round (a JSON key of digits) its threshold (a non-negative number, or ``null`` for uncertified)
    and its number of calibration scores; every round with a threshold has a count."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(strict=True, gt=0.0, lt=1.0, allow_inf_nan=False)
    config: dict[str, Any] = Field(default_factory=dict)
    thresholds: dict[Round, Annotated[float, Field(strict=True, ge=0.0, allow_inf_nan=False)] | None]
    counts: dict[Round, Annotated[int, Field(strict=True, ge=0)]]

    @field_validator("config", mode="before")
    @classmethod
    def _no_config_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _counted(self) -> CalibratorParams:
        uncounted = sorted(set(self.thresholds) - set(self.counts))
        if uncounted:
            raise ValueError(f"round {uncounted[0]} has a threshold but no count in 'counts'")
        return self
