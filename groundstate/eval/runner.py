"""The durable runner: any program over any list of records, on threads, resumable, shardable.

A run lives in ``<out>/<run-id>/``:

- ``config.json``: what was run (program, its saved state hash, LM specs, data hash, seed, options). The
  run id is ``<program>-<fingerprint of this config>``, so the same command finds the same directory and a
  changed configuration gets a new one. A program name that is not a safe file name (``../x``, ``/abs``) is
  refused before anything is made (:func:`groundstate.paths.safe_component`), and an existing ``config.json``,
  ``results.jsonl`` or ``summary.json`` that is not a regular file (a symlink, a FIFO) is one line.
- ``results.jsonl``: one JSON line per finished record, appended and flushed as the record finishes:
  ``id``, ``outputs``, ``trace``, ``scores`` (the metrics measured on the record), ``score_errors`` (``{metric:
  error text}`` for each metric that could not be measured), ``input_tokens``, ``output_tokens``, ``lm_calls``,
  ``latency_s``, ``error`` (the program's failure; ``null`` when the program succeeded), ``attempt``,
  ``failed_calls`` (LM calls that raised: a refused connection, a timeout, an error status) and ``cached_calls``
  (calls DSPy's cache answered: they cost no tokens; never failed ones), ``cost_usd`` (dollars, cache hits
  excluded, ``null`` if unpriced: see metering), and, when the run has a ``labels`` function, what it labels the
  record with (:data:`LABEL_KEYS`: ``gold``, the record's gold answer as its task defines it; ``domain``;
  ``variant``), which the program never sees.
- ``summary.json``: counts, error rate, each metric's mean with a 95% bootstrap interval over the records it was
  measured on, how many it was measured on and how many it failed on, tokens, calls.

While a run is going, it holds a lock on ``<run-dir>/.lock`` (:class:`~groundstate.eval.lock.RunLock`); a
second process started on the same run directory stops at once with
:class:`~groundstate.errors.RunInUseError` instead of writing every record a second time.

**A failure is never a score** (:mod:`groundstate.eval.scoring`). A record whose program raised (an LM error,
a timeout, an unparseable output) gets ``error`` (secrets scrubbed), no outputs and no scores, and every metric
its scorer gives it (the keys of ``scorer(record, None)``; the values are ignored) in ``score_errors``: the
papers' metrics score the answers a system gave, and no metric of groundstate is defined on a missing answer,
so a program failure is counted apart, never as 0. A record whose program succeeded but whose scoring failed
(the T2 judge's call errored or its reply could not be parsed) keeps its outputs and trace, the metrics that
were measured (T1, T3) and, in ``score_errors``, the ones that were not (T2 and its halves). The run goes on.

Running the same command again resumes: records that succeeded are skipped, failed ones retried (a failed
record's row stays on disk until its retry replaces it). A record whose program failed runs again; one whose
scoring alone failed is re-scored from its stored outputs, its program not run again, when its scorer reads only
stored outputs (``from_outputs``: the OffQuery and ``qa`` scorers; the hidden-profile and DHD scorers, which
call no judge, run the record again). A predictor call that failed leaves nothing in DSPy's response cache
(:mod:`groundstate.lm.failed_calls`), so a retry asks the LM again for exactly the calls that failed. A torn
last line is removed on resume, so a SIGKILL loses at most the record being written. ``shard=(i, n)`` runs a
deterministic 1/n of the records; :func:`groundstate.eval.runs.merge_runs` joins shards.

``--max-cost`` (``RunSettings.max_cost``, :mod:`groundstate.eval.cost_cap`): once the command's priced LM spend
reaches the cap, no new record starts; records running finish and are written, and the run stops with
:class:`CostCapStopped` (its summary's ``cost_cap`` holds the spend and the cap). ``--mlflow`` logs one MLflow run
per run when it ends, stopped or not (:mod:`groundstate.eval.mlflow_log`).

A record *failed* when its program failed or a metric could not be measured. The run fails
(:class:`RunAborted`, everything finished kept on disk) when, after at least :data:`MIN_RECORDS_FOR_ERROR_RATE`
records or at its end whatever their number, the share of failed records exceeds ``max_error_rate``, and at its
end when every record failed, whatever ``max_error_rate`` is.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.concurrency import current_overrides, overrides
from groundstate.errors import ConfigError, InputError, redact_known_secrets, scrub_secrets
from groundstate.eval.cost_cap import check_priced, described_models, program_models, scoring_fields
from groundstate.eval.identity import canonical_json as canonical_json
from groundstate.eval.identity import file_hash as file_hash
from groundstate.eval.identity import fingerprint as fingerprint
from groundstate.eval.identity import parse_shard as parse_shard
from groundstate.eval.identity import record_id as record_id
from groundstate.eval.identity import shard_of as shard_of
from groundstate.eval.lock import RunLock
from groundstate.eval.progress import RunProgress
from groundstate.eval.ray_backend import RayOptions, execute_on_ray
from groundstate.eval.results import CONFIG, RESULTS, SUMMARY, read_results, summarize, write_json, write_lines
from groundstate.eval.run_result import CostCapStopped as CostCapStopped
from groundstate.eval.run_result import RunAborted as RunAborted
from groundstate.eval.run_result import RunResult as RunResult
from groundstate.eval.run_result import program_inputs as program_inputs
from groundstate.eval.run_result import select_records as select_records
from groundstate.eval.run_settings import DEFAULT_MAX_ERROR_RATE as DEFAULT_MAX_ERROR_RATE
from groundstate.eval.run_settings import RunSettings as RunSettings
from groundstate.eval.run_settings import program_state_hash as program_state_hash
from groundstate.eval.run_settings import run_config as run_config
from groundstate.eval.scoring import record_failed, rescorable, rescored_row, score_prediction, unmeasured
from groundstate.files import jsonable
from groundstate.lm.failed_calls import eviction_wrappers, failed_call_eviction
from groundstate.metering import meter_context, meter_overrides, metered_lm_calls, new_meter
from groundstate.paths import check_entry, child, safe_component

logger = logging.getLogger(__name__)


MIN_RECORDS_FOR_ERROR_RATE = 5
"""Records done before the error share can stop a run early (at its end the share is checked however few)."""

LABEL_KEYS: tuple[str, ...] = ("gold", "domain", "variant")
"""The row fields a run's ``labels`` function may fill (an allow-list: a label never overwrites another field)."""



# ---------------------------------------------------------------------------------------------------------
# The one way to start a durable run (what describes one: groundstate.eval.run_settings)
# ---------------------------------------------------------------------------------------------------------


def durable_run(program: Callable[..., Any], config: dict[str, Any], records: Sequence[Any], settings: RunSettings,
                *, inputs: Callable[[Any], dict[str, Any]] | None = None,
                scorer: Callable[[Any, Any], dict[str, float]] | None = None,
                outputs: Callable[[Any], dict[str, Any]] | None = None, description: str | None = None,
                labels: Callable[[Any], dict[str, Any]] | None = None) -> RunResult:
    """Run ``program`` over ``records`` durably with :class:`Runner` (see the module docstring)."""
    runner = Runner(program, config, out=settings.out or "runs", threads=settings.threads, inputs=inputs,
                    scorer=scorer, outputs=outputs, max_error_rate=settings.max_error_rate, progress=settings.progress,
                    ray=settings.ray_options(), labels=labels, cost_cap=settings.cost_cap(),
                    mlflow=settings.mlflow)
    return runner.run(records, limit=settings.limit, shard=settings.shard, description=description)


@dataclass
class Runner:
    """Runs ``program`` over records, durably.

    Args:
        program: a callable (usually a ``dspy.Module``) taking the record's inputs as keyword arguments.
        config: what identifies the run (program name, LM description, data hash, seed, options); its
            fingerprint names the run directory. The runner adds ``limit`` and ``shard``.
        out: the directory that holds run directories (``runs``).
        threads: records processed concurrently.
        inputs: record -> keyword arguments (default: ``record.inputs()`` if it exists, else the record's
            fields without ``id``).
        scorer: ``(record, prediction_or_None) -> {name: float}`` (:mod:`groundstate.eval.scoring`): called with
            ``None`` only to learn which metrics a record whose program failed does not have (values ignored).
        outputs: prediction -> JSON-able dict of outputs (default: every field but ``trace``).
        max_error_rate: fail once at least :data:`MIN_RECORDS_FOR_ERROR_RATE` records are done and the share of
            failed ones exceeds this, or when the run ends with it exceeded (``None``: only when every record
            failed).
        progress: show LM calls, tokens, errors and elapsed time per LM call (:mod:`~groundstate.eval.progress`).
        lm: an LM to use inside the run (``dspy.context(lm=...)``), or ``None`` for the configured one.
        adapter: an adapter to use inside the run, or ``None``.
        ray: :class:`~groundstate.eval.ray_backend.RayOptions` to run records as Ray tasks; ``None``: threads.
        labels: record -> ``{"gold", "domain", "variant"}`` (any of :data:`LABEL_KEYS`), stored in the record's row
            for analysis (:meth:`groundstate.eval.runs.Run.to_pandas`); ``None``: rows carry none. Labels are not
            part of the config, so they never change a run id.
        cost_cap: a :class:`~groundstate.eval.cost_cap.CostCap` (``--max-cost``): no record starts once it is
            reached, and the run then stops with :class:`CostCapStopped`; ``None``: no cap.
        mlflow: log one MLflow run for this run when it ends (:mod:`groundstate.eval.mlflow_log`).
    """

    program: Callable[..., Any]
    config: dict[str, Any]
    out: str | os.PathLike = "runs"
    threads: int = 1
    inputs: Callable[[Any], dict[str, Any]] | None = None
    scorer: Callable[[Any, Any], dict[str, float]] | None = None
    outputs: Callable[[Any], dict[str, Any]] | None = None
    max_error_rate: float | None = None
    progress: bool = False
    lm: Any = None
    adapter: Any = None
    ray: RayOptions | None = None
    labels: Callable[[Any], dict[str, Any]] | None = None
    cost_cap: Any = None
    mlflow: bool = False
    meter_scoring: bool = False  # a Ray worker under a cap: rows carry the judge's spend (cost_cap.SCORING_KEYS)
    _write_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, Any]:  # a Runner is shipped to Ray workers; its lock is not
        return {k: v for k, v in self.__dict__.items() if k != "_write_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _write_lock=threading.Lock())

    def run(self, records: Sequence[Any], limit: int | None = None, shard: tuple[int, int] | None = None,
            description: str | None = None) -> RunResult:
        """Run (or resume) over ``records``; returns the :class:`RunResult`. Raises :class:`RunAborted`."""
        if self.threads < 1:
            raise ConfigError("--threads must be at least 1")
        if limit is not None and limit < 0:
            raise ConfigError("--limit must be >= 0")
        if self.max_error_rate is not None and not 0 <= self.max_error_rate <= 1:
            raise ConfigError("--max-error-rate must be between 0 and 1")
        ids = [record_id(r) for r in records]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise ConfigError(f"duplicate record id '{dup}': every record needs its own id")
        if self.cost_cap is not None:  # before any call: a spend that cannot be priced cannot be capped
            default_lm = self.lm if self.lm is not None else current_overrides().get("lm")
            check_priced(described_models(self.config) | program_models(self.program, default_lm))
        if self.mlflow:
            from groundstate.eval.mlflow_log import require_mlflow  # noqa: PLC0415 (optional extra: trace)

            require_mlflow()
        config = {**self.config, "limit": limit, "shard": list(shard) if shard else None}
        run_id = f"{safe_component(config.get('program', 'run'), 'program name')}-{fingerprint(config)}"
        run_dir = child(self.out, run_id, "run id")
        for name in (CONFIG, RESULTS, SUMMARY):  # appended to or replaced: never through a link, never a FIFO
            check_entry(run_dir / name, "run files")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make the run directory ({exc.strerror or exc})", file=str(run_dir)) from None
        with RunLock(run_dir, run_id):
            return self._run_locked(records, config, run_id, run_dir, limit, shard, description)

    def _run_locked(self, records: Sequence[Any], config: dict[str, Any], run_id: str, run_dir: Path,
                    limit: int | None, shard: tuple[int, int] | None, description: str | None) -> RunResult:
        write_json(run_dir / CONFIG, {**config, "run_id": run_id})
        results_path = run_dir / RESULTS

        selected = select_records(records, limit, shard)
        selected_ids = {record_id(r) for r in selected}
        previous = [r for r in read_results(results_path, repair=True) if r["id"] in selected_ids]
        done = {r["id"]: r for r in previous if not record_failed(r)}
        failed = {r["id"]: r for r in previous if record_failed(r)}  # retried; their rows stay until replaced
        todo = [r for r in selected if record_id(r) not in done]
        rows = list(done.values())
        logger.info("run %s: %d selected, %d already done, %d to run", run_id, len(selected), len(done), len(todo))

        stopped, failures = None, {"records": 0, "program": 0}  # failed rows of this session (done ones did not)
        tokens = sum(int(r.get("input_tokens") or 0) + int(r.get("output_tokens") or 0) for r in rows)
        first = {"run_id": run_id, **summarize(rows, len(selected)), "stopped_reason": None, "finished": False}
        write_json(run_dir / SUMMARY, first)  # a killed run is listed as killed, not complete
        with open(results_path, "a", encoding="utf-8") as sink, self._progress(
                description or run_id, len(selected), len(done), tokens) as bar, \
                metered_lm_calls(), eviction_wrappers():  # DSPy's classes wrapped once for the run, not per record
            for row in self._execute(todo, failed, bar):
                line = json.dumps(row, ensure_ascii=False)
                with self._write_lock:
                    sink.write(line + "\n")
                    sink.flush()
                rows.append(row)
                failures["records"] += record_failed(row)
                failures["program"] += bool(row.get("error"))
                bar.advance(record_failed(row), row["input_tokens"] + row["output_tokens"], row["lm_calls"])
                stopped = self._verdict(len(rows), **failures)
                if stopped:
                    break
        capped = not stopped and self.cost_cap is not None and len(rows) < len(selected) and self.cost_cap.reached()
        stopped = stopped or (self.cost_cap.reason(len(rows), len(selected)) if capped else None) \
            or self._verdict(len(rows), **failures, at_end=True)
        if failed:  # one line per record again, each the newest; failed records not retried keep their old row
            write_lines(results_path, read_results(results_path))
            seen = {r["id"] for r in rows}
            rows += [row for rid, row in failed.items() if rid not in seen]
        order = {rid: i for i, rid in enumerate(r for r in (record_id(x) for x in selected))}
        rows.sort(key=lambda r: order.get(r["id"], len(order)))
        summary = {"run_id": run_id, **summarize(rows, len(selected)), "stopped_reason": stopped, "finished": True}
        if self.cost_cap is not None:
            summary["cost_cap"] = self.cost_cap.describe()
        write_json(run_dir / SUMMARY, summary)
        result = RunResult(run_id, run_dir, config, rows, summary, skipped=len(done), stopped_reason=stopped)
        if self.mlflow:
            from groundstate.eval.mlflow_log import log_run  # noqa: PLC0415 (optional extra: trace)

            log_run(result, "stopped" if capped else "failed" if stopped else "finished")
        if stopped:
            raise (CostCapStopped if capped else RunAborted)(stopped, result)
        return result

    # -- internals ---------------------------------------------------------------------------------------
    def _verdict(self, n: int, records: int, program: int, at_end: bool = False) -> str | None:
        """Why the run fails with ``records`` of ``n`` failed (``program`` by the program); ``None``: it does not."""
        detail = f"{program} program errors, {records - program} with metrics not measured"
        if at_end and n and records == n:
            return f"failed: every record failed ({detail})"
        if self.max_error_rate is None or not n or (n < MIN_RECORDS_FOR_ERROR_RATE and not at_end) \
                or records / n <= self.max_error_rate:
            return None
        share = (f"error rate {records / n:.0%} exceeds --max-error-rate {self.max_error_rate:.0%} ({records} of {n} "
                 f"records failed: {detail})")
        return f"failed: {share}" if at_end else f"stopped: {share} after {n} records"

    def _execute(self, todo: list[Any], failed: dict[str, dict[str, Any]], listener: Any = None):
        """Yield rows as records finish (``listener`` hears each LM call, or on Ray the workers' running totals when
        the progress display is on); stop when the consumer stops."""
        if self.ray is not None:
            cap = self.cost_cap
            worker = Runner(self.program, {}, inputs=self.inputs, scorer=self.scorer, outputs=self.outputs,
                            lm=self.lm, adapter=self.adapter, labels=self.labels, meter_scoring=cap is not None)
            for row in execute_on_ray(worker.run_record, worker.error_row, todo if cap is None or not cap.reached()
                                      else [], failed, record_id, self.ray, self.threads,
                                      listener=listener if self.progress else None):
                if cap is not None:
                    cap.settle_row(row)  # before the row is written: it takes out the judge's spend
                yield row
                if cap is not None and cap.reached():
                    return  # the records still in flight are cancelled; a resume runs them
            return
        parent = current_overrides()
        capped = self.cost_cap.reached if self.cost_cap is not None else lambda: False
        if self.threads == 1:
            for record in todo:
                row = None if capped() else self.run_record(record, parent, failed, listener)
                if row is None:
                    return
                yield row
            return
        pending: set[Future] = set()
        queue = list(reversed(todo))
        pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="groundstate-run")
        try:
            while queue or pending:
                while queue and len(pending) < self.threads * 2 and not capped():
                    pending.add(pool.submit(self.run_record, queue.pop(), parent, failed, listener))
                if not pending:
                    return
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    if (row := future.result()) is not None:  # None: the cap was reached before it started
                        yield row
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def error_row(self, record: Any, error: str, failed: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The row of a record that never produced one (its Ray worker died): ``error``, every metric not measured."""
        rid = record_id(record)
        return {"id": rid, "outputs": {}, "trace": None, "scores": {}, "score_errors": unmeasured(self.scorer, record),
                "input_tokens": 0, "output_tokens": 0, "lm_calls": 0, "failed_calls": 0, "cached_calls": 0,
                "latency_s": 0.0, "error": scrub_secrets(error),
                "attempt": int(failed.get(rid, {}).get("attempt", 0)) + 1, **self.record_labels(record)}

    def run_record(self, record: Any, parent_overrides: dict, failed: dict[str, dict[str, Any]],
                   listener: Any = None) -> dict[str, Any]:
        """One record's row (this thread, ``parent_overrides`` as DSPy settings; ``listener``: Meter's), or ``None``
        when the cost cap was reached before it started (it does not start).

        ``failed`` holds the previous rows of the records being retried. A record whose previous program
        succeeded but whose scoring failed is re-scored from its stored outputs when the scorer reads only those
        (:func:`~groundstate.eval.scoring.rescorable`): its program does not run again.
        """
        if self.cost_cap is None:
            return self._record_row(record, parent_overrides, failed, listener, None)
        meter, scoring = new_meter(), new_meter()  # the program's calls; the judge's (counted against the cap)
        if not self.cost_cap.admit(meter, scoring):
            return None
        try:
            return self._record_row(record, parent_overrides, failed, listener, (meter, scoring))
        finally:
            self.cost_cap.settle(meter, scoring)

    def _record_row(self, record: Any, parent_overrides: dict, failed: dict[str, dict[str, Any]], listener: Any,
                    meters: tuple[Any, Any] | None) -> dict[str, Any]:
        rid = record_id(record)
        meter, scoring = meters or (new_meter(), new_meter() if self.meter_scoring else None)
        spend = (lambda: scoring_fields(scoring)) if meters is None and self.meter_scoring else dict
        if rescorable(self.scorer, failed.get(rid)):
            with meter_context(scoring) if scoring is not None else contextlib.nullcontext():
                return {**rescored_row(self.scorer, record, failed[rid]), **self.record_labels(record), **spend()}
        meter.listener = listener
        values = meter_overrides(meter, parent_overrides)
        if self.lm is not None:
            values["lm"] = self.lm
        if self.adapter is not None:
            values["adapter"] = self.adapter
        started = time.perf_counter()
        prediction, error = None, None
        with overrides(values), metered_lm_calls(), failed_call_eviction():
            try:
                kwargs = self._inputs(record)
                prediction = self.program(**kwargs)
            except Exception as exc:  # an LM or program failure is recorded on this record; the run goes on
                error = scrub_secrets(f"{type(exc).__name__}: {exc}".strip())
                logger.debug("record %s failed: %s", rid, scrub_secrets(traceback.format_exc()))
        latency = time.perf_counter() - started
        if error is None:
            with meter_context(scoring) if scoring is not None else contextlib.nullcontext():
                scores, score_errors = score_prediction(self.scorer, record, prediction)
        else:
            scores, score_errors = {}, unmeasured(self.scorer, record)
        inp, out = meter.tokens()
        outputs, trace = ({}, None)
        if prediction is not None and error is None:  # a server can echo a key inside a reply that parsed
            outputs, trace = redact_known_secrets(self._outputs(prediction))
        return {
            "id": rid, "outputs": outputs, "trace": trace,
            "scores": jsonable(scores), "score_errors": score_errors,
            "input_tokens": inp, "reused_input_tokens": meter.reused_tokens(),
            "output_tokens": out, "cost_usd": meter.cost_usd(),
            "lm_calls": meter.calls,
            "failed_calls": meter.failed,
            "cached_calls": meter.cached(),
            "latency_s": round(latency, 6),
            "error": error,
            "attempt": int(failed.get(rid, {}).get("attempt", 0)) + 1,
            **self.record_labels(record), **spend(),
        }

    def record_labels(self, record: Any) -> dict[str, Any]:
        """What ``labels`` says about ``record``, JSON-able and limited to :data:`LABEL_KEYS`; ``{}`` without a
        ``labels`` function. A label that cannot be computed is left out (logged), never a failed record."""
        if self.labels is None:
            return {}
        try:
            given = self.labels(record)
        except Exception as exc:  # a label is for analysis only: the record's result stands without it
            logger.debug("record %s: no labels (%s)", record_id(record), scrub_secrets(str(exc)))
            return {}
        return jsonable({k: given[k] for k in LABEL_KEYS if k in given})

    def _inputs(self, record: Any) -> dict[str, Any]:
        return program_inputs(record, self.inputs)

    def _outputs(self, prediction: Any) -> tuple[dict[str, Any], Any]:
        trace = prediction.get("trace") if hasattr(prediction, "get") else None
        if self.outputs is not None:
            return jsonable(self.outputs(prediction)), jsonable(trace)
        data = prediction.toDict() if hasattr(prediction, "toDict") else dict(prediction)
        data.pop("trace", None)
        return jsonable(data), jsonable(trace)

    def _progress(self, description: str, total: int, done: int, tokens: int = 0):
        return RunProgress(description, total, done, enabled=self.progress, tokens=tokens)
