"""The pydantic models of a run directory's files: ``config.json``, ``summary.json`` and a ``results.jsonl`` row.

Every reader of a run directory (``runs show/list/merge``, resuming, DHD's collection of replay runs, the tables)
validates what it reads against these models the moment it reads it, so a field of the wrong type (``shard: 5``,
``n_done: "x"``, a row whose ``scores`` is a string) is one line naming the file, the record and the field, never
a traceback further on.

The models check the fields groundstate itself reads and allow every other field (``extra="allow"``): a run's
configuration holds whatever identifies it (options, data, LM descriptions, DHD settings), and later versions
add fields to summaries and rows. They describe what is there; the dicts read from the files are what the
readers keep using.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator

from groundstate.errors import InputError
from groundstate.schema import explain, validate

Count = Annotated[int, Field(strict=True, ge=0)]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class RunConfig(BaseModel):
    """``config.json``: what identifies a run. Every run has ``program`` and ``run_id``; the runner adds ``limit``
    (``null`` or a count) and ``shard`` (``null`` or ``[i, n]`` with ``0 <= i < n``)."""

    model_config = ConfigDict(extra="allow")

    program: StrictStr
    run_id: StrictStr
    shard: list[StrictInt] | None = None
    limit: Count | None = None
    lm: dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    seed: StrictInt | None = None
    merged_from: list[StrictStr] | None = None

    @field_validator("shard")
    @classmethod
    def _one_shard(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (len(value) != 2 or not 0 <= value[0] < value[1]):
            raise ValueError(f"must be null or [i, n] with 0 <= i < n (got {value})")
        return value


class ScoreSummary(BaseModel):
    """One score of a summary: its mean and 95% interval (``null`` when not measured)."""

    model_config = ConfigDict(extra="allow")

    mean: Number | None = None
    low: Number | None = None
    high: Number | None = None
    n: Count | None = None
    failed: Count | None = None
    missing: Count | None = None


class TokenSummary(BaseModel):
    model_config = ConfigDict(extra="allow")

    input: Number
    output: Number
    per_record: Number


class CallSummary(BaseModel):
    model_config = ConfigDict(extra="allow")

    total: Number
    per_record: Number


class RunSummary(BaseModel):
    """``summary.json``: counts, scores, tokens and calls (:func:`~groundstate.eval.results.summarize`), and how
    the run ended (``finished`` is false in the summary a run writes when it starts)."""

    model_config = ConfigDict(extra="allow")

    run_id: StrictStr | None = None
    n_selected: Count
    n_done: Count
    n_error: Count
    scores: dict[str, ScoreSummary]
    tokens: TokenSummary
    lm_calls: CallSummary
    finished: StrictBool | None = None
    complete: StrictBool | None = None
    stopped_reason: StrictStr | None = None


class ResultRow(BaseModel):
    """One line of ``results.jsonl``: a record's id, scores, outputs, error and counts, its dollar cost and (rows of
    runs with a ``labels`` function) its ``gold`` answer (any JSON), ``domain`` and ``variant``."""

    model_config = ConfigDict(extra="allow")

    id: StrictStr
    scores: dict[str, Any] | None = None
    score_errors: dict[str, StrictStr] | None = None
    outputs: dict[str, Any] | None = None
    error: StrictStr | None = None
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    lm_calls: Count | None = None
    cached_calls: Count | None = None
    failed_calls: Count | None = None
    cost_usd: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)] | None = None
    domain: StrictStr | None = None
    variant: StrictStr | None = None


def check_config(config: Any, file: Any) -> dict[str, Any]:
    """``config`` (parsed ``config.json``) if it fits :class:`RunConfig`; else one :class:`InputError` line."""
    validate(RunConfig, config, file=file)
    return config


def check_summary(summary: Any, file: Any) -> dict[str, Any]:
    """``summary`` (parsed ``summary.json``) if it fits :class:`RunSummary`; else one :class:`InputError` line
    that says the file can be deleted to have it recomputed."""
    try:
        RunSummary.model_validate(summary)
    except ValidationError as exc:
        field, message = explain(exc)
        raise InputError(f"not a run summary ({message}); delete it to have it recomputed from results.jsonl",
                         file=str(file), field=field) from None
    return summary


def check_row(row: Any, file: Any, record: Any) -> dict[str, Any]:
    """``row`` (a parsed line of ``results.jsonl``) if it fits :class:`ResultRow`; else one :class:`InputError`."""
    validate(ResultRow, row, file=file, record=record)
    return row
