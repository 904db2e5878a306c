"""The experiment spec: one TOML file that names every run of one table, validated into pydantic models.

An experiment is data. A spec names what a table depends on (the data, the tasks and their options, every LM
and its decoding, the judge, the seeds) and how the table is laid out, with the paper's published numbers.
``groundstate experiment plan SPEC`` prices it, ``run`` executes exactly its cells and ``table`` tabulates
exactly its cells beside the paper's numbers. ``SPEC`` is a path, or the name of a shipped spec
(``groundstate/experiments/NAME.toml``; an unknown name lists the shipped ones).

Example (the layout of the ReGround paper's Table 1)::

    [experiment]
    name = "reground-table1"              # a safe file name
    title = "Standard collaboration vs ReGround"
    paper = "reground"                    # reground | dhd | consilience: where the references come from
    table = "Table 1"
    page = 7
    note = "what the table shows, and what this spec simplifies"
    offline = false                       # true: runs with no hosted LM and no user data (the tests run it)

    [inputs]                              # values given with --set NAME=VALUE, used as {NAME} in strings
    offquery = { description = "a clone of github.com/whr000001/OffQuery" }   # no default: required
    n = { description = "instances per domain", default = 20 }

    [data.healthcare-s]                   # named data: fields of the task settings (plus label, generate)
    label = "HEALTHCARE-S"
    data = "{offquery}/datasets/mediQ_easy.json"
    t2_truth = "{offquery}/task2_evaluation/truth/mediQ_easy.json"

    [data.travel]                         # generated in memory (no file): kind, n, seed, travelers
    label = "travel (generated)"
    generate = { kind = "travel", n = "{n}", seed = 0 }

    [defaults]                            # what every cell starts from
    task = "reground"                     # a registered task (groundstate run --help lists them)
    settings = { condition = "unreliable" }   # task settings (any field of the task's settings model)
    data = "healthcare-s"                 # a [data] name
    lm = "openai/gpt-4o"                  # the model under test
    lm_roles = { "agent.0" = "openai/gpt-4o-mini" }   # per-role LMs (a model, or a table with model and options)
    judge = "openai/gpt-4o"               # the judge: passed through as the task's judge_lm setting
    decoding = { temperature = 0.0, max_tokens = 4096 }
    lm_options = { api_base = "http://localhost:8000/v1", timeout = 300 }   # every hosted LM (--api-base)
    seeds = [0]                           # repeats: one run per seed (settings.seed), pooled in the table
    run = { threads = 4 }                 # run settings (how, never what: not part of any cell's identity)

    [axes]                                # ordered; the cells are the product of the axes (times the seeds)
    model = ["openai/gpt-4o", "gemini/gemini-2.5-flash"]
    data = ["healthcare-s"]
    max_candidates = [1, 2, 3]            # a scalar sets the axis' natural field (see below)
    [[axes.method]]                       # or a table of overrides with a label
    label = "Standard"
    task = "standard"
    settings = { rounds = 3 }
    [[axes.method]]
    label = "ReGround"
    task = "reground"

    [layout]
    rows = ["model", "method"]            # every axis with more than one value is a row or a column
    columns = ["data"]
    metrics = ["t1", "t2", "t3"]          # as the cell reader names them (run summaries: the scores' names)
    average = ["model"]                   # rows averaged over these row axes (per-value rows kept)
    percent = true                        # fractions shown as percentages, as the paper prints them
    labels = { t1 = "T1" }                # how metrics are headed (default: eval.report.label)

    [[reference]]                         # a published number, placed beside the cell it names
    cell = { model = "openai/gpt-5", method = "Standard", data = "healthcare-s" }
    metric = "t3"
    value = 0.862                         # on the metric's scale (a fraction); shown as the table shows ours
    source = "Table 1, p. 7"
    quote = "86.2% on T3"                 # text of the paper that holds the value (a test checks it)

    [runs]                                # adopt existing runs: cell selector -> run id (or directory)
    "model:openai/gpt-4o,method:Standard,data:healthcare-s" = "standard-3f2a9c1b04de"

    [sensitivity]                         # extra cells varying one task setting at a time
    sim_attention = ["all", 5, 3, 2]

**Axis values.** A table value is :class:`AxisValue` (``label`` and any of ``task``, ``settings``, ``data``,
``lm``, ``lm_roles``, ``judge``, ``decoding``, ``metrics``, ``note``, ``key``). A scalar sets the field its axis
is named after: ``model``/``lm`` the LM, ``data`` the data name, ``task`` the task, ``judge`` the judge,
``temperature``/``max_tokens`` the decoding, and any other axis name the task setting of that name
(``max_candidates = [1, 2]`` sets ``settings.max_candidates``). A value's ``key`` (default: its label; a data
value's key is its data name) is how references, ``[runs]``, ``--cells`` and ``--use-run`` name it; either the
key or the label is accepted. ``metrics`` maps a table metric to the run metric that fills it
(``{ task_accuracy = "initial_task_accuracy" }``: HiddenBench's Hidden-Pre is the initial votes of its run).

**Precedence.** A cell's settings are the defaults' ``settings``, then its data entry's fields, then each axis
value's ``settings`` in axis order, then a sensitivity value; ``lm``, ``lm_roles``, ``judge``, ``task`` and
``data`` are replaced by the last axis value that sets them, and ``decoding`` is merged field by field.

**Selectors.** A cell is named by ``axis:key`` pairs joined by commas (``model:embedded,method:Standard``, plus
``seed:N`` with several seeds and ``sensitivity:FIELD=VALUE`` for a sensitivity cell); a selector may leave out
axes, and matches every cell that has all its pairs. ``[runs]`` and ``--use-run`` need a selector that names one
table cell.

**References.** ``cell`` names axes (and ``"average"`` for an averaged axis); a reference whose cell is not in
the table (a model the user did not run) is listed under the table. Cells without one say "not in the
available text".

Every error in a spec is one line naming the file and the field (:func:`load_spec`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from groundstate.errors import ConfigError, InputError
from groundstate.eval.settings import Settings
from groundstate.schema import validate

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
AVERAGE = "average"
SENSITIVITY = "sensitivity"

#: Scalar axis values set these fields (any other axis name: the task setting of that name).
SCALAR_FIELDS = {"model": "lm", "lm": "lm", "data": "data", "task": "task", "judge": "judge",
                 "temperature": "temperature", "max_tokens": "max_tokens"}


class Decoding(Settings):
    """How every LM of a cell decodes (recorded in the LM's description, so in the run id)."""

    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature (the papers: 0)")
    max_tokens: int | None = Field(None, ge=1, description="output token limit per call")

    def merged(self, other: Decoding | None) -> Decoding:
        """These settings with every field ``other`` sets replacing this one's."""
        if other is None:
            return self
        return self.model_copy(update={k: v for k, v in other.model_dump().items() if v is not None})


class LMOptions(Settings):
    """Where every hosted LM of the spec is served and how long a call may take (``--api-base``, ``--lm-timeout``).
    ``api_base`` is part of each hosted LM's description (so of the run ids); the embedded LM takes neither."""

    api_base: str | None = Field(None, min_length=1, description="server URL of every hosted LM")
    timeout: float | None = Field(None, gt=0, description="seconds an LM call may take")


class ExperimentInfo(Settings):
    """What the table is: its name (a safe file name), title, paper, table and page, and notes."""

    name: str = Field(pattern=NAME.pattern, description="the spec's name (letters, digits, . _ + -)")
    title: str = Field(min_length=1, description="the table's title")
    paper: Literal["reground", "dhd", "consilience"] | None = Field(None, description="the paper the references "
                                                                                       "come from")
    table: str | None = Field(None, description="the paper's table (Table 1, ...)")
    page: int | str | None = Field(None, description="the page of the paper's table")
    note: str | None = Field(None, description="what the table shows and what this spec simplifies")
    offline: bool = Field(False, description="runs with no hosted LM and no data the user must supply")


class InputSpec(Settings):
    """A value the user gives with ``--set NAME=VALUE`` (required unless it has a default)."""

    description: str = Field(min_length=1)
    default: str | int | float | bool | None = None


class GenerateSpec(Settings):
    """Data generated in memory (no file): the generator, its size and seed."""

    kind: Literal["travel"] = Field(description="the generator: travel (hidden-profile travel tasks, appendix F)")
    n: int = Field(ge=1, description="records to generate")
    seed: int = Field(0, ge=0, description="the generator's seed")
    travelers: Literal[3, 4] | None = Field(None, description="travel: travelers per task (default 3 or 4)")


class DataSpec(Settings):
    """Named data: task settings fields (``data``, ``t2_truth``, ``n``, ...), a display label, or a generator."""

    model_config = ConfigDict(extra="allow")

    label: str | None = Field(None, description="how the table names this data")
    generate: GenerateSpec | None = Field(None, description="generate the records in memory")

    def settings(self) -> dict[str, Any]:
        """The task settings this entry sets."""
        return dict(self.model_extra or {})


class AxisValue(Settings):
    """One value of an axis: a label and what it overrides (see the module docstring)."""

    label: str = Field(min_length=1, description="how the table shows this value")
    key: str | None = Field(None, min_length=1, description="how selectors and references name it (default: label)")
    task: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    data: str | None = None
    lm: str | None = None
    lm_roles: dict[str, str | dict[str, Any]] | None = None
    judge: str | None = None
    decoding: Decoding | None = None
    metrics: dict[str, str] = Field(default_factory=dict, description="table metric -> the run's metric")
    note: str | None = None

    @property
    def name(self) -> str:
        return self.key or self.label


class Defaults(Settings):
    """What every cell starts from."""

    task: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    data: str | None = None
    lm: str | None = None
    lm_roles: dict[str, str | dict[str, Any]] | None = None
    judge: str | None = None
    decoding: Decoding = Field(default_factory=Decoding)
    lm_options: LMOptions = Field(default_factory=lambda: LMOptions())
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    run: dict[str, Any] = Field(default_factory=dict)


class Layout(Settings):
    """How the cells become a table."""

    rows: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(min_length=1)
    average: list[str] = Field(default_factory=list)
    percent: bool = False
    digits: int | None = Field(None, ge=0, le=8)
    labels: dict[str, str] = Field(default_factory=dict)


class Reference(Settings):
    """A number the paper publishes, with where it is and the text that holds it."""

    cell: dict[str, str | int | float | bool] = Field(default_factory=dict)
    metric: str
    value: float
    source: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    note: str | None = None


AxisEntry = AxisValue | str | int | float | bool


class Spec(Settings):
    """A whole spec (see the module docstring)."""

    experiment: ExperimentInfo
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    data: dict[str, DataSpec] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)
    axes: dict[str, list[AxisEntry]] = Field(default_factory=dict)
    layout: Layout
    reference: list[Reference] = Field(default_factory=list)
    runs: dict[str, str] = Field(default_factory=dict)
    sensitivity: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)

    #: the file the spec was read from (set by :func:`load_spec`; named in errors)
    source: str | None = Field(None, exclude=True)

    def axis_values(self) -> dict[str, list[AxisValue]]:
        """Every axis with its values as :class:`AxisValue` (scalars turned into the field they set), in order."""
        return {name: [self.as_value(name, v) for v in values] for name, values in self.axes.items()}

    def as_value(self, axis: str, value: AxisEntry) -> AxisValue:
        """An axis entry as an :class:`AxisValue` (a scalar sets the axis' natural field)."""
        if isinstance(value, AxisValue):
            return value
        text = _text(value)
        target = SCALAR_FIELDS.get(axis)
        if target == "data":
            entry = self.data.get(text)
            return AxisValue(label=(entry.label if entry and entry.label else text), key=text, data=text)
        if target in ("lm", "task", "judge"):
            return AxisValue(label=text, **{target: text})
        if target in ("temperature", "max_tokens"):
            return AxisValue(label=text, decoding=Decoding.parse({target: value}, file=self.source,
                                                                  loc=("axes", axis)))
        return AxisValue(label=text, settings={axis: value})

    def run_settings(self, given: dict[str, Any] | None = None) -> Any:
        """The :class:`~groundstate.eval.run_settings.RunSettings` of the spec's ``defaults.run`` with ``given``
        (the command line's options that were given: not ``None``) replacing its values.

        Raises:
            InputError: a run setting that does not fit (naming the spec file and the field).
        """
        from groundstate.eval.run_settings import RunSettings

        values = {**self.defaults.run, **{k: v for k, v in (given or {}).items() if v is not None}}
        return RunSettings.parse(values, file=self.source, loc=("defaults", "run"))

    def dimensions(self) -> list[str]:
        """The table's dimensions: the axes, then ``sensitivity`` when the spec declares any."""
        return [*self.axes, *([SENSITIVITY] if self.sensitivity else [])]


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


# -- reading a spec ---------------------------------------------------------------------------------------------


def spec_path(spec: str | os.PathLike) -> Path:
    """The file ``spec`` names: an existing path, else a shipped spec of that name.

    Raises:
        ConfigError: neither (the message lists the shipped specs).
    """
    from groundstate import experiments

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
    return PLACEHOLDER.sub(lambda m: _text(values[m.group(1)]) if m.group(1) in values else m.group(0), value)


#: Tables of a spec whose strings take ``{NAME}`` inputs (the experiment's text and the references do not).
SUBSTITUTED = ("data", "defaults", "axes", "runs", "sensitivity")


def load_spec(spec: str | os.PathLike, values: dict[str, Any] | None = None) -> Spec:
    """The spec ``spec`` names (a path or a shipped name), its inputs filled from ``values`` (``--set``) and their
    defaults, validated.

    Raises:
        ConfigError: no such spec, or a value for an input the spec does not declare.
        InputError: an unreadable file, a field that does not fit, a missing required input, or a layout,
            reference or selector that names something the spec does not have (one line naming the file and
            the field).
    """
    from groundstate.files import read_toml

    path = spec_path(spec)
    raw = read_toml(path)
    raw_inputs = raw.get("inputs", {})
    if not isinstance(raw_inputs, dict):
        raise InputError("must be a table of inputs", file=str(path), field="inputs")
    inputs = {name: validate(InputSpec, entry, file=path, loc=("inputs", name)) for name, entry in raw_inputs.items()}
    values = dict(values or {})
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
    from groundstate.eval.experiments.selectors import check_references

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
        if name not in spec.layout.rows:
            fail(f"'{name}' is averaged but is not a row axis", "layout.average")
    for i, reference in enumerate(spec.reference):
        if reference.metric not in spec.layout.metrics:
            fail(f"names the metric '{reference.metric}', which the layout does not show", f"reference[{i}].metric")
    check_references(spec)
