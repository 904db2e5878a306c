"""Loading OffQuery data: groundstate's own JSON Lines, or either format by looking at the file (:func:`load_any`).

The published files are read by :mod:`~groundstate.eval.benchmarks.offquery.published`; statistics of a data set
are in :mod:`~groundstate.eval.benchmarks.offquery.stats`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.published import is_official_file, load_offquery
from groundstate.eval.benchmarks.offquery.validation import from_validation
from groundstate.eval.io import load_models, write_jsonl
from groundstate.records import CONDITIONS, OffQueryInstance


def load_instances(path: str | Path, skip_invalid: bool = False, problems: list[str] | None = None, *,
                   condition: str | None = None, allow_empty: bool = False) -> list[OffQueryInstance]:
    """Load groundstate's own format: JSON Lines, one ``OffQueryInstance.model_dump(mode="json")`` per line.

    A ``.json`` file holding a JSON list of such objects is read too.

    Args:
        path: the file.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        condition: ``"unreliable"`` requires every instance to have a ``corrupted_context``; ``None`` or
            ``"reliable"`` do not.

    Returns:
        The instances, in file order.

    Raises:
        InputError: a bad line (named by its line number), an invalid record (named by its id and line, with the
            field) or a duplicate id (unless ``skip_invalid``).
    """
    path = Path(path)
    if condition is not None and condition not in CONDITIONS:
        raise ConfigError(f"condition must be one of {', '.join(CONDITIONS)} (got '{condition}')")

    def check(instance: OffQueryInstance, label: str) -> None:
        if condition == "unreliable" and instance.corrupted_context is None:
            raise InputError("is missing, but condition 'unreliable' needs the corrupted shared context",
                             file=str(path), record=label, field="corrupted_context")

    return load_models(path, OffQueryInstance, from_validation, skip_invalid, problems, check,
                       allow_empty=allow_empty, what="OffQuery instances")


def save_instances(path: str | Path, instances: Iterable[OffQueryInstance]) -> None:
    """Write instances as groundstate JSON Lines (atomically); :func:`load_instances` reads them back."""
    write_jsonl(path, list(instances))


def load_any(path: str | Path, t2_truth: str | Path | None = None, condition: str | None = None,
             skip_invalid: bool = False, problems: list[str] | None = None, *,
             allow_empty: bool = False, t2_facts: str | Path | None = None) -> list[OffQueryInstance]:
    """Load a published OffQuery file or a groundstate instance file, whichever ``path`` is.

    A ``.json`` file holding a list whose first item has ``shuffled_private_information`` is a published file
    (:func:`load_offquery`); anything else is groundstate's own format (:func:`load_instances`).

    Args:
        path: the file.
        t2_truth: the T2 truth file for a published file (groundstate files carry their T2 facts).
        condition: ``"reliable"``/``"unreliable"`` checks the instances can run under it; ``None`` = no check.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        allow_empty: accept a file with no (valid) records; otherwise that is an error.
        t2_facts: the published facts file beside ``t2_truth`` (see :func:`load_offquery`).

    Raises:
        InputError: bad input (see the two loaders).
        ConfigError: ``t2_truth`` given for a groundstate file, or an unknown ``condition``.
    """
    path = Path(path)
    if is_official_file(path):
        return load_offquery(path, t2_truth, condition, skip_invalid=skip_invalid, problems=problems,
                             allow_empty=allow_empty, t2_facts=t2_facts)
    if t2_truth is not None or t2_facts is not None:
        raise ConfigError(f"{path} is not a published OffQuery file; a T2 truth file only goes with one "
                          "(groundstate instance files carry their T2 facts)")
    return load_instances(path, skip_invalid=skip_invalid, problems=problems, condition=condition,
                          allow_empty=allow_empty)
