import json

import dspy
import numpy as np
import pytest
from sklearn.neural_network import MLPRegressor

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.optimizers.artifacts import (
    load,
    load_program,
    load_sklearn,
    read_manifest,
    save_params,
    save_program,
    save_sklearn,
)
from groundstate.programs.reground.reground import ReGround
from groundstate.registry import register
from groundstate.testing import scripted_lm


def optimized_reground():
    program = ReGround(max_candidates=2, multi_misleading=True)
    program.resolve.choose.demos = [dspy.Example(information="i", question="q", options="A: a", answer="A",
                                                 reason="r")]
    program.verify.extract.signature = program.verify.extract.signature.with_instructions("TUNED instruction")
    return program


def test_save_load_round_trip_gives_identical_predictions(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-1234")
    program = optimized_reground()
    program.resolve.choose.lm = dspy.LM("openai/gpt-4o-mini")  # a per-predictor LM is not saved
    save_program(program, tmp_path / "art", task="reground", scores={"train": {"before": 0.1, "after": 0.5}})
    text = "".join(p.read_text() for p in (tmp_path / "art").iterdir())
    assert "sk-test-secret" not in text
    manifest = read_manifest(tmp_path / "art")
    assert manifest["program"] == {"class": "groundstate.programs.reground.reground:ReGround",
                                   "kwargs": {"max_candidates": 2, "multi_misleading": True, "oracle_t1": False,
                                              "stop_early": False, "keep_rule": "authors", "mode": "agent",
                                              "max_workers": 8, "batch_facts": False,
                                              "statement_rule": "adjudicate"}}
    assert manifest["task"] == "reground" and manifest["scores"]["train"]["after"] == 0.5
    assert manifest["versions"]["dspy"] == dspy.__version__
    loaded = load_program(tmp_path / "art")
    assert isinstance(loaded, ReGround) and loaded.verify.multi_misleading is True
    assert loaded.verify.extract.signature.instructions == "TUNED instruction"
    assert loaded.resolve.choose.demos[0]["answer"] == "A"
    assert loaded.resolve.choose.lm is None
    instance = generate("healthcare", "main", 1, seed=4)[0]
    program.resolve.choose.lm = None
    outs = []
    for p in (program, loaded):
        lm = scripted_lm(lambda req: None)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            outs.append(p(**instance.inputs()))
            outs.append(sorted(json.dumps(r.messages) for r in lm.engine.requests))  # threads reorder calls
    assert outs[0].toDict() == outs[2].toDict()
    assert outs[1] == outs[3]  # the same prompts, demos and instructions included


def test_incompatible_versions_and_untrusted_classes_are_refused(tmp_path):
    save_program(optimized_reground(), tmp_path / "art")
    path = tmp_path / "art" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["versions"]["dspy"] = "2.6.27"
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="saved with dspy 2.6.27, incompatible"):
        load_program(tmp_path / "art")
    manifest["versions"]["dspy"] = dspy.__version__
    manifest["program"]["class"] = "os:system"
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="refusing to load class 'os:system'"):
        load_program(tmp_path / "art")
    manifest["format"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="artifact format 99"):
        load(tmp_path / "art")


def test_unsaveable_program_is_refused(tmp_path):
    class Plain(dspy.Module):
        def __init__(self):
            super().__init__()
            self.p = dspy.Predict("a -> b")

    with pytest.raises(ConfigError, match="saveable"):
        save_program(Plain(), tmp_path / "x")


def test_sklearn_round_trip_and_version_check(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 4)), rng.normal(size=(60, 2))
    model = MLPRegressor(hidden_layer_sizes=(8,), max_iter=200, random_state=0).fit(X, y)
    save_sklearn(model, tmp_path / "mlp", purpose="test")
    again = load(tmp_path / "mlp")
    assert np.allclose(again.predict(X), model.predict(X))
    assert read_manifest(tmp_path / "mlp")["purpose"] == "test"
    path = tmp_path / "mlp" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["versions"]["scikit-learn"] = "0.24.2"
    path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="scikit-learn 0.24.2"):
        load_sklearn(tmp_path / "mlp")


class Thresholds:
    def __init__(self, values):
        self.values = values

    def to_params(self):
        return {"values": self.values}

    @classmethod
    def from_params(cls, params):
        return cls(params["values"])


def test_params_artifacts_are_json_and_need_registration_for_foreign_classes(tmp_path):
    with pytest.raises(ConfigError, match="not registered"):
        save_params(Thresholds([0.1, 0.5]), tmp_path / "cal", alpha=0.1)
    register(Thresholds, kind="params")
    save_params(Thresholds([0.1, 0.5]), tmp_path / "cal", alpha=0.1)
    assert json.loads((tmp_path / "cal" / "params.json").read_text()) == {"values": [0.1, 0.5]}
    assert load(tmp_path / "cal").values == [0.1, 0.5]
    with pytest.raises(ConfigError, match="no longer supported"):
        load(tmp_path / "cal", allow_custom=True)
    with pytest.raises(ConfigError, match="NaN or infinite"):
        save_params(Thresholds([float("inf")]), tmp_path / "cal2")
