"""A saved controller (``model.skops``) may hold only the exact types groundstate's own controllers hold.

Each hostile file below calls a function on load (``exec`` through NumPy's ``runstring``, ``numpy.save``, scikit-
learn's ``dump_svmlight_file``), each of which writes a sentinel file. A control first shows that skops really runs
the payload when told to trust its type, so the refusals below are refusals of live code, not of broken files.
"""

from __future__ import annotations

import itertools
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import skops.io as sio

import groundstate as gs
from groundstate.errors import ConfigError, InputError
from groundstate.optimizers.artifacts import SKOPS_TYPES, load_sklearn, save_params, save_sklearn
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.controller import MLPActionValue
from groundstate.programs.consilience.state import FEATURES
from groundstate.records import COMM_ACTIONS


def _fit(**params) -> MLPActionValue:
    rng = np.random.default_rng(0)
    n_out = len(params["actions"]) if params.get("actions") else 3
    model = MLPActionValue(max_iter=15, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of a 15-epoch fit
        return model.fit(rng.normal(size=(24, len(FEATURES))), rng.normal(size=(24, n_out)))


CONFIGURATIONS = [dict(normalize_rewards=n, actions=a, random_state=r, hidden_layer_sizes=h)
                  for n, a, r, h in itertools.product([True, False], [COMM_ACTIONS, None, ("x", "y")], [0, None],
                                                      [(4,), (3, 2)])]


@pytest.mark.parametrize("params", CONFIGURATIONS, ids=lambda p: "-".join(str(v) for v in p.values()))
def test_a_freshly_saved_controller_needs_only_the_listed_types_and_loads(tmp_path, params):
    model = _fit(**params)
    save_sklearn(model, tmp_path / "mlp")
    assert set(sio.get_untrusted_types(file=tmp_path / "mlp" / "model.skops")) <= SKOPS_TYPES
    loaded = load_sklearn(tmp_path / "mlp")
    x = np.random.default_rng(1).normal(size=(5, len(FEATURES)))
    np.testing.assert_allclose(loaded.predict(x), model.predict(x))


def test_the_list_is_exactly_what_saved_controllers_hold(tmp_path):
    """Every listed type is really needed (the list does not grow beyond what groundstate writes)."""
    needed: set[str] = set()
    for i, params in enumerate(CONFIGURATIONS):
        save_sklearn(_fit(**params), tmp_path / str(i))
        needed |= set(sio.get_untrusted_types(file=tmp_path / str(i) / "model.skops"))
    assert needed == SKOPS_TYPES


def test_a_freshly_saved_calibrator_loads(tmp_path):
    rng = np.random.default_rng(0)
    calibrator = RoundwiseConformal(alpha=0.2).fit([1] * 10 + [2] * 10, rng.uniform(size=20))
    save_params(calibrator, tmp_path / "cal")
    loaded = gs.load(tmp_path / "cal")
    assert loaded.to_params() == calibrator.to_params()


# -- hostile files -------------------------------------------------------------------------------------------------
def _node(value) -> dict:
    """A skops schema node for a JSON-able value (strings, floats, lists, tuples, dicts)."""
    if isinstance(value, tuple):
        return {"__class__": "tuple", "__module__": "builtins", "__loader__": "TupleNode",
                "content": [_node(v) for v in value]}
    if isinstance(value, list):
        return {"__class__": "list", "__module__": "builtins", "__loader__": "ListNode",
                "content": [_node(v) for v in value]}
    if isinstance(value, dict):
        return {"__class__": "dict", "__module__": "builtins", "__loader__": "DictNode",
                "content": {k: _node(v) for k, v in value.items()}, "key_types": _node(list(value))}
    return {"__class__": type(value).__name__, "__module__": "builtins", "__loader__": "JsonNode",
            "content": json.dumps(value), "is_json": True}


def hostile_file(path: Path, function: str, args: tuple) -> Path:
    """A ``.skops`` file whose top object is ``function(*args)`` (skops's ConstructorFromReduceNode)."""
    module, _, name = function.rpartition(".")
    schema = {"__class__": name, "__module__": module, "__loader__": "ConstructorFromReduceNode",
              "content": _node(args), "protocol": 2, "_skops_version": "0.16.0"}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("schema.json", json.dumps(schema))
    return path


def payloads(sentinel: Path) -> dict[str, tuple[str, tuple]]:
    return {
        "runstring": ("numpy.testing._private.utils.runstring", (f"open({str(sentinel)!r}, 'w').close()", {})),
        "numpy-not-listed": ("numpy.save", (str(sentinel), [1.0])),
        "sklearn-function": ("sklearn.datasets._svmlight_format_io.dump_svmlight_file",
                             ([[1.0]], [1.0], str(sentinel))),
    }


@pytest.mark.parametrize("name", ["runstring", "numpy-not-listed", "sklearn-function"])
def test_the_payloads_are_live_when_trusted(tmp_path, name):
    """The control: skops runs each payload if the caller trusts its type (so the refusals below matter)."""
    sentinel = tmp_path / "SENTINEL.npy"
    function, args = payloads(sentinel)[name]
    path = hostile_file(tmp_path / "evil.skops", function, args)
    assert sio.get_untrusted_types(file=path) == [function]
    try:
        sio.load(path, trusted=[function])
    except Exception:  # what the function returns is not a model; it has already run
        pass
    assert sentinel.exists()


@pytest.fixture
def saved_controller(tmp_path):
    directory = tmp_path / "mlp"
    save_sklearn(_fit(actions=COMM_ACTIONS), directory, features=list(FEATURES))
    return directory


@pytest.mark.parametrize("name", ["runstring", "numpy-not-listed", "sklearn-function"])
def test_a_hostile_controller_is_refused_before_anything_runs(saved_controller, tmp_path, name):
    sentinel = tmp_path / "SENTINEL.npy"
    function, args = payloads(sentinel)[name]
    hostile_file(saved_controller / "model.skops", function, args)
    for loader in (gs.load, load_sklearn):
        with pytest.raises(ConfigError, match=f"refusing to load type '{function}'") as info:
            loader(saved_controller)
        assert "\n" not in str(info.value)
    assert not sentinel.exists()


def test_the_cli_refuses_a_hostile_controller_in_one_line(saved_controller, tmp_path):
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from tests.test_hostile_files import run_cli

    sentinel = tmp_path / "SENTINEL.npy"
    hostile_file(saved_controller / "model.skops", *payloads(sentinel)["runstring"])
    save_hidden_tasks(tmp_path / "tasks.jsonl", generate_hidden_travel(2, seed=0))
    code, out, err = run_cli(["consilience", "evaluate", "--data", str(tmp_path / "tasks.jsonl"), "--agents", "sim",
                              "--controllers", "mlp", "--mlp", str(saved_controller), "--runs-dir",
                              str(tmp_path / "runs"), "--no-progress"], tmp_path)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "refusing to load type" in err
    assert not sentinel.exists()


def test_a_zip_bomb_is_refused_unread(saved_controller, monkeypatch):
    from groundstate.optimizers import artifacts

    monkeypatch.setattr(artifacts, "MAX_SKOPS_BYTES", 4096)
    with zipfile.ZipFile(saved_controller / "model.skops", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("schema.json", " " * 100_000)
    with pytest.raises(InputError, match="unpacks to 100000 bytes"):
        load_sklearn(saved_controller)
