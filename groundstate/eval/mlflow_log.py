"""``--mlflow``: one MLflow run per groundstate run, with its parameters and summary metrics.

When a durable run ends (finished, stopped at the cost cap, or failed), :func:`log_run` writes one MLflow run
named by the run id: the parameters of its config (:func:`run_params`: program and its state hash, LM and its
decoding, per-role LMs, judge, data file and hash, seed, limit, shard, the task's options, and the run id) and the
metrics of its summary (:func:`run_metrics`: each score's mean, interval, ``n`` measured and ``failed``, the record
counts, tokens, LM calls, dollars and, under ``--max-cost``, the spend and the cap). The MLflow run is found again
by its tag ``groundstate.run_id`` when the same command resumes the run, so a groundstate run has one MLflow run,
whose metrics are logged again (a new point of each metric's history) with the resumed run's summary.
``groundstate optimize --mlflow`` logs one MLflow run per optimization (:func:`optimize_params`,
:func:`optimize_metrics`).

Where: the tracking server or store ``MLFLOW_TRACKING_URI`` names, else MLflow's own default in the directory the
command runs in (:func:`tracking_uri`: ``./mlruns`` in MLflow 2; recent MLflow 3 releases refuse a new ``./mlruns``
file store and default to ``sqlite:///mlflow.db``); the experiment ``MLFLOW_EXPERIMENT_NAME``, else
``groundstate``. Logging goes through an ``MlflowClient`` of its own, so it changes neither MLflow's global
tracking URI nor its active run, and tracing is untouched: ``mlflow.dspy.autolog()`` records traces as before
(:mod:`groundstate.concurrency`).

MLflow is the ``trace`` extra (``pip install 'groundstate[trace]'``): without it ``--mlflow`` is refused in one
line before any work (:func:`require_mlflow`). A failure to log (an unreachable server) is a warning: the run
itself is on disk and complete either way.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Mapping
from typing import Any

from groundstate.errors import ConfigError, one_line, scrub_secrets
from groundstate.eval.metric_spec import scoring_description

logger = logging.getLogger(__name__)

RUN_TAG = "groundstate.run_id"
"""The tag that ties an MLflow run to its groundstate run (how a resumed run finds its MLflow run)."""
DEFAULT_EXPERIMENT = "groundstate"
MAX_PARAM_CHARS = 500
"""Parameter values are cut to this length (older MLflow stores refuse longer ones)."""
STATUS = {"finished": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
"""How a groundstate run ended -> the MLflow run status."""

_UNSAFE = re.compile(r"[^\w\-. ]")


def require_mlflow() -> Any:
    """The ``mlflow`` module, or :class:`ConfigError` (one line) saying how to install it."""
    try:
        import mlflow  # noqa: PLC0415 (optional extra: trace)
    except ImportError:
        raise ConfigError("--mlflow needs MLflow, which is not installed: pip install 'groundstate[trace]'") from None
    return mlflow


def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI``, else MLflow's own default (``mlflow.get_tracking_uri()``: what ``mlflow.
    set_tracking_uri`` set in this process, else ``./mlruns`` under the current directory in MLflow 2, and in the
    MLflow 3 releases that retired that file store, ``sqlite:///mlflow.db``, or ``./mlruns`` when it already holds
    runs)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or str(require_mlflow().get_tracking_uri())


def key(name: Any) -> str:
    """An MLflow parameter or metric name: letters, digits, ``_ - . `` and spaces; anything else (a slash, a line
    break) becomes ``_`` and a run of dots one dot, so a name from a file is never a path; at most 250 characters."""
    return re.sub(r"\.{2,}", ".", _UNSAFE.sub("_", str(name))).strip(". ")[:250] or "_"


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def flatten(value: Any, prefix: str = "", depth: int = 4) -> dict[str, str]:
    """``{"a.b.c": "value"}`` of a nested mapping (lists and deeper levels as JSON text), every name made safe
    (:func:`key`) and every value cut to :data:`MAX_PARAM_CHARS`; ``None`` values are left out."""
    out: dict[str, str] = {}
    if isinstance(value, Mapping) and depth > 0:
        for name, item in value.items():
            out.update(flatten(item, f"{prefix}.{name}" if prefix else str(name), depth - 1))
    elif value is not None and prefix:
        out[key(prefix)] = _value(value)
    return out


def run_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The MLflow parameters of a run config: every field flattened (:func:`flatten`), plus the LM, decoding and
    judge in the words of every report (``scoring.*``: :func:`~groundstate.eval.metric_spec.scoring_description`)."""
    params = flatten({k: v for k, v in config.items() if k != "run_id"})
    if isinstance(config.get("lm"), Mapping) and config["lm"].get("model"):
        scoring = scoring_description(config)
        params.update(flatten({k: scoring.get(k) for k in ("lm", "decoding", "judge")}, "scoring"))
    params["run_id"] = _value(config.get("run_id"))
    return params


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def run_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of a run summary (``summary.json``): per score ``scores.<name>.mean/low/high/n/failed/
    missing``, the record counts, the error rate, tokens, LM calls, latency, dollars and the cost cap's spend and
    cap. A value that is not a finite number (a metric measured on no record) is left out, never logged as 0."""
    picks: dict[str, Any] = {f"scores.{name}.{part}": (entry or {}).get(part)
                             for name, entry in (summary.get("scores") or {}).items()
                             for part in ("mean", "low", "high", "n", "failed", "missing")}
    picks.update({"records.selected": summary.get("n_selected"), "records.done": summary.get("n_done"),
                  "records.ok": summary.get("n_ok"), "records.error": summary.get("n_error"),
                  "records.score_failed": summary.get("n_score_failed"), "error_rate": summary.get("error_rate")})
    for group, parts in (("tokens", ("input", "output", "total")), ("lm_calls", ("total", "failed", "cached")),
                         ("latency_s", ("total", "mean")), ("cost_usd", ("total", "unpriced_records")),
                         ("cost_cap", ("max_usd", "spent_usd"))):
        entry = summary.get(group) if isinstance(summary.get(group), Mapping) else {}
        picks.update({f"{group}.{part}": entry.get(part) for part in parts})
    return {key(name): number for name, value in picks.items() if (number := _number(value)) is not None}


def optimize_params(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The MLflow parameters of an optimization (``manifest.json`` of ``groundstate optimize``): the task and its
    options, the optimizer and its budget, the metric and its judge, the LMs, and the data files and hashes."""
    data = {split: {k: v for k, v in (entry or {}).items() if k in ("file", "sha256")}
            for split, entry in (manifest.get("data") or {}).items()}
    return flatten({**{k: manifest.get(k) for k in ("task", "task_options", "optimizer", "metric", "lms")},
                    "data": data})


def optimize_metrics(manifest: Mapping[str, Any]) -> dict[str, float]:
    """The MLflow metrics of an optimization: the metric before and after on each split, the share of failed
    metric calls, LM calls, tokens, seconds and dollars."""
    picks: dict[str, Any] = {f"{split}.{when}": value for split, values in (manifest.get("scores") or {}).items()
                             for when, value in (values or {}).items()}
    picks["failed_share"] = manifest.get("failed_share")
    picks.update({f"cost.{k}": v for k, v in (manifest.get("cost") or {}).items()})
    return {key(name): number for name, value in picks.items() if (number := _number(value)) is not None}


def log_run(result: Any, state: str = "finished") -> str | None:
    """Log a durable run's :class:`~groundstate.eval.runner.RunResult` as its MLflow run (see the module docstring);
    ``state``: ``finished``, ``stopped`` (the cost cap) or ``failed``. Returns the MLflow run id, or ``None`` when
    logging failed (a warning says why; nothing of the groundstate run is affected)."""
    config = {**result.config, "run_id": result.run_id}
    tags = {RUN_TAG: result.run_id, "groundstate.run_dir": str(result.run_dir), "groundstate.state": state}
    if result.summary.get("stopped_reason"):
        tags["groundstate.stopped_reason"] = one_line(result.summary["stopped_reason"], 4000)
    return log_mlflow_run(result.run_id, run_params(config), run_metrics(result.summary), tags, state,
                          resume=True)


def log_mlflow_run(name: str, params: Mapping[str, str], metrics: Mapping[str, float], tags: Mapping[str, str],
                   state: str = "finished", resume: bool = False) -> str | None:
    """One MLflow run named ``name`` with ``params``, ``metrics`` and ``tags``, ended with ``state``'s status.

    With ``resume``, the run tagged :data:`RUN_TAG` = ``tags[RUN_TAG]`` is reused when there is one (its parameters
    already logged are kept, the metrics logged again). Returns the MLflow run id, or ``None`` (with a warning)
    when MLflow could not be reached.
    """
    require_mlflow()
    from mlflow.entities import Metric, Param, RunTag  # noqa: PLC0415 (optional extra: trace)
    from mlflow.tracking import MlflowClient  # noqa: PLC0415 (optional extra: trace)

    uri = tracking_uri()
    try:
        client = MlflowClient(tracking_uri=uri)
        experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        experiment = client.get_experiment_by_name(experiment_name)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(experiment_name)
        found = client.search_runs([experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{tags[RUN_TAG]}'",
                                   max_results=1) if resume and RUN_TAG in tags else []
        if found:
            run_id, logged = found[0].info.run_id, set(found[0].data.params)
        else:
            run_id, logged = client.create_run(experiment_id, run_name=name).info.run_id, set()
        stamp = int(time.time() * 1000)
        fresh = [Param(k, v) for k, v in params.items() if k not in logged]
        batches = max(1, math.ceil(len(fresh) / 100))
        for i in range(batches):  # MLflow takes at most 100 parameters and 1000 metrics per batch
            client.log_batch(run_id, params=fresh[i * 100:(i + 1) * 100],
                             metrics=[Metric(k, v, stamp, 0) for k, v in metrics.items()] if i == 0 else [],
                             tags=[RunTag(k, v) for k, v in tags.items()] if i == 0 else [])
        client.set_terminated(run_id, STATUS.get(state, "FINISHED"))
    except Exception as exc:  # the groundstate run is on disk either way: say why MLflow has no record of it
        logger.warning("--mlflow: could not log run %s to %s: %s", name, uri,
                       one_line(scrub_secrets(f"{type(exc).__name__}: {exc}"), 300))
        return None
    return run_id


def log_optimization(manifest: Mapping[str, Any], out: Any) -> str | None:
    """Log one optimization (``groundstate optimize --mlflow``) as a new MLflow run named after its task and
    optimizer, tagged with the directory the program was saved to; its state is ``stopped`` when the cost cap
    stopped it."""
    state = "stopped" if manifest.get("stopped_reason") else "finished"
    optimizer = (manifest.get("optimizer") or {}).get("optimizer") if isinstance(manifest.get("optimizer"),
                                                                                 Mapping) else None
    tags = {"groundstate.saved_to": str(out), "groundstate.state": state}
    if manifest.get("stopped_reason"):
        tags["groundstate.stopped_reason"] = one_line(manifest["stopped_reason"], 4000)
    return log_mlflow_run(f"optimize-{manifest.get('task')}-{optimizer}", optimize_params(manifest),
                          optimize_metrics(manifest), tags, state)
