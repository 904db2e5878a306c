"""Loading problems for Diverse Hypothesis Deliberation: SciBench, JEEBench and generic JSON Lines.

Every loader returns :class:`~groundstate.records.Problem` records. The formats:

**SciBench** (a JSON list; the published ``atkins.json``, ``calculus.json``, ``chemmc.json``, ...):

==================  ==================================================================================
SciBench field      problem field
==================  ==================================================================================
``problem_text``    ``question`` (required, non-empty)
``answer_number``   ``answer`` (required; must parse as a number, so ``kind`` is ``number``)
``unit``            ``unit`` (whitespace stripped, kept as written, e.g. ``$\\mathrm{atm}$``; blank -> None)
``source``          ``source = "scibench/<source>"`` (default: the file name without extension)
``problemid``       ``id = "<source>-<problemid>"`` (required; whitespace stripped)
``answer_latex``,   ``metadata``
``comment``
==================  ==================================================================================

The relative tolerance is SciBench's 5% unless ``tolerance`` is given. A unit may carry a power of ten
(``$10^{-19} \\mathrm{~J}$``): the answer is then in those units; the evaluator accepts the number either in those
units or with the power of ten written out.

**JEEBench** (a JSON list or JSON Lines): ``question``, ``gold``, ``type`` (``MCQ``, ``MCQ(multiple)``,
``Integer``, ``Numeric``), ``subject``, ``index``, ``description``. ``MCQ`` gives ``kind="option"`` (one letter
A-D), ``MCQ(multiple)`` gives ``kind="options"`` (letters A-D, stored sorted, e.g. ``ACD``), ``Integer`` and
``Numeric`` give ``kind="number"`` with JEEBench's own rule: an absolute tolerance of 0.01
(``metadata["abs_tolerance"]``) and no relative tolerance. ``id = "jeebench-<index>"`` (the position when there is
no index), ``source = "jeebench/<subject>"``.

**Generic JSON Lines** (or a JSON list): ``input`` (or ``question``) and ``answer`` are required; optional
``id`` (default ``<file stem>-<line or position>``), ``kind``, ``unit``, ``tolerance``, ``source`` and
``metadata``; other keys go into ``metadata``. Without ``kind``, an answer that parses as a plain number is a
``number``, a single capital letter is an ``option``, and anything else is ``text``. A file written by
:func:`save_problems` (``Problem.model_dump`` per line) is read by the same loader.

Every problem with the input is an :class:`~groundstate.errors.InputError` whose one line names the file, the
record and the field. With ``skip_invalid=True`` a bad record is skipped instead and a one-line message is
appended to ``problems``. Ids must be unique within a file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundstate.errors import ConfigError, InputError
from groundstate.eval.io import require_records
from groundstate.eval.sources import Records, as_source, write_records
from groundstate.programs.dhd.evaluator import parse_plain_number
from groundstate.records import Problem

logger = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("scibench", "jeebench", "jsonl")
JEEBENCH_TYPES: dict[str, str] = {"MCQ": "option", "MCQ(multiple)": "options", "Integer": "number",
                                  "Numeric": "number"}
JEEBENCH_ABS_TOLERANCE = 0.01
SCIBENCH_TOLERANCE = 0.05
KINDS: tuple[str, ...] = ("number", "option", "options", "expression", "text")
_GENERIC_KNOWN = {"id", "input", "question", "answer", "kind", "unit", "tolerance", "source", "metadata"}


def load_problems(path: Any, format: str = "auto", *, skip_invalid: bool = False,
                  problems: list[str] | None = None, tolerance: float | None = None,
                  allow_empty: bool = False) -> list[Problem]:
    """Load problems from ``path`` in ``format`` (``scibench``, ``jeebench``, ``jsonl`` or ``auto``).

    ``auto`` looks at the first record: ``problem_text`` means SciBench, ``gold`` and ``type`` mean JEEBench,
    anything else is generic JSON Lines.

    Args:
        path: the file (JSON, JSON Lines or Parquet), or the records in memory: a ``datasets.Dataset``, a pandas
            ``DataFrame`` or a list of dicts (see :func:`~groundstate.eval.sources.as_source`).
        format: the format, or ``auto``.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        tolerance: the relative tolerance for numeric answers (default: the format's own rule).
        allow_empty: accept a file with no (valid) problems; otherwise that is an error.

    Raises:
        InputError: bad input, naming the file, the record and the field; no problems at all.
        ConfigError: an unknown format.
    """
    path = as_source(path, "problems")
    if format == "auto":
        format = detect_format(path)
    loaders: dict[str, Callable[..., list[Problem]]] = {
        "scibench": load_scibench, "jeebench": load_jeebench, "jsonl": load_jsonl_problems}
    if format not in loaders:
        raise ConfigError(f"unknown problem format '{format}' (choose from {', '.join(FORMATS)} or auto)")
    reported: list[str] = []
    loaded = loaders[format](path, skip_invalid=skip_invalid, problems=reported, tolerance=tolerance)
    if problems is not None:
        problems.extend(reported)
    return require_records(loaded, path, allow_empty, "problems", len(reported))


def detect_format(path: Any) -> str:
    """``scibench``, ``jeebench`` or ``jsonl``, from the first record of ``path``."""
    path = as_source(path, "problems")
    if not path.is_file():
        raise InputError("file not found", file=str(path))
    first = next((row for _, row, error in path.iter_rows() if error is None), None)  # kept: loading reuses them
    if isinstance(first, dict):
        if "problem_text" in first:
            return "scibench"
        if "gold" in first and "type" in first:
            return "jeebench"
    return "jsonl"


def save_problems(path: str | Path, items: Iterable[Problem]) -> None:
    """Write problems as JSON Lines, or Parquet for a ``.parquet`` path (atomically); :func:`load_problems` reads
    them back."""
    write_records(path, list(items))


# -- the three formats ------------------------------------------------------------------------------------------
def load_scibench(path: Any, *, skip_invalid: bool = False, problems: list[str] | None = None,
                  tolerance: float | None = None) -> list[Problem]:
    """Load a SciBench file (see the module notes)."""
    path = as_source(path, "problems")

    def convert(row: dict, label: str, fail: Callable[[str, str | None], InputError]) -> Problem:
        question = _text(row, "problem_text", fail)
        answer = _number_text(row, "answer_number", fail)
        pid = _id_text(row, "problemid", fail)
        source = _optional_text(row, "source", fail) or path.stem
        unit = _optional_text(row, "unit", fail)
        metadata = {k: v.strip() if isinstance(v, str) else v for k, v in row.items()
                    if k in ("answer_latex", "comment") and v is not None and str(v).strip()}
        return _problem(fail, id=f"{source}-{pid}", question=question, answer=answer, kind="number", unit=unit,
                        tolerance=SCIBENCH_TOLERANCE if tolerance is None else tolerance,
                        source=f"scibench/{source}", metadata={**metadata, "problemid": pid})

    return _load(path, convert, skip_invalid, problems, id_key="problemid")


def load_jeebench(path: Any, *, skip_invalid: bool = False, problems: list[str] | None = None,
                  tolerance: float | None = None) -> list[Problem]:
    """Load a JEEBench file (see the module notes)."""
    path = as_source(path, "problems")

    def convert(row: dict, label: str, fail: Callable[[str, str | None], InputError]) -> Problem:
        question = _text(row, "question", fail)
        qtype = row.get("type")
        if not isinstance(qtype, str) or qtype not in JEEBENCH_TYPES:
            raise fail(f"must be one of {', '.join(JEEBENCH_TYPES)} (got {qtype!r})", "type")
        kind = JEEBENCH_TYPES[qtype]
        gold = row.get("gold")
        if gold is None or (isinstance(gold, str) and not gold.strip()):
            raise fail("is missing or empty", "gold")
        metadata: dict[str, Any] = {"type": qtype}
        if kind == "number":
            answer = _number_text(row, "gold", fail)
            metadata["abs_tolerance"] = JEEBENCH_ABS_TOLERANCE
            rel = 0.0 if tolerance is None else tolerance
        else:
            letters = re.sub(r"[\s,;]", "", str(gold)).upper()
            if not letters or any(c not in "ABCD" for c in letters) or len(set(letters)) != len(letters):
                raise fail(f"must be option letters A-D (got {gold!r})", "gold")
            if kind == "option" and len(letters) != 1:
                raise fail(f"an MCQ answer is one letter (got {gold!r})", "gold")
            answer, rel = "".join(sorted(letters)), SCIBENCH_TOLERANCE
        index = row.get("index")
        ident = _id_text(row, "index", fail) if index is not None else label.split()[-1]
        subject = _optional_text(row, "subject", fail)
        for key in ("subject", "description", "index"):
            if row.get(key) is not None:
                metadata[key] = row[key]
        return _problem(fail, id=f"jeebench-{ident}", question=question, answer=answer, kind=kind, unit=None,
                        tolerance=rel, source=f"jeebench/{subject}" if subject else "jeebench", metadata=metadata)

    return _load(path, convert, skip_invalid, problems, id_key="index")


def load_jsonl_problems(path: Any, *, skip_invalid: bool = False, problems: list[str] | None = None,
                        tolerance: float | None = None) -> list[Problem]:
    """Load generic JSON Lines problems (``input``/``answer``; see the module notes)."""
    path = as_source(path, "problems")

    def convert(row: dict, label: str, fail: Callable[[str, str | None], InputError]) -> Problem:
        key = "input" if "input" in row or "question" not in row else "question"
        question = _text(row, key, fail)
        if "answer" not in row or row["answer"] is None:
            raise fail("is missing or null", "answer")
        raw = row["answer"]
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise fail(f"must be text or a number (got {type(raw).__name__})", "answer")
        answer = str(raw).strip()
        if not answer:
            raise fail("is empty", "answer")
        kind = row.get("kind")
        if kind is None:
            kind = infer_kind(answer)
        elif kind not in KINDS:
            raise fail(f"must be one of {', '.join(KINDS)} (got {kind!r})", "kind")
        if kind == "number" and parse_plain_number(answer) is None:
            raise fail(f"kind 'number' needs a numeric answer (got {answer!r})", "answer")
        ident = _id_text(row, "id", fail) if row.get("id") is not None else f"{path.stem}-{label.split()[-1]}"
        rel = row.get("tolerance", SCIBENCH_TOLERANCE if tolerance is None else tolerance)
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise fail("must be an object", "metadata")
        extra = {k: v for k, v in row.items() if k not in _GENERIC_KNOWN}
        return _problem(fail, id=ident, question=question, answer=answer, kind=kind,
                        unit=_optional_text(row, "unit", fail), tolerance=rel,
                        source=_optional_text(row, "source", fail) or path.stem, metadata={**metadata, **extra})

    return _load(path, convert, skip_invalid, problems, id_key="id")


# -- helpers -------------------------------------------------------------------------------------------------
def infer_kind(answer: str) -> str:
    """``number`` for a plain number, ``option`` for one capital letter, else ``text``."""
    if parse_plain_number(answer) is not None:
        return "number"
    if re.fullmatch(r"[A-Z]", answer.strip()):
        return "option"
    return "text"


def _load(path: Path | Records, convert, skip_invalid: bool, problems: list[str] | None, id_key: str) -> list[Problem]:
    reported = problems if problems is not None else []
    out: list[Problem] = []
    seen: dict[str, str] = {}
    for where, row, error in path.iter_rows():
        try:
            if error is not None:
                raise error
            label = where.replace("at ", "")
            given = row.get(id_key)
            record = f"{label} ({id_key} {str(given).strip()!r})" if isinstance(given, str | int) else label

            def fail(message: str, field: str | None, record: str = record) -> InputError:
                return InputError(message, file=str(path), record=record, field=field)

            problem = convert(row, label, fail)
            if problem.id in seen:
                raise fail(f"duplicate id '{problem.id}' (first {seen[problem.id]})", id_key)
            seen[problem.id] = label
            out.append(problem)
        except InputError as err:
            if not skip_invalid:
                raise
            reported.append(f"{err} (record skipped)")
    if skip_invalid and reported:  # each skipped record is in ``problems`` (the CLI prints them): no second warning
        logger.info("%s: skipped %d record(s)", path, len(reported))
    return out


def _problem(fail, **fields: Any) -> Problem:
    try:
        return Problem(**fields)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first.get("loc") or ()) or None
        raise fail(re.sub(r"^Value error, ", "", str(first.get("msg", "invalid"))), loc) from None


def _text(row: dict, key: str, fail) -> str:
    value = row.get(key)
    if value is None:
        raise fail("is missing or null", key)
    if not isinstance(value, str):
        raise fail(f"must be text (got {type(value).__name__})", key)
    if not value.strip():
        raise fail("is empty", key)
    return value.strip()


def _optional_text(row: dict, key: str, fail) -> str | None:
    value = row.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise fail(f"must be text (got {type(value).__name__})", key)
    return value.strip() or None


def _id_text(row: dict, key: str, fail) -> str:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise fail("is missing or empty (a text or integer id is needed)", key)
    return str(value).strip()


def _number_text(row: dict, key: str, fail) -> str:
    value = row.get(key)
    if value is None:
        raise fail("is missing or null", key)
    if parse_plain_number(value) is None:
        raise fail(f"is not a number ({value!r})", key)
    return str(value).strip()
