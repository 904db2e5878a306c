"""Per-message trajectory values, the separation rule, its within-block permutation null, FDR selections.

**The separation rule.** A message is *separated* (its repeated-call effect is distinguishable from zero) when its
interval lies wholly above 0 (direction +1) or wholly below 0 (direction -1); with its proposal correctness this gives
the groups W+, W-, C+, C- (W: proposal wrong, C: proposal correct); every other message is ``indeterminate``, and so
is every message whose proposal correctness is unknown, whatever its interval. Two rules are available:

- ``method="bootstrap"`` (default, the paper's "repeated-call interval"): the interval is a percentile bootstrap of
  the mean over the message's evaluable block effects, ``scipy.stats.bootstrap(method="percentile")`` with
  ``n_resamples=9999`` and a fixed seed, on the block effects in sorted order.
- ``method="sign-flip"``: separated when the exact sign-flip p-value is below ``1 - confidence``, in the direction of
  the estimate (the reported interval stays the bootstrap one). With ``B = 5`` blocks the smallest two-sided exact
  p-value is ``2 / 32 = 0.0625``, so at ``confidence=0.95`` this rule separates nothing; it needs ``B >= 6``.

Block effects are in {-1, 0, +1}, so both rules depend on a message only through ``(n_eval, n_plus, n_minus)``, the
numbers of evaluable, helpful and harmful blocks (the bootstrap is run on the sorted effects with a fixed seed, so two
messages with the same counts always get the same interval). :func:`separation_rule` evaluates scipy once per
possible count triple (at most ``(B+1)(B+2)(B+3)/6`` of them) and keeps the result in a lookup table; both
:func:`message_values` and :func:`permutation_null` read that same table, so the observed counts and the null counts
use exactly one rule, and the null (a within-block sign flip of every block effect of every message keeps
``n_eval`` and ``n_plus + n_minus`` and redraws ``n_plus``) is a table lookup for all messages and permutations at
once.

**p-values** are the exact within-block sign-flip test of mean effect 0 (``scipy.stats.permutation_test`` with
``permutation_type="samples"``, which enumerates all ``2^B`` sign patterns; zero effects stay zero and non-evaluable
blocks contribute nothing). For ternary effects this equals the two-sided sign test, which is used instead for
``B > 12`` (``scipy.stats.binomtest``; identical values, without the ``2^B`` enumeration).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import GROUPS, EffectTable

logger = logging.getLogger(__name__)

METHODS = ("bootstrap", "sign-flip")
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
MAX_EXACT_BLOCKS = 12
UNKNOWN_PROPOSAL = "proposal correctness unknown: always indeterminate"
FEW_BLOCKS = "fewer than 2 evaluable blocks: no interval"


@dataclass(frozen=True)
class SeparationRule:
    """Interval, p-value and direction for every count triple ``[n_eval, n_plus, n_minus]`` (NaN/0 when impossible).

    Attributes:
        n_blocks: ``B``; arrays have shape ``(B+1, B+1, B+1)``.
        confidence: interval level (and ``1 - confidence`` is the sign-flip rule's alpha).
        method: ``"bootstrap"`` or ``"sign-flip"``.
        low, high: the percentile bootstrap interval of the mean (NaN for ``n_eval < 2``).
        p_value: the exact sign-flip p-value (NaN for ``n_eval == 0``).
        direction: +1 / -1 separated above / below zero, 0 otherwise (int8).
    """

    n_blocks: int
    confidence: float
    method: str
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    direction: np.ndarray

    def describe(self) -> str:
        """One sentence naming the rule (stored in reports)."""
        if self.method == "bootstrap":
            return (f"separated when the {self.confidence:.0%} percentile bootstrap interval of the mean block effect "
                    f"(scipy.stats.bootstrap, {BOOTSTRAP_RESAMPLES} resamples) lies wholly above or below 0")
        return (f"separated when the exact within-block sign-flip p-value is below {1 - self.confidence:.3g}, "
                f"in the direction of the estimate")


def _sign_flip_p_values(n_blocks: int) -> np.ndarray:
    """Exact two-sided sign-flip p-values indexed ``[n_plus, n_minus]`` for ternary block effects."""
    from scipy import stats

    size = n_blocks + 1
    out = np.full((size, size), np.nan)
    combos = [(p, m) for p in range(size) for m in range(size - p)]
    if n_blocks <= MAX_EXACT_BLOCKS:
        data = np.zeros((len(combos), max(n_blocks, 2)))  # zero padding leaves every sign-flip sum unchanged
        for row, (p, m) in enumerate(combos):
            data[row, :p] = 1.0
            data[row, p:p + m] = -1.0
        res = stats.permutation_test((data,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples",
                                     vectorized=True, n_resamples=np.inf, alternative="two-sided", axis=-1)
        values = np.minimum(np.asarray(res.pvalue, dtype=float), 1.0)
    else:
        values = np.asarray([stats.binomtest(p, p + m).pvalue if p + m else 1.0 for p, m in combos])
    for (p, m), value in zip(combos, values, strict=True):
        out[p, m] = value
    return out


def _bootstrap_intervals(n_blocks: int, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals of the mean indexed ``[n_eval, n_plus, n_minus]`` (scipy, batched per n_eval)."""
    from scipy import stats

    size = n_blocks + 1
    low, high = np.full((size,) * 3, np.nan), np.full((size,) * 3, np.nan)
    for n in range(2, size):
        combos = [(p, m) for p in range(n + 1) for m in range(n + 1 - p)]
        data = np.zeros((len(combos), n))
        for row, (p, m) in enumerate(combos):  # sorted: -1s, then 0s, then +1s
            data[row, :m] = -1.0
            data[row, n - p:] = 1.0
        res = stats.bootstrap((data,), np.mean, n_resamples=BOOTSTRAP_RESAMPLES, vectorized=True, axis=-1,
                              confidence_level=confidence, method="percentile",
                              rng=np.random.default_rng(BOOTSTRAP_SEED))
        for row, (p, m) in enumerate(combos):
            low[n, p, m] = res.confidence_interval.low[row]
            high[n, p, m] = res.confidence_interval.high[row]
    return low, high


@lru_cache(maxsize=64)
def separation_rule(n_blocks: int, confidence: float = 0.95, method: str = "bootstrap") -> SeparationRule:
    """The lookup table of the separation rule for ``B = n_blocks`` (computed once with scipy, then cached)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    size = n_blocks + 1
    low, high = _bootstrap_intervals(n_blocks, confidence)
    pairs = _sign_flip_p_values(n_blocks)
    n_eval, n_plus, n_minus = np.meshgrid(np.arange(size), np.arange(size), np.arange(size), indexing="ij")
    possible = n_plus + n_minus <= n_eval
    p_value = np.where(possible & (n_eval > 0), pairs[n_plus, n_minus], np.nan)
    if method == "bootstrap":
        up, down = low > 0, high < 0
    else:
        hit = (p_value < 1 - confidence) & (n_eval >= 2)
        up, down = hit & (n_plus > n_minus), hit & (n_plus < n_minus)
    direction = (up.astype(np.int8) - down.astype(np.int8)) * possible
    for array in (low, high, p_value, direction):
        array.setflags(write=False)
    return SeparationRule(n_blocks, confidence, method, low, high, p_value, direction.astype(np.int8))


def block_counts(table: EffectTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n_eval, n_plus, n_minus)`` per message; raises ValueError unless effects are -1, 0, +1 or NaN."""
    effects = table.effects
    finite = ~np.isnan(effects)
    if not np.isin(effects[finite], (-1.0, 0.0, 1.0)).all():
        raise ValueError("DHD block effects must be -1, 0, +1 or NaN (with_correct - without_correct)")
    return finite.sum(axis=1), (effects == 1).sum(axis=1), (effects == -1).sum(axis=1)


def _groups(code: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Group label per message from proposal code (0 W, 1 C, -1 unknown) and direction."""
    out = np.full(code.shape, "indeterminate", dtype=object)
    for c, letter in ((0, "W"), (1, "C")):
        out[(code == c) & (direction > 0)] = f"{letter}+"
        out[(code == c) & (direction < 0)] = f"{letter}-"
    return out


def message_values(table: EffectTable, confidence: float = 0.95, method: str = "bootstrap") -> Any:
    """Each message's trajectory value: the mean of its evaluable matched block effects, interval, p-value, group.

    Args:
        table: from :func:`pair_effects`.
        confidence: interval level.
        method: the separation rule deciding the groups, ``"bootstrap"`` (interval wholly above/below 0) or
            ``"sign-flip"`` (exact p-value below ``1 - confidence``); see the module docstring.

    Returns:
        A pandas DataFrame, one row per message in table order, with ``problem_id``, ``message_id``,
        ``proposal_correct``, ``estimate`` (mean effect over evaluable blocks, NaN if none), ``n_blocks`` (evaluable
        blocks), ``n_helpful``, ``n_harmful``, ``strict`` (every block evaluable), ``low``/``high`` (percentile
        bootstrap interval of the mean over the message's blocks; NaN with fewer than 2 evaluable blocks),
        ``p_value`` (exact sign-flip), ``direction`` (+1/-1/0 by the rule), ``group`` (W+, W-, C+, C- or
        indeterminate) and ``note`` (why a message is indeterminate regardless of its effects). ``attrs["rule"]``
        describes the rule. Effects are fractions (x100 for percentage points).
    """
    import pandas as pd

    rule = separation_rule(table.n_blocks, float(confidence), method)
    n_eval, n_plus, n_minus = block_counts(table)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(n_eval > 0, (n_plus - n_minus) / np.maximum(n_eval, 1), np.nan)
    direction = rule.direction[n_eval, n_plus, n_minus]
    code = table.proposal_code
    note = np.full(table.n_messages, "", dtype=object)
    note[n_eval < 2] = FEW_BLOCKS
    note[code < 0] = UNKNOWN_PROPOSAL
    frame = pd.DataFrame({
        "problem_id": [k[0] for k in table.keys], "message_id": [k[1] for k in table.keys],
        "proposal_correct": list(table.proposal_correct), "estimate": estimate, "n_blocks": n_eval,
        "n_helpful": n_plus, "n_harmful": n_minus, "strict": n_eval == table.n_blocks,
        "low": rule.low[n_eval, n_plus, n_minus], "high": rule.high[n_eval, n_plus, n_minus],
        "p_value": rule.p_value[n_eval, n_plus, n_minus], "direction": direction.astype(int),
        "group": _groups(code, direction), "note": note,
    })
    frame.attrs["rule"] = {"method": method, "confidence": float(confidence), "description": rule.describe()}
    return frame


def check_values(table: EffectTable, values: Any) -> None:
    if len(values) != table.n_messages or list(zip(values["problem_id"], values["message_id"], strict=True)) != [
            (p, m) for p, m in table.keys]:
        raise ValueError("values do not match the table: pass message_values(table) of this same table")


def group_counts(groups: Any, mask: np.ndarray | None = None) -> dict[str, int]:
    """Counts of W+, W-, C+, C-, indeterminate (and ``separated`` = the first four) among ``mask``."""
    groups = np.asarray(groups, dtype=object)
    if mask is not None:
        groups = groups[np.asarray(mask, dtype=bool)]
    counts = {g: int((groups == g).sum()) for g in GROUPS}
    counts["indeterminate"] = int(len(groups) - sum(counts.values()))
    counts["separated"] = int(sum(counts[g] for g in GROUPS))
    return counts


def strict_counts(table: EffectTable, values: Any) -> dict[str, int]:
    """Group counts among *strict* messages: both arms evaluable in every block of the table.

    Returns:
        ``{W+, W-, C+, C-, indeterminate, separated, n_strict, n_messages}``.
    """
    check_values(table, values)
    strict = np.asarray(values["strict"], dtype=bool)
    return {**group_counts(values["group"], strict), "n_strict": int(strict.sum()), "n_messages": table.n_messages}


def _popcount_table() -> np.ndarray:
    bits = np.arange(1 << 16, dtype=np.uint32)
    count = np.zeros(1 << 16, dtype=np.uint8)
    for shift in range(16):
        count += ((bits >> shift) & 1).astype(np.uint8)
    return count


def permutation_null(table: EffectTable, n_permutations: int = 5000, seed: int = 0, confidence: float = 0.95,
                     method: str = "bootstrap", null_level: float = 0.95,
                     return_null: bool = False) -> dict[str, Any]:
    """Null distribution of the separated counts under within-block sign flips of every message's effects.

    Each permutation flips the sign of every block effect of every message independently with probability 1/2 (the
    with and without arms of each pair swapped; zero effects stay zero, non-evaluable blocks stay non-evaluable) and
    re-applies exactly the separation rule of :func:`message_values` (same ``confidence`` and ``method``). A
    permutation is drawn as one random bit pattern per message (bit b = the sign of block b), masked by the
    message's nonzero blocks and counted, then the rule's lookup table gives every message's direction; no Python
    loop runs over permutations or messages. Messages without a nonzero effect, with fewer than two evaluable blocks
    or with unknown proposal correctness cannot change group and are counted once.

    Args:
        table: from :func:`pair_effects`.
        n_permutations: number of random sign-flip permutations.
        seed: seed of the permutations.
        confidence, method: the separation rule (must match the :func:`message_values` call being calibrated).
        null_level: coverage of the reported null count ranges (0.95: the 2.5th and 97.5th percentiles, taken
            outward so they are counts).
        return_null: also return the null counts, an int array (n_permutations x 5) in the order W+, W-, C+, C-,
            separated.

    Returns:
        ``observed`` (counts of W+, W-, C+, C-, separated), ``null`` (per count: ``low``, ``high``, ``mean``),
        ``p_value`` (global: share of permutations with at least the observed separated count, with the +1
        correction), ``p_values`` (the same per count), ``n_permutations``, ``n_messages``, ``n_active`` (messages
        whose group can change), ``method``, ``confidence``, ``seed`` and ``rule``.
    """
    rule = separation_rule(table.n_blocks, float(confidence), method)
    n_blocks = table.n_blocks
    n_eval, n_plus, n_minus = block_counts(table)
    code = table.proposal_code.astype(np.int64)
    names = (*GROUPS, "separated")
    size = (n_blocks + 1) ** 2
    # category LUT over [class, n_eval, n_plus, n_minus]: 0 W+, 1 W-, 2 C+, 3 C-, 4 not separated
    category = np.full((2, n_blocks + 1, n_blocks + 1, n_blocks + 1), 4, dtype=np.uint8)
    for c in (0, 1):
        category[c][rule.direction > 0] = 2 * c
        category[c][rule.direction < 0] = 2 * c + 1
    category = category.ravel()
    known = code >= 0
    observed_cat = category[np.where(known, code, 0) * (n_blocks + 1) * size + n_eval * size
                            + n_plus * (n_blocks + 1) + n_minus]
    observed_cat = np.where(known, observed_cat, 4)
    observed = np.bincount(observed_cat, minlength=5)[:4]
    n_nz = n_plus + n_minus
    active = known & (n_eval >= 2) & (n_nz > 0)
    fixed = np.bincount(observed_cat[known & ~active], minlength=5)[:4]
    nonzero = ~np.isnan(table.effects[active]) & (table.effects[active] != 0)
    n_words = max(1, -(-n_blocks // 16))
    masks = np.zeros((n_words, int(active.sum())), dtype=np.uint16)
    for b in range(n_blocks):
        masks[b // 16] |= (nonzero[:, b].astype(np.uint16) << np.uint16(b % 16))
    # n_minus = n_nz - n_plus, so the flat index is base + n_plus * B
    base = (code[active] * (n_blocks + 1) * size + n_eval[active] * size + n_nz[active]).astype(np.int64)
    popcount = _popcount_table()
    rng = np.random.default_rng(seed)
    null = np.zeros((n_permutations, 5), dtype=np.int64)
    n_active = int(active.sum())
    chunk = max(1, 4_000_000 // max(n_active, 1))
    for start in range(0, n_permutations, chunk):
        stop = min(start + chunk, n_permutations)
        plus = np.zeros((stop - start, n_active), dtype=np.int64)
        for w in range(n_words):
            draws = rng.integers(0, 1 << 16, size=(stop - start, n_active), dtype=np.uint16)
            plus += popcount[draws & masks[w]]
        cats = category[base + plus * n_blocks]
        for g in range(4):
            null[start:stop, g] = (cats == g).sum(axis=1)
    null[:, :4] += fixed
    null[:, 4] = null[:, :4].sum(axis=1)
    observed = [*(int(v) for v in observed), int(observed.sum())]
    tail = (1 - null_level) / 2 * 100
    summary = {name: {"low": int(np.percentile(null[:, i], tail, method="lower")),
                      "high": int(np.percentile(null[:, i], 100 - tail, method="higher")),
                      "mean": float(null[:, i].mean())} for i, name in enumerate(names)}
    p_values = {name: float((1 + (null[:, i] >= observed[i]).sum()) / (1 + n_permutations))
                for i, name in enumerate(names)}
    out = {"observed": dict(zip(names, observed, strict=True)), "null": summary, "p_value": p_values["separated"],
           "p_values": p_values, "n_permutations": int(n_permutations), "n_messages": table.n_messages,
           "n_active": n_active, "method": method, "confidence": float(confidence), "seed": seed,
           "rule": rule.describe()}
    if return_null:
        out["null_counts"] = null
    return out


def fdr_selection(p_values: Any, q: float = 0.05, values: Any = None) -> dict[str, Any]:
    """Benjamini-Hochberg and Benjamini-Yekutieli selections (``scipy.stats.false_discovery_control``).

    Args:
        p_values: one p-value per message; NaN (no evaluable block) is never selected and not counted as a test.
        q: the false-discovery level: a message is selected when its adjusted p-value is ``<= q``.
        values: optional :func:`message_values` frame aligned with ``p_values``; then ``counts`` gives the selected
            messages by proposal correctness and sign of the estimate (W+, W-, C+, C-; unknown proposals are
            ``indeterminate``).

    Returns:
        ``{"bh": bool mask, "by": bool mask, "q", "n_tests", "n_bh", "n_by"}`` (+ ``counts`` with ``values``).
    """
    from scipy import stats

    p = np.asarray(p_values, dtype=float)
    finite = np.isfinite(p)
    out: dict[str, Any] = {"q": float(q), "n_tests": int(finite.sum())}
    for name in ("bh", "by"):
        mask = np.zeros(p.shape, dtype=bool)
        if finite.any():
            mask[finite] = stats.false_discovery_control(p[finite], method=name) <= q
        out[name] = mask
        out[f"n_{name}"] = int(mask.sum())
    if values is not None:
        if len(values) != len(p):
            raise ValueError("fdr_selection: values and p_values differ in length")
        code = np.asarray([-1 if v is None else int(bool(v)) for v in values["proposal_correct"]])
        groups = _groups(code, np.sign(np.nan_to_num(np.asarray(values["estimate"], dtype=float))))
        out["counts"] = {name: group_counts(groups, out[name]) for name in ("bh", "by")}
    return out


def _json_float(value: Any) -> float | None:
    value = float(value)
    return None if np.isnan(value) else value


def labels_rows(table: EffectTable, values: Any) -> list[dict[str, Any]]:
    """The labels file: one JSON-serializable dict per (problem, message).

    ``label`` follows the separation direction whatever the proposal correctness (trajectory value is the point):
    ``helpful`` (interval above 0), ``harmful`` (below 0), else ``neutral-or-unclear``; ``group`` adds the proposal
    correctness. NaN becomes ``None``.
    """
    check_values(table, values)
    rows = []
    labels = {1: "helpful", -1: "harmful", 0: "neutral-or-unclear"}
    for rec in values.to_dict("records"):
        rows.append({
            "problem_id": str(rec["problem_id"]), "message_id": int(rec["message_id"]),
            "estimate": _json_float(rec["estimate"]), "low": _json_float(rec["low"]), "high": _json_float(rec["high"]),
            "p_value": _json_float(rec["p_value"]), "group": str(rec["group"]), "label": labels[int(rec["direction"])],
            "proposal_correct": None if rec["proposal_correct"] is None else bool(rec["proposal_correct"]),
            "n_blocks": int(rec["n_blocks"]), "strict": bool(rec["strict"]),
            "mode": table.mode, "K": table.K,
        })
    return rows
