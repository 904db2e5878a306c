"""T1, evidence verification: did the program name the misleading agent(s)?

A prediction's ``misleading_agent`` is read tolerantly (:func:`resolve_agents`: an index, ``"Agent 2"``, a role
name, a list, or a "no agent" phrase) and compared with the gold indices by exact set match.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

_NONE_WORDS = frozenset({
    "", "none", "null", "nil", "n/a", "na", "no", "nobody", "no one", "no agent", "no agents", "neither",
    "no misleading agent", "no misleading agents", "none of them", "none of the agents", "all reliable",
    "all agents are reliable", "all agents reliable", "-1",
})


_NONE_PATTERN = re.compile(r"^(?:no\s+(?:misleading\s+|unreliable\s+)?(?:agent|one|source)s?\b|all\b.*\breliable\b)")


_AGENT_ANCHORED = re.compile(r"^(?:agent\s*#?\s*)?(\d+)\s*(?:\(.*\))?\s*\.?$")


_AGENT_MENTION = re.compile(r"\bagent\s*#?\s*(\d+)\b")


_LIST_SEPARATORS = re.compile(r"\s*(?:,|;|&|/|\n|\band\b)\s*")


def clean_name(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().replace("_", " ").split()).strip(" .'\"`*")


def is_no_agent(value: Any) -> bool:
    """Whether ``value`` says that no agent is misleading (``None``, ``"none"``, ``"no agent"``, ``[]``, ``-1``)."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == -1
    if isinstance(value, list | tuple | set | frozenset):
        return all(is_no_agent(v) for v in value)
    if isinstance(value, str):
        text = clean_name(value)
        return text in _NONE_WORDS or bool(_NONE_PATTERN.match(text))
    return False


def _in_range(index: int, roles: Sequence[str | None] | None) -> int | None:
    if index < 0 or (roles is not None and index >= len(roles)):
        return None
    return index


def _role_index(text: str, roles: Sequence[str | None] | None, *, anywhere: bool = False) -> int | None:
    """The index whose role equals ``text`` (or, with ``anywhere``, is the one role named in it)."""
    if not roles:
        return None
    named = {i for i, role in enumerate(roles) if role and clean_name(role) == text}
    if not named and anywhere:
        named = {i for i, role in enumerate(roles)
                 if role and re.search(rf"\b{re.escape(clean_name(role))}\b", text)}
    return named.pop() if len(named) == 1 else None


def _resolve_one(value: Any, roles: Sequence[str | None] | None) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _in_range(value, roles)
    if isinstance(value, float):
        return _in_range(int(value), roles) if value.is_integer() else None
    if not isinstance(value, str):
        return None
    text = clean_name(value)
    match = _AGENT_ANCHORED.match(text)
    if match:
        return _in_range(int(match.group(1)), roles)
    return _role_index(text, roles)


def resolve_agents(value: Any, roles: Sequence[str | None] | None = None) -> set[int] | None:
    """Read a predicted misleading-agent field as a set of agent indices.

    Args:
        value: an index, a numeric string, ``"Agent 2"``, ``"agent 2 (laboratory)"``, a role name, a list of
            those, a string listing several (``"Agent 1, Agent 3"``, ``"1 and 3"``), or a "no agent" value.
        roles: the instance's agent roles by index (``None`` entries for agents without one). When given,
            role names resolve (case-insensitively) and indices outside ``range(len(roles))`` are rejected.

    Returns:
        The set of indices (empty for "no agent"), or ``None`` when some part cannot be resolved.
    """
    if is_no_agent(value):
        return set()
    if isinstance(value, list | tuple | set | frozenset):
        found: set[int] = set()
        for item in value:
            if is_no_agent(item):
                continue
            index = _resolve_one(item, roles)
            if index is None:
                return None
            found.add(index)
        return found
    single = _resolve_one(value, roles)
    if single is not None:
        return {single}
    if not isinstance(value, str):
        return None
    text = clean_name(value)
    parts = [p for p in _LIST_SEPARATORS.split(text) if p]
    if len(parts) > 1:
        indices = [_resolve_one(p, roles) for p in parts]
        if all(i is not None for i in indices):
            return set(indices)
    mentions = {int(m) for m in _AGENT_MENTION.findall(text)}
    if len(mentions) == 1:
        index = _in_range(mentions.pop(), roles)
        return None if index is None else {index}
    if not mentions:
        index = _role_index(text, roles, anywhere=True)
        if index is not None:
            return {index}
    return None


def resolve_agent(value: Any, roles: Sequence[str | None] | None = None) -> int | set[int] | None:
    """Read a predicted misleading agent as an index (or, for a list, a set of indices).

    ``resolve_agent(2)``, ``resolve_agent("Agent 2")``, ``resolve_agent("agent 2 (laboratory)")`` and, with
    ``roles=[..., ..., "Laboratory"]``, ``resolve_agent("laboratory")`` all give ``2``.

    Args:
        value: the predicted value (see :func:`resolve_agents` for the accepted forms).
        roles: the instance's agent roles by index, to resolve role names and reject out-of-range indices.

    Returns:
        For a list, tuple or set: the set of resolved indices, or ``None`` if an element is unresolvable. For a
        single value: the index (a set when a string names several agents, ``"Agent 1, Agent 3"``), or ``None``
        when it names no agent or cannot be resolved (use :func:`is_no_agent` to tell those apart).
    """
    if isinstance(value, list | tuple | set | frozenset):
        return resolve_agents(value, roles)
    if is_no_agent(value):
        return None
    found = resolve_agents(value, roles)
    if not found:
        return None
    return next(iter(found)) if len(found) == 1 else found


def t1_score(predicted: Any, misleading: Sequence[int], roles: Sequence[str | None] | None = None) -> float:
    """T1 evidence verification: exact match of the misleading agent(s).

    Args:
        predicted: the predicted ``misleading_agent`` (index, name, role, list, or a "no agent" value).
        misleading: the gold misleading indices; empty means every agent is reliable.
        roles: the instance's agent roles by index.

    Returns:
        1.0 when the resolved prediction equals the gold set (for an empty gold set: the prediction says "no
        agent"), else 0.0. An unresolvable prediction scores 0.0.
    """
    found = resolve_agents(predicted, roles)
    return float(found is not None and found == {int(i) for i in misleading})
