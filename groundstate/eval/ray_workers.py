"""What runs on Ray workers for ``--backend ray``: the record actor, the per-LM in-flight limit and its LM wrapper.

- :class:`RecordWorker` is a long-lived threaded actor (one per worker process, ``max_concurrency`` = the run's
  ``--threads``). It loads each job (the record function and how to build its LMs) once, the first time a record
  of that job arrives, and then runs records on its threads exactly as the threads backend does.
- LMs are built when the job is loaded. If that fails, the job gets an :class:`UnavailableLM` instead: runs that
  never call an LM (simulated agents) go on; the first record that does call it reports ``setup_error`` and the
  driver stops the run with one line.
- :class:`InflightLimit` is an async actor holding a semaphore, named after the key-free LM spec and the bound,
  so every worker of the cluster shares it; :func:`bound_lm` makes an LM acquire it around each call
  (``--max-inflight``). Cost: two small actor calls per LM call (about 1-2 ms on one machine; measured in
  ``bench/ray_scaling.py``), paid only when ``--max-inflight`` is given.
- :class:`CallTally` is the meter listener of the records a worker runs for one execution (``tally_key``): their
  LM calls, failed calls and tokens so far, which the driver reads with :meth:`RecordWorker.tally` (a method of
  its own concurrency group, :data:`PROGRESS_GROUP`, so it answers while every record thread is busy) to show
  live LM calls in the progress display.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle

from groundstate.compat import wrap_lm_forward
from groundstate.errors import LMSetupError, scrub_secrets
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import default_adapter

LIMIT_NAMESPACE = "groundstate"
"""Ray namespace of the in-flight limits, so runs of several drivers on one cluster share a bound."""
PROGRESS_GROUP = "progress"
"""The record actor's concurrency group of :meth:`RecordWorker.tally` and :meth:`RecordWorker.forget`."""


@dataclass
class WorkerJob:
    """What every record of one run shares: the record function and how to build the worker's LMs."""

    run_record: Callable[[Any, dict, dict, Any], dict[str, Any]]  # (record, overrides, failed, listener)
    lm_spec: dict[str, Any] | None
    worker_setup: Callable[[], dict[str, Any]] | None

    def overrides(self) -> dict[str, Any]:
        """DSPy overrides for this worker process (LM and adapter from the specs, or ``worker_setup``)."""
        if self.worker_setup is not None:
            return dict(self.worker_setup())
        if not self.lm_spec:
            return {}

        config = LMConfig(default=dict(self.lm_spec["default"]), roles=dict(self.lm_spec.get("roles") or {}))
        lm = config.lm_for(None)
        return {"lm": lm, "adapter": default_adapter(lm)}


def unavailable_lm(reason: str):
    """A ``dspy.BaseLM`` that raises :class:`LMSetupError` when called and remembers that it was."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    class UnavailableLM(dspy.BaseLM):
        def __init__(self):
            super().__init__(model="unavailable")
            self.reason, self.called = reason, False

        def forward(self, prompt=None, messages=None, **kwargs):
            self.called = True
            raise LMSetupError(f"the LM cannot be built on this worker: {reason}")

        async def aforward(self, prompt=None, messages=None, **kwargs):
            return self.forward(prompt, messages, **kwargs)

    return UnavailableLM()


def bound_lm(lm: Any, limit: Any) -> Any:
    """``lm`` with each call between ``limit.acquire`` and ``limit.release`` (an :class:`InflightLimit` handle)."""
    import ray  # noqa: PLC0415 (optional extra: ray)

    def bounding(forward):
        def bounded(*args, **kwargs):
            ray.get(limit.acquire.remote())
            try:
                return forward(*args, **kwargs)
            finally:
                limit.release.remote()

        return bounded

    return wrap_lm_forward(lm, bounding)  # DSPy calls a forward set on the instance (groundstate.compat, entry 8)


class InflightLimit:
    """An async Ray actor: a semaphore of ``n`` permits (and the most permits ever held at once)."""

    def __init__(self, n: int):
        self.semaphore, self.held, self.peak = asyncio.Semaphore(n), 0, 0

    async def acquire(self) -> None:
        await self.semaphore.acquire()
        self.held += 1
        self.peak = max(self.peak, self.held)

    async def release(self) -> None:
        self.held -= 1
        self.semaphore.release()

    async def max_held(self) -> int:
        return self.peak


def node_label() -> str:
    """``ip (node id prefix)`` of the node this code runs on."""
    import ray  # noqa: PLC0415 (optional extra: ray)

    return f"{ray.util.get_node_ip_address()} (node {ray.get_runtime_context().get_node_id()[:12]})"


class CallTally:
    """Running totals of LM calls, failed calls and tokens (a thread-safe :class:`~groundstate.metering.Meter`
    listener shared by the records of one execution on one worker)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = self.failed = self.tokens = 0

    def on_lm_call(self, failed: bool) -> None:
        with self.lock:
            self.calls += 1
            self.failed += bool(failed)

    def on_lm_usage(self, input_tokens: int, output_tokens: int) -> None:
        with self.lock:
            self.tokens += int(input_tokens) + int(output_tokens)

    def totals(self) -> tuple[int, int, int]:
        """``(calls, failed calls, tokens)`` so far."""
        with self.lock:
            return self.calls, self.failed, self.tokens


class RecordWorker:
    """A threaded Ray actor that runs records of any number of jobs (each loaded once). Create it with
    ``ray.remote(concurrency_groups={PROGRESS_GROUP: 1})`` so :meth:`tally` is answered beside busy records."""

    def __init__(self):
        self.jobs: dict[str, tuple[WorkerJob, dict[str, Any], Any]] = {}
        self.tallies: dict[str, CallTally] = {}
        self.lock = threading.Lock()
        self.node_name = node_label()

    def node(self) -> str:
        return self.node_name

    def load(self, job_id: str, job: list) -> tuple[WorkerJob, dict[str, Any], Any]:
        """``(job, overrides, unavailable LM or None)`` of ``job_id``; ``job`` is ``[bytes ref, limit or None]``."""
        with self.lock:
            if job_id not in self.jobs:
                import ray  # noqa: PLC0415 (optional extra: ray)

                loaded = cloudpickle.loads(ray.get(job[0]))
                unavailable = None
                try:
                    values = loaded.overrides()
                except Exception as exc:  # no LM here: fine until a record calls one
                    import dspy  # noqa: PLC0415 (heavy: dspy)

                    unavailable = unavailable_lm(scrub_secrets(f"{type(exc).__name__}: {exc}"))
                    values = {"lm": unavailable, "adapter": dspy.ChatAdapter()}
                if job[1] is not None and values.get("lm") is not None and unavailable is None:
                    values["lm"] = bound_lm(values["lm"], job[1])
                self.jobs[job_id] = (loaded, values, unavailable)
            return self.jobs[job_id]

    def tally_of(self, key: str) -> CallTally:
        with self.lock:
            return self.tallies.setdefault(key, CallTally())

    def tally(self, key: str) -> tuple[int, int, int]:
        """``(LM calls, failed calls, tokens)`` of the records of execution ``key`` on this worker so far (finished
        and running ones); zeros before its first record."""
        with self.lock:
            tally = self.tallies.get(key)
        return tally.totals() if tally is not None else (0, 0, 0)

    def forget(self, key: str) -> None:
        """Drop the totals of execution ``key`` (it ended)."""
        with self.lock:
            self.tallies.pop(key, None)

    def run(self, job_id: str, job: list, record_blob: bytes, tally_key: str | None = None) -> dict[str, Any]:
        """One record's row, or ``{"setup_error": ...}`` if it needed an LM this worker cannot build; with
        ``tally_key``, its LM calls are added to that execution's :class:`CallTally` as they finish."""
        loaded, values, unavailable = self.load(job_id, job)
        record, failed = cloudpickle.loads(record_blob)
        listener = self.tally_of(tally_key) if tally_key is not None else None
        row = loaded.run_record(record, values, failed, listener)
        if unavailable is not None and unavailable.called:
            return {"setup_error": f"{unavailable.reason} (on Ray node {self.node_name})"}
        return row
