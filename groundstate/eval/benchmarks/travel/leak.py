"""How often a rule that reads only the public plans finds the declared answer of travel tasks.

A hidden-profile task is only worth discussing if the shared information alone does not give the answer away.
For travel tasks the shared information is the four plans, so this module tries the shortcuts a participant
might take without hearing anyone's preferences, and counts how often each one lands on the declared answer.

**The rules** (:func:`rule_picks`). Each rule maps the plans of one task to the set of plans it would choose:

- ``position X``: always plan ``X``.
- numbers: ``lowest <key>`` and ``highest <key>``; booleans: ``<key> yes`` and ``<key> no``; lists:
  ``most <key>`` and ``fewest <key>`` (by item count); strings: ``modal <key>`` (the plans whose value is the
  most common one among the plans) and ``rarest <key>`` (the least common one); ``hotel_category`` is also
  ordered from budget to upscale (``lowest``/``highest hotel_category``).
- combinations: ``cheapest step-free``, ``priciest step-free``, ``step-free with most activities``,
  ``lowest price per day``, ``highest price per day``.
- ``most central`` and ``odd one out``: the plan with the smallest (largest) summed distance to the other
  plans, where two plans differ per attribute by the gap between their numbers over the plans' range, by 0
  or 1 for strings and booleans, and by the Jaccard distance for lists.

**Ties and gaps.** A rule that picks ``m`` plans counts ``1/m`` of a hit when the answer is among them (a
cheater who breaks the tie at random). A filter that leaves no plan (``step_free yes`` when no plan is
step-free, ``cheapest step-free`` then falls back to ``cheapest``) falls back to every plan; a rule whose
attribute a task lacks counts that task at chance, ``1/len(plans)``.

**The measure** (:func:`leak_rates`): each rule's hit rate is its mean credit over the tasks; ``chance`` is the
mean of ``1/len(plans)``; the ``worst`` rule is the one with the highest rate. With four plans and balanced
answer letters every ``position`` rule sits at exactly chance on a multiple of four tasks.

**Luck.** On 500 tasks one rule's rate has a standard error of about two points, and the worst of the 35 rules
lands 3-5 points above chance even when the answer is independent of the plans (95% of such sets stay within
about 5.5 points; on 2,400 tasks within about 2.5). So the report also gives a p-value: how often the worst
rule does at least as well when every answer is redrawn at random among its task's plans. A worst rule above
chance by more than the limit (3 points by default) is a warning when that p-value is below 0.05, and a note
(probably luck) otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import monte_carlo_test

from groundstate.eval.benchmarks.travel import vocab
from groundstate.eval.benchmarks.travel.convert import travel_of
from groundstate.eval.benchmarks.travel.predicates import value_kind
from groundstate.eval.benchmarks.travel.records import Plan, TravelTask
from groundstate.records import HiddenProfileTask

#: Hit rates above chance by more than this (a share, 0.03 = 3 points) are reported as a leak.
DEFAULT_MAX_LEAK = 0.03


_ORDERED: dict[str, tuple[str, ...]] = {"hotel_category": vocab.HOTEL_CATEGORIES}


@dataclass
class LeakReport:
    """Public-only rule hit rates over a set of tasks (see the module notes).

    Attributes:
        n: tasks measured.
        chance: mean of ``1/len(plans)`` over those tasks.
        rates: rule name -> hit rate.
        worst: the rule with the highest rate (the first in name order on a tie; ``""`` when ``n == 0``).
        p_value: the share of leak-free sets of the same plans (each answer redrawn uniformly among its task's
            plans) whose worst rule is at least as far above chance (``None``: not computed).
        luck: the excess (a share) that 95% of those leak-free sets stay at or below (``None``: not computed).
    """

    n: int
    chance: float
    rates: dict[str, float] = field(default_factory=dict)
    worst: str = ""
    p_value: float | None = None
    luck: float | None = None

    @property
    def worst_rate(self) -> float:
        return self.rates.get(self.worst, self.chance)

    @property
    def excess(self) -> float:
        """How far the worst rule is above chance (a share: 0.05 is five points)."""
        return self.worst_rate - self.chance

    def leaks(self, max_leak: float = DEFAULT_MAX_LEAK) -> bool:
        """Whether the worst rule beats chance by more than ``max_leak`` (a share)."""
        return self.n > 0 and self.excess > max_leak + 1e-12

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the worst rule's excess is more than luck gives (``p_value < alpha``; ``True`` if unknown)."""
        return self.p_value is None or self.p_value < alpha

    def lines(self, max_leak: float = DEFAULT_MAX_LEAK) -> list[str]:
        """The report as text: the worst rule against chance, then a line when it beats chance by more than
        ``max_leak`` (a share): a warning when luck does not explain it, a note when it may."""
        if not self.n:
            return []
        luck = "" if self.p_value is None else (f"; random answers on the same plans: p = {self.p_value:.3g}, "
                                                f"95% stay within {100 * (self.luck or 0):+.1f}")
        out = [f"public-only leak: worst rule '{self.worst}' finds the answer in {self.worst_rate:.1%} of "
               f"{self.n} travel task{'s' if self.n != 1 else ''} (chance {self.chance:.1%}, "
               f"{100 * self.excess:+.1f} points{luck})"]
        if self.leaks(max_leak):
            gap = f"'{self.worst}' beats chance by {100 * self.excess:.1f} points (more than {100 * max_leak:g})"
            if self.significant():
                out.append(f"warning: the public plans alone point to the answer: {gap}")
            else:
                out.append(f"note: {gap}, as random answers on the same plans do {self.p_value:.0%} of the time: "
                           "no evidence of a leak at this size")
        return out


def _extreme(plans: Sequence[Plan], key: Callable[[Plan], float], highest: bool) -> list[str]:
    values = [key(p) for p in plans]
    target = max(values) if highest else min(values)
    return [p.id for p, v in zip(plans, values, strict=True) if v == target]


def _filtered(plans: Sequence[Plan], keep: Callable[[Plan], bool]) -> list[Plan]:
    kept = [p for p in plans if keep(p)]
    return kept or list(plans)


def _distance(key: str, kind: str, a: Any, b: Any, span: float) -> float:
    if kind == "number":
        return abs(a - b) / span if span else 0.0
    if kind == "array":
        union = set(a) | set(b)
        return 1 - len(set(a) & set(b)) / len(union) if union else 0.0
    return float(a != b)


def _centrality(plans: Sequence[Plan], kinds: dict[str, str]) -> dict[str, float]:
    """Each plan's summed distance to the other plans over the attributes every plan has."""
    totals = {p.id: 0.0 for p in plans}
    for key, kind in kinds.items():
        values = [p.attributes[key] for p in plans]
        span = float(max(values) - min(values)) if kind == "number" else 0.0
        for p in plans:
            totals[p.id] += sum(_distance(key, kind, p.attributes[key], q.attributes[key], span)
                                for q in plans if q is not p)
    return totals


def rule_picks(plans: Sequence[Plan]) -> dict[str, list[str]]:
    """The ids each public-only rule of the module notes picks among ``plans`` (several ids on a tie).

    Only attributes that every plan has, with one value kind across the plans, get rules.
    """
    picks: dict[str, list[str]] = {f"position {p.id}": [p.id] for p in plans}
    if not plans:
        return picks
    kinds: dict[str, str] = {}
    for key in plans[0].attributes:
        if all(key in p.attributes for p in plans):
            found = {value_kind(p.attributes[key]) for p in plans}
            if len(found) == 1 and found != {"unsupported"}:
                kinds[key] = found.pop()
    for key, kind in kinds.items():
        value = {p.id: p.attributes[key] for p in plans}
        if kind == "number":
            picks[f"lowest {key}"] = _extreme(plans, lambda p, k=key: p.attributes[k], False)
            picks[f"highest {key}"] = _extreme(plans, lambda p, k=key: p.attributes[k], True)
        elif kind == "bool":
            for flag, word in ((True, "yes"), (False, "no")):
                picks[f"{key} {word}"] = [p.id for p in _filtered(plans, lambda p, k=key, f=flag:
                                                                   p.attributes[k] is f)]
        elif kind == "array":
            picks[f"most {key}"] = _extreme(plans, lambda p, k=key: len(p.attributes[k]), True)
            picks[f"fewest {key}"] = _extreme(plans, lambda p, k=key: len(p.attributes[k]), False)
        elif kind == "string":
            counts = Counter(value.values())
            picks[f"modal {key}"] = [pid for pid, v in value.items() if counts[v] == max(counts.values())]
            picks[f"rarest {key}"] = [pid for pid, v in value.items() if counts[v] == min(counts.values())]
            order = _ORDERED.get(key)
            if order and all(v in order for v in value.values()):
                picks[f"lowest {key}"] = _extreme(plans, lambda p, k=key, o=order: o.index(p.attributes[k]), False)
                picks[f"highest {key}"] = _extreme(plans, lambda p, k=key, o=order: o.index(p.attributes[k]), True)
    price, step, activities, days = "price_per_person_usd", "step_free", "activities", "duration_days"
    if kinds.get(price) == "number" and kinds.get(step) == "bool":
        step_free = _filtered(plans, lambda p: p.attributes[step] is True)
        picks["cheapest step-free"] = _extreme(step_free, lambda p: p.attributes[price], False)
        picks["priciest step-free"] = _extreme(step_free, lambda p: p.attributes[price], True)
    if kinds.get(step) == "bool" and kinds.get(activities) == "array":
        step_free = _filtered(plans, lambda p: p.attributes[step] is True)
        picks["step-free with most activities"] = _extreme(step_free, lambda p: len(p.attributes[activities]), True)
    if kinds.get(price) == "number" and kinds.get(days) == "number" and all(p.attributes[days] > 0 for p in plans):
        picks["lowest price per day"] = _extreme(plans, lambda p: p.attributes[price] / p.attributes[days], False)
        picks["highest price per day"] = _extreme(plans, lambda p: p.attributes[price] / p.attributes[days], True)
    if kinds:
        spread = _centrality(plans, kinds)
        picks["most central"] = _extreme(plans, lambda p: -spread[p.id], True)
        picks["odd one out"] = _extreme(plans, lambda p: spread[p.id], True)
    return picks


def _as_travel(task: TravelTask | HiddenProfileTask) -> TravelTask | None:
    if isinstance(task, TravelTask):
        return task
    try:
        return travel_of(task)
    except ValueError:
        return None


def leak_rates(tasks: Iterable[TravelTask | HiddenProfileTask], *, n_resamples: int = 999,
               random_state: int = 0) -> LeakReport:
    """Every public-only rule's hit rate over ``tasks`` (see the module notes for the rules and ties).

    The p-value comes from :func:`scipy.stats.monte_carlo_test`: the statistic is the worst rule's excess over
    chance, and its null distribution redraws every task's answer uniformly among the task's plans (the same
    plans, so the same rule picks), which accounts for the number of rules, their correlation and their ties.

    Args:
        tasks: travel tasks, or hidden-profile records; records without a travel structure (or with one that
            does not parse, or whose declared answer is not one of its plans) are left out.
        n_resamples: leak-free sets drawn for the p-value (``0``: no p-value).
        random_state: the seed of those draws.

    Returns:
        A :class:`LeakReport` (``n == 0`` when no task could be measured).
    """
    rows: list[tuple[dict[str, list[str]], list[str], str]] = []
    for item in tasks:
        task = _as_travel(item)
        if task is None or not task.options or task.plan(task.correct_answer) is None:
            continue
        try:
            picks = rule_picks(task.options)
        except (TypeError, ValueError, ZeroDivisionError):  # a malformed record: the validator reports it
            continue
        rows.append((picks, [p.id for p in task.options], task.correct_answer))
    n = len(rows)
    if not n:
        return LeakReport(n=0, chance=0.0)
    names = sorted({name for picks, _, _ in rows for name in picks})
    width = max(len(ids) for _, ids, _ in rows)
    credit = np.zeros((n, len(names), width))  # credit[task, rule, plan]: the rule's share on that plan
    answers = np.zeros(n, dtype=int)
    counts = np.zeros(n, dtype=int)
    for t, (picks, ids, answer) in enumerate(rows):
        counts[t], answers[t] = len(ids), ids.index(answer)
        for r, name in enumerate(names):
            chosen = picks.get(name, ids)  # a rule the task has no attribute for: a uniform guess
            for pid in chosen:
                credit[t, r, ids.index(pid)] += 1 / len(chosen)
    chance = float(np.mean(1 / counts))
    tasks_index = np.arange(n)

    def worst_excess(sample: np.ndarray, axis: int = -1) -> np.ndarray:
        sample = np.moveaxis(np.asarray(sample, dtype=int), axis, -1)
        return credit[tasks_index, :, sample].mean(axis=-2).max(axis=-1) - chance

    rates = dict(zip(names, credit[tasks_index, :, answers].mean(axis=0).tolist(), strict=True))
    worst = max(names, key=rates.__getitem__)  # the first of equal rates in name order
    report = LeakReport(n=n, chance=chance, rates=rates, worst=worst)
    if n_resamples > 0:
        rng = np.random.default_rng(random_state)
        result = monte_carlo_test(answers, lambda size: (rng.random(size) * counts).astype(int), worst_excess,
                                  vectorized=True, n_resamples=n_resamples, alternative="greater", axis=-1,
                                  batch=max(1, 4_000_000 // (n * len(names))))
        report.p_value = float(result.pvalue)
        report.luck = float(np.quantile(result.null_distribution, 0.95))
    return report
