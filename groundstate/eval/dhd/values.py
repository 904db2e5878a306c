"""Per-message trajectory values and groups, strict counts, per-message FDR selections and the labels file.

**Trajectory value** (the paper's Table 17; the authors' ``labels.py``): a message's value is the mean of its
evaluable block effects (the block effect of :mod:`groundstate.eval.dhd.effects`: ``(A + B) / 2 - removal`` for
LOO), with a repeated-call interval and the separation rule of :mod:`groundstate.eval.dhd.rule`; with its proposal
correctness the direction gives the groups W+, W-, C+, C- (W: proposal wrong, C: proposal correct). Every other
message is ``indeterminate``, and so is every message whose proposal correctness is unknown, whatever its interval.
The authors label a message ``stable_helpful`` / ``stable_harmful`` exactly when it is separated above / below 0;
here that is ``label`` ``helpful`` / ``harmful`` in the labels file. The intervals are exploratory and unadjusted for
multiple comparisons (as the paper says).

**Calibration of the counts** is the within-block permutation null, :func:`groundstate.eval.dhd.null.permutation_null`
(re-exported here), which re-applies exactly this rule.

**Per-message FDR** (the paper's Table 19 column). :func:`fdr_selection` applies BH and BY to one p-value per
message: by default (``groundstate dhd analyze``) the exact within-block permutation p-values of
:func:`groundstate.eval.dhd.message_tests.block_permutation_p_values`, which reach ``(1/7)^5`` at five blocks
(see that module for why the paper's column is per-message). The exact sign-flip p-value of the separation rule
(``p_value`` below) cannot go below 0.0625 at five blocks, so BH/BY on it select nothing at the paper's size; it
stays available (``null="sign-flip"``) for designs with more blocks. The problem-level selections are
:mod:`groundstate.eval.dhd.multiplicity`.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import GROUPS, EffectTable
from groundstate.eval.dhd.null import permutation_null
from groundstate.eval.dhd.rule import METHODS, SeparationRule, effect_codes, group_labels, separation_rule

logger = logging.getLogger(__name__)

__all__ = ["METHODS", "SeparationRule", "check_values", "fdr_selection", "group_counts", "labels_rows",
           "message_values", "permutation_null", "separation_rule", "strict_counts"]

UNKNOWN_PROPOSAL = "proposal correctness unknown: always indeterminate"
FEW_BLOCKS = "fewer than 2 evaluable blocks: no interval"


def message_values(table: EffectTable, confidence: float = 0.95, method: str = "bootstrap") -> Any:
    """Each message's trajectory value: the mean of its evaluable block effects, interval, p-value, group.

    Args:
        table: from :func:`~groundstate.eval.dhd.effects.pair_effects`.
        confidence: interval level.
        method: the separation rule deciding the groups, ``"bootstrap"`` (interval wholly above/below 0) or
            ``"sign-flip"`` (exact p-value below ``1 - confidence``); see :mod:`groundstate.eval.dhd.rule`.

    Returns:
        A pandas DataFrame, one row per message in table order, with ``problem_id``, ``message_id``,
        ``proposal_correct``, ``estimate`` (mean effect over evaluable blocks, NaN if none), ``n_blocks`` (evaluable
        blocks), ``n_helpful`` / ``n_harmful`` (blocks with a positive / negative effect), ``strict`` (every block
        evaluable), ``low``/``high`` (percentile bootstrap interval of the mean over the message's blocks; NaN with
        fewer than 2 evaluable blocks), ``p_value`` (exact sign-flip), ``direction`` (+1/-1/0 by the rule),
        ``group`` (W+, W-, C+, C- or indeterminate) and ``note`` (why a message is indeterminate regardless of its
        effects). ``attrs["rule"]`` describes the rule. Effects are fractions (x100 for percentage points).
    """
    import pandas as pd  # noqa: PLC0415 (heavy: pandas)

    rule = separation_rule(table.n_blocks, float(confidence), method)
    codes, n_eval = effect_codes(table.effects, table.n_blocks)
    effects = table.effects
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(n_eval > 0, np.nansum(effects, axis=1) / np.maximum(n_eval, 1), np.nan)
    direction = rule.direction(codes)
    low, high, p_value = rule.stats(codes)
    code = table.proposal_code
    note = np.full(table.n_messages, "", dtype=object)
    note[n_eval < 2] = FEW_BLOCKS
    note[code < 0] = UNKNOWN_PROPOSAL
    frame = pd.DataFrame({
        "problem_id": [k[0] for k in table.keys], "message_id": [k[1] for k in table.keys],
        "proposal_correct": list(table.proposal_correct), "estimate": estimate, "n_blocks": n_eval,
        "n_helpful": (effects > 0).sum(axis=1), "n_harmful": (effects < 0).sum(axis=1),
        "strict": n_eval == table.n_blocks, "low": low, "high": high, "p_value": p_value,
        "direction": direction.astype(int), "group": group_labels(code, direction), "note": note,
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
    """Group counts among *strict* messages: every call of every block evaluable (the paper's strict counts).

    Returns:
        ``{W+, W-, C+, C-, indeterminate, separated, n_strict, n_messages}``.
    """
    check_values(table, values)
    strict = np.asarray(values["strict"], dtype=bool)
    return {**group_counts(values["group"], strict), "n_strict": int(strict.sum()), "n_messages": table.n_messages}


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
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

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
        groups = group_labels(code, np.sign(np.nan_to_num(np.asarray(values["estimate"], dtype=float))))
        out["counts"] = {name: group_counts(groups, out[name]) for name in ("bh", "by")}
    return out


def _json_float(value: Any) -> float | None:
    value = float(value)
    return None if np.isnan(value) else value


def labels_rows(table: EffectTable, values: Any) -> list[dict[str, Any]]:
    """The labels file: one JSON-serializable dict per (problem, message).

    ``label`` follows the separation direction whatever the proposal correctness (trajectory value is the point):
    ``helpful`` (interval above 0), ``harmful`` (below 0), else ``neutral-or-unclear``; ``group`` adds the proposal
    correctness. ``p_value`` is the rule's exact sign-flip p-value; ``p_block`` (when ``values`` has that column,
    as ``groundstate dhd analyze`` gives it) the exact within-block permutation p-value. NaN becomes ``None``.
    """
    check_values(table, values)
    rows = []
    labels = {1: "helpful", -1: "harmful", 0: "neutral-or-unclear"}
    for rec in values.to_dict("records"):
        rows.append({
            "problem_id": str(rec["problem_id"]), "message_id": int(rec["message_id"]),
            "estimate": _json_float(rec["estimate"]), "low": _json_float(rec["low"]), "high": _json_float(rec["high"]),
            "p_value": _json_float(rec["p_value"]),
            **({"p_block": _json_float(rec["p_block"])} if "p_block" in rec else {}),
            "group": str(rec["group"]), "label": labels[int(rec["direction"])],
            "proposal_correct": None if rec["proposal_correct"] is None else bool(rec["proposal_correct"]),
            "n_blocks": int(rec["n_blocks"]), "strict": bool(rec["strict"]),
            "mode": table.mode, "K": table.K,
        })
    return rows
