"""Permutation nulls of the separated counts (the paper's Table 19 brackets: "95% count ranges from 5,000
within-block permutations").

**Within-block permutation** (``null="block"``, the default). Under the global no-effect null the calls of one block
are exchangeable: a LOO block's two full-pool calls and its ``K`` removal calls (7 outcomes at ``K = 5``) all have
the problem's accuracy in that block, whichever message is hidden. Each permutation therefore, independently for
every problem and block, assigns the block's observed number of successes to a uniformly random subset of its
evaluable slots (the authors permute a block's outcomes), recomputes every message's block effects
``(A + B) / 2 - removal`` from the permuted outcomes, and re-applies exactly the separation rule of
:func:`~groundstate.eval.dhd.values.message_values` (same ``confidence`` and ``method``, the same lookup table of
:mod:`groundstate.eval.dhd.rule`). The five messages of a block keep sharing its full-pool outcomes, so the null
reproduces the dependence between them. Single-mode blocks permute their ``K + 1`` calls (independent solver and the
``only`` calls) the same way, and ``full="a"`` tables their ``K + 1`` calls (replicate A and the removals).

*Failed calls* (simplification, documented choice): a failed slot stays failed in its place and the successes are
permuted among the evaluable slots only, so every permutation has the observed pattern of non-evaluable effects.

**Vectorisation.** A block's permuted outcome is a bit mask over its slots; for each distinct (evaluable slots,
successes) pattern the possible masks are enumerated once and one uniform draw per (permutation, block) picks one.
A table over masks gives each message slot's contribution ``(B+1)^v`` to its multiset code (``v`` the index of its
effect value), so a permutation's codes for all messages are a sum over blocks of one gather; the rule's direction
table then gives every message's group. Python loops run over blocks and patterns only, never over permutations or
messages.

**Per-message sign flip** (``null="sign-flip"``, the null before issue 15): every block effect of every message is
sign-flipped independently with probability 1/2. It is exact only when the messages' effects are independent and
symmetric; under the real design (five messages sharing a block's full-pool calls, skewed effect distributions at
accuracies away from 1/2) it is *miscalibrated*: the observed separated count leaves its 95% range far more often
than 5% of null data sets (``bench/dhd_calibration.py`` measures both). Kept for comparison and for effect-only
tables without arms.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import GROUPS, EffectTable
from groundstate.eval.dhd.rule import N_VALUES, effect_codes, separation_rule, value_index

NULLS = ("block", "sign-flip")
MAX_SLOTS = 16
CHUNK_CELLS = 2_000_000


def subset_masks(evaluable_mask: int, successes: int) -> np.ndarray:
    """Every bit mask with ``successes`` bits set inside ``evaluable_mask`` (int64, ascending)."""
    bits = [i for i in range(evaluable_mask.bit_length()) if evaluable_mask >> i & 1]
    return np.asarray(sorted(sum(1 << i for i in chosen) for chosen in combinations(bits, successes)),
                      dtype=np.int64)


class BlockPermuter:
    """Draws within-block permutations of a table's outcomes as multiset codes of the permuted messages.

    Args:
        table: an :class:`EffectTable` with arms (from :func:`~groundstate.eval.dhd.effects.pair_effects`).
        rows: the table rows whose codes to produce (default all).
    """

    def __init__(self, table: EffectTable, rows: np.ndarray | None = None):
        blocks = table.block_outcomes()
        outcomes = blocks.outcomes
        n_problems, self.n_blocks, n_slots = outcomes.shape
        if n_slots > MAX_SLOTS:
            raise ValueError(f"the within-block null supports up to {MAX_SLOTS} calls per block, got {n_slots}")
        evaluable = ~np.isnan(outcomes)
        weights = 1 << np.arange(n_slots)
        evaluable_mask = (evaluable * weights).sum(axis=-1)
        successes = np.nansum(outcomes, axis=-1).astype(int)
        # a message slot's code contribution for every possible mask of a block
        all_masks = np.arange(1 << n_slots)
        bits = ((all_masks[:, None] >> np.arange(n_slots)) & 1).astype(float)
        effect = blocks.sign * (bits[:, :blocks.n_base].mean(axis=1, keepdims=True) - bits[:, blocks.n_base:])
        base = table.n_blocks + 1
        self.contribution = (base ** value_index(effect).astype(np.int64))  # (2^S, W)
        rows = np.arange(table.n_messages) if rows is None else np.asarray(rows, dtype=int)
        position = np.full(table.n_messages, -1)
        problem = np.full(table.n_messages, -1)
        p_idx, w_idx = np.nonzero(blocks.rows >= 0)
        position[blocks.rows[p_idx, w_idx]], problem[blocks.rows[p_idx, w_idx]] = w_idx, p_idx
        self.row_problem, self.row_position = problem[rows], position[rows]
        self.row_evaluable = ~np.isnan(table.effects[rows])  # (n, B): the cells that count, fixed under permutation
        keys = evaluable_mask * (n_slots + 1) + successes  # (P, B)
        self.groups: list[tuple[np.ndarray, np.ndarray]] = []  # (flat cells, possible masks)
        flat = keys.ravel()
        for key in np.unique(flat):
            cells = np.flatnonzero(flat == key)
            self.groups.append((cells, subset_masks(int(key // (n_slots + 1)), int(key % (n_slots + 1)))))
        self.shape = (n_problems, self.n_blocks)

    def codes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, rows) multiset codes of the rows under ``n`` independent within-block permutations."""
        masks = np.empty((n, self.shape[0] * self.shape[1]), dtype=np.int64)
        for cells, possible in self.groups:
            if len(possible) == 1:
                masks[:, cells] = possible[0]
            else:
                masks[:, cells] = possible[rng.integers(0, len(possible), size=(n, len(cells)))]
        masks = masks.reshape(n, *self.shape)
        codes = np.zeros((n, len(self.row_problem)), dtype=np.int64)
        for b in range(self.n_blocks):
            part = self.contribution[masks[:, self.row_problem, b], self.row_position]
            codes += np.where(self.row_evaluable[:, b], part, 0)
        return codes


class SignFlipper:
    """Draws per-message sign flips of every block effect as multiset codes (the ``"sign-flip"`` null).

    Args:
        effects: (rows x blocks) block effects (NaN: not evaluable, never flipped into evaluable).
        n_blocks: ``B`` of the codes.
    """

    def __init__(self, effects: np.ndarray, n_blocks: int):
        self.index = value_index(effects).astype(np.int64)
        self.powers = (n_blocks + 1) ** np.arange(N_VALUES, dtype=np.int64)

    def codes(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, rows) codes after flipping every evaluable effect's sign independently with probability 1/2."""
        codes = np.zeros((n, self.index.shape[0]), dtype=np.int64)
        for b in range(self.index.shape[1]):
            v = self.index[:, b]
            flipped = np.where(rng.random((n, len(v))) < 0.5, N_VALUES - 1 - v, v)
            codes += np.where(v >= 0, self.powers[np.clip(flipped, 0, N_VALUES - 1)], 0)
        return codes


def permutation_null(table: EffectTable, n_permutations: int = 5000, seed: int = 0, confidence: float = 0.95,
                     method: str = "bootstrap", null_level: float = 0.95, return_null: bool = False,
                     null: str = "block") -> dict[str, Any]:
    """Null distribution of the W+, W-, C+, C- and separated counts (see the module notes).

    Args:
        table: from :func:`~groundstate.eval.dhd.effects.pair_effects` (with arms for ``null="block"``).
        n_permutations: number of random permutations.
        seed: seed of the permutations.
        confidence, method: the separation rule (must match the :func:`message_values` call being calibrated).
        null_level: coverage of the reported null count ranges (0.95: the 2.5th and 97.5th percentiles, taken
            outward so they are counts).
        return_null: also return the null counts, an int array (n_permutations x 5) in the order W+, W-, C+, C-,
            separated.
        null: ``"block"`` (within-block permutation of the block's calls) or ``"sign-flip"`` (per-message sign
            flips; miscalibrated under shared full-pool calls, see the module notes).

    Returns:
        ``observed`` (counts of W+, W-, C+, C-, separated), ``null`` (per count: ``low``, ``high``, ``mean``),
        ``p_value`` (global: share of permutations with at least the observed separated count, with the +1
        correction), ``p_values`` (the same per count), ``n_permutations``, ``n_messages``, ``n_active`` (messages
        counted: known proposal and at least 2 evaluable blocks), ``null_kind``, ``method``, ``confidence``,
        ``seed``, ``rule`` and ``description``.

    Raises:
        ValueError: unknown ``null``, or ``null="block"`` on a table without arms.
    """
    if null not in NULLS:
        raise ValueError(f"null must be one of {NULLS}, got {null!r}")
    rule = separation_rule(table.n_blocks, float(confidence), method)
    codes, n_eval = effect_codes(table.effects, table.n_blocks)
    code = table.proposal_code.astype(np.int64)
    active = np.flatnonzero((code >= 0) & (n_eval >= 2))
    names = (*GROUPS, "separated")

    def categories(direction: np.ndarray) -> np.ndarray:  # 0 W+, 1 W-, 2 C+, 3 C-, 4 not separated
        return np.where(direction == 0, 4, 2 * code[active] + (direction < 0))

    observed_cat = categories(rule.direction(codes[active]))
    observed = [int((observed_cat == g).sum()) for g in range(4)]
    observed.append(sum(observed))
    rng = np.random.default_rng(seed)
    counts = np.zeros((n_permutations, 5), dtype=np.int64)
    sampler = (BlockPermuter(table, active) if null == "block"
               else SignFlipper(table.effects[active], table.n_blocks))
    chunk = max(1, CHUNK_CELLS // max(len(active) * max(table.n_blocks, 1), 1))
    for start in range(0, n_permutations if len(active) else 0, chunk):
        stop = min(start + chunk, n_permutations)
        cats = categories(rule.direction(sampler.codes(rng, stop - start)))
        for g in range(4):
            counts[start:stop, g] = (cats == g).sum(axis=1)
    counts[:, 4] = counts[:, :4].sum(axis=1)
    tail = (1 - null_level) / 2 * 100
    summary = {name: {"low": int(np.percentile(counts[:, i], tail, method="lower")),
                      "high": int(np.percentile(counts[:, i], 100 - tail, method="higher")),
                      "mean": float(counts[:, i].mean())} for i, name in enumerate(names)}
    p_values = {name: float((1 + (counts[:, i] >= observed[i]).sum()) / (1 + n_permutations))
                for i, name in enumerate(names)}
    description = ("within-block permutation: each block's successes reassigned to a uniformly random subset of its "
                   "evaluable calls (full-pool replicates and removals together), the rule re-applied"
                   if null == "block" else
                   "per-message sign flip of every block effect (ignores the shared full-pool calls; miscalibrated "
                   "under the real design)")
    out = {"observed": dict(zip(names, observed, strict=True)), "null": summary, "p_value": p_values["separated"],
           "p_values": p_values, "n_permutations": int(n_permutations), "n_messages": table.n_messages,
           "n_active": int(len(active)), "null_kind": null, "method": method, "confidence": float(confidence),
           "seed": seed, "rule": rule.describe(), "description": description}
    if return_null:
        out["null_counts"] = counts
    return out
