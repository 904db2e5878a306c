"""Cross-fitted keep-or-remove: does repeated trajectory-value evidence pick a better pool for the same problem?

For every problem and every held-out block ``h``: the other blocks estimate each message's leave-one-out effect
(mean of its evaluable effects there); if some estimate is negative (removing that message helped), the most
harmful message is removed (ties: the lowest message position), otherwise the full pool is kept. The choice is
scored on block ``h`` only: the kept pool scores the block's full-pool correctness, a removal scores it minus the
removed message's effect on ``h`` (``with - effect = without``). This needs a ``"loo"`` table built from rows that
carry the full-pool outcome of each block (``with_correct``); when the messages of one problem-block carry
different full-pool outcomes (separate full-pool replicates per pair), the block's full-pool accuracy is their mean
and a removal's gain is paired with the removed message's own pair.

Accuracies are micro-pooled over (problem, held-out block) units; the gain's interval is a problem-clustered
percentile bootstrap (``scipy.stats.bootstrap`` over problems, paired per-problem gain sums and unit counts). Two
block-preserving shuffled controls give null intervals; both shuffle whole problems, so a problem's held-out units
(which share training blocks) stay together:

- *all-action*: the problems' action vectors (per held-out block: keep, or remove message position j) are permuted
  across problems; a problem takes another problem's action on each of its held-out blocks.
- *removal-identity*: every keep/remove decision stays, and the removed identities are relabeled by a random
  permutation of the problem's message positions (the paper's "permutes the removal identities"; the permutation may
  keep the chosen message, which makes the observed choice one of the equally likely relabelings when messages are
  interchangeable).

A shuffled action that removes a message the problem does not have (or that is not evaluable on ``h``) keeps the
full pool. The controls are descriptive: cross-fitting makes a problem's units dependent (the held-out block of one
unit trains the others), which the shuffles do not reproduce, so their null intervals are somewhat narrow (in
simulations without any message effect their p-values fall at or below 0.05 in about 11-13% of data sets). The
inferential statement is the gain's problem-clustered interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from groundstate.eval.dhd.bootstrap import padded_by_problem
from groundstate.eval.dhd.effects import EffectTable


def _interval(null: np.ndarray, observed: float, confidence: float) -> dict[str, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(null, [tail, 100 - tail])
    return {"mean": float(null.mean()), "low": float(low), "high": float(high),
            "p_value": float((1 + (null >= observed - 1e-12).sum()) / (1 + len(null)))}


def _controls(gains: np.ndarray, act: np.ndarray, position: np.ndarray, block: np.ndarray, exists: np.ndarray,
              n_blocks: int, n_shuffles: int, rng: np.random.Generator, observed: float,
              confidence: float) -> dict[str, dict[str, float]]:
    """The two shuffled controls, shuffling whole problems so each problem's held-out units stay together.

    ``gains``: (units x positions+1) gain of each action (last column: keep); ``act``: the chosen column per unit;
    ``position``/``block``: the unit's problem (0..n-1) and held-out block; ``exists``: (problems x positions).
    """
    n_problems, width = exists.shape
    n_units = len(act)
    dense = np.zeros((n_problems, n_blocks, width + 1))  # absent units gain 0 under any action
    dense[position, block] = gains
    chosen = np.full((n_problems, n_blocks), width)
    chosen[position, block] = act
    offset = (np.arange(n_problems)[:, None] * n_blocks + np.arange(n_blocks)) * (width + 1)  # flat (p, h) start
    flat = dense.ravel()
    ascending = np.argsort(np.where(exists, np.arange(width), width + np.arange(width)), axis=1)
    all_action, identity = np.empty(n_shuffles), np.empty(n_shuffles)
    chunk = max(1, 1_000_000 // max(n_problems * n_blocks * (width + 1), 1))
    for start in range(0, n_shuffles, chunk):
        s = min(chunk, n_shuffles - start)
        sigma = np.argsort(rng.random((s, n_problems)), axis=1)  # problem p takes the actions of problem sigma(p)
        all_action[start:start + s] = flat[offset + chosen[sigma]].sum(axis=(1, 2)) / n_units
        order = np.argsort(np.where(exists, rng.random((s, n_problems, width)), np.inf), axis=2)
        relabel = np.empty_like(order)  # a random permutation of each problem's message positions
        np.put_along_axis(relabel, np.broadcast_to(ascending, order.shape), order, axis=2)
        moved = np.take_along_axis(relabel, np.broadcast_to(np.minimum(chosen, width - 1), (s, n_problems,
                                                                                             n_blocks)), axis=2)
        swapped = np.where(chosen < width, moved, width)
        identity[start:start + s] = flat[offset + swapped].sum(axis=(1, 2)) / n_units
    return {"all_action": _interval(all_action, observed, confidence),
            "removal_identity": _interval(identity, observed, confidence)}


def crossfit_keep_or_remove(table: EffectTable, seed: int = 0, n_resamples: int = 2000, n_shuffles: int = 1000,
                            complete_only: bool = True, confidence: float = 0.95) -> dict[str, Any]:
    """Cross-fitted one-removal choice per problem, scored on held-out blocks, with shuffled controls.

    Args:
        table: an ``"loo"`` :class:`EffectTable` with ``with_correct`` (from :func:`pair_effects`).
        seed: seed of the bootstrap and of the shuffles.
        n_resamples: problem-clustered bootstrap resamples for the gain interval.
        n_shuffles: shuffles per control.
        complete_only: use only problems whose every message is evaluable in every block (the paper's "complete
            problems"); otherwise non-evaluable units (full pool unknown, or the removed message not evaluable on the
            held-out block) are dropped.
        confidence: level of the gain interval and of the control null intervals.

    Returns:
        ``full_accuracy``, ``crossfit_accuracy`` (fractions), ``gain`` ``{"mean", "low", "high", "n"}`` (``n``:
        problems), ``removal_share`` (units where a message was removed), ``controls`` (``all_action`` and
        ``removal_identity``: null ``mean``, ``low``, ``high`` of the shuffled gain and ``p_value``, the share of
        shuffles at least as good as the observed gain, +1 corrected), ``n_problems``, ``n_units``,
        ``n_excluded_problems``, ``n_blocks``, ``decisions`` (one dict per unit: ``problem_id``,
        ``held_out_block``, ``removed_message_id`` or ``None``) and the settings.

    Raises:
        ValueError: not an ``"loo"`` table, no ``with_correct``, or fewer than two blocks.
    """
    from scipy import stats

    if table.mode != "loo" or table.with_correct is None:
        raise ValueError("crossfit_keep_or_remove needs an 'loo' table with the full-pool outcome (with_correct)")
    n_blocks = table.n_blocks
    if n_blocks < 2:
        raise ValueError("crossfit_keep_or_remove needs at least two replay blocks")
    slots, effects = padded_by_problem(table)
    pad = slots < 0
    full_arm = np.where(pad[..., None], np.nan, table.with_correct[np.maximum(slots, 0)])
    full_count = (~np.isnan(full_arm)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        full = np.where(full_count > 0, np.nansum(full_arm, axis=1) / full_count, np.nan)  # (P, B)
    valid = ~np.isnan(effects)
    complete = (valid | pad[..., None]).all(axis=(1, 2)) & (~pad).any(axis=1)
    keep_problem = complete if complete_only else (~pad).any(axis=1)
    width = effects.shape[1]
    zeroed = np.nan_to_num(effects)
    units: dict[str, list[np.ndarray]] = {"problem": [], "block": [], "action": [], "full": [], "effect": []}
    for h in range(n_blocks):
        train = np.arange(n_blocks) != h
        count = valid[:, :, train].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            estimate = np.where(count > 0, zeroed[:, :, train].sum(axis=2) / count, np.inf)
        choice = np.argmin(estimate, axis=1)
        action = np.where(estimate[np.arange(len(choice)), choice] < 0, choice, -1)
        effect_h = effects[:, :, h]
        removed_effect = effect_h[np.arange(len(action)), np.maximum(action, 0)]
        ok = keep_problem & np.isfinite(full[:, h]) & ((action < 0) | np.isfinite(removed_effect))
        idx = np.flatnonzero(ok)
        units["problem"].append(idx)
        units["block"].append(np.full(len(idx), h))
        units["action"].append(action[idx])
        units["full"].append(full[idx, h])
        units["effect"].append(effect_h[idx])
    problem = np.concatenate(units["problem"])
    block = np.concatenate(units["block"])
    action = np.concatenate(units["action"])
    full_u = np.concatenate(units["full"])
    effect_u = np.concatenate(units["effect"]).reshape(len(problem), width)
    n_units = len(problem)
    # column `width` is "keep the full pool" (gain 0); non-evaluable/absent messages also gain 0 under shuffles
    gains_table = np.concatenate([-np.nan_to_num(effect_u), np.zeros((n_units, 1))], axis=1)
    act = np.where(action >= 0, action, width)
    rows = np.arange(n_units)
    gain_u = gains_table[rows, act]
    used = np.unique(problem)
    out: dict[str, Any] = {"n_problems": int(len(used)), "n_units": int(n_units),
                           "n_excluded_problems": int(len(table.problems) - keep_problem.sum()),
                           "n_blocks": n_blocks, "n_resamples": int(n_resamples), "n_shuffles": int(n_shuffles),
                           "confidence": float(confidence), "seed": seed, "complete_only": bool(complete_only)}
    if n_units == 0:
        return {**out, "full_accuracy": None, "crossfit_accuracy": None, "removal_share": None,
                "gain": {"mean": None, "low": None, "high": None, "n": 0}, "controls": {}, "decisions": []}
    gain = float(gain_u.mean())
    out.update({"full_accuracy": float(full_u.mean()), "crossfit_accuracy": float((full_u + gain_u).mean()),
                "removal_share": float((action >= 0).mean())})
    position = np.searchsorted(used, problem)
    cluster_gain = np.bincount(position, weights=gain_u, minlength=len(used))
    cluster_n = np.bincount(position, minlength=len(used)).astype(float)
    interval: dict[str, Any] = {"mean": gain, "low": None, "high": None, "n": int(len(used))}
    if len(used) >= 2:
        res = stats.bootstrap((cluster_gain, cluster_n), lambda g, n, axis: g.sum(axis=axis) / n.sum(axis=axis),
                              paired=True, vectorized=True, n_resamples=n_resamples, method="percentile",
                              confidence_level=confidence, rng=np.random.default_rng(seed))
        interval.update(low=float(res.confidence_interval.low), high=float(res.confidence_interval.high))
    out["gain"] = interval
    out["controls"] = _controls(gains_table, act, position, block, ~pad[used], n_blocks, n_shuffles,
                                np.random.default_rng([seed, 1]), gain, confidence) if n_shuffles > 0 else {}
    message_ids = np.asarray([m for _, m in table.keys], dtype=int)
    message_of = np.where(slots >= 0, message_ids[np.maximum(slots, 0)], -1)
    out["decisions"] = [{"problem_id": table.problems[p], "held_out_block": int(h),
                         "removed_message_id": None if a < 0 else int(message_of[p, a])}
                        for p, h, a in zip(problem.tolist(), block.tolist(), action.tolist(), strict=True)]
    return out
