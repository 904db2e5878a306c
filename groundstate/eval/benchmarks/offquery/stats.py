"""Counts and distributions that describe a set of OffQuery instances (``groundstate data stats``)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from groundstate.records import OffQueryInstance


def _summary(values: list[int]) -> dict[str, float | int | None]:
    if not values:
        return {"min": None, "mean": None, "max": None}
    return {"min": min(values), "mean": statistics.fmean(values), "max": max(values)}


def dataset_stats(instances: Iterable[OffQueryInstance]) -> dict[str, Any]:
    """Counts and distributions that describe a set of instances.

    Returns:
        A dict with ``n``; ``domain``, ``split`` and ``variant`` counts (``None`` counted as ``"none"``);
        ``agents`` and ``t2_facts`` per instance (``min``/``mean``/``max``, ``None`` when empty);
        ``t2_label_balance`` (share of facts labelled 1, ``None`` without facts) and ``t2_facts_total``;
        ``misleading`` (number of misleading agents -> number of instances); and the counts
        ``with_corrupted_context``, ``with_question``, ``with_wrong_answer``.
    """
    items = list(instances)
    labels = [fact.label for inst in items for fact in inst.t2_facts]

    def counts(values: Iterable[Any]) -> dict[str, int]:
        return dict(sorted(Counter("none" if v is None else str(v) for v in values).items()))

    return {
        "n": len(items),
        "domain": counts(i.domain for i in items),
        "split": counts(i.split for i in items),
        "variant": counts(i.variant for i in items),
        "agents": _summary([i.n_agents for i in items]),
        "t2_facts": _summary([len(i.t2_facts) for i in items]),
        "t2_facts_total": len(labels),
        "t2_label_balance": (sum(labels) / len(labels)) if labels else None,
        "misleading": dict(sorted(Counter(len(i.misleading) for i in items).items())),
        "with_corrupted_context": sum(i.corrupted_context is not None for i in items),
        "with_question": sum(i.question is not None for i in items),
        "with_wrong_answer": sum(i.wrong_answer is not None for i in items),
    }


def format_stats(stats: dict[str, Any]) -> str:
    """A readable two-column text table of :func:`dataset_stats`."""

    def number(value: Any) -> str:
        if value is None:
            return "-"
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    def spread(summary: dict[str, Any]) -> str:
        return " / ".join(number(summary[k]) for k in ("min", "mean", "max")) + "  (min / mean / max)"

    def shares(counter: dict[Any, int]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in counter.items()) or "-"

    n = stats["n"]
    balance = stats["t2_label_balance"]
    rows = [
        ("instances", str(n)),
        ("domain", shares(stats["domain"])),
        ("split", shares(stats["split"])),
        ("variant", shares(stats["variant"])),
        ("agents per instance", spread(stats["agents"])),
        ("T2 facts per instance", spread(stats["t2_facts"])),
        ("T2 facts labelled keep (1)", "-" if balance is None else f"{balance:.1%} of {stats['t2_facts_total']}"),
        ("misleading agents", shares({f"{k} agent{'s' if k != 1 else ''}": v for k, v in stats["misleading"].items()})),
        ("with corrupted context", f"{stats['with_corrupted_context']} / {n}"),
        ("with question", f"{stats['with_question']} / {n}"),
        ("with wrong answer", f"{stats['with_wrong_answer']} / {n}"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{'statistic':<{width}}  value", f"{'-' * width}  {'-' * 5}"]
    lines += [f"{name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines)
