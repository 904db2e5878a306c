"""Problem-blocked max-statistic analysis with BH and BY: the problem-level column beside Table 19's.

Follows the authors' ``analysis/problem_blocked_replay_multiplicity.py`` (algorithm only; written anew here), which
backs the paper's separate problem-blocked multiplicity check, not Table 19: the authors' published output of that
script (``data/derived/problem_blocked_replay_multiplicity.json``) does not give Table 19's BH counts, and their
script has no W- or C+ family. Table 19's "BH W+/W-/C+/C-" column counts per-message selections
(:mod:`groundstate.eval.dhd.message_tests` says why); groundstate shows these problem-level selections beside it as a
second, labelled column. The W- and C+ families here are groundstate's addition (the same max statistic, other
sign and class).

**Statistic.** Per problem whose every block is complete (both full-pool calls and every removal call evaluable in
all ``B`` blocks), each message's *delta sum* is ``d_i = sum_b (A_b + B_b - 2 removal_{i,b})``, an integer equal to
``2 B`` times its trajectory value. A problem has one statistic per family:

- ``W+``: ``max d_i`` over wrong-proposal messages (the authors' ``wrong_helpful``); ``W-``: ``max -d_i`` over them;
- ``C+``: ``max d_i`` over correct-proposal messages; ``C-``: ``max -d_i`` over them (``correct_harmful``);
- ``off_diagonal``: ``max(W+, C-)``; ``any_effect``: ``max |d_i|`` over all messages (unknown proposals included).

A problem without a message of a family's class is not tested in that family.

**Null.** Under the global no-effect null a block's calls are exchangeable, so each permutation, independently per
block, assigns the block's number of successes to a uniformly random subset of its ``K + 2`` slots and recomputes
the statistics; ``p = (1 + #{null >= observed}) / (1 + N)``. The null of a problem depends only on its *pattern*:
the sorted per-block success counts (blocks with 0 or ``K + 2`` successes add 0 to every ``d_i`` and are dropped),
``K`` and its numbers of wrong and correct messages (messages in canonical order: wrong, correct, unknown). Null
histograms are computed once per pattern, so the cost grows with the number of patterns, not of problems; a
pattern's generator is seeded from ``(seed, pattern)`` (``numpy.random.SeedSequence``, a hash of its entropy), so a
problem's p-values do not depend on the other problems. A problem whose blocks are all constant has every statistic
0 and p = 1.

**Selection.** Per family, BH and BY (``scipy.stats.false_discovery_control``) across the tested problems; a
problem is selected when its adjusted p-value is ``<= q``. The selected problems are listed with the message(s)
attaining the family's maximum. Problems with an incomplete block are excluded, counted and listed with their
first missing call. ``single`` tables work the same with one baseline call (``d_i = sum_b 2 (only - independent)``),
and ``full="a"`` LOO tables with replicate A only (``d_i = sum_b 2 (A_b - removal_{i,b})``).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import EffectTable

FAMILIES = ("W+", "W-", "C+", "C-", "off_diagonal", "any_effect")
DEFAULT_PERMUTATIONS = 100_000
CHUNK = 50_000
PACK = 8  # messages per int64 word (8-bit fields hold sums of up to 63 blocks of 0..4)
MAX_BLOCKS = 63


def _subset_bits(n_slots: int, successes: int) -> np.ndarray:
    """(C(n, s) x n) 0/1 rows: every way to place ``successes`` successes among ``n_slots`` slots."""
    rows = np.zeros((len(list(combinations(range(n_slots), successes))), n_slots), dtype=np.int16)
    for r, chosen in enumerate(combinations(range(n_slots), successes)):
        rows[r, list(chosen)] = 1
    return rows


def _statistics(delta: np.ndarray, n_wrong: int, n_correct: int) -> dict[str, np.ndarray | None]:
    """Family statistics over the first axis of ``delta`` (messages in canonical order: wrong, correct, unknown).

    Reductions run over the first (message) axis, row against row, which numpy does fast for a few long rows.
    """
    wrong, correct, other = delta[:n_wrong], delta[n_wrong:n_wrong + n_correct], delta[n_wrong + n_correct:]
    out: dict[str, np.ndarray | None] = dict.fromkeys(FAMILIES)
    extremes = []
    if n_wrong:
        out["W+"], out["W-"] = wrong.max(axis=0), -wrong.min(axis=0)
        extremes += [out["W+"], out["W-"]]
    if n_correct:
        out["C+"], out["C-"] = correct.max(axis=0), -correct.min(axis=0)
        extremes += [out["C+"], out["C-"]]
    off = [s for s in (out["W+"], out["C-"]) if s is not None]
    out["off_diagonal"] = np.maximum.reduce(off) if off else None
    if len(other):
        extremes.append(np.abs(other).max(axis=0))
    out["any_effect"] = np.maximum.reduce(extremes) if extremes else None
    return out


def pattern_null(pattern: tuple, n_permutations: int, seed: int) -> dict[str, np.ndarray]:
    """Null histograms (index ``value + offset``) of every family statistic for one pattern.

    ``pattern`` is ``(n_base, sign, n_messages, n_wrong, n_correct, n_blocks, successes...)``, the successes of the
    non-constant blocks in ascending order.
    """
    n_base, sign, width, n_wrong, n_correct, n_blocks, *successes = pattern
    offset = 2 * n_blocks
    rng = np.random.default_rng(np.random.SeedSequence([seed, n_base, sign + 1, width, n_wrong, n_correct, n_blocks,
                                                        *successes]))
    factor = 2 // n_base
    words = [np.arange(w, min(w + PACK, width)) for w in range(0, width, PACK)]
    tables = {}
    for s in set(successes):  # per placement: each message's block delta + 2 (0..4) packed in 8-bit fields
        bits = _subset_bits(n_base + width, s)
        d = sign * (factor * bits[:, :n_base].sum(axis=1, keepdims=True) - 2 * bits[:, n_base:]) + 2
        tables[s] = [(d[:, word].astype(np.int64) << (8 * np.arange(len(word)))).sum(axis=1) for word in words]
    hist = {f: np.zeros(2 * offset + 1, dtype=np.int64) for f in FAMILIES}
    for start in range(0, n_permutations, CHUNK):
        n = min(CHUNK, n_permutations - start)
        packed = [np.zeros(n, dtype=np.int64) for _ in words]
        for s in successes:
            draw = rng.integers(0, len(tables[s][0]), size=n)
            for w in range(len(words)):
                packed[w] += tables[s][w][draw]
        delta = np.empty((width, n), dtype=np.int16)
        for w, word in enumerate(words):
            for j, i in enumerate(word):
                delta[i] = ((packed[w] >> (8 * j)) & 255) - 2 * len(successes)
        for family, stat in _statistics(delta, n_wrong, n_correct).items():
            if stat is not None:
                hist[family] += np.bincount(stat.astype(np.intp) + offset, minlength=2 * offset + 1)
    return hist


def _first_gap(outcomes: np.ndarray, n_base: int, width: int, keys: list, rows: np.ndarray, mode: str) -> dict:
    """The first missing call of an incomplete problem: ``{block, arm, message_id}``."""
    b, slot = (int(x) for x in np.argwhere(np.isnan(outcomes[:, :n_base + width]))[0])
    if slot < n_base:
        arm = ("full", "full_b")[slot] if mode == "loo" else "independent"
        return {"block": b, "arm": arm, "message_id": None}
    return {"block": b, "arm": "without" if mode == "loo" else "only", "message_id": keys[rows[slot - n_base]][1]}


def multiplicity(table: EffectTable, n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0,
                 q: float = 0.05) -> dict[str, Any]:
    """The problem-blocked max-statistic analysis (see the module notes).

    Args:
        table: from :func:`~groundstate.eval.dhd.effects.pair_effects` (with arms).
        n_permutations: null permutations per pattern (default 100,000; the smallest p-value is ``1 / (1 + N)``).
        seed: base seed (each pattern's generator derives from it and the pattern).
        q: the false-discovery level of BH and BY.

    Returns:
        A JSON-able dict: ``families`` (per family: ``n_tested``, ``n_bh``, ``n_by``, ``selected_bh`` and
        ``selected_by``: ``{problem_id, message_ids, statistic, p_value, adjusted}`` sorted by p-value), ``bh`` and
        ``by`` (selected problems per family: the problem-level column beside Table 19's), ``problems`` (per
        tested problem: ``problem_id``, ``statistics`` and ``p_values`` per family, ``None`` when not tested),
        ``excluded`` (``problem_id``, ``block``, ``arm``, ``message_id`` of the first missing call),
        ``n_problems``, ``n_tested_problems``, ``n_excluded``, ``n_patterns``, ``n_permutations``, ``seed``,
        ``q`` and ``description``.
    """
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    blocks = table.block_outcomes()
    outcomes, rows, n_base, sign = blocks.outcomes, blocks.rows, blocks.n_base, blocks.sign
    n_problems, n_blocks, _ = outcomes.shape
    if n_blocks > MAX_BLOCKS:
        raise ValueError(f"the problem-level analysis supports up to {MAX_BLOCKS} blocks, got {n_blocks}")
    code = table.proposal_code
    factor = 2 // n_base
    results, excluded, patterns = [], [], {}
    for p in range(n_problems):
        present = np.flatnonzero(rows[p] >= 0)
        width = len(present)
        if np.isnan(outcomes[p, :, :n_base + width]).any():
            gap = _first_gap(outcomes[p], n_base, width, table.keys, rows[p], table.mode)
            excluded.append({"problem_id": table.problems[p], **gap})
            continue
        classes = code[rows[p, present]]
        order = np.concatenate([np.flatnonzero(classes == 0), np.flatnonzero(classes == 1),
                                np.flatnonzero(classes < 0)])
        cells = outcomes[p][:, np.concatenate([np.arange(n_base), n_base + order])].astype(int)
        delta = (sign * (factor * cells[:, :n_base].sum(axis=1, keepdims=True) - 2 * cells[:, n_base:])).sum(axis=0)
        n_wrong, n_correct = int((classes == 0).sum()), int((classes == 1).sum())
        successes = cells.sum(axis=1)
        pattern = (n_base, sign, width, n_wrong, n_correct, n_blocks,
                   *sorted(int(s) for s in successes if 0 < s < n_base + width))
        patterns.setdefault(pattern, None)
        message_ids = [table.keys[rows[p, present[i]]][1] for i in order]
        results.append((p, pattern, delta, n_wrong, n_correct, message_ids))
    for pattern in patterns:
        patterns[pattern] = pattern_null(pattern, n_permutations, seed) if len(pattern) > 6 else None
    offset = 2 * n_blocks
    problems = []
    for p, pattern, delta, n_wrong, n_correct, message_ids in results:
        observed = _statistics(delta, n_wrong, n_correct)
        entry = {"problem_id": table.problems[p], "statistics": {}, "p_values": {}, "argmax": {}}
        for family, value in observed.items():
            if value is None:
                entry["statistics"][family] = entry["p_values"][family] = entry["argmax"][family] = None
                continue
            value = int(value)
            hist = patterns[pattern]
            tail = n_permutations if hist is None else int(hist[family][value + offset:].sum())  # constant: all 0
            entry["statistics"][family] = value
            entry["p_values"][family] = (1 + tail) / (1 + n_permutations)
            entry["argmax"][family] = _argmax(family, delta, n_wrong, n_correct, value, message_ids)
        problems.append(entry)
    families = {}
    for family in FAMILIES:
        tested = [e for e in problems if e["p_values"][family] is not None]
        p_values = np.asarray([e["p_values"][family] for e in tested], dtype=float)
        info: dict[str, Any] = {"n_tested": len(tested)}
        for method in ("bh", "by"):
            adjusted = stats.false_discovery_control(p_values, method=method) if len(tested) else np.zeros(0)
            chosen = sorted((i for i in range(len(tested)) if adjusted[i] <= q), key=lambda i: p_values[i])
            info[f"n_{method}"] = len(chosen)
            info[f"selected_{method}"] = [
                {"problem_id": tested[i]["problem_id"], "message_ids": tested[i]["argmax"][family],
                 "statistic": tested[i]["statistics"][family], "p_value": float(p_values[i]),
                 "adjusted": float(adjusted[i])} for i in chosen]
        families[family] = info
    return {"families": families, "bh": {f: families[f]["n_bh"] for f in FAMILIES},
            "by": {f: families[f]["n_by"] for f in FAMILIES}, "problems": problems, "excluded": excluded,
            "n_problems": n_problems, "n_tested_problems": len(problems), "n_excluded": len(excluded),
            "n_patterns": len(patterns), "n_permutations": int(n_permutations), "seed": seed, "q": float(q),
            "description": "problem-level max statistics of the delta sums sum_b (A + B - 2 removal), within-block "
                           "permutation null shared per pattern, BH and BY across problems per family"}


def _argmax(family: str, delta: np.ndarray, n_wrong: int, n_correct: int, value: int, ids: list[int]) -> list[int]:
    """The message ids attaining a family's statistic."""
    index = np.arange(len(delta))
    if family in ("W+", "W-"):
        members, signed = index[:n_wrong], delta * (1 if family == "W+" else -1)
    elif family in ("C+", "C-"):
        members, signed = index[n_wrong:n_wrong + n_correct], delta * (1 if family == "C+" else -1)
    elif family == "off_diagonal":
        wrong = [i for i in index[:n_wrong] if delta[i] == value]
        correct = [i for i in index[n_wrong:n_wrong + n_correct] if -delta[i] == value]
        return sorted(ids[i] for i in wrong + correct)
    else:
        members, signed = index, np.abs(delta)
    return sorted(ids[i] for i in members if signed[i] == value)
