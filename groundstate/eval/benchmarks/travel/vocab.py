"""Vocabularies of the travel task generator: places, groups, roles and plan attribute values.

Everything here is plain data written for groundstate; :mod:`groundstate.eval.benchmarks.travel.generator`
samples from it.
Activities and transport modes depend on the kind of destination so that every plan is an ordinary, feasible
trip; prices are derived from the other attributes (see ``HOTEL_RATE_USD`` and ``TRANSPORT_COST_USD``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Destination:
    """A destination and the kind of place it is (which decides activities and transport)."""

    city: str
    country: str
    kind: str


DESTINATIONS: tuple[Destination, ...] = (
    Destination("Lisbon", "Portugal", "coast"),
    Destination("Porto", "Portugal", "coast"),
    Destination("Valencia", "Spain", "coast"),
    Destination("Seville", "Spain", "city"),
    Destination("Nice", "France", "coast"),
    Destination("Lyon", "France", "city"),
    Destination("Annecy", "France", "lake"),
    Destination("Bologna", "Italy", "city"),
    Destination("Lake Como", "Italy", "lake"),
    Destination("the Dolomites", "Italy", "mountain"),
    Destination("Innsbruck", "Austria", "mountain"),
    Destination("Vienna", "Austria", "city"),
    Destination("Lucerne", "Switzerland", "lake"),
    Destination("Edinburgh", "Scotland", "city"),
    Destination("the Scottish Highlands", "Scotland", "mountain"),
    Destination("Copenhagen", "Denmark", "city"),
    Destination("Bergen", "Norway", "coast"),
    Destination("Kyoto", "Japan", "city"),
    Destination("Hakone", "Japan", "mountain"),
    Destination("Vancouver", "Canada", "coast"),
    Destination("Banff", "Canada", "mountain"),
    Destination("Quebec City", "Canada", "city"),
    Destination("Asheville", "the United States", "mountain"),
    Destination("Savannah", "the United States", "city"),
    Destination("Lake Tahoe", "the United States", "lake"),
    Destination("Oaxaca", "Mexico", "city"),
    Destination("Mallorca", "Spain", "island"),
    Destination("Crete", "Greece", "island"),
    Destination("Madeira", "Portugal", "island"),
    Destination("Tasmania", "Australia", "island"),
)

ORIGINS: tuple[str, ...] = (
    "London", "Manchester", "Paris", "Brussels", "Amsterdam", "Frankfurt", "Munich", "Zurich", "Milan",
    "Madrid", "Toronto", "Boston", "Chicago", "Seattle", "Melbourne", "Osaka",
)

SEASONS: tuple[str, ...] = (
    "early spring", "late spring", "early summer", "late summer", "early autumn", "late autumn",
    "the winter holidays", "a long weekend in May", "the school half-term break", "mid-September",
)


@dataclass(frozen=True)
class Group:
    """A kind of travelling group: how the description names it and the roles its members can have."""

    key: str
    phrase: str
    roles: tuple[str, ...]


GROUPS: tuple[Group, ...] = (
    Group("family", "a three-generation family", (
        "grandparent", "parent", "teenage grandchild", "aunt who handles the bookings", "uncle", "adult daughter",
        "adult son")),
    Group("friends", "a group of old university friends", (
        "friend who organizes most trips", "friend on a tight budget", "friend who is a keen photographer",
        "friend training for a half marathon", "friend who works night shifts", "friend with a young baby at home")),
    Group("colleagues", "colleagues adding a few days to a work conference", (
        "team lead", "junior analyst", "project manager", "software engineer", "sales manager", "office manager")),
    Group("club", "members of a local walking club", (
        "club secretary", "club treasurer", "newest member", "route planner", "longest-serving member",
        "member recovering from an injury")),
    Group("choir", "members of a community choir on a short tour", (
        "choir director", "lead soprano", "bass section leader", "accompanist", "tour coordinator",
        "youngest choir member")),
    Group("siblings", "adult siblings celebrating a parent's birthday", (
        "eldest sibling", "youngest sibling", "sibling who lives abroad", "sibling's partner",
        "parent being celebrated", "sibling with two small children")),
)

TRANSPORT_BY_KIND: dict[str, tuple[str, ...]] = {
    "coast": ("train", "flight", "coach", "self-drive car"),
    "city": ("train", "flight", "coach", "self-drive car"),
    "lake": ("train", "coach", "self-drive car", "flight"),
    "mountain": ("train", "coach", "self-drive car", "flight"),
    "island": ("flight", "ferry", "flight and ferry"),
}

ACTIVITIES_BY_KIND: dict[str, tuple[str, ...]] = {
    "coast": ("boat tour", "beach afternoon", "seafood market visit", "coastal walk", "kayaking", "museum visits",
              "old town walking tour", "cooking class"),
    "city": ("museum visits", "food market tour", "cooking class", "evening concert", "historic walking tour",
             "gallery afternoon", "river cruise", "bike tour"),
    "lake": ("lake cruise", "swimming", "lakeside cycling", "castle visit", "paddleboarding", "wine tasting",
             "cable car ride", "old town walking tour"),
    "mountain": ("guided hike", "cable car ride", "thermal baths", "farm visit", "scenic railway", "museum visits",
                 "cycling tour", "stargazing evening"),
    "island": ("beach afternoon", "snorkelling", "boat tour", "winery visit", "coastal hike", "village market visit",
               "cooking class", "scenic drive"),
}

MEAL_OPTIONS: tuple[str, ...] = (
    "vegetarian", "vegan", "halal", "kosher", "gluten-free", "seafood", "local specialties", "street food",
    "fine dining",
)

DEPARTURE_WINDOWS: tuple[str, ...] = ("early morning", "morning", "midday", "afternoon", "evening", "overnight")

HOTEL_CATEGORIES: tuple[str, ...] = ("budget", "guesthouse", "apartment", "midrange", "boutique", "upscale")

ROOM_ARRANGEMENTS: dict[int, tuple[str, ...]] = {
    3: ("three single rooms", "one twin and one single room", "a three-bed family room", "a two-bedroom apartment",
        "a triple room"),
    4: ("two twin rooms", "four single rooms", "a four-bed family suite", "a three-bedroom apartment",
        "one twin and two single rooms"),
}

#: Accommodation cost per person and night, by hotel category.
HOTEL_RATE_USD: dict[str, int] = {"budget": 45, "guesthouse": 55, "apartment": 60, "midrange": 85, "boutique": 120,
                                  "upscale": 170}
#: Return transport cost per person, by transport mode.
TRANSPORT_COST_USD: dict[str, int] = {"coach": 70, "train": 150, "self-drive car": 110, "ferry": 130, "flight": 280,
                                      "flight and ferry": 340}
#: Booked cost per activity and person.
ACTIVITY_COST_USD = 35
#: Activities that need a fair amount of walking (plans with one get longer walking days).
ACTIVE_ACTIVITIES: frozenset[str] = frozenset({
    "guided hike", "coastal hike", "coastal walk", "cycling tour", "lakeside cycling", "bike tour", "kayaking",
    "paddleboarding", "snorkelling", "historic walking tour", "old town walking tour"})

PUBLIC_FACTS: tuple[str, ...] = (
    "Walking distances are for the longest planned day of each plan.",
    "Active hours count the scheduled sightseeing and travel time per day.",
    "The group will book a single plan for everyone; nobody travels separately.",
    "All four plans were quoted by the same agency and are available on the group's dates.",
    "Meal options are what the included restaurants and half-board hotels can serve every day.",
)
