"""Reading an experiment spec: the file a name or path gives, its inputs (``--set``), what a spec may not name
(see **Trust** in :mod:`~groundstate.eval.experiments.spec`), validation, and the checks pydantic cannot make alone.

- :func:`load_spec`: a spec, its inputs filled, validated and checked (one line naming the file and the field).
- :func:`spec_path`: the file of a path or of a shipped spec's name; :func:`shipped_specs`: what is shipped.
- :func:`parse_assignments`: ``--set NAME=VALUE`` items.
- :func:`substitute`: ``{NAME}`` placeholders filled; :func:`check_trust`: no path or server the user did not give.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.experiments.spec import NAME, PLACEHOLDER, SENSITIVITY, InputSpec, Spec, as_text
from groundstate.schema import validate

#: The largest spec file read (a spec is a page of TOML; anything bigger is not one).
MAX_SPEC_BYTES = 1024 * 1024

def spec_path(spec: str | os.PathLike) -> Path:
    """The file ``spec`` names: an existing path, else a shipped spec of that name.

    Raises:
        ConfigError: neither (the message lists the shipped specs).
    """
    from groundstate import experiments  # noqa: PLC0415 (--help stays light)

    path = Path(spec)
    if os.path.lexists(path):
        return path
    text = str(spec)
    if "/" not in text and os.sep not in text:
        try:
            return Path(experiments.path(text))
        except FileNotFoundError:
            pass
    raise ConfigError(f"no experiment spec '{text}': not a file, and not a shipped spec (shipped: "
                      f"{', '.join(experiments.names()) or 'none'})")


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    """``NAME=VALUE`` items (``--set``) as a dict; a value is read as a TOML value when it is one (``20``,
    ``true``, ``"text"``), else kept as text (a path).

    Raises:
        ConfigError: an item without ``=`` or with a bad name.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not NAME.match(name.strip()):
            raise ConfigError(f"--set takes NAME=VALUE, got '{item}'")
        try:
            out[name.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[name.strip()] = value
    return out


def substitute(value: Any, values: dict[str, Any]) -> Any:
    """``value`` with every ``{NAME}`` of ``values`` replaced in its strings (at any depth); a string that is one
    placeholder alone becomes the value itself (so ``n = "{n}"`` stays a number)."""
    if isinstance(value, dict):
        return {k: substitute(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    if not isinstance(value, str):
        return value
    whole = PLACEHOLDER.fullmatch(value)
    if whole and whole.group(1) in values:
        return values[whole.group(1)]
    return PLACEHOLDER.sub(lambda m: as_text(values[m.group(1)]) if m.group(1) in values else m.group(0), value)


#: Tables of a spec whose strings take ``{NAME}`` inputs (the experiment's text and the references do not).
SUBSTITUTED = ("data", "defaults", "axes", "runs", "sensitivity", "override")

#: Tables whose strings :func:`check_trust` checks (``[runs]`` is checked by its own pattern: run ids only).
CHECKED = ("data", "defaults", "axes", "sensitivity", "override")

ABSOLUTE = re.compile(r"^([/\\]|[A-Za-z]:)")


def _leaves(value: Any, where: str):
    """Every string of ``value`` with its field path (``axes.method[1].settings.mlp``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


def check_trust(raw: dict[str, Any], path: Path, given: set[str], defaults: dict[str, Any]) -> None:
    """Refuse a spec that names a place the user did not give (see **Trust** in
    :mod:`~groundstate.eval.experiments.spec`): before any input is filled, every string of :data:`CHECKED` is
    checked with the inputs the user gave (``given``, trusted: they are the user's own paths) standing for
    themselves and the spec's defaults (``defaults``, untrusted: the spec's text) filled in.

    Raises:
        InputError: one line naming the file and the field: an absolute path or a ``..`` that does not follow an
            input the user gave, or an ``api_base`` that is not exactly one such input.
    """
    for table in CHECKED:
        for where, text in _leaves(raw.get(table), table):
            if where.rsplit(".", 1)[-1] == "api_base":
                whole = PLACEHOLDER.fullmatch(text)
                if not whole or whole.group(1) not in given:
                    raise InputError("a spec cannot choose the server that receives your API keys: give "
                                     "--api-base, or make it one input (api_base = \"{server}\") given with --set",
                                     file=str(path), field=where)
                continue
            first = PLACEHOLDER.match(text)
            anchored = first is not None and first.group(1) in given
            rest = text[first.end():] if anchored else text
            rest = PLACEHOLDER.sub(lambda m: "x" if m.group(1) in given else as_text(defaults.get(m.group(1), "x")),
                                   rest)
            if not anchored and ABSOLUTE.match(rest):
                raise InputError(f"'{text}' is an absolute path: a spec may name files only under a directory you "
                                 "give (an input set with --set, as in \"{data}/file.json\")", file=str(path),
                                 field=where)
            if ".." in re.split(r"[/\\]", rest):
                raise InputError(f"'{text}' climbs out of its directory with '..': a spec may name files only under "
                                 "a directory you give", file=str(path), field=where)


def load_spec(spec: str | os.PathLike, values: dict[str, Any] | None = None) -> Spec:
    """The spec ``spec`` names (a path or a shipped name), its inputs filled from ``values`` (``--set``) and their
    defaults, validated.

    Raises:
        ConfigError: no such spec, or a value for an input the spec does not declare.
        InputError: an unreadable file, a field that does not fit, a missing required input, or a layout,
            reference or selector that names something the spec does not have (one line naming the file and
            the field).
    """
    from groundstate.files import read_toml  # noqa: PLC0415 (--help stays light)

    path = spec_path(spec)
    raw = read_toml(path, MAX_SPEC_BYTES)
    raw_inputs = raw.get("inputs", {})
    if not isinstance(raw_inputs, dict):
        raise InputError("must be a table of inputs", file=str(path), field="inputs")
    inputs = {name: validate(InputSpec, entry, file=path, loc=("inputs", name)) for name, entry in raw_inputs.items()}
    bad = next((name for name in inputs if not PLACEHOLDER.fullmatch(f"{{{name}}}")), None)
    if bad is not None:
        raise InputError("is not a valid input name (a letter or _, then letters, digits, _ or -)", file=str(path),
                         field=f"inputs.{bad}")
    values = dict(values or {})
    given = set(values)
    unknown = sorted(set(values) - set(inputs))
    if unknown:
        raise ConfigError(f"--set {unknown[0]}: the spec {path.name} has no input '{unknown[0]}' (its inputs: "
                          f"{', '.join(inputs) or 'none'})")
    for name, entry in inputs.items():
        if name not in values:
            if entry.default is None:
                raise InputError(f"is required ({entry.description}); give it with --set {name}=VALUE",
                                 file=str(path), field=f"inputs.{name}")
            values[name] = entry.default
    check_trust(raw, path, given, {k: v for k, v in values.items() if k not in given})
    filled = {k: substitute(v, values) if k in SUBSTITUTED else v for k, v in raw.items()}
    parsed = validate(Spec, filled, file=path)
    parsed.source = str(path)
    check_spec(parsed)
    return parsed


def check_spec(spec: Spec) -> None:
    """What pydantic cannot check alone: names exist and the layout covers the axes.

    Raises:
        InputError: the first problem, naming the file and the field.
    """
    from groundstate.eval.experiments.selectors import check_references  # noqa: PLC0415 (--help stays light)

    def fail(message: str, field: str) -> None:
        raise InputError(message, file=spec.source, field=field)

    values = spec.axis_values()
    for axis, entries in values.items():
        if not NAME.match(axis):
            fail("is not a valid axis name (letters, digits, . _ + -)", f"axes.{axis}")
        if axis == SENSITIVITY:
            fail("is reserved for the [sensitivity] cells", f"axes.{axis}")
        if not entries:
            fail("has no values", f"axes.{axis}")
        names = [v.name for v in entries]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            fail(f"has the value '{twice}' twice (give each value its own label or key)", f"axes.{axis}")
        for i, value in enumerate(entries):
            if value.data is not None and value.data not in spec.data:
                fail(f"names no [data] entry '{value.data}' (data: {', '.join(spec.data) or 'none'})",
                     f"axes.{axis}[{i}].data")
    if spec.defaults.data is not None and spec.defaults.data not in spec.data:
        fail(f"names no [data] entry '{spec.defaults.data}'", "defaults.data")
    for name in spec.data:
        if not NAME.match(name):
            fail("is not a valid data name (letters, digits, . _ + -)", f"data.{name}")
    dims = spec.dimensions()
    placed = [*spec.layout.rows, *spec.layout.columns]
    for where, names in (("layout.rows", spec.layout.rows), ("layout.columns", spec.layout.columns),
                         ("layout.average", spec.layout.average)):
        for name in names:
            if name not in dims:
                fail(f"names no axis '{name}' (axes: {', '.join(dims) or 'none'})", where)
    if len(set(placed)) != len(placed):
        fail("names an axis twice", "layout")
    for name in dims:
        many = len(spec.sensitivity) > 0 if name == SENSITIVITY else len(values[name]) > 1
        if many and name not in placed and name != SENSITIVITY:
            fail(f"axis '{name}' has several values but is neither a row nor a column", "layout")
    for name in spec.layout.average:
        if name not in placed or name == SENSITIVITY:
            fail(f"'{name}' is averaged but is not a row or column axis", "layout.average")
    for i, relative in enumerate(spec.layout.relative):
        where = f"layout.relative[{i}]"
        if relative.name not in spec.layout.metrics:
            fail(f"defines the metric '{relative.name}', which layout.metrics does not list", f"{where}.name")
        if relative.metric == relative.name or relative.metric in [r.name for r in spec.layout.relative]:
            fail("must be a metric of the runs, not a relative metric", f"{where}.metric")
        if relative.axis not in values:
            fail(f"names no axis '{relative.axis}' (axes: {', '.join(values) or 'none'})", f"{where}.axis")
        if not any(relative.base in (v.name, v.label) for v in values[relative.axis]):
            fail(f"is not a value of the axis '{relative.axis}'", f"{where}.base")
    if isinstance(spec.layout.percent, list):
        for metric in spec.layout.percent:
            if metric not in spec.layout.metrics:
                fail(f"names the metric '{metric}', which layout.metrics does not list", "layout.percent")
    for i, override in enumerate(spec.override):
        for axis, wanted in override.cell.items():
            if axis not in values:
                fail(f"names no axis '{axis}' (axes: {', '.join(values) or 'none'})", f"override[{i}].cell")
            if not any(as_text(wanted) in (v.name, v.label) for v in values[axis]):
                fail(f"'{as_text(wanted)}' is not a value of the axis '{axis}'", f"override[{i}].cell.{axis}")
    for i, reference in enumerate(spec.reference):
        for metric, _ in reference.items():
            if metric not in spec.layout.metrics:
                fail(f"names the metric '{metric}', which the layout does not show",
                     f"reference[{i}].{'metric' if reference.metric else 'values'}")
    check_references(spec)


def shipped_specs() -> list[dict[str, Any]]:
    """Every shipped spec (``groundstate experiment list``): ``name``, ``title``, ``paper``, ``table``, ``offline``,
    ``required`` (the inputs without a default) and ``references`` (how many published numbers it carries), read
    from the files without filling any input (nothing is validated beyond the file's TOML)."""
    from groundstate import experiments  # noqa: PLC0415 (--help stays light)
    from groundstate.files import read_toml  # noqa: PLC0415 (--help stays light)

    out = []
    for name in experiments.names():
        raw = read_toml(experiments.path(name), MAX_SPEC_BYTES)
        info = raw.get("experiment") if isinstance(raw.get("experiment"), dict) else {}
        inputs = raw.get("inputs") if isinstance(raw.get("inputs"), dict) else {}
        references = raw.get("reference") if isinstance(raw.get("reference"), list) else []
        count = sum(len(r.get("values") or {}) or 1 for r in references if isinstance(r, dict))
        out.append({"name": name, "title": str(info.get("title", "")), "paper": str(info.get("paper") or ""),
                    "table": str(info.get("table") or ""), "offline": bool(info.get("offline", False)),
                    "required": [k for k, v in inputs.items() if not (isinstance(v, dict) and "default" in v)],
                    "references": count})
    return out
