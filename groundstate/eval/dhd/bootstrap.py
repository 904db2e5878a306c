"""Hierarchical (problems, then matched blocks) bootstrap of mean trajectory value by proposal correctness.

The paper's Table 18 and the authors' ``analyze_repeated_effect_by_correctness.py``: resample problems within each
benchmark, then blocks within each drawn problem, all of the problem's messages sharing the sampled block indices;
a message's value is the mean of its block effects (``(A + B) / 2 - removal`` for LOO, see
:mod:`groundstate.eval.dhd.effects`), a group's statistic the mean over its messages. ``bench/dhd_calibration.py``
measures the interval's coverage of the true group means on the real design.

Why not ``scipy.stats.bootstrap``: it resamples observations along one axis (optionally paired across samples), a
single level. The paper's interval needs two nested levels: draw problems with replacement (keeping each problem's
messages together), then, *independently for every drawn copy of a problem*, draw its replay blocks with replacement
(the same block indices for all of that problem's messages, because blocks are matched). Expressing the inner level
in scipy would need a random statistic, which breaks its contract (the statistic must be a deterministic function of
the resample; BCa's jackknife and ``rng`` reproducibility rely on it). So the two levels are drawn here with numpy,
vectorized over resamples, and the interval is the percentile interval of the resampled statistic, as scipy's
``method="percentile"`` would compute it.

Resampling both levels counts the block-level noise once more than a problem-level bootstrap alone (it is already
inside each problem's observed estimates), so the intervals are slightly conservative.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import EffectTable
from groundstate.eval.dhd.values import check_values


def padded_by_problem(table: EffectTable) -> tuple[np.ndarray, np.ndarray]:
    """Messages regrouped per problem: ``(slots, effects)``.

    Returns:
        ``slots``: int (problems x max messages per problem), the message row of each slot or -1 (padding);
        ``effects``: float (problems x max messages x blocks), NaN for padding and non-evaluable blocks.
    """
    order = np.argsort(table.problem_index, kind="stable")
    problem = table.problem_index[order]
    n_problems = len(table.problems)
    counts = np.bincount(problem, minlength=n_problems)
    width = int(counts.max()) if len(counts) else 0
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.arange(len(order)) - starts[problem]
    slots = np.full((n_problems, width), -1, dtype=int)
    slots[problem, position] = order
    effects = np.full((n_problems, width, table.n_blocks), np.nan)
    effects[problem, position] = table.effects[order]
    return slots, effects


def _strata(table: EffectTable, stratify: Any) -> dict[str, np.ndarray]:
    """Problem indices per stratum label (one unnamed stratum without stratification)."""
    n = len(table.problems)
    if stratify is None or stratify is False:
        return {"": np.arange(n)}
    if stratify is True or isinstance(stratify, str):
        if table.strata is None:
            raise ValueError("stratify needs per-problem strata: the rows carried no 'benchmark' field")
        labels = list(table.strata)
    elif isinstance(stratify, Mapping):
        labels = [stratify[p] for p in table.problems]
    elif isinstance(stratify, Sequence | np.ndarray) and len(stratify) == n:
        labels = list(stratify)
    else:
        raise ValueError("stratify must be None, True/'benchmark', a mapping problem_id -> stratum, or one label "
                         "per problem")
    array = np.asarray(labels, dtype=object)
    return {str(s): np.flatnonzero(array == s) for s in dict.fromkeys(labels)}


def hierarchical_bootstrap(table: EffectTable, values: Any, n_resamples: int = 2000, seed: int = 0,
                           stratify: Any = None, confidence: float = 0.95) -> dict[str, Any]:
    """Mean value estimate of wrong- and correct-answer messages and their difference, with two-level intervals.

    Each resample draws problems with replacement (within each stratum when ``stratify`` is given, keeping the
    stratum's problem count), then for each drawn problem draws ``B`` block indices with replacement, shared by all
    of its messages; each message's resampled estimate is the mean of its evaluable resampled blocks (messages with
    none drop out of that resample), and a group's statistic is the mean over its messages.

    Args:
        table: from :func:`pair_effects`.
        values: :func:`message_values` of the same table (its ``estimate`` gives the point estimates).
        n_resamples: bootstrap resamples.
        seed: seed of the resampling.
        stratify: ``None``; ``True`` or ``"benchmark"`` (the table's per-problem strata); a mapping
            problem_id -> stratum; or one label per problem.
        confidence: interval level (percentile interval).

    Returns:
        ``wrong``, ``correct`` and ``difference`` (correct - wrong), each ``{"mean", "low", "high", "n"}`` (``n``:
        messages; mean effects as fractions, x100 for percentage points; ``None`` when a group is empty), plus
        ``n_problems``, ``n_resamples``, ``confidence``, ``strata`` (problems per stratum, or ``None``) and
        ``method``. Messages with unknown proposal correctness are in neither group.
    """
    check_values(table, values)
    code = table.proposal_code
    estimate = np.asarray(values["estimate"], dtype=float)
    slots, effects = padded_by_problem(table)
    n_problems, width, n_blocks = effects.shape
    group = np.where(slots >= 0, code[np.maximum(slots, 0)], -1)
    valid = ~np.isnan(effects)
    stacked = np.concatenate([np.nan_to_num(effects), valid.astype(float)], axis=1)  # (P, 2W, B)
    strata = _strata(table, stratify)
    rng = np.random.default_rng(seed)
    stats = np.full((n_resamples, 2), np.nan)
    chunk = max(1, 4_000_000 // max(n_problems * width * n_blocks * 2, 1))
    for start in range(0, n_resamples if n_problems and n_blocks else 0, chunk):
        r = min(chunk, n_resamples - start)
        drawn = np.concatenate([idx[rng.integers(0, len(idx), size=(r, len(idx)))] for idx in strata.values()],
                               axis=1)
        blocks = rng.integers(0, n_blocks, size=(r, n_problems, n_blocks))
        weights = (blocks[..., None] == np.arange(n_blocks)).sum(axis=-2).astype(float)  # (r, P, B) block counts
        sums = np.matmul(stacked[drawn], weights[..., None])[..., 0]  # (r, P, 2W)
        num, den = sums[..., :width], sums[..., width:]
        with np.errstate(invalid="ignore", divide="ignore"):
            resampled = num / den
        member = group[drawn]
        for g in (0, 1):
            use = (member == g) & (den > 0)
            total = use.sum(axis=(1, 2))
            with np.errstate(invalid="ignore", divide="ignore"):
                stats[start:start + r, g] = np.where(use, resampled, 0.0).sum(axis=(1, 2)) / total
    tail = (1 - confidence) / 2 * 100
    out: dict[str, Any] = {}
    draws = {"wrong": stats[:, 0], "correct": stats[:, 1], "difference": stats[:, 1] - stats[:, 0]}
    finite = np.isfinite(estimate)
    points = {name: estimate[finite & (code == g)] for name, g in (("wrong", 0), ("correct", 1))}
    for name, dist in draws.items():
        if name == "difference":
            n = len(points["wrong"]) + len(points["correct"])
            mean = (points["correct"].mean() - points["wrong"].mean()) if all(map(len, points.values())) else None
        else:
            n = len(points[name])
            mean = points[name].mean() if n else None
        dist = dist[np.isfinite(dist)]
        if mean is None or not len(dist):
            out[name] = {"mean": None if mean is None else float(mean), "low": None, "high": None, "n": int(n)}
            continue
        low, high = np.percentile(dist, [tail, 100 - tail])
        out[name] = {"mean": float(mean), "low": float(low), "high": float(high), "n": int(n)}
    stratified = stratify is not None and stratify is not False
    out.update({"n_problems": int(n_problems), "n_resamples": int(n_resamples), "confidence": float(confidence),
                "strata": {s: int(len(idx)) for s, idx in strata.items()} if stratified else None,
                "method": "two-level percentile bootstrap: problems (within strata), then matched blocks"})
    return out
