"""Sensitivity of a simulated-agent comparison to the agents' parameters: the same programs, tasks and seeds,
re-run with one simulated-agent setting varied, so a reader sees whether the ordering of the methods is a property
of the methods or of the agents' preset.

With the ``limited`` preset on generated travel tasks, "the rule controller beats Full-Info" holds at an attention
limit of 3 facts and reverses at 5; a table that shows one attention limit cannot tell the reader which kind of
result it is. The default sensitivity (:data:`ATTENTION_SENSITIVITY`) varies ``sim_attention`` over unlimited, 5,
3 and 2 facts.

- :func:`sensitivity_variants`: from base settings (a mapping, e.g. a spec's task settings, or a settings model)
  and a ``{setting: [values]}`` mapping (an experiment spec's ``[sensitivity]`` table), the variant settings, one
  per point of the product of the values, every other setting (seeds included) unchanged;
- :func:`evaluate_sensitivity`: ``consilience table --sensitivity``: the evaluation of every variant (durable runs;
  a variant whose agents equal the base's resumes the base's runs);
- :func:`sensitivity_rows`, :func:`sensitivity_cells`, :func:`sensitivity_markdown`, :func:`ordering_holds`: the
  rows a table shows (one per variant: each method's score and the ordering of the methods), as cells, as
  Markdown, and whether the ordering is the same in every row.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from groundstate.errors import InputError, one_line
from groundstate.eval.consilience.settings import SIM_FIELDS, AgentSettings
from groundstate.eval.settings import Settings

ATTENTION_SENSITIVITY: Mapping[str, tuple[Any, ...]] = MappingProxyType({"sim_attention": ("all", 5, 3, 2)})
"""The default sensitivity: the attention limit unlimited, then 5, 3 and 2 facts."""


@dataclass(frozen=True)
class Variant:
    """One point of a sensitivity: ``label`` (``sim_attention=5``), ``title`` (``attention 5 facts``), the
    ``changes`` it makes (``{"sim_attention": 5}``) and the resulting ``settings`` (of the base's kind: a dict for
    a mapping, the same model for a settings model)."""

    label: str
    title: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    settings: Any = None


def _title(name: str, value: Any) -> str:
    short = name.removeprefix("sim_").replace("_", " ")
    if name == "sim_attention":
        return "attention unlimited" if value == "all" else f"attention {value} fact{'' if value == 1 else 's'}"
    return f"{short} {value}"


def _refuse(message: str, key: str | None, file: str | os.PathLike | None) -> InputError:
    return InputError(message, file=None if file is None else str(file),
                      field=None if key is None else f"sensitivity.{one_line(key, 60)}")


def sensitivity_variants(settings: Mapping[str, Any] | Settings,
                         sensitivity: Mapping[str, Sequence[Any]] = ATTENTION_SENSITIVITY, *,
                         file: str | os.PathLike | None = None) -> list[Variant]:
    """The variant settings of a sensitivity: one per point of the product of ``sensitivity``'s values (keys in
    the mapping's order, values in the order given), each the base ``settings`` with those values, everything else
    (the seed, the tasks, the programs) as in the base.

    Args:
        settings: the base settings: a mapping (an experiment spec's task settings) or a settings model with the
            simulated agents' fields (:class:`~groundstate.eval.consilience.settings.AgentSettings` or a subclass).
        sensitivity: ``{setting: [values]}``; settings are the simulated agents' (:data:`~groundstate.eval.
            consilience.settings.SIM_FIELDS`, e.g. ``{"sim_attention": ["all", 5, 3, 2]}``).
        file: the spec file, named in errors.

    Returns:
        The variants, in order. A mapping base gives dicts (the base's keys plus the varied ones); a settings model
        gives models of the same class, whose unset fields stay unset.

    Raises:
        InputError: a setting outside :data:`SIM_FIELDS`, an empty or repeated list of values, a value the setting
            does not accept (checked like the settings themselves), or a base whose agents are not simulated (one
            line naming ``file`` and the field).
    """
    if not sensitivity:
        raise _refuse("names no setting to vary", None, file)
    for key, values in sensitivity.items():
        if key not in SIM_FIELDS:
            raise _refuse(f"only simulated-agent settings can be varied ({', '.join(SIM_FIELDS)})", str(key), file)
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise _refuse("give a non-empty list of values", key, file)
        if len({repr(v) for v in values}) != len(values):
            raise _refuse("a value is repeated", key, file)
    base = (settings.model_dump(include=settings.model_fields_set) if isinstance(settings, Settings)
            else dict(settings))
    if base.get("agents", "sim") != "sim":
        raise _refuse("a sensitivity varies simulated agents; these settings run LM agents (agents = 'sim' to use "
                      "simulated ones)", None, file)
    out = []
    for point in itertools.product(*sensitivity.values()):
        changes = dict(zip(sensitivity, point, strict=True))
        merged = {**base, **changes}
        agents = AgentSettings.parse({k: v for k, v in merged.items() if k in AgentSettings.model_fields}, file=file,
                                     loc=("sensitivity",))
        agents.sim_params()  # a value SimParams refuses: one line now, not when the variant runs
        variant = type(settings).parse(merged, file=file) if isinstance(settings, Settings) else merged
        out.append(Variant(label=", ".join(f"{k}={v}" for k, v in changes.items()),
                           title=", ".join(_title(k, v) for k, v in changes.items()), changes=changes,
                           settings=variant))
    return out


def evaluate_sensitivity(settings: Any, sensitivity: Mapping[str, Sequence[Any]] = ATTENTION_SENSITIVITY,
                         run: Any = None, context: Any = None) -> list[tuple[Variant, Any]]:
    """``(variant, evaluation)`` for every variant of :func:`sensitivity_variants` of an
    :class:`~groundstate.eval.consilience.settings.EvaluationSettings`: the same programs, tasks and seeds, one
    durable run per program and variant (:func:`~groundstate.eval.consilience.evaluate.evaluate_programs`)."""
    from groundstate.eval.consilience.evaluate import evaluate_programs  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.task import RunContext  # noqa: PLC0415 (--help stays light)

    context = context or RunContext()
    return [(variant, evaluate_programs(variant.settings, run, context))
            for variant in sensitivity_variants(settings, sensitivity)]


def ordering(scores: Mapping[str, float | None], digits: int = 3) -> str:
    """The methods from the best score down, ``A > B = C > D`` (equal when equal at ``digits`` decimals); methods
    without a score are left out."""
    measured = sorted(((round(v, digits), name) for name, v in scores.items() if v is not None),
                      key=lambda item: -item[0])
    groups = [" = ".join(name for _, name in group) for _, group in itertools.groupby(measured, key=lambda i: i[0])]
    return " > ".join(groups)


def sensitivity_rows(results: Sequence[tuple[Variant, Sequence[Mapping[str, Any]]]],
                     metric: str = "task_accuracy") -> list[dict[str, Any]]:
    """One row per variant from its table rows (:func:`~groundstate.eval.consilience.tables.rows_from_runs`):
    ``{"variant", "title", "changes", "scores": {method: the metric's entry}, "ordering"}``; the methods keep the
    table's order."""
    out = []
    for variant, rows in results:
        scores = {row["method"]: row.get(metric) for row in rows}
        out.append({"variant": variant.label, "title": variant.title, "changes": dict(variant.changes),
                    "scores": scores,
                    "ordering": ordering({m: (e or {}).get("mean") for m, e in scores.items()})})
    return out


def ordering_holds(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every variant orders the methods the same way."""
    return len({row["ordering"] for row in rows}) <= 1


def sensitivity_cells(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """``(header, cells)``: the variant, each method's mean (``not measured`` without one), the ordering."""
    methods = list(dict.fromkeys(m for row in rows for m in row["scores"]))
    header = ["variant", *methods, "ordering (best first)"]
    body = []
    for row in rows:
        means = [(row["scores"].get(m) or {}).get("mean") for m in methods]
        body.append([row["title"], *("not measured" if v is None else f"{v:.3f}" for v in means), row["ordering"]])
    return header, body


def varied(rows: Sequence[Mapping[str, Any]]) -> str:
    """What the rows vary, in words: ``the attention limit`` for ``sim_attention``, else the settings' names."""
    keys = list(dict.fromkeys(k for row in rows for k in row.get("changes", {})))
    if keys == ["sim_attention"]:
        return "the attention limit"
    return "the setting" + ("s " if len(keys) > 1 else " ") + ", ".join(keys)


def sensitivity_title(rows: Sequence[Mapping[str, Any]], metric: str = "task accuracy") -> str:
    """The title of a sensitivity table: what it varies and what it shows."""
    return f"sensitivity to {varied(rows)} (same tasks, programs and seeds): {metric}"


def holds_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """The sentence under a sensitivity table: whether the ordering holds across its variants."""
    what = varied(rows)
    if ordering_holds(rows):
        return f"the ordering of the methods is the same at every value of {what}"
    return (f"the ordering of the methods changes with {what}: a conclusion drawn from one row is a property of "
            "the simulated agents' parameters, not of the methods alone")


def sensitivity_markdown(rows: Sequence[Mapping[str, Any]], subtitle: str = "") -> str:
    """The sensitivity rows as a Markdown section: :func:`sensitivity_title`, ``subtitle``, the table and
    :func:`holds_line`."""
    from groundstate.eval.report import pipe_lines  # noqa: PLC0415 (--help stays light)

    header, body = sensitivity_cells(rows)
    lines = [f"### {sensitivity_title(rows)}", "", *([subtitle, ""] if subtitle else []), *pipe_lines(header, body), "",
             holds_line(rows)]
    return "\n".join(lines) + "\n"
