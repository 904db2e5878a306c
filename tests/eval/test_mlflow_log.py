"""``--mlflow`` (issue 26, item 7): one MLflow run per groundstate run with its parameters and summary metrics.

The parameter and metric dicts are built and checked without MLflow; the logging itself runs against a file store in
a temporary directory when MLflow (the ``trace`` extra) is installed, and is skipped, saying so, when it is not.
Without MLflow, ``--mlflow`` is refused in one line before any work.
"""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest

from groundstate.errors import ConfigError
from groundstate.eval.cost_cap import CostCap
from groundstate.eval.mlflow_log import (
    MAX_PARAM_CHARS,
    flatten,
    key,
    optimize_metrics,
    optimize_params,
    require_mlflow,
    run_metrics,
    run_params,
)
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import CostCapStopped, Runner
from groundstate.programs.qa import QuestionAnswering
from tests.helpers import echo_number_lm, json_adapter, qa_records, qa_score
from tests.test_hostile_files import run_cli

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None
needs_mlflow = pytest.mark.skipif(not HAS_MLFLOW, reason="MLflow (the 'trace' extra) is not installed; the parameter "
                                  "and metric dicts are tested without it")

CONFIG = {"program": "reground", "program_state": "abc123",
          "lm": {"model": "openai/gpt-4o-mini", "temperature": 0.0, "max_tokens": 512},
          "lm_config": {"default": {"model": "openai/gpt-4o-mini"}, "roles": {"judge": {"model": "openai/gpt-4o"}}},
          "data": {"file": "offquery.jsonl", "sha256": "f" * 64}, "seed": 3, "limit": None, "shard": [0, 2],
          "options": {"condition": "unreliable", "judge": "lm:openai/gpt-4o", "long": "x" * 2000,
                      "../odd\nkey": 1},
          "run_id": "reground-0123456789ab"}
SUMMARY = {"run_id": "reground-0123456789ab", "n_selected": 10, "n_done": 8, "n_ok": 7, "n_error": 1,
           "n_score_failed": 1, "error_rate": 0.125,
           "scores": {"t1_accuracy": {"mean": 0.5, "low": 0.2, "high": 0.8, "n": 7, "failed": 1, "missing": 0},
                      "t2_f1": {"mean": None, "low": None, "high": None, "n": 0, "failed": 8, "missing": 0},
                      "t3_accuracy": {"mean": float("nan"), "n": 7, "failed": 1}},
           "tokens": {"input": 800, "output": 200, "total": 1000, "per_record": 125.0},
           "cost_usd": {"total": 0.012, "per_record": 0.0015, "unpriced_records": 0},
           "lm_calls": {"total": 40, "per_record": 5.0, "cached": 4, "failed": 2},
           "latency_s": {"total": 12.0, "mean": 1.5}, "cost_cap": {"max_usd": 0.01, "spent_usd": 0.012},
           "stopped_reason": "stopped at the cost cap: ...", "finished": True}


def test_run_params_name_the_lm_judge_decoding_data_program_run_id_and_seed():
    params = run_params(CONFIG)
    assert params["program"] == "reground" and params["program_state"] == "abc123"
    assert params["lm.model"] == "openai/gpt-4o-mini" and params["lm.temperature"] == "0.0"
    assert params["lm_config.roles.judge.model"] == "openai/gpt-4o"
    assert params["data.file"] == "offquery.jsonl" and params["data.sha256"] == "f" * 64
    assert params["seed"] == "3" and params["shard"] == "[0, 2]" and "limit" not in params  # None: left out
    assert params["run_id"] == "reground-0123456789ab" and params["options.condition"] == "unreliable"
    assert params["scoring.lm"] == "openai/gpt-4o-mini" and params["scoring.decoding"].startswith("temperature 0")
    assert "gpt-4o" in params["scoring.judge"]
    assert len(params["options.long"]) == MAX_PARAM_CHARS and params["options.long"].endswith("...")
    assert all(key(name) == name and "\n" not in name and ".." not in name for name in params)  # hostile keys
    assert "options._odd_key" in params


def test_run_metrics_hold_each_scores_mean_and_n_failed_counts_tokens_and_cost():
    metrics = run_metrics(SUMMARY)
    assert metrics["scores.t1_accuracy.mean"] == 0.5 and metrics["scores.t1_accuracy.n"] == 7
    assert metrics["scores.t1_accuracy.failed"] == 1 and metrics["scores.t2_f1.failed"] == 8
    assert "scores.t2_f1.mean" not in metrics and "scores.t3_accuracy.mean" not in metrics  # never logged as 0
    assert metrics["records.done"] == 8 and metrics["records.error"] == 1 and metrics["records.score_failed"] == 1
    assert metrics["tokens.input"] == 800 and metrics["tokens.total"] == 1000
    assert metrics["lm_calls.failed"] == 2 and metrics["cost_usd.total"] == 0.012
    assert metrics["cost_cap.spent_usd"] == 0.012 and metrics["cost_cap.max_usd"] == 0.01
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())


def test_an_optimizations_params_and_metrics():
    manifest = {"task": "reground", "task_options": {"condition": "unreliable"},
                "optimizer": {"optimizer": "mipro", "budget": {"auto": "light"}, "seed": 0},
                "metric": {"spec": "t3", "judge": "lexical"}, "lms": {"default": {"model": "openai/gpt-4o-mini"}},
                "data": {"train": {"file": "train.jsonl", "sha256": "a", "ids": ["x"] * 50}, "val": None},
                "scores": {"train": {"before": 0.25, "after": None}, "val": {"before": 0.5, "after": 0.75}},
                "failed_share": 0.0, "cost": {"lm_calls": 10, "input_tokens": 5, "usd": None, "seconds": 2.0}}
    params = optimize_params(manifest)
    assert params["optimizer.optimizer"] == "mipro" and params["optimizer.budget.auto"] == "light"
    assert params["metric.spec"] == "t3" and params["lms.default.model"] == "openai/gpt-4o-mini"
    assert params["data.train.file"] == "train.jsonl" and not any("ids" in name for name in params)
    metrics = optimize_metrics(manifest)
    assert metrics == {"train.before": 0.25, "val.before": 0.5, "val.after": 0.75, "failed_share": 0.0,
                       "cost.lm_calls": 10.0, "cost.input_tokens": 5.0, "cost.seconds": 2.0}


def test_flatten_cuts_depth_and_keeps_lists_as_json():
    assert flatten({"a": {"b": {"c": {"d": {"e": 1}}}}, "l": [1, "x"]}) == {"a.b.c.d": '{"e": 1}', "l": '[1, "x"]'}


@pytest.mark.skipif(HAS_MLFLOW, reason="checks the refusal without MLflow, which is installed here")
def test_without_mlflow_it_is_refused_in_one_line_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"pip install 'groundstate\[trace\]'"):
        require_mlflow()
    with pytest.raises(ConfigError, match="--mlflow needs MLflow"):
        RunSettings(mlflow=True)
    for argv in (["run", "qa", "--data", "example:qa", "--mlflow", "--runs-dir", "runs"],
                 ["experiment", "run", "reground-table1-synthetic", "--mlflow"],
                 ["optimize", "voting", "--data", "missing.jsonl", "--out", "o", "--mlflow"]):
        code, out, err = run_cli(argv, tmp_path)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "--mlflow needs MLflow" in lines[0], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".stderr", ".stdout"]  # nothing was made


def test_require_mlflow_says_how_to_install_when_the_import_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # an import of mlflow now raises ImportError
    with pytest.raises(ConfigError, match=r"not installed: pip install 'groundstate\[trace\]'"):
        require_mlflow()


@needs_mlflow
def test_one_mlflow_run_per_groundstate_run_with_params_and_metrics(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    store = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 releases refuse a file store without it
    monkeypatch.chdir(tmp_path)
    config = {"program": "qa", "data": {"file": "qa.jsonl"}, "seed": 0,
              "lm": {"model": "openai/gpt-4o-mini", "temperature": 0.0}}

    def runner(cap):
        lm = echo_number_lm(model="openai/gpt-4o-mini", input_tokens=1000, output_tokens=500)
        return Runner(QuestionAnswering(), config, out=tmp_path / "runs", lm=lm, adapter=json_adapter(),
                      inputs=lambda r: {"question": r["question"]}, scorer=qa_score, cost_cap=cap, mlflow=True)

    with pytest.raises(CostCapStopped) as stop:
        runner(CostCap(0.0001)).run(qa_records(4))
    done = runner(None).run(qa_records(4))
    assert done.run_id == stop.value.result.run_id
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("groundstate")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # the resumed run logged into the same MLflow run
    run = runs[0]
    assert run.info.run_name == done.run_id and run.info.status == "FINISHED"
    assert run.data.tags["groundstate.run_id"] == done.run_id and run.data.tags["groundstate.state"] == "finished"
    assert run.data.params["lm.model"] == "openai/gpt-4o-mini" and run.data.params["run_id"] == done.run_id
    assert run.data.params["data.file"] == "qa.jsonl" and run.data.params["seed"] == "0"
    assert run.data.metrics["scores.exact_match.mean"] == 1.0 and run.data.metrics["scores.exact_match.n"] == 4
    assert run.data.metrics["records.done"] == 4 and run.data.metrics["cost_usd.total"] > 0
    history = [m.value for m in client.get_metric_history(run.info.run_id, "records.done")]
    assert history == [1.0, 4.0]  # the stopped session, then the resumed one
