"""Statement-level verification (ReGround §E.4): the statements agents' evidence is rewritten into, numbered;
the contradictions found among them; the settling of each contradiction, as
:class:`~groundstate.programs.reground.reground.Verify` settles a pair of sources; and
:class:`VerifyStatements`, the stage that composes them.

The helper functions own no predictor: :class:`VerifyStatements` passes its own in, so its prompts stay tunable
and saveable. Every statement reaches a prompt through :func:`~groundstate.programs.common.as_data` (escaped once,
when it is extracted: :func:`model_text`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import ThreadedAsync, as_data, bullet_list, coerce_agents, saveable
from groundstate.records import AgentEvidence
from groundstate.signatures.state import VerifyFact
from groundstate.signatures.verification import (
    Adjudicate,
    ArgueSource,
    ExtractStatements,
    FindContradictingStatements,
)


def unique_nonempty(items: Sequence[Any] | None) -> list[str]:
    """Strings from an LM list output, stripped, without blanks and repeats (small models repeat themselves)."""
    seen: dict[str, None] = {}
    for item in items or []:
        text = str(item).strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)


def model_text(items: Sequence[Any] | None) -> list[str]:
    """:func:`unique_nonempty` strings from an LM output, each made safe to place in a later prompt
    (:func:`~groundstate.programs.common.as_data`)."""
    return unique_nonempty([as_data(item) for item in items or []])


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


#: Statement mode's rules (see :class:`VerifyStatements`).
STATEMENT_RULES = ("adjudicate", "refuted")


@saveable
class VerifyStatements(ThreadedAsync, dspy.Module):
    """Stage 1 at the statement level (paper §E.4): when misinformation is spread over several agents, find the
    misleading *statements* instead of one misleading source.

    Every agent's statements are extracted as in :class:`~groundstate.programs.reground.reground.Verify` and
    numbered. Under the default ``rule``, ``adjudicate``, each statement is checked against the other agents'
    statements for the ones that contradict it
    (:class:`~groundstate.signatures.verification.FindContradictingStatements`, concurrently); each contradicting
    pair is then settled as :class:`~groundstate.programs.reground.reground.Verify` settles a pair of sources
    (:func:`settle`, pairs found from both sides first): arguments for and against each statement from the other
    standing statements only, an adjudication naming the statement more likely incorrect, and only that statement
    removed. A statement no contradiction reaches stays trusted. The removed statements are the misleading ones;
    the agents holding them are reported as the misleading agents (a list, so T1 is an exact set match); every
    other statement is trusted evidence.

    Sources: §E.4 says only that ReGround identifies misleading facts at the statement level; the conflict
    search, the arguments and the adjudication are the agent-level procedure (§4.1, appendix C) applied to
    statements, which is our reading. ``rule="refuted"`` keeps the earlier release's rule: flag every statement
    the other agents' statements refute (:class:`~groundstate.signatures.state.VerifyFact`), which removes both
    sides of a contradiction that the checker sees from both sides.

    Args:
        max_workers: threads for concurrent calls.
        rule: ``adjudicate`` (default) or ``refuted`` (see above).
        max_conflicts: settle at most this many contradictions (``None``: all), a cost cap.

    ``forward(agents)`` returns ``Prediction(misleading_agent, misleading_statements, statements, trusted, trace)``
    where ``trusted`` is the list of trusted statements.
    """

    #: What a saved manifest that predates ``rule`` was built with (:func:`groundstate.registry.validate_kwargs`).
    legacy_kwargs = {"rule": "refuted"}

    def __init__(self, max_workers: int = 8, rule: str = "adjudicate", max_conflicts: int | None = None):
        super().__init__()
        if rule not in STATEMENT_RULES:
            raise ValueError(f"rule must be one of {STATEMENT_RULES}, got '{rule}'")
        if max_conflicts is not None and max_conflicts < 1:
            raise ValueError("max_conflicts must be at least 1 (or None)")
        self.max_workers = max_workers
        self.rule = rule
        self.max_conflicts = max_conflicts
        self.extract = dspy.Predict(ExtractStatements)
        if rule == "refuted":
            self.check = dspy.Predict(VerifyFact)
        else:
            self.find = dspy.Predict(FindContradictingStatements)
            self.argue_for = dspy.Predict(ArgueSource)
            self.argue_against = dspy.Predict(ArgueSource)
            self.adjudicate = dspy.Predict(Adjudicate)

    def extract_statements(self, agents: Sequence[AgentEvidence]) -> dict[int, list[str]]:
        """Each agent's evidence as statements (one concurrent call per agent)."""
        outs = thread_map(lambda a: self.extract(source=a.name, evidence=a.evidence), agents, self.max_workers)
        return {a.agent: model_text(o.statements) for a, o in zip(agents, outs, strict=True)}

    def forward(self, agents, statements: dict[int, list[str]] | None = None) -> dspy.Prediction:
        agents = coerce_agents(agents)
        if statements is None:
            statements = self.extract_statements(agents)
        else:
            statements = {k: [as_data(s) for s in v] for k, v in statements.items()}
        items = number_statements([a.agent for a in agents], statements)
        if self.rule == "refuted":
            flagged_numbers, trace = self._refuted(items)
        else:
            flagged_numbers, trace = self._adjudicated(items)
        flagged = set(flagged_numbers)
        by_number = {s.number: s for s in items}
        owners = sorted({by_number[n].agent for n in flagged})
        trusted = [s.text for s in items if s.number not in flagged]
        trace = {"statements": {str(k): v for k, v in statements.items()}, "rule": self.rule, **trace}
        return dspy.Prediction(misleading_agent=owners,
                               misleading_statements=[s.text for s in items if s.number in flagged],
                               statements=statements, trusted=trusted, trace=trace)

    def _refuted(self, items: list[Statement]) -> tuple[list[int], dict[str, Any]]:
        """The earlier rule: a statement the other agents' statements refute is flagged."""
        verdicts = thread_map(lambda s: self.check(fact=s.text, evidence=bullet_list([o.text for o in
                                                                                      others_of(s, items)])),
                              items, self.max_workers)
        checked = [{"agent": s.agent, "statement": s.text, "verdict": v.verdict, "flagged": v.verdict == "refuted"}
                   for s, v in zip(items, verdicts, strict=True)]
        return [s.number for s, c in zip(items, checked, strict=True) if c["flagged"]], {"checks": checked}

    def _adjudicated(self, items: list[Statement]) -> tuple[list[int], dict[str, Any]]:
        """Find the contradicting pairs, then settle each one (only the side judged misleading is removed)."""
        answers = thread_map(lambda s: self.find(statement=s.block(), others=numbered(others_of(s, items))),
                             items, self.max_workers)
        found = {s.number: read_contradictions(s, a.contradicting, items) for s, a in zip(items, answers, strict=True)}
        pairs = contradiction_pairs(found)
        removed, conflicts = settle(pairs, items, self.argue_for, self.argue_against, self.adjudicate,
                                    self.max_workers, self.max_conflicts)
        checks = [{"number": s.number, "agent": s.agent, "statement": s.text, "contradicting": found[s.number],
                   "flagged": s.number in removed} for s in items]
        return removed, {"checks": checks, "conflicts": conflicts}
