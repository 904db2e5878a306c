"""Reading data files with errors that name the file, the record and the field."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundstate import files
from groundstate.errors import InputError
from groundstate.eval.sources import (  # noqa: F401  (first_list_item, write_jsonl: re-exported)
    PARQUET_SUFFIXES,
    Records,
    Source,
    as_source,
    first_list_item,
    read_parquet,
    write_jsonl,
)
from groundstate.files import json_lines


def read_jsonl(path: str | Path, skip_invalid: bool = False, problems: list[str] | None = None) -> list[dict]:
    """Read a JSON Lines file of objects. A bad line raises :class:`InputError` naming the line.

    With ``skip_invalid`` a bad line is reported into ``problems`` (if given) and skipped.
    """
    rows: list[dict] = []
    for number, row, error in json_lines(path):
        if error is None and not isinstance(row, dict):
            error = InputError(f"a line must hold a JSON object, not a JSON {_kind(row)}", file=str(path),
                               record=f"at line {number}")
        if error is not None:
            if skip_invalid:
                if problems is not None:
                    problems.append(f"{error} (line skipped)")
                continue
            raise error
        rows.append(row)
    return rows


def _kind(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(type(value), type(value).__name__)


def read_json(path: str | Path) -> Any:
    """Read a JSON file; every kind of bad file raises one :class:`InputError` line (see :mod:`groundstate.files`)."""
    return files.read_json(path)


def read_records(path: Any, allow_empty: bool = False, **kwargs: Any) -> list[dict]:
    """A JSON list (``.json``), a Parquet file (``.parquet``/``.pq``, read through ``datasets`` as
    :func:`~groundstate.eval.sources.read_parquet` does), JSON Lines (anything else) of objects, or records in
    memory (any :class:`~groundstate.eval.sources.Source`); no records is an error unless ``allow_empty``."""
    if isinstance(path, Source) and not isinstance(path, Records):
        path = path.path
    if isinstance(path, Records) or Path(path).suffix.lower() in PARQUET_SUFFIXES:
        source = as_source(path)
        rows = []
        for _, row, error in source.iter_rows():
            if error is not None:
                raise error
            rows.append(row)
        return require_records(rows, source, allow_empty)
    path = Path(path)
    if path.suffix == ".json":
        data = read_json(path)
        if not isinstance(data, list):
            raise InputError(f"expected a JSON list of records (got a JSON {_kind(data)})", file=str(path))
        for i, row in enumerate(data):
            if not isinstance(row, dict):
                raise InputError(f"not a JSON object (a JSON {_kind(row)})", file=str(path), record=i)
        return require_records(data, path, allow_empty)
    return require_records(read_jsonl(path, **kwargs), path, allow_empty)


# -- records of groundstate's own formats ------------------------------------------------------------------
first_char = files.first_char


def iter_rows(path: Any) -> Iterator[tuple[str, Any, InputError | None]]:
    """``(where, row, error)`` per record of any source (:meth:`~groundstate.eval.sources.Source.iter_rows`):
    ``where`` is ``at line N`` (JSON Lines) or ``at position N`` (list, Parquet or records in memory)."""
    yield from as_source(path).iter_rows()


def require_records(records: list[Any], path: Any, allow_empty: bool, what: str = "records",
                    skipped: int = 0) -> list[Any]:
    """``records``, unless there are none and ``allow_empty`` is false: an empty or all-invalid file is an
    error, not a successful run over nothing.

    Raises:
        InputError: no records (saying whether the file was empty or every record was skipped).
    """
    if records or allow_empty:
        return records
    reason = f"all {skipped} were invalid and skipped" if skipped else "the file holds none"
    raise InputError(f"no {what} ({reason}); pass --allow-empty (allow_empty=True) if that is intended",
                     file=str(path))


def load_models(path: Any, model: type, to_error: Callable[[Any, str, str], InputError],
                skip_invalid: bool = False, problems: list[str] | None = None,
                check: Callable[[Any, str], None] | None = None, allow_empty: bool = False,
                what: str = "records") -> list[Any]:
    """Records of pydantic ``model``, one per JSON Lines line (or JSON list item), with one-line errors.

    Args:
        path: the file, or any source :func:`~groundstate.eval.sources.as_source` accepts.
        model: the pydantic model of a record (it must have an ``id``).
        to_error: ``(ValidationError, file, record label) -> InputError`` naming the field.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        check: an extra ``(record, label)`` check that raises :class:`InputError`.
        allow_empty: accept a file with no (valid) records; otherwise that is an error.
        what: what the records are, for the empty-file error.

    Raises:
        InputError: a bad line, an invalid record or a duplicate id (unless ``skip_invalid``), or no records.
    """
    path = as_source(path, what)  # normalised once; a Source passed down is used as it is
    reported = problems if problems is not None else []
    records: list[Any] = []
    seen: dict[str, str] = {}
    skipped = 0
    for where, row, error in path.iter_rows():
        try:
            if error is not None:
                raise error
            label = f"{row['id']} ({where})" if isinstance(row.get("id"), str | int) else where
            try:
                record = model.model_validate(row)
            except ValidationError as exc:
                raise to_error(exc, str(path), label) from None
            if check is not None:
                check(record, label)
            if record.id in seen:
                raise InputError(f"duplicate id '{record.id}' (first {seen[record.id]})", file=str(path),
                                 record=label, field="id")
            seen[record.id] = where
            records.append(record)
        except InputError as err:
            if not skip_invalid:
                raise
            skipped += 1
            reported.append(f"{err} (record skipped)")
    return require_records(records, path, allow_empty, what, skipped)
