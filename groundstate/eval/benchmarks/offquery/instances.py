"""groundstate's own OffQuery format: one ``OffQueryInstance.model_dump(mode="json")`` per record.

JSON Lines (or a JSON list), Parquet, or in-memory records; :func:`~groundstate.eval.sources.as_source` says which.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from groundstate.conditions import CONDITIONS, CORRUPTED_CONDITIONS
from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.synthetic_rule import check_instance
from groundstate.eval.benchmarks.offquery.validation import from_validation
from groundstate.eval.io import load_models
from groundstate.eval.sources import as_source, write_records
from groundstate.records import OffQueryInstance


def load_instances(path: Any, skip_invalid: bool = False, problems: list[str] | None = None, *,
                   condition: str | None = None, allow_empty: bool = False) -> list[OffQueryInstance]:
    """Load groundstate's own format: JSON Lines, one ``OffQueryInstance.model_dump(mode="json")`` per line.

    A ``.json`` file holding a JSON list of such objects is read too, and so are Parquet files, ``datasets.Dataset``,
    pandas ``DataFrame`` and lists of dicts (:func:`~groundstate.eval.sources.as_source`).

    Args:
        path: the file or in-memory records.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        condition: ``"unreliable"`` and ``"reliable-private-unreliable-shared"`` require every instance to have a
            ``corrupted_context``; ``None`` and the other conditions do not.

    Returns:
        The instances, in file order.

    A generated instance (one whose ``provenance`` holds the generator's ``structure``) must also keep the
    generator's guarantees (:func:`check_structure`): every command that reads instances refuses an edited one
    the way ``data validate`` does.

    Raises:
        InputError: a bad line (named by its line number), an invalid record (named by its id and line, with the
            field), a generated record that breaks the generator's rule, or a duplicate id (unless
            ``skip_invalid``).
    """
    path = as_source(path, "OffQuery instances")
    if condition is not None and condition not in CONDITIONS:
        raise ConfigError(f"condition must be one of {', '.join(CONDITIONS)} (got '{condition}')")

    def check(instance: OffQueryInstance, label: str) -> None:
        if condition in CORRUPTED_CONDITIONS and instance.corrupted_context is None:
            raise InputError(f"is missing, but condition '{condition}' needs the corrupted shared context",
                             file=str(path), record=label, field="corrupted_context")
        check_structure(instance, str(path), label)

    return load_models(path, OffQueryInstance, from_validation, skip_invalid, problems, check,
                       allow_empty=allow_empty, what="OffQuery instances")


#: Which field a problem reported by the generator's check is about (the first phrase that matches names it).
_RULE_FIELDS = (("not a generator structure", "provenance.structure"), ("T2", "t2_facts"),
                ("corrupted fact", "t2_facts"), ("misleading", "misleading"), ("distributed", "misleading"),
                ("corrupted shared context", "corrupted_context"), ("corrupted_shared", "corrupted_context"),
                ("wrong option", "wrong_answer"), ("correct option", "answer"), ("texts", "agents"),
                ("corrupted_private", "agents"))


def check_structure(instance: OffQueryInstance, file: str, record: str) -> None:
    """Refuse a generated instance that breaks the generator's guarantees
    (:func:`~groundstate.eval.benchmarks.offquery.synthetic_rule.check_instance`: the reliable facts give the answer,
    the misleading agents are exactly those stating false values, the T2 facts are balanced and labelled right,
    ...). Instances without a generator ``structure`` in their provenance (built from MediQ, published) pass.

    Raises:
        InputError: one line naming the record, the field the first problem is about, and how many more there are.
    """
    if not (instance.provenance or {}).get("structure"):
        return

    problems = check_instance(instance)
    if problems:
        first = problems[0]
        field = next((name for phrase, name in _RULE_FIELDS if phrase in first), None)
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise InputError(f"breaks the generator's rule: {first}{more}", file=file, record=record, field=field)


def save_instances(path: str | Path, instances: Iterable[OffQueryInstance]) -> None:
    """Write instances as groundstate JSON Lines, or Parquet for a ``.parquet`` path (atomically);
    :func:`load_instances` reads them back."""
    write_records(path, list(instances))
