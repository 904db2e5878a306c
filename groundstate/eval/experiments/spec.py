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
    judge = "openai/gpt-4o"               # a model, "lexical" (the default) or "same-as-lm" (see Judge)
    decoding = { temperature = 0.0, max_tokens = 4096 }
    lm_options = { api_base = "{server}", timeout = 300 }   # every hosted LM (--api-base; see Trust)
    seeds = [0]                           # repeats: one run per seed (settings.seed), pooled in the table
    run = { threads = 4 }                 # how cells run (RunDefaults: never where; only limit is identity)

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
    average = ["model"]                   # averaged over these row/column axes (per-value rows/columns kept)
    relative = [{ name = "gain_t1", metric = "t1", axis = "method", base = "Standard", kind = "gain" }]
    percent = true                        # fractions shown as percentages, as the paper prints them
    labels = { t1 = "T1" }                # how metrics are headed (default: eval.report.label)

    [[reference]]                         # a published number, placed beside the cell it names
    cell = { model = "openai/gpt-5", method = "Standard", data = "healthcare-s" }
    metric = "t3"
    value = 0.862                         # on the metric's scale (a fraction); shown as the table shows ours
    source = "Table 1, p. 7"
    quote = "86.2% on T3"                 # text of the paper that holds the value (a test checks it)
    # or several numbers of one cell: values = { t1 = 0.109, t3 = 0.862 }, with a quote holding them all

    [runs]                                # adopt existing runs: cell selector -> run id (--use-run: or a path)
    "model:openai/gpt-4o,method:Standard,data:healthcare-s" = "standard-3f2a9c1b04de"

    [sensitivity]                         # extra cells varying one task setting at a time
    sim_attention = ["all", 5, 3, 2]

**Axis values.** A table value is :class:`AxisValue` (``label`` and any of ``task``, ``settings``, ``data``,
``lm``, ``lm_roles``, ``judge``, ``decoding``, ``metrics``, ``scope``, ``note``, ``key``). A scalar sets the field
its axis is named after: ``model``/``lm`` the LM, ``data`` the data name, ``task`` the task, ``judge`` the judge,
``temperature``/``max_tokens`` the decoding, and any other axis name the task setting of that name
(``max_candidates = [1, 2]`` sets ``settings.max_candidates``). A value's ``key`` (default: its label; a data
value's key is its data name) is how references, ``[runs]``, ``--cells`` and ``--use-run`` name it; either the
key or the label is accepted. ``metrics`` maps a table metric to the run metric that fills it
(``{ task_accuracy = "initial_task_accuracy" }``: HiddenBench's Hidden-Pre is the initial votes of its run);
``scope`` reads every metric as ``<scope>:<metric>`` (a DHD benchmark's row of its cell's analysis). Values that
change no setting are views of one run: cells with the same configuration share their run.

**Precedence.** A cell's settings are the defaults' ``settings``, then its data entry's fields, then each axis
value's ``settings`` in axis order, then each ``[[override]]`` whose ``cell`` it matches (``cell = { data =
"distributed", method = "ReGround" }``, ``settings = { mode = "statement" }``), then a sensitivity value;
``lm``, ``lm_roles``, ``judge``, ``task`` and ``data`` are replaced by the last axis value that sets them, and
``decoding`` is merged field by field.

**Selectors.** A cell is named by ``axis:key`` pairs joined by commas (``model:embedded,method:Standard``, plus
``seed:N`` with several seeds and ``sensitivity:FIELD=VALUE`` for a sensitivity cell); a selector may leave out
axes, and matches every cell that has all its pairs. ``[runs]`` and ``--use-run`` need a selector that names one
table cell.

**References.** ``cell`` names axes (and ``"average"`` for an averaged axis); a reference whose cell is not in
the table (a model the user did not run) is listed under the table. Cells without one say "not in the
available text".

**Relative metrics.** ``layout.relative`` defines table metrics computed from another metric of the same table
cell and of its *base* cell (the same cell with ``axis`` at ``base``): ``gain`` is (ours - base) / base, ``drop``
(base - ours) / base, ``difference`` ours - base. The base cell itself shows "base". Averaged rows average the
per-value relative numbers (as the papers average relative gains over models).

**Judge.** ``judge`` is what the metric spec takes: a model, ``lexical`` (the default for every task that takes a
judge) or ``same-as-lm`` (the model under test judges itself; the table's header says so). ``auto`` is refused.
:func:`groundstate.eval.experiments.cells.judge_settings` turns it into the task's own settings.

**Trust.** A spec is a file that may be hostile, so it may name no place outside what the user gives:
a string in ``[data]``, ``[defaults]``, ``[axes]`` or ``[sensitivity]`` may not be an absolute path or climb out
with ``..`` unless it starts with an input the user gave with ``--set`` (an input's default in the spec is the
spec's text, not the user's); an ``api_base`` (which would receive the user's API keys) must be exactly one such
input, or come from ``--api-base``; ``[runs]`` names run ids under the runs directory, never paths; ``[defaults.run]``
cannot choose the runs directory, the shard or a Ray cluster. The file itself is read as a regular file of at
most 1 MiB (:func:`groundstate.files.read_toml`).

Every error in a spec is one line naming the file and the field (:func:`groundstate.eval.experiments.load.load_spec`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from groundstate.eval.metric_spec import JudgeSpec
from groundstate.eval.settings import Settings
from groundstate.schema import validate

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.+-]*$")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
AVERAGE = "average"
SENSITIVITY = "sensitivity"

#: A run id as ``[runs]`` names it (a directory directly under the runs directory; never a path).
RUN_ID = r"^[A-Za-z0-9][A-Za-z0-9._+=@-]*$"

#: A spec's ``judge`` (defaults, axis values, a ``judge`` axis) is the metric spec's judge, checked by the same
#: function (:func:`groundstate.eval.metric_spec.check_judge`).
Judge = JudgeSpec

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
    judge: Judge | None = None
    decoding: Decoding | None = None
    metrics: dict[str, str] = Field(default_factory=dict, description="table metric -> the run's metric")
    scope: str | None = Field(None, min_length=1, description="read the run's metrics named '<scope>:<metric>' "
                              "(a view of one run: a DHD benchmark, say)")
    note: str | None = None

    @property
    def name(self) -> str:
        return self.key or self.label


class RunDefaults(Settings):
    """How the spec's runs are executed unless the command line says otherwise: how, never what, and never where
    (the runs directory, the shard and a Ray cluster's address are the user's to give, on the command line).
    ``limit`` is the one setting here that is part of the runs' identity (it selects the records)."""

    threads: int | None = Field(None, ge=1, description="records worked on at once")
    call_threads: int | None = Field(None, ge=1, description="LM calls at once inside one record")
    max_error_rate: float | None = Field(None, ge=0, le=1, description="fail once this share of records failed")
    backend: Literal["threads", "ray"] | None = Field(None, description="where records run")
    ray_workers: int | None = Field(None, ge=1, description="with backend ray: worker processes")
    max_inflight: int | None = Field(None, ge=1, description="with backend ray: concurrent requests per LM")
    limit: int | None = Field(None, ge=0, description="run only the first N records of every cell")


class Defaults(Settings):
    """What every cell starts from."""

    task: str | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    data: str | None = None
    lm: str | None = None
    lm_roles: dict[str, str | dict[str, Any]] | None = None
    judge: Judge | None = Field(None, description="the judge of the metrics that need one (default: lexical)")
    decoding: Decoding = Field(default_factory=Decoding)
    lm_options: LMOptions = Field(default_factory=lambda: LMOptions())
    seeds: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: [0], min_length=1)
    run: RunDefaults = Field(default_factory=lambda: RunDefaults())


class Relative(Settings):
    """A table metric computed from another relative to a base cell (see the module docstring)."""

    name: str = Field(pattern=NAME.pattern, description="the metric it defines (listed in layout.metrics)")
    metric: str = Field(min_length=1, description="the metric it is computed from")
    axis: str = Field(min_length=1, description="the axis whose value ``base`` is the base cell")
    base: str = Field(min_length=1, description="the base value (its key or label)")
    kind: Literal["gain", "drop", "difference"] = Field("gain", description="gain: (ours - base) / base; drop: "
                                                        "(base - ours) / base; difference: ours - base")


class Layout(Settings):
    """How the cells become a table."""

    rows: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(min_length=1)
    average: list[str] = Field(default_factory=list)
    percent: bool | list[str] = Field(False, description="fractions shown as percentages: every metric, or those "
                                      "listed")
    digits: Annotated[int, Field(ge=0, le=8)] | dict[str, Annotated[int, Field(ge=0, le=8)]] | None = Field(
        None, description="decimals shown: for every metric, or per metric (default 1 for a percentage, "
        "else 3)")
    labels: dict[str, str] = Field(default_factory=dict)
    relative: list[Relative] = Field(default_factory=list)

    def scale(self, metric: str | None = None) -> float:
        """How a metric's fractions are shown: 100 for a percentage (``percent`` true, or listing the metric)."""
        listed = isinstance(self.percent, list) and metric in self.percent
        return 100.0 if self.percent is True or listed else 1.0


class Reference(Settings):
    """Numbers the paper publishes for one cell: ``metric`` and ``value``, or several at once as
    ``values = { metric = value, ... }`` (one row of the paper's table), with where they are and the text of the
    paper that holds them (``quote``: every value occurs in it, as the paper prints it)."""

    cell: dict[str, str | int | float | bool] = Field(default_factory=dict)
    metric: str | None = Field(None, min_length=1)
    value: float | None = None
    values: dict[str, float] = Field(default_factory=dict)
    source: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    note: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Reference:
        single = self.metric is not None and self.value is not None
        if single == bool(self.values) or (not single and (self.metric is not None or self.value is not None)):
            raise ValueError("give metric and value, or values = { metric = value, ... }")
        return self

    def items(self) -> list[tuple[str, float]]:
        """``(metric, value)`` of every number this reference gives."""
        return [(self.metric, self.value)] if self.metric is not None else list(self.values.items())

    def single(self) -> list[Reference]:
        """One reference per number (``metric`` and ``value`` set): how the table places them."""
        if self.metric is not None:
            return [self]
        return [self.model_copy(update={"metric": m, "value": v, "values": {}}) for m, v in self.values.items()]


class Override(Settings):
    """Task settings for the cells one axis value alone cannot give: every cell that has all of ``cell``'s axis
    values (key or label) gets ``settings`` after its axes' (ReGround's statement mode on the distributed
    misinformation data only, say)."""

    cell: dict[str, str | int | float | bool] = Field(min_length=1, description="axis -> value")
    settings: dict[str, Any] = Field(min_length=1, description="the task settings these cells take")


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
    override: list[Override] = Field(default_factory=list)
    runs: dict[str, Annotated[str, Field(pattern=RUN_ID)]] = Field(
        default_factory=dict, description="cell selector -> a run id under the runs directory (never a path)")
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
        text = as_text(value)
        target = SCALAR_FIELDS.get(axis)
        if target == "data":
            entry = self.data.get(text)
            return AxisValue(label=(entry.label if entry and entry.label else text), key=text, data=text)
        if target in ("lm", "task", "judge"):
            return validate(AxisValue, {"label": text, target: text}, file=self.source, loc=("axes", axis))
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
        from groundstate.eval.run_settings import RunSettings  # noqa: PLC0415 (--help stays light)

        values = {**self.defaults.run.model_dump(exclude_none=True),
                  **{k: v for k, v in (given or {}).items() if v is not None}}
        return RunSettings.parse(values, file=self.source, loc=("defaults", "run"))

    def references(self) -> list[Reference]:
        """The spec's references, one per number (:meth:`Reference.single`)."""
        return [one for reference in self.reference for one in reference.single()]

    def dimensions(self) -> list[str]:
        """The table's dimensions: the axes, then ``sensitivity`` when the spec declares any."""
        return [*self.axes, *([SENSITIVITY] if self.sensitivity else [])]


def as_text(value: Any) -> str:
    """A scalar as a spec's text names it (``true``/``false`` for booleans)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
