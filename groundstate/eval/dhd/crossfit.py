"""Cross-fitted one-removal opportunity analysis (the paper's Tables 24-26), with shuffled controls.

**Design.** A block of a problem holds two full-pool calls (replicates A and B, one pair of calls shared by the
problem's K messages) and one removal call per message. For every problem and every held-out block ``h``, the other
blocks estimate each message's block effect ``full(b) - removal(b)`` (the mean over its evaluable training blocks); if
some estimate is negative (removing that message helped), the most harmful message is removed (ties: the lowest
message position), otherwise the full pool is kept. The choice is scored on block ``h`` only: a kept pool scores the
block's full-pool outcome, a removal scores the removed message's removal outcome on ``h``. Accuracies are
micro-pooled over (problem, held-out block) units; the gain is ``cross-fit - full``.

**Variants** (the result's ``variants``; the paper's Table 24 row is ``main``, Table 26's rows are ``A`` and ``B``):

- ``main``: the full-pool outcome of a block is the mean of its two replicates, ``(A_b + B_b) / 2``, both for the
  training effects (``(A_b + B_b) / 2 - removal_b``) and for scoring a kept pool on ``h`` (``(A_h + B_h) / 2``, so a
  block with ``A_h = 1, B_h = 0`` scores 0.5 when the pool is kept). This follows the issue and the authors' per-fold
  records (``value_aware_one_removal_per_fold.csv``: ``full_value`` is 0.5 where the replicates disagree, and a kept
  pool's ``selector_value`` equals it).
- ``A`` / ``B``: one replicate only, for both the training effects (``A_b - removal_b``) and the kept-pool score
  (``A_h``); likewise ``B`` (the authors' ``selector_fullA_*`` / ``selector_fullB_*`` columns). A removal scores the
  removal outcome in every variant.

The variants are formed here from the table's arms (``with_correct`` = A, ``full_b`` = B, ``without_correct`` = the
removals), whatever block effect the table itself was built with. Without a second replicate (``full_b`` is
``None``: a table built with ``pair_effects(..., full="a")`` from rows without ``with_correct_b``) only ``A`` is
computed and the headline fields are ``A``'s (the result says so in ``headline`` and ``note``).

**Complete problems.** By default (``complete_only``, the paper's "complete problems": Gemma SciBench uses 199 of
200) a problem enters only if both replicates and every removal are evaluable in every block and it has ``K``
messages. Every excluded problem is listed in ``excluded_problems`` with the first cell that excludes it (message,
block, reason) and its number of missing cells; nothing is dropped silently. With ``complete_only=False`` incomplete
problems are used: a message's training estimate averages its evaluable training blocks (a ``main`` block with a
failed replicate is not evaluable: no value is imputed, as in :mod:`~groundstate.eval.dhd.effects`), and held-out
units that cannot be scored (full pool unknown on ``h``, or the chosen removal not evaluable on ``h``) are listed in
the variant's ``dropped_units``. The analysis refuses (``ValueError``, one line naming the problem, messages and
block) when the messages of one block carry different full-pool outcomes: a block's full pool is one call, so such a
table is malformed.

**Interval.** The gain's interval is a problem-clustered percentile bootstrap (``scipy.stats.bootstrap`` over
problems, paired per-problem gain sums and unit counts), per variant and per benchmark (``by_benchmark``, from the
table's strata: Table 25).

**Shuffled controls** (Table 26; both vectorised). A problem's actions are "keep" and "remove the message at position
j". Both controls relabel the policy's chosen actions inside each problem, so a problem never takes another
problem's outcomes, and score the relabeled actions on the same held-out blocks:

- ``all_action``: the chosen action of every held-out unit is relabeled by a uniformly random permutation of the
  problem's K + 1 actions (the paper: "All-action permutes all six actions").
- ``removal_identity``: keep decisions stay; a removal is relabeled by a uniformly random permutation of the
  problem's K removal identities (the paper: "keeps the full action fixed and permutes the five removal
  identities"); the permutation may keep the chosen message.

``control_draw="problem"`` (default, "block-preserving": one permutation per problem, the same on all of its held-out
blocks, so units that chose the same action keep choosing a common one) follows the paper's wording; the authors'
shuffle code is not public. ``control_draw="block"`` draws a fresh permutation per (problem, held-out block); its
mean is the authors' per-fold expectations ``random_all6_value`` / ``random_removal_value``, which are also reported
per variant as ``baselines`` (accuracy of a uniformly random action, and of a uniformly random removal, on every
unit). A relabeled removal of a message that is not evaluable on ``h`` (only with ``complete_only=False``) keeps the
full pool. Each control reports the observed gain, the shuffled gains' mean and central ``confidence`` interval, and a
one-sided p-value (share of shuffles at least as good as the observed gain, +1 corrected).

**Calibration of the controls** (measured on this implementation, ``main`` variant, 300 shuffles and 1,000 bootstrap
resamples per data set; null data sets of 300 complete problems x 5 messages x 5 blocks in which every call of a
problem is Bernoulli with the problem's own accuracy and no message has an effect): with accuracies from
U(0.3, 0.95), the p-value fell at or below 0.05 in 9.3% (all-action) and 8.5% (removal-identity) of 1,000 data sets
with ``control_draw="problem"``, and in 11.3% and 10.8% of 400 with ``"block"``; with accuracies from U(0.3, 0.7),
9.4% and 7.0% of 500 (``"problem"``). The gain's 95% problem-clustered interval covered 0 in 95.1% (94.0% at
U(0.3, 0.7)). The controls are descriptive, not exact tests: cross-fitting makes a problem's units dependent (the
held-out block of one unit trains the others, so units that agree on an action share data), which no relabeling
reproduces, so their null intervals are somewhat narrow. The inferential statement is the gain's problem-clustered
interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import EffectTable

VARIANTS = ("main", "A", "B")
CONTROLS = ("all_action", "removal_identity")
DRAWS = ("problem", "block")
VARIANT_NOTES = {"main": "full pool scored as the mean of replicates A and B (training effects and held-out score)",
                 "A": "full pool scored by replicate A only (training effects and held-out score)",
                 "B": "full pool scored by replicate B only (training effects and held-out score)"}


def _block_outcome(arm: np.ndarray, slots: np.ndarray, table: EffectTable, name: str) -> np.ndarray:
    """(problems x blocks) full-pool outcome shared by a block's messages; refuses a block whose messages disagree."""
    cells = np.where((slots < 0)[..., None], np.nan, arm[np.maximum(slots, 0)])  # (P, W, B)
    known = ~np.isnan(cells)
    low = np.where(known, cells, np.inf).min(axis=1)
    high = np.where(known, cells, -np.inf).max(axis=1)
    clash = known.any(axis=1) & (low != high)
    if clash.any():
        p, b = (int(x) for x in np.argwhere(clash)[0])
        w_low = int(np.flatnonzero(known[p, :, b] & (cells[p, :, b] == low[p, b]))[0])
        w_high = int(np.flatnonzero(known[p, :, b] & (cells[p, :, b] == high[p, b]))[0])
        ids = sorted((table.keys[slots[p, w_low]][1], table.keys[slots[p, w_high]][1]))
        raise ValueError(f"problem {table.problems[p]!r}, block {b}: messages {ids[0]} and {ids[1]} carry different "
                         f"full-pool outcomes (replicate {name}); a block's full pool is one call shared by its "
                         "messages")
    return np.where(known.any(axis=1), low, np.nan)


def _exclusions(table: EffectTable, slots: np.ndarray, full: dict[str, np.ndarray], removal: np.ndarray,
                strata: list[str | None]) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Which problems are complete, and one entry per incomplete problem naming the first cell that excludes it."""
    pad = slots < 0
    missing = {name: np.isnan(arm) for name, arm in full.items()}  # (P, B) each
    missing_r = np.isnan(removal) & ~pad[..., None]  # (P, W, B)
    n_messages = (~pad).sum(axis=1)
    short = n_messages < table.K if table.K is not None else np.zeros(len(n_messages), dtype=bool)
    n_missing = missing_r.sum(axis=(1, 2)) + sum(m.sum(axis=1) for m in missing.values())
    complete = (n_missing == 0) & ~short & (n_messages > 0)
    entries = []
    for p in np.flatnonzero(~complete):
        message, block, reason = None, None, f"has {int(n_messages[p])} of K={table.K} messages"
        for b in range(table.n_blocks):
            if all(m[p, b] for m in missing.values()) and missing_r[p, :, b][~pad[p]].all():
                block, reason = b, "block not replayed or every call of it failed"
                break
            failed = [name for name, m in missing.items() if m[p, b]]
            if failed:
                block, reason = b, f"full-pool replicate {failed[0]} failed or missing"
                break
            if missing_r[p, :, b].any():
                w = int(np.flatnonzero(missing_r[p, :, b])[0])
                message, block, reason = table.keys[slots[p, w]][1], b, "removal outcome failed or missing"
                break
        entries.append({"problem_id": table.problems[p], "stratum": strata[p], "message_id": message,
                        "block": block, "reason": reason, "n_missing_cells": int(n_missing[p])})
    return complete, entries


def _interval(null: np.ndarray, observed: float, confidence: float) -> dict[str, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(null, [tail, 100 - tail])
    return {"observed": observed, "mean": float(null.mean()), "low": float(low), "high": float(high),
            "p_value": float((1 + (null >= observed - 1e-12).sum()) / (1 + len(null)))}


def _relabel(keys: np.ndarray, exists: np.ndarray) -> np.ndarray:
    """A uniformly random permutation of each row's existing labels (last axis), from uniform ``keys``.

    ``relabel[..., i]`` is the label that label ``i`` becomes; labels that do not exist map to labels that do not exist.
    """
    width = exists.shape[-1]
    ascending = np.argsort(np.where(exists, np.arange(width), width + np.arange(width)), axis=-1, kind="stable")
    order = np.argsort(np.where(exists, keys, np.inf), axis=-1, kind="stable")
    relabel = np.empty_like(order)
    np.put_along_axis(relabel, np.broadcast_to(ascending, order.shape), order, axis=-1)
    return relabel


def _controls(dense: np.ndarray, chosen: np.ndarray, exists: np.ndarray, n_units: int, n_shuffles: int,
              draw: str, rng: np.random.Generator, observed: float, confidence: float) -> dict[str, dict[str, float]]:
    """Both shuffled controls. ``dense``: (problems x blocks x K+1) gain of each action on each held-out unit (last
    column: keep; absent units and non-evaluable removals gain 0); ``chosen``: (problems x blocks) chosen column
    (keep for absent units); ``exists``: (problems x K) message positions that exist."""
    n_problems, n_blocks, width1 = dense.shape
    keep = width1 - 1
    with_keep = np.concatenate([exists, np.ones((n_problems, 1), dtype=bool)], axis=1)
    flat = dense.ravel()
    offset = (np.arange(n_problems)[:, None] * n_blocks + np.arange(n_blocks)) * width1  # flat start of (p, h)
    per_block = draw == "block"
    shape = (n_problems, n_blocks) if per_block else (n_problems,)
    ex_all = with_keep[:, None, :] if per_block else with_keep
    ex_rem = exists[:, None, :] if per_block else exists
    nulls = {name: np.empty(n_shuffles) for name in CONTROLS}
    chunk = max(1, 2_000_000 // max(n_problems * n_blocks * width1, 1))
    removal_index = np.minimum(chosen, keep - 1)
    for start in range(0, n_shuffles, chunk):
        s = min(chunk, n_shuffles - start)
        relabel = _relabel(rng.random((s, *shape, width1)), np.broadcast_to(ex_all, (s, *shape, width1)))
        index = chosen[..., None] if per_block else np.broadcast_to(chosen, (s, n_problems, n_blocks))
        if per_block:
            moved = np.take_along_axis(relabel, np.broadcast_to(index, (s, n_problems, n_blocks, 1)), axis=-1)[..., 0]
        else:
            moved = np.take_along_axis(relabel, index, axis=2)
        nulls["all_action"][start:start + s] = flat[offset + moved].sum(axis=(1, 2)) / n_units
        relabel = _relabel(rng.random((s, *shape, keep)), np.broadcast_to(ex_rem, (s, *shape, keep)))
        if per_block:
            moved = np.take_along_axis(relabel, np.broadcast_to(removal_index[..., None],
                                                                (s, n_problems, n_blocks, 1)), axis=-1)[..., 0]
        else:
            moved = np.take_along_axis(relabel, np.broadcast_to(removal_index, (s, n_problems, n_blocks)), axis=2)
        swapped = np.where(chosen < keep, moved, keep)
        nulls["removal_identity"][start:start + s] = flat[offset + swapped].sum(axis=(1, 2)) / n_units
    return {name: _interval(nulls[name], observed, confidence) for name in CONTROLS}


def _gain_interval(gain: np.ndarray, cluster: np.ndarray, n_resamples: int, confidence: float,
                   seed: Any) -> dict[str, Any]:
    """Micro-pooled mean gain with a problem-clustered percentile bootstrap interval (``n``: problems)."""
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    used, position = np.unique(cluster, return_inverse=True)
    out: dict[str, Any] = {"mean": float(gain.mean()) if len(gain) else None, "low": None, "high": None,
                           "n": int(len(used))}
    if len(used) >= 2 and n_resamples > 0:
        sums = np.bincount(position, weights=gain, minlength=len(used))
        counts = np.bincount(position, minlength=len(used)).astype(float)
        res = stats.bootstrap((sums, counts), lambda g, n, axis: g.sum(axis=axis) / n.sum(axis=axis), paired=True,
                              vectorized=True, n_resamples=n_resamples, method="percentile",
                              confidence_level=confidence, rng=np.random.default_rng(seed))
        out.update(low=float(res.confidence_interval.low), high=float(res.confidence_interval.high))
    return out


def _summary(full_u: np.ndarray, gain_u: np.ndarray, action: np.ndarray, keep: int, problem: np.ndarray,
             n_resamples: int, confidence: float, seed: Any) -> dict[str, Any]:
    n = len(gain_u)
    return {"full_accuracy": float(full_u.mean()) if n else None,
            "crossfit_accuracy": float((full_u + gain_u).mean()) if n else None,
            "gain": _gain_interval(gain_u, problem, n_resamples, confidence, seed),
            "removal_share": float((action < keep).mean()) if n else None,
            "n_problems": int(len(np.unique(problem))), "n_units": int(n)}


def _variant(full: np.ndarray, removal: np.ndarray, use: np.ndarray, table: EffectTable, slots: np.ndarray,
             strata: list[str | None] | None, settings: dict[str, Any], index: int) -> dict[str, Any]:
    """Cross-fit one variant (``full``: its (P, B) full-pool score) and summarise it."""
    n_problems, width, n_blocks = removal.shape
    keep = width
    effect = full[:, None, :] - removal
    valid = ~np.isnan(effect)
    zeroed = np.nan_to_num(effect)
    rows = np.arange(n_problems)
    chosen = np.full((n_problems, n_blocks), keep)
    dense = np.zeros((n_problems, n_blocks, width + 1))
    scored = np.zeros((n_problems, n_blocks), dtype=bool)
    dropped = []
    for h in range(n_blocks):
        train = np.arange(n_blocks) != h
        count = valid[:, :, train].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            estimate = np.where(count > 0, zeroed[:, :, train].sum(axis=2) / count, np.inf)
        best = np.argmin(estimate, axis=1)
        action = np.where(estimate[rows, best] < 0, best, keep)
        gains = np.concatenate([removal[:, :, h] - full[:, h:h + 1], np.zeros((n_problems, 1))], axis=1)
        value = gains[rows, action]
        ok = use & np.isfinite(full[:, h]) & np.isfinite(value)
        for p in np.flatnonzero(use & ~ok):
            unknown_full = np.isnan(full[p, h])
            dropped.append({"problem_id": table.problems[p], "held_out_block": h,
                            "message_id": None if unknown_full else table.keys[slots[p, action[p]]][1],
                            "reason": "full-pool outcome failed or missing" if unknown_full
                            else "chosen removal not evaluable on the held-out block"})
        chosen[ok, h] = action[ok]
        dense[ok, h] = np.nan_to_num(gains[ok])
        scored[:, h] = ok
    problem, block = np.nonzero(scored)  # units in (problem, block) order
    act = chosen[problem, block]
    gain_u = dense[problem, block, act]
    full_u = full[problem, block]
    seed = settings["seed"]
    out = _summary(full_u, gain_u, act, keep, problem, settings["n_resamples"], settings["confidence"],
                   [seed, index, 0])
    exists = slots >= 0
    n_units = len(gain_u)
    if n_units:
        rem = np.where(exists[problem], dense[problem, block, :keep], np.nan)
        out["baselines"] = {
            "random_action_accuracy": float((full_u + np.nansum(rem, axis=1) / (exists[problem].sum(axis=1) + 1))
                                            .mean()),
            "random_removal_accuracy": float((full_u + np.nanmean(rem, axis=1)).mean())}
    else:
        out["baselines"] = {"random_action_accuracy": None, "random_removal_accuracy": None}
    out["controls"] = (_controls(dense, chosen, exists, n_units, settings["n_shuffles"], settings["control_draw"],
                                 np.random.default_rng([seed, index, 1]), out["gain"]["mean"], settings["confidence"])
                       if n_units and settings["n_shuffles"] > 0 else {})
    out["by_benchmark"] = {}
    if strata is not None:
        labels = np.asarray([str(s) for s in strata], dtype=object)
        for k, label in enumerate(dict.fromkeys(labels.tolist())):
            mask = labels[problem] == label
            out["by_benchmark"][label] = _summary(full_u[mask], gain_u[mask], act[mask], keep, problem[mask],
                                                  settings["n_resamples"], settings["confidence"],
                                                  [seed, index, 2 + k])
    ids = np.asarray([m for _, m in table.keys], dtype=int)
    message_of = np.where(exists, ids[np.maximum(slots, 0)], -1) if len(ids) else np.full(slots.shape, -1)
    out["decisions"] = [{"problem_id": table.problems[p], "held_out_block": int(h),
                         "removed_message_id": None if a == keep else int(message_of[p, a]),
                         "value": float(f + g), "full_value": float(f)}
                        for p, h, a, f, g in zip(problem.tolist(), block.tolist(), act.tolist(), full_u.tolist(),
                                                 gain_u.tolist(), strict=True)]
    out["n_dropped_units"] = len(dropped)
    out["dropped_units"] = dropped
    return out


def crossfit_keep_or_remove(table: EffectTable, seed: int = 0, n_resamples: int = 2000, n_shuffles: int = 1000,
                            complete_only: bool = True, confidence: float = 0.95,
                            control_draw: str = "problem") -> dict[str, Any]:
    """Cross-fitted one-removal choice per problem, scored on held-out blocks, in three variants with controls.

    Args:
        table: an ``"loo"`` :class:`EffectTable` (from :func:`pair_effects`) with ``with_correct`` (replicate A of the
            full pool), ``full_b`` (replicate B; without it only variant ``A`` is computed) and ``without_correct``
            (the removal outcomes). Its ``effects`` and ``full`` setting are not used: every variant is formed here
            from the arms.
        seed: seed of the bootstraps and of the shuffles.
        n_resamples: problem-clustered bootstrap resamples per gain interval.
        n_shuffles: shuffles per control and variant.
        complete_only: use only complete problems (see the module notes), listing the others.
        confidence: level of the gain intervals and of the controls' null intervals.
        control_draw: ``"problem"`` (one permutation per problem) or ``"block"`` (one per held-out unit).

    Returns:
        A JSON-able dict:

        - ``variants``: ``{"main", "A", "B"}`` (``main`` and ``B`` only with replicate B), each with
          ``full_accuracy`` and ``crossfit_accuracy`` (fractions, micro-pooled over units), ``gain``
          ``{"mean", "low", "high", "n"}`` (``n``: problems), ``removal_share``, ``n_problems``, ``n_units``,
          ``controls`` (``all_action`` and ``removal_identity``: ``observed``, null ``mean``, ``low``, ``high`` and
          ``p_value``), ``baselines`` (``random_action_accuracy``, ``random_removal_accuracy``), ``by_benchmark``
          (per stratum label: the same accuracy, gain, share and count fields), ``decisions`` (per unit:
          ``problem_id``, ``held_out_block``, ``removed_message_id`` or ``None``, ``value``, ``full_value``),
          ``n_dropped_units`` and ``dropped_units`` (``problem_id``, ``held_out_block``, ``message_id``, ``reason``),
          and ``full_pool`` (what scores the full pool).
        - ``headline``: the variant the top-level ``full_accuracy``, ``crossfit_accuracy``, ``gain``,
          ``removal_share``, ``controls``, ``n_problems`` and ``n_units`` repeat (``"main"``, or ``"A"`` without
          replicate B, with a ``note``).
        - ``benchmarks``: stratum labels in order (``[]`` without strata); ``excluded_problems`` (``problem_id``,
          ``stratum``, ``message_id``, ``block``, ``reason``, ``n_missing_cells``), ``n_excluded_problems``,
          ``n_excluded_by_benchmark``; ``n_blocks``, ``K`` and the settings (``seed``, ``n_resamples``,
          ``n_shuffles``, ``confidence``, ``complete_only``, ``control_draw``).

    Raises:
        ValueError: not an ``"loo"`` table or no arms, fewer than two blocks, an unknown ``control_draw``, or a
            block whose messages carry different full-pool outcomes.
    """
    if table.mode != "loo" or table.with_correct is None or table.without_correct is None:
        raise ValueError("crossfit_keep_or_remove needs an 'loo' table with the full-pool outcome (with_correct) and "
                         "the removal outcomes (without_correct)")
    if table.n_blocks < 2:
        raise ValueError(f"cross-fitting needs more replays: at least two replay blocks, found {table.n_blocks}")
    if control_draw not in DRAWS:
        raise ValueError(f"control_draw must be one of {DRAWS}, got {control_draw!r}")
    full_b = table.full_b
    slots = table.problem_slots()
    removal = np.where((slots < 0)[..., None], np.nan, table.without_correct[np.maximum(slots, 0)])  # (P, W, B)
    full = {"A": _block_outcome(table.with_correct, slots, table, "A")}
    if full_b is not None:
        full["B"] = _block_outcome(full_b, slots, table, "B")
    strata = list(table.strata) if table.strata is not None else None
    complete, excluded = _exclusions(table, slots, full, removal, strata or [None] * len(table.problems))
    use = complete if complete_only else (slots >= 0).any(axis=1)
    settings = {"seed": seed, "n_resamples": int(n_resamples), "n_shuffles": int(n_shuffles),
                "confidence": float(confidence), "complete_only": bool(complete_only), "control_draw": control_draw}
    scores = {"A": full["A"]}
    if "B" in full:
        scores = {"main": (full["A"] + full["B"]) / 2, "A": full["A"], "B": full["B"]}  # NaN if either failed
    variants = {}
    for name in VARIANTS:
        if name in scores:
            variants[name] = {"full_pool": VARIANT_NOTES[name],
                              **_variant(scores[name], removal, use, table, slots, strata, settings,
                                         VARIANTS.index(name))}
    headline = "main" if "main" in variants else "A"
    top = variants[headline]
    out: dict[str, Any] = {"headline": headline}
    if headline != "main":
        out["note"] = ("no second full-pool replicate (full_b, from the rows' with_correct_b): the main estimate "
                       "(mean of A and B) cannot be formed; the headline fields are replicate A's")
    out.update({key: top[key] for key in ("full_accuracy", "crossfit_accuracy", "gain", "removal_share", "controls",
                                           "n_problems", "n_units")})
    excluded_here = excluded if complete_only else []
    out.update({"variants": variants, "benchmarks": list(dict.fromkeys(str(s) for s in strata)) if strata else [],
                "excluded_problems": excluded_here, "n_excluded_problems": len(excluded_here),
                "n_excluded_by_benchmark": _count_by(excluded_here, strata),
                "n_incomplete_problems": len(excluded), "n_blocks": table.n_blocks, "K": table.K, **settings})
    return out


def _count_by(entries: Iterable[dict[str, Any]], strata: list[str | None] | None) -> dict[str, int]:
    if strata is None:
        return {}
    counts = {str(s): 0 for s in dict.fromkeys(strata)}
    for entry in entries:
        counts[str(entry["stratum"])] += 1
    return counts
