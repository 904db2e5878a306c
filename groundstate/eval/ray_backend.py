"""Running a durable run's records on Ray worker actors (``--backend ray``); the driver stays the single writer.

:class:`~groundstate.eval.runner.Runner` hands this module two callables: ``run_record(record, overrides,
failed, listener)`` (the row of one record, built on a worker exactly as the threads backend builds it, token and call
counts included) and ``error_row(record, error, failed)`` (the row of a record whose worker died).
:func:`execute_on_ray` sends records to long-lived threaded actors (:mod:`groundstate.eval.ray_workers`: one per
worker process, ``--ray-workers``, each running ``--threads`` records at once), keeps ``workers x threads``
records running plus as many queued at the actors (so no worker thread waits for a round trip to the driver,
like the threads backend's ``2 x threads`` submitted futures) and yields rows as they finish; the runner writes
them, so every durability promise of the threads backend holds unchanged.

- **Nothing secret leaves the driver.** The job (program, scorer, LM *specs*) and every record are serialized
  with cloudpickle once, and the exact bytes that go to Ray are searched for the value of every environment
  variable named like a secret (``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``); a match refuses the run with one
  line (:func:`check_payload`). Keys come only from each worker's own environment.
- **LMs are built on the workers** from the LM specs (:class:`~groundstate.lm.config.LMConfig` fields, keys
  stripped), once per actor and job, and reach the program as DSPy overrides (never ``dspy.configure``). An LM
  that cannot be built stops the run only when a record calls it (simulated agents need none).
- **A dead worker is a recorded error, not a lost line.** Actors run with no restarts or retries; every record
  running or queued on an actor that died becomes that record's error naming the record and the actor's node, a new
  actor takes the slot for the remaining records, and a resume retries the failed ones like any failed record.
- **``--max-inflight N``** bounds concurrent requests per LM across the cluster with one named semaphore actor
  per (key-free LM spec, N) (:func:`inflight_limit`); its cost is two small actor calls per LM call.
- **Live LM calls.** Given a ``listener`` (the progress display), each worker tallies the LM calls, failed calls
  and tokens of this execution's records as they happen (:class:`~groundstate.eval.ray_workers.CallTally`), and
  the driver sums the workers' tallies about once a second (:data:`POLL_SECONDS`) and once at the end into
  ``listener.on_worker_totals(calls, failed, tokens)``: a progress line shows the calls of records still running,
  not 0 until they return. A poll is one small actor call per worker in the actors' own concurrency group, so it
  never waits behind records; a worker that does not answer within :data:`POLL_TIMEOUT_S` keeps its last totals.
- The actors are kept for the driver's later runs on the same cluster (``compare`` runs several programs).
- Ray is imported lazily; without it, or with an unreachable ``--ray-address``, :class:`ConfigError` says what
  is wrong and how to fix it (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle

from groundstate.errors import ConfigError, LMSetupError, scrub_secrets
from groundstate.eval.ray_workers import LIMIT_NAMESPACE, PROGRESS_GROUP, InflightLimit, RecordWorker, WorkerJob

logger = logging.getLogger(__name__)

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
"""Environment variable names whose values must never be shipped to a worker."""
MIN_SECRET_LENGTH = 8
CONNECT_TIMEOUT_S = 5.0
DEFAULT_RAY_PORT = 6379
POLL_SECONDS = 1.0
"""How often the driver reads the workers' LM-call tallies while records run (only with a progress listener)."""
POLL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class RayOptions:
    """How records run on Ray.

    Attributes:
        address: the cluster (``host:port``, ``auto``, ``ray://...``); ``None`` starts a local cluster or joins
            the one ``RAY_ADDRESS`` names.
        workers: record actors (one worker process each; default: the cluster's CPUs), each running ``threads``
            records at once, so ``workers x threads`` records are in flight.
        max_inflight: concurrent requests per LM across the cluster (``None``: unbounded); a named semaphore actor.
        lm_spec: ``{"default": {...}, "roles": {...}}``, the LM settings each worker builds its LMs from.
        worker_setup: a picklable ``() -> dict`` of DSPy overrides (``lm``, ``adapter``), called once per worker
            process instead of ``lm_spec`` (scripted LMs in tests and benchmarks).
        num_cpus: CPUs one worker actor reserves (0: LM work is I/O-bound; raise it for an embedded model).
    """

    address: str | None = None
    workers: int | None = None
    max_inflight: int | None = None
    lm_spec: dict[str, Any] | None = None
    worker_setup: Callable[[], dict[str, Any]] | None = None
    num_cpus: float = 0.0


def require_ray():
    """The ``ray`` module, or :class:`ConfigError` saying how to install it."""
    try:
        import ray  # noqa: PLC0415 (optional extra: ray)
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


def check_payload(payload: bytes, what: str, secrets: dict[str, str] | None = None) -> None:
    """Refuse (:class:`ConfigError`) to ship ``payload`` if it holds a secret environment variable's value
    (``secrets``: :func:`secret_env`, read once per run by the caller)."""
    for name, value in (secret_env() if secrets is None else secrets).items():
        if value.encode("utf-8") in payload:
            raise ConfigError(f"refusing to send {what} to Ray workers: it contains the value of ${name}; give "
                              "the run LM specs (--lm, --lm-config) and set keys in each worker's environment "
                              "instead of passing LM objects or keys in the program")


@dataclass
class WorkerPool:
    """The record actors of one driver, kept across the driver's runs (a job loads once per actor)."""

    actors: list
    nodes: list
    threads: int
    num_cpus: float

    def start(self, ray, slot: int) -> None:
        """(Re)start the actor of ``slot``; its node is asked for now and read when needed."""
        actor = ray.remote(concurrency_groups={PROGRESS_GROUP: 1})(RecordWorker).options(
            max_concurrency=self.threads, num_cpus=self.num_cpus, max_restarts=0, max_task_retries=0,
            scheduling_strategy="SPREAD").remote()
        if slot < len(self.actors):
            self.actors[slot], self.nodes[slot] = actor, actor.node.remote()
        else:
            self.actors.append(actor)
            self.nodes.append(actor.node.remote())

    def node_of(self, ray, slot: int) -> str:
        try:
            return ray.get(self.nodes[slot], timeout=CONNECT_TIMEOUT_S)
        except Exception:  # the actor died before it could say where it runs
            return "an unknown node (the worker died while starting)"


_POOLS: dict[tuple, WorkerPool] = {}
"""This driver's worker pools, by (cluster, workers, threads, CPUs per worker)."""


def worker_pool(ray, workers: int, threads: int, num_cpus: float) -> WorkerPool:
    """The pool of ``workers`` actors of ``threads`` threads each on the connected cluster (started once)."""
    context = ray.get_runtime_context()
    key = (context.get_node_id(), context.get_job_id(), workers, threads, num_cpus)
    if key not in _POOLS:
        pool = WorkerPool([], [], threads, num_cpus)
        for slot in range(workers):
            pool.start(ray, slot)
        _POOLS[key] = pool
    return _POOLS[key]


def inflight_limit(ray, name_key: str, n: int):
    """The cluster-wide :class:`InflightLimit` actor of one LM and bound (created by the first driver asking)."""
    if n < 1:
        raise ConfigError("--max-inflight must be at least 1")
    name = f"groundstate-inflight-{name_key}-{n}"
    return ray.remote(InflightLimit).options(name=name, namespace=LIMIT_NAMESPACE, get_if_exists=True,
                                             num_cpus=0, max_concurrency=10_000).remote(n)


class WorkerTotals:
    """The driver's view of the workers' tallies of one execution: each actor's last answer, summed (an actor
    that died or was replaced keeps the totals it last reported, so the sum never goes back)."""

    def __init__(self, key: str):
        self.key = key
        self.last: dict[int, tuple[Any, tuple[int, int, int]]] = {}  # id(actor) -> (actor, its totals)

    def poll(self, ray, actors: Sequence[Any]) -> tuple[int, int, int]:
        """Ask every actor for its tally (waiting at most :data:`POLL_TIMEOUT_S`); the sums over all actors."""
        asked = {}
        for actor in actors:
            try:
                asked[actor.tally.options(concurrency_group=PROGRESS_GROUP).remote(self.key)] = actor
            except Exception:  # a dead actor's handle: its last totals stand
                continue
        ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=POLL_TIMEOUT_S) if asked else ([], [])
        for ref in ready:
            try:
                self.last[id(asked[ref])] = (asked[ref], tuple(int(x) for x in ray.get(ref)))
            except Exception:  # the actor died meanwhile
                continue
        return tuple(sum(totals[i] for _, totals in self.last.values()) for i in range(3))

    def forget(self, actors: Sequence[Any]) -> None:
        """Tell the actors to drop this execution's tallies (best effort, not waited for)."""
        for actor in actors:
            try:
                actor.forget.options(concurrency_group=PROGRESS_GROUP).remote(self.key)
            except Exception:  # a dead actor has nothing to drop
                continue


def execute_on_ray(run_record: Callable[[Any, dict, dict, Any], dict[str, Any]],
                   error_row: Callable[[Any, str, dict], dict[str, Any]], todo: Sequence[Any],
                   failed: dict[str, dict[str, Any]], record_id: Callable[[Any], str], options: RayOptions,
                   threads: int, listener: Any = None) -> Iterator[dict[str, Any]]:
    """Yield the rows of ``todo`` as they finish on the worker actors (see the module docstring); ``listener``
    (an object with ``on_worker_totals(calls, failed, tokens)``) hears the workers' live LM-call totals."""
    ray = connect(options.address)

    job_blob = cloudpickle.dumps(WorkerJob(run_record, options.lm_spec, options.worker_setup))
    secrets = secret_env()
    check_payload(job_blob, "the program", secrets)
    job_id = hashlib.sha256(job_blob).hexdigest()[:16]
    limit = None
    if options.max_inflight is not None:
        setup = options.worker_setup
        spec = (json.dumps(options.lm_spec, sort_keys=True, default=str) if options.lm_spec
                else f"setup-{getattr(setup, '__module__', '')}.{getattr(setup, '__qualname__', job_id)}")
        limit = inflight_limit(ray, hashlib.sha256(spec.encode()).hexdigest()[:16], options.max_inflight)
    job = [ray.put(job_blob), limit]  # nested: each actor fetches the bytes once, on its first record
    workers = options.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    per_worker = 2 * max(1, threads)  # one record queued behind each running one: no thread waits a round trip
    pool = worker_pool(ray, workers, max(1, threads), options.num_cpus)
    records = {record_id(r): r for r in todo}
    queue = list(reversed(list(records)))
    pending: dict[Any, tuple[str, int, Any]] = {}
    load = [0] * workers
    totals = WorkerTotals(uuid.uuid4().hex) if listener is not None else None
    key = totals.key if totals is not None else None
    next_poll = time.monotonic() + POLL_SECONDS
    try:
        while queue or pending:
            for slot in range(workers):
                while queue and load[slot] < per_worker:
                    rid = queue.pop()
                    blob = cloudpickle.dumps((records[rid], {rid: failed[rid]} if rid in failed else {}))
                    check_payload(blob, f"record {rid}", secrets)
                    actor = pool.actors[slot]
                    pending[actor.run.remote(job_id, job, blob, key)] = (rid, slot, actor)
                    load[slot] += 1
            finished, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS if totals else None)
            last = not queue and len(finished) == len(pending)  # the last records are back: poll once more
            if totals is not None and (last or time.monotonic() >= next_poll):
                listener.on_worker_totals(*totals.poll(ray, pool.actors))
                next_poll = time.monotonic() + POLL_SECONDS
            for ref in finished:
                rid, slot, actor = pending.pop(ref)
                load[slot] -= 1
                yield task_row(ray, ref, rid, records[rid], failed, pool, slot, actor, error_row)
    finally:
        if totals is not None:
            totals.forget(pool.actors)
        for ref in pending:
            try:
                ray.cancel(ref)
            except Exception:  # best effort: a stopped run discards what is still in flight
                pass


def task_row(ray, ref, rid: str, record: Any, failed: dict, pool: WorkerPool, slot: int, actor: Any,
             error_row: Callable[[Any, str, dict], dict[str, Any]]) -> dict[str, Any]:
    """The row of a finished record: its result, or an error row if its worker died or the call raised."""
    from ray.exceptions import RayActorError, RayError, RayTaskError  # noqa: PLC0415 (optional extra: ray)

    try:
        row = ray.get(ref)
    except RayTaskError as exc:  # raised outside the runner's own error handling (e.g. unpickling)
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        return error_row(record, scrub_secrets(f"Ray task failed: {type(cause).__name__}: {cause}"), failed)
    except (RayActorError, RayError) as exc:  # the worker process died (killed, crashed, out of memory)
        node = pool.node_of(ray, slot)
        if pool.actors[slot] is actor:  # the first of its records to come back: start a replacement
            pool.start(ray, slot)
        message = f"record {rid}: its Ray worker died on {node} ({type(exc).__name__}); resume to retry it"
        logger.warning(message)
        return error_row(record, message, failed)
    if "setup_error" in row:
        raise LMSetupError(f"a Ray worker cannot build the LM: {row['setup_error']}; check the LM spec and that "
                           "the model (or its server and key) is available on every worker")
    return row
