"""Diverse Hypothesis Deliberation end to end: generate messages once, replay them, mask components.

Every step is a durable run of :class:`~groundstate.eval.runner.Runner` (resumable, shardable, one results line per
finished work item), stored under ``<cache>/runs/`` unless another ``out`` is given:

- :func:`generate`: one record per problem not yet in the cache: the recruiter, then ``K`` hypothesizers
  concurrently, then each proposal is evaluated (the evaluator, judge or rules, sees the problem and the proposed
  answer, never the reasoning). Finished problems are stored in the
  :class:`~groundstate.eval.dhd.cache.MessageCache` with the settings they were made with and never regenerated;
  a cache holds messages of one setting (temperatures, evaluator) only.
- :func:`replay`: one record per ``(problem, mode, K, block)`` (see :mod:`groundstate.eval.dhd.replay`). The run
  configuration holds the cache id, the mode, the LM, the temperatures, the evaluator and the seed setting (see
  :mod:`groundstate.eval.dhd.settings`), but not ``K`` or the number of blocks, so asking for more blocks later
  reuses the same run directory and runs only the new blocks.
- :func:`mask`: component masking (Table 23) on a sample fixed from repeated LOO labels (see
  :mod:`groundstate.eval.dhd.masking`).

:func:`load_blocks` gathers the finished replay blocks of a cache (all replay runs of the same configuration,
shards and merged shards included, each block once) and :func:`collect_pairs` turns them into the pair rows of
the statistics modules of :mod:`groundstate.eval.dhd`. Analysis and cross-fitting are in
:mod:`groundstate.eval.dhd.analysis`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.errors import ConfigError
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
from groundstate.eval.dhd.replay import MODES, ReplayBlock, ReplayProgram, block_outputs, pair_rows, replay_records
from groundstate.eval.dhd.settings import cache_generation, check_generation, generation_settings, replay_settings
from groundstate.eval.results import CONFIG, RESULTS, read_results
from groundstate.eval.run_files import check_config
from groundstate.eval.runner import RunResult, RunSettings, durable_run, run_config
from groundstate.files import read_json
from groundstate.programs.dhd.deliberation import DEFAULT_K, DiverseHypothesisDeliberation, problem_inputs
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.records import Problem
from groundstate.schema import validate

logger = logging.getLogger(__name__)

_IDENTITY_IGNORED = {"limit", "shard", "run_id", "merged_from"}


@dataclass
class RunOptions:
    """How a DHD step runs.

    Attributes:
        out: directory of run directories (``None``: ``<cache>/runs``).
        threads: work items run concurrently.
        workers: concurrent LM calls inside one work item (hypothesizers, the arms of a block).
        limit: run only the first ``limit`` work items.
        shard: ``(i, n)``: run the deterministic shard ``i`` of ``n``.
        max_error_rate: fail (:class:`~groundstate.eval.runner.RunAborted`) once the share of failed work items
            exceeds this (``None``: only when every work item failed).
        progress: show a progress bar.
        lm: a JSON-able description of the LM (part of the run configuration).
        extra: more configuration to record (and fingerprint).
        backend: the backend fields of :class:`~groundstate.eval.runner.RunSettings` (``--backend ray`` ...).
    """

    out: str | Path | None = None
    threads: int = 4
    workers: int = 8
    limit: int | None = None
    shard: tuple[int, int] | None = None
    max_error_rate: float | None = None
    progress: bool = False
    lm: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    backend: dict[str, Any] | None = None


def _run(cache: MessageCache, program: Any, name: str, fields: dict[str, Any], options: RunOptions, records: Any, *,
         inputs, scorer=None, outputs=None, description: str) -> RunResult:
    """One durable DHD step: the run config (with the cache id and the LM) and the runner, as every step has them.
    Raises :class:`~groundstate.eval.runner.RunAborted` when the step fails (see ``RunOptions.max_error_rate``)."""
    config = run_config(name, **fields, cache=cache.cache_id, lm=options.lm, **(options.extra or {}))
    settings = RunSettings(out=options.out or cache.runs_dir, threads=options.threads, limit=options.limit,
                           shard=options.shard, max_error_rate=options.max_error_rate, progress=options.progress,
                           **(options.backend or {}))
    return durable_run(program, config, records, settings, inputs=inputs, scorer=scorer, outputs=outputs,
                       description=description)


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


def generate(cache: MessageCache, problems: Sequence[Problem], *, program: DiverseHypothesisDeliberation | None = None,
             evaluator: AnswerEvaluator | None = None, k: int = DEFAULT_K, options: RunOptions | None = None,
             source: str | None = None) -> tuple[RunResult | None, dict[str, int]]:
    """Generate and cache messages for the problems that have none yet.

    Returns ``(run result or None when nothing was left to generate, counts)`` with counts ``problems`` (given),
    ``cached_before``, ``generated`` (stored by this call), ``failed`` (records whose recruiter or run failed:
    retried by the next call) and ``failed_messages`` (hypothesizers that failed, stored with ``error``).
    """
    if k < 1:
        raise ConfigError("--k must be at least 1")
    options = options or RunOptions()
    cache.ensure(k)
    cache.add_problems(problems, source=source)
    have = cache.entries()
    todo = [p for p in problems if p.id not in have]
    counts = {"problems": len(problems), "cached_before": len(problems) - len(todo), "generated": 0, "failed": 0,
              "failed_messages": 0}
    if not todo:
        return None, counts
    program = program or DiverseHypothesisDeliberation(k=k, max_workers=options.workers)
    evaluator = evaluator or AnswerEvaluator()
    settings = generation_settings(program, evaluator)
    check_generation(cache_generation(have, f"the cache {cache.dir}"), settings, bool(have), f"the cache {cache.dir}")
    result = _run(cache, GenerateProgram(program, evaluator, k, options.workers), "dhd-generate",
                  {"k": k, **settings}, options, todo, inputs=lambda p: {"problem": p}, scorer=_generate_scores,
                  outputs=lambda pred: {k_: pred[k_] for k_ in ("roles", "padded_roles", "messages",
                                                                "proposal_correct", "proposal_method")},
                  description="dhd generate")
    entries = []
    for row in result.rows:
        if row.get("error"):
            counts["failed"] += 1
            continue
        out = row["outputs"]
        entry = PoolEntry(problem_id=row["id"], roles=out["roles"], padded_roles=out.get("padded_roles", 0),
                          messages=out["messages"], proposal_correct=out["proposal_correct"],
                          proposal_method=out["proposal_method"],
                          generator={"run_id": result.run_id, "lm": options.lm, "settings": settings})
        counts["failed_messages"] += sum(1 for m in entry.messages if m.error is not None)
        entries.append(entry)
    counts["generated"] = cache.put(entries)
    return result, counts


# -- replay ---------------------------------------------------------------------------------------------------------
def _replay_scores(work: Any, prediction: Any) -> dict[str, float | None]:
    if prediction is None:
        return {}
    base = next((a for a in prediction.arms if a["arm"] in ("full", "independent")), None)
    return {"base_correct": None if base is None else base["correct"],
            "failed_arms": float(sum(1 for a in prediction.arms if a["correct"] is None))}


def _block_outputs(pred: Any) -> dict[str, Any]:
    return {k: pred[k] for k in ("problem_id", "mode", "K", "block", "arms")}


def replay(cache: MessageCache, mode: str, ks: Sequence[int], repeats: int, *,
           program: DiverseHypothesisDeliberation | None = None, evaluator: AnswerEvaluator | None = None,
           options: RunOptions | None = None, temperature: float | None = None,
           vary_seed: bool = False) -> tuple[RunResult, dict[int, int]]:
    """Replay the cached messages: ``repeats`` blocks per problem and pool size (nested pools of the first ``K``).

    ``temperature`` (the integrator's) and ``vary_seed`` build the default program (integrator temperature 0 when
    ``temperature`` is ``None``); a given ``program`` keeps its own. The run configuration records the program's
    and the evaluator's settings (:func:`~groundstate.eval.dhd.settings.replay_settings`).

    Returns ``(run result, {K: problems left out for having fewer than K usable messages})``.
    """
    if mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)} (got '{mode}')")
    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    if not ks or any(k < 1 for k in ks):
        raise ConfigError("--k needs pool sizes of at least 1")
    cache.require()
    options = options or RunOptions()
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
    result = _run(cache, ReplayProgram(program, evaluator, problems, entries, options.workers), f"dhd-replay-{mode}",
                  {"mode": mode, **settings, "vary_seed": vary_seed}, options, records,
                  inputs=lambda r: {"work": r}, scorer=_replay_scores, outputs=_block_outputs,
                  description=f"dhd replay {mode}")
    return result, short


# -- collecting finished blocks ----------------------------------------------------------------------------------------
def replay_run_dirs(cache: MessageCache, runs_dir: str | Path | None = None, run_ids: Sequence[str] | None = None,
                    prefix: str = "dhd-replay-") -> dict[str, list[Path]]:
    """The run directories of this cache's runs (by mode for replays), checking each mode has one configuration.

    Raises:
        ConfigError: a mode with runs of several configurations (different LMs or sampling settings) and no
            ``run_ids`` to choose among them.
        InputError: a run configuration under ``runs_dir`` that is unreadable or not a run configuration
            (:class:`~groundstate.eval.run_files.RunConfig`).
    """
    runs_dir = Path(runs_dir) if runs_dir is not None else cache.runs_dir
    cache_id = cache.cache_id
    found: dict[str, dict[str, list[Path]]] = {}
    if not runs_dir.is_dir():
        return {}
    for path in sorted(runs_dir.iterdir()):
        config_path = path / CONFIG
        if not config_path.is_file():
            continue
        config = check_config(read_json(config_path), config_path)  # a corrupt one is an error, not skipped
        if not config["program"].startswith(prefix) or config.get("cache") != cache_id:
            continue
        if run_ids and not any(path.name == r or path.name.startswith(r) for r in run_ids):
            continue
        identity = json.dumps({k: v for k, v in config.items() if k not in _IDENTITY_IGNORED}, sort_keys=True)
        mode = str(config.get("mode", config.get("program")))
        found.setdefault(mode, {}).setdefault(identity, []).append(path)
    out = {}
    for mode, identities in found.items():
        if len(identities) > 1:
            names = sorted(p.name for paths in identities.values() for p in paths)
            raise ConfigError(f"{runs_dir} holds {mode} runs of {len(identities)} different configurations "
                              f"({', '.join(names)}); choose with --run")
        out[mode] = next(iter(identities.values()))
    return out


SETTING_KEYS: tuple[str, ...] = ("temperatures", "evaluator", "judge_lm", "vary_seed", "lm")


def replay_run_settings(cache: MessageCache, runs_dir: str | Path | None = None,
                        run_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per replay mode, what its runs were made with: :data:`SETTING_KEYS` of their run configuration (one
    configuration per mode, see :func:`replay_run_dirs`; a key an older run lacks is ``None``)."""
    out = {}
    for mode, paths in replay_run_dirs(cache, runs_dir, run_ids).items():
        config = read_json(paths[0] / CONFIG)
        out[mode] = {key: config.get(key) for key in SETTING_KEYS}
    return out


def load_blocks(cache: MessageCache, runs_dir: str | Path | None = None, run_ids: Sequence[str] | None = None,
                prefix: str = "dhd-replay-") -> list[dict[str, Any]]:
    """Every finished block of this cache's replay runs (or mask runs with ``prefix="dhd-mask"``), once each."""
    rows = []
    for paths in replay_run_dirs(cache, runs_dir, run_ids, prefix).values():
        for path in paths:
            for row in read_results(path / RESULTS, strict=True):
                if prefix == "dhd-replay-" and not row.get("error") and "arms" in (row.get("outputs") or {}):
                    validate(ReplayBlock, row["outputs"], file=path / RESULTS, record=row["id"],
                             loc=("outputs",))
                rows.append(row)
    return block_outputs(rows)


def collect_pairs(cache: MessageCache, runs_dir: str | Path | None = None,
                  run_ids: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(pair rows, blocks)`` of this cache's finished replays; pair rows carry ``benchmark`` (the source)."""
    blocks = load_blocks(cache, runs_dir, run_ids)
    rows = pair_rows(blocks, cache.entries())
    sources = {p.id: p.source or None for p in cache.problems()}
    for row in rows:
        row["benchmark"] = sources.get(row["problem_id"])
    return rows, blocks


# -- mask ------------------------------------------------------------------------------------------------------------
def mask(cache: MessageCache, repeats: int = 5, *, per_category: int | Sequence[int] | Mapping[str, int] | None = None,
         sample_size: int | None = None, labels: RepeatedLabels | str | Path | None = None, seed: int = 0,
         one_per_problem: bool = True, k: int | None = None, program: DiverseHypothesisDeliberation | None = None,
         evaluator: AnswerEvaluator | None = None, options: RunOptions | None = None, temperature: float | None = None,
         vary_seed: bool = False) -> tuple[RunResult, dict[str, Any], dict[str, Any]]:
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
    from groundstate.eval.runner import fingerprint

    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    cache.require()
    if not isinstance(labels, RepeatedLabels):
        labels = load_repeated_labels(labels if labels is not None else default_labels_path(cache.dir), k=k,
                                      cache_dir=cache.dir)
    elif k is not None and k != labels.K:
        raise ConfigError(f"the labels are at K={labels.K}, not --k {k}")
    options = options or RunOptions()
    problems = cache.problem_map()
    entries = {pid: e for pid, e in cache.entries().items() if pid in problems}
    candidates, excluded = label_candidates(labels, entries)
    available = {c: sum(1 for x in candidates if x["category"] == c) for c in {x["category"] for x in candidates}}
    quotas = resolve_quotas(per_category, sample_size, available)
    document = sample_document(labels, candidates, excluded, quotas, seed, one_per_problem)
    if not document["pairs"]:
        raise ConfigError(f"{labels.path}: no labelled message with at least 2 evaluable LOO blocks in the requested "
                          f"categories (candidates: {available or 'none'})")
    program = program or DiverseHypothesisDeliberation(temperature=temperature, vary_seed=vary_seed)
    evaluator = evaluator or AnswerEvaluator()
    fields = {"k": labels.K, **replay_settings(program, evaluator, cache_generation(entries, f"the cache {cache.dir}")),
              "vary_seed": vary_seed, "sample": {"design": "eight outcomes per repetition", "seed": seed,
                                                 "per_category": quotas, "one_per_problem": one_per_problem}}
    # the config as _run builds it, so the run directory (where sample.json goes first) is known before the run
    config = run_config("dhd-mask", **fields, cache=cache.cache_id, lm=options.lm, **(options.extra or {}))
    named = {**config, "limit": options.limit, "shard": list(options.shard) if options.shard else None}
    run_dir = Path(options.out or cache.runs_dir) / f"dhd-mask-{fingerprint(named)}"  # the runner's own naming
    document = fix_sample(run_dir, document)
    settings = RunSettings(out=options.out or cache.runs_dir, threads=options.threads, limit=options.limit,
                           shard=options.shard, max_error_rate=options.max_error_rate, progress=options.progress,
                           **(options.backend or {}))
    result = durable_run(MaskProgram(program, evaluator, problems, entries, options.workers, k=labels.K), config,
                         mask_records(document["pairs"], repeats), settings, inputs=lambda r: {"work": r},
                         scorer=_mask_scores, description="dhd mask",
                         outputs=lambda p: {f: p[f] for f in ("problem_id", "message_id", "repeat", "category",
                                                              "group", "K", "arms")})
    if Path(result.run_dir) != run_dir:
        raise RuntimeError(f"the mask run went to {result.run_dir}, not {run_dir} where its sample is fixed")
    table = mask_table(block_outputs(result.rows), document)
    table["failed_records"] = sum(1 for row in result.rows if row.get("error"))
    write_table(result.run_dir, table)
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
