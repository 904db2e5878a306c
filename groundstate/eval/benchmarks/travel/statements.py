"""The statement grammar: each preference's first-person sentence says exactly what its predicate says.

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

import json
import re
from collections.abc import Sequence
from typing import Any

from groundstate.eval.benchmarks.travel.predicates import values_equal
from groundstate.eval.benchmarks.travel.records import (
    ATTRIBUTE_LABELS,
    LEADS,
    LIST_OPERATORS,
    SNAKE_CASE,
    Plan,
    Preference,
)

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


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def _render_list(values: list[Any], conjunction: str) -> str:
    texts = [render_value(v) for v in values]
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
        words = f"{verb} {render_value(value)}"
    return f"{LEADS[tier]} a plan whose {label} {words}."


def statement_for(pref: Preference, plans: Sequence[Plan]) -> str:
    """:func:`render_statement` for ``pref``, taking whether its attribute is an array from ``plans``."""
    array = any(isinstance(p.attributes.get(pref.attribute), list) for p in plans)
    return render_statement(pref.tier, pref.attribute, pref.operator, pref.value, array_attribute=array)


def normalize_statement(text: str) -> str:
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
    normalized = normalize_statement(text)
    found = _STATEMENT.fullmatch(normalized)
    if found is None:
        raise ValueError(f"not a statement of the form '<lead> a plan whose <attribute> <operator> <value>': {text!r}")
    tier = next(t for t, lead in LEADS.items() if lead == found["lead"])
    label = found["attr"]
    attribute = _LABEL_KEYS.get(label) or (label.replace(" ", "_") if SNAKE_CASE.fullmatch(label.replace(" ", "_"))
                                           else None)
    if attribute is None:
        raise ValueError(f"'{label}' is not an attribute name")
    operator = next(op for words, op in _OPERATOR_WORDS if re.fullmatch(words, found["op"]))
    value = _parse_values(found["value"], many=operator in LIST_OPERATORS)
    return tier, attribute, operator, value


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(values_equal, a, b))
    return values_equal(a, b)


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
