"""DHD component masking (the paper's Table 23): which part of a message carries its effect?

For each sampled ``(problem, message)`` pair and each repetition the integrator runs **eight** calls over the
problem's pool of ``K`` messages (the pool the labels were computed on):

==================  =====================================================================  =========  ========
variant             what the integrator sees                                               pattern    outcomes
==================  =====================================================================  =========  ========
``full``            the pool as is                                                         ``11111``  2
``repeat``          the identical full pool again (a same-input check)                     ``11111``  2
``remove``          the pool without the message (the others keep their order)             ``11011``  1
``neutral``         the message in its slot with every text field filled (a numeric        ``11n11``  1
                    confidence shows 0.50; a stated one is filled too)
``hide_answer``     the message in its slot with its proposed answer filled                ``11a11``  1
``hide_reasoning``  the message in its slot with its four reasoning fields filled          ``11r11``  1
==================  =====================================================================  =========  ========

So ``full`` and ``repeat`` are four identical-input calls, reported as two columns that each average their two
outcomes (the paper's "Full" and "Repeat"). Rollout keys are
``dhd-mask|<problem>|m<message>|<pattern>|rep<r>|<variant>|x<j>`` (``j`` = 0, 1 for the two outcomes of ``full``
and ``repeat``, 0 otherwise): every variant, replicate and repetition is its own sample, and a rerun is served
from DSPy's cache. One runner record per ``(problem, message, repetition)`` holds its eight arms.

**Filler.** :func:`filler` replaces every run of non-space characters by a filler word of exactly the same length
(``masked`` cut or padded with ``-``), keeping the whitespace, so a filled field has exactly the character length
and the word count of the text it replaces (tolerance 0). It is deterministic and carries nothing about the
problem (no digits, no words of the original). The masked message keeps its slot: it is shown at its own position,
under its own number, with the same field lines, and only the filled fields differ. Hide-answer fills
``proposed_answer``; hide-reasoning fills ``reasoning_direction``, ``key_idea``, ``critical_assumption`` and
``what_to_check`` (role and confidence kept); neutral fills the role and those five text fields and shows the
constant confidence 0.50 (same four characters as any confidence, the same for every message). These field groups
follow the authors' content-control code (``src/dhd/content_control.py``: answer fields, reasoning fields, every
rendered field), which matches word counts with a repeated filler word; here characters are matched too.

**The sample** is fixed from repeated LOO labels before any masking call and stored in ``sample.json`` in the
run directory (see :mod:`groundstate.eval.dhd.mask_sample`).

**The table** (:func:`mask_table`) gives per category and variant the integrator's success (%) over the evaluable
outcomes, in the paper's column order (Full, Repeat, Remove, Neutral replacement, Hide answer, Hide reasoning),
with the number of pairs per category. Every one of the five categories has its row, in the paper's order, even
when no message of it was sampled (the labels had none, or fewer than asked): such a row says 0 and its cells are
empty (``None``), never left out. Full and Repeat pool their two outcomes per repetition; with no failures
each cell is the mean over pairs and repetitions of the per-repetition mean of the variant's outcomes. Failed calls
(``correct=None``) are never counted as wrong and never dropped: each cell reports them.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.eval.dhd.replay import Arm, BlockProgram, make_arm, run_arm
from groundstate.eval.report import pipe_lines
from groundstate.eval.results import write_json
from groundstate.programs.dhd.views import (  # noqa: F401  (re-exported: the masking names users know)
    ANSWER_FIELDS,
    FILLED,
    NEUTRAL_CONFIDENCE,
    REASONING_FIELDS,
    filler,
    masked_message,
)
from groundstate.records import HypothesisMessage

logger = logging.getLogger(__name__)

VARIANTS: tuple[str, ...] = ("full", "repeat", "remove", "neutral", "hide_answer", "hide_reasoning")
OUTCOMES: dict[str, int] = {"full": 2, "repeat": 2, "remove": 1, "neutral": 1, "hide_answer": 1, "hide_reasoning": 1}
"""Integrator calls per variant and repetition (eight in all)."""
TITLES: dict[str, str] = {"full": "Full", "repeat": "Repeat", "remove": "Remove", "neutral": "Neutral replacement",
                          "hide_answer": "Hide answer", "hide_reasoning": "Hide reasoning"}
CATEGORIES: tuple[str, ...] = ("wrong-helpful", "correct-helpful", "wrong-harmful", "correct-harmful",
                               "indeterminate")
CATEGORY_TITLES: dict[str, str] = {c: c.capitalize() for c in CATEGORIES}
GROUP_CATEGORY: dict[str, str] = {"W+": "wrong-helpful", "C+": "correct-helpful", "W-": "wrong-harmful",
                                  "C-": "correct-harmful", "indeterminate": "indeterminate"}
TABLE_FILES = ("mask_table.json", "mask_table.md")


# -- the arms of one repetition --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MaskArm:
    """One integrator call of a masking repetition.

    Attributes:
        variant: one of :data:`VARIANTS`.
        replicate: 0 or 1 for the two identical-input outcomes of ``full`` and ``repeat``, else 0.
        view: how the target message is changed (``neutral``, ``hide_answer``, ``hide_reasoning``; ``None``: shown
            as is, or removed).
        arm: what runs: shown ids in pool order, their render views (all ``full``: masking substitutes the
            filled copy of the target), the pattern and the rollout key.
    """

    variant: str
    replicate: int
    view: str | None
    arm: Arm

    @property
    def slot(self) -> int | None:
        """The target's position among the shown messages (``None`` when removed)."""
        shown = list(self.arm.shown)
        return shown.index(self.arm.message_id) if self.arm.message_id in shown else None


def mask_arms(problem_id: str, pool_ids: Sequence[int], message_id: int, rep: int) -> list[MaskArm]:
    """The eight arms of one message and repetition (see the module notes)."""
    pool = list(pool_ids)
    if message_id not in pool:
        raise ValueError(f"message {message_id} is not in the pool of problem {problem_id}")
    prefix = f"dhd-mask|{problem_id}|m{message_id}"
    full = {i: "full" for i in pool}
    shown = {"full": full, "repeat": full, "remove": {i: "full" for i in pool if i != message_id},
             **{view: {**full, message_id: view} for view in ("neutral", "hide_answer", "hide_reasoning")}}
    arms = []
    for variant in VARIANTS:
        view = variant if variant in FILLED else None
        for j in range(OUTCOMES[variant]):
            arm = make_arm(prefix, variant, pool, shown[variant], message_id, f"rep{rep}|{variant}|x{j}")
            arms.append(MaskArm(variant, j, view, replace(arm, views=("full",) * len(arm.shown))))
    return arms


def mask_inputs(pool: Sequence[HypothesisMessage], arm: MaskArm) -> list[HypothesisMessage]:
    """The messages the integrator is given for ``arm``, in order (the target filled in its own slot)."""
    by_id = {m.index: m for m in pool}
    target = arm.arm.message_id
    return [masked_message(by_id[i], arm.view) if i == target and arm.view else by_id[i] for i in arm.arm.shown]


class MaskProgram(BlockProgram):
    """The runner program of ``dhd mask``: ``__call__(work)`` runs the eight arms of one pair and repetition."""

    def __init__(self, *args: Any, k: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.k = k

    def __call__(self, work: Mapping[str, Any]) -> dspy.Prediction:
        pid, mid, rep = work["problem_id"], int(work["message_id"]), int(work["repeat"])
        pool = self.entries[pid].pool(self.k)
        problem = self.problems[pid]

        def one(arm: MaskArm) -> dict[str, Any]:
            shown = mask_inputs(pool, arm)
            row = run_arm(self.program, self.evaluator, problem, {m.index: m for m in shown}, arm.arm)
            return {**row, "variant": arm.variant, "replicate": arm.replicate, "view": arm.view, "slot": arm.slot}

        arms = thread_map(one, mask_arms(pid, [m.index for m in pool], mid, rep), self.max_workers)
        return dspy.Prediction(problem_id=pid, message_id=mid, repeat=rep, category=work.get("category"),
                               group=work.get("group"), K=len(pool), arms=arms)


def mask_records(sample: Sequence[Mapping[str, Any]], repeats: int) -> list[dict[str, Any]]:
    """One work item per ``(problem, message, repetition)``, repetition by repetition."""
    return [{"id": f"{s['problem_id']}|m{s['message_id']}|rep{r}", "problem_id": s["problem_id"],
             "message_id": int(s["message_id"]), "repeat": r, "category": s.get("category"),
             "group": s.get("group")} for r in range(repeats) for s in sample]


# -- the table -------------------------------------------------------------------------------------------------------
def mask_table(blocks: Iterable[Mapping[str, Any]], sample: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Integrator success (%) per category and variant, in the paper's column order (see the module notes).

    Returns ``{"variants", "columns": [{"variant", "title"}], "outcomes_per_repetition", "failures", "rows"}``;
    ``rows`` maps each of the five categories (:data:`CATEGORIES`, an empty one included), any other category
    found in the blocks, then ``all``, to ``{"title", "pairs", "sampled", "repetitions", <variant>: {"success" (%
    or None), "correct", "n" (evaluable outcomes), "failures"}}``. ``sampled`` is the sample's count when
    ``sample`` (the ``sample.json`` document) is given.
    """
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    pairs: dict[str, set] = defaultdict(set)
    repetitions: dict[str, int] = defaultdict(int)
    sampled: dict[str, int] = defaultdict(int)
    for s in (sample or {}).get("pairs", []):
        for target in (s["category"], "all"):
            sampled[target] += 1
            _ = counts[target]  # a sampled category gets its row even before any of its blocks finishes
    for block in blocks:
        category = block.get("category") or "indeterminate"
        for target in (category, "all"):
            pairs[target].add((block["problem_id"], block["message_id"]))
            repetitions[target] += 1
            for arm in block["arms"]:
                cell = counts[target][arm.get("variant", arm["arm"])]
                if arm["correct"] is None:
                    cell[2] += 1
                else:
                    cell[0] += int(arm["correct"])
                    cell[1] += 1
    order = [*CATEGORIES, *sorted(c for c in counts if c not in (*CATEGORIES, "all"))]
    rows = {}
    for category in [*order, "all"]:
        row: dict[str, Any] = {"title": CATEGORY_TITLES.get(category, category.capitalize()),
                               "pairs": len(pairs[category]),
                               "sampled": sampled[category] if sample is not None else len(pairs[category]),
                               "repetitions": repetitions[category]}
        for variant in VARIANTS:
            ok, n, failed = counts[category].get(variant, [0, 0, 0])
            row[variant] = {"success": 100.0 * ok / n if n else None, "correct": ok, "n": n, "failures": failed}
        rows[category] = row
    failures = sum(rows["all"][v]["failures"] for v in VARIANTS)
    return {"variants": list(VARIANTS), "columns": [{"variant": v, "title": TITLES[v]} for v in VARIANTS],
            "outcomes_per_repetition": dict(OUTCOMES), "failures": failures, "rows": rows}


def _percent(value: float) -> str:
    return str(math.floor(value + 0.5 + 1e-9))  # half up, as the paper rounds (52.5 -> 53)


def mask_cells(table: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The mask table as ``(header, cells)`` in the layout of the paper's Table 23 (plus an ``All`` row):
    success (%) per variant, with the failed calls left out of it."""
    variants = table["variants"]
    body = []
    for row in table["rows"].values():
        cells = [("-" if row[v]["success"] is None else _percent(row[v]["success"]))
                 + (f" ({row[v]['failures']} failed)" if row[v]["failures"] else "") for v in variants]
        body.append([f"{row['title']} ({row['sampled']})", *cells])
    return ["Diagnostic sample (n)", *(TITLES[v] for v in variants)], body


def failures_note(table: Mapping[str, Any]) -> str | None:
    """What the rates leave out, or ``None`` when no call failed."""
    return f"{table['failures']} failed call(s) are left out of the rates (not counted as wrong)." \
        if table.get("failures") else None


def mask_markdown(table: Mapping[str, Any]) -> str:
    """The mask table as Markdown (:func:`mask_cells`, then :func:`failures_note`)."""
    note = failures_note(table)
    return "\n".join(pipe_lines(*mask_cells(table)) + ([f"\n{note}"] if note else []))


def write_table(run_dir: str | Path, table: Mapping[str, Any]) -> list[Path]:
    """``mask_table.json`` and ``mask_table.md`` in the run directory."""
    json_path, md_path = (Path(run_dir) / name for name in TABLE_FILES)
    write_json(json_path, table)
    md_path.write_text(mask_markdown(table) + "\n", encoding="utf-8")
    return [json_path, md_path]
