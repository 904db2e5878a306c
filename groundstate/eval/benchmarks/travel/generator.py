"""The LM-free travel generator: seeded, deterministic, every task checked by the validator.

:func:`generate_travel` draws four plans from the vocabularies, makes one of them the answer, then draws traveler
profiles whose weighted scores make that plan the unique best; :func:`generate_hidden_travel` converts the tasks
to hidden-profile tasks.

**The public plans must not give the answer away.** Everyone sees the plans, so if the answer tended to be, say,
the cheapest step-free plan, a group could skip the discussion (an earlier version of this generator, which took
whichever plan its random profiles happened to favour, had that plan as the answer in about a third of its tasks
against a chance rate of a quarter). Two rules prevent it:

- *Answer first.* The four plans are independent draws from one distribution, and the answer (the first drawn
  plan, :data:`_ANSWER`) is fixed before any preference is drawn. Preferences are then drawn, about half of them
  steered towards the answer (:data:`_GUIDE`: a ``must``/``prefer`` it meets or an ``avoid``/``reject`` it does
  not), until the profiles make it the unique best with no traveler's own profile singling it out. Given the
  plans, each of them is then equally likely to be the answer, so no rule that reads only the plans can beat
  chance. The one gap is a set of plans given up after :data:`_GROUP_DRAWS` failed profile draws (a fresh set
  is drawn), which happens for well under 1% of tasks and can shift a rule's rate by a fraction of that.
- *Balanced directions.* For every attribute the operators in ``_RULES`` favour either end under either
  polarity: a price cap and a "rather pay more" floor, short and long walking days, more and fewer meal options
  or activities. Preferences then do not read as one fixed taste (cheaper is better, more is better), and
  profile draws are about equally easy whichever plan is the answer, which keeps the rare give-ups from leaning
  towards one kind of plan. Step-free access stays one-sided (nobody would ask for steps); answer first makes
  that harmless.

:func:`groundstate.eval.benchmarks.travel.leak.leak_rates` measures both: on generated tasks every public-only rule
it tries finds the answer at chance, give or take sampling noise.
"""

from __future__ import annotations

import itertools
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


# attribute -> (polarity, operator) pairs that read naturally: "+" for must/prefer, "-" for avoid/reject; both
# directions for numbers and lists under both polarities (see "balanced directions" in the module notes)
_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "transport_mode": (("+", "eq"), ("+", "neq"), ("+", "in"), ("+", "not_in"), ("-", "eq"), ("-", "in")),
    "departure_window": (("+", "eq"), ("+", "neq"), ("+", "in"), ("+", "not_in"), ("-", "eq"), ("-", "in")),
    "duration_days": (("+", "lte"), ("+", "gte"), ("+", "eq"), ("-", "gte"), ("-", "lte")),
    "price_per_person_usd": (("+", "lte"), ("+", "gte"), ("-", "gte"), ("-", "lte")),
    "hotel_category": (("+", "eq"), ("+", "in"), ("+", "not_in"), ("-", "eq"), ("-", "in")),
    "room_arrangement": (("+", "eq"), ("+", "neq"), ("-", "eq")),
    "step_free": (("+", "eq"), ("-", "eq")),
    "daily_active_hours": (("+", "lte"), ("+", "gte"), ("-", "gte"), ("-", "lte")),
    "max_walk_km_per_day": (("+", "lte"), ("+", "gte"), ("-", "gte"), ("-", "lte")),
    "meal_options": (("+", "contains"), ("+", "contains_any"), ("+", "contains_all"), ("+", "in"),
                     ("+", "excludes"), ("+", "not_in"), ("-", "excludes"), ("-", "contains"),
                     ("-", "contains_any")),
    "activities": (("+", "contains"), ("+", "contains_any"), ("+", "contains_all"), ("+", "excludes"),
                   ("+", "not_in"), ("-", "contains"), ("-", "contains_any"), ("-", "in"), ("-", "excludes")),
}


_NUMBERS = {3: "Three", 4: "Four"}


_TIER_DRAW_WEIGHTS = (1, 2, 2, 1)  # must, prefer, avoid, reject beyond the one of each every task has


_PREFS_PER_TRAVELER = (2, 2, 3, 3, 4)


_GROUP_DRAWS = 40  # profile draws (all travelers) per set of plans before the plans are given up


_TRAVELER_DRAWS = 4  # draws of one traveler's profile (when it singles out the answer) per profile draw


_GUIDE = 0.5  # the chance that a predicate is drawn among those that count towards the answer


_ANSWER = 0  # the index of the answer among the drawn plans (they are exchangeable, so any index would do)


def target_letter(seed: int, index: int) -> str:
    """The declared answer of task ``index``: each aligned block of four indices uses A-D once, shuffled."""
    order = random.Random(f"travel-targets:{seed}:{index // 4}").sample(LETTERS, 4)
    return order[index % 4]


def generate_travel(n: int, seed: int = 0, start: int = 0, travelers: int | None = None,
                    max_attempts: int = MAX_ATTEMPTS) -> list[TravelTask]:
    """Generate ``n`` valid travel tasks with no LM, deterministically.

    Task ``index`` (``start`` to ``start + n - 1``) depends only on ``(seed, index, travelers)``: its answer is
    :func:`target_letter` (so any aligned block of four tasks has each answer once), its scenario, plans and
    preferences come from a random generator seeded with ``(seed, index)`` (the answer plan is chosen before any
    preference, see the module notes), and candidates are drawn until one passes every rule of
    :func:`validate_travel`. A candidate whose :func:`fingerprint` repeats an earlier task of
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
        plans, people = drawn
        order = [i for i in range(4) if i != _ANSWER]
        rng.shuffle(order)
        order.insert(LETTERS.index(target), _ANSWER)
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


class _Candidates:
    """The discriminative predicates (matching 1-3 plans) of one set of plans, computed once per key on first use.

    ``get(attribute, operator, polarity)`` lists ``(value, mask, value as a hashable key)``; every profile drawn on
    these plans shares the lists, so redrawing profiles costs little (only booleans have candidates that depend on
    the polarity). Array attributes are matched as sets: the same answers as :func:`evaluate_operator`, which the
    validator uses, much faster for the many item pairs.
    """

    def __init__(self, plans: list[dict]) -> None:
        self.plans = plans
        self._lists: dict[tuple[str, str, str], list[tuple[Any, tuple[bool, ...], Any]]] = {}

    def get(self, attribute: str, operator: str, polarity: str) -> list[tuple[Any, tuple[bool, ...], Any]]:
        values = [plan[attribute] for plan in self.plans]
        key = (attribute, operator, polarity if isinstance(values[0], bool) else "")
        found = self._lists.get(key)
        if found is None:
            if isinstance(values[0], list):
                sets = [frozenset(v) for v in values]
                match = _SET_MATCH[operator]
                masks = ((value, tuple(match(items, value) for items in sets))
                         for value in _candidate_values(attribute, operator, polarity, values))
            else:
                masks = ((value, tuple(evaluate_operator(operator, v, value) for v in values))
                         for value in _candidate_values(attribute, operator, polarity, values))
            found = [(value, mask, _hashable(value)) for value, mask in masks if 0 < sum(mask) < len(mask)]
            self._lists[key] = found
        return found


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


_SET_MATCH: dict[str, Any] = {  # array operators on a plan's items as a set (see predicates.evaluate_operator)
    "contains": lambda items, value: value in items,
    "excludes": lambda items, value: value not in items,
    "contains_all": lambda items, value: items.issuperset(value),
    "contains_any": lambda items, value: not items.isdisjoint(value),
    "in": lambda items, value: not items.isdisjoint(value),
    "not_in": lambda items, value: items.isdisjoint(value),
}


def _draw(rng: random.Random, scenario: dict[str, Any], count: int) -> tuple[list[dict], list[Traveler]] | None:
    """One candidate: four unlabelled plans whose first is the answer, and the travelers (``None``: rejected).

    The answer is fixed before any preference is drawn; profiles are redrawn on the same plans up to
    :data:`_GROUP_DRAWS` times before the plans are given up (rarely: see the module notes).
    """
    plans = [_plan_attributes(rng, scenario["destination"], count) for _ in range(4)]
    candidates = _Candidates(plans)
    for _ in range(_GROUP_DRAWS):
        profiles = _draw_profiles(rng, candidates, count)
        if profiles is not None:
            return plans, _travelers(profiles, plans, scenario["roles"])
    return None


def _draw_profiles(rng: random.Random, candidates: _Candidates, count: int) -> list[list[_Drawn]] | None:
    """Every traveler's predicates making the answer the unique best, or ``None`` when a score rule fails.

    A traveler whose own profile would single out the answer is redrawn (up to :data:`_TRAVELER_DRAWS` times).
    """
    sizes = [rng.choice(_PREFS_PER_TRAVELER) for _ in range(count)]
    tiers = list(TIERS) + rng.choices(TIERS, weights=_TIER_DRAW_WEIGHTS, k=sum(sizes) - len(TIERS))
    rng.shuffle(tiers)
    used: set[tuple[str, str, str, Any]] = set()
    profiles, owns = [], []
    totals = [0] * 4
    for size in sizes:
        own_tiers, tiers = tiers[:size], tiers[size:]
        for _ in range(_TRAVELER_DRAWS):
            drawn = _draw_traveler(rng, candidates, own_tiers, used)
            if drawn is None:
                return None
            profile, own = drawn
            top = max(own)
            if not (own[_ANSWER] == top and own.count(top) == 1):  # nobody's own profile may single out the answer
                break
        else:
            return None
        used.update((tier, attribute, operator, _hashable(value)) for tier, attribute, operator, value, _ in profile)
        profiles.append(profile)
        owns.append(own)
        totals = [a + b for a, b in zip(totals, own, strict=True)]
    top = max(totals)
    if sum(len(set(own)) > 1 for own in owns) < 2 or totals.count(top) != 1 or totals[_ANSWER] != top:
        return None
    return profiles


def _draw_traveler(rng: random.Random, candidates: _Candidates, tiers: list[str],
                   used: set[tuple[str, str, str, Any]]) -> tuple[list[_Drawn], list[int]] | None:
    """One traveler's predicates (one per tier in ``tiers``, each on its own attribute) and own plan scores."""
    attributes = list(_RULES)
    rng.shuffle(attributes)
    profile: list[_Drawn] = []
    own = [0] * 4
    for tier in tiers:
        chosen = _choose_predicate(rng, attributes, tier, candidates, used, rng.random() < _GUIDE)
        if chosen is None:
            return None
        profile.append(chosen)
        attributes.remove(chosen[1])
        weight = TIER_WEIGHTS[tier]
        own = [score + weight * hit for score, hit in zip(own, chosen[4], strict=True)]
    return profile, own


def _choose_predicate(rng: random.Random, attributes: list[str], tier: str, candidates: _Candidates,
                      used: set[tuple[str, str, str, Any]], guided: bool) -> _Drawn | None:
    """A discriminative predicate on the first of ``attributes`` (in their order) that has one.

    The operator is drawn uniformly from the attribute's operators of this polarity that have candidates, the
    value uniformly from those candidates; a ``guided`` predicate counts towards the answer (a ``must`` or
    ``prefer`` that matches the answer, an ``avoid`` or ``reject`` that does not).
    """
    polarity = "+" if TIER_WEIGHTS[tier] > 0 else "-"
    for attribute in attributes:
        operators = [op for pol, op in _RULES[attribute] if pol == polarity]
        rng.shuffle(operators)
        for operator in operators:
            options = [(value, mask) for value, mask, key in candidates.get(attribute, operator, polarity)
                       if (not guided or mask[_ANSWER] == (polarity == "+"))
                       and (tier, attribute, operator, key) not in used]
            if options:
                value, mask = rng.choice(options)
                return tier, attribute, operator, value, list(mask)
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
