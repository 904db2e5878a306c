"""Diverse Hypothesis Deliberation end to end: generate messages once, replay them, mask components.

Every step is a durable run through the one assembly path (:func:`~groundstate.eval.task.execute`: resumable,
shardable, one results line per finished work item), stored under ``<cache>/runs/`` unless the run settings name
another place. Each step has a planning function (what the registered tasks of :mod:`groundstate.eval.dhd.steps`
call) and a Python function that plans and runs it:

- :func:`plan_generate` / :func:`generate`: one record per problem not yet in the cache: the recruiter, then ``K``
  hypothesizers concurrently, then each proposal is evaluated (the evaluator, judge or rules, sees the problem and
  the proposed answer, never the reasoning). Finished problems are stored in the
  :class:`~groundstate.eval.dhd.cache.MessageCache` with the settings they were made with and never regenerated;
  a cache holds messages of one setting (temperatures, evaluator) only.
- :func:`plan_replay` / :func:`replay`: one record per ``(problem, mode, K, block)`` (see
  :mod:`groundstate.eval.dhd.replay`). The run configuration holds the cache id, the mode, the LM, the
  temperatures, the evaluator and the seed setting (see :mod:`groundstate.eval.dhd.settings`), but not ``K`` or
  the number of blocks, so asking for more blocks later reuses the same run directory and runs only the new blocks.
- :func:`plan_mask` / :func:`mask`: component masking (Table 23) on a sample fixed from repeated LOO labels (see
  :mod:`groundstate.eval.dhd.masking`).

The finished blocks are read back by :mod:`groundstate.eval.dhd.blocks` (re-exported here); analysis and
cross-fitting are in :mod:`groundstate.eval.dhd.analysis`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.errors import ConfigError
from groundstate.eval.dhd.blocks import collect_pairs as collect_pairs
from groundstate.eval.dhd.blocks import load_blocks as load_blocks
from groundstate.eval.dhd.blocks import replay_run_dirs as replay_run_dirs
from groundstate.eval.dhd.blocks import replay_run_settings as replay_run_settings
from groundstate.eval.dhd.cache import MessageCache, PoolEntry
from groundstate.eval.dhd.mask_sample import (
    RepeatedLabels,
    default_labels_path,
    fix_sample,
    label_candidates,
    load_repeated_labels,
    resolve_quotas,
    sample_document,
)
from groundstate.eval.dhd.masking import MaskProgram, mask_records, mask_table, write_table
from groundstate.eval.dhd.replay import MODES, ReplayProgram, block_outputs, replay_records
from groundstate.eval.dhd.settings import cache_generation, check_generation, generation_settings, replay_settings
from groundstate.eval.run_settings import RunSettings, run_config
from groundstate.eval.runner import RunResult
from groundstate.eval.task import PlannedRun, execute
from groundstate.programs.dhd.deliberation import DEFAULT_K, DiverseHypothesisDeliberation, problem_inputs
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.records import Problem

logger = logging.getLogger(__name__)

#: DSPy warns that a rollout id "has no effect" at temperature 0; in DHD it does (it keeps repeats separate calls),
#: so the warning is silenced while a DHD step runs, and only then.
ROLLOUT_WARNING = "rollout_id has no effect when temperature=0"


def python_run(run: RunSettings | None) -> RunSettings:
    """The run settings of a DHD step called from Python: ``run``, or by default a run that fails only when every
    work item failed (``max_error_rate=None``, as these functions have always run)."""
    return run if run is not None else RunSettings(max_error_rate=None)


def step(cache: MessageCache, program: Any, name: str, fields: dict[str, Any], lm: dict[str, Any] | None,
         records: list[Any], **kwargs: Any) -> PlannedRun:
    """The planned run of a DHD step: its config (the step's fields, the cache id, the LM) as every step has it,
    stored under ``<cache>/runs`` by default."""
    config = run_config(name, **fields, cache=cache.cache_id, lm=lm)
    return PlannedRun(program, config, records, default_out=cache.runs_dir, ignore_warnings=(ROLLOUT_WARNING,),
                      **kwargs)


# -- generate ------------------------------------------------------------------------------------------------------
class GenerateProgram:
    """The runner program of ``dhd generate``: ``__call__(problem)`` -> roles, messages, proposal correctness."""

    def __init__(self, program: DiverseHypothesisDeliberation, evaluator: AnswerEvaluator, k: int = DEFAULT_K,
                 max_workers: int = 8):
        self.program, self.evaluator, self.k, self.max_workers = program, evaluator, k, max_workers

    def __call__(self, problem: Problem) -> dspy.Prediction:
        generated = self.program.generate(**problem_inputs(problem), k=self.k, problem_id=problem.id)

        def judge(message):
            if message.error is not None:
                return None
            return self.evaluator.evaluate(problem, message.proposed_answer)

        verdicts = thread_map(judge, generated.messages, self.max_workers)
        return dspy.Prediction(
            roles=generated.roles, padded_roles=generated.padded,
            messages=[m.model_dump(mode="json") for m in generated.messages],
            proposal_correct=[None if v is None else v.correct for v in verdicts],
            proposal_method=["hypothesizer-error" if v is None else v.method for v in verdicts])


def _generate_scores(problem: Any, prediction: Any) -> dict[str, float | None]:
    if prediction is None:
        return {}
    messages = prediction.messages
    usable = [m for m in messages if not m.get("error")]
    judged = [c for c in prediction.proposal_correct if c is not None]
    return {"usable_messages": len(usable) / len(messages) if messages else 0.0,
            "proposal_correct": sum(judged) / len(judged) if judged else None}


def plan_generate(cache: MessageCache, problems: Sequence[Problem], *,
                  program: DiverseHypothesisDeliberation | None = None, evaluator: AnswerEvaluator | None = None,
                  k: int = DEFAULT_K, call_threads: int = 8, lm: dict[str, Any] | None = None,
                  source: str | None = None) -> PlannedRun:
    """The run that generates and caches messages for the problems that have none yet (the cache is created, and
    the problems added to it, here). With nothing left to generate, the plan has no records and its ``outcome``
    holds the counts; otherwise the run's ``outcome`` does (see :func:`generate`)."""
    if k < 1:
        raise ConfigError("--k must be at least 1")
    cache.ensure(k)
    cache.add_problems(problems, source=source)
    have = cache.entries()
    todo = [p for p in problems if p.id not in have]
    counts = {"problems": len(problems), "cached_before": len(problems) - len(todo), "generated": 0, "failed": 0,
              "failed_messages": 0}
    if not todo:
        return PlannedRun(None, {}, None, outcome=counts)
    program = program or DiverseHypothesisDeliberation(k=k, max_workers=call_threads)
    evaluator = evaluator or AnswerEvaluator()
    settings = generation_settings(program, evaluator)
    check_generation(cache_generation(have, f"the cache {cache.dir}"), settings, bool(have), f"the cache {cache.dir}")

    def store(result: RunResult) -> dict[str, int]:
        entries = []
        for row in result.rows:
            if row.get("error"):
                counts["failed"] += 1
                continue
            out = row["outputs"]
            entry = PoolEntry(problem_id=row["id"], roles=out["roles"], padded_roles=out.get("padded_roles", 0),
                              messages=out["messages"], proposal_correct=out["proposal_correct"],
                              proposal_method=out["proposal_method"],
                              generator={"run_id": result.run_id, "lm": lm, "settings": settings})
            counts["failed_messages"] += sum(1 for m in entry.messages if m.error is not None)
            entries.append(entry)
        counts["generated"] = cache.put(entries)
        return counts

    return step(cache, GenerateProgram(program, evaluator, k, call_threads), "dhd-generate", {"k": k, **settings}, lm,
                todo, inputs=lambda p: {"problem": p}, scorer=_generate_scores, description="dhd generate",
                outputs=lambda pred: {k_: pred[k_] for k_ in ("roles", "padded_roles", "messages", "proposal_correct",
                                                              "proposal_method")}, after=store)


def generate(cache: MessageCache, problems: Sequence[Problem], *, program: DiverseHypothesisDeliberation | None = None,
             evaluator: AnswerEvaluator | None = None, k: int = DEFAULT_K, run: RunSettings | None = None,
             lm: dict[str, Any] | None = None, source: str | None = None) -> tuple[RunResult | None, dict[str, int]]:
    """Generate and cache messages for the problems that have none yet (``lm``: the LM's description for the run
    configuration; ``run``: see :func:`python_run`).

    Returns ``(run result or None when nothing was left to generate, counts)`` with counts ``problems`` (given),
    ``cached_before``, ``generated`` (stored by this call), ``failed`` (records whose recruiter or run failed:
    retried by the next call) and ``failed_messages`` (hypothesizers that failed, stored with ``error``).
    """
    run = python_run(run)
    planned = plan_generate(cache, problems, program=program, evaluator=evaluator, k=k, call_threads=run.call_threads,
                            lm=lm, source=source)
    result = execute(planned, run)
    return result, (result.outcome if result is not None else planned.outcome)


# -- replay ---------------------------------------------------------------------------------------------------------
def _replay_scores(work: Any, prediction: Any) -> dict[str, float | None]:
    if prediction is None:
        return {}
    base = next((a for a in prediction.arms if a["arm"] in ("full", "independent")), None)
    return {"base_correct": None if base is None else base["correct"],
            "failed_arms": float(sum(1 for a in prediction.arms if a["correct"] is None))}


def _block_outputs(pred: Any) -> dict[str, Any]:
    return {k: pred[k] for k in ("problem_id", "mode", "K", "block", "arms")}


def plan_replay(cache: MessageCache, mode: str, ks: Sequence[int], repeats: int, *,
                program: DiverseHypothesisDeliberation | None = None, evaluator: AnswerEvaluator | None = None,
                call_threads: int = 8, lm: dict[str, Any] | None = None, temperature: float | None = None,
                vary_seed: bool = False) -> PlannedRun:
    """The run that replays the cached messages (see :func:`replay`); its ``outcome`` is ``{K: problems left
    out}``."""
    if mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)} (got '{mode}')")
    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    if not ks or any(k < 1 for k in ks):
        raise ConfigError("--k needs pool sizes of at least 1")
    cache.require()
    problems = cache.problem_map()
    entries = cache.entries()
    if not entries:
        raise ConfigError(f"the cache {cache.dir} holds no messages yet; run `groundstate dhd generate` first")
    program = program or DiverseHypothesisDeliberation(temperature=temperature, vary_seed=vary_seed)
    evaluator = evaluator or AnswerEvaluator()
    settings = replay_settings(program, evaluator, cache_generation(entries, f"the cache {cache.dir}"))
    records, short = replay_records(entries, [p for p in problems if p in entries], mode, sorted(set(ks)), repeats)
    if not records:
        raise ConfigError(f"no problem in {cache.dir} has {min(ks)} usable messages")
    return step(cache, ReplayProgram(program, evaluator, problems, entries, call_threads), f"dhd-replay-{mode}",
                {"mode": mode, **settings, "vary_seed": vary_seed}, lm, records, inputs=lambda r: {"work": r},
                scorer=_replay_scores, outputs=_block_outputs, description=f"dhd replay {mode}",
                after=lambda result: short)


def replay(cache: MessageCache, mode: str, ks: Sequence[int], repeats: int, *,
           program: DiverseHypothesisDeliberation | None = None, evaluator: AnswerEvaluator | None = None,
           run: RunSettings | None = None, lm: dict[str, Any] | None = None, temperature: float | None = None,
           vary_seed: bool = False) -> tuple[RunResult, dict[int, int]]:
    """Replay the cached messages: ``repeats`` blocks per problem and pool size (nested pools of the first ``K``).

    ``temperature`` (the integrator's) and ``vary_seed`` build the default program (integrator temperature 0 when
    ``temperature`` is ``None``); a given ``program`` keeps its own. The run configuration records the program's
    and the evaluator's settings (:func:`~groundstate.eval.dhd.settings.replay_settings`).

    Returns ``(run result, {K: problems left out for having fewer than K usable messages})``.
    """
    run = python_run(run)
    result = execute(plan_replay(cache, mode, ks, repeats, program=program, evaluator=evaluator,
                                 call_threads=run.call_threads, lm=lm, temperature=temperature, vary_seed=vary_seed),
                     run)
    return result, result.outcome


# -- mask ------------------------------------------------------------------------------------------------------------
def plan_mask(cache: MessageCache, repeats: int = 5, *,
              per_category: int | Sequence[int] | Mapping[str, int] | None = None, sample_size: int | None = None,
              labels: RepeatedLabels | str | Path | None = None, seed: int = 0, one_per_problem: bool = True,
              k: int | None = None, program: DiverseHypothesisDeliberation | None = None,
              evaluator: AnswerEvaluator | None = None, call_threads: int = 8, lm: dict[str, Any] | None = None,
              temperature: float | None = None, vary_seed: bool = False) -> PlannedRun:
    """The masking run (see :func:`mask`): the sample is drawn here and fixed in the run directory just before the
    run starts (``sample.json``, reused on resume); the run's ``outcome`` is ``(table, sample document)``."""
    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    cache.require()
    if not isinstance(labels, RepeatedLabels):
        labels = load_repeated_labels(labels if labels is not None else default_labels_path(cache.dir), k=k,
                                      cache_dir=cache.dir)
    elif k is not None and k != labels.K:
        raise ConfigError(f"the labels are at K={labels.K}, not --k {k}")
    problems = cache.problem_map()
    entries = {pid: e for pid, e in cache.entries().items() if pid in problems}
    candidates, excluded = label_candidates(labels, entries)
    available = {c: sum(1 for x in candidates if x["category"] == c) for c in {x["category"] for x in candidates}}
    quotas = resolve_quotas(per_category, sample_size, available)
    drawn = sample_document(labels, candidates, excluded, quotas, seed, one_per_problem)
    if not drawn["pairs"]:
        raise ConfigError(f"{labels.path}: no labelled message with at least 2 evaluable LOO blocks in the requested "
                          f"categories (candidates: {available or 'none'})")
    program = program or DiverseHypothesisDeliberation(temperature=temperature, vary_seed=vary_seed)
    evaluator = evaluator or AnswerEvaluator()
    fields = {"k": labels.K, **replay_settings(program, evaluator, cache_generation(entries, f"the cache {cache.dir}")),
              "vary_seed": vary_seed, "sample": {"design": "eight outcomes per repetition", "seed": seed,
                                                 "per_category": quotas, "one_per_problem": one_per_problem}}
    fixed: dict[str, Any] = {}

    def fix(run_dir: Path) -> list[Any]:
        fixed["document"], fixed["run_dir"] = fix_sample(run_dir, drawn), run_dir
        return mask_records(fixed["document"]["pairs"], repeats)

    def tabulate(result: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
        if Path(result.run_dir) != fixed["run_dir"]:
            raise RuntimeError(f"the mask run went to {result.run_dir}, not {fixed['run_dir']} where its sample is "
                               "fixed")
        table = mask_table(block_outputs(result.rows), fixed["document"])
        table["failed_records"] = sum(1 for row in result.rows if row.get("error"))
        write_table(result.run_dir, table)
        return table, fixed["document"]

    return step(cache, MaskProgram(program, evaluator, problems, entries, call_threads, k=labels.K), "dhd-mask",
                fields, lm, [], inputs=lambda r: {"work": r}, scorer=_mask_scores, description="dhd mask",
                outputs=lambda p: {f: p[f] for f in ("problem_id", "message_id", "repeat", "category", "group", "K",
                                                     "arms")}, before=fix, after=tabulate)


def mask(cache: MessageCache, repeats: int = 5, *, per_category: int | Sequence[int] | Mapping[str, int] | None = None,
         sample_size: int | None = None, labels: RepeatedLabels | str | Path | None = None, seed: int = 0,
         one_per_problem: bool = True, k: int | None = None, program: DiverseHypothesisDeliberation | None = None,
         evaluator: AnswerEvaluator | None = None, run: RunSettings | None = None, lm: dict[str, Any] | None = None,
         temperature: float | None = None, vary_seed: bool = False
         ) -> tuple[RunResult, dict[str, Any], dict[str, Any]]:
    """Component masking (the paper's Table 23) on a sample fixed from repeated LOO labels, ``repeats`` times each.

    ``labels`` is the labels file of ``groundstate dhd analyze`` (default ``<cache>/analysis/labels.jsonl``) or
    its :class:`~groundstate.eval.dhd.mask_sample.RepeatedLabels`; ``per_category`` (default the paper's
    10/3/3/2/4) or ``sample_size`` (spread round-robin) sizes the stratified draw; ``k`` defaults to the labels'
    pool size. The sample is written to ``sample.json`` in the run directory before the first call and reused on
    resume (see :mod:`groundstate.eval.dhd.mask_sample`). ``temperature`` (the integrator's) and ``vary_seed``
    build the default program, as for :func:`replay`; the run configuration records the temperatures and the
    evaluator (:func:`~groundstate.eval.dhd.settings.replay_settings`). Returns ``(run result, table, sample
    document)``; the table (:mod:`groundstate.eval.dhd.masking`) is also written as ``mask_table.json`` and
    ``mask_table.md`` in the run directory.

    Raises:
        ConfigError: no labels from repeated LOO replay, or a resumed run whose labels now give another sample.
    """
    run = python_run(run)
    result = execute(plan_mask(cache, repeats, per_category=per_category, sample_size=sample_size, labels=labels,
                               seed=seed, one_per_problem=one_per_problem, k=k, program=program, evaluator=evaluator,
                               call_threads=run.call_threads, lm=lm, temperature=temperature, vary_seed=vary_seed),
                     run)
    table, document = result.outcome
    return result, table, document


def _mask_scores(work: Any, prediction: Any) -> dict[str, float | None]:
    if prediction is None:
        return {}
    scores: dict[str, list[int]] = {}
    for arm in prediction.arms:
        if arm["correct"] is not None:
            scores.setdefault(f"{arm['variant']}_correct", []).append(int(arm["correct"]))
    out: dict[str, float | None] = {name: sum(v) / len(v) for name, v in scores.items()}
    out["failed_arms"] = float(sum(1 for arm in prediction.arms if arm["correct"] is None))
    return out
