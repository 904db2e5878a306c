"""Running a durable run's records as Ray tasks (``--backend ray``); the driver stays the single writer.

:class:`~groundstate.eval.runner.Runner` hands this module two callables: ``run_record(record, overrides,
failed)`` (the row of one record, built on a worker exactly as the threads backend builds it, token and call
counts included) and ``error_row(record, error, failed)`` (the row of a record whose task never returned).
:func:`execute_on_ray` submits one task per record, at most ``max_inflight`` at a time, and yields rows as they
finish; the runner writes them, so every durability promise of the threads backend holds unchanged.

- **Nothing secret leaves the driver.** The job (program, scorer, LM *specs*) and every record are serialized
  with cloudpickle once, and the exact bytes that go to Ray are searched for the value of every environment
  variable named like a secret (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``); a match refuses the run with one
  line (:func:`check_payload`). Keys come only from each worker's own environment.
- **LMs are built on the workers** from the LM specs (:class:`~groundstate.lm.config.LMConfig` fields, keys
  stripped), once per worker process, and reach the program as DSPy overrides (never ``dspy.configure``).
- **A dead worker is a recorded error, not a lost line.** Tasks run with ``max_retries=0``; a task whose worker
  died becomes that record's error naming the record and the node it ran on (tasks report their node to a
  small actor when they start), and a resume retries it like any failed record.
- Ray is imported lazily; without it, or with an unreachable ``--ray-address``, :class:`ConfigError` says what
  is wrong and how to fix it (exit 2).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from groundstate.errors import ConfigError, LMSetupError, scrub_secrets

logger = logging.getLogger(__name__)

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
"""Environment variable names whose values must never be shipped to a worker."""
MIN_SECRET_LENGTH = 8
CONNECT_TIMEOUT_S = 5.0
DEFAULT_RAY_PORT = 6379


@dataclass(frozen=True)
class RayOptions:
    """How records run on Ray.

    Attributes:
        address: the cluster (``host:port``, ``auto``, ``ray://...``); ``None`` starts a local cluster or joins
            the one ``RAY_ADDRESS`` names.
        max_inflight: tasks submitted and not yet finished (default: the run's ``threads``).
        lm_spec: ``{"default": {...}, "roles": {...}}``, the LM settings each worker builds its LMs from.
        worker_setup: a picklable ``() -> dict`` of DSPy overrides (``lm``, ``adapter``), called once per worker
            process instead of ``lm_spec`` (scripted LMs in tests and benchmarks).
        num_cpus: CPUs one task reserves (1: the embedded model is CPU-bound; lower it for hosted LMs).
    """

    address: str | None = None
    max_inflight: int | None = None
    lm_spec: dict[str, Any] | None = None
    worker_setup: Callable[[], dict[str, Any]] | None = None
    num_cpus: float = 1.0


def require_ray():
    """The ``ray`` module, or :class:`ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray, which is not installed: pip install 'groundstate[ray]' "
                          "(or use --backend threads)") from None
    return ray


def connect(address: str | None):
    """Join the Ray cluster at ``address`` (or start/join a local one); returns the ``ray`` module."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    if address and address not in ("auto", "local") and not address.startswith("ray://"):
        check_reachable(address)
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError or ValueError depending on the failure
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"cannot start or join Ray at {address or 'a local cluster'}: {scrub_secrets(first)} "
                          "(start a head node with `ray start --head`, then pass --ray-address HOST:6379)") from None
    return ray


def check_reachable(address: str) -> None:
    """:class:`ConfigError` unless something listens at ``host:port`` (a fast check before Ray's long retries)."""
    host, _, port = address.rpartition(":") if ":" in address else (address, "", str(DEFAULT_RAY_PORT))
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--ray-address {address}: no Ray cluster reachable there ({exc.__class__.__name__}: "
                          f"{exc}); start one with `ray start --head` on that machine, or leave out --ray-address "
                          "to run on a local Ray cluster") from None


def secret_env() -> dict[str, str]:
    """``{name: value}`` of the environment variables whose names look like secrets."""
    return {k: v for k, v in os.environ.items() if SECRET_NAME.search(k) and v and len(v) >= MIN_SECRET_LENGTH}


def check_payload(payload: bytes, what: str) -> None:
    """Refuse (:class:`ConfigError`) to ship ``payload`` if it holds a secret environment variable's value."""
    for name, value in secret_env().items():
        if value.encode("utf-8") in payload:
            raise ConfigError(f"refusing to send {what} to Ray workers: it contains the value of ${name}; give "
                              "the run LM specs (--lm, --lm-config) and set keys in each worker's environment "
                              "instead of passing LM objects or keys in the program")


@dataclass
class WorkerJob:
    """What every task of one run shares: the record function and how to build the worker's LMs."""

    run_record: Callable[[Any, dict, dict], dict[str, Any]]
    lm_spec: dict[str, Any] | None
    worker_setup: Callable[[], dict[str, Any]] | None

    def overrides(self) -> dict[str, Any]:
        """DSPy overrides for this worker process (LM and adapter from the specs, or ``worker_setup``)."""
        if self.worker_setup is not None:
            return dict(self.worker_setup())
        if not self.lm_spec:
            return {}
        from groundstate.lm.config import LMConfig
        from groundstate.lm.specs import default_adapter

        config = LMConfig(default=dict(self.lm_spec["default"]), roles=dict(self.lm_spec.get("roles") or {}))
        lm = config.lm_for(None)
        return {"lm": lm, "adapter": default_adapter(lm)}


_JOBS: dict[str, tuple[WorkerJob, dict[str, Any]] | str] = {}
"""Per worker process: job id -> (job, overrides) or the setup error text (so the LM is built once)."""


def run_task(job_id: str, job_ref: list, rid: str, record_blob: bytes, tracker: Any) -> dict[str, Any]:
    """A Ray task: one record's row (or ``{"setup_error": ...}`` if this worker cannot build its LMs).

    ``job_ref`` is ``[ObjectRef]`` of the job's bytes: nested, so Ray fetches them only on a worker's first task.
    """
    import cloudpickle
    import ray

    if tracker is not None:  # waited for (about a millisecond): a worker that dies next must be findable
        ray.get(tracker.started.remote(rid, node_label(ray)))
    if job_id not in _JOBS:
        try:
            job = cloudpickle.loads(ray.get(job_ref[0]))
            _JOBS[job_id] = (job, job.overrides())
        except Exception as exc:  # reported once per run by the driver: the LM cannot be built here
            _JOBS[job_id] = scrub_secrets(f"{type(exc).__name__}: {exc}")
    entry = _JOBS[job_id]
    if isinstance(entry, str):
        return {"setup_error": f"{entry} (on Ray node {node_label(ray)})"}
    job, overrides = entry
    record, failed = cloudpickle.loads(record_blob)
    return job.run_record(record, overrides, failed)


_NODE: list[str] = []
"""This process's node label, computed once."""


def node_label(ray) -> str:
    """``ip (node id prefix)`` of the node this code runs on."""
    if not _NODE:
        _NODE.append(f"{ray.util.get_node_ip_address()} (node {ray.get_runtime_context().get_node_id()[:12]})")
    return _NODE[0]


class NodeTracker:
    """A tiny actor: where each record's task started, so a dead worker's record can name its node."""

    def __init__(self):
        self.where: dict[str, str] = {}

    def started(self, rid: str, node: str) -> None:
        self.where[rid] = node

    def node_of(self, rid: str) -> str:
        return self.where.get(rid, "an unknown node (the task died before it started)")


def execute_on_ray(run_record: Callable[[Any, dict, dict], dict[str, Any]],
                   error_row: Callable[[Any, str, dict], dict[str, Any]], todo: Sequence[Any],
                   failed: dict[str, dict[str, Any]], record_id: Callable[[Any], str], options: RayOptions,
                   threads: int) -> Iterator[dict[str, Any]]:
    """Yield the rows of ``todo`` as their Ray tasks finish (see the module docstring)."""
    limit = options.max_inflight or threads
    if limit < 1:
        raise ConfigError("--max-inflight must be at least 1")
    ray = connect(options.address)
    import cloudpickle

    job_blob = cloudpickle.dumps(WorkerJob(run_record, options.lm_spec, options.worker_setup))
    check_payload(job_blob, "the program")
    job_id = hashlib.sha256(job_blob).hexdigest()[:16]
    job_ref = ray.put(job_blob)
    task = ray.remote(max_retries=0, num_cpus=options.num_cpus)(run_task)
    tracker = ray.remote(num_cpus=0, max_restarts=0)(NodeTracker).remote()
    records = {record_id(r): r for r in todo}
    queue = list(reversed(list(records)))
    pending: dict[Any, str] = {}
    try:
        while queue or pending:
            while queue and len(pending) < limit:
                rid = queue.pop()
                blob = cloudpickle.dumps((records[rid], {rid: failed[rid]} if rid in failed else {}))
                check_payload(blob, f"record {rid}")
                pending[task.remote(job_id, [job_ref], rid, blob, tracker)] = rid
            finished, _ = ray.wait(list(pending), num_returns=1)
            for ref in finished:
                rid = pending.pop(ref)
                yield task_row(ray, ref, rid, records[rid], failed, tracker, error_row)
    finally:
        for ref in pending:
            ray.cancel(ref)
        ray.kill(tracker)


def task_row(ray, ref, rid: str, record: Any, failed: dict, tracker: Any,
             error_row: Callable[[Any, str, dict], dict[str, Any]]) -> dict[str, Any]:
    """The row of a finished task: its result, or an error row if its worker died or it raised."""
    from ray.exceptions import RayError, RayTaskError

    try:
        row = ray.get(ref)
    except RayTaskError as exc:  # the task raised outside the runner's own error handling (e.g. unpickling)
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        return error_row(record, scrub_secrets(f"Ray task failed: {type(cause).__name__}: {cause}"), failed)
    except RayError as exc:  # the worker process died (killed, crashed, out of memory) or the node was lost
        try:
            node = ray.get(tracker.node_of.remote(rid), timeout=CONNECT_TIMEOUT_S)
        except Exception:  # the tracker is gone too: say so rather than fail the run
            node = "an unknown node"
        message = f"record {rid}: its Ray worker died on {node} ({type(exc).__name__}); resume to retry it"
        logger.warning(message)
        return error_row(record, message, failed)
    if "setup_error" in row:
        raise LMSetupError(f"a Ray worker cannot build the LM: {row['setup_error']}; check the LM spec and that "
                           "the model (or its server and key) is available on every worker")
    return row
