"""What a loader may be given, turned into records in one place.

Every loader of benchmark data (OffQuery, hidden-profile and travel tasks, DHD problems) accepts a *source*:

- a path to a JSON list or JSON Lines file (read by the loader's own streaming reader, as before),
- a path to a Parquet file (``.parquet``/``.pq``, read through ``datasets``),
- a ``datasets.Dataset``, a pandas ``DataFrame``, or a list (or tuple) of dicts.

:func:`as_source` returns a :class:`~pathlib.Path` for a JSON/JSONL path and a :class:`Records` for everything
else; :func:`groundstate.eval.io.iter_rows` and the loaders read either. A :class:`Records` names itself in error
messages the way a file would (``<pandas DataFrame>: record at position 3: field 'answer': ...``).

:func:`write_records` writes JSON Lines, or Parquet for a ``.parquet`` path. Parquet columns holding objects
(``provenance``, ``structure``) are stored as JSON text and listed in the file's schema metadata, so arbitrary
nested values round-trip exactly and other tools still see plain columns.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from groundstate.errors import InputError
from groundstate.files import decode, loads_json
from groundstate.schema import explain

PARQUET_SUFFIXES = (".parquet", ".pq")

#: Schema-metadata key of a Parquet file written by :func:`write_records`.
METADATA_KEY = b"groundstate"


class Records:
    """Records already in memory (or read from a Parquet file), standing in for a file in loaders.

    Attributes:
        rows: the records, as plain Python values.
        label: how error messages name the source (the Parquet path, or ``<pandas DataFrame>``, ...).
        name: a file-like name (``provenance["file"]``); ``stem``: the default prefix of generated ids.
    """

    def __init__(self, rows: list[Any], label: str, name: str | None = None, stem: str | None = None) -> None:
        self.rows, self.label = rows, label
        self.name = name or label
        self.stem = stem or Path(self.name).stem
        self.suffix = Path(self.name).suffix

    def __str__(self) -> str:
        return self.label

    def __repr__(self) -> str:
        return f"Records({self.label}, {len(self.rows)} rows)"

    def __len__(self) -> int:
        return len(self.rows)

    def is_file(self) -> bool:
        return True

    def iter_rows(self) -> Iterator[tuple[str, Any, InputError | None]]:
        """``(where, row, error)`` per record, ``where`` being ``at position N`` (as for a JSON list)."""
        for position, row in enumerate(self.rows):
            where = f"at position {position}"
            error = None if isinstance(row, dict) else InputError(
                f"not a record (a {type(row).__name__}, not a dict)", file=self.label, record=where)
            yield where, row, error


def resolve_data(value: str) -> str:
    """The file a data setting names: ``value`` itself, or the shipped example it names (``example:NAME``, or a
    bare ``NAME`` that is not a file; :func:`groundstate.examples.resolve`).

    Raises:
        ConfigError: ``example:NAME`` with no such example.
    """
    from groundstate.errors import ConfigError
    from groundstate.examples import resolve

    try:
        return resolve(value)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None


def _module_type(value: Any, module: str, name: str) -> bool:
    """Whether ``value`` is ``module.name``, without importing ``module`` (if it is not imported, it is not)."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def as_source(source: Any, what: str = "records") -> Path | Records:
    """A JSON/JSONL path as a :class:`~pathlib.Path`; a Parquet path, ``Dataset``, ``DataFrame`` or list as
    :class:`Records`.

    Raises:
        InputError: a missing or unreadable Parquet file, a ``DatasetDict`` (name the split), or a value that is
            none of the accepted kinds.
    """
    if isinstance(source, Path | Records):
        if isinstance(source, Path) and source.suffix.lower() in PARQUET_SUFFIXES:
            return read_parquet(source)
        return source
    if isinstance(source, str | os.PathLike):
        return as_source(Path(source), what)
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


def first_record(source: Path | Records) -> Any:
    """The first record of in-memory ``source`` (``None`` if empty); for a path, ``None`` (the caller sniffs it)."""
    return source.rows[0] if isinstance(source, Records) and source.rows else None


# -- Parquet ------------------------------------------------------------------------------------------------
def read_parquet(path: Path) -> Records:
    """The rows of a Parquet file (through ``datasets``), with JSON-text object columns decoded.

    Raises:
        InputError: a missing or unreadable file, or one that is not a regular file within the size limit (checked
            before pyarrow opens it: a FIFO, a device or an oversized file is one line, never a hang).
    """
    from groundstate.files import check_regular

    check_regular(path)
    import datasets
    import pyarrow.parquet as pq

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
    return Records(rows, str(path), name=path.name, stem=path.stem)


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
    from groundstate.eval.results import write_lines

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
    import datasets
    import pyarrow.parquet as pq

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
