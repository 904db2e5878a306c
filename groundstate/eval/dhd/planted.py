"""A simulated cache's selections compared with the effects ``dhd simulate`` planted: recall and false discoveries.

``groundstate dhd simulate`` writes the ground truth beside the cache (``simulation.json``,
:data:`~groundstate.eval.dhd.simulate.TRUTH_FILE`: per planted message its problem, message id, sign and group).
When ``dhd analyze`` runs on such a cache, :func:`planted_recall` scores each way the analysis selects effects
against that truth:

- ``separated``: the separation rule's groups (the per-message intervals, exploratory and unadjusted);
- ``bh_messages`` / ``by_messages``: the per-message BH / BY selections (Table 19's column);
- ``bh_problems`` / ``by_problems``: the problem-level BH / BY selections per family W+/W-/C+/C-
  (:mod:`~groundstate.eval.dhd.multiplicity`), scored per (problem, family).

A selected message is a *true discovery* when it was planted with the group it is selected in (the same proposal
class, which the data fix, and the same sign); every other selection is a *false discovery*, a planted message
selected with the wrong sign included. A problem selected in family ``g`` is a true discovery when one of its
messages was planted in group ``g``. ``recall`` is the true discoveries over the planted effects the analysis saw,
``fdp`` the false discoveries over the selections (``None`` when nothing was selected: no proportion to report).

A cache without ``simulation.json`` (every real cache) gets nothing: there is no truth to compare with. A
``simulation.json`` that does not fit :class:`Truth` is one :class:`~groundstate.errors.InputError` line naming the
file and the field, raised before the analysis writes anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr

from groundstate.eval.dhd.effects import GROUPS
from groundstate.eval.dhd.simulate import TRUTH_FILE
from groundstate.files import read_json
from groundstate.schema import validate

MEANING = ("recall: the share of the planted effects a selection found with the right sign; false discoveries: "
           "selections that are no planted effect of that sign (FDP: their share of the selections)")
"""What the two figures mean, in one line (printed and written beside them)."""

MIN_EFFECT = 0.01
"""The smallest true value (1 percentage point, in the planted direction) that counts as a planted effect."""

SELECTIONS = {"separated": "separation rule (per message, unadjusted)",
              "bh_messages": "BH (messages)", "by_messages": "BY (messages)",
              "bh_problems": "BH (problems, per family)", "by_problems": "BY (problems, per family)"}
"""The selections scored, with how tables head them."""


class PlantedMessage(BaseModel):
    """One planted effect of ``simulation.json``."""

    model_config = ConfigDict(extra="allow")
    problem_id: StrictStr
    message_id: StrictInt
    planted: Literal[1, -1]
    group: Literal[GROUPS]
    true_value: float | None = None


class Truth(BaseModel):
    """The part of ``simulation.json`` the comparison reads: the planted effects (other fields are allowed)."""

    model_config = ConfigDict(extra="allow")
    planted: list[PlantedMessage]


def read_truth(cache_dir: str | Path) -> list[dict[str, Any]] | None:
    """The planted effects of the cache in ``cache_dir`` (``[{problem_id, message_id, planted, group}]``), or
    ``None`` when it has no ``simulation.json`` (it was not simulated).

    Raises:
        InputError: ``simulation.json`` is not a regular readable JSON file or does not fit :class:`Truth` (one line
            naming the file and the field).
    """
    path = Path(cache_dir) / TRUTH_FILE
    if not os.path.lexists(path):
        return None
    truth = validate(Truth, read_json(path), file=path)
    return [p.model_dump(include={"problem_id", "message_id", "planted", "group", "true_value"})
            for p in truth.planted]


def effective(planted: Mapping[str, Any]) -> bool:
    """Whether a planted message is an effect at all: its true value (the expected block effect once the removal
    accuracy is clipped to [0, 1]) is at least :data:`MIN_EFFECT` in the planted direction. A helpful effect planted
    on a problem the integrator never solves (or a harmful one on a problem it always solves) is clipped to
    nothing; a truth file without ``true_value`` counts every planted message."""
    value = planted.get("true_value")
    return value is None or planted["planted"] * float(value) >= MIN_EFFECT


def _score(selected: Iterable[tuple[Any, str]], planted: Mapping[Any, str], n_planted: int, level: str
           ) -> dict[str, Any]:
    """Counts for one selection: ``selected`` holds ``(key, group)`` pairs, ``planted`` maps a key to its group."""
    n_selected = n_true = 0
    by_group = {g: {"selected": 0, "true": 0, "planted": sum(1 for v in planted.values() if v == g)} for g in GROUPS}
    for key, group in selected:
        n_selected += 1
        hit = planted.get(key) == group
        n_true += hit
        if group in by_group:
            by_group[group]["selected"] += 1
            by_group[group]["true"] += hit
    n_false = n_selected - n_true
    return {"level": level, "n_selected": n_selected, "true": n_true, "false": n_false, "n_planted": n_planted,
            "recall": n_true / n_planted if n_planted else None,
            "fdp": n_false / n_selected if n_selected else None, "by_group": by_group}


def selection_groups(values: Any) -> np.ndarray:
    """Per message, the group a per-message FDR selection puts it in: proposal class and the sign of its estimate
    (as :func:`~groundstate.eval.dhd.values.fdr_selection` counts them; unknown proposals are ``indeterminate``)."""
    from groundstate.eval.dhd.rule import group_labels  # noqa: PLC0415 (--help stays light)

    code = np.asarray([-1 if v is None else int(bool(v)) for v in values["proposal_correct"]])
    return group_labels(code, np.sign(np.nan_to_num(np.asarray(values["estimate"], dtype=float))))


def planted_recall(truth: Sequence[Mapping[str, Any]], keys: Sequence[tuple[str, int]], values: Any,
                   fdr: Mapping[str, Any], multiplicity: Mapping[str, Any]) -> dict[str, Any]:
    """Each selection of one replay mode scored against the planted truth (see the module notes).

    Args:
        truth: :func:`read_truth`'s planted effects.
        keys: the analysed messages ``(problem_id, message_id)``, in the order of ``values`` and the ``fdr`` masks.
        values: :func:`~groundstate.eval.dhd.values.message_values` of those messages (``group``, ``estimate``,
            ``proposal_correct``).
        fdr: :func:`~groundstate.eval.dhd.values.fdr_selection`'s result (its ``bh`` and ``by`` masks).
        multiplicity: :func:`~groundstate.eval.dhd.multiplicity.multiplicity`'s result (its ``families``).

    Returns:
        ``{"meaning", "n_planted", "n_planted_problems", "n_clipped", "n_not_analyzed", "selections"}``;
        ``selections`` maps each name of :data:`SELECTIONS` to ``{level, n_selected, true, false, n_planted, recall,
        fdp, by_group}``. Only :func:`effective` planted messages are effects (``n_clipped`` counts the others: a
        selection of one is a false discovery); planted messages the analysis did not see (``n_not_analyzed``:
        another mode's or pool size's) count in no denominator. Guarantees ``true + false == n_selected`` and
        ``true <= n_planted`` for every selection.
    """
    analysed = {(str(p), int(m)) for p, m in keys}
    seen = [t for t in truth if (t["problem_id"], int(t["message_id"])) in analysed]
    planted = {(t["problem_id"], int(t["message_id"])): t["group"] for t in seen if effective(t)}
    by_problem = {(p, g) for (p, _), g in planted.items()}
    index = list(zip([str(p) for p, _ in keys], [int(m) for _, m in keys], strict=True))
    groups = np.asarray(values["group"], dtype=object)
    fdr_groups = selection_groups(values)
    selections = {"separated": _score(((index[i], groups[i]) for i in range(len(index)) if groups[i] in GROUPS),
                                      planted, len(planted), "messages")}
    for name in ("bh", "by"):
        mask = np.asarray(fdr[name], dtype=bool)
        selections[f"{name}_messages"] = _score(((index[i], fdr_groups[i]) for i in np.flatnonzero(mask)),
                                                planted, len(planted), "messages")
        families = multiplicity.get("families") or {}
        chosen = (((str(entry["problem_id"]), family), family) for family in GROUPS
                  for entry in (families.get(family) or {}).get(f"selected_{name}", []))
        selections[f"{name}_problems"] = _score(chosen, {key: key[1] for key in by_problem}, len(by_problem),
                                                "problems")
    return {"meaning": MEANING, "n_planted": len(planted), "n_planted_problems": len(by_problem),
            "n_clipped": len(seen) - len(planted), "n_not_analyzed": len(truth) - len(seen),
            "min_effect": MIN_EFFECT, "selections": selections}


def _share(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.0f}%"


def recall_cells(entry: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` of one mode's :func:`planted_recall` result, for the terminal and Markdown tables."""
    header = ["selection", "selected", "true", "false discoveries (FDP)", "recall"]
    rows = []
    for name, title in SELECTIONS.items():
        s = entry["selections"].get(name)
        if s is None:
            continue
        rows.append([title, str(s["n_selected"]), str(s["true"]), f"{s['false']} ({_share(s['fdp'])})",
                     f"{s['true']}/{s['n_planted']} ({_share(s['recall'])})"])
    return header, rows


def recall_markdown(planted: Mapping[str, Mapping[str, Any]], heading: str = "##") -> list[str]:
    """Markdown lines for a report's ``planted_truth`` (one table per replay mode), ``[]`` when there is none."""
    lines: list[str] = []
    for mode, entry in planted.items():
        header, rows = recall_cells(entry)
        clipped = entry.get("n_clipped") or 0
        lines += [f"{heading} Selections against the planted truth ({mode}, simulated cache)", "",
                  f"{entry['n_planted']} planted effects ({entry['n_planted_problems']} problem-family pairs) in this "
                  "analysis" + (f"; {clipped} planted messages whose effect clipping left below "
                                f"{100 * MIN_EFFECT:.0f} pp count as no effect" if clipped else "")
                  + (f"; {entry['n_not_analyzed']} more not analysed here" if entry["n_not_analyzed"] else "")
                  + ". " + MEANING[0].upper() + MEANING[1:] + ".", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                  *("| " + " | ".join(row) + " |" for row in rows), ""]
    return lines
