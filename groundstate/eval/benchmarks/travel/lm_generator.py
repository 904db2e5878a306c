"""The LM path of the travel generator (appendix F): generate -> validate -> repair -> review.

An LM drafts each task (:class:`~groundstate.programs.consilience.travel_builder.TravelTaskBuilder`); the
same validator as the LM-free generator accepts or rejects it, with the requested answer and size.
"""

from __future__ import annotations

import random
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.travel import vocab
from groundstate.eval.benchmarks.travel.generator import target_letter
from groundstate.eval.benchmarks.travel.records import TravelTask
from groundstate.eval.benchmarks.travel.validator import audit, check_travel, fingerprint, summary_line


def variation_seed(seed: int, index: int) -> str:
    """A short scenario hint for the LM generator, drawn from the generator's vocabularies."""
    rng = random.Random(f"travel-lm:{seed}:{index}")
    destination, group = rng.choice(vocab.DESTINATIONS), rng.choice(vocab.GROUPS)
    return (f"{seed}-{index}: {group.phrase} from {rng.choice(vocab.ORIGINS)} visiting {destination.city}, "
            f"{destination.country} in {rng.choice(vocab.SEASONS)}")


def generate_travel_lm(n: int, seed: int = 0, start: int = 0, travelers: int | None = None, *,
                       builder: Any = None, max_repairs: int = 2, max_restarts: int = 1, review: bool = True,
                       rewrite_statements: bool = False) -> tuple[dict[int, TravelTask], list[dict[str, Any]]]:
    """Generate tasks with the configured DSPy LM
    (:class:`~groundstate.programs.consilience.travel_builder.TravelTaskBuilder`).

    Every candidate goes through :func:`check_travel` (the same validator as the LM-free generator), with the
    requested answer (:func:`target_letter`) and traveler count, and must not repeat an accepted task.

    Args:
        n, seed, start, travelers: as for :func:`generate_travel` (``None`` travelers: 3 or 4 by index).
        builder: a ready ``TravelTaskBuilder`` (default: one built with the options below); its own ``check``
            is replaced by this function's for every call.
        max_repairs, max_restarts, review: the builder's loop (see its docs).
        rewrite_statements: replace statements with the canonical rendering before validation.

    Returns:
        ``(tasks, failures)``: the accepted tasks by index (in index order) and, per index that produced none,
        ``{"index", "issues", "attempts"}``.
    """
    from groundstate.programs.consilience.travel_builder import TravelTaskBuilder  # noqa: PLC0415 (heavy: dspy)

    if travelers not in (None, 3, 4):
        raise ConfigError(f"travelers must be 3 or 4 (got {travelers})")
    program = builder or TravelTaskBuilder(lambda data: (None, ["no validator"], {}), max_repairs=max_repairs,
                                           max_restarts=max_restarts, review=review)
    accepted: dict[int, TravelTask] = {}
    seen: set[str] = set()
    failures: list[dict[str, Any]] = []
    for index in range(start, start + n):
        count = travelers or (3 + index % 2)
        target = target_letter(seed, index)

        def check(data: Any, target: str = target, count: int = count) -> tuple[Any, list[str], dict[str, Any]]:
            task, issues = check_travel(data, target=target, travelers=count, rewrite_statements=rewrite_statements)
            if task is not None and fingerprint(task) in seen:
                issues.append("duplicates an accepted task")
            return task, issues, (audit(task) if task is not None else {})

        result = program(seed=variation_seed(seed, index), index=index, target=target, travelers=count,
                         avoid=[summary_line(t) for t in list(accepted.values())[-20:]], check=check)
        if result.task is None:
            failures.append({"index": index, "issues": list(result.issues), "attempts": result.attempts})
            continue
        seen.add(fingerprint(result.task))
        accepted[index] = result.task
    return accepted, failures
