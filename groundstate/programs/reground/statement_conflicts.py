"""Statement-level verification's parts (ReGround §E.4): numbered statements, the contradictions found among
them, and the settling of each contradiction, as :class:`~groundstate.programs.reground.reground.Verify`
settles a pair of sources.

Nothing here owns a predictor: :class:`~groundstate.programs.reground.reground.VerifyStatements` passes its own
in, so its prompts stay tunable and saveable. Every statement reaches a prompt through
:func:`~groundstate.programs.common.as_data` (the caller escapes them once, when they are extracted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from groundstate.concurrency import thread_map
from groundstate.programs.common import as_data


@dataclass(frozen=True)
class Statement:
    """One extracted statement: its number (1-based, the id models see), its source and its text."""

    number: int
    agent: int
    text: str

    @property
    def source(self) -> str:
        return f"Agent {self.agent}"

    def block(self) -> str:
        """The statement as the one assessed: source id, number and text."""
        return f"[{self.agent}] {self.source}, statement {self.number}:\n- {self.text}"

    def line(self) -> str:
        """The statement as one of a numbered list."""
        return f"{self.number}. [{self.agent}] {self.source}: {self.text}"


def number_statements(order: Iterable[int], statements: dict[int, list[str]]) -> list[Statement]:
    """Every agent's statements (agents in ``order``), numbered 1, 2, ... across agents."""
    items = [(agent, text) for agent in order for text in statements.get(agent, [])]
    return [Statement(k, agent, text) for k, (agent, text) in enumerate(items, 1)]


def numbered(items: Sequence[Statement]) -> str:
    """Statements one per line with their numbers and sources (``(none)`` when there are none)."""
    return "\n".join(s.line() for s in items) or "(none)"


def grouped(items: Sequence[Statement]) -> str:
    """Statements grouped by source, as agent-level verification shows the other sources' statements."""
    by_agent: dict[int, list[Statement]] = {}
    for s in items:
        by_agent.setdefault(s.agent, []).append(s)
    return "\n\n".join(f"[{agent}] Agent {agent}:\n" + "\n".join(f"- {s.text}" for s in group)
                       for agent, group in by_agent.items()) or "(no other statements)"


def others_of(item: Statement, items: Sequence[Statement]) -> list[Statement]:
    """The statements a statement is checked against: every other source's (never its own source's)."""
    return [s for s in items if s.agent != item.agent]


def read_contradictions(item: Statement, answer: Any, items: Sequence[Statement]) -> list[int]:
    """The statement numbers an answer names that are other sources' statements (anything else is ignored)."""
    allowed = {s.number for s in others_of(item, items)}
    found: list[int] = []
    for value in answer if isinstance(answer, list | tuple) else []:
        if isinstance(value, bool):
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            continue
        if number in allowed and number not in found:
            found.append(number)
    return found


def contradiction_pairs(found: dict[int, list[int]]) -> list[tuple[int, int]]:
    """The contradicting pairs ``(low, high)`` from each statement's findings, those found from both sides
    first, then in statement order."""
    counts = Counter(tuple(sorted((a, b))) for a, named in found.items() for b in named)
    return sorted(counts, key=lambda pair: (-counts[pair], pair))


Arguer = Callable[..., Any]


def settle(pairs: Sequence[tuple[int, int]], items: Sequence[Statement], argue_for: Arguer, argue_against: Arguer,
           adjudicate: Arguer, max_workers: int = 8, max_conflicts: int | None = None
           ) -> tuple[list[int], list[dict[str, Any]]]:
    """Settle each contradiction in turn, as agent-level verification settles a pair of sources.

    For each pair whose statements both still stand: argue for and against each statement using only the other
    standing statements (the pair's own two excluded, and any statement already judged misleading), the four
    arguments concurrently; the adjudicator names the statement more likely incorrect, and only that one is
    removed. A pair one of whose statements was already removed is resolved and skipped; after
    ``max_conflicts`` adjudications (``None``: no limit) the rest are left unsettled.

    Returns:
        ``(removed statement numbers in the order they were removed, one trace entry per pair)``.
    """
    by_number = {s.number: s for s in items}
    removed: list[int] = []
    log: list[dict[str, Any]] = []
    settled = 0
    for first_no, second_no in pairs:
        entry: dict[str, Any] = {"pair": [first_no, second_no]}
        if first_no in removed or second_no in removed:
            log.append({**entry, "skipped": "already resolved (one side was removed)"})
            continue
        if max_conflicts is not None and settled >= max_conflicts:
            log.append({**entry, "skipped": "max_conflicts reached"})
            continue
        first, second = by_number[first_no], by_number[second_no]
        standing = [s for s in items if s.number not in (first_no, second_no) and s.number not in removed]
        others = grouped(standing)
        targets = [(first, "support", argue_for), (first, "refute", argue_against),
                   (second, "support", argue_for), (second, "refute", argue_against)]

        def argue(target, others=others):
            statement, stance, predictor = target
            return as_data(predictor(target=statement.block(), others=others, stance=stance).argument)

        arguments = thread_map(argue, targets, max_workers)
        text = "\n".join(f"{'For' if stance == 'support' else 'Against'} statement {s.number} ({s.source}): {a}"
                         for (s, stance, _), a in zip(targets, arguments, strict=True))
        verdict = adjudicate(first=first.block(), second=second.block(), arguments=text)
        loser = first if verdict.incorrect == "first" else second
        removed.append(loser.number)
        settled += 1
        log.append({**entry, "arguments": {f"{stance}:{s.number}": a
                                           for (s, stance, _), a in zip(targets, arguments, strict=True)},
                    "incorrect": loser.number, "reason": as_data(verdict.reason)})
    return removed, log
