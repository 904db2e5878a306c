"""DHD component masking: which part of a message carries its effect?

For each chosen ``(problem, message)`` pair and each repetition the integrator runs six variants over the
problem's pool:

==================  ==============================================================================  =========
variant             what the integrator sees                                                          pattern
==================  ==============================================================================  =========
``full``            the pool as is                                                                    ``11111``
``repeat``          the identical full pool again (another rollout id: a same-input check)            ``11111``
``remove``          the pool without the message                                                      ``11011``
``neutral``         the message replaced by a neutral placeholder of similar length                   ``11n11``
``hide_answer``     the message with its proposed answer blanked                                      ``11a11``
``hide_reasoning``  only the message's proposed answer kept                                           ``11r11``
==================  ==============================================================================  =========

Rollout keys are ``dhd-mask|<problem>|m<message>|<pattern>|rep<r>|<variant>``, so every variant and repetition
is its own sample and a rerun is served from DSPy's cache. One runner record per ``(problem, message, rep)``.

**The sample.** Pairs are drawn per category (``wrong-helpful``, ``correct-helpful``, ``wrong-harmful``,
``correct-harmful``, ``indeterminate``), round-robin in that order, seeded. Categories come from a labels file
(``label`` helpful/harmful with ``proposal_correct``) when one is given, else from the sign of each message's
mean LOO effect at the largest replayed ``K`` (an unadjusted descriptive split, not a repeatability test), else
every pair is ``unclassified`` and the sample is a seeded random draw. The report (:func:`mask_table`) gives the
integrator's success rate (%) per category and variant, the shape of the paper's Table 23.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dspy

from groundstate.eval.dhd.cache import PoolEntry
from groundstate.eval.dhd.replay import Arm, BlockProgram, make_arm

VARIANTS: tuple[str, ...] = ("full", "repeat", "remove", "neutral", "hide_answer", "hide_reasoning")
CATEGORIES: tuple[str, ...] = ("wrong-helpful", "correct-helpful", "wrong-harmful", "correct-harmful",
                               "indeterminate")
UNCLASSIFIED = "unclassified"


def mask_arms(problem_id: str, pool_ids: Sequence[int], message_id: int, rep: int) -> list[Arm]:
    """The six variant arms for one message and repetition (see the module notes)."""
    pool = list(pool_ids)
    if message_id not in pool:
        raise ValueError(f"message {message_id} is not in the pool of problem {problem_id}")
    prefix = f"dhd-mask|{problem_id}|m{message_id}"
    full = {i: "full" for i in pool}
    others = {i: "full" for i in pool if i != message_id}
    variants = {
        "full": full,
        "repeat": full,
        "remove": others,
        "neutral": {**full, message_id: "neutral"},
        "hide_answer": {**full, message_id: "hide_answer"},
        "hide_reasoning": {**full, message_id: "hide_reasoning"},
    }
    return [make_arm(prefix, name, pool, shown, message_id, f"rep{rep}|{name}") for name, shown in variants.items()]


class MaskProgram(BlockProgram):
    """The runner program of ``dhd mask``: ``__call__(work)`` runs the six variants of one pair and repetition."""

    def __init__(self, *args: Any, k: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.k = k

    def __call__(self, work: Mapping[str, Any]) -> dspy.Prediction:
        pid, mid, rep = work["problem_id"], int(work["message_id"]), int(work["repeat"])
        pool_ids = [m.index for m in self.entries[pid].pool(self.k)]
        arms = self.run_arms(pid, mask_arms(pid, pool_ids, mid, rep))
        return dspy.Prediction(problem_id=pid, message_id=mid, repeat=rep, category=work.get("category"),
                               K=len(pool_ids), arms=arms)


def categories_from_pairs(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """Category per ``(problem, message)`` from the sign of its mean LOO effect at the largest ``K`` replayed."""
    loo = [r for r in rows if r.get("mode") == "loo"]
    if not loo:
        return {}
    k = max(int(r["K"]) for r in loo)
    effects: dict[tuple[str, int], list[int]] = defaultdict(list)
    proposals: dict[tuple[str, int], bool | None] = {}
    for row in loo:
        if int(row["K"]) != k:
            continue
        key = (row["problem_id"], int(row["message_id"]))
        proposals[key] = row.get("proposal_correct")
        if row["with_correct"] is not None and row["without_correct"] is not None:
            effects[key].append(int(row["with_correct"]) - int(row["without_correct"]))
    out = {}
    for key, proposal in proposals.items():
        values = effects.get(key, [])
        mean = sum(values) / len(values) if values else 0.0
        direction = "helpful" if mean > 0 else "harmful" if mean < 0 else None
        out[key] = _category(direction, proposal)
    return out


def categories_from_labels(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """Category per ``(problem, message)`` from a labels file (``label`` and ``proposal_correct``)."""
    out = {}
    for row in rows:
        label = row.get("label")
        direction = label if label in ("helpful", "harmful") else None
        out[(str(row["problem_id"]), int(row["message_id"]))] = _category(direction, row.get("proposal_correct"))
    return out


def _category(direction: str | None, proposal: Any) -> str:
    if direction is None or proposal is None:
        return "indeterminate"
    return f"{'correct' if proposal else 'wrong'}-{direction}"


def select_sample(entries: Mapping[str, PoolEntry], n: int, seed: int = 0,
                  categories: Mapping[tuple[str, int], str] | None = None,
                  k: int | None = None) -> list[dict[str, Any]]:
    """Up to ``n`` ``(problem, message)`` pairs, round-robin over categories, seeded (see the module notes)."""
    rng = random.Random(seed)
    pairs = [(pid, m.index) for pid in sorted(entries) for m in entries[pid].pool(k)]
    groups: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for pair in pairs:
        groups[(categories or {}).get(pair, UNCLASSIFIED if not categories else "indeterminate")].append(pair)
    for members in groups.values():
        rng.shuffle(members)
    order = [c for c in (*CATEGORIES, UNCLASSIFIED) if groups.get(c)]
    sample: list[dict[str, Any]] = []
    while len(sample) < n and any(groups[c] for c in order):
        for category in order:
            if groups[category] and len(sample) < n:
                pid, mid = groups[category].pop()
                sample.append({"problem_id": pid, "message_id": mid, "category": category})
    return sample


def mask_records(sample: Sequence[Mapping[str, Any]], repeats: int) -> list[dict[str, Any]]:
    """One work item per ``(problem, message, repetition)``, repetition by repetition."""
    return [{"id": f"{s['problem_id']}|m{s['message_id']}|rep{r}", "problem_id": s["problem_id"],
             "message_id": int(s["message_id"]), "repeat": r, "category": s.get("category")}
            for r in range(repeats) for s in sample]


def mask_table(blocks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Integrator success (%) per category and variant, with counts and operational failures.

    Returns ``{"variants": [...], "rows": {category: {"pairs": n, variant: {"success", "n", "failures"}}}}``
    plus an ``all`` row.
    """
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    pairs: dict[str, set] = defaultdict(set)
    for block in blocks:
        category = block.get("category") or UNCLASSIFIED
        for target in (category, "all"):
            pairs[target].add((block["problem_id"], block["message_id"]))
            for arm in block["arms"]:
                cell = counts[target][arm["arm"]]
                if arm["correct"] is None:
                    cell[2] += 1
                else:
                    cell[0] += int(arm["correct"])
                    cell[1] += 1
    order = [c for c in (*CATEGORIES, UNCLASSIFIED, "all") if c in counts]
    rows = {}
    for category in order:
        row: dict[str, Any] = {"pairs": len(pairs[category])}
        for variant in VARIANTS:
            ok, n, failed = counts[category].get(variant, [0, 0, 0])
            row[variant] = {"success": 100.0 * ok / n if n else None, "n": n, "failures": failed}
        rows[category] = row
    return {"variants": list(VARIANTS), "rows": rows}


def mask_markdown(table: Mapping[str, Any]) -> str:
    """The mask table as Markdown: one row per category, success % per variant."""
    variants = table["variants"]
    lines = ["| sample (pairs) | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for category, row in table["rows"].items():
        cells = [("-" if row[v]["success"] is None else f"{row[v]['success']:.0f}")
                 + (f" ({row[v]['failures']} failed)" if row[v]["failures"] else "") for v in variants]
        lines.append(f"| {category} ({row['pairs']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
