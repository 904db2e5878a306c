"""Loading hidden-profile tasks: the HiddenBench JSON format, groundstate's own JSON Lines, and saving.

A HiddenBench file is one JSON list of tasks. Each task becomes one :class:`~groundstate.records.HiddenProfileTask`:

=========================  ======================================================================
HiddenBench field          task field
=========================  ======================================================================
``id`` (str or int)        ``id``
``name`` (str)             ``name``
``description`` (str)      ``description``
``shared_information``     ``shared`` (a list of non-empty strings; may be empty)
``hidden_information``     ``private``: entry ``i`` is agent ``i``'s single private fact
``possible_answers``       ``options`` (at least two, distinct, non-empty)
``correct_answer``         ``correct`` (must be one of ``possible_answers``, exactly)
``rationale`` (optional)   ``rationale``
=========================  ======================================================================

``hidden_information[i]`` is kept whole as the one private fact of agent ``i`` (it is not split into
sentences: a split would guess at boundaries, and the text is what the agent is given). Other fields are kept
in ``provenance["extra"]``; ``provenance`` also records ``source``, ``file`` and ``position``.

Validation is strict: every field above must be present with the right type (``rationale`` may be absent or
null), there must be at least two agents, no fact may be empty, the correct answer must be one of the
possible answers, and ids must be unique. Every problem is an :class:`~groundstate.errors.InputError` whose
one line names the file, the record (its position, and its id when it has one) and the field. With
``skip_invalid=True`` a bad record is skipped instead and a one-line message is appended to ``problems``.

groundstate's own format is JSON Lines with one ``HiddenProfileTask.model_dump(mode="json")`` per line
(:func:`save_hidden_tasks`); :func:`load_hidden_tasks` reads either format.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundstate.errors import InputError
from groundstate.eval.io import load_models, read_json, require_records
from groundstate.eval.sources import Records, as_source, write_records
from groundstate.records import HiddenProfileTask

logger = logging.getLogger(__name__)

#: The key whose presence in the first item marks a HiddenBench file.
HIDDENBENCH_MARKER = "hidden_information"
REQUIRED_FIELDS: tuple[str, ...] = ("id", "name", "description", "shared_information", "hidden_information",
                                    "possible_answers", "correct_answer")
KNOWN_FIELDS: frozenset[str] = frozenset({*REQUIRED_FIELDS, "rationale"})


def load_hiddenbench(path: Any, skip_invalid: bool = False, problems: list[str] | None = None, *,
                     allow_empty: bool = False) -> list[HiddenProfileTask]:
    """Load a HiddenBench file (a JSON list of tasks).

    Args:
        path: the file, a Parquet file, or the items in memory (:func:`~groundstate.eval.sources.as_source`).
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        allow_empty: accept a file with no (valid) tasks; otherwise that is an error.

    Returns:
        The tasks, in file order.

    Raises:
        InputError: an unreadable file, malformed JSON, not a list, or (unless ``skip_invalid``) a bad record.
    """
    path = as_source(path, "HiddenBench tasks")
    data = path.rows if isinstance(path, Records) else read_json(path.path)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of HiddenBench tasks (got a JSON {type(data).__name__})",
                         file=str(path))
    reported = problems if problems is not None else []
    tasks: list[HiddenProfileTask] = []
    seen: dict[str, Any] = {}
    for position, item in enumerate(data):
        try:
            task = _from_item(item, position, path)
            if task.id in seen:
                raise InputError(f"duplicate id '{task.id}' (first used by record {seen[task.id]})", file=str(path),
                                 record=_label(item, position), field="id")
            seen[task.id] = position
            tasks.append(task)
        except InputError as err:
            if not skip_invalid:
                raise
            reported.append(f"{err} (record skipped)")
    if len(tasks) < len(data):
        logger.warning("%s: skipped %d of %d records", path, len(data) - len(tasks), len(data))
    return require_records(tasks, path, allow_empty, "tasks", len(data) - len(tasks))


def _label(item: Any, position: int) -> str | int:
    """``3``, or ``3 (id 'task-9')`` when the item carries an id."""
    given = item.get("id") if isinstance(item, dict) else None
    return position if given is None else f"{position} (id '{given}')"


def _from_item(item: Any, position: int, path: Path) -> HiddenProfileTask:
    """Convert one HiddenBench item; every problem is an :class:`InputError` naming this record and field."""
    record = _label(item, position)

    def fail(message: str, field: str | None = None) -> InputError:
        return InputError(message, file=str(path), record=record, field=field)

    if not isinstance(item, dict):
        raise fail(f"must be a JSON object (got {_type(item)})")
    for key in REQUIRED_FIELDS:
        if item.get(key) is None:
            raise fail("is missing or null", key)

    given_id = item["id"]
    if isinstance(given_id, bool) or not isinstance(given_id, str | int) or not str(given_id).strip():
        raise fail(f"must be a non-empty string or an integer (got {_type(given_id)})", "id")

    def text(key: str, empty_ok: bool = False) -> str:
        value = item[key]
        if not isinstance(value, str):
            raise fail(f"must be a string (got {_type(value)})", key)
        if not empty_ok and not value.strip():
            raise fail("must not be empty", key)
        return value

    def texts(key: str) -> list[str]:
        value = item[key]
        if not isinstance(value, list):
            raise fail(f"must be a list of strings (got {_type(value)})", key)
        for j, entry in enumerate(value):
            if not isinstance(entry, str):
                raise fail(f"must be a string (got {_type(entry)})", f"{key}[{j}]")
            if not entry.strip():
                raise fail("must not be empty", f"{key}[{j}]")
        return value

    name = text("name", empty_ok=True)
    description = text("description")
    shared = texts("shared_information")
    hidden = texts("hidden_information")
    if len(hidden) < 2:
        raise fail(f"needs at least two agents, one private fact each (got {len(hidden)})", "hidden_information")
    answers = texts("possible_answers")
    if len(answers) < 2:
        raise fail(f"needs at least two answers (got {len(answers)})", "possible_answers")
    repeated = sorted({a for a in answers if answers.count(a) > 1})
    if repeated:
        raise fail(f"must be distinct ('{repeated[0]}' appears more than once)", "possible_answers")
    correct = item["correct_answer"]
    if not isinstance(correct, str):
        raise fail(f"must be a string (got {_type(correct)})", "correct_answer")
    if correct not in answers:
        close = [a for a in answers if _loose(a) == _loose(correct)]
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise fail(f"'{correct}' is not one of possible_answers{hint}", "correct_answer")
    rationale = item.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise fail(f"must be a string or null (got {_type(rationale)})", "rationale")

    extra = {k: v for k, v in item.items() if k not in KNOWN_FIELDS}
    provenance: dict[str, Any] = {"source": "hiddenbench", "file": path.name, "position": position}
    if extra:
        provenance["extra"] = extra
    try:
        return HiddenProfileTask(id=str(given_id), name=name, description=description, shared=shared,
                                 private=[[fact] for fact in hidden], options=answers, correct=correct,
                                 rationale=rationale, provenance=provenance)
    except ValidationError as exc:  # the checks above mirror the record's; this is a safety net
        raise _from_validation(exc, str(path), record) from None


def _loose(text: str) -> str:
    return " ".join(text.split()).casefold()


def _type(value: Any) -> str:
    return "null" if value is None else {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                                          "list": "list", "dict": "object"}.get(type(value).__name__,
                                                                                 type(value).__name__)


def _from_validation(exc: ValidationError, file: str, record: Any) -> InputError:
    """One-line :class:`InputError` from the first pydantic error of a :class:`HiddenProfileTask`."""
    first = exc.errors(include_url=False)[0]
    message = re.sub(r"^Value error, ", "", str(first.get("msg", "invalid")))
    loc = tuple(first.get("loc") or ())
    if loc:
        field = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
    else:  # a model-level check: name the field its message mentions
        named = [n for n in ("correct", "options", "private", "shared") if re.search(rf"\b{n}", message)]
        field = named[0] if named else None
    return InputError(message, file=file, record=record, field=field)


# -- groundstate's own format ---------------------------------------------------------------------------------
def is_hiddenbench_file(path: Any) -> bool:
    """Whether ``path`` holds a JSON list (or Parquet/in-memory records) whose first item has ``hidden_information``."""
    path = as_source(path, "tasks")
    if not path.is_file() or (not isinstance(path, Records) and path.first_char() != "["):
        return False
    first = path.first()
    return isinstance(first, dict) and HIDDENBENCH_MARKER in first


def load_hidden_tasks(path: Any, skip_invalid: bool = False, problems: list[str] | None = None, *,
                      allow_empty: bool = False) -> list[HiddenProfileTask]:
    """Load a HiddenBench file or groundstate's own task file, whichever ``path`` is.

    A JSON list whose first item has ``hidden_information`` is HiddenBench (:func:`load_hiddenbench`); anything
    else is groundstate's format: JSON Lines (or a JSON list) of ``HiddenProfileTask`` dumps. ``path`` may also be a
    Parquet file (as :func:`save_hidden_tasks` writes), a ``datasets.Dataset``, a pandas ``DataFrame`` or a list of
    dicts, told apart the same way by the first record.

    Raises:
        InputError: a bad file or (unless ``skip_invalid``) a bad record, a duplicate id.
    """
    path = as_source(path, "tasks")
    if is_hiddenbench_file(path):
        return load_hiddenbench(path, skip_invalid=skip_invalid, problems=problems, allow_empty=allow_empty)
    return load_models(path, HiddenProfileTask, _from_validation, skip_invalid, problems, allow_empty=allow_empty,
                       what="tasks")


def save_hidden_tasks(path: str | Path, tasks: Iterable[HiddenProfileTask]) -> None:
    """Write tasks as groundstate JSON Lines, or Parquet for a ``.parquet`` path (atomically);
    :func:`load_hidden_tasks` reads them back."""
    write_records(path, list(tasks))
