"""The travel validator: every rule a valid task obeys, with every violation reported.

:func:`validate_travel` checks a :class:`~groundstate.eval.benchmarks.travel.records.TravelTask`;
:func:`check_travel` parses JSON (text or data) first, as the LM path needs; :func:`audit` summarises
the scores and margins.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from groundstate.eval.benchmarks.travel.predicates import match_or_none, operator_problem, score_plans, value_kind
from groundstate.eval.benchmarks.travel.records import (
    REQUIRED_ATTRIBUTES,
    SNAKE_CASE,
    TIER_WEIGHTS,
    TIERS,
    Plan,
    Traveler,
    TravelTask,
)
from groundstate.eval.benchmarks.travel.statements import normalize_statement, statement_for, statement_problem
from groundstate.records import LETTERS


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
    masks = {pref.id: [bool(match_or_none(pref, plan)) for plan in plans] for _, pref in task.preferences()
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
    if not SNAKE_CASE.fullmatch(task.name):
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
        if not SNAKE_CASE.fullmatch(key):
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
        key = normalize_statement(pref.statement).lower()
        if key in first_statement:
            issues.append(f"statement of {pref.id} repeats the statement of {first_statement[key]}")
        else:
            first_statement[key] = pref.id
    return evaluable


def audit(task: TravelTask) -> dict[str, Any]:
    """The deterministic audit an LM reviewer receives: scores, per-traveler scores, matches and issues."""
    matched = {pref.id: [plan.id for plan in task.options if match_or_none(pref, plan)]
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
        return None, [f"{error_location(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)]
    if rewrite_statements:
        for _, pref in task.preferences():
            pref.statement = statement_for(pref, task.options)
    issues = validate_travel(task)
    if target is not None and task.correct_answer != target:
        issues.append(f"declared answer is {task.correct_answer} but the requested answer is {target}")
    if travelers is not None and len(task.agents) != travelers:
        issues.append(f"has {len(task.agents)} travelers but {travelers} were requested")
    return task, issues


def error_location(loc: Sequence[Any]) -> str:
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
