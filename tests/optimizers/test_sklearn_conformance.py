"""scikit-learn conformance of the MLP controller and the conformal calibrator (``check_estimator``)."""

import math
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from groundstate.optimizers.conformal import NOT_APPLICABLE_CHECKS, RoundwiseConformal
from groundstate.optimizers.controller import MLPActionValue
from groundstate.records import COMM_ACTIONS


def expected_failures(estimator):
    return NOT_APPLICABLE_CHECKS if isinstance(estimator, RoundwiseConformal) else {}


# the MLP with actions=None: the checks fit one output and five, which named actions would refuse
@parametrize_with_checks([MLPActionValue(actions=None, hidden_layer_sizes=(16,), max_iter=300),
                          RoundwiseConformal()], expected_failed_checks=expected_failures)
def test_check_estimator(estimator, check):
    check(estimator)


def test_not_applicable_checks_are_the_real_gap():
    """Every exclusion is a check that fails (an exclusion that passes would hide nothing and must go)."""
    from sklearn.utils.estimator_checks import check_estimator

    results = check_estimator(RoundwiseConformal(), on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed == set(NOT_APPLICABLE_CHECKS)
    assert sum(r["status"] == "passed" for r in results) >= 18


def test_mlp_is_a_multi_output_regressor_with_named_actions():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 6))
    Y = np.column_stack([X[:, 0], -X[:, 0], X[:, 1], 0.5 * X[:, 2]])
    model = MLPActionValue(hidden_layer_sizes=(16,), max_iter=500)
    with pytest.raises(NotFittedError):
        model.predict(X)
    model.fit(X, Y)
    assert model.predict(X).shape == (120, 4) and model.n_outputs_ == 4 and model.actions_ == list(COMM_ACTIONS)
    assert model.score(X, Y) > 0.8
    assert set(model.predict_action(X)) <= set(COMM_ACTIONS)
    with pytest.raises(ValueError, match="6 features"):
        model.predict(X[:, :5])
    with pytest.raises(ValueError, match="4 actions"):
        model.fit(X, Y[:, 0])
    generic = MLPActionValue(actions=None, hidden_layer_sizes=(8,), max_iter=300).fit(X, Y[:, 0])
    assert generic.predict(X).shape == (120,) and generic.predict_rewards(X).shape == (120, 1)
    assert generic.actions_ == [0]
    # clone / set_params round trip
    other = clone(model).set_params(alpha=0.5, hidden_layer_sizes=(4,))
    assert other.get_params()["alpha"] == 0.5 and model.get_params()["alpha"] == 1e-3
    assert not hasattr(other, "model_")


@pytest.mark.parametrize("params, error", [
    ({"alpha": -1.0}, ValueError), ({"max_iter": 0}, ValueError), ({"learning_rate_init": 0.0}, ValueError),
    ({"hidden_layer_sizes": (0,)}, ValueError), ({"hidden_layer_sizes": ()}, ValueError),
    ({"max_iter": 2.5}, TypeError), ({"actions": ("Route", "Route", "Clarify", "Challenge")}, ValueError),
    ({"normalize_rewards": "yes"}, TypeError),
])
def test_mlp_validates_its_parameters_at_fit(params, error):
    X, Y = np.zeros((10, 2)), np.zeros((10, 4))
    with pytest.raises(error):
        MLPActionValue(**params).fit(X, Y)


def test_mlp_saved_with_skops_still_loads(tmp_path):
    from groundstate.optimizers.artifacts import load_sklearn, save_sklearn

    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(40, 6)), rng.normal(size=(40, 4))
    for normalize in (True, False):
        model = MLPActionValue(hidden_layer_sizes=(4,), max_iter=50, normalize_rewards=normalize).fit(X, Y)
        save_sklearn(model, tmp_path / f"mlp{normalize}")
        again = load_sklearn(tmp_path / f"mlp{normalize}")
        assert isinstance(again, MLPActionValue)
        assert np.allclose(again.predict(X), model.predict(X))
        assert again.actions_ == model.actions_ and again.n_features_in_ == 6


def test_calibrator_sklearn_interface_on_round_data():
    rounds = np.array([0] * 10 + [1] * 3)
    scores = np.linspace(0.0, 1.0, 13)
    cal = RoundwiseConformal(alpha=0.2)
    with pytest.raises(NotFittedError):
        cal.predict([0])
    assert cal.fit(rounds, scores) is cal
    # the same fit as a column X, with keywords, in a shuffled order, after pickling and cloning
    column = RoundwiseConformal(alpha=0.2).fit(X=rounds[:, None].astype(float), y=scores)
    order = np.random.default_rng(0).permutation(13)
    shuffled = RoundwiseConformal(alpha=0.2).fit(rounds[order], scores[order])
    for other in (column, shuffled, pickle.loads(pickle.dumps(cal)), clone(cal).fit(rounds, scores)):
        assert other.thresholds_ == cal.thresholds_ and other.counts_ == cal.counts_
    assert cal.fit(rounds, scores).thresholds_ == column.thresholds_  # idempotent
    predicted = cal.predict([[0], [1], [7]])
    assert predicted[0] == cal.threshold(0) and math.isinf(predicted[1]) and math.isinf(predicted[2])
    assert cal.n_features_in_ == 1 and RoundwiseConformal.from_params(cal.to_params()).n_features_in_ == 1
    assert clone(cal).set_params(alpha=0.3).get_params() == {"alpha": 0.3, "config": None}


@pytest.mark.parametrize("X, y, match", [
    ([0.5, 1.0], [0.1, 0.2], "whole numbers"),
    ([[0, 1], [1, 2]], [0.1, 0.2], "expecting 1 feature"),
    ([0, 1], [0.1], "inconsistent numbers of samples"),
    ([0, 1], [0.1, -0.2], "non-negative"),
    ([0, 1], [0.1, np.nan], "NaN"),
    ([0, 1], None, "requires y"),
])
def test_calibrator_refuses_bad_input_with_standard_messages(X, y, match):
    with pytest.raises(ValueError, match=match):
        RoundwiseConformal().fit(X, y)
