"""DHD replays: which arms a replay block runs, how each arm is run and scored, and the pair rows it yields.

**Work items.** One runner record per ``(problem, mode, K, block)``: id ``<problem>|<mode>|K<K>|b<block>``. A
record runs every arm of that block concurrently and evaluates each arm's answer, so a block is either stored
whole or re-run whole (resumed calls come back from DSPy's cache).

**Arms.** The pool is the problem's first ``K`` usable cached messages (nested: the pool of ``K`` is a prefix of
the pool of ``K+1``).

- ``loo``: ``full`` (the whole pool), ``full_b`` (the identical input again, another rollout: the full-pool
  repeat pair of the disagreement rate) and ``without`` for each message (the pool minus it; a pool of one
  minus its message is the independent solver).
- ``single``: ``independent`` (no messages) and ``only`` for each message (that message alone).

**Mask patterns and rollout keys.** Each arm has a mask pattern, one character per pool position: ``1`` shown,
``0`` hidden, and for component masking ``a`` (answer hidden), ``r`` (reasoning hidden), ``n`` (neutral
replacement). The rollout key is ``dhd|<problem>|<mode>|K<K>|<pattern>|b<block>|r<repeat>``; the integrator
turns it into DSPy's ``rollout_id`` (see :mod:`groundstate.programs.dhd.deliberation`), so the cache key always
includes the mask pattern, the block and the repeat. Two repeats of one input are two calls; re-running the
same key is served by the cache. This holds at temperature 0 too (the default): the rollout id is part of
DSPy's cache key at any temperature, so repeats are separate calls to the model.

**Outcomes.** Each arm's answer is graded by the evaluator
(:class:`~groundstate.programs.dhd.evaluator.AnswerEvaluator`): in ``judge`` mode the judge sees the problem and
the integrator's whole response (reasoning and final answer); in ``rules`` mode the final answer is checked by
rule. Each arm stores ``answer``, ``response`` (the whole response, what a judge grades), ``correct`` (1/0),
``method`` and ``value`` (what the evaluator read as the final answer). An answer with no usable value
(``method="no-answer"``) or with several candidate values (``"hedged"``) is a *wrong* answer, ``correct=0``, like
any other. Only an operational failure gives ``correct=None``, with ``failure`` saying why: ``lm-error: ...`` (the
integrator call raised, including unparseable LM output) or ``judge-error: ...`` (the judge call failed or its
verdict could not be parsed). A failure is never counted as wrong: pairs with a failed arm get ``label=None``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from groundstate.concurrency import thread_map
from groundstate.eval.dhd.cache import PoolEntry
from groundstate.programs.dhd.deliberation import DiverseHypothesisDeliberation, problem_inputs
from groundstate.programs.dhd.evaluator import AnswerEvaluator
from groundstate.records import HypothesisMessage, Problem

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = ("loo", "single")
VIEW_CODES: dict[str, str] = {"full": "1", "hide_answer": "a", "hide_reasoning": "r", "neutral": "n"}
LABELS: tuple[str, ...] = ("helpful", "neutral", "harmful")


@dataclass(frozen=True)
class Arm:
    """One integrator (or solver) call of a block: what it shows and its rollout key."""

    name: str
    message_id: int | None
    shown: tuple[int, ...]
    views: tuple[str, ...]
    pattern: str
    key: str


def mask_pattern(pool_ids: Sequence[int], shown: Mapping[int, str]) -> str:
    """One character per pool position: ``1`` shown whole, ``0`` hidden, ``a``/``r``/``n`` a masked view."""
    return "".join(VIEW_CODES[shown[i]] if i in shown else "0" for i in pool_ids)


def make_arm(prefix: str, name: str, pool_ids: Sequence[int], shown: Mapping[int, str], message_id: int | None,
             suffix: str) -> Arm:
    pattern = mask_pattern(pool_ids, shown)
    order = tuple(i for i in pool_ids if i in shown)
    return Arm(name=name, message_id=message_id, shown=order, views=tuple(shown[i] for i in order),
               pattern=pattern, key=f"{prefix}|{pattern}|{suffix}")


def replay_arms(problem_id: str, pool_ids: Sequence[int], mode: str, k: int, block: int) -> list[Arm]:
    """The arms of one replay block (see the module notes)."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode '{mode}' (choose from {', '.join(MODES)})")
    pool = list(pool_ids)[:k]
    if len(pool) < k:
        raise ValueError(f"problem {problem_id} has {len(pool)} usable messages, fewer than K={k}")
    prefix = f"dhd|{problem_id}|{mode}|K{k}"
    full = {i: "full" for i in pool}
    if mode == "loo":
        arms = [make_arm(prefix, "full", pool, full, None, f"b{block}|r0"),
                make_arm(prefix, "full_b", pool, full, None, f"b{block}|r1")]
        arms += [make_arm(prefix, "without", pool, {j: "full" for j in pool if j != i}, i, f"b{block}|r0")
                 for i in pool]
        return arms
    arms = [make_arm(prefix, "independent", pool, {}, None, f"b{block}|r0")]
    arms += [make_arm(prefix, "only", pool, {i: "full"}, i, f"b{block}|r0") for i in pool]
    return arms


def run_arm(program: DiverseHypothesisDeliberation, evaluator: AnswerEvaluator, problem: Problem,
            messages: Mapping[int, HypothesisMessage], arm: Arm) -> dict[str, Any]:
    """Run one arm and evaluate its answer; LM and judge failures are recorded on the arm, never raised."""
    row: dict[str, Any] = {"arm": arm.name, "message_id": arm.message_id, "pattern": arm.pattern,
                           "shown": list(arm.shown), "key": arm.key}
    try:
        out = program.integrate(**problem_inputs(problem), messages=[messages[i] for i in arm.shown],
                                views=list(arm.views), rollout=arm.key)
    except Exception as exc:  # an LM failure is an operational failure of this arm only
        logger.debug("arm %s failed: %s", arm.key, exc)
        return {**row, "answer": None, "correct": None, "method": None,
                "failure": f"lm-error: {type(exc).__name__}: {exc}"[:500]}
    response = out.get("response") or out.answer
    verdict = evaluator.evaluate(problem, out.answer, response=response)
    failure = None
    if verdict.correct is None:
        failure = f"{verdict.method}: {verdict.get('error') or 'no verdict'}"[:500]
    value = verdict.get("value")
    return {**row, "answer": out.answer, "response": response, "correct": verdict.correct, "method": verdict.method,
            "value": value if isinstance(value, str | int | float | list) else None, "failure": failure}


class BlockProgram:
    """Base of the runner programs: holds the DHD program, the evaluator, the problems and their pools."""

    def __init__(self, program: DiverseHypothesisDeliberation, evaluator: AnswerEvaluator,
                 problems: Mapping[str, Problem], entries: Mapping[str, PoolEntry], max_workers: int = 8):
        self.program, self.evaluator = program, evaluator
        self.problems, self.entries = problems, entries
        self.max_workers = max_workers

    def run_arms(self, problem_id: str, arms: Sequence[Arm]) -> list[dict[str, Any]]:
        problem = self.problems[problem_id]
        by_id = {m.index: m for m in self.entries[problem_id].messages}
        return thread_map(lambda arm: run_arm(self.program, self.evaluator, problem, by_id, arm), list(arms),
                          self.max_workers)


class ReplayProgram(BlockProgram):
    """The runner program of ``dhd replay``: ``__call__(work)`` runs one block and returns its arms."""

    def __call__(self, work: Mapping[str, Any]) -> dspy.Prediction:
        pid, mode, k, block = work["problem_id"], work["mode"], int(work["K"]), int(work["block"])
        pool_ids = [m.index for m in self.entries[pid].pool()]
        arms = self.run_arms(pid, replay_arms(pid, pool_ids, mode, k, block))
        return dspy.Prediction(problem_id=pid, mode=mode, K=k, block=block, arms=arms)


def replay_records(entries: Mapping[str, PoolEntry], problem_ids: Iterable[str], mode: str, ks: Sequence[int],
                   repeats: int) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Work items, block by block (so an interrupted run holds whole early blocks), and, per ``K``, how many
    problems were left out for having fewer than ``K`` usable messages."""
    if mode not in MODES:
        raise ValueError(f"unknown replay mode '{mode}'")
    records, short = [], {k: 0 for k in ks}
    ids = [pid for pid in problem_ids if pid in entries]
    sizes = {pid: len(entries[pid].pool()) for pid in ids}
    for k in ks:
        short[k] = sum(1 for pid in ids if sizes[pid] < k)
    for block in range(repeats):
        for pid in ids:
            for k in ks:
                if sizes[pid] >= k:
                    records.append({"id": f"{pid}|{mode}|K{k}|b{block}", "problem_id": pid, "mode": mode, "K": k,
                                    "block": block})
    return records, short


# -- from stored blocks to the statistics' pair rows ---------------------------------------------------------------
def flip_label(with_correct: int | None, without_correct: int | None) -> str | None:
    """``helpful`` (with right, without wrong), ``harmful`` (the reverse), ``neutral`` (equal); ``None`` if
    either arm failed."""
    if with_correct is None or without_correct is None:
        return None
    if with_correct == without_correct:
        return "neutral"
    return "helpful" if with_correct > without_correct else "harmful"


class ArmOutcome(BaseModel):
    """One arm of a stored replay block, as :func:`run_arm` writes it (other fields kept): ``correct`` is 1/0 (or
    true/false), or ``null`` for an operational failure."""

    model_config = ConfigDict(extra="allow")

    arm: Literal["full", "full_b", "without", "independent", "only"]
    message_id: Annotated[int, Field(strict=True, ge=0)] | None = None
    correct: Literal[0, 1] | None = None
    failure: StrictStr | None = None


class ReplayBlock(BaseModel):
    """The stored outputs of one replay block (a ``results.jsonl`` row's ``outputs``), checked when a replay run
    is read back (:func:`~groundstate.eval.dhd.run.load_blocks`)."""

    model_config = ConfigDict(extra="allow")

    problem_id: StrictStr
    mode: Literal[MODES]
    K: Annotated[int, Field(strict=True, ge=1)]
    block: Annotated[int, Field(strict=True, ge=0)]
    arms: list[ArmOutcome]


def block_outputs(result_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The outputs of finished replay blocks (rows without a record error), one per record id."""
    seen: dict[str, dict[str, Any]] = {}
    for row in result_rows:
        outputs = row.get("outputs") or {}
        if row.get("error") or "arms" not in outputs:
            continue
        seen.setdefault(row["id"], dict(outputs))
    return list(seen.values())


def pair_rows(blocks: Iterable[Mapping[str, Any]], entries: Mapping[str, PoolEntry]) -> list[dict[str, Any]]:
    """Matched pair rows (the statistics' data contract) from replay block outputs.

    Each row: ``problem_id``, ``message_id``, ``mode``, ``K``, ``block``, ``with_correct``, ``without_correct``
    (1/0/None), ``proposal_correct`` (True/False/None) and ``label`` (helpful/neutral/harmful/None), plus
    ``with_failure``/``without_failure`` and, for ``loo``, ``with_correct_b`` (the full-pool repeat).
    """
    rows = []
    for block in blocks:
        arms = block["arms"]
        mode = block["mode"]
        if mode == "loo":
            base = next((a for a in arms if a["arm"] == "full"), None)
            repeat = next((a for a in arms if a["arm"] == "full_b"), None)
            paired = [a for a in arms if a["arm"] == "without"]
        else:
            base = next((a for a in arms if a["arm"] == "independent"), None)
            repeat = None
            paired = [a for a in arms if a["arm"] == "only"]
        if base is None:
            continue
        entry = entries.get(block["problem_id"])
        for arm in paired:
            with_arm, without_arm = (base, arm) if mode == "loo" else (arm, base)
            i = int(arm["message_id"])
            row = {"problem_id": block["problem_id"], "message_id": i, "mode": mode, "K": int(block["K"]),
                   "block": int(block["block"]), "with_correct": with_arm["correct"],
                   "without_correct": without_arm["correct"],
                   "proposal_correct": entry.proposal(i) if entry is not None else None,
                   "label": flip_label(with_arm["correct"], without_arm["correct"]),
                   "with_failure": with_arm.get("failure"), "without_failure": without_arm.get("failure")}
            if mode == "loo":
                row["with_correct_b"] = repeat["correct"] if repeat is not None else None
            rows.append(row)
    rows.sort(key=lambda r: (r["mode"], r["K"], r["problem_id"], r["block"], r["message_id"]))
    return rows


def repeat_pairs(blocks: Iterable[Mapping[str, Any]], k: int | None = None) -> list[tuple[int | None, int | None]]:
    """Full-pool repeat pairs ``(full, full_b)`` of LOO blocks (at pool size ``k`` when given)."""
    pairs = []
    for block in blocks:
        if block["mode"] != "loo" or (k is not None and int(block["K"]) != k):
            continue
        arms = {a["arm"]: a for a in block["arms"]}
        if "full" in arms and "full_b" in arms:
            pairs.append((arms["full"]["correct"], arms["full_b"]["correct"]))
    return pairs


def arm_accuracy(blocks: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``<mode>/K<K>/<arm>``: evaluable outcomes, correct share and operational failures."""
    table: dict[str, dict[str, Any]] = {}
    for block in blocks:
        for arm in block["arms"]:
            key = f"{block['mode']}/K{block['K']}/{arm['arm']}"
            entry = table.setdefault(key, {"n": 0, "correct": 0, "failures": 0})
            if arm["correct"] is None:
                entry["failures"] += 1
            else:
                entry["n"] += 1
                entry["correct"] += int(arm["correct"])
    for entry in table.values():
        entry["accuracy"] = entry["correct"] / entry["n"] if entry["n"] else None
    return dict(sorted(table.items()))
