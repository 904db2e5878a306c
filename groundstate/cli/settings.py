"""Command-line options from settings models, and settings models from the parsed options.

The settings models (:mod:`groundstate.eval.settings` and each system's) are the one description of what a
task takes; this module turns a model into argparse options and parsed options back into the model:

- :func:`add_settings`: one option per field the parser does not have yet, ``--field-name`` (dest
  ``field_name``): a ``Literal`` field gets its choices, a ``bool`` field is a flag (``store_true``), a number
  with a range gets the range-checked type of :mod:`groundstate.cli.numbers` (so a number out of range is an
  argparse error naming the option, before any work), a list field takes several values, and the field's
  description is the help text.
- :func:`settings_from`: the model built from the namespace (an option left at ``None`` means "not given": the
  model's default applies); a value the model refuses is one line naming its ``--flag``.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from groundstate.cli.numbers import bounded, count, level, nonnegative, positive, positive_int, seed, share, temperature
from groundstate.errors import ConfigError
from groundstate.schema import explain

M = TypeVar("M", bound=BaseModel)

#: The named range-checked types, by (kind, low, high, low excluded, high excluded).
NAMED_TYPES = {(int, 1, None, False, False): positive_int, (int, 0, None, False, False): count,
               (float, 0, 1, False, False): share, (float, 0, 2, False, False): temperature,
               (float, 0, 1, True, True): level, (float, 0, None, False, False): nonnegative,
               (float, 0, None, True, False): positive}


def flag_of(name: str, flags: Mapping[str, Sequence[str]] | None = None) -> str:
    """The option of field ``name``: its first entry in ``flags``, else ``--name-with-dashes``."""
    return (flags or {}).get(name, (f"--{name.replace('_', '-')}",))[0]


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """``(annotation without None, whether None was allowed)``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        return (args[0] if len(args) == 1 else annotation), nullable
    return annotation, False


def _bounds(metadata: Sequence[Any]) -> tuple[Any, Any, bool, bool]:
    low = high = None
    open_low = open_high = False
    flat = [m for item in metadata for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
    for item in flat:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low, open_low = item.gt, True
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high, open_high = item.lt, True
    return low, high, open_low, open_high


def number_type(kind: type, metadata: Sequence[Any], name: str = "") -> Any:
    """The range-checked argparse type of a number field (``kind`` int or float, its pydantic constraints)."""
    low, high, open_low, open_high = _bounds(metadata)
    if kind is int and low == 0 and high is None and name.endswith("seed"):
        return seed
    named = NAMED_TYPES.get((kind, low, high, open_low, open_high))
    if named is not None:
        return named
    noun = "a whole number" if kind is int else "a number"
    parts = [f"{'above' if open_low else 'at least'} {low}" if low is not None else "",
             f"{'below' if open_high else 'at most'} {high}" if high is not None else ""]
    return bounded(kind, low, high, " ".join([noun, *(p for p in parts if p)]) if any(parts) else noun,
                   open_low=open_low, open_high=open_high)


def option_kwargs(name: str, field: Any) -> dict[str, Any]:
    """The argparse keyword arguments of one model field (type, choices, nargs, action, default, help)."""
    annotation, _ = _without_none(field.annotation)
    kwargs: dict[str, Any] = {"dest": name, "default": field.get_default(call_default_factory=True),
                              "help": field.description}
    if field.is_required():
        kwargs = {"dest": name, "required": True, "help": field.description}
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "metavar" in extra:
        kwargs["metavar"] = extra["metavar"]
    metadata = list(field.metadata)
    if typing.get_origin(annotation) is list:
        kwargs["nargs"] = "+"
        annotation = typing.get_args(annotation)[0]
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *metadata = typing.get_args(annotation)
    if annotation is bool:
        if field.default is not False:
            raise TypeError(f"{name}: a flag option needs the default False")
        return {"dest": name, "action": "store_true", "help": field.description}
    if typing.get_origin(annotation) is Literal:
        choices = typing.get_args(annotation)
        kwargs["choices"] = choices
        if all(isinstance(c, int) for c in choices):
            kwargs["type"] = int
    elif annotation in (int, float):
        kwargs["type"] = number_type(annotation, metadata, name)
    return kwargs


def add_settings(parser: argparse.ArgumentParser, model: type[BaseModel], *, skip: Sequence[str] = (),
                 only: Sequence[str] | None = None, flags: Mapping[str, Sequence[str]] | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None, group: Any = None) -> None:
    """Add an option for each field of ``model`` that ``parser`` does not have yet (by dest), is not in ``skip``
    and, when ``only`` is given, is in ``only``.

    Args:
        flags: a field's option strings when they are not ``--field-name`` (``max_rounds``: ``--bootstrap-rounds``).
        overrides: argparse keyword arguments that replace the derived ones (``nargs``, ``metavar``, ``help``).
        group: an argument group of ``parser`` to add the options to.
    """
    have = {action.dest for action in parser._actions}
    target = group or parser
    for name, field in model.model_fields.items():
        if name in skip or name in have or field.exclude or (only is not None and name not in only):
            continue
        kwargs = {**option_kwargs(name, field), **((overrides or {}).get(name) or {})}
        strings = (flags or {}).get(name) or (flag_of(name),)
        target.add_argument(*strings, **kwargs)


def settings_from(model: type[M], args: argparse.Namespace | Mapping[str, Any], *,
                  values: Mapping[str, Any] | None = None, flags: Mapping[str, Sequence[str]] | None = None) -> M:
    """``model`` from the parsed options (a field the namespace lacks, or holds as ``None`` while its default is
    not ``None``, keeps the model's default) with ``values`` on top.

    Raises:
        ConfigError: a value the model refuses: one line naming the option (``--max-candidates must be ...``).
    """
    given = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    data: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name in (values or {}):
            data[name] = values[name]
        elif name in given and not (given[name] is None and field.default is not None):
            data[name] = given[name]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where, message = explain(exc)
        name = (where or "").split(".")[0].split("[")[0].split(" ")[0]
        shown = flag_of(name, flags) if name in model.model_fields else (where or model.__name__)
        raise ConfigError(f"{shown} {message}") from None
