"""The files the DHD paper tables are built from, checked against one pydantic model each when they are read.

``groundstate dhd tables`` (and ``dhd analyze``'s own tables) read back what earlier steps wrote: an analysis
``report.json`` (:class:`AnalysisReport`), its ``crossfit.json`` (:class:`CrossfitReport`) and the
``mask_table.json`` of the one masking run a table shows (:class:`MaskTable`;
:func:`~groundstate.eval.dhd.blocks.choose_mask_run`). The models describe the parts the tables read
(:mod:`groundstate.eval.dhd.tables`) and allow every other field; a part of the wrong type or missing is one
line naming the file and the field, never a traceback from inside a table builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, model_validator

from groundstate.files import read_json
from groundstate.schema import explain, validate

Num = Annotated[float, Field(strict=True, allow_inf_nan=False)]
GROUPS = ("W+", "W-", "C+", "C-")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Interval(_Open):
    """A mean with its interval (any of them ``null`` when not measured) and its count."""

    mean: Num | None = None
    low: Num | None = None
    high: Num | None = None
    n: StrictInt | None = None


class Disagreement(_Open):
    rate: Num | None = None
    low: Num | None = None
    high: Num | None = None
    n: StrictInt | None = None


class Bootstrap(_Open):
    wrong: Interval | None = None
    correct: Interval | None = None
    difference: Interval | None = None


class Part(_Open):
    """What Tables 17 and 18 read of one benchmark (or of the pooled LOO section)."""

    disagreement: Disagreement | None = None
    groups: dict[str, StrictInt | None] = Field(default_factory=dict)
    bootstrap: Bootstrap | None = None


class Band(_Open):
    low: Num
    high: Num


class PermutationNull(_Open):
    """The permutation null of Table 19: the observed count and the null's band of every group and ``separated``."""

    observed: dict[str, Num]
    null: dict[str, Band]
    n_permutations: StrictInt | None = None

    @model_validator(mode="after")
    def _every_group(self) -> PermutationNull:
        for name in ("separated", *GROUPS):
            if name not in self.observed or name not in self.null:
                raise ValueError(f"the permutation null has no '{name}' count")
        return self


class Multiplicity(_Open):
    """The problem-level selections per family (Table 19's second, labelled column)."""

    bh: dict[str, StrictInt | None] = Field(default_factory=dict)
    by: dict[str, StrictInt | None] = Field(default_factory=dict)
    n_tested_problems: StrictInt | None = None


class Fdr(_Open):
    """The per-message selections by group (Table 19's BH column); ``p_values`` names the test behind them (absent
    in reports from before that column, whose selections are then not shown)."""

    p_values: StrictStr | None = None
    n_tests: StrictInt | None = None
    counts: dict[str, dict[str, StrictInt | None]] = Field(default_factory=dict)


class LooSection(Part):
    permutation_null: PermutationNull
    multiplicity: Multiplicity = Field(default_factory=Multiplicity)
    fdr: Fdr = Field(default_factory=Fdr)
    strict: dict[str, Any] = Field(default_factory=dict)
    n_messages: StrictInt | None = None
    by_benchmark: dict[str, Part] | None = None


class Modes(_Open):
    loo: LooSection | None = None


class Selection(_Open):
    """One selection scored against a simulated cache's planted truth (:mod:`groundstate.eval.dhd.planted`)."""

    n_selected: StrictInt
    true: StrictInt
    false: StrictInt
    n_planted: StrictInt
    recall: Num | None = None
    fdp: Num | None = None


class PlantedTruth(_Open):
    """A replay mode's selections against the planted truth (only a simulated cache's report has them)."""

    n_planted: StrictInt
    n_planted_problems: StrictInt
    n_not_analyzed: StrictInt = 0
    n_clipped: StrictInt = 0
    selections: dict[str, Selection]


class AnalysisReport(_Open):
    """``report.json`` of ``dhd analyze``: the sections per replay mode (the tables read the LOO one) and, for a
    simulated cache, the selections against its planted truth per mode."""

    modes: Modes
    planted_truth: dict[str, PlantedTruth] | None = None


class Control(_Open):
    low: Num | None = None
    high: Num | None = None
    p_value: Num | None = None


class BenchmarkGain(_Open):
    gain: Interval
    n_problems: StrictInt | None = None


class CrossfitVariant(_Open):
    gain: Interval
    controls: dict[str, Control] = Field(default_factory=dict)
    n_problems: StrictInt | None = None
    n_units: StrictInt | None = None
    by_benchmark: dict[str, BenchmarkGain] | None = None


class CrossfitMain(CrossfitVariant):
    full_accuracy: Num | None
    crossfit_accuracy: Num | None


class CrossfitVariants(_Open):
    main: CrossfitMain | None = None
    A: CrossfitVariant | None = None
    B: CrossfitVariant | None = None


class CrossfitReport(_Open):
    """``crossfit.json``: the cross-fitted variants of Tables 24-26."""

    variants: CrossfitVariants = Field(default_factory=CrossfitVariants)


class MaskCell(_Open):
    success: Num | None
    failures: StrictInt | None = None


class MaskTable(_Open):
    """``mask_table.json`` of a masking run (Table 23): a row per category with a cell per variant."""

    variants: list[StrictStr]
    rows: dict[str, dict[str, Any]]

    @model_validator(mode="after")
    def _cells(self) -> MaskTable:
        for category, row in self.rows.items():
            if not isinstance(row.get("title"), str):
                raise ValueError(f"row '{category}' has no title")
            for variant in self.variants:
                try:
                    MaskCell.model_validate(row.get(variant))
                except ValidationError as exc:
                    field, message = explain(exc)
                    where = f"rows.{category}.{variant}" + (f".{field}" if field else "")
                    raise ValueError(f"'{where}' {message}") from None
        return self


def read_report(path: str | Path) -> dict[str, Any]:
    """``report.json`` checked against :class:`AnalysisReport` (one :class:`InputError` line otherwise)."""
    return _read(path, AnalysisReport)


def read_crossfit(path: str | Path) -> dict[str, Any]:
    """``crossfit.json`` checked against :class:`CrossfitReport`."""
    return _read(path, CrossfitReport)


def read_mask_table(path: str | Path) -> dict[str, Any]:
    """``mask_table.json`` checked against :class:`MaskTable`."""
    return _read(path, MaskTable)


def _read(path: str | Path, model: type[BaseModel]) -> dict[str, Any]:
    """The parsed file (what the tables use) once it fits ``model``."""
    value = read_json(path)
    validate(model, value, file=path)
    return value
