"""The learned Consilience controller: an MLP predicting every action's one-step reward from the state.

Training data come from exhaustive action outcomes (``groundstate consilience explore``): at each visited
state, each of the four communication actions is evaluated as a counterfactual branch and its reward is
``J(s) - J(s^a)`` (how much the action lowers the surrogate loss). As in the paper's appendix C.1,
:class:`MLPActionValue` maps the six state features to the four rewards at once
(``sklearn.neural_network.MLPRegressor``), with the features standardized and the rewards standardized too
(``sklearn.compose.TransformedTargetRegressor`` with a ``StandardScaler``; both sets of statistics come
from the training data only), and proposes the action with the highest predicted reward. Reward
standardization puts every action's column on one scale for the loss; predictions are mapped back to reward
units, so the argmax is unchanged by it. It follows scikit-learn's conventions and saves with ``skops``
(:func:`groundstate.optimizers.artifacts.save_sklearn`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.compose import TransformedTargetRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from groundstate.records import COMM_ACTIONS


class MLPActionValue(BaseEstimator):
    """Predicts the one-step reward of each action from state features.

    Args:
        hidden_layer_sizes, alpha, max_iter, learning_rate_init: passed to ``MLPRegressor``.
        actions: the action names, in the column order of the reward targets (default the four
            communication actions).
        normalize_rewards: standardize each reward column on the training data before fitting.
        random_state: seed for the network's initialization.
    """

    def __init__(self, hidden_layer_sizes: Sequence[int] = (32, 32), alpha: float = 1e-3, max_iter: int = 800,
                 learning_rate_init: float = 1e-3, actions: Sequence[str] = COMM_ACTIONS,
                 normalize_rewards: bool = True, random_state: int | None = 0):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.alpha = alpha
        self.max_iter = max_iter
        self.learning_rate_init = learning_rate_init
        self.actions = actions
        self.normalize_rewards = normalize_rewards
        self.random_state = random_state

    def fit(self, X, Y) -> MLPActionValue:
        """Fit on states ``X`` (n, features) and rewards ``Y`` (n, len(actions))."""
        X = np.asarray(X, dtype=float)
        Y = np.asarray(Y, dtype=float)
        if X.ndim != 2 or Y.ndim != 2 or len(X) != len(Y):
            raise ValueError("X must be (n, features) and Y (n, actions) with the same n")
        if Y.shape[1] != len(self.actions):
            raise ValueError(f"Y has {Y.shape[1]} columns but there are {len(self.actions)} actions")
        if not np.all(np.isfinite(X)) or not np.all(np.isfinite(Y)):
            raise ValueError("X and Y must be finite")
        network = Pipeline([
            ("scale", StandardScaler()),
            ("mlp", MLPRegressor(hidden_layer_sizes=tuple(self.hidden_layer_sizes), alpha=self.alpha,
                                 max_iter=self.max_iter, learning_rate_init=self.learning_rate_init,
                                 random_state=self.random_state, early_stopping=len(X) >= 50)),
        ])
        if self.normalize_rewards:
            network = TransformedTargetRegressor(regressor=network, transformer=StandardScaler())
        self.model_ = network.fit(X, Y)
        self.actions_ = list(self.actions)
        self.n_features_in_ = X.shape[1]
        return self

    def predict_rewards(self, X) -> np.ndarray:
        """Predicted rewards, shape (n, len(actions_))."""
        check_is_fitted(self, "model_")
        out = self.model_.predict(np.asarray(X, dtype=float))
        return out.reshape(len(np.atleast_2d(X)), -1)

    def predict(self, X) -> np.ndarray:
        """The action with the highest predicted reward, per row."""
        rewards = self.predict_rewards(X)
        return np.array([self.actions_[i] for i in rewards.argmax(axis=1)])
