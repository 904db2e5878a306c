"""What a loader may be given, normalised once into a :class:`Source`.

Every loader of benchmark data (OffQuery, hidden-profile and travel tasks, DHD problems) accepts a *source*:

- a path to a JSON list or JSON Lines file,
- a path to a Parquet file (``.parquet``/``.pq``, read through ``datasets``),
- a ``datasets.Dataset``, a pandas ``DataFrame``, or a list (or tuple) of dicts,
- a :class:`Source` already normalised.

:func:`as_source` normalises it once, at the edge (the loader the caller called): a :class:`DataFile` for a
JSON/JSONL path, :class:`Records` for everything else (a Parquet file's rows are read then). Every layer below
takes the same object (``as_source`` returns a :class:`Source` unchanged), and what the layers ask of it is worked
out once and kept: the first character of a file (a JSON list or JSON Lines), its first record (which tells the
formats apart), and its rows (:meth:`Source.iter_rows`), so telling a format apart and loading it read a file
once. A source names itself in error messages the way a file would (``<pandas DataFrame>: record at position 3:
field 'answer': ...``); a :class:`DataFile` is also an ``os.PathLike`` of its file.

:func:`write_records` writes JSON Lines, or Parquet for a ``.parquet`` path. Parquet columns holding objects
(``provenance``, ``structure``) are stored as JSON text and listed in the file's schema metadata, so arbitrary
nested values round-trip exactly and other tools still see plain columns.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import os
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from groundstate.errors import ConfigError, InputError
from groundstate.eval.results import write_lines
from groundstate.files import check_regular, decode, first_char, iter_chunks, json_lines, loads_json, read_json, sha256
from groundstate.schema import explain, json_kind

PARQUET_SUFFIXES = (".parquet", ".pq")

#: Schema-metadata key of a Parquet file written by :func:`write_records`.
METADATA_KEY = b"groundstate"


class Source(ABC):
    """Records from one place, normalised once (see the module docstring).

    Attributes:
        path: the file the records come from (``None`` for records given in memory).
        label: how error messages name the source (the path, or ``<pandas DataFrame>``, ...).
        name: a file-like name (``provenance["file"]``); ``stem``: the default prefix of generated ids; ``suffix``.
    """

    path: Path | None
    label: str
    name: str
    stem: str
    suffix: str

    def __str__(self) -> str:
        return self.label

    def is_file(self) -> bool:
        """Whether there is something to read (records in memory always are)."""
        return True

    def first_char(self) -> str:
        """The first character of a file that is not whitespace ('' for records in memory, or an unreadable file)."""
        return ""

    @abstractmethod
    def first(self) -> Any:
        """The first record (``None`` if there is none, or if it cannot be read: the loader then says why)."""

    @abstractmethod
    def iter_rows(self) -> Iterator[tuple[str, Any, InputError | None]]:
        """``(where, row, error)`` per record, ``where`` being ``at line N`` (JSON Lines) or ``at position N``."""


class Records(Source):
    """Records already in memory (or read from a Parquet file), standing in for a file in loaders.

    Attributes:
        rows: the records, as plain Python values.
        path: the Parquet file they were read from (``None`` for records given in memory).
    """

    def __init__(self, rows: list[Any], label: str, name: str | None = None, stem: str | None = None) -> None:
        self.rows, self.label, self.path = rows, label, None
        self.name = name or label
        self.stem = stem or Path(self.name).stem
        self.suffix = Path(self.name).suffix

    def __repr__(self) -> str:
        return f"Records({self.label}, {len(self.rows)} rows)"

    def __len__(self) -> int:
        return len(self.rows)

    def first(self) -> Any:
        return self.rows[0] if self.rows else None

    def iter_rows(self) -> Iterator[tuple[str, Any, InputError | None]]:
        for position, row in enumerate(self.rows):
            where = f"at position {position}"
            error = None if isinstance(row, dict) else InputError(
                f"not a record (a {type(row).__name__}, not a dict)", file=self.label, record=where)
            yield where, row, error


class DataFile(Source):
    """A JSON list or JSON Lines file, read at most once: its first character, its first record and its rows are
    kept once asked for (:meth:`iter_rows` reads the whole file, or raises the file's one-line error each time it
    is asked; :meth:`first` of a JSON list parses only as much as it needs, unless the rows are read already)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.label, self.name, self.stem, self.suffix = str(self.path), self.path.name, self.path.stem, self.path.suffix
        self._char: str | None = None
        self._first: Any = _UNREAD
        self._rows: list[tuple[str, Any, InputError | None, bool]] | None = None

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"DataFile({self.label})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataFile) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def is_file(self) -> bool:
        return self.path.is_file()

    def first_char(self) -> str:
        if self._char is None:
            self._char = first_char(self.path)
        return self._char

    def first(self) -> Any:
        """The first value the file holds: the first item of a JSON list, the first line of JSON Lines that parses
        (whatever its type); ``None`` for none or an unreadable file."""
        if self._first is _UNREAD:
            if self._rows is not None or self.first_char() != "[":
                try:
                    self.iter_rows()
                    rows = self._rows or []
                except InputError:
                    rows = []
                self._first = next((row for _, row, error, parsed in rows if parsed), None)
            else:
                self._first = first_list_item(self.path)
        return self._first

    def iter_rows(self) -> Iterator[tuple[str, Any, InputError | None]]:
        if self._rows is None:
            self._rows = list(self._read())
        return ((where, row, error) for where, row, error, _ in self._rows)

    def _read(self) -> Iterator[tuple[str, Any, InputError | None, bool]]:
        """``(where, row, error, parsed)``; ``parsed``: the record is valid JSON (an object or not)."""
        path = self.path
        if self.first_char() == "[":
            data = read_json(path)
            if not isinstance(data, list):  # pragma: no cover - the first character said '['
                raise InputError("expected a JSON list of records", file=str(path))
            for position, row in enumerate(data):
                where = f"at position {position}"
                error = None if isinstance(row, dict) else InputError(
                    f"not a JSON object (a JSON {json_kind(row)})", file=str(path), record=where)
                yield where, row, error, True
            return
        for number, row, error in json_lines(path):
            where = f"at line {number}"
            parsed = error is None
            if error is None and not isinstance(row, dict):
                error = InputError(f"not a JSON object (a JSON {json_kind(row)})", file=str(path), record=where)
            yield where, row, error, parsed


_UNREAD = object()


def first_list_item(path: str | os.PathLike) -> Any:
    """The first item of a top-level JSON list, parsing no more of the file than needed; None if none.

    Used only to recognise a file's format; any problem reading it gives ``None`` (the loader then reports it).
    """
    decoder = json.JSONDecoder()
    text_decoder = codecs.getincrementaldecoder("utf-8")()
    buffer, tried = "", 0
    try:
        with closing(iter_chunks(path, chunk=1 << 16)) as chunks:
            for data in chunks:
                buffer += text_decoder.decode(data)
                text = buffer.lstrip("\ufeff \t\r\n")
                if text and text[0] != "[":
                    return None
                rest = text[1:].lstrip()
                if rest.startswith("]") or len(buffer) > (64 << 20):
                    return None
                if rest and len(buffer) >= 2 * tried:  # parse again only once the buffer has doubled
                    tried = len(buffer)
                    try:
                        return decoder.raw_decode(rest)[0]
                    except (json.JSONDecodeError, RecursionError, ValueError):
                        pass
        rest = buffer.lstrip("\ufeff \t\r\n")[1:].lstrip()
        return decoder.raw_decode(rest)[0] if rest else None
    except (InputError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
        return None


def describe(source: Source, records: Sequence[Any]) -> dict[str, Any]:
    """What a run configuration records about its data (part of the run's fingerprint): the file's name and sha256
    for a file, the label and the sha256 of the records' canonical JSON for records given in memory."""
    if source.path is not None:
        return {"file": source.path.name, "sha256": sha256(source.path)}
    digest = hashlib.sha256()
    for record in records:
        data = record.model_dump(mode="json") if hasattr(record, "model_dump") else record
        digest.update(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    return {"records": source.label, "sha256": digest.hexdigest()}


def resolve_data(value: str) -> str:
    """The file a data setting names: ``value`` itself, or the shipped example it names (``example:NAME``, or a
    bare ``NAME`` that is not a file; :func:`groundstate.examples.resolve`).

    Raises:
        ConfigError: ``example:NAME`` with no such example.
    """
    from groundstate.examples import resolve  # noqa: PLC0415 (--help stays light)

    try:
        return resolve(value)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None


def _module_type(value: Any, module: str, name: str) -> bool:
    """Whether ``value`` is ``module.name``, without importing ``module`` (if it is not imported, it is not)."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def as_source(source: Any, what: str = "records") -> Source:
    """``source`` normalised once: a :class:`Source` is returned unchanged; a JSON/JSONL path becomes a
    :class:`DataFile`; a Parquet path (read here), ``Dataset``, ``DataFrame`` or list becomes :class:`Records`.

    Raises:
        InputError: a missing or unreadable Parquet file, a ``DatasetDict`` (name the split), or a value that is
            none of the accepted kinds.
    """
    if isinstance(source, Source):
        return source
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        return read_parquet(path) if path.suffix.lower() in PARQUET_SUFFIXES else DataFile(path)
    if _module_type(source, "datasets", "DatasetDict") or _module_type(source, "datasets", "IterableDatasetDict"):
        splits = ", ".join(repr(k) for k in source)
        raise InputError(f"a datasets.DatasetDict holds several splits ({splits}); pass one, e.g. data['train']")
    if _module_type(source, "datasets", "Dataset"):
        return Records(source.to_list(), "<datasets.Dataset>", stem="dataset")
    if _module_type(source, "pandas", "DataFrame"):
        return Records([{str(k): _plain(v) for k, v in row.items()} for row in source.to_dict(orient="records")],
                       "<pandas DataFrame>", stem="dataframe")
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return Records(list(source), "<list of records>", stem="records")
    raise InputError(f"cannot read {what} from a {type(source).__name__}: pass a path (JSON, JSON Lines or Parquet), "
                     "a datasets.Dataset, a pandas DataFrame or a list of dicts")


def _plain(value: Any) -> Any:
    """numpy arrays and scalars as Python values, NaN/NA/NaT as None (what a DataFrame row holds)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):  # numpy array or scalar
        return _plain(value.tolist())
    if isinstance(value, float) and math.isnan(value):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value


def first_record(source: Source) -> Any:
    """The first record of ``source`` (``None`` if empty or unreadable)."""
    return source.first()


# -- Parquet ------------------------------------------------------------------------------------------------
def read_parquet(path: Path) -> Records:
    """The rows of a Parquet file (through ``datasets``), with JSON-text object columns decoded.

    Raises:
        InputError: a missing or unreadable file, or one that is not a regular file within the size limit (checked
            before pyarrow opens it: a FIFO, a device or an oversized file is one line, never a hang).
    """
    check_regular(path)
    import datasets  # noqa: PLC0415 (heavy: datasets)
    import pyarrow.parquet as pq  # noqa: PLC0415 (heavy: pyarrow)

    bars = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        metadata = pq.read_schema(path).metadata or {}
        rows: list[dict] = []
        if pq.read_metadata(path).num_rows:  # datasets cannot read a file of no rows (a batch size of 0)
            with tempfile.TemporaryDirectory(prefix="groundstate-parquet-") as cache:
                rows = datasets.Dataset.from_parquet(str(path), cache_dir=cache, keep_in_memory=True).to_list()
    except Exception as exc:  # pyarrow and datasets raise many kinds; the user needs one line
        raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", file=str(path)) from None
    finally:
        if bars:
            datasets.enable_progress_bars()
    encoded = _json_columns(metadata.get(METADATA_KEY), path)
    for position, row in enumerate(rows):
        for column in encoded:
            if isinstance(row.get(column), str):
                try:
                    row[column] = loads_json(row[column])
                except InputError as exc:
                    raise InputError(f"is not the JSON text this file's metadata says it holds ({exc})",
                                     file=str(path), record=f"at position {position}", field=column) from None
    records = Records(rows, str(path), name=path.name, stem=path.stem)
    records.path = path
    return records


class ParquetMetadata(BaseModel):
    """The schema metadata :func:`write_records` stores under :data:`METADATA_KEY`: the columns holding JSON text
    (other keys are kept for later versions)."""

    model_config = ConfigDict(extra="allow")

    json_columns: list[StrictStr] = Field(default_factory=list)


def _json_columns(raw: bytes | None, path: Path) -> list[str]:
    """The JSON-text columns the file's groundstate metadata names (none without metadata), read with
    groundstate's JSON limits and checked against :class:`ParquetMetadata`.

    Raises:
        InputError: metadata that is not UTF-8 JSON text of that shape (one line naming the file and the field).
    """
    if raw is None:
        return []
    field = f"metadata.{METADATA_KEY.decode()}"  # the Parquet schema's key-value metadata
    try:
        value = loads_json(decode(raw))
    except InputError as exc:
        raise InputError(f"is not groundstate's metadata ({exc})", file=str(path), field=field) from None
    try:
        return ParquetMetadata.model_validate(value).json_columns
    except ValidationError as exc:
        where, message = explain(exc)
        raise InputError(f"is not groundstate's metadata: {message}", file=str(path),
                         field=f"{field}.{where}" if where else field) from None


def write_jsonl(path: str | Path, rows: list[Any]) -> None:
    """Write records (dicts or pydantic models) as JSON Lines, atomically."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make its directory ({exc.strerror or exc})", file=str(path)) from None
    # atomic, and never written through a planted link (see write_lines)
    write_lines(path, (row.model_dump(mode="json") if hasattr(row, "model_dump") else row for row in rows))


def write_records(path: str | Path, rows: Sequence[Any]) -> None:
    """Write records (dicts or pydantic models) atomically: Parquet for a ``.parquet``/``.pq`` path, else JSON Lines."""
    path = Path(path)
    if path.suffix.lower() not in PARQUET_SUFFIXES:
        write_jsonl(path, list(rows))
        return
    import datasets  # noqa: PLC0415 (heavy: datasets)
    import pyarrow.parquet as pq  # noqa: PLC0415 (heavy: pyarrow)

    data = [row.model_dump(mode="json") if hasattr(row, "model_dump") else dict(row) for row in rows]
    columns = list(dict.fromkeys(k for row in data for k in row))
    encoded = [c for c in columns if any(isinstance(row.get(c), dict) for row in data)]
    table_rows = [{c: (json.dumps(row.get(c), ensure_ascii=False) if c in encoded and row.get(c) is not None
                       else row.get(c)) for c in columns} for row in data]
    table = datasets.Dataset.from_list(table_rows).data.table
    metadata = {**(table.schema.metadata or {}), METADATA_KEY: json.dumps({"json_columns": encoded}).encode()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.unlink(missing_ok=True)  # a stale (or planted) temporary file: never written through
    pq.write_table(table.replace_schema_metadata(metadata), tmp)
    tmp.replace(path)
