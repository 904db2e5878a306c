"""The learned Consilience controller: an MLP predicting every action's one-step reward from the state.

Training data come from exhaustive action outcomes (``groundstate consilience explore``): at each visited
state, each of the four communication actions is evaluated as a counterfactual branch and its reward is
``J(s) - J(s^a)`` (how much the action lowers the surrogate loss). As in the paper's appendix C.1,
:class:`MLPActionValue` maps the six state features to the four rewards at once
(``sklearn.neural_network.MLPRegressor``), with the features standardized and the rewards standardized too
(``sklearn.compose.TransformedTargetRegressor`` with a ``StandardScaler``; both sets of statistics come
from the training data only), and proposes the action with the highest predicted reward. Reward
standardization puts every action's column on one scale for the loss; predictions are mapped back to reward
units, so the argmax is unchanged by it.

It is a scikit-learn multi-output regressor: ``predict`` returns the predicted rewards (one column per
action; a 1-d ``y`` gives 1-d predictions), ``score`` is R^2 averaged over the outputs, and
:meth:`MLPActionValue.predict_action` gives the argmax action. It passes
``sklearn.utils.estimator_checks.check_estimator`` (with ``actions=None``, the generic setting the checks need:
they fit one and five outputs) and saves with ``skops``
(:func:`groundstate.optimizers.artifacts.save_sklearn`).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.compose import TransformedTargetRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_scalar
from sklearn.utils.validation import check_is_fitted, validate_data

from groundstate.records import COMM_ACTIONS


class MLPActionValue(MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Predicts the one-step reward of each action from state features (a multi-output regressor).

    Args:
        hidden_layer_sizes: sizes of the hidden layers (positive integers), passed to ``MLPRegressor``.
        alpha: L2 penalty (>= 0), passed to ``MLPRegressor``.
        max_iter: maximum number of training epochs (>= 1), passed to ``MLPRegressor``.
        learning_rate_init: initial learning rate (> 0), passed to ``MLPRegressor``.
        actions: the action names, in the column order of the reward targets (default the four
            communication actions); ``y`` must then have exactly ``len(actions)`` columns. ``None`` makes it a
            generic multi-output regressor whose outputs are named by column index (``0, 1, ...``).
        normalize_rewards: standardize each reward column on the training data before fitting
            (``TransformedTargetRegressor`` with a ``StandardScaler``); predictions are in reward units.
        random_state: seed for the network's initialization (and its early-stopping split).

    Attributes:
        model_: the fitted pipeline (``StandardScaler`` -> ``MLPRegressor``, wrapped in a
            ``TransformedTargetRegressor`` when ``normalize_rewards``).
        actions_: the output names (``list(actions)``, or the column indices when ``actions`` is None).
        n_outputs_: the number of reward columns.
        n_iter_: the number of epochs the network ran.
        n_features_in_: the number of state features seen in ``fit`` (checked by ``predict``).
    """

    def __init__(self, hidden_layer_sizes: Sequence[int] = (32, 32), alpha: float = 1e-3, max_iter: int = 800,
                 learning_rate_init: float = 1e-3, actions: Sequence[str] | None = COMM_ACTIONS,
                 normalize_rewards: bool = True, random_state: int | None = 0):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.alpha = alpha
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.actions = actions
        self.normalize_rewards = normalize_rewards
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = False
        return tags

    def _check_params(self) -> None:
        """Validate the constructor parameters (scikit-learn's messages: ``ValueError`` / ``TypeError``)."""
        sizes = self.hidden_layer_sizes
        if isinstance(sizes, numbers.Integral):
            sizes = (sizes,)
        if isinstance(sizes, str) or not isinstance(sizes, Sequence) or not sizes:
            raise ValueError(f"hidden_layer_sizes must be a non-empty sequence of positive integers, got {sizes!r}")
        for size in sizes:
            check_scalar(size, "hidden_layer_sizes", numbers.Integral, min_val=1)
        check_scalar(self.alpha, "alpha", numbers.Real, min_val=0.0)
        check_scalar(self.max_iter, "max_iter", numbers.Integral, min_val=1)
        check_scalar(self.learning_rate_init, "learning_rate_init", numbers.Real, min_val=0.0,
                     include_boundaries="neither")
        if not isinstance(self.normalize_rewards, (bool, np.bool_)):
            raise TypeError(f"normalize_rewards must be a bool, got {type(self.normalize_rewards).__name__}")
        if self.actions is not None:
            if isinstance(self.actions, str) or not isinstance(self.actions, Sequence) or not self.actions:
                raise ValueError(f"actions must be None or a non-empty sequence of names, got {self.actions!r}")
            if len(set(self.actions)) != len(self.actions):
                raise ValueError(f"actions must be distinct, got {list(self.actions)}")

    def fit(self, X, y) -> MLPActionValue:
        """Fit on states ``X`` of shape (n_samples, n_features) and rewards ``y`` of shape
        (n_samples, n_outputs) (or (n_samples,) for one output); ``n_outputs == len(actions)`` unless
        ``actions`` is None. Returns ``self``."""
        self._check_params()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        n_outputs = 1 if y.ndim == 1 else y.shape[1]
        if self.actions is not None and n_outputs != len(self.actions):
            raise ValueError(f"y has {n_outputs} columns but there are {len(self.actions)} actions "
                             f"({', '.join(map(str, self.actions))})")
        sizes = (self.hidden_layer_sizes,) if isinstance(self.hidden_layer_sizes, numbers.Integral) else \
            tuple(self.hidden_layer_sizes)
        network = Pipeline([
            ("scale", StandardScaler()),
            ("mlp", MLPRegressor(hidden_layer_sizes=sizes, alpha=self.alpha,
                                 max_iter=self.max_iter, learning_rate_init=self.learning_rate_init,
                                 random_state=self.random_state, early_stopping=len(X) >= 50)),
        ])
        if self.normalize_rewards:
            network = TransformedTargetRegressor(regressor=network, transformer=StandardScaler())
        self.model_ = network.fit(X, y)
        mlp = (self.model_.regressor_ if self.normalize_rewards else self.model_).named_steps["mlp"]
        self.n_iter_ = mlp.n_iter_
        self.n_outputs_ = n_outputs
        self.actions_ = list(self.actions) if self.actions is not None else list(range(n_outputs))
        return self

    def predict(self, X) -> np.ndarray:
        """Predicted rewards: shape (n_samples, n_outputs), or (n_samples,) when fit on a 1-d ``y``."""
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.model_.predict(X)

    def predict_rewards(self, X) -> np.ndarray:
        """Predicted rewards, always 2-d: shape (n_samples, len(actions_))."""
        out = self.predict(X)
        return out.reshape(len(out), -1)

    def predict_action(self, X) -> np.ndarray:
        """The action (from ``actions_``) with the highest predicted reward, per row."""
        rewards = self.predict_rewards(X)
        return np.array([self.actions_[i] for i in rewards.argmax(axis=1)])
