"""Checking what a file holds against a pydantic model, the moment it is read, with one-line errors.

Every artifact and bookkeeping file groundstate reads back (saved-program and controller manifests, calibrator
parameters, run configurations and summaries, DHD cache files, Parquet metadata) has one pydantic model. The
reader parses the file with :mod:`groundstate.files` and passes the value through :func:`validate` (or reads and
validates in one step with :func:`read_model`), so a field of the wrong type or a missing one is reported as
one :class:`~groundstate.errors.InputError` line naming the file, the record and the field
(``manifest.json: field 'build_args.oracle_t1': is missing``) before any work starts, never as a traceback
from deep inside the code that uses it.

:func:`from_validation` turns the first error of a pydantic ``ValidationError`` into that line; readers that
validate with their own calls use it too.
"""

from __future__ import annotations

import os
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from groundstate.errors import InputError
from groundstate.files import read_json

M = TypeVar("M", bound=BaseModel)

_PREFIXES = re.compile(r"^(Value error|Assertion failed), ")
_SHOULD = re.compile(r"^Input should be ")


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``list``, ``string``, ``number``, ``boolean``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "list", tuple: "list", dict: "object"}.get(type(value), type(value).__name__)


def field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as a field path: ``("data", "train", "ids", 2)`` -> ``data.train.ids[2]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (key)"
        else:
            out += f".{part}" if out else str(part)
    return out


def _union_branches(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The errors of the first field when it failed every branch of a union (pydantic reports one error per
    branch, all about the same value, each location ending in the branch's type name); otherwise the first error
    alone."""
    first = errors[0]
    loc = tuple(first.get("loc") or ())
    if not loc or not isinstance(loc[-1], str) or first.get("type") == "missing":
        return [first]
    branches = [e for e in errors if tuple(e.get("loc") or ())[:-1] == loc[:-1] and len(e.get("loc") or ()) == len(loc)
                and e.get("type") != "missing" and e.get("input") is first.get("input")]
    return branches if len(branches) > 1 else [first]


#: What a pydantic type error expects, in the words of a JSON file.
_WANTED = {"model_type": "a JSON object", "dict_type": "a JSON object", "model_attributes_type": "a JSON object",
           "string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
           "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
           "bool_type": "true or false", "bool_parsing": "true or false", "list_type": "a list",
           "tuple_type": "a list", "set_type": "a list", "none_required": "null"}


def describe(error: dict[str, Any]) -> str:
    """One pydantic error's message in plain words, with the kind of value found for a type error."""
    kind = str(error.get("type", ""))
    if kind == "missing":
        return "is missing"
    if kind == "extra_forbidden":
        return "is not a known field here"
    if kind in _WANTED:
        return f"must be {_WANTED[kind]} (got a JSON {json_kind(error.get('input'))})"
    return _SHOULD.sub("must be ", _PREFIXES.sub("", str(error.get("msg", "is invalid"))))


def explain(exc: ValidationError, loc: tuple[Any, ...] = ()) -> tuple[str | None, str]:
    """``(field path, message)`` of the first error of ``exc`` (``loc`` prepended to its location); a field that
    failed every branch of a union is named once, with what each branch expected."""
    errors = exc.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic always reports at least one
        return None, "is invalid"
    branches = _union_branches(errors)
    first = branches[0]
    where = tuple(loc) + tuple(first.get("loc") or ())
    if len(branches) > 1:
        where = where[:-1]
        wanted = list(dict.fromkeys(_WANTED.get(str(b.get("type")), _SHOULD.sub("", str(b.get("msg"))))
                                    for b in branches))
        message = f"must be {' or '.join(wanted)} (got a JSON {json_kind(first.get('input'))})"
    else:
        message = describe(first)
    return field_path(where) or None, message


def from_validation(exc: ValidationError, file: str | os.PathLike | None = None, record: str | int | None = None,
                    loc: tuple[Any, ...] = ()) -> InputError:
    """One :class:`InputError` line from the first error of ``exc`` (see :func:`explain`), naming ``file``,
    ``record`` and the field (``loc`` is prepended to the error's own location, for a model that validates part
    of a file)."""
    field, message = explain(exc, loc)
    return InputError(message, file=None if file is None else str(file), record=record, field=field)


def validate(model: type[M], value: Any, *, file: str | os.PathLike | None = None, record: str | int | None = None,
             loc: tuple[Any, ...] = ()) -> M:
    """``value`` (parsed JSON) as a ``model`` instance.

    Raises:
        InputError: ``value`` does not fit ``model``: one line naming ``file``, ``record`` and the first field
            that does not fit.
    """
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise from_validation(exc, file, record, loc) from None


def read_model(path: str | os.PathLike, model: type[M], max_bytes: int | None = None) -> M:
    """The JSON file ``path`` read through :func:`groundstate.files.read_json` and validated as ``model``.

    Raises:
        InputError: an unreadable or malformed file, or one that does not fit ``model`` (one line).
    """
    return validate(model, read_json(path, max_bytes), file=path)
