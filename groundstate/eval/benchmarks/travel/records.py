"""Group-travel tasks (Consilience appendix F): the records.

Group-travel hidden-profile tasks (Consilience appendix F): records, operators, statements, validator, generator.

A :class:`TravelTask` has four public plans (``A``-``D``), each a dict of attributes, and 3-4 travelers whose
private :class:`Preference` items are structured predicates over one attribute, each with a first-person
``statement`` that says exactly what the predicate says. Under the weighted profile a plan scores +2 per matched
``must``, +1 per matched ``prefer``, -1 per matched ``avoid`` and -2 per matched ``reject``; the declared answer
is the unique best plan. :func:`validate_travel` checks every rule and returns every violation;
:func:`generate_travel` draws valid tasks deterministically with no LM; :func:`to_hidden_profile` turns a task into
a :class:`~groundstate.records.HiddenProfileTask` whose per-fact ``support`` sums to the validator's scores.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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


SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


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
