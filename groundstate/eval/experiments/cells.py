"""A spec's cells: the product of its axes (and sensitivity values) times its seeds, each resolved to one task,
its settings, its LMs, its judge and its data, and planned through :func:`groundstate.eval.assemble.assemble`.

- :class:`Cell`: one resolved cell (nothing built yet).
- :func:`resolve_cells`: every cell of a spec, in axis order (``models`` replaces the spec's models: ``--lm``).
- :func:`plan_cells`: each cell planned (its LMs built, no LM called): a :class:`PlannedCell` with the run id.

Cells with the same LMs share one :class:`~groundstate.eval.task.RunContext` (their LMs and judge are built once).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.experiments.spec import SENSITIVITY, AxisValue, Decoding, Spec
from groundstate.eval.run_settings import RunSettings
from groundstate.eval.settings import LMSettings
from groundstate.eval.task import PlannedRun, RunContext, Task

EMBEDDED = "embedded"


@dataclass
class Cell:
    """One cell of a spec, resolved (see :func:`resolve_cells`).

    Attributes:
        keys, labels: per dimension (each axis, and ``sensitivity`` when the spec has it) the value's key and label.
        seed: the repeat (the task setting ``seed``).
        task: the registered task's name.
        settings: the task settings (validated when planned).
        lm: the default LM's settings (``model`` and decoding; ``model`` ``None``: the LM the caller configured,
            else the embedded one); roles: per-role LM settings (``--lm-config`` roles).
        judge: the judge as the spec names it (passed through as the task's ``judge_lm``), or ``None``.
        metrics: table metric -> the run metric that fills it (when they differ); scope: the run metrics read are
            ``<scope>:<metric>`` (:attr:`AxisValue.scope`).
        source: records generated in memory (``None``: the settings' data file).
        seeds: how many seeds the spec has (the seed is part of the label only when it has several).
    """

    keys: dict[str, str]
    labels: dict[str, str]
    seed: int
    task: str
    settings: dict[str, Any]
    lm: dict[str, Any]
    roles: dict[str, dict[str, Any]]
    judge: str | None
    metrics: dict[str, str] = field(default_factory=dict)
    scope: str | None = None
    source: Any = None
    seeds: int = 1

    @property
    def label(self) -> str:
        """The cell's selector: ``axis:key`` pairs (and ``seed:N`` when the spec has several seeds)."""
        pairs = [f"{axis}:{key}" for axis, key in self.keys.items()]
        return ",".join(pairs + ([f"seed:{self.seed}"] if self.seeds > 1 else [])) or "cell"

    @property
    def group(self) -> tuple[tuple[str, str], ...]:
        """The table cell this cell belongs to (the same for every seed)."""
        return tuple(self.keys.items())

    def lm_key(self) -> str:
        """What decides the cell's LMs (cells with the same key share their built LMs)."""
        return json.dumps({"lm": self.lm, "roles": self.roles}, sort_keys=True, default=str)

    def uses_configured_lm(self) -> bool:
        """Whether the spec leaves the LM to the caller (no model, roles or decoding): DSPy's configured LM."""
        return not self.roles and all(v is None for v in self.lm.values())


def lm_entry(model: Any, decoding: Decoding, what: str, spec: Spec) -> dict[str, Any]:
    """An LM config entry (``model`` and options) from a model name or a table, with the decoding and the spec's
    ``lm_options`` filled in where the entry does not set them (``api_base`` only for hosted LMs)."""
    if isinstance(model, dict):
        if not isinstance(model.get("model"), str):
            raise InputError("a per-role LM table needs a string 'model'", file=spec.source, field=what)
        entry = dict(model)
    else:
        entry = {"model": model}
    for name, value in decoding.model_dump().items():
        if value is not None:
            entry.setdefault(name, value)
    options = spec.defaults.lm_options
    if options.api_base is not None and entry.get("model") not in (None, EMBEDDED):
        entry.setdefault("api_base", options.api_base)
    if options.timeout is not None and entry.get("model") not in (None, EMBEDDED):
        entry.setdefault("timeout", options.timeout)
    return entry


def with_lm_options(spec: Spec, api_base: str | None = None, timeout: float | None = None) -> Spec:
    """``spec`` with every hosted LM served from ``api_base`` and calls limited to ``timeout`` seconds (the command
    line's ``--api-base`` and ``--lm-timeout``; ``None`` leaves the spec's own)."""
    given = {k: v for k, v in {"api_base": api_base, "timeout": timeout}.items() if v is not None}
    if not given:
        return spec
    options = spec.defaults.lm_options.model_copy(update=given)
    return spec.model_copy(update={"defaults": spec.defaults.model_copy(update={"lm_options": options})})


def with_models(spec: Spec, models: Sequence[str] | None) -> Spec:
    """``spec`` with its models replaced (``--lm``): the values of its ``model`` axis when it has one, else its
    default LM.

    Raises:
        ConfigError: several models for a spec without a model axis.
    """
    if not models:
        return spec
    axis = next((a for a in ("model", "lm") if a in spec.axes), None)
    if axis is not None:
        return spec.model_copy(update={"axes": {**spec.axes, axis: list(models)}})
    if len(models) > 1:
        raise ConfigError(f"--lm: the spec {spec.experiment.name} has no model axis, so it takes one model, got "
                          f"{len(models)}")
    return spec.model_copy(update={"defaults": spec.defaults.model_copy(update={"lm": models[0]})})


def resolve_cells(spec: Spec, *, generated: dict[str, Any] | None = None) -> list[Cell]:
    """Every cell of ``spec``: the product of its axes in order, then its sensitivity values (the spec's cells with
    one task setting changed), times its seeds.

    Args:
        spec: a loaded spec.
        generated: records generated for the spec's ``generate`` data so far, by data name (filled here, so cells
            sharing data share one list of records).

    Raises:
        InputError: a cell without a task, or a judge given to a task that takes none (naming the spec file).
    """
    from groundstate.eval.tasks import get_task  # noqa: PLC0415 (--help stays light)

    generated = {} if generated is None else generated
    axes = spec.axis_values()
    sensitivity: list[tuple[str, str, str | None, Any]] = [("base", "spec settings", None, None)]
    sensitivity += [(f"{name}={_text(v)}", f"{name} = {_text(v)}", name, v)
                    for name, values in spec.sensitivity.items() for v in values]
    cells = []
    for combo in itertools.product(*axes.values()):
        for skey, slabel, sfield, svalue in (sensitivity if spec.sensitivity else sensitivity[:1]):
            for seed in spec.defaults.seeds:
                keys = {axis: value.name for axis, value in zip(axes, combo, strict=True)}
                labels = {axis: value.label for axis, value in zip(axes, combo, strict=True)}
                if spec.sensitivity:
                    keys[SENSITIVITY], labels[SENSITIVITY] = skey, slabel
                cell = _cell(spec, combo, keys, labels, seed, generated)
                if sfield is not None:
                    cell.settings[sfield] = svalue
                task = get_task(cell.task)
                _seed_and_judge(spec, cell, task)
                cells.append(cell)
    return cells


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _cell(spec: Spec, combo: Sequence[AxisValue], keys: dict[str, str], labels: dict[str, str], seed: int,
          generated: dict[str, Any]) -> Cell:
    d = spec.defaults
    task, data, model, roles, judge, decoding = d.task, d.data, d.lm, d.lm_roles, d.judge, d.decoding
    overrides: dict[str, Any] = {}
    metrics: dict[str, str] = {}
    scope = None
    for value in combo:
        scope = value.scope or scope
        task, data, model, judge = value.task or task, value.data or data, value.lm or model, value.judge or judge
        roles = value.lm_roles if value.lm_roles is not None else roles
        decoding = decoding.merged(value.decoding)
        overrides.update(value.settings)
        metrics.update(value.metrics)
    label = ",".join(f"{a}:{k}" for a, k in keys.items())
    if task is None:
        raise InputError(f"cell {label} has no task: set defaults.task or a task on an axis value",
                         file=spec.source, field="defaults.task")
    settings = dict(d.settings)
    source = None
    if data is not None:
        entry = spec.data[data]
        settings.update(entry.settings())
        if entry.generate is not None:
            source = generated.get(data)
            if source is None:
                source = generated[data] = generate_records(entry.generate, data)
            settings.setdefault("data", source.label)
    settings.update(overrides)
    for override in spec.override:
        if all(_text(v) in (keys.get(a), labels.get(a)) for a, v in override.cell.items()):
            settings.update(override.settings)
    lm = lm_entry(model, decoding, "defaults.lm", spec)
    role_entries = {pattern: lm_entry(value, decoding, f"lm_roles.{pattern}", spec)
                    for pattern, value in (roles or {}).items()}
    return Cell(keys=keys, labels=labels, seed=seed, task=task, settings=settings, lm=lm, roles=role_entries,
                judge=judge, metrics=metrics, scope=scope, source=source, seeds=len(spec.defaults.seeds))


def _seed_and_judge(spec: Spec, cell: Cell, task: Task) -> None:
    fields = task.settings.model_fields
    if "seed" in fields:
        cell.settings["seed"] = cell.seed
    elif len(spec.defaults.seeds) > 1 or cell.seed != 0:
        raise InputError(f"cell {cell.label}: task '{task.name}' takes no seed, so the spec cannot repeat it over "
                         "seeds", file=spec.source, field="defaults.seeds")
    cell.settings.update(judge_settings(cell.judge, cell.lm.get("model"), fields, f"cell {cell.label}", spec.source))


def judge_settings(judge: str | None, model: str | None, fields: Any, cell: str = "cell",
                   source: str | None = None) -> dict[str, Any]:
    """The task settings that give a cell the spec's judge: the one place where a spec's judge (a model,
    ``lexical`` or ``same-as-lm``; :func:`~groundstate.eval.metric_spec.check_judge`) meets the tasks'
    own settings (``fields``: the task settings model's fields).

    - A task with a T2 judge (``judge_lm``, the OffQuery tasks): ``lexical`` when the spec names none (the metric
      spec's default), the model as given, and for ``same-as-lm`` the cell's own model (``same-as-lm`` in the
      task settings: :class:`groundstate.eval.metric_spec.MetricSpec` builds the judge on the cell's LM with its
      server), so the run records the model under test as its judge (and the table's header says so).
    - A task with an answer evaluator (``evaluator``, the DHD steps): ``lexical`` is the rule evaluator (no LM), a
      model or ``same-as-lm`` the LM judge on that model; nothing when the spec names no judge (the step's own
      default).
    - A task that takes no judge: nothing, and a judge the spec names for it is refused.

    Raises:
        InputError: a judge for a task without one, or ``same-as-lm`` for a cell whose model the spec leaves to
            the caller (one line naming ``source``, the cell and the field).
    """
    from groundstate.eval.metric_spec import LEXICAL, SAME_AS_LM  # noqa: PLC0415 (--help stays light)

    if "judge_lm" not in fields:
        if judge is not None:
            raise InputError(f"{cell}: its task takes no judge", file=source, field="judge")
        return {}
    if judge == SAME_AS_LM:
        if model is None:
            raise InputError(f"{cell}: judge 'same-as-lm' needs the cell's model (set defaults.lm, a model axis or "
                             "--lm)", file=source, field="judge")
        if "evaluator" not in fields:
            return {"judge_lm": SAME_AS_LM}  # the metric spec builds the judge on the cell's own LM (its server,
            # decoding and timeout), and the run records the model under test as its judge
        judge = model
    if "evaluator" in fields:
        if judge is None:
            return {}
        return {"evaluator": "rules"} if judge == LEXICAL else {"evaluator": "judge", "judge_lm": judge}
    return {"judge_lm": judge or LEXICAL}


def generate_records(spec: Any, name: str) -> Any:
    """The records a ``generate`` entry describes, in memory, labelled with the generator and its settings (the
    run configuration records the label and the records' content hash)."""
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.sources import Records  # noqa: PLC0415 (--help stays light)

    tasks = generate_hidden_travel(spec.n, seed=spec.seed, travelers=spec.travelers)
    label = f"generated:{spec.kind}:n={spec.n}:seed={spec.seed}" + (f":travelers={spec.travelers}"
                                                                     if spec.travelers else "")
    return Records([t.model_dump(mode="json") for t in tasks], label, name=f"{name}.jsonl")


# -- planning ---------------------------------------------------------------------------------------------------

LMFactory = Callable[[Cell], tuple[Any, Any]]
"""``cell -> (default LM, LMConfig)``: builds a cell's LMs (tests give scripted ones)."""


@dataclass
class CellContext(RunContext):
    """A :class:`RunContext` that counts how often a task asked for its LMs (``lm_requests``), so a cell's plan
    says whether its run needs them (simulated agents never ask)."""

    lm_requests: int = 0

    def lm_pair(self) -> tuple[Any, Any]:
        self.lm_requests += 1
        return super().lm_pair()


@dataclass
class PlannedCell:
    """A cell planned: its task and validated settings, the planned run and its run id, the context it runs in,
    and whether planning asked for its context's LMs (``uses_lms``: the run needs them; simulated agents do not;
    a task that prepares its LMs once per context asks only in the first of the cells sharing it)."""

    cell: Cell
    task: Task
    settings: Any
    planned: PlannedRun
    run_id: str
    context: CellContext
    uses_lms: bool


def context_for(cell: Cell, lms: LMFactory | None = None, note: Callable[[str], None] | None = None) -> CellContext:
    """The context of the cell's LMs: built from the spec when first asked for (``lms``: a factory instead); a
    spec that names no LM, roles or decoding leaves the LM to the caller (DSPy's configured LM, else the embedded
    one, as :class:`RunContext` does)."""
    from groundstate.lm.config import LMConfig  # noqa: PLC0415 (--help stays light)

    if lms is None and cell.uses_configured_lm():
        return CellContext(lms=LMSettings(), note=note)
    options = LMSettings(lm=cell.lm.get("model"), temperature=cell.lm.get("temperature"),
                         max_tokens=cell.lm.get("max_tokens"), api_base=cell.lm.get("api_base"),
                         lm_timeout=cell.lm.get("timeout"))

    def make() -> tuple[Any, Any]:
        if lms is not None:
            return lms(cell)
        default = {k: v for k, v in cell.lm.items() if v is not None}
        default.setdefault("model", EMBEDDED)
        config = LMConfig(default=default, roles={k: dict(v) for k, v in cell.roles.items()}, source="experiment spec")
        return config.lm_for(None), config

    return CellContext(lms=options, make_lms=make, note=note)


def plan_cells(spec: Spec, cells: Sequence[Cell], run: RunSettings, *, lms: LMFactory | None = None,
               note: Callable[[str], None] | None = None) -> list[PlannedCell]:
    """Every cell planned through :func:`~groundstate.eval.assemble.assemble`, without any LM call: its settings
    validated (one line naming the spec file, the cell and the field), its LMs built (no call), its data read.
    Cells with the same LMs share one context.

    Raises:
        InputError: a cell's settings do not fit its task.
        ConfigError, LMSetupError: what planning the task raises (a missing file, an unknown LM).
    """
    from groundstate.eval.assemble import assemble, task_named  # noqa: PLC0415 (--help stays light)

    contexts: dict[str, CellContext] = {}
    out = []
    for cell in cells:
        task = task_named(cell.task)
        settings = task.settings.parse(cell.settings, file=spec.source, record=f"cell {cell.label}", loc=("settings",))
        if cell.lm_key() not in contexts:
            contexts[cell.lm_key()] = context_for(cell, lms, note)
        context = contexts[cell.lm_key()]
        task, settings, planned = assemble(task, settings, context, run=run, source=cell.source)
        # a task may prepare its LMs once per context (the hidden-profile teams): a cell sharing the context of
        # one that asked uses them too
        out.append(PlannedCell(cell, task, settings, planned, planned.run_id(run), context, context.lm_requests > 0))
    return out


def select(cells: Sequence[Any], selectors: Sequence[str] | None, dimensions: list[str]) -> list[Any]:
    """The cells (or planned cells) matching any of ``selectors`` (``--cells``); all of them without selectors.

    Raises:
        ConfigError: a selector naming an unknown axis, or matching no cell.
    """
    from groundstate.eval.experiments.selectors import check_selector, matches, parse_selector  # noqa: PLC0415 (--help stays light)

    if not selectors:
        return list(cells)
    chosen = []
    for text in selectors:
        selector = parse_selector(text, "--cells")
        check_selector(selector, dimensions, text, "--cells")
        found = [c for c in cells if matches(selector, *_keys(c))]
        if not found:
            raise ConfigError(f"--cells '{text}' matches no cell of the spec")
        chosen += [c for c in found if c not in chosen]
    return chosen


def _keys(cell: Any) -> tuple[dict[str, str], dict[str, str]]:
    cell = getattr(cell, "cell", cell)
    return {**cell.keys, "seed": str(cell.seed)}, {**cell.labels, "seed": str(cell.seed)}
