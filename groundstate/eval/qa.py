"""``groundstate run qa``: a one-step question answerer over a file of ``{id, question, answer?}`` (a smoke test of
the runner, and the smallest example of a task)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from groundstate.errors import ConfigError, InputError
from groundstate.eval.io import read_records
from groundstate.eval.settings import TaskSettings
from groundstate.eval.sources import as_source, describe, resolve_data
from groundstate.eval.task import ProgramTask


class QASettings(TaskSettings):
    """The questions ``qa`` answers."""

    data: str | None = Field(None, description="JSON Lines, a JSON list or Parquet of {id, question, answer}, or a "
                                               "shipped example ('example:qa')", json_schema_extra={"metavar": "FILE"})
    allow_empty: bool = Field(False, description="accept an input file with no records (by default that is an "
                                                 "error, exit 2)")


def load_questions(settings: QASettings, source: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of ``settings.data`` (each with a string ``question`` and a unique ``id``) and the file's name and
    hash."""
    if source is None and not settings.data:
        raise ConfigError("qa needs --data FILE (JSON Lines, a JSON list or Parquet of {id, question, answer})")
    data = as_source(source if source is not None else resolve_data(settings.data), "questions")
    rows = read_records(data, allow_empty=settings.allow_empty)
    seen = set()
    for i, row in enumerate(rows):
        for key in ("id", "question"):
            if key not in row or row[key] in (None, ""):
                raise InputError("missing field", file=str(data), record=row.get("id", i), field=key)
        if not isinstance(row["question"], str):
            raise InputError("must be a string", file=str(data), record=row["id"], field="question")
        if str(row["id"]) in seen:
            raise InputError("duplicate id", file=str(data), record=row["id"], field="id")
        seen.add(str(row["id"]))
    return rows, describe(data, rows)


def qa_score(record: dict[str, Any], prediction: Any) -> dict[str, float | None]:
    """``exact_match`` against the record's ``answer`` (none without one; ``None``, not measured, for a failed
    record). Reads only the prediction's ``answer``, which the run stores."""
    if record.get("answer") is None:
        return {}
    if prediction is None:
        return {"exact_match": None}
    gold = str(record["answer"]).strip().lower().rstrip(".")
    got = str(getattr(prediction, "answer", "")).strip().lower().rstrip(".")
    return {"exact_match": float(gold == got)}


qa_score.from_outputs = True  # type: ignore[attr-defined]


def _build(settings: QASettings):
    from groundstate.programs.qa import QuestionAnswering  # noqa: PLC0415 (heavy: dspy)

    return QuestionAnswering()


QA = ProgramTask(
    name="qa",
    help="answer each question of a JSONL file {id, question, answer} (a smoke test of the runner)",
    settings=QASettings,
    build=_build,
    load=load_questions,
    scorer=lambda settings, judge: qa_score,
    inputs=lambda settings: lambda record: {"question": record["question"]},
    labels=lambda record: {"gold": record.get("answer")},
)
