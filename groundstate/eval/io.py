"""Reading data files with errors that name the file, the record and the field."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from groundstate.errors import InputError


def read_jsonl(path: str | Path, skip_invalid: bool = False, problems: list[str] | None = None) -> list[dict]:
    """Read a JSON Lines file of objects. A bad line raises :class:`InputError` naming the line.

    With ``skip_invalid`` a bad line is reported into ``problems`` (if given) and skipped.
    """
    path = Path(path)
    rows: list[dict] = []
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError("a line must hold a JSON object")
            except (json.JSONDecodeError, ValueError) as exc:
                message = f"line {number}: not a JSON object ({getattr(exc, 'msg', exc)})"
                if skip_invalid:
                    if problems is not None:
                        problems.append(f"{path}: {message}")
                    continue
                raise InputError(message, file=str(path)) from None
            rows.append(row)
    return rows


def read_json(path: str | Path) -> Any:
    """Read a JSON file; malformed JSON raises :class:`InputError` with the line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})",
                         file=str(path)) from None


def read_records(path: str | Path, **kwargs: Any) -> list[dict]:
    """A JSON list (``.json``) or JSON Lines (anything else) of objects."""
    path = Path(path)
    if path.suffix == ".json":
        data = read_json(path)
        if not isinstance(data, list):
            raise InputError("expected a JSON list of records", file=str(path))
        for i, row in enumerate(data):
            if not isinstance(row, dict):
                raise InputError("not a JSON object", file=str(path), record=i)
        return data
    return read_jsonl(path, **kwargs)


def write_jsonl(path: str | Path, rows: list[Any]) -> None:
    """Write records (dicts or pydantic models) as JSON Lines, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            data = row.model_dump(mode="json") if hasattr(row, "model_dump") else row
            handle.write(json.dumps(data, ensure_ascii=False) + "\n")
    tmp.replace(path)


# -- records of groundstate's own formats ------------------------------------------------------------------
def first_char(path: Path) -> str:
    """The first character of the file that is not whitespace or a byte-order mark ('' if none)."""
    try:
        with open(path, encoding="utf-8") as handle:
            while char := handle.read(1):
                if not char.isspace() and char != "\ufeff":
                    return char
    except (OSError, UnicodeDecodeError):
        pass
    return ""


def first_list_item(path: Path) -> Any:
    """The first item of a top-level JSON list, parsing no more of the file than needed; None if none."""
    decoder = json.JSONDecoder()
    buffer, chunk = "", 1 << 16
    try:
        with open(path, encoding="utf-8") as handle:
            while True:
                data = handle.read(chunk)
                buffer += data
                text = buffer.lstrip("\ufeff \t\r\n")
                if text and text[0] != "[":
                    return None
                rest = text[1:].lstrip()
                if rest.startswith("]"):
                    return None
                if rest:
                    try:
                        return decoder.raw_decode(rest)[0]
                    except json.JSONDecodeError:
                        pass
                if not data:
                    return None
                chunk *= 2
    except (OSError, UnicodeDecodeError):
        return None


def iter_rows(path: Path) -> Iterator[tuple[str, Any, InputError | None]]:
    """``(where, row, error)`` per record: ``where`` is ``at line N`` (JSON Lines) or ``at position N`` (list)."""
    if first_char(path) == "[":
        data = read_json(path)
        for position, row in enumerate(data):
            where = f"at position {position}"
            error = None if isinstance(row, dict) else InputError("not a JSON object", file=str(path), record=where)
            yield where, row, error
        return
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"at line {number}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield where, None, InputError(f"not valid JSON ({exc.msg}, column {exc.colno})",
                                                  file=str(path), record=where)
                    continue
                error = None if isinstance(row, dict) else InputError("not a JSON object", file=str(path),
                                                                       record=where)
                yield where, row, error
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", file=str(path)) from None


def load_models(path: str | Path, model: type, to_error: Callable[[Any, str, str], InputError],
                skip_invalid: bool = False, problems: list[str] | None = None,
                check: Callable[[Any, str], None] | None = None) -> list[Any]:
    """Records of pydantic ``model``, one per JSON Lines line (or JSON list item), with one-line errors.

    Args:
        path: the file.
        model: the pydantic model of a record (it must have an ``id``).
        to_error: ``(ValidationError, file, record label) -> InputError`` naming the field.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        check: an extra ``(record, label)`` check that raises :class:`InputError`.

    Raises:
        InputError: a bad line, an invalid record or a duplicate id (unless ``skip_invalid``).
    """
    from pydantic import ValidationError

    path = Path(path)
    reported = problems if problems is not None else []
    records: list[Any] = []
    seen: dict[str, str] = {}
    for where, row, error in iter_rows(path):
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
            reported.append(f"{err} (record skipped)")
    return records
