"""What describes a durable run: how it is executed (:class:`RunSettings`, never part of its identity) and what
identifies it (:func:`run_config`, whose fingerprint names the run directory; :func:`program_state_hash`).

:mod:`groundstate.eval.runner` runs it (and re-exports these names).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.identity import canonical_json, fingerprint
from groundstate.eval.ray_backend import RayOptions

DEFAULT_MAX_ERROR_RATE = 0.5
"""The share of failed records above which a run fails (``--max-error-rate``'s default, and ``RunSettings``')."""


@dataclass
class RunSettings:
    """How a durable run is executed (none of it changes results, so none of it is in the fingerprint).

    Attributes:
        out: the directory of run directories.
        threads: records run concurrently.
        limit: run only the first ``limit`` records.
        shard: ``(i, n)``: run the deterministic shard ``i`` of ``n``.
        max_error_rate: the run fails (:class:`~groundstate.eval.runner.RunAborted`) once the share of failed
            records exceeds this (default :data:`DEFAULT_MAX_ERROR_RATE`; ``None``: only when every record failed).
        progress: show a progress bar.
        backend: ``"threads"`` (this process) or ``"ray"`` (:mod:`groundstate.eval.ray_backend`).
        ray_address: the Ray cluster (``None``: start or join a local one).
        ray_workers: Ray worker actors (default: the cluster's CPUs), each running ``threads`` records at once.
        max_inflight: with Ray, concurrent requests per LM across the cluster (``None``: unbounded).
        lm_spec: the LM settings Ray workers build their LMs from (``LMConfig.worker_spec()``: no keys).
        worker_setup: instead of ``lm_spec``, a picklable ``() -> dict`` of DSPy overrides run once per worker.
    """

    out: str | os.PathLike | None = "runs"
    threads: int = 4
    limit: int | None = None
    shard: tuple[int, int] | None = None
    max_error_rate: float | None = DEFAULT_MAX_ERROR_RATE
    progress: bool = False
    backend: str = "threads"
    ray_address: str | None = None
    ray_workers: int | None = None
    max_inflight: int | None = None
    lm_spec: dict[str, Any] | None = None
    worker_setup: Callable[[], dict[str, Any]] | None = None

    def ray_options(self) -> RayOptions | None:
        """The :class:`RayOptions` of a ``ray`` backend run (``None`` for threads)."""
        if self.backend == "threads":
            return None
        if self.backend != "ray":
            raise ConfigError(f"--backend must be 'threads' or 'ray', got '{self.backend}'")
        return RayOptions(address=self.ray_address, workers=self.ray_workers, max_inflight=self.max_inflight,
                          lm_spec=self.lm_spec,
                          worker_setup=self.worker_setup)


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
