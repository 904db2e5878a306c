"""Aggregating OffQuery scores, and how well two T2 judges agree.

:func:`aggregate` gives means with 95% bootstrap intervals; :func:`pairwise_mae`, :func:`aggregate_spearman`,
:func:`cohens_kappa` and :func:`judge_agreement` measure how well two T2 judges agree (the paper's appendix
B.6-B.7). The scores themselves are in :mod:`~groundstate.eval.reground.scores`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from groundstate.eval.reground.contract import METRICS
from groundstate.eval.reground.judges import Judge
from groundstate.eval.reground.t2 import as_facts, state_text, t2_from_support
from groundstate.eval.stats import mean_ci
from groundstate.records import T2Fact

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------------
# aggregation
# ---------------------------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def aggregate(score_rows: Sequence[Mapping[str, float | None]], confidence: float = 0.95,
              n_resamples: int = 2000, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Mean of each metric over instances with a percentile bootstrap interval (``scipy.stats.bootstrap``).

    Args:
        score_rows: one ``{metric: value}`` dict per instance (``None``/NaN or an absent key = missing).
        confidence: the interval's confidence level.
        n_resamples: bootstrap resamples.
        seed: the bootstrap's random seed.

    Returns:
        ``{metric: {"mean", "low", "high", "n", "missing"}}`` for every metric seen in any row (``t1``, ``t2``,
        ``t3`` first), where ``n`` counts the values used and ``missing`` the rows without one.
    """
    names: list[str] = []
    for row in score_rows:
        names.extend(k for k in row if k not in names)
    first_seen = list(names)
    names.sort(key=lambda k: (METRICS.index(k) if k in METRICS else len(METRICS), first_seen.index(k)))
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        values = [float(row[name]) for row in score_rows if not _is_missing(row.get(name))]
        entry = dict(mean_ci(values, confidence=confidence, n_resamples=n_resamples, seed=seed))
        entry["missing"] = len(score_rows) - len(values)
        out[name] = entry
    return out


# ---------------------------------------------------------------------------------------------------------
# judge agreement (appendix B.6-B.7)
# ---------------------------------------------------------------------------------------------------------


def pairwise_mae(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Instance-level mean absolute error between two judges' per-instance T2 scores.

    Pairs where either score is ``None`` (T2 not applicable) are skipped.

    Raises:
        ValueError: the sequences differ in length, or no pair has two scores.
    """
    if len(a) != len(b):
        raise ValueError(f"score lists differ in length ({len(a)} vs {len(b)})")
    pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True) if not _is_missing(x) and not _is_missing(y)]
    if not pairs:
        raise ValueError("no instance has scores from both judges")
    return sum(abs(x - y) for x, y in pairs) / len(pairs)


def aggregate_spearman(a_by_setting: Mapping[str, float], b_by_setting: Mapping[str, float]) -> float:
    """Spearman rank correlation (``scipy.stats.spearmanr``) of two judges' aggregate scores across settings.

    Only the settings present in both mappings are used. The result is NaN when one judge gives every setting
    the same score (the ranking is undefined).

    Raises:
        ValueError: fewer than two settings in common.
    """
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    common = sorted(set(a_by_setting) & set(b_by_setting))
    if len(common) < 2:
        raise ValueError(f"need at least two settings scored by both judges, got {len(common)}")
    x = [float(a_by_setting[k]) for k in common]
    y = [float(b_by_setting[k]) for k in common]
    if len(set(x)) == 1 or len(set(y)) == 1:
        logger.warning("aggregate_spearman: a judge gives every setting the same score; correlation undefined")
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def cohens_kappa(a_labels: Sequence[Any], b_labels: Sequence[Any]) -> float:
    """Cohen's kappa between two raters' labels (``sklearn.metrics.cohen_kappa_score``).

    Identical label sequences give 1.0, even when they use a single class (where kappa is otherwise undefined).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    from sklearn.metrics import cohen_kappa_score  # noqa: PLC0415 (heavy: scikit-learn)

    a, b = list(a_labels), list(b_labels)
    if len(a) != len(b):
        raise ValueError(f"label lists differ in length ({len(a)} vs {len(b)})")
    if not a:
        raise ValueError("no labels")
    if a == b:
        return 1.0
    return float(cohen_kappa_score(a, b, replace_undefined_by=0.0))


def judge_agreement(judges: Mapping[str, Judge], cases: Sequence[tuple[str | None, Sequence[T2Fact | Mapping]]],
                    max_facts: int | None = None) -> dict[str, Any]:
    """How well T2 judges agree on the same (state, facts) cases.

    Each judge labels every fact of every case; its per-case T2 score follows :func:`t2_score` (an empty state
    supports no fact; a missing one scores 0 and its facts count as unsupported; cases without facts are
    skipped).

    Args:
        judges: name -> judge (at least two).
        cases: ``(state, facts)`` pairs, e.g. a program's states with their instances' gold facts.
        max_facts: score only the first ``max_facts`` facts of each case.

    Returns:
        ``{"n_cases", "n_facts", "judges": {name: {"mean_t2", "scores"}}, "pairs": [{"a", "b", "mae",
        "label_agreement", "kappa"}, ...]}`` with one entry per pair of judges: the instance-level MAE of T2
        scores, the share of facts labelled alike, and Cohen's kappa over the fact labels.

    Raises:
        ValueError: fewer than two judges or no case with facts.
        Exception: whatever a judge raised.
    """
    if len(judges) < 2:
        raise ValueError("judge_agreement needs at least two judges")
    prepared = []
    for state, facts in cases:
        gold = as_facts(facts)[:max_facts] if max_facts is not None else as_facts(facts)
        if gold:
            prepared.append((state_text(state), gold))
    if not prepared:
        raise ValueError("no case has T2 facts")
    labels: dict[str, list[bool]] = {}
    scores: dict[str, list[float]] = {}
    for name, judge in judges.items():
        labels[name], scores[name] = [], []
        for text, gold in prepared:
            support = judge.supported(text, [f.text for f in gold]) if text else [False] * len(gold)
            if len(support) != len(gold):
                raise ValueError(f"judge '{name}' returned {len(support)} decisions for {len(gold)} facts")
            labels[name].extend(bool(s) for s in support)
            scores[name].append(0.0 if text is None else t2_from_support(support, [f.label for f in gold]))
    pairs = []
    for a, b in combinations(judges, 2):
        same = sum(x == y for x, y in zip(labels[a], labels[b], strict=True))
        pairs.append({
            "a": a,
            "b": b,
            "mae": pairwise_mae(scores[a], scores[b]),
            "label_agreement": same / len(labels[a]),
            "kappa": cohens_kappa(labels[a], labels[b]),
        })
    return {
        "n_cases": len(prepared),
        "n_facts": len(labels[next(iter(judges))]),
        "judges": {name: {"mean_t2": sum(s) / len(s), "scores": s} for name, s in scores.items()},
        "pairs": pairs,
    }
