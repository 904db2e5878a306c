"""Group-travel hidden-profile tasks (Consilience appendix F): records, operators, statements, validator, generator.

A :class:`TravelTask` has four public plans (``A``-``D``), each a dict of attributes, and 3-4 travelers whose
private :class:`Preference` items are structured predicates over one attribute, each with a first-person
``statement`` that says exactly what the predicate says. Under the weighted profile a plan scores +2 per matched
``must``, +1 per matched ``prefer``, -1 per matched ``avoid`` and -2 per matched ``reject``; the declared answer
is the unique best plan. :func:`validate_travel` checks every rule and returns every violation;
:func:`generate_travel` draws valid tasks deterministically with no LM; :func:`to_hidden_profile` turns a task into
a :class:`~groundstate.records.HiddenProfileTask` whose per-fact ``support`` sums to the validator's scores.

**Operators** (``attribute`` is the plan's value, ``value`` the preference's):

=================  ===========================  ========================================================
operator           attribute / value types       matches when
=================  ===========================  ========================================================
``eq``, ``neq``    scalar / scalar of that type  the attribute equals (does not equal) the value
``in``             scalar or array / list         the scalar, or any array item, is in the value list
``not_in``         scalar or array / list         neither the scalar nor any array item is in the list
``contains``       array / string                 the array holds the value
``excludes``       array / string                 the array does not hold the value
``contains_all``   array / list of strings        the array holds every listed value
``contains_any``   array / list of strings        the array holds at least one listed value
``lte``, ``gte``   number / number                attribute <= value (>= value)
=================  ===========================  ========================================================

Scalars are strings, numbers and booleans (a boolean never equals a number); arrays are lists of strings.

**Statements** follow one grammar, so that they round-trip to their predicates (:func:`render_statement`,
:func:`parse_statement`)::

    <lead> a plan whose <attribute words> <operator words> <value>.

with the lead ``I need`` (must), ``I'd like`` (prefer), ``I'd rather not take`` (avoid) or ``I won't take``
(reject); attribute words from :data:`ATTRIBUTE_LABELS` (other keys: the key with spaces for underscores);
operator words ``is``, ``is not``, ``is one of``, ``is none of`` (scalars), ``include one of``, ``include none of``
(arrays, for ``in``/``not_in``), ``include``, ``do not include``, ``include all of``, ``include any of``,
``is at most``, ``is at least``; strings in double quotes, numbers as digits, booleans as ``yes``/``no``, lists
joined with commas and ``and``/``or``. Example: ``I won't take a plan whose transport mode is "flight".`` A
statement an LM writes in other words does not parse, and the validator reports that it "does not state its
predicate": the LM path must use this phrasing (or rewrite statements with :func:`render_statement`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel import vocab
from groundstate.records import LETTERS, HiddenProfileTask

Tier = Literal["must", "prefer", "avoid", "reject"]
Operator = Literal["eq", "neq", "in", "not_in", "contains", "contains_all", "contains_any", "excludes", "lte", "gte"]
TIERS: tuple[str, ...] = ("must", "prefer", "avoid", "reject")
TIER_WEIGHTS: dict[str, int] = {"must": 2, "prefer": 1, "avoid": -1, "reject": -2}
OPERATORS: tuple[str, ...] = ("eq", "neq", "in", "not_in", "contains", "contains_all", "contains_any", "excludes",
                              "lte", "gte")
LIST_OPERATORS: tuple[str, ...] = ("in", "not_in", "contains_all", "contains_any")
REQUIRED_ATTRIBUTES: tuple[str, ...] = (
    "transport_mode", "departure_window", "duration_days", "price_per_person_usd", "hotel_category",
    "room_arrangement", "step_free", "daily_active_hours", "max_walk_km_per_day", "meal_options", "activities")
#: Words used for an attribute in statements and plan facts (other keys: underscores become spaces).
ATTRIBUTE_LABELS: dict[str, str] = {
    "transport_mode": "transport mode",
    "departure_window": "departure window",
    "duration_days": "trip length in days",
    "price_per_person_usd": "price per person in USD",
    "hotel_category": "hotel category",
    "room_arrangement": "room arrangement",
    "step_free": "step-free access",
    "daily_active_hours": "active hours per day",
    "max_walk_km_per_day": "longest walk per day in km",
    "meal_options": "meal options",
    "activities": "activities",
}
LEADS: dict[str, str] = {"must": "I need", "prefer": "I'd like", "avoid": "I'd rather not take",
                         "reject": "I won't take"}
MAX_ATTEMPTS = 500
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


# =========================================================================================================
# Records
# =========================================================================================================


class Plan(BaseModel):
    """One public candidate plan: ``id`` (``A``-``D``), a short ``title`` and its ``attributes``."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    attributes: dict[str, Any]


class Preference(BaseModel):
    """A private structured preference: ``tier`` applied when ``attribute`` ``operator`` ``value`` holds."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tier: Tier
    attribute: str
    operator: Operator
    value: Any
    statement: str

    @property
    def predicate(self) -> tuple[str, str, str, Any]:
        """``(tier, attribute, operator, value)``, what :func:`parse_statement` returns for the statement."""
        return (self.tier, self.attribute, self.operator, self.value)


class Traveler(BaseModel):
    """One traveler (agent): a role in the group, one sentence of context and the private preferences."""

    model_config = ConfigDict(extra="forbid")

    id: str
    role: str
    context: str = ""
    preferences: list[Preference] = Field(default_factory=list)


class TravelTask(BaseModel):
    """A group-travel decision: the appendix-F blueprint shape (no extra fields)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    public_information: list[str] = Field(default_factory=list)
    options: list[Plan]
    agents: list[Traveler]
    correct_answer: str

    def plan(self, letter: str) -> Plan | None:
        """The plan with id ``letter`` (``None`` if there is none)."""
        return next((p for p in self.options if p.id == letter), None)

    def preferences(self) -> Iterable[tuple[Traveler, Preference]]:
        """Every ``(traveler, preference)`` pair, travelers in order."""
        return ((t, p) for t in self.agents for p in t.preferences)


# =========================================================================================================
# Operators
# =========================================================================================================

_KIND_NAMES = {"bool": "a bool", "number": "a number", "string": "a string", "array": "an array",
               "unsupported": "an unsupported value"}


def value_kind(value: Any) -> str:
    """``bool``, ``number``, ``string``, ``array`` (a list of strings) or ``unsupported``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number" if math.isfinite(value) else "unsupported"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "array"
    return "unsupported"


def _same(a: Any, b: Any) -> bool:
    """Equality where a boolean only equals a boolean (``True != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _holds(items: list[Any], value: Any) -> bool:
    return any(_same(item, value) for item in items)


def _evaluate(operator: str, attribute: Any, value: Any) -> bool:
    """The operator on already type-checked operands."""
    if operator == "eq":
        return _same(attribute, value)
    if operator == "neq":
        return not _same(attribute, value)
    if operator in ("in", "not_in"):
        items = attribute if isinstance(attribute, list) else [attribute]
        found = any(_holds(value, item) for item in items)
        return found if operator == "in" else not found
    if operator == "contains":
        return _holds(attribute, value)
    if operator == "excludes":
        return not _holds(attribute, value)
    if operator == "contains_all":
        return all(_holds(attribute, v) for v in value)
    if operator == "contains_any":
        return any(_holds(attribute, v) for v in value)
    if operator == "lte":
        return attribute <= value
    if operator == "gte":
        return attribute >= value
    raise ValueError(f"unknown operator '{operator}'")


def operator_problem(operator: str, attribute: str, attribute_value: Any, value: Any) -> str | None:
    """Why ``operator`` cannot compare this plan attribute with ``value`` (``None`` when it can).

    Args:
        operator: one of :data:`OPERATORS`.
        attribute: the attribute's key (for the message).
        attribute_value: the plan's value of the attribute.
        value: the preference's value.
    """
    kind, vkind = value_kind(attribute_value), value_kind(value)
    if kind == "unsupported":
        return f"attribute '{attribute}' has an unsupported value {json.dumps(attribute_value)}"
    if operator in ("eq", "neq"):
        if kind == "array":
            return f"'{operator}' needs a scalar attribute, '{attribute}' is an array"
        if vkind != kind:
            return f"'{operator}' compares '{attribute}' ({_KIND_NAMES[kind]}) with {_KIND_NAMES[vkind]}"
        return None
    if operator in ("in", "not_in"):
        item_kind = "string" if kind == "array" else kind
        if not isinstance(value, list) or not value:
            return f"'{operator}' needs a non-empty list value (got {json.dumps(value)})"
        if any(value_kind(v) != item_kind for v in value):
            return f"'{operator}' needs list items that are {item_kind}s like '{attribute}' (got {json.dumps(value)})"
        return None
    if operator in ("contains", "excludes", "contains_all", "contains_any"):
        if kind != "array":
            return f"'{operator}' needs an array attribute, '{attribute}' is {_KIND_NAMES[kind]}"
        if operator in ("contains", "excludes") and vkind != "string":
            return f"'{operator}' needs a single string value (got {json.dumps(value)})"
        if operator in ("contains_all", "contains_any") and (vkind != "array" or not value):
            return f"'{operator}' needs a non-empty list of strings (got {json.dumps(value)})"
        return None
    if operator in ("lte", "gte"):
        if kind != "number":
            return f"'{operator}' needs a number attribute, '{attribute}' is {_KIND_NAMES[kind]}"
        if vkind != "number":
            return f"'{operator}' needs a number value (got {json.dumps(value)})"
        return None
    return f"unknown operator '{operator}'"


def matches(pref: Preference, plan: Plan) -> bool:
    """Whether ``pref``'s predicate holds for ``plan``.

    Raises:
        ValueError: the plan lacks the attribute, or the operator cannot compare these types.
    """
    if pref.attribute not in plan.attributes:
        raise ValueError(f"preference {pref.id}: attribute '{pref.attribute}' is missing from plan {plan.id}")
    attribute_value = plan.attributes[pref.attribute]
    problem = operator_problem(pref.operator, pref.attribute, attribute_value, pref.value)
    if problem:
        raise ValueError(f"preference {pref.id}: {problem}")
    return _evaluate(pref.operator, attribute_value, pref.value)


def _match_or_none(pref: Preference, plan: Plan) -> bool | None:
    try:
        return matches(pref, plan)
    except ValueError:
        return None


def score_plans(task: TravelTask, travelers: Sequence[Traveler] | None = None) -> dict[str, int]:
    """Each plan's weighted score (+2 must, +1 prefer, -1 avoid, -2 reject per matched preference).

    Args:
        task: the task.
        travelers: whose preferences count (default: everyone's).

    Preferences that cannot be evaluated against a plan (missing attribute, wrong types: the validator
    reports those) count as not matching it.
    """
    scores = {plan.id: 0 for plan in task.options}
    for traveler in task.agents if travelers is None else travelers:
        for pref in traveler.preferences:
            for plan in task.options:
                if _match_or_none(pref, plan):
                    scores[plan.id] += TIER_WEIGHTS[pref.tier]
    return scores


# =========================================================================================================
# Statements
# =========================================================================================================

_LABEL_KEYS = {label: key for key, label in ATTRIBUTE_LABELS.items()}
_OPERATOR_WORDS: tuple[tuple[str, str], ...] = (  # longest first: the parser tries them in this order
    (r"is at most", "lte"), (r"is at least", "gte"), (r"is one of", "in"), (r"is none of", "not_in"),
    (r"includes? one of", "in"), (r"includes? none of", "not_in"), (r"includes? all of", "contains_all"),
    (r"includes? any of", "contains_any"), (r"do(?:es)? not include", "excludes"), (r"is not", "neq"),
    (r"is", "eq"), (r"includes?", "contains"))
_STATEMENT = re.compile(
    r"(?P<lead>" + "|".join(re.escape(lead) for lead in LEADS.values()) + r") a plan whose (?P<attr>.+?) "
    r"(?P<op>" + "|".join(words for words, _ in _OPERATOR_WORDS) + r") (?P<value>.+)")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?![\w.])|yes\b|no\b')
_SEPARATOR = re.compile(r",? (?:and|or) |, ")


def attribute_label(key: str) -> str:
    """The words statements and plan facts use for attribute ``key``."""
    return ATTRIBUTE_LABELS.get(key, key.replace("_", " "))


def _render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def _render_list(values: list[Any], conjunction: str) -> str:
    texts = [_render_value(v) for v in values]
    if len(texts) <= 1:
        return "".join(texts)
    return ", ".join(texts[:-1]) + f" {conjunction} {texts[-1]}"


def render_statement(tier: str, attribute: str, operator: str, value: Any, *, array_attribute: bool = False) -> str:
    """The first-person statement of a predicate, in the grammar :func:`parse_statement` reads.

    Args:
        tier, attribute, operator, value: the predicate.
        array_attribute: the attribute holds a list (``in``/``not_in`` then say "include one/none of").
    """
    label = attribute_label(attribute)
    if operator in ("in", "not_in"):
        verb = "include" if array_attribute else "is"
        words = f"{verb} {'one' if operator == 'in' else 'none'} of {_render_list(value, 'or')}"
    elif operator == "contains_all":
        words = f"include all of {_render_list(value, 'and')}"
    elif operator == "contains_any":
        words = f"include any of {_render_list(value, 'or')}"
    else:
        verb = {"eq": "is", "neq": "is not", "lte": "is at most", "gte": "is at least", "contains": "include",
                "excludes": "do not include"}[operator]
        words = f"{verb} {_render_value(value)}"
    return f"{LEADS[tier]} a plan whose {label} {words}."


def statement_for(pref: Preference, plans: Sequence[Plan]) -> str:
    """:func:`render_statement` for ``pref``, taking whether its attribute is an array from ``plans``."""
    array = any(isinstance(p.attributes.get(pref.attribute), list) for p in plans)
    return render_statement(pref.tier, pref.attribute, pref.operator, pref.value, array_attribute=array)


def _normalize(text: str) -> str:
    """Straight quotes and apostrophes, single spaces outside quoted values, no final period."""
    text = text.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    text = "".join(part if i % 2 else re.sub(r"\s+", " ", part) for i, part in enumerate(parts)).strip()
    return text[:-1].rstrip() if text.endswith(".") else text


def _parse_token(text: str) -> Any:
    if text.startswith('"'):
        return json.loads(text)
    if text in ("yes", "no"):
        return text == "yes"
    return float(text) if "." in text else int(text)


def _parse_values(text: str, many: bool) -> Any:
    values, position = [], 0
    while True:
        token = _TOKEN.match(text, position)
        if token is None:
            raise ValueError(f"cannot read a value at '{text[position:position + 30]}'")
        values.append(_parse_token(token.group()))
        position = token.end()
        if position == len(text):
            break
        separator = _SEPARATOR.match(text, position)
        if not many or separator is None:
            raise ValueError(f"unexpected text after a value: '{text[position:position + 30]}'")
        position = separator.end()
    return values if many else values[0]


def parse_statement(text: str) -> tuple[str, str, str, Any]:
    """Read ``(tier, attribute, operator, value)`` back from a statement in the grammar of the module notes.

    Typographic quotes and apostrophes are accepted, and the final period is optional.

    Raises:
        ValueError: the text is not in the grammar.
    """
    normalized = _normalize(text)
    found = _STATEMENT.fullmatch(normalized)
    if found is None:
        raise ValueError(f"not a statement of the form '<lead> a plan whose <attribute> <operator> <value>': {text!r}")
    tier = next(t for t, lead in LEADS.items() if lead == found["lead"])
    label = found["attr"]
    attribute = _LABEL_KEYS.get(label) or (label.replace(" ", "_") if _SNAKE.fullmatch(label.replace(" ", "_"))
                                           else None)
    if attribute is None:
        raise ValueError(f"'{label}' is not an attribute name")
    operator = next(op for words, op in _OPERATOR_WORDS if re.fullmatch(words, found["op"]))
    value = _parse_values(found["value"], many=operator in LIST_OPERATORS)
    return tier, attribute, operator, value


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return _same(a, b)


def statement_problem(pref: Preference, plans: Sequence[Plan] = ()) -> str | None:
    """Why ``pref.statement`` does not state its predicate (``None`` when it round-trips exactly).

    ``plans`` only tunes the suggested wording (whether the attribute is an array).
    """
    try:
        tier, attribute, operator, value = parse_statement(pref.statement)
    except ValueError:
        return (f"statement of {pref.id} does not state its predicate (write it as "
                f"'{statement_for(pref, plans)}')")
    if (tier, attribute, operator) != (pref.tier, pref.attribute, pref.operator) or not _same_value(value, pref.value):
        return f"statement of {pref.id} does not match its predicate (it says {tier} {attribute} {operator} " \
               f"{json.dumps(value)})"
    return None


# =========================================================================================================
# Validation
# =========================================================================================================


def validate_travel(task: TravelTask, *, single_profile_rule: bool = True) -> list[str]:
    """Every violation of the travel-task rules, as one message each (empty when the task is valid).

    Rules: a snake_case ``name``, a description and 2-5 public facts; four plans with ids ``A``-``D``, non-empty
    titles, the same snake_case attribute keys (including :data:`REQUIRED_ATTRIBUTES`), values that are strings,
    numbers, booleans or lists of strings, each key of one type across plans, no two plans identical; 3-4
    travelers with unique ids and 2-4 preferences each; unique preference ids (an id that names a tier, like
    ``t1_must_1``, names its own tier); every preference's attribute present in every plan and its operator
    type-correct (see the module notes); every statement round-trips to its predicate and no two statements are
    the same; every tier used; each traveler has a preference that matches some but not all plans; at least
    two profiles give non-constant scores; the declared answer is the unique best plan under the weights; and
    (``single_profile_rule``) no single traveler's profile identifies the answer.

    *A single traveler's profile identifies the answer* when the plan that maximizes that traveler's own
    weighted score is unique and is the declared answer: that traveler, reading the public plans, would pick
    the answer with nobody else's information. This is stricter than appendix F, which allows a traveler to
    rank the answer first; ``single_profile_rule=False`` drops it.

    Preferences that cannot be evaluated (missing attribute, wrong types) count as matching nothing in the
    score-based rules, so one broken preference can also produce score messages.
    """
    issues: list[str] = []
    _check_header(task, issues)
    letters = _check_plans(task, issues)
    _check_travelers(task, issues)
    evaluable = _check_preferences(task, issues)

    used = {pref.tier for _, pref in task.preferences()}
    issues += [f"tier '{tier}' is never used" for tier in TIERS if tier not in used]
    plans = [p for p in task.options if p.id in letters]
    masks = {pref.id: [bool(_match_or_none(pref, plan)) for plan in plans] for _, pref in task.preferences()
             if pref.id in evaluable}
    for traveler in task.agents:
        if not any(0 < sum(masks.get(p.id, [])) < len(plans) for p in traveler.preferences):
            issues.append(f"{traveler.id} has no preference that matches some but not all plans")
    profiles = {t.id: _profile_scores(t, plans, masks) for t in task.agents}
    varying = [tid for tid, scores in profiles.items() if len(set(scores.values())) > 1]
    if len(varying) < 2:
        issues.append(f"only {len(varying)} profile{'s' if len(varying) != 1 else ''} contribute"
                      f"{'s' if len(varying) == 1 else ''} non-constant scores (at least 2 must)")

    answer = task.correct_answer
    if answer not in LETTERS:
        issues.append(f"declared answer '{answer}' is not one of A, B, C, D")
        return issues
    if answer not in letters:
        issues.append(f"declared answer '{answer}' is not the id of a plan")
        return issues
    totals = {letter: sum(profile[letter] for profile in profiles.values()) for letter in letters}
    best = totals[answer]
    for letter in sorted(letters):
        if letter == answer:
            continue
        if totals[letter] == best:
            issues.append(f"option {letter} ties the declared answer with score {best}")
        elif totals[letter] > best:
            issues.append(f"option {letter} scores {totals[letter]}, above the declared answer {answer} ({best})")
    if single_profile_rule:
        for traveler in task.agents:
            own = profiles[traveler.id]
            top = max(own.values(), default=0)
            leaders = [letter for letter, score in own.items() if score == top]
            if leaders == [answer]:
                issues.append(f"{traveler.id}'s profile alone (with the public plans) identifies the answer")
    return issues


def _profile_scores(traveler: Traveler, plans: list[Plan], masks: dict[str, list[bool]]) -> dict[str, int]:
    scores = {plan.id: 0 for plan in plans}
    for pref in traveler.preferences:
        for plan, hit in zip(plans, masks.get(pref.id, [False] * len(plans)), strict=True):
            if hit:
                scores[plan.id] += TIER_WEIGHTS[pref.tier]
    return scores


def _check_header(task: TravelTask, issues: list[str]) -> None:
    if not _SNAKE.fullmatch(task.name):
        issues.append(f"name '{task.name}' is not a short snake_case name")
    if not task.description.strip():
        issues.append("description is empty")
    if not 2 <= len(task.public_information) <= 5:
        issues.append(f"public_information has {len(task.public_information)} facts (expected 2-5)")
    if any(not fact.strip() for fact in task.public_information):
        issues.append("public_information has an empty fact")


def _check_plans(task: TravelTask, issues: list[str]) -> set[str]:
    """Plan rules; returns the plan ids that are letters A-D and unique."""
    ids = [p.id for p in task.options]
    counts = Counter(ids)
    issues += [f"duplicate plan id '{pid}'" for pid, n in counts.items() if n > 1]
    if sorted(counts) != list(LETTERS) or len(ids) != 4:
        issues.append(f"expected four plans with ids A, B, C, D (found {', '.join(ids) or 'none'})")
    issues += [f"plan {p.id} has an empty title" for p in task.options if not p.title.strip()]
    keys = {key for p in task.options for key in p.attributes}
    for plan in task.options:
        missing = [k for k in REQUIRED_ATTRIBUTES if k not in plan.attributes]
        if missing:
            issues.append(f"plan {plan.id} is missing required attribute{'s' if len(missing) > 1 else ''} "
                          + ", ".join(f"'{k}'" for k in missing))
        others = sorted(k for k in keys - set(plan.attributes) if k not in REQUIRED_ATTRIBUTES)
        if others:
            issues.append(f"plan {plan.id} lacks attribute{'s' if len(others) > 1 else ''} "
                          + ", ".join(f"'{k}'" for k in others) + " that other plans have")
        for key, value in plan.attributes.items():
            if value_kind(value) == "unsupported":
                issues.append(f"plan {plan.id}: attribute '{key}' has an unsupported value {json.dumps(value)} "
                              "(use a string, number, true/false or a list of strings)")
    for key in sorted(keys):
        if not _SNAKE.fullmatch(key):
            issues.append(f"attribute key '{key}' is not snake_case")
        kinds = {p.id: value_kind(p.attributes[key]) for p in task.options if key in p.attributes}
        if len(set(kinds.values())) > 1:
            issues.append(f"attribute '{key}' has different types across plans ("
                          + ", ".join(f"{kind} in {pid}" for pid, kind in kinds.items()) + ")")
    for a, b in itertools.combinations(task.options, 2):
        if a.attributes == b.attributes:
            issues.append(f"plans {a.id} and {b.id} have identical attributes")
    return {pid for pid, n in counts.items() if n == 1 and pid in LETTERS}


def _check_travelers(task: TravelTask, issues: list[str]) -> None:
    if not 3 <= len(task.agents) <= 4:
        issues.append(f"expected 3 or 4 travelers, found {len(task.agents)}")
    issues += [f"duplicate traveler id '{tid}'" for tid, n in Counter(t.id for t in task.agents).items() if n > 1]
    pref_ids = Counter(p.id for _, p in task.preferences())
    issues += [f"duplicate preference id '{pid}'" for pid, n in pref_ids.items() if n > 1]
    for traveler in task.agents:
        n = len(traveler.preferences)
        if not 2 <= n <= 4:
            issues.append(f"{traveler.id} has {n} preference{'s' if n != 1 else ''} (expected 2-4)")
        if not traveler.role.strip():
            issues.append(f"{traveler.id} has an empty role")


def _check_preferences(task: TravelTask, issues: list[str]) -> set[str]:
    """Per-preference rules; returns the ids of preferences that evaluate against every plan."""
    evaluable: set[str] = set()
    first_statement: dict[str, str] = {}
    for _, pref in task.preferences():
        named = [t for t in TIERS if re.search(rf"(?:^|_){t}(?:_|$)", pref.id)]
        if named and pref.tier not in named:
            issues.append(f"preference {pref.id}: its id names tier '{named[0]}' but its tier is '{pref.tier}'")
        missing = [p.id for p in task.options if pref.attribute not in p.attributes]
        if missing:
            issues.append(f"preference {pref.id}: attribute '{pref.attribute}' is missing from plan"
                          f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        problems = {operator_problem(pref.operator, pref.attribute, p.attributes[pref.attribute], pref.value)
                    for p in task.options if pref.attribute in p.attributes}
        problems.discard(None)
        issues += [f"preference {pref.id}: {problem}" for problem in sorted(problems)]
        if not missing and not problems:
            evaluable.add(pref.id)
        problem = statement_problem(pref, task.options)
        if problem:
            issues.append(problem)
        key = _normalize(pref.statement).lower()
        if key in first_statement:
            issues.append(f"statement of {pref.id} repeats the statement of {first_statement[key]}")
        else:
            first_statement[key] = pref.id
    return evaluable


def audit(task: TravelTask) -> dict[str, Any]:
    """The deterministic audit an LM reviewer receives: scores, per-traveler scores, matches and issues."""
    matched = {pref.id: [plan.id for plan in task.options if _match_or_none(pref, plan)]
               for _, pref in task.preferences()}
    return {
        "weights": TIER_WEIGHTS,
        "scores": score_plans(task),
        "traveler_scores": {t.id: score_plans(task, [t]) for t in task.agents},
        "matched_plans": matched,
        "declared_answer": task.correct_answer,
        "issues": validate_travel(task),
    }


def check_travel(data: dict[str, Any] | str, *, target: str | None = None, travelers: int | None = None,
                 rewrite_statements: bool = False) -> tuple[TravelTask | None, list[str]]:
    """Parse and validate a travel blueprint given as a dict or JSON text (an LM's output, a file's record).

    Args:
        data: the blueprint; JSON text may be wrapped in a Markdown code fence.
        target: the declared answer it must have, if any.
        travelers: the number of travelers it must have, if any.
        rewrite_statements: replace every statement with :func:`render_statement`'s before validating (for LMs
            that get predicates right but not the statement grammar).

    Returns:
        ``(task, issues)``: the task (``None`` when it does not parse) and every problem found.
    """
    if isinstance(data, str):
        text = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", data.strip())
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, [f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"]
        except (RecursionError, ValueError) as exc:  # absurd nesting or numbers from an LM
            return None, [f"not valid JSON ({type(exc).__name__}: {str(exc)[:80]})"]
    if not isinstance(data, dict):
        return None, [f"expected a JSON object (got {type(data).__name__})"]
    try:
        task = TravelTask.model_validate(data)
    except ValidationError as exc:
        return None, [f"{_loc(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)]
    if rewrite_statements:
        for _, pref in task.preferences():
            pref.statement = statement_for(pref, task.options)
    issues = validate_travel(task)
    if target is not None and task.correct_answer != target:
        issues.append(f"declared answer is {task.correct_answer} but the requested answer is {target}")
    if travelers is not None and len(task.agents) != travelers:
        issues.append(f"has {len(task.agents)} travelers but {travelers} were requested")
    return task, issues


def _loc(loc: Sequence[Any]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else (f".{part}" if i else str(part))
                   for i, part in enumerate(loc)) or "task"


def fingerprint(task: TravelTask) -> str:
    """A short hash of the plans and predicates (names, titles and wording excluded): equal tasks, equal hash."""
    content = [[p.id, p.attributes] for p in sorted(task.options, key=lambda p: p.id)]
    content.append([[pref.tier, pref.attribute, pref.operator, pref.value] for t in task.agents
                    for pref in t.preferences])
    return hashlib.sha1(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def summary_line(task: TravelTask) -> str:
    """One line that tells an LM which task it should not repeat (name and description)."""
    return f"{task.name}: {task.description[:160]}"


# =========================================================================================================
# Conversion
# =========================================================================================================


def plan_fact(plan: Plan) -> str:
    """``Plan A (title): transport mode: train; ...; activities: museum visits, market tour.``"""

    def shown(value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(value) if value else "none"
        if isinstance(value, bool):
            return "yes" if value else "no"
        return _render_value(value).strip('"') if isinstance(value, str) else _render_value(value)

    parts = "; ".join(f"{attribute_label(k)}: {shown(v)}" for k, v in plan.attributes.items())
    return f"Plan {plan.id} ({plan.title}): {parts}."


def to_hidden_profile(task: TravelTask, id: str | None = None,
                      provenance: dict[str, Any] | None = None) -> HiddenProfileTask:
    """The :class:`~groundstate.records.HiddenProfileTask` of a travel task.

    ``description`` is the task's; ``shared`` is the description, the public facts and one fact per plan
    (:func:`plan_fact`); ``private[i]`` is traveler ``i``'s statements; ``options`` are the plan letters and
    ``correct`` the declared answer. ``support`` maps each private statement to ``{letter: tier weight if its
    predicate matches that plan else 0.0}`` (shared facts have no entry), so summing the support of all facts
    gives exactly :func:`score_plans`. ``structure`` is the task's JSON dump.

    Args:
        task: the travel task.
        id: the record id (default: the task name).
        provenance: stored as the record's provenance.
    """
    letters = [p.id for p in task.options]
    support = {pref.statement: {p.id: float(TIER_WEIGHTS[pref.tier]) if _match_or_none(pref, p) else 0.0
                                for p in task.options}
               for _, pref in task.preferences()}
    return HiddenProfileTask(
        id=id or task.name,
        name=task.name,
        description=task.description,
        shared=[task.description, *task.public_information, *(plan_fact(p) for p in task.options)],
        private=[[pref.statement for pref in t.preferences] for t in task.agents],
        options=letters,
        correct=task.correct_answer,
        support=support,
        structure=task.model_dump(mode="json"),
        provenance=dict(provenance or {}),
    )


def travel_of(record: HiddenProfileTask) -> TravelTask | None:
    """The travel task stored in a record's ``structure`` (``None`` when it has no travel structure).

    Raises:
        ValueError: the structure looks like a travel task but does not parse.
    """
    structure = record.structure
    if not structure or "agents" not in structure or "options" not in structure:
        return None
    try:
        return TravelTask.model_validate(structure)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise ValueError(f"travel structure does not parse: {_loc(first['loc'])}: {first['msg']}") from None


def check_record(record: HiddenProfileTask) -> list[str]:
    """Travel-validator issues of a record with a travel structure, plus any mismatch with its text fields."""
    try:
        travel = travel_of(record)
    except ValueError as exc:
        return [str(exc)]
    if travel is None:
        return []
    try:
        issues = validate_travel(travel)
        expected = to_hidden_profile(travel, id=record.id)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:  # parses, but is not usable
        return [f"travel structure is malformed ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})"]
    for field in ("description", "shared", "private", "options", "correct", "support"):
        if getattr(record, field) != getattr(expected, field):
            issues.append(f"field '{field}' differs from what its travel structure gives")
    return issues


# =========================================================================================================
# The generator
# =========================================================================================================

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
                mask = [_evaluate(operator, v, value) for v in values]
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


# =========================================================================================================
# The LM path (appendix F): generate -> validate -> repair -> review
# =========================================================================================================


def variation_seed(seed: int, index: int) -> str:
    """A short scenario hint for the LM generator, drawn from the generator's vocabularies."""
    rng = random.Random(f"travel-lm:{seed}:{index}")
    destination, group = rng.choice(vocab.DESTINATIONS), rng.choice(vocab.GROUPS)
    return (f"{seed}-{index}: {group.phrase} from {rng.choice(vocab.ORIGINS)} visiting {destination.city}, "
            f"{destination.country} in {rng.choice(vocab.SEASONS)}")


def generate_travel_lm(n: int, seed: int = 0, start: int = 0, travelers: int | None = None, *,
                       builder: Any = None, max_repairs: int = 2, max_restarts: int = 1, review: bool = True,
                       rewrite_statements: bool = False) -> tuple[dict[int, TravelTask], list[dict[str, Any]]]:
    """Generate tasks with the configured DSPy LM (:class:`~groundstate.programs.consilience.travel_builder.TravelTaskBuilder`).

    Every candidate goes through :func:`check_travel` (the same validator as the LM-free generator), with the
    requested answer (:func:`target_letter`) and traveler count, and must not repeat an accepted task.

    Args:
        n, seed, start, travelers: as for :func:`generate_travel` (``None`` travelers: 3 or 4 by index).
        builder: a ready ``TravelTaskBuilder`` (default: one built with the options below); its own ``check``
            is replaced by this function's for every call.
        max_repairs, max_restarts, review: the builder's loop (see its docs).
        rewrite_statements: replace statements with the canonical rendering before validation.

    Returns:
        ``(tasks, failures)``: the accepted tasks by index (in index order) and, per index that produced none,
        ``{"index", "issues", "attempts"}``.
    """
    from groundstate.programs.consilience.travel_builder import TravelTaskBuilder

    if travelers not in (None, 3, 4):
        raise ConfigError(f"travelers must be 3 or 4 (got {travelers})")
    program = builder or TravelTaskBuilder(lambda data: (None, ["no validator"], {}), max_repairs=max_repairs,
                                           max_restarts=max_restarts, review=review)
    accepted: dict[int, TravelTask] = {}
    seen: set[str] = set()
    failures: list[dict[str, Any]] = []
    for index in range(start, start + n):
        count = travelers or (3 + index % 2)
        target = target_letter(seed, index)

        def check(data: Any, target: str = target, count: int = count) -> tuple[Any, list[str], dict[str, Any]]:
            task, issues = check_travel(data, target=target, travelers=count, rewrite_statements=rewrite_statements)
            if task is not None and fingerprint(task) in seen:
                issues.append("duplicates an accepted task")
            return task, issues, (audit(task) if task is not None else {})

        result = program(seed=variation_seed(seed, index), index=index, target=target, travelers=count,
                         avoid=[summary_line(t) for t in list(accepted.values())[-20:]], check=check)
        if result.task is None:
            failures.append({"index": index, "issues": list(result.issues), "attempts": result.attempts})
            continue
        seen.add(fingerprint(result.task))
        accepted[index] = result.task
    return accepted, failures
