"""The table builder: exactly a spec's cells, from their runs, beside the paper's numbers.

:func:`build_table` plans the spec's cells (no LM call), finds each cell's run (the run directory of its planned
run id, ``<id>-merged`` after merging shards, or a run the spec adopts: ``[runs]``, ``--use-run``; never "the
newest run"), checks every run against its cell and the cells against each other
(:mod:`~groundstate.eval.experiments.checks`), reads the numbers with the cell's reader
(:mod:`~groundstate.eval.experiments.readers`), adds the averages over the spec's ``average`` axes (per-value rows
kept) and places each reference of the paper beside the number it belongs to. It returns a :class:`Table`, which
:mod:`~groundstate.eval.experiments.render` writes as Markdown, JSON and PNG and the command line prints.

A front-end (``compare --paper-tables``: :mod:`groundstate.eval.reground.tables`; ``consilience table``:
:mod:`groundstate.eval.consilience.table_spec`) builds a :class:`Spec` in memory from its options
(``Spec.model_validate({...})``) and calls :func:`build_table` with it, its LMs given by ``lms`` (the command's);
it may set the table's ``subtitle`` and turn off its paper columns (``show_paper``). A cell that two stored runs
claim (its run directory and its merged shards beside it) is refused in one line (:func:`refuse_two_runs`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.consilience.provenance import agents_of, describe_agents
from groundstate.eval.experiments.cells import LMFactory, PlannedCell, plan_cells, resolve_cells
from groundstate.eval.experiments.checks import check_across, check_run, judge_of, varying_axes
from groundstate.eval.experiments.readers import read_cell
from groundstate.eval.experiments.spec import AVERAGE, SENSITIVITY, Reference, Spec
from groundstate.eval.run_settings import RunSettings


@dataclass
class Value:
    """One number of the table: the entry (``mean``, ``low``, ``high``, ``n``, ``failed``), its status
    (``measured``, ``not measured``, ``not run``, ``not reported``, or ``base``: the base cell of a relative
    metric), the paper's reference, and a note (a partly run cell, an average over fewer values than the axis
    has)."""

    entry: dict[str, Any] | None
    status: str
    reference: Reference | None = None
    note: str | None = None


@dataclass
class Row:
    """A row: its key and label per row dimension, whether it averages an axis, and its values by
    ``(column index, metric)``."""

    keys: dict[str, str]
    labels: dict[str, str]
    values: dict[tuple[int, str], Value] = field(default_factory=dict)
    average: str | None = None


@dataclass
class Table:
    """A built table (see the module docstring): the header lines (judges, LMs, decoding, agents), the row and
    column dimensions, the columns (key and label per column dimension), the metrics, the rows, the references
    whose cell is not in the table, the run behind each cell and its stored configuration (``configs``, by cell
    label). A front-end may set ``subtitle`` (a line under the title: what produced the figures) and turn the
    paper's columns off (``show_paper``) when its table has no published numbers to show."""

    spec: Spec
    header: list[str]
    row_dims: list[str]
    col_dims: list[str]
    columns: list[dict[str, tuple[str, str]]]
    metrics: list[str]
    rows: list[Row]
    paper_only: list[Reference]
    runs: dict[str, str]
    notes: list[str] = field(default_factory=list)
    configs: dict[str, Any] = field(default_factory=dict)
    subtitle: str | None = None
    show_paper: bool = True


def adopted_runs(spec: Spec, cells: Sequence[PlannedCell], use_runs: Sequence[str], out: Any) -> dict[int, str]:
    """The runs the spec adopts (``[runs]``, then ``--use-run CELL=RUN``), by index of the planned cell: each
    selector must name exactly one table cell of one seed.

    Raises:
        ConfigError: a selector naming an unknown axis or not exactly one cell; InputError: no such run.
    """
    from groundstate.eval.experiments.selectors import check_selector, matches, parse_selector, split_use_run  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.runs import resolve_run_dir  # noqa: PLC0415 (--help stays light)

    items = [(k, v, "[runs]") for k, v in spec.runs.items()] + [(*split_use_run(i), "--use-run") for i in use_runs]
    chosen: dict[int, str] = {}
    for text, run, where in items:
        selector = parse_selector(text, f"{where} cell")
        check_selector(selector, spec.dimensions(), text, where)
        found = [i for i, c in enumerate(cells)
                 if matches(selector, {**c.cell.keys, "seed": str(c.cell.seed)},
                            {**c.cell.labels, "seed": str(c.cell.seed)})]
        if len(found) != 1:
            raise ConfigError(f"{where}: '{text}' names {len(found)} cells; name one (all its axes, and seed:N when "
                              "the spec has several seeds)")
        chosen[found[0]] = resolve_run_dir(out, run, prefix=where == "--use-run")  # a spec's names: exact ids
    return chosen


def refuse_two_runs(cell: str, first: Any, second: Any) -> None:
    """Refuse a table cell that two stored runs claim (a table never picks one of them, newest or not).

    Args:
        cell: the cell's label; first, second: the two runs (:func:`~groundstate.eval.runs.load_run` or
            :func:`~groundstate.eval.runs.run_entry` dicts: ``run_id``, ``dir``, ``config``).

    Raises:
        ConfigError: always; one line naming the cell, both runs and the first field in which they differ.
    """
    from groundstate.eval.experiments.checks import category, first_difference  # noqa: PLC0415 (--help stays light)

    diff = first_difference(first["config"], second["config"])
    what = ("the same configuration (a run and its merged shards)" if diff is None else
            f"differing in the {category(diff[0])}: field '{diff[0]}'")
    raise ConfigError(f"cell {cell}: two stored runs claim it, {first['run_id']} ({first['dir']}) and "
                      f"{second['run_id']} ({second['dir']}), {what}; a table never picks one: remove one, or adopt "
                      f"one with --use-run '{cell}=RUN'")


def _load(cells: Sequence[PlannedCell], run: RunSettings, adopted: dict[int, str]) -> list[Any]:
    """Each cell's run (``None``: not run), checked against its cell; a cell both its run directory and its merged
    shards claim is refused (:func:`refuse_two_runs`)."""
    from groundstate.eval.experiments.plan import run_dirs_of  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.runs import load_run, run_entry  # noqa: PLC0415 (--help stays light)

    loaded = []
    for i, cell in enumerate(cells):
        found = [adopted[i]] if i in adopted else run_dirs_of(cell.planned.out(run), cell.run_id)
        if len(found) > 1:
            refuse_two_runs(cell.cell.label, *(run_entry(d) for d in found[:2]))
        where = found[0] if found else None
        if where is None:
            loaded.append(None)
            continue
        stored = load_run(where)
        planned = {**cell.planned.config, "limit": run.limit}
        check_run(cell.cell.label, planned, stored["config"], stored["run_id"], i in adopted)
        loaded.append(stored)
    return loaded


def build_table(spec: Spec, run: RunSettings, *, lms: LMFactory | None = None, use_runs: Sequence[str] = (),
                note: Any = None) -> Table:
    """The table of ``spec`` from the runs under ``run.out`` (see the module docstring). No LM is called.

    Raises:
        ConfigError: a run that differs from its cell, cells mixing judges or decodings, a bad adoption.
        InputError: a corrupt run directory or a bad spec (one line).
    """
    cells = plan_cells(spec, resolve_cells(spec), run, lms=lms, note=note)
    adopted = adopted_runs(spec, cells, use_runs, run.out or "runs")
    loaded = _load(cells, run, adopted)
    keyed = [({**c.cell.keys, "seed": str(c.cell.seed)}, c.planned.config) for c in cells]
    check_across([(c.cell.label, {**c.cell.keys, "seed": str(c.cell.seed)}, r["config"])
                  for c, r in zip(cells, loaded, strict=True) if r is not None], varying_axes(keyed))
    groups: dict[tuple, list[tuple[PlannedCell, Any]]] = {}
    for cell, stored in zip(cells, loaded, strict=True):
        groups.setdefault(cell.cell.group, []).append((cell, stored))
    memo: dict[tuple, dict[str, dict[str, Any]]] = {}
    values = {key: _group_values(spec, members, memo) for key, members in groups.items()}
    add_relative(spec, values)
    return _layout(spec, cells, values, loaded)


def _group_values(spec: Spec, members: list[tuple[PlannedCell, Any]], memo: dict[tuple, Any]) -> dict[str, Value]:
    """The values of one table cell (its seeds' runs pooled) per metric; ``memo`` keeps what each set of runs
    read as (table cells that are views of the same runs read them once)."""
    runs = [stored for _, stored in members if stored is not None]
    cell = members[0][0]
    if not runs:
        return {m: Value(None, "not run") for m in measured_metrics(spec)}
    key = (cell.task.name, tuple(str(r["run_id"]) for r in runs))
    if key not in memo:
        memo[key] = read_cell(cell.task.name, runs, cell.settings)
    numbers = memo[key]
    scope = cell.cell.scope
    notes = []
    if len(runs) < len(members):
        notes.append(f"{len(runs)} of {len(members)} seeds run")
    done = sum(int(r["summary"].get("n_done", 0)) for r in runs)
    selected = sum(int(r["summary"].get("n_selected", 0)) for r in runs)
    if done < selected:
        notes.append(f"{done} of {selected} records")
    out = {}
    for metric in measured_metrics(spec):
        entry = numbers.get(cell.cell.metrics.get(metric, f"{scope}:{metric}" if scope else metric))
        if entry is None:
            out[metric] = Value(None, "not reported", note="; ".join(notes) or None)
            continue
        status = "measured" if entry.get("mean") is not None else "not measured"
        out[metric] = Value(dict(entry), status, note="; ".join(notes) or None)
    return out


def measured_metrics(spec: Spec) -> list[str]:
    """The metrics read from the runs: the layout's, without its relative metrics, with their sources."""
    relative = {r.name for r in spec.layout.relative}
    out = [m for m in spec.layout.metrics if m not in relative]
    return out + [r.metric for r in spec.layout.relative if r.metric not in out]


def _relative_value(kind: str, ours: Value, base: Value) -> Value:
    if "not run" in (ours.status, base.status):
        return Value(None, "not run", note=None if ours.status == "not run" else "its base cell is not run")
    a, b = (ours.entry or {}).get("mean"), (base.entry or {}).get("mean")
    if a is None or b is None:
        return Value(None, "not measured", note=None if a is None else "its base cell is not measured")
    if kind != "difference" and b == 0:
        return Value(None, "not measured", note="its base cell is 0")
    number = a - b if kind == "difference" else (a - b) / b if kind == "gain" else (b - a) / b
    return Value({"mean": number, "low": None, "high": None, "n": 1, "failed": 0}, "measured")


def add_relative(spec: Spec, values: dict[tuple, dict[str, Value]]) -> None:
    """Each table cell's relative metrics (``layout.relative``), from its value and its base cell's."""
    axes = spec.axis_values()
    for relative in spec.layout.relative:
        base = next(v.name for v in axes[relative.axis] if relative.base in (v.name, v.label))
        for key, metrics in values.items():
            base_key = tuple((d, base if d == relative.axis else k) for d, k in key)
            if base_key == key:
                metrics[relative.name] = Value(None, "base")
            elif base_key not in values:
                metrics[relative.name] = Value(None, "not run", note="no base cell")
            else:
                metrics[relative.name] = _relative_value(relative.kind, metrics[relative.metric],
                                                         values[base_key][relative.metric])


def _average(values: list[Value], axis: str, size: int) -> Value:
    """The mean of the measured values of ``axis`` (each value weighs the same, as the papers average models)."""
    means = [v.entry["mean"] for v in values if v.entry and v.entry.get("mean") is not None]
    if values and all(v.status == "base" for v in values):
        return Value(None, "base")
    if not means:
        return Value(None, "not run" if all(v.status == "not run" for v in values) else "not measured",
                     note=f"no {axis} measured")
    entry = {"mean": sum(means) / len(means), "low": None, "high": None, "n": len(means), "failed": 0}
    note = f"average over {len(means)} of {size} {axis} values" if len(means) < size else f"average over {size}"
    return Value(entry, "measured", note=note)


def _layout(spec: Spec, cells: Sequence[PlannedCell], values: dict[tuple, dict[str, Value]],
            loaded: Sequence[Any]) -> Table:
    dims = spec.dimensions()
    keys_of: dict[str, list[tuple[str, str]]] = {d: [] for d in dims}
    for cell in cells:
        for d in dims:
            pair = (cell.cell.keys[d], cell.cell.labels[d])
            if pair not in keys_of[d]:
                keys_of[d].append(pair)
    row_dims = list(spec.layout.rows)
    if spec.sensitivity and SENSITIVITY not in row_dims and SENSITIVITY not in spec.layout.columns:
        row_dims.insert(0, SENSITIVITY)
    col_dims = list(spec.layout.columns)
    fixed = {d: keys_of[d][0] for d in dims if d not in row_dims and d not in col_dims}
    def choices(d: str) -> list[tuple[str, str]]:
        return keys_of[d] + ([(AVERAGE, AVERAGE)] if d in spec.layout.average else [])

    columns = [dict(zip(col_dims, combo, strict=True)) for combo in itertools.product(*map(choices, col_dims))]
    row_choices = [choices(d) for d in row_dims]
    rows = []
    for combo in itertools.product(*row_choices):
        row_keys = dict(zip(row_dims, combo, strict=True))
        averaged = [d for d, (k, _) in row_keys.items() if k == AVERAGE]
        row = Row({d: k for d, (k, _) in row_keys.items()}, {d: lab for d, (_, lab) in row_keys.items()},
                  average=",".join(averaged) or None)
        for index, column in enumerate(columns):
            over = averaged + [d for d, (k, _) in column.items() if k == AVERAGE]
            for metric in spec.layout.metrics:
                row.values[(index, metric)] = _value(spec, values, dims, {**fixed, **row_keys, **column}, over,
                                                     keys_of, metric)
        rows.append(row)
    paper_only = _place_references(spec, rows, columns, fixed)
    runs = {c.cell.label: r["run_id"] for c, r in zip(cells, loaded, strict=True) if r is not None}
    configs = {c.cell.label: r["config"] for c, r in zip(cells, loaded, strict=True) if r is not None}
    notes = [f"{axis} {value.label}: {value.note}" for axis, entries in spec.axis_values().items()
             for value in entries if value.note]
    return Table(spec, header_lines(cells, loaded), row_dims, col_dims, columns, list(spec.layout.metrics), rows,
                 paper_only, runs, notes, configs)


def _value(spec: Spec, values: dict[tuple, dict[str, Value]], dims: list[str], point: dict[str, tuple[str, str]],
           averaged: list[str], keys_of: dict[str, list[tuple[str, str]]], metric: str) -> Value:
    if not averaged:
        return values[tuple((d, point[d][0]) for d in dims)][metric]
    axis = averaged[0]
    inner = [_value(spec, values, dims, {**point, axis: pair}, averaged[1:], keys_of, metric) for pair in keys_of[axis]]
    return _average(inner, axis, len(keys_of[axis]))


def _reference_matches(reference: Reference, point: dict[str, tuple[str, str]]) -> bool:
    for dim, pair in point.items():
        if dim in reference.cell:
            wanted = reference.cell[dim]
            text = ("true" if wanted else "false") if isinstance(wanted, bool) else str(wanted)
            if text not in pair:
                return False
        elif dim == SENSITIVITY and pair[0] != "base":
            return False
    return True


def _place_references(spec: Spec, rows: list[Row], columns: list[dict[str, tuple[str, str]]],
                      fixed: dict[str, tuple[str, str]]) -> list[Reference]:
    """Each reference beside its value; the ones whose cell is not in the table are returned."""
    unplaced = []
    for reference in spec.references():
        placed = False
        for row in rows:
            for index, column in enumerate(columns):
                point = {**fixed, **{d: (row.keys[d], row.labels[d]) for d in row.keys}, **column}
                if _reference_matches(reference, point):
                    row.values[(index, reference.metric)].reference = reference
                    placed = True
        if not placed:
            unplaced.append(reference)
    return unplaced


def header_lines(cells: Sequence[PlannedCell], loaded: Sequence[Any]) -> list[str]:
    """What the numbers were measured with, from the stored run configurations (the plan's when nothing is run):
    the judge(s) (and when the judge is the model under test), the LM(s), the decoding, simulated agents."""
    configs = [r["config"] for r in loaded if r is not None]
    prefix = "" if configs else "planned (no cell is run yet): "
    configs = configs or [c.planned.config for c in cells]
    judges, lms, decodings, agents = {}, {}, {}, {}
    for config in configs:
        lm = config.get("lm") or {}
        model = lm.get("model")
        judge = judge_of(config)
        if judge is not None:
            self_judged = model is not None and str(judge) in (f"lm:{model}", str(model), "same-as-lm")
            judges[str(judge) + (" (judge = model under test)" if self_judged else "")] = True
        if model is not None:
            lms[str(model)] = True
            decodings[f"{model}: temperature {lm.get('temperature', 'default')}, max tokens "
                      f"{lm.get('max_tokens', 'default')}"] = True
        for pattern, entry in ((config.get("lm_config") or {}).get("roles") or {}).items():
            lms[f"{entry.get('model')} (role {pattern})"] = True
            decodings[f"{entry.get('model')} (role {pattern}): temperature {entry.get('temperature', 'default')}, "
                      f"max tokens {entry.get('max_tokens', 'default')}"] = True
        described = agents_of(config)
        if described and described.get("kind") == "sim":  # the one label every hidden-profile output uses
            agents["agents: " + describe_agents(described, lm or None)] = True
    lines = [prefix + "judge: " + ("; ".join(judges) if judges else "none (the task has no judge)"),
             prefix + "LM: " + ("; ".join(lms) if lms else "none (no LM is called)")]
    if decodings:
        lines.append(prefix + "decoding: " + "; ".join(decodings))
    lines += [prefix + a for a in agents]
    return lines
