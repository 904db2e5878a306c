"""Pydantic validation errors of OffQuery records as one-line :class:`~groundstate.errors.InputError` s that name
the field."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from groundstate.errors import InputError
from groundstate.records import OffQueryInstance


def from_validation(exc: ValidationError, file: str, record: Any,
                     rename: dict[str, str] | None = None) -> InputError:
    """One-line :class:`InputError` from the first pydantic error; its ``loc`` is the field.

    Errors raised by a model-level validator have an empty ``loc``; the field is then the first instance field
    the message names (``misleading index 5 is out of range`` -> ``misleading``).
    """
    first = exc.errors(include_url=False)[0]
    message = re.sub(r"^Value error, ", "", str(first.get("msg", "invalid")))
    loc = tuple(first.get("loc") or ())
    if loc:
        field = format_loc(loc, rename or {})
    else:
        names = sorted(OffQueryInstance.model_fields, key=len, reverse=True)
        named = [n for n in names if re.search(rf"\b{re.escape(n)}\b", message)]
        field = (rename or {}).get(named[0], named[0]) if named else None
    return InputError(message, file=file, record=record, field=field)


def format_loc(loc: tuple[Any, ...], rename: dict[str, str]) -> str:
    parts: list[str] = []
    for i, part in enumerate(loc):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            name = rename.get(str(part), str(part)) if i == 0 else str(part)
            parts.append(name if i == 0 else f".{name}")
    return "".join(parts)
