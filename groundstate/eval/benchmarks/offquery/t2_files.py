"""The published T2 files and the check that they belong to the data file they are given with.

The authors publish T2 beside the data, one pair of files per data set::

    datasets/<name>.json                      the instances
    task2_evaluation/truth/<name>.json        per instance: {"sampled_facts": [str], "golden_truth": [0|1]}
    task2_evaluation/facts/<name>.json        per instance: [reliable atomic facts, misleading atomic facts]

Both T2 files are aligned with the data by position, so a truth file of *another* data set with the same number
of records would be accepted by a count check alone (``mediQ_easy.json`` with ``truth/mediQ_hard.json``).
:func:`check_alignment` refuses that, with one line naming both files:

- with a facts file, exactly: each sampled fact labelled 1 must be one of that instance's reliable facts and
  each fact labelled 0 one of its misleading facts;
- without one, by content: the words of an instance's sampled facts must largely occur in that instance's own
  texts (label 1 in its reliable context, label 0 in its unreliable context and misleading evidence). A file
  is refused when most instances fall below :data:`MIN_CONTAINMENT`; our choice (the authors' code does no
  such check): matching files score about 0.8 and files of another data set about 0.2 on the published data.

:func:`default_facts_path` finds ``facts/<name>.json`` beside ``truth/<name>.json``.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import InputError
from groundstate.eval.io import read_json

#: The mean share of a sampled fact's words found in its own instance's texts below which an instance counts
#: as not matching.
MIN_CONTAINMENT = 0.5
_WORD = re.compile(r"[a-z]{3,}|\d+(?:\.\d+)?")
_COMMON = frozenset("the and with has have had for are was were his her she him this that from not patient "
                    "shows show there their they been who which per".split())


def read_truth(path: Path) -> list[Any]:
    """A T2 truth file: a JSON list of ``{"sampled_facts", "golden_truth"}`` entries aligned with the data."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of {sampled_facts, golden_truth} entries aligned with the data",
                         file=str(path))
    return data


def read_facts(path: Path) -> list[Any]:
    """A T2 facts file: a JSON list, per instance ``[reliable facts, misleading facts]``."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of [reliable facts, misleading facts] pairs aligned with the data",
                         file=str(path))
    for position, entry in enumerate(data):
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, list) for part in entry)):
            raise InputError("must be a pair [reliable facts, misleading facts] of lists", file=str(path),
                             record=position)
    return data


def default_facts_path(truth_path: Path) -> Path | None:
    """``.../facts/<name>.json`` when ``truth_path`` is ``.../truth/<name>.json`` and that file exists."""
    if truth_path.parent.name != "truth":
        return None
    candidate = truth_path.parent.parent / "facts" / truth_path.name
    return candidate if candidate.is_file() else None


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _COMMON


def _containment(facts: Sequence[str], source: set[str]) -> float | None:
    shares = [len(w & source) / len(w) for w in (_words(f) for f in facts) if w]
    return statistics.fmean(shares) if shares else None


def check_alignment(items: Sequence[Any], truth: Sequence[Any], data_path: Path, truth_path: Path,
                    facts: Sequence[Any] | None = None, facts_path: Path | None = None) -> None:
    """Refuse a T2 truth (and facts) file that does not belong to ``data_path`` (see the module docstring).

    Only entries of the right shape are checked; malformed entries are reported by the loader itself.

    Raises:
        InputError: one line naming the data file and the T2 file (and the first record that does not match,
            with a facts file).
    """
    pairs = [(item, entry) for item, entry in zip(items, truth, strict=False)
             if isinstance(item, dict) and isinstance(entry, dict)
             and isinstance(entry.get("sampled_facts"), list) and isinstance(entry.get("golden_truth"), list)]
    if facts is not None:
        for position, (entry, (reliable, misleading)) in enumerate(zip(truth, facts, strict=False)):
            if not isinstance(entry, dict):
                continue
            for fact, label in zip(entry.get("sampled_facts") or [], entry.get("golden_truth") or [], strict=False):
                pool = reliable if label == 1 else misleading
                if fact not in pool:
                    raise InputError(f"does not belong to {truth_path}: its T2 fact {str(fact)[:60]!r} (label "
                                     f"{label}) is not among the instance's facts in {facts_path}",
                                     file=str(data_path), record=position, field="t2_truth")
        if len(facts) != len(truth):
            raise InputError(f"{facts_path} has {len(facts)} entries but {truth_path} has {len(truth)}",
                             file=str(data_path), field="t2_truth")
    scores = []
    for item, entry in pairs:
        good = " ".join(str(item.get(k) or "") for k in ("original_context", "shared_information"))
        good += " " + " ".join(str(t) for t in item.get("shuffled_private_information") or [])
        bad = " ".join(str(item.get(k) or "") for k in ("unreliable_context", "malicious_information"))
        keep = [f for f, y in zip(entry["sampled_facts"], entry["golden_truth"], strict=False) if y == 1]
        drop = [f for f, y in zip(entry["sampled_facts"], entry["golden_truth"], strict=False) if y == 0]
        parts = [c for c in (_containment(keep, _words(good)), _containment(drop, _words(good + " " + bad)))
                 if c is not None]
        if parts:
            scores.append(statistics.fmean(parts))
    if scores and sum(score < MIN_CONTAINMENT for score in scores) > len(scores) / 2:
        raise InputError(f"does not belong to the T2 truth file {truth_path}: the sampled facts of most instances do "
                         f"not come from their own texts (median word overlap {statistics.median(scores):.2f}); "
                         "pass the truth file of this data set", file=str(data_path), field="t2_truth")
