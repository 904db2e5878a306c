"""Travel preferences as predicates over one plan attribute: the operators, matching, and plan scores.

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
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from groundstate.eval.benchmarks.travel.records import TIER_WEIGHTS, Plan, Preference, Traveler, TravelTask

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


def values_equal(a: Any, b: Any) -> bool:
    """Equality where a boolean only equals a boolean (``True != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _holds(items: list[Any], value: Any) -> bool:
    return any(values_equal(item, value) for item in items)


def evaluate_operator(operator: str, attribute: Any, value: Any) -> bool:
    """The operator on already type-checked operands."""
    if operator == "eq":
        return values_equal(attribute, value)
    if operator == "neq":
        return not values_equal(attribute, value)
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
    return evaluate_operator(pref.operator, attribute_value, pref.value)


def match_or_none(pref: Preference, plan: Plan) -> bool | None:
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
                if match_or_none(pref, plan):
                    scores[plan.id] += TIER_WEIGHTS[pref.tier]
    return scores
