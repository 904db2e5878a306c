"""What describes a durable run: how it is executed (:class:`RunSettings`, never part of its identity) and what
identifies it (:func:`run_config`, whose fingerprint names the run directory; :func:`program_state_hash`).

:mod:`groundstate.eval.runner` runs it (and re-exports these names).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from groundstate.errors import ConfigError
from groundstate.eval.cost_cap import CostCap
from groundstate.eval.identity import canonical_json, fingerprint, parse_shard
from groundstate.eval.mlflow_log import require_mlflow
from groundstate.eval.ray_backend import RayOptions
from groundstate.eval.settings import Settings

DEFAULT_MAX_ERROR_RATE = 0.5
"""The share of failed records above which a run fails (``--max-error-rate``'s default, and ``RunSettings``')."""


class RunSettings(Settings):
    """How a durable run is executed: one model for every system's runs (none of it changes results, so none of it
    is in the run's fingerprint). The command line builds it from its run options; Python users build it directly;
    an experiment spec's table is validated into it (:meth:`~groundstate.eval.settings.Settings.parse`).

    Attributes:
        out: the directory of run directories (``--runs-dir``; ``None``: the task's own place, ``runs/``, or
            ``<cache>/runs`` for DHD steps).
        threads: records run concurrently (``--threads``).
        call_threads: LM calls run concurrently inside one record (``--call-threads``; DHD's hypothesizers and
            replay arms).
        limit: run only the first ``limit`` records.
        shard: ``(i, n)`` (or the text ``"i/n"``): run the deterministic shard ``i`` of ``n``.
        max_error_rate: the run fails (:class:`~groundstate.eval.runner.RunAborted`) once the share of failed
            records exceeds this (default :data:`DEFAULT_MAX_ERROR_RATE`; ``None``: only when every record failed).
        progress: show a progress bar.
        backend: ``"threads"`` (this process) or ``"ray"`` (:mod:`groundstate.eval.ray_backend`).
        ray_address: the Ray cluster (``None``: start or join a local one).
        ray_workers: Ray worker actors (default: the cluster's CPUs), each running ``threads`` records at once.
        max_inflight: with Ray, concurrent requests per LM across the cluster (``None``: unbounded).
        lm_spec: the LM settings Ray workers build their LMs from (``LMConfig.worker_spec()``: no keys). Set at run
            time, never stored (excluded from the model's JSON).
        worker_setup: instead of ``lm_spec``, a picklable ``() -> dict`` of DSPy overrides run once per worker
            (excluded from the model's JSON).
        max_cost: stop cleanly once the priced LM spend of the runs under these settings reaches this many dollars
            (``--max-cost``; :mod:`groundstate.eval.cost_cap`): no new record starts, the run stops with
            :class:`~groundstate.eval.runner.CostCapStopped`, and the same command resumes it. One cap is shared
            by every run of these settings and of their copies (``model_copy``), so a command's runs share it.
        mlflow: log one MLflow run per durable run, with its parameters and summary metrics (``--mlflow``;
            :mod:`groundstate.eval.mlflow_log`; needs the ``trace`` extra).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    out: Path | str | None = Field(None, description="directory of run directories (default runs/)")
    threads: int = Field(4, ge=1, description="records worked on at once (default 4)")
    call_threads: int = Field(8, ge=1, description="LM calls at once inside one record (default 8)")
    limit: int | None = Field(None, ge=0, description="run only the first N records")
    shard: tuple[int, int] | None = Field(None, description="run the deterministic shard i of N (0 <= i < N)")
    max_error_rate: float | None = Field(DEFAULT_MAX_ERROR_RATE, ge=0, le=1,
                                         description="fail once the share of failed records exceeds this (0-1)")
    progress: bool = Field(False, description="show a progress display")
    backend: Literal["threads", "ray"] = Field("threads", description="where records run: threads or ray")
    ray_address: str | None = Field(None, description="with backend ray: the cluster's head (HOST:6379 or auto)")
    ray_workers: int | None = Field(None, ge=1, description="with backend ray: worker processes")
    max_inflight: int | None = Field(None, ge=1, description="with backend ray: concurrent requests per LM")
    lm_spec: dict[str, Any] | None = Field(None, exclude=True, repr=False)
    worker_setup: Callable[[], dict[str, Any]] | None = Field(None, exclude=True, repr=False)
    max_cost: float | None = Field(None, gt=0, description="stop cleanly once the priced LM spend reaches USD "
                                   "dollars (resumable)")
    mlflow: bool = Field(False, description="log one MLflow run per durable run (parameters and summary metrics)")
    _cap: CostCap | None = PrivateAttr(None)

    def model_post_init(self, context: Any) -> None:
        """One :class:`~groundstate.eval.cost_cap.CostCap` for these settings, shared by their copies; ``mlflow``
        without MLflow installed is refused here, before any work (:class:`~groundstate.errors.ConfigError`)."""
        self._cap = CostCap(self.max_cost) if self.max_cost is not None else None
        if self.mlflow:
            require_mlflow()

    def cost_cap(self) -> CostCap | None:
        """The spend cap of ``max_cost`` (``None`` without one): the same object for these settings and their
        ``model_copy`` copies, so every run of one command counts against one cap."""
        if self.max_cost is None:
            return None
        if self._cap is None or self._cap.max_usd != self.max_cost:
            self._cap = CostCap(self.max_cost)  # max_cost changed on a copy: a cap of its own
        return self._cap

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: Any) -> Any:
        """``"i/N"`` as ``(i, N)``; either form checked (``0 <= i < N``), one line naming ``--shard`` otherwise."""
        if isinstance(value, str):
            return parse_shard(value)
        if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
            return parse_shard(f"{value[0]}/{value[1]}")
        return value

    def ray_options(self) -> RayOptions | None:
        """The :class:`RayOptions` of a ``ray`` backend run (``None`` for threads)."""
        if self.backend == "threads":
            return None
        if self.backend != "ray":  # pragma: no cover - the model allows only these two
            raise ConfigError(f"--backend must be 'threads' or 'ray', got '{self.backend}'")
        return RayOptions(address=self.ray_address, workers=self.ray_workers, max_inflight=self.max_inflight,
                          lm_spec=self.lm_spec, worker_setup=self.worker_setup)


def program_state_hash(program: Any) -> str:
    """A short hash of a program's class and DSPy state (instructions, demos): part of a run's identity."""
    try:
        state = program.dump_state()
    except Exception:  # a program that cannot dump its state is identified by its class only
        state = {}
    return fingerprint({"class": type(program).__qualname__, "state": json.loads(canonical_json(state))}, 16)


def run_config(program: str, *, state: Any = None, **fields: Any) -> dict[str, Any]:
    """What identifies a run (its fingerprint names the run directory); every command builds its config here.

    Args:
        program: the program's name (the run id's prefix): a safe file name (letters, digits and ``. _ - + = @``;
            :func:`groundstate.paths.safe_component`), or the run is refused with one line.
        state: the program object; its class and DSPy state are recorded as ``program_state``
            (:func:`program_state_hash`). ``None``: not recorded.
        **fields: the other fields, by convention ``lm`` (:func:`~groundstate.lm.specs.describe_lm` of the
            default LM, ``{"model": None}`` for LM-free runs), ``lm_config`` (the per-role LMs), ``data`` (the
            records' file name and hash, or generator settings), ``seed``, ``options`` (what changes results),
            and whatever else identifies a step (the DHD cache id and mode, ...).

    The fields present are exactly the ones given (in the order ``program``, ``program_state``, then as given),
    so a command's run ids stay what earlier versions computed.
    """
    config: dict[str, Any] = {"program": program}
    if state is not None:
        config["program_state"] = program_state_hash(state)
    config.update(fields)
    return config
