"""Evaluating a program saved by ``groundstate optimize`` on held-out data: ``groundstate evaluate`` and
:func:`evaluate` (``groundstate.evaluate``), which return the same :class:`Evaluation`.

The saved program (after) and the same program without its optimized state (before) run on the same records,
durably (one run each, resumable), through the one assembly path (:mod:`groundstate.eval.assemble`). The manifest
(checked by :func:`~groundstate.eval.reground.optimize.read_optimized` before any LM is built) supplies the task,
its condition (unless one is given) and the program's options, which are validated into the task's settings
model, so a manifest that lacks one is one line naming the file and the field.

**The LM and the judge are the manifest's** unless told otherwise (:func:`evaluation_context`): the T2 judge is the
metric spec the program was optimized under (``lexical`` for manifests that predate it) unless ``judge_lm``
(``--judge-lm``) is given; the LM is the one it was optimized with (rebuilt from its recorded description, keys from
the environment) unless an LM is given (``--lm`` or ``--lm-config``; in Python, LM settings or an LM DSPy is
configured with). ``--api-base``, ``--temperature`` and ``--max-tokens`` without ``--lm`` change the manifest's LM.
An embedded manifest LM is the default LM anyway. A manifest is a file like any other, so only its model and decoding
are rebuilt: a program optimized on a server the manifest names (``api_base``) is evaluated there only when the
caller gives ``--api-base`` (no request, and no API key, goes to a server a file alone names), and one optimized with
per-role LMs only with the caller's ``--lm-config`` (or ``--lm``). Whenever the evaluation uses another LM or judge
than the manifest names, one note says what it uses instead of what (stderr for the command, ``Evaluation.notes``),
and ``evaluate.md``/``evaluate.json`` name the LM, its decoding and the judge.

**The paired difference.** Besides each side's score, the evaluation reports per metric the mean of ``after -
before`` over the records both runs measured (a record one run failed or did not score is left out and counted),
with a paired bootstrap 95% interval and a two-sided sign-flip p-value (:mod:`groundstate.eval.paired`; the seed,
:data:`DIFFERENCE_SEED`, is recorded with each difference). It is ``Evaluation.differences``, a line per metric
under the table, and the ``differences`` of ``evaluate.json`` and a table in ``evaluate.md``. When an interval rests
on fewer than :data:`~groundstate.eval.paired.MIN_RELIABLE_N` records (paired, or either run's own), one warning
says so (``Evaluation.warnings``).

Example::

    import groundstate as gs

    evaluation = gs.evaluate("opt/reground", "data/test.jsonl", lms=gs.LMSettings(lm="openai/gpt-4o-mini"))
    for row in evaluation.rows():
        print(row["name"], row["t3"])
    t3 = evaluation.differences["t3"]
    print(t3.mean, t3.low, t3.high, t3.p_value, t3.n)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.eval.assemble import assemble, execute
from groundstate.eval.paired import (
    PairedDifference,
    format_difference,
    format_estimate,
    paired_differences,
    small_sample_warning,
)
from groundstate.eval.reground.settings import EvaluationData
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.report import METRICS, comparison_rows, pipe_lines
from groundstate.eval.report import label as metric_label
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.runner import RunAborted, program_state_hash
from groundstate.eval.settings import LMSettings
from groundstate.eval.task import LoadedData, RunContext

LABELS = ("before (unoptimized)", "after (optimized)")

DIFFERENCE_SEED = 0
"""The seed of the paired differences' bootstrap and sign flips (recorded in each :class:`PairedDifference`)."""


@dataclass
class Evaluation:
    """What ``groundstate evaluate`` prints and writes.

    Attributes:
        summaries: each label's (``before (unoptimized)``, ``after (optimized)``) run summary; a run that failed
            contributes what it finished and its ``stopped_reason``.
        data: the records' description (file and hash, or generator settings).
        title: the report's title.
        warnings: what the user should know (a program the optimizer left unchanged).
        run_ids: each label's run id.
        scoring: the LM, its decoding and the T2 judge, in words
            (:func:`~groundstate.eval.metric_spec.scoring_description`).
        notes: where the evaluation departs from the manifest (the note it printed), else empty.
        differences: per metric (``t1``, ``t2``, ``t3``, those the runs score), the paired difference ``after -
            before`` over the records both runs measured (:func:`~groundstate.eval.paired.paired_difference`).
    """

    summaries: dict[str, dict[str, Any]]
    data: dict[str, Any]
    title: str
    warnings: list[str] = field(default_factory=list)
    run_ids: dict[str, str] = field(default_factory=dict)
    scoring: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    differences: dict[str, PairedDifference] = field(default_factory=dict)

    def report_lines(self) -> list[str]:
        """The lines a report states above the table: LM, decoding, judge, then the notes."""
        from groundstate.eval.metric_spec import header_lines  # noqa: PLC0415 (--help stays light)

        return [*header_lines(self.scoring), *self.notes] if self.scoring else list(self.notes)

    def rows(self) -> list[dict[str, Any]]:
        """The comparison rows the command prints (:func:`~groundstate.eval.report.comparison_rows`)."""
        return comparison_rows(self.summaries)

    def difference_heading(self) -> str:
        """What the paired differences are, in words (their confidence level, resampling, seed and test)."""
        some = next(iter(self.differences.values()), None)
        level, seed = (some.confidence, some.seed) if some else (0.95, DIFFERENCE_SEED)
        return (f"after - before, paired over the records both runs measured ({level:.0%} bootstrap interval "
                f"resampling records, seed {seed}; two-sided sign-flip p)")

    def difference_lines(self) -> list[str]:
        """The paired differences as the command prints them: the heading, then ``T3: +0.100 [-0.050, +0.250],
        sign-flip p = 0.310 (exact); n paired = 20 (2 not measured on one side)`` per metric (``not measured (N
        failed)`` for a metric no record was measured on by both runs). Empty without differences."""
        if not self.differences:
            return []
        return [self.difference_heading() + ":",
                *(f"  {metric_label(m)}: {format_difference(d)}" for m, d in self.differences.items())]

    def difference_markdown(self) -> str:
        """The paired differences as a Markdown section (the heading and a table), ``""`` without differences."""
        if not self.differences:
            return ""
        header = ["metric", "after - before", "sign-flip p", "n paired", "not measured on one side", "on neither",
                  "before (paired)", "after (paired)"]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        body = [[metric_label(m), format_estimate(d), "-" if d.p_value is None else f"{d.p_value:.4g} ({d.p_method})",
                 str(d.n), str(d.one_side), str(d.neither), fmt(d.before_mean), fmt(d.after_mean)]
                for m, d in self.differences.items()]
        heading = self.difference_heading()
        return "\n".join([f"#### {heading[0].upper()}{heading[1:]}", "", *pipe_lines(header, body)]) + "\n"


def evaluation_config(config: dict[str, Any], label: str) -> dict[str, Any]:
    """The run config of an evaluation run: the task's config, without ``lm_config`` and with the label in its
    options (how ``evaluate`` has always identified its runs, so their run ids stay what they were)."""
    return {**{k: v for k, v in config.items() if k != "lm_config"},
            "options": {**config.get("options", {}), "evaluate": label}}


_COMPARED = ("model", "temperature", "max_tokens", "top_p", "api_base")
_REBUILT = ("temperature", "max_tokens", "top_p", "api_version")
"""What :func:`evaluation_context` takes from a manifest's LM besides its model (an allow-list: never a path)."""


def _manifest_lm_entry(described: dict[str, Any] | None, lms: LMSettings) -> dict[str, Any] | None:
    """The LM config entry that rebuilds a manifest's default LM from its description, with the decoding and timeout
    the caller gave on top; ``None`` for the embedded LM (the default anyway) or a manifest that records none.

    Raises:
        ConfigError: the manifest's LM was served from an ``api_base`` and the caller gave none (a request, with
            the user's API key, never goes to a server only a file names).
    """
    from groundstate.errors import ConfigError, one_line  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.embedded import EMBEDDED_MODEL_NAME  # noqa: PLC0415 (--help stays light)

    model = (described or {}).get("model")
    if not isinstance(model, str) or not model or model == EMBEDDED_MODEL_NAME:
        return None
    if described.get("api_base") is not None and lms.api_base is None:
        raise ConfigError(one_line(f"the program was optimized with {model} at {described['api_base']}; evaluate "
                                   "sends no request (and no API key) to a server a manifest names: give --api-base "
                                   "URL to evaluate with it there, or --lm", None))
    entry = {"model": model, **{k: described[k] for k in _REBUILT if described.get(k) is not None}}
    entry.update({k: v for k, v in (("api_base", lms.api_base), ("temperature", lms.temperature),
                                    ("max_tokens", lms.max_tokens), ("timeout", lms.lm_timeout)) if v is not None})
    return entry


def _lm_given(context: RunContext) -> bool:
    """Whether the caller named an LM: ``--lm``/``--lm-config`` (``lms.lm``, ``lms.lm_config``), LMs built by the
    caller (a Python ``make_lms``) or, for a Python caller without LM settings, the LM DSPy is configured with."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    lms = context.lms
    if lms.lm is not None or lms.lm_config is not None:
        return True
    return context.make_lms is None and lms == LMSettings() and dspy.settings.lm is not None


def _lm_text(described: dict[str, Any]) -> str:
    """An LM description in words for a note: ``model [at api_base] (decoding)``."""
    from groundstate.eval.metric_spec import decoding_label, lm_label  # noqa: PLC0415 (--help stays light)

    where = f" at {described['api_base']}" if described.get("api_base") else ""
    return f"{lm_label(described)}{where} ({decoding_label(described)})"


def evaluation_context(checked: Any, data: EvaluationData, context: RunContext
                       ) -> tuple[RunContext, str, list[str]]:
    """``(context, judge, notes)`` an evaluation of a saved program runs with: the manifest's LM and judge unless the
    caller named others (see the module docstring). The LMs of the returned context are built (a missing key or
    an unknown model fails here, before any record is read). When the LM or the judge differs from the manifest's,
    ``notes`` holds one line saying what is used instead of what, and the context tells it (``context.tell``).

    Only the manifest's default model and decoding are rebuilt (:data:`_REBUILT`); its server only at the caller's
    ``--api-base``; per-role LMs only from the caller's ``--lm-config``.

    Raises:
        ConfigError: the manifest's LM cannot be rebuilt here (give an LM), was served from a server the caller
            did not name, or came with per-role LMs the caller did not give.
    """
    from groundstate.errors import ConfigError, GroundstateError, one_line  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.config import LMConfig  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.specs import describe_lm  # noqa: PLC0415 (--help stays light)

    tuned, tuned_roles = checked.lms.default, checked.lms.roles
    given = _lm_given(context)
    if tuned_roles and not given:
        raise ConfigError(one_line("the program was optimized with per-role LMs (" + ", ".join(
            f"{k} = {(v or {}).get('model')}" for k, v in tuned_roles.items()) + "): give them with --lm-config "
            "FILE to evaluate with them (or --lm)", None))
    entry = None if given else _manifest_lm_entry(tuned, context.lms)
    if entry is not None:
        config = LMConfig(default=entry)
        context = RunContext(lms=context.lms, make_lms=lambda: (config.lm_for(None), config), note=context.note,
                             judge=context.judge, scoped=True)
        try:
            context.lm_pair()
        except GroundstateError as exc:
            raise ConfigError(f"cannot rebuild the LM the program was optimized with ({exc}); give --lm") from None
    lm, lm_config = context.lm_pair()
    judge = data.judge_lm or checked.judge()
    differences = []
    used = describe_lm(lm)
    if tuned and any(used.get(k) != tuned.get(k) for k in _COMPARED):
        differences.append(f"LM {_lm_text(used)} instead of the manifest's {_lm_text(tuned)}")
    used_roles = {k: v.get("model") for k, v in (getattr(lm_config, "roles", None) or {}).items()}
    tuned_models = {k: (v or {}).get("model") for k, v in tuned_roles.items()}
    if used_roles != tuned_models:
        differences.append(f"per-role LMs {used_roles or 'none'} instead of the manifest's {tuned_models or 'none'}")
    if judge != checked.judge():
        differences.append(f"T2 judge '{judge}' instead of the manifest's '{checked.judge()}'")
    notes = [one_line("evaluating with " + " and ".join(differences), None)] if differences else []
    for note in notes:
        context.tell(f"note: {note}")
    return context, judge, notes


def evaluate_saved(directory: str | os.PathLike, data: EvaluationData, run: RunSettings | None = None,
                   context: RunContext | None = None, saved: tuple[dict[str, Any], Any] | None = None,
                   source: Any = None) -> Evaluation:
    """Run the program saved in ``directory`` (after) and its unoptimized version (before) on ``data``.

    Data that shares instance ids or source cases with the manifest's train/val data is refused unless
    ``data.allow_overlap``; a saved program whose state equals the unoptimized one is evaluated with a warning.
    ``saved`` is what :func:`~groundstate.eval.reground.optimize.read_optimized` returned (read here when not
    given); ``source`` gives the records in memory instead of ``data.data``.

    Raises:
        InputError: a manifest field of the wrong type or missing.
        ConfigError: the directory is not a program saved by ``groundstate optimize``, or the data overlaps the
            data it was optimized on (without ``allow_overlap``).
    """
    from groundstate.eval.metric_spec import scoring_description  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.optimize import check_no_overlap, read_optimized  # noqa: PLC0415 (heavy: dspy)
    from groundstate.optimizers.artifacts import MANIFEST, build_saved, load_program  # noqa: PLC0415 (heavy: dspy)

    manifest, checked = saved if saved is not None else read_optimized(directory)
    context, judge, notes = evaluation_context(checked, data, context or RunContext())
    after = load_program(directory)
    before = build_saved(directory, manifest)
    task = OFFQUERY_TASKS[checked.task]
    condition = data.condition or checked.task_options.condition
    values = {**data.model_dump(exclude={"allow_overlap"}), "condition": condition, **checked.build_values(),
              "judge_lm": judge}
    settings = task.settings.parse({k: v for k, v in values.items() if k in task.settings.model_fields},
                                   file=Path(directory) / MANIFEST, loc=("build_args",))
    loaded = LoadedData(*task.load(settings, source))
    if not data.allow_overlap:
        check_no_overlap(loaded.records, checked)
    warnings = []
    if program_state_hash(before) == program_state_hash(after):
        warnings.append("the saved program's state equals the unoptimized program's (the optimizer changed "
                        "nothing): before and after will score the same")
    summaries, run_ids, config, rows = {}, {}, {}, {}
    for name, program in zip(LABELS, (before, after), strict=True):
        _, _, planned = assemble(task, settings, context, program=program, source=loaded)
        planned.config = evaluation_config(planned.config, name)
        planned.description = name
        try:
            result = execute(planned, run, context)
        except RunAborted as exc:
            result = exc.result
        summaries[name], run_ids[name], config, rows[name] = result.summary, result.run_id, result.config, result.rows
    differences = paired_differences(rows[LABELS[0]], rows[LABELS[1]], METRICS, seed=DIFFERENCE_SEED)
    small = small_sample_warning(differences, summaries, label=metric_label)
    warnings += [small] if small else []
    title = f"{task.name} on {loaded.description.get('file', 'synthetic')} (condition {condition})"
    return Evaluation(summaries, loaded.description, title, warnings, run_ids, scoring_description(config), notes,
                      differences)


def evaluate(saved_dir: str | os.PathLike, data: Any = "synthetic", *, run: RunSettings | None = None,
             lms: LMSettings | None = None, context: RunContext | None = None, **options: Any) -> Evaluation:
    """Evaluate a program saved by ``groundstate optimize``: the Python form of ``groundstate evaluate``.

    Args:
        saved_dir: the directory ``optimize`` wrote.
        data: an OffQuery file, ``"synthetic"``, an :class:`~groundstate.eval.reground.settings.EvaluationData`, or
            the records in memory (a list of dicts, a ``datasets.Dataset``, a pandas ``DataFrame``).
        run: the run settings (where the runs go, threads, limit, ...); default :class:`RunSettings`.
        lms: the LM options (default: the LM the program was optimized with); ignored when ``context`` is given.
        context: a :class:`~groundstate.eval.task.RunContext` to share LMs and the judge with other runs.
        **options: the other fields of :class:`~groundstate.eval.reground.settings.EvaluationData` (``condition``,
            ``judge_lm``, ``allow_overlap``, ``n``, ...).

    Returns:
        The :class:`Evaluation` the command prints (``rows()``: its table).
    """
    source = None
    if isinstance(data, EvaluationData):
        settings = data.model_copy(update=options) if options else data
    elif isinstance(data, str | os.PathLike):
        settings = EvaluationData.parse({"data": str(data), **options})
    else:
        source, settings = data, EvaluationData.parse({"data": "records", **options})
    context = context or RunContext(lms=lms or LMSettings())
    return evaluate_saved(saved_dir, settings, run, context, source=source)
