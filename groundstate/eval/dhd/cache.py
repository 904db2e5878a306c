"""The DHD message cache: messages are generated once per problem, stored, and reused by every replay.

A cache is a directory:

- ``cache.json``: the cache's identity (a random ``cache_id`` made when the directory is created; run
  configurations include it, so runs of a deleted and rebuilt cache never mix with the old ones) and ``k``.
- ``problems.jsonl``: the problems (``Problem.model_dump``), in the order they were added. Adding a problem
  whose id is already stored with different content is an :class:`~groundstate.errors.InputError`.
- ``messages.jsonl``: one line per problem, a :class:`PoolEntry`: the recruiter's roles, the ``K``
  :class:`~groundstate.records.HypothesisMessage` records and each proposal's correctness (1, 0, or ``None``
  when the proposal could not be evaluated). Lines are appended and flushed; a problem is stored once and never
  overwritten (the first stored entry wins), so every replay of a problem sees the same messages. A torn line
  (the process died mid-write) is ignored on reading; any other unreadable line is an error.

Every file is checked against its model as it is read (:class:`CacheMeta`, :class:`~groundstate.records.Problem`,
:class:`PoolEntry`): a field of the wrong type is one line naming the file, the line and the field.
- ``runs/``: the durable runs (generate, replay, mask) unless another ``out`` is given.

**Failed hypothesizers.** A message whose hypothesizer failed is stored with ``error`` set and is left out of
every pool: a problem's pool is its messages without errors, in index order, and the nested pool of size ``K``
is the first ``K`` of them. A problem with fewer than ``K`` usable messages takes no part in replays of size
``K``. Message ids everywhere are the stored ``index``, so labels always point at the cached message.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from groundstate.errors import InputError
from groundstate.eval.results import write_json
from groundstate.files import loads_json, read_bytes, read_json
from groundstate.paths import check_entry
from groundstate.records import HypothesisMessage, Problem
from groundstate.schema import explain, validate

logger = logging.getLogger(__name__)

META = "cache.json"
PROBLEMS = "problems.jsonl"
MESSAGES = "messages.jsonl"
RUNS = "runs"


class CacheMeta(BaseModel):
    """``cache.json``: the cache's identity and pool size (other fields, such as ``simulated``, are kept)."""

    model_config = ConfigDict(extra="allow")

    cache_id: StrictStr = Field(min_length=1)
    k: StrictInt | None = Field(default=None, ge=1)


class GenerationRecord(BaseModel):
    """What a :class:`PoolEntry`'s ``generator`` records about how its messages were made (other fields kept)."""

    model_config = ConfigDict(extra="allow")

    run_id: StrictStr | None = None
    lm: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None


class PoolEntry(BaseModel):
    """One problem's cached messages, with each proposal's correctness (aligned with ``messages``)."""

    model_config = ConfigDict(extra="forbid")

    problem_id: str
    roles: list[str]
    padded_roles: int = 0
    messages: list[HypothesisMessage]
    proposal_correct: list[int | None] = Field(default_factory=list)
    proposal_method: list[str | None] = Field(default_factory=list)
    generator: dict[str, Any] = Field(default_factory=dict)

    @field_validator("generator")
    @classmethod
    def _generation_record(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            GenerationRecord.model_validate(value)
        except ValidationError as exc:
            field, message = explain(exc)
            raise ValueError(f"'{field}' {message}") from None
        return value

    def pool(self, k: int | None = None) -> list[HypothesisMessage]:
        """The usable messages (no ``error``) in index order; the first ``k`` of them when ``k`` is given."""
        usable = sorted((m for m in self.messages if m.error is None), key=lambda m: m.index)
        return usable if k is None else usable[:k]

    def message(self, index: int) -> HypothesisMessage:
        return next(m for m in self.messages if m.index == index)

    def proposal(self, index: int) -> bool | None:
        """Whether message ``index``'s proposed answer is correct (``None``: unknown or not evaluable)."""
        position = next((i for i, m in enumerate(self.messages) if m.index == index), None)
        if position is None or position >= len(self.proposal_correct):
            return None
        value = self.proposal_correct[position]
        return None if value is None else bool(value)


class MessageCache:
    """A DHD cache directory (see the module notes)."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        self._lock = threading.Lock()

    # -- identity ----------------------------------------------------------------------------------------
    @property
    def runs_dir(self) -> Path:
        return self.dir / RUNS

    def exists(self) -> bool:
        """Whether the directory holds a ``cache.json`` (anything there that is not a regular file is one line)."""
        return check_entry(self.dir / META, "cache metadata")

    def meta(self) -> dict[str, Any]:
        """``cache.json`` (``{}`` when there is none), checked against :class:`CacheMeta`.

        Raises:
            InputError: an unreadable ``cache.json``, or one whose ``cache_id`` or ``k`` is missing or of the wrong
                type (one line naming the field).
        """
        path = self.dir / META
        if not check_entry(path, "cache metadata"):
            return {}
        meta = read_json(path)
        validate(CacheMeta, meta, file=path)
        return meta

    def ensure(self, k: int | None = None) -> dict[str, Any]:
        """Create the directory and its identity if needed; returns the metadata."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make the cache directory ({exc.strerror or exc})", file=str(self.dir)) from None
        meta = self.meta()
        if not meta:
            meta = {"cache_id": uuid.uuid4().hex[:12], "k": k}
            write_json(self.dir / META, meta)  # atomic, never through a planted link
        return meta

    @property
    def cache_id(self) -> str:
        meta = self.meta()
        if not meta:
            raise InputError("is not a DHD message cache (no cache.json); run `groundstate dhd generate` first",
                             file=str(self.dir))
        return meta["cache_id"]

    def require(self) -> None:
        """Raise a one-line error unless the directory is a cache with messages."""
        if not self.exists():
            raise InputError("is not a DHD message cache (no cache.json); run `groundstate dhd generate` first",
                             file=str(self.dir))

    # -- problems ----------------------------------------------------------------------------------------
    def problems(self) -> list[Problem]:
        path = self.dir / PROBLEMS
        out: list[Problem] = []
        for number, data in _read_lines(path):
            out.append(validate(Problem, data, file=path, record=f"at line {number}"))
        return out

    def problem_map(self) -> dict[str, Problem]:
        return {p.id: p for p in self.problems()}

    def add_problems(self, problems: Iterable[Problem], source: str | None = None) -> int:
        """Store problems not yet in the cache; returns how many were new.

        Raises:
            InputError: a problem id already stored with a different question, answer or kind.
        """
        self.ensure()
        stored = self.problem_map()
        new: list[Problem] = []
        for problem in problems:
            old = stored.get(problem.id)
            if old is None:
                stored[problem.id] = problem
                new.append(problem)
            elif (old.question, old.answer, old.kind, old.unit) != (problem.question, problem.answer, problem.kind,
                                                                  problem.unit):
                raise InputError(f"differs from the problem with the same id already in the cache {self.dir} "
                                 "(use another --cache or another id)", file=source, record=problem.id)
        _append(self.dir / PROBLEMS, [p.model_dump(mode="json") for p in new], self._lock)
        return len(new)

    # -- messages ----------------------------------------------------------------------------------------
    def entries(self) -> dict[str, PoolEntry]:
        """Every stored entry by problem id (the first line per problem wins)."""
        path = self.dir / MESSAGES
        out: dict[str, PoolEntry] = {}
        for number, data in _read_lines(path):
            entry = validate(PoolEntry, data, file=path, record=f"at line {number}")
            out.setdefault(entry.problem_id, entry)
        return out

    def put(self, entries: Iterable[PoolEntry]) -> int:
        """Store entries for problems that have none yet; returns how many were stored."""
        self.ensure()
        have = set(self.entries())
        fresh: list[PoolEntry] = []
        for entry in entries:
            if entry.problem_id not in have:
                have.add(entry.problem_id)
                fresh.append(entry)
        _append(self.dir / MESSAGES, [e.model_dump(mode="json") for e in fresh], self._lock)
        return len(fresh)


def _append(path: Path, rows: list[dict[str, Any]], lock: threading.Lock) -> None:
    """Append rows as JSON lines in one ``write`` on an ``O_APPEND`` descriptor, so processes sharing the cache
    (shards on one file system) never interleave within a line."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    with lock:
        check_entry(path, "cache files")
        try:  # never through a link, never blocking on a FIFO; the open descriptor is checked to be a regular file
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise InputError(f"cannot append ({exc.strerror or exc})", file=str(path)) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InputError("is not a regular file; groundstate keeps its cache files here as regular files",
                                 file=str(path))
            os.set_blocking(fd, True)
            if info.st_size > 0 and os.pread(fd, 1, info.st_size - 1) != b"\n":
                payload = "\n" + payload  # a torn last line stays on its own line and is skipped by readers
            data = payload.encode("utf-8")
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)


def _read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` per line of an append-only cache file.

    A torn line (the start of a JSON object whose write was cut short by a killed process; the next append starts
    on a new line, so it can be anywhere in the file) is skipped: its problem has no stored entry and is generated
    again by the next ``dhd generate``, so it is logged at INFO level only, never as a warning printed beside an
    error. Any other line that is not a JSON object (garbage, a list, a stray byte) is corruption.

    A missing file has no lines.

    Raises:
        InputError: an entry that is not a regular file (a FIFO, a device, a directory, a symlink), or a line
            that is neither a JSON object nor a torn one (one line naming the file and the line).
    """
    if not check_entry(path, "cache files"):
        return []
    rows = []
    for number, raw in enumerate(read_bytes(path).split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"at line {number}"
        try:
            data = loads_json(raw.decode("utf-8"), file=str(path), record=where)
        except (InputError, UnicodeDecodeError) as exc:
            if _torn(raw):
                logger.info("%s: line %d is torn (an interrupted write); ignored", path, number)
                continue
            if isinstance(exc, UnicodeDecodeError):
                raise InputError("not UTF-8 text", file=str(path), record=where) from None
            raise
        if not isinstance(data, dict):
            raise InputError(f"must be a JSON object (got a JSON {type(data).__name__})", file=str(path), record=where)
        rows.append((number, data))
    return rows


def _torn(raw: bytes) -> bool:
    """Whether ``raw`` (a line that does not parse) is a JSON object cut short: the parser runs out of text
    (a multi-byte character cut in two at the very end counts), rather than failing on something in it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(raw) - 3:
            return False
        text = raw[:exc.start].decode("utf-8", errors="replace")
    text = text.strip()
    if not text.startswith("{"):
        return False
    try:
        json.JSONDecoder().raw_decode(text)  # only to classify a line that groundstate's reader refused
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text) or exc.msg.startswith("Unterminated string")
    except (RecursionError, ValueError):
        return False
    return False
