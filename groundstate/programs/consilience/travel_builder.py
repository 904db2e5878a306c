"""The LM builder of group-travel hidden-profile tasks (Consilience appendix F): generate -> validate -> repair
-> review.

``TravelTaskBuilder(check)(seed=..., index=..., target="B", travelers=3)`` returns a ``dspy.Prediction`` with:

* ``task``: the accepted task (whatever ``check`` parsed it into), or ``None`` when every attempt failed;
* ``blueprint``: the last JSON object the LM wrote (a dict, ``None`` if it never wrote one);
* ``issues``: the problems of the last attempt (empty when accepted);
* ``review_issues``: what the reviewer said about the last reviewed candidate;
* ``attempts``: how many candidates (generated or repaired) were checked.

The validator is injected: ``check(blueprint) -> (task | None, issues, audit)``, where ``issues`` is every
violation (empty = valid) and ``audit`` the deterministic facts the reviewer is given. The data layer provides it
(:func:`groundstate.eval.benchmarks.travel.validator.check_travel` plus
:func:`~groundstate.eval.benchmarks.travel.validator.audit`, wired by
:func:`~groundstate.eval.benchmarks.travel.lm_generator.generate_travel_lm`), so programs never import evaluation
code.

The loop: generate a candidate; while the validator finds issues and repairs remain, ask for a repair of the
whole object; once valid, ask the reviewer (if ``review``); on a rejection or when repairs run out, start over
with a new candidate (at most ``max_restarts`` times), telling the generator what went wrong before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from groundstate.signatures.travel import GenerateTravelTask, RepairTravelTask, ReviewTravelTask

logger = logging.getLogger(__name__)

Check = Callable[[Any], tuple[Any, list[str], dict[str, Any]]]
MAX_ISSUES_SHOWN = 20


class TravelTaskBuilder(dspy.Module):
    """Generate -> validate -> repair (up to ``max_repairs``) -> review, restarting up to ``max_restarts`` times.

    Args:
        check: the validator, ``blueprint -> (task | None, issues, audit)``.
        max_repairs: repair requests per generated candidate.
        max_restarts: fresh candidates after the first one fails.
        review: ask the LM reviewer about candidates that pass the validator.
    """

    def __init__(self, check: Check, max_repairs: int = 2, max_restarts: int = 1, review: bool = True):
        super().__init__()
        self.check = check
        self.max_repairs = max_repairs
        self.max_restarts = max_restarts
        self.review_enabled = review
        self.generate = dspy.Predict(GenerateTravelTask)
        self.repair = dspy.Predict(RepairTravelTask)
        self.review = dspy.Predict(ReviewTravelTask)

    def generate_task(self, seed: str, index: int, target: str, travelers: int, avoid: Sequence[str] = (),
                      avoid_issues: Sequence[str] = ()) -> dict[str, Any]:
        """Stage 1: a new candidate blueprint."""
        out = self.generate(variation_seed=seed, position=index, travelers=travelers, target=target,
                            avoid=list(avoid), avoid_issues=list(avoid_issues)[:MAX_ISSUES_SHOWN])
        return _as_object(out.task)

    def repair_task(self, blueprint: dict[str, Any], issues: Sequence[str], index: int,
                    avoid: Sequence[str] = ()) -> dict[str, Any]:
        """Stage 2: the whole blueprint with the validator's ``issues`` fixed."""
        out = self.repair(task=blueprint, issues=list(issues)[:MAX_ISSUES_SHOWN], position=index, avoid=list(avoid))
        return _as_object(out.repaired)

    def review_task(self, blueprint: dict[str, Any], audit: dict[str, Any]) -> tuple[bool, list[str]]:
        """Stage 3: ``(accepted, issues)`` from the semantic reviewer."""
        out = self.review(task=blueprint, audit=audit)
        return bool(out.accepted), [str(x) for x in (out.issues or [])]

    def forward(self, seed: str, index: int, target: str, travelers: int = 3, avoid: Sequence[str] | None = None,
                check: Check | None = None) -> dspy.Prediction:
        check = check or self.check
        avoid = list(avoid or [])
        attempts, issues, review_issues, history = 0, [], [], []
        blueprint: dict[str, Any] | None = None
        for _ in range(self.max_restarts + 1):
            try:
                blueprint = self.generate_task(seed, index, target, travelers, avoid, history)
            except (AdapterParseError, ValueError) as exc:
                issues = [f"the generated task could not be read ({_short(exc)})"]
                history += issues
                continue
            attempts += 1
            task, issues, audit = check(blueprint)
            for _ in range(self.max_repairs):
                if not issues:
                    break
                try:
                    blueprint = self.repair_task(blueprint, issues, index, avoid)
                except (AdapterParseError, ValueError) as exc:
                    issues = [*issues, f"the repaired task could not be read ({_short(exc)})"]
                    break
                attempts += 1
                task, issues, audit = check(blueprint)
            if issues:
                history += issues
                continue
            if self.review_enabled:
                accepted, review_issues = self.review_task(blueprint, audit)
                if not accepted:
                    issues = [f"review: {x}" for x in review_issues] or ["review: rejected without a reason"]
                    history += issues
                    continue
            return dspy.Prediction(task=task, blueprint=blueprint, issues=[], review_issues=review_issues,
                                   attempts=attempts)
        logger.info("no acceptable travel task for index %s after %d attempts", index, attempts)
        return dspy.Prediction(task=None, blueprint=blueprint, issues=issues, review_issues=review_issues,
                               attempts=attempts)


def _as_object(value: Any) -> dict[str, Any]:
    """The LM's task field as a dict (a JSON string is decoded); anything else is a ValueError."""
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:200] + ("..." if len(text) > 200 else "")
