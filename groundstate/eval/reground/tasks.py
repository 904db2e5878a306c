"""OffQuery programs as runnable tasks: ``groundstate run reground|standard|oracle|... --data FILE|synthetic``.

Every OffQuery task takes :class:`~groundstate.eval.reground.settings.OffQueryData` (a file, or ``synthetic``
with its generator settings; the ``condition``, which shared context the program sees; the T2 judge of its
:class:`~groundstate.eval.metric_spec.MetricSpec`: ``lexical`` by default, ``same-as-lm`` or a model) plus its
program's options. The run config records the judge where :mod:`groundstate.eval.metric_spec` says
(``options.judge``, and ``options.metric_spec`` for an LM judge). Scores per instance are T1, T2 (with its halves,
retention and exclusion) and T3 (:func:`groundstate.eval.reground.scores.offquery_scores`).

:data:`OFFQUERY_TASKS` holds the tasks (``reground`` and every baseline of
:data:`~groundstate.programs.reground.baselines.BASELINES`); the registry (:mod:`groundstate.eval.tasks`)
imports them from here.
"""

from __future__ import annotations

from typing import Any

from groundstate.eval.benchmarks.offquery.synthetic import VARIANTS, generate
from groundstate.eval.identity import file_hash
from groundstate.eval.reground.settings import BaselineSettings, OffQueryData, ReGroundSettings
from groundstate.eval.sources import as_source, describe, resolve_data
from groundstate.eval.task import ProgramTask, RunContext

OFFQUERY_OUTPUTS = ("misleading_agent", "state", "kept_facts", "removed_facts", "answer")


def load_offquery_data(settings: OffQueryData, source: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """The instances the settings name (``source``: records given in memory instead of ``settings.data``), and a
    description of them for the run fingerprint: the file's name and hash (and the T2 truth file's hash), the
    generator's settings for ``synthetic``, or the records' content hash for records in memory
    (:func:`~groundstate.eval.sources.describe`). The source is normalised once, here, and passed down.

    The instances are returned as ``settings.condition`` shows them
    (:meth:`~groundstate.records.OffQueryInstance.under`: under a reliable-private condition the misleading agents'
    evidence is made reliable and T1's gold answer is "no misleading agent"), so the program's inputs and the
    scores agree; the description is that of the data itself (the condition is in the run's options)."""
    instances, description = _load(settings, source)
    return [x.under(settings.condition) for x in instances], description


def _load(settings: OffQueryData, source: Any = None) -> tuple[list[Any], dict[str, Any]]:
    from groundstate.eval.benchmarks.offquery.loader import load_any  # noqa: PLC0415 (--help stays light)

    if source is None and settings.data == "synthetic":
        domains = ("healthcare", "disaster") if settings.domain == "both" else (settings.domain,)
        variants = VARIANTS if settings.variant == "all" else (settings.variant,)
        instances = [x for d in domains for v in variants
                     for x in generate(d, v, settings.n, seed=settings.synthetic_seed)]
        return instances, {"synthetic": {"domains": list(domains), "variants": list(variants), "n": settings.n,
                                         "seed": settings.synthetic_seed}}
    data = as_source(source if source is not None else resolve_data(settings.data), "OffQuery instances")
    instances = load_any(data, t2_truth=settings.t2_truth, condition=settings.condition,
                         allow_empty=settings.allow_empty, t2_facts=settings.t2_facts)
    description = describe(data, instances)
    if settings.t2_truth:
        description["t2_truth_sha256"] = file_hash(settings.t2_truth)
    return instances, description


def offquery_outputs(prediction: Any) -> dict[str, Any]:
    out = {key: prediction.get(key) if hasattr(prediction, "get") else getattr(prediction, key, None)
           for key in OFFQUERY_OUTPUTS}
    flagged = prediction.get("misleading_statements") if hasattr(prediction, "get") else None
    if flagged is not None:
        out["misleading_statements"] = flagged
    return out


def offquery_labels(record: Any) -> dict[str, Any]:
    """What a run stores beside an OffQuery record's result (never shown to the program): ``gold``, T1's and T3's
    gold answers as the run's condition shows the record (``misleading_agent``: the misleading agent's index, a list
    of indices when several are, ``None`` when none is, as programs answer it; ``answer``: the correct option),
    and the record's ``domain`` and ``variant`` (``None`` when unknown)."""
    misleading = list(record.misleading)
    agent = (misleading[0] if len(misleading) == 1 else misleading) if misleading else None
    return {"gold": {"misleading_agent": agent, "answer": record.answer}, "domain": record.domain,
            "variant": record.variant}


def offquery_judge(settings: OffQueryData, context: RunContext):
    """The T2 judge of ``settings.judge_lm`` (:meth:`~groundstate.eval.metric_spec.MetricSpec.judge_lm`): the
    :class:`~groundstate.eval.reground.judges.LexicalJudge`, or an
    :class:`~groundstate.eval.reground.judges.LMJudge` on the model under test (``same-as-lm``: the context's default
    LM) or on the named model. Its ``spec`` attribute is the metric spec it was built from."""
    from groundstate.eval.reground.judges import LexicalJudge, LMJudge  # noqa: PLC0415 (--help stays light)

    spec = settings.metric_spec()
    server = getattr(settings, "judge_api_base", None)
    if spec.is_lexical:
        spec.judge_lm(lm_config=context.lm_config if context.lms.lm_config else None, tell=context.tell,
                      api_base=server)
        judge = LexicalJudge()
    else:
        lm, lm_config = context.lm_pair()
        judge = LMJudge(spec.judge_lm(lm, lm_config, timeout=context.lms.lm_timeout, tell=context.tell,
                                      api_base=server))
    judge.spec = spec
    return judge


def judge_options(settings: OffQueryData, judge: Any) -> dict[str, Any]:
    """The run options that name the T2 judge: ``judge`` (its name, as every version wrote it) and, for an LM
    judge, ``metric_spec`` (:meth:`~groundstate.eval.metric_spec.MetricSpec.record`)."""
    spec = getattr(judge, "spec", None) or settings.metric_spec()
    return {"judge": getattr(judge, "name", settings.judge_lm), **spec.record(getattr(judge, "lm", None))}


def offquery_scorer(settings: OffQueryData, judge: Any):
    """T1/T2/T3 with ``judge`` scoring T2 (statement precision/recall too in ReGround's statement mode)."""
    from groundstate.eval.reground.scores import make_scorer  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.statements import statement_scorer  # noqa: PLC0415 (--help stays light)

    scorer = make_scorer(judge, halves=True)
    return statement_scorer(scorer, judge) if getattr(settings, "mode", "agent") == "statement" else scorer


def _condition_inputs(settings: OffQueryData):
    return lambda record: record.inputs(settings.condition)


def offquery_task(name: str, help_text: str, settings: type[OffQueryData], build, options, inputs=None
                  ) -> ProgramTask:
    """An OffQuery task: its data, judge, scorer and outputs as every OffQuery task has them."""
    return ProgramTask(
        name=name, help=help_text, settings=settings, build=build, load=load_offquery_data,
        scorer=offquery_scorer, inputs=inputs or _condition_inputs, outputs=offquery_outputs,
        options=lambda s, judge: {"condition": s.condition, **judge_options(s, judge), **options(s)},
        judge=offquery_judge, labels=offquery_labels)


# -- ReGround ----------------------------------------------------------------------------------------------


def _reground_inputs(settings: ReGroundSettings):
    if settings.oracle_t1:
        return lambda record: {**record.inputs(settings.condition), "misleading": list(record.misleading)}
    return lambda record: record.inputs(settings.condition)


REGROUND = offquery_task(
    "reground", "ReGround: verify evidence, reconstruct the shared state, resolve (OffQuery T1/T2/T3)",
    ReGroundSettings, lambda s: s.reground_program(), lambda s: s.reground_options(), inputs=_reground_inputs)


# -- Baselines ---------------------------------------------------------------------------------------------


def _baseline_builder(name: str):
    def build(settings: BaselineSettings):
        from groundstate.programs.reground.baselines import BASELINES  # noqa: PLC0415 (heavy: dspy)

        return BASELINES[name](**settings.baseline_arguments(name, settings.seed))

    return build


def _oracle_inputs(settings: BaselineSettings):
    return lambda record: {**record.inputs(settings.condition), "reliable_information": record.reliable_information(),
                           "misleading": list(record.misleading)}


BASELINE_HELP = {
    "oracle": "Oracle: decides from complete reliable information (upper bound; T2 from ground truth, T1 from a "
              "model reading all private evidence or, with --oracle-attribution gold, from ground truth)",
    "standard": "standard collaboration as the authors run it: opinions, 3 rounds, summarizer, updater, decision",
    "voting": "voting: independent states and decisions, majority",
    "robin": "robin: random sequential speaking order, each turn sees the earlier ones",
    "manager": "manager: a compact state carried forward and updated turn by turn",
    "instructor": "instructor: asks one agent a focused question per turn",
    "self-reflect": "self-reflect: agents choose reflection or debate",
    "confidence": "confidence: peer confidence (1-100) as an input signal",
}


def _baseline(name: str, help_text: str) -> ProgramTask:
    return offquery_task(name, help_text, BaselineSettings, _baseline_builder(name),
                         lambda s: s.baseline_options(name, s.seed),
                         inputs=_oracle_inputs if name == "oracle" else None)


#: Every OffQuery task by name: ``reground`` and the baselines.
OFFQUERY_TASKS: dict[str, ProgramTask] = {"reground": REGROUND,
                                          **{name: _baseline(name, text) for name, text in BASELINE_HELP.items()}}
