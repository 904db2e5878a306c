"""Travel tasks as hidden-profile tasks: public plan facts, private preference statements, per-fact support.

:func:`to_hidden_profile` gives a :class:`~groundstate.records.HiddenProfileTask` whose per-fact ``support``
sums to the validator's plan scores; :func:`travel_of` and :func:`check_record` read one back and re-check it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from groundstate.eval.benchmarks.travel.predicates import match_or_none
from groundstate.eval.benchmarks.travel.records import TIER_WEIGHTS, Plan, TravelTask
from groundstate.eval.benchmarks.travel.statements import attribute_label, render_value
from groundstate.eval.benchmarks.travel.validator import error_location, validate_travel
from groundstate.records import HiddenProfileTask


def plan_fact(plan: Plan) -> str:
    """``Plan A (title): transport mode: train; ...; activities: museum visits, market tour.``"""

    def shown(value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(value) if value else "none"
        if isinstance(value, bool):
            return "yes" if value else "no"
        return render_value(value).strip('"') if isinstance(value, str) else render_value(value)

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
    support = {pref.statement: {p.id: float(TIER_WEIGHTS[pref.tier]) if match_or_none(pref, p) else 0.0
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
        raise ValueError(f"travel structure does not parse: {error_location(first['loc'])}: {first['msg']}") from None


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
