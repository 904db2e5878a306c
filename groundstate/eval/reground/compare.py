"""``groundstate compare``: several OffQuery programs on the same instances and LM, one durable run each.

Each program's run is stored like any other run, so comparing again reuses the finished runs and costs
nothing; :func:`compare_programs` returns every program's summary for the report
(:mod:`groundstate.eval.report`).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from groundstate.errors import ConfigError

logger = logging.getLogger(__name__)


def compare_programs(names: Sequence[str], args: argparse.Namespace, *, lm: Any, lm_config: Any, settings: Any,
                     on_start: Any = None) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Run (or reuse the stored run of) every program in ``names`` with the same options.

    Args:
        names: registered OffQuery task names (``reground``, ``standard``, ``oracle``, ...).
        args: the parsed options every task reads.
        lm, lm_config, settings: as for :func:`groundstate.eval.tasks.run_task`.
        on_start: called with each name before its run (the CLI prints a heading).

    Returns:
        ``(summaries, notes, run_ids)`` by program name; a run that failed (stopped by ``--max-error-rate``, or
        ended with too many failed records) contributes what it finished, its summary's ``stopped_reason`` says
        why, and its note is "stopped early" or "too many failures".

    Raises:
        ConfigError: an unknown program name.
    """
    from groundstate.eval.runner import RunAborted
    from groundstate.eval.tasks import load_builtin_tasks, run_task

    tasks = load_builtin_tasks()
    unknown = [p for p in names if p not in tasks or p == "qa"]
    if unknown:
        raise ConfigError(f"unknown program '{unknown[0]}' for compare")
    summaries, notes, run_ids = {}, {}, {}
    for name in dict.fromkeys(names):
        if on_start is not None:
            on_start(name)
        try:
            result = run_task(name, args, lm=lm, lm_config=lm_config, settings=settings)
        except RunAborted as exc:
            result = exc.result
            notes[name] = "stopped early" if str(exc).startswith("stopped") else "too many failures"
            logger.info("%s: %s", name, exc)  # the command names every failed run in its last line
        summaries[name] = result.summary
        run_ids[name] = result.run_id
        if name == "oracle":
            notes[name] = ("upper bound; T1/T2 from ground truth" if getattr(args, "oracle_attribution", None) == "gold"
                           else "upper bound; T2 from ground truth, T1 from a model")
    return summaries, notes, run_ids
