"""Per-message p-values by within-block permutation of the block's calls: the tests behind Table 19's BH column.

**Which selections the paper's Table 19 counts.** Its caption speaks of testing 5,000 messages (1,000 problems x 5
messages at K = 5), of BH controlling the false discoveries "among selected candidates" and of BY allowing
"arbitrary dependence among messages", and its BH column has four families (W+/W-/C+/C-). The authors' public code
has no generator for that column (their ``docs/PAPER_REPRODUCTION_MAP.md`` lists the table as unproven). Their one
multiplicity script, ``analysis/problem_blocked_replay_multiplicity.py``, tests *problems* (a max statistic over a
problem's messages) in four other families (wrong-helpful, correct-harmful, off-diagonal, any effect), and its
published output (``data/derived/problem_blocked_replay_multiplicity.json``: per model, wrong-helpful BH 13 for
Gemma and 0 for OSS, correct-harmful 0 and 1) matches neither Table 19's Gemma row (17/20/10/0) nor its OSS row
(0/0/0/0). So the published Table 19 column counts **per-message** selections; the problem-level analysis belongs to
another table of the paper (the problem-blocked multiplicity check). groundstate therefore reports the per-message
BH/BY selections of this module as the Table 19 column and the problem-level selections
(:mod:`~groundstate.eval.dhd.multiplicity`) as a second, labelled column. The paper does not say how its
per-message p-values were computed; this module uses the exact within-block permutation test below (the design the
paper's count null and the authors' problem-level script both permute).

**The test.** Under the global no-effect null the evaluable calls of one block are exchangeable: a LOO block's two
full-pool calls and its ``K`` removal calls all have the problem's accuracy in that block. A message's statistic is
its *delta sum* ``D = sum_b sign * (f * base_b - 2 * own_b)`` over its evaluable blocks, the integer ``2 B`` times its
trajectory value: ``A + B - 2 removal`` for LOO with both replicates (``f = 1``), ``2 (A - removal)`` with
``full="a"`` and ``2 (only - independent)`` for single-message replay (``f = 2``, one baseline call). Permuting a
block's ``s`` successes uniformly among its ``n`` evaluable calls moves the message's own slot and the block's
baseline slot(s) as a multivariate hypergeometric draw (``scipy.stats.multivariate_hypergeom``): ``a`` successes
among the ``n_base`` baseline slots and ``r`` in its own slot with probability
``C(n_base, a) C(1, r) C(n - n_base - 1, s - a - r) / C(n, s)``. Blocks are permuted independently, so the null
distribution of ``D`` is the convolution of its blocks' distributions, computed exactly (no random permutations).
The p-value is ``P(|D*| >= |D|)`` (two-sided, the default), ``P(D* >= D)`` (``"greater"``) or ``P(D* <= D)``
(``"less"``): the exact permutation p-value, so under the null ``P(p <= alpha) <= alpha`` at every ``alpha`` (it is
discrete, hence conservative between its attainable values).

A message helpful in all five blocks of a block with six successes (both full-pool calls right, its removal the
one wrong call) has ``p = (1/7)^5 = 5.9e-5``; the exact sign-flip p-value of :mod:`groundstate.eval.dhd.rule`
cannot go below ``2 / 2^5 = 0.0625`` at five blocks, so BH over thousands of messages can never select with it.

**Failed calls** follow the permutation null of the counts (:mod:`groundstate.eval.dhd.null`): a block counts for a
message only when its baseline call(s) and its own call are evaluable, and the block's successes are permuted among
its evaluable calls only (a failed call stays failed in its place). A message with no evaluable block has no
p-value (NaN), and is not a test.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import EffectTable

ALTERNATIVES = ("two-sided", "greater", "less")


@lru_cache(maxsize=4096)
def block_pmf(n_slots: int, successes: int, n_base: int, sign: int) -> tuple[tuple[int, float], ...]:
    """Null distribution of one block's term ``sign * (f * base - 2 * own)`` (``f = 2 // n_base``) when the block's
    ``successes`` are placed uniformly among its ``n_slots`` evaluable calls: ``(term, probability)`` pairs."""
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    factor = 2 // n_base
    others = n_slots - n_base - 1
    out: dict[int, float] = {}
    for a in range(n_base + 1):
        for r in (0, 1):
            rest = successes - a - r
            if not 0 <= rest <= others:
                continue
            p = float(stats.multivariate_hypergeom.pmf(x=[a, r, rest], m=[n_base, 1, others], n=successes))
            term = sign * (factor * a - 2 * r)
            out[term] = out.get(term, 0.0) + p
    return tuple(sorted(out.items()))


def delta_null(blocks: tuple[tuple[int, int], ...], n_base: int, sign: int) -> tuple[np.ndarray, int]:
    """``(pmf, offset)``: the exact null distribution of a delta sum over ``blocks`` (``(n_slots, successes)`` per
    evaluable block); ``pmf[d + offset]`` is ``P(D* = d)``."""
    offset = 2 * len(blocks)
    pmf = np.zeros(1)
    pmf[0] = 1.0
    for n_slots, successes in blocks:
        step = np.zeros(5)
        for term, p in block_pmf(n_slots, successes, n_base, sign):
            step[term + 2] += p
        pmf = np.convolve(pmf, step)
    return pmf, offset


def tail(pmf: np.ndarray, offset: int, observed: int, alternative: str = "two-sided") -> float:
    """The p-value of ``observed`` under ``pmf`` (see the module notes)."""
    values = np.arange(len(pmf)) - offset
    if alternative == "greater":
        mass = pmf[values >= observed].sum()
    elif alternative == "less":
        mass = pmf[values <= observed].sum()
    else:
        mass = pmf[np.abs(values) >= abs(observed)].sum()
    return float(min(1.0, mass))


def block_permutation_p_values(table: EffectTable, alternative: str = "two-sided") -> np.ndarray:
    """The exact within-block permutation p-value of every message (table order; see the module notes).

    Args:
        table: an :class:`EffectTable` with arms (from :func:`~groundstate.eval.dhd.effects.pair_effects`).
        alternative: ``"two-sided"`` (default), ``"greater"`` (helpful) or ``"less"`` (harmful).

    Returns:
        float array, one p-value per message; NaN for a message without an evaluable block. A message's p-value
        depends only on its own block pattern (the evaluable calls and successes of its blocks), never on the
        other problems.

    Raises:
        ValueError: an unknown ``alternative``, or a table without arms.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    blocks = table.block_outcomes()
    outcomes, n_base, sign = blocks.outcomes, blocks.n_base, blocks.sign
    factor = 2 // n_base
    evaluable = ~np.isnan(outcomes)
    n_slots = evaluable.sum(axis=-1)
    successes = np.nansum(outcomes, axis=-1).astype(int)
    base_ok = evaluable[..., :n_base].all(axis=-1)
    base_sum = np.nansum(outcomes[..., :n_base], axis=-1).astype(int)
    problem, position = np.nonzero(blocks.rows >= 0)
    rows = blocks.rows[problem, position]
    own = outcomes[problem, :, n_base + position]  # (messages, blocks)
    counts = base_ok[problem] & ~np.isnan(own)
    observed = np.where(counts, sign * (factor * base_sum[problem] - 2 * np.nan_to_num(own).astype(int)), 0).sum(1)
    out = np.full(table.n_messages, np.nan)
    nulls: dict[tuple, tuple[np.ndarray, int]] = {}
    done: dict[tuple, float] = {}
    for m, row in enumerate(rows):
        used = np.flatnonzero(counts[m])
        if not len(used):
            continue
        key = tuple(sorted(zip(n_slots[problem[m], used].tolist(), successes[problem[m], used].tolist(),
                               strict=True)))
        answer = done.get((key, int(observed[m])))
        if answer is None:
            if key not in nulls:
                nulls[key] = delta_null(key, n_base, sign)
            answer = done[(key, int(observed[m]))] = tail(*nulls[key], int(observed[m]), alternative)
        out[row] = answer
    return out


def describe(alternative: str = "two-sided") -> dict[str, Any]:
    """What the per-message p-values are (stored in reports beside the selections)."""
    return {"p_values": "within-block permutation", "alternative": alternative,
            "description": "exact within-block permutation p-value of each message's delta sum (the block's "
                           "successes placed uniformly among its evaluable calls, blocks independent)"}
