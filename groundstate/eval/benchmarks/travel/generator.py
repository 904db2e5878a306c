"""The LM-free travel generator: seeded, deterministic, every task checked by the validator.

:func:`generate_travel` draws plans from the vocabularies, then traveler profiles whose weighted scores make
the requested plan the unique best; :func:`generate_hidden_travel` converts them to hidden-profile tasks.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from collections import Counter
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel import vocab
from groundstate.eval.benchmarks.travel.convert import to_hidden_profile
from groundstate.eval.benchmarks.travel.predicates import evaluate_operator, score_plans, value_kind
from groundstate.eval.benchmarks.travel.records import (
    LIST_OPERATORS,
    TIER_WEIGHTS,
    TIERS,
    Plan,
    Preference,
    Traveler,
    TravelTask,
)
from groundstate.eval.benchmarks.travel.statements import attribute_label, render_statement
from groundstate.eval.benchmarks.travel.validator import fingerprint, validate_travel
from groundstate.records import LETTERS, HiddenProfileTask

MAX_ATTEMPTS = 500


# attribute -> (polarity, operator) pairs that read naturally: "+" for must/prefer, "-" for avoid/reject
_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "transport_mode": (("+", "eq"), ("+", "neq"), ("+", "in"), ("+", "not_in"), ("-", "eq"), ("-", "in")),
    "departure_window": (("+", "eq"), ("+", "neq"), ("+", "in"), ("-", "eq"), ("-", "in")),
    "duration_days": (("+", "lte"), ("+", "gte"), ("+", "eq"), ("-", "gte"), ("-", "lte")),
    "price_per_person_usd": (("+", "lte"), ("-", "gte")),
    "hotel_category": (("+", "eq"), ("+", "in"), ("+", "not_in"), ("-", "eq"), ("-", "in")),
    "room_arrangement": (("+", "eq"), ("+", "neq"), ("-", "eq")),
    "step_free": (("+", "eq"), ("-", "eq")),
    "daily_active_hours": (("+", "lte"), ("+", "gte"), ("-", "gte"), ("-", "lte")),
    "max_walk_km_per_day": (("+", "lte"), ("+", "gte"), ("-", "gte")),
    "meal_options": (("+", "contains"), ("+", "contains_any"), ("+", "contains_all"), ("+", "in"),
                     ("-", "excludes"), ("-", "contains")),
    "activities": (("+", "contains"), ("+", "contains_any"), ("+", "contains_all"), ("+", "excludes"),
                   ("+", "not_in"), ("-", "contains"), ("-", "contains_any"), ("-", "in")),
}


_NUMBERS = {3: "Three", 4: "Four"}


_TIER_DRAW_WEIGHTS = (1, 2, 2, 1)  # must, prefer, avoid, reject beyond the one of each every task has


_PREFS_PER_TRAVELER = (2, 2, 3, 3, 4)


_PROFILE_DRAWS = 8  # profile draws per set of plans


def target_letter(seed: int, index: int) -> str:
    """The declared answer of task ``index``: each aligned block of four indices uses A-D once, shuffled."""
    order = random.Random(f"travel-targets:{seed}:{index // 4}").sample(LETTERS, 4)
    return order[index % 4]


def generate_travel(n: int, seed: int = 0, start: int = 0, travelers: int | None = None,
                    max_attempts: int = MAX_ATTEMPTS) -> list[TravelTask]:
    """Generate ``n`` valid travel tasks with no LM, deterministically.

    Task ``index`` (``start`` to ``start + n - 1``) depends only on ``(seed, index, travelers)``: its answer is
    :func:`target_letter` (so any aligned block of four tasks has each answer once), its scenario, plans and
    preferences come from a random generator seeded with ``(seed, index)``, and candidates are drawn until one
    passes every rule of :func:`validate_travel`. A candidate whose :func:`fingerprint` repeats an earlier task of
    the batch is drawn again (so a batch has no duplicates; this practically never triggers).

    Args:
        n: number of tasks.
        seed: the seed.
        start: the index of the first task (``generate_travel(5, s, start=5)`` is ``generate_travel(10, s)[5:]``).
        travelers: 3 or 4 travelers per task; ``None`` draws 3 or 4 per task.
        max_attempts: candidates drawn per task before giving up.

    Raises:
        ConfigError: a bad ``n``, ``start`` or ``travelers``.
        RuntimeError: no valid candidate within ``max_attempts`` (a generator bug).
    """
    if n < 0 or start < 0:
        raise ConfigError(f"n and start must be non-negative (got n={n}, start={start})")
    if travelers not in (None, 3, 4):
        raise ConfigError(f"travelers must be 3 or 4 (got {travelers})")
    seen: set[str] = set()
    tasks = []
    for index in range(start, start + n):
        task = generate_one(seed, index, travelers, max_attempts=max_attempts, avoid=seen)
        seen.add(fingerprint(task))
        tasks.append(task)
    return tasks


def generate_hidden_travel(n: int, seed: int = 0, start: int = 0,
                           travelers: int | None = None) -> list[HiddenProfileTask]:
    """:func:`generate_travel` converted with :func:`to_hidden_profile` (ids ``travel-<seed>-<index>``)."""
    tasks = generate_travel(n, seed=seed, start=start, travelers=travelers)
    return [to_hidden_profile(task, id=f"travel-{seed}-{start + i}",
                              provenance={"source": "travel-generator", "seed": seed, "index": start + i,
                                          "fingerprint": fingerprint(task), "scores": score_plans(task)})
            for i, task in enumerate(tasks)]


def generate_one(seed: int, index: int, travelers: int | None = None, *, max_attempts: int = MAX_ATTEMPTS,
                 avoid: set[str] | frozenset[str] = frozenset()) -> TravelTask:
    """Task ``index`` of :func:`generate_travel` (``avoid``: fingerprints it must not repeat)."""
    rng = random.Random(f"travel:{seed}:{index}")
    count = travelers if travelers is not None else rng.choice((3, 4))
    target = target_letter(seed, index)
    scenario = _scenario(rng, count, seed, index)
    for _ in range(max_attempts):
        drawn = _draw(rng, scenario, count)
        if drawn is None:
            continue
        plans, people, best = drawn
        order = [i for i in range(4) if i != best]
        rng.shuffle(order)
        order.insert(LETTERS.index(target), best)
        options = [Plan(id=letter, title=_title(plans[i]), attributes=plans[i]) for letter, i in zip(LETTERS, order,
                                                                                                      strict=True)]
        task = TravelTask(name=scenario["name"], description=scenario["description"],
                          public_information=scenario["public"], options=options, agents=people,
                          correct_answer=target)
        if fingerprint(task) in avoid or validate_travel(task):
            continue
        return task
    raise RuntimeError(f"no valid travel task for seed {seed}, index {index} in {max_attempts} attempts")


def _scenario(rng: random.Random, count: int, seed: int, index: int) -> dict[str, Any]:
    destination = rng.choice(vocab.DESTINATIONS)
    group = rng.choice(vocab.GROUPS)
    origin = rng.choice(vocab.ORIGINS)
    season = rng.choice(vocab.SEASONS)
    slug = re.sub(r"[^a-z0-9]+", "_", destination.city.lower().removeprefix("the ")).strip("_")
    public = [f"Every plan is a return trip from {origin}; prices are per person and cover transport, "
              "accommodation and the listed activities.",
              *rng.sample(vocab.PUBLIC_FACTS, rng.randint(1, 3))]
    return {
        "name": f"{slug}_{group.key}_trip_{seed}_{index}",
        "description": (f"{_NUMBERS[count]} travelers from {origin}, {group.phrase}, are planning a trip to "
                        f"{destination.city}, {destination.country}, in {season}. They will book one of four plans "
                        "(A, B, C or D) together."),
        "public": public,
        "destination": destination,
        "roles": rng.sample(group.roles, count),
    }


def _plan_attributes(rng: random.Random, destination: vocab.Destination, count: int) -> dict[str, Any]:
    transport = rng.choice(vocab.TRANSPORT_BY_KIND[destination.kind])
    duration = rng.randint(3, 8)
    hotel = rng.choice(vocab.HOTEL_CATEGORIES)
    activities = rng.sample(vocab.ACTIVITIES_BY_KIND[destination.kind], rng.randint(2, 4))
    active = any(a in vocab.ACTIVE_ACTIVITIES for a in activities)
    cost = (vocab.HOTEL_RATE_USD[hotel] * (duration - 1) + vocab.TRANSPORT_COST_USD[transport]
            + vocab.ACTIVITY_COST_USD * len(activities))
    return {
        "transport_mode": transport,
        "departure_window": rng.choice(vocab.DEPARTURE_WINDOWS),
        "duration_days": duration,
        "price_per_person_usd": int(round(cost * rng.uniform(0.9, 1.2), -1)),
        "hotel_category": hotel,
        "room_arrangement": rng.choice(vocab.ROOM_ARRANGEMENTS[count]),
        "step_free": rng.random() < 0.5,
        "daily_active_hours": rng.randint(5, 10) if active else rng.randint(3, 8),
        "max_walk_km_per_day": rng.randint(6, 14) if active else rng.randint(2, 9),
        "meal_options": rng.sample(vocab.MEAL_OPTIONS, rng.randint(2, 4)),
        "activities": activities,
    }


def _title(attributes: dict[str, Any]) -> str:
    hours = attributes["daily_active_hours"]
    style = "Relaxed" if hours <= 5 else "Active" if hours >= 8 else "Classic"
    return f"{style} {attributes['duration_days']}-day {attributes['transport_mode']} trip with " \
           f"{attributes['activities'][0]}"


def _thresholds(operator: str, values: list[Any], step: int) -> list[Any]:
    """Round thresholds for ``lte``/``gte`` that split the plans' numbers in every possible place."""
    distinct = sorted(set(values))
    out = []
    for low, high in itertools.pairwise(distinct):
        if operator == "lte":  # any t in [low, high) splits here; prefer a round one
            rounded = math.ceil(low / step) * step
            out.append(rounded if rounded < high else low)
        else:  # any t in (low, high]
            rounded = math.floor(high / step) * step
            out.append(rounded if rounded > low else high)
    return out


def _candidate_values(attribute: str, operator: str, polarity: str, values: list[Any]) -> list[Any]:
    kind = value_kind(values[0])
    if kind == "bool":
        return [polarity == "+"]
    items = list(dict.fromkeys(v for value in values for v in value)) if kind == "array" else \
        list(dict.fromkeys(values))
    if operator in ("lte", "gte"):
        return _thresholds(operator, values, 50 if attribute == "price_per_person_usd" else 1)
    if operator in LIST_OPERATORS:
        return [list(pair) for pair in itertools.combinations(items, 2)]
    return items


_Drawn = tuple[str, str, str, Any, list[bool]]  # tier, attribute, operator, value, match mask over the plans


def _draw(rng: random.Random, scenario: dict[str, Any], count: int) -> tuple[list[dict], list[Traveler], int] | None:
    """One candidate: four unlabelled plans, the travelers and the index of the best plan (``None``: rejected).

    Profiles are redrawn a few times on the same plans before the plans are given up.
    """
    plans = [_plan_attributes(rng, scenario["destination"], count) for _ in range(4)]
    for _ in range(_PROFILE_DRAWS):
        drawn = _draw_profiles(rng, plans, count)
        if drawn is not None:
            profiles, best = drawn
            return plans, _travelers(profiles, plans, scenario["roles"]), best
    return None


def _draw_profiles(rng: random.Random, plans: list[dict], count: int) -> tuple[list[list[_Drawn]], int] | None:
    """Every traveler's predicates and the index of the best plan, or ``None`` when a score rule fails."""
    sizes = [rng.choice(_PREFS_PER_TRAVELER) for _ in range(count)]
    tiers = list(TIERS) + rng.choices(TIERS, weights=_TIER_DRAW_WEIGHTS, k=sum(sizes) - len(TIERS))
    rng.shuffle(tiers)
    used: set[tuple[str, str, str, str]] = set()
    profiles, owns = [], []
    totals = [0] * 4
    for size in sizes:
        own_tiers, tiers = tiers[:size], tiers[size:]
        attributes = list(_RULES)
        rng.shuffle(attributes)
        profile, own = [], [0] * 4
        for tier in own_tiers:
            chosen = _choose_predicate(rng, attributes, tier, plans, used)
            if chosen is None:
                return None
            profile.append(chosen)
            attributes.remove(chosen[1])
            weight = TIER_WEIGHTS[tier]
            own = [score + weight * hit for score, hit in zip(own, chosen[4], strict=True)]
        profiles.append(profile)
        owns.append(own)
        totals = [a + b for a, b in zip(totals, own, strict=True)]
    top = max(totals)
    if sum(len(set(own)) > 1 for own in owns) < 2 or totals.count(top) != 1:
        return None
    best = totals.index(top)
    for own in owns:  # nobody's own profile may single out the answer
        if own.count(max(own)) == 1 and own.index(max(own)) == best:
            return None
    return profiles, best


def _choose_predicate(rng: random.Random, attributes: list[str], tier: str, plans: list[dict],
                      used: set[tuple[str, str, str, str]]) -> _Drawn | None:
    """A discriminative predicate (matching 1-3 plans) on an attribute the traveler has not used yet."""
    polarity = "+" if TIER_WEIGHTS[tier] > 0 else "-"
    for attribute in attributes:
        operators = [op for pol, op in _RULES[attribute] if pol == polarity]
        rng.shuffle(operators)
        values = [plan[attribute] for plan in plans]
        for operator in operators:
            candidates = _candidate_values(attribute, operator, polarity, values)
            rng.shuffle(candidates)
            for value in candidates:  # the first discriminative one: uniform over the discriminative values
                mask = [evaluate_operator(operator, v, value) for v in values]
                key = (tier, attribute, operator, json.dumps(value))
                if 0 < sum(mask) < 4 and key not in used:
                    used.add(key)
                    return tier, attribute, operator, value, mask
    return None


def _travelers(profiles: list[list[_Drawn]], plans: list[dict], roles: list[str]) -> list[Traveler]:
    people = []
    for i, profile in enumerate(profiles):
        counters: Counter[str] = Counter()
        prefs = []
        for tier, attribute, operator, value, _ in profile:
            counters[tier] += 1
            statement = render_statement(tier, attribute, operator, value,
                                         array_attribute=isinstance(plans[0][attribute], list))
            prefs.append(Preference(id=f"t{i + 1}_{tier}_{counters[tier]}", tier=tier, attribute=attribute,
                                    operator=operator, value=value, statement=statement))
        labels = [attribute_label(p.attribute) for p in prefs]
        context = (f"As the group's {roles[i]}, they pay most attention to the {', the '.join(labels[:-1])} "
                   f"and the {labels[-1]}.")
        people.append(Traveler(id=f"traveler_{i + 1}", role=roles[i], context=context, preferences=prefs))
    return people
