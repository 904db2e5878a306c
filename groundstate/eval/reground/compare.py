"""``groundstate compare``: several OffQuery programs on the same instances and LM, one durable run each.

Each program's run is stored like any other run, so comparing again reuses the finished runs and costs
nothing; :func:`compare_programs` returns every program's summary for the report
(:mod:`groundstate.eval.report`), and :func:`compared_with` what the report states beside the numbers: the LM, its
decoding and the T2 judge, which are the same for every program of one comparison.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.assemble import run_task
from groundstate.eval.reground.settings import CompareSettings
from groundstate.eval.reground.tasks import OFFQUERY_TASKS, offquery_judge
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunAborted
from groundstate.eval.task import RunContext

logger = logging.getLogger(__name__)


def compare_programs(names: Sequence[str], settings: CompareSettings, run: RunSettings, context: RunContext, *,
                     on_start: Any = None) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Run (or reuse the stored run of) every program in ``names`` with the same settings, one T2 judge for all.

    Args:
        names: OffQuery task names (``reground``, ``standard``, ``oracle``, ...).
        settings: every program's options (each program's run reads its own fields).
        run, context: as for :func:`groundstate.eval.assemble.run_task`; the context's judge (built here from the
            settings when it has none) scores every program.
        on_start: called with each name before its run (the CLI prints a heading).

    Returns:
        ``(summaries, notes, run_ids)`` by program name; a run that failed (stopped by ``--max-error-rate``, or
        ended with too many failed records) contributes what it finished, its summary's ``stopped_reason`` says
        why, and its note is "stopped early" or "too many failures".

    Raises:
        ConfigError: an unknown program name.
    """
    unknown = [p for p in names if p not in OFFQUERY_TASKS]
    if unknown:
        raise ConfigError(f"unknown program '{unknown[0]}' for compare")
    if context.judge is None:
        context.judge = offquery_judge(settings, context)
    summaries, notes, run_ids = {}, {}, {}
    for name in dict.fromkeys(names):
        if on_start is not None:
            on_start(name)
        try:
            result = run_task(OFFQUERY_TASKS[name], settings, run, context=context)
        except RunAborted as exc:
            result = exc.result
            notes[name] = "stopped early" if str(exc).startswith("stopped") else "too many failures"
            logger.info("%s: %s", name, exc)  # the command names every failed run in its last line
        summaries[name] = result.summary
        run_ids[name] = result.run_id
        if name == "oracle":
            notes[name] = ("upper bound; T1/T2 from ground truth" if settings.oracle_attribution == "gold"
                           else "upper bound; T2 from ground truth, T1 from a model")
    return summaries, notes, run_ids


def compared_with(settings: CompareSettings, context: RunContext) -> dict[str, Any]:
    """The LM, decoding and T2 judge of a comparison, in words
    (:func:`~groundstate.eval.metric_spec.scoring_description`), from the context's LMs and judge (built when not
    yet: call it after :func:`compare_programs`)."""
    from groundstate.eval.metric_spec import scoring_description  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.tasks import judge_options, offquery_judge  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.specs import describe_lm  # noqa: PLC0415 (--help stays light)

    lm, lm_config = context.lm_pair()
    judge = context.judge if context.judge is not None else offquery_judge(settings, context)
    return scoring_description({"lm": describe_lm(lm), "lm_config": lm_config.describe() if lm_config.roles else None,
                                "options": judge_options(settings, judge)})
