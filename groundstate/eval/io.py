"""Reading data files with errors that name the file, the record and the field."""

from __future__ import annotations

import json
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
