"""The published OffQuery files (the authors' ``datasets/*.json`` and T2 truth files) as instances.

The published data is one JSON list per file (``mediQ_easy.json``, ``mediQ_hard.json``, ``CrisisFact.json``), and
T2 truth comes in a separate JSON list aligned with it by position. :func:`load_offquery` reads such a file (as
plain JSON, or through ``datasets`` for large files; Parquet files and records in memory too), recognises
groundstate's own instance files and other JSON Lines and says what they are, checks that a T2 truth file belongs
to the data file, and converts each item into one :class:`~groundstate.records.OffQueryInstance`
(:mod:`~groundstate.eval.benchmarks.offquery.published_items`: the field table, the per-item checks and the
assumptions on roles, domain and split; :func:`infer_roles`, :func:`split_from_name` and :data:`DOMAINS` are
re-exported here).

Every problem with the input is an :class:`~groundstate.errors.InputError` whose one line names the file, the
record and the field. With ``skip_invalid=True`` a bad record is skipped instead and a one-line message is
appended to ``problems``.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from groundstate.conditions import CONDITIONS
from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.instances import load_instances
from groundstate.eval.benchmarks.offquery.published_items import (
    DOMAINS,
    ItemContext,
    clean_dict,
    infer_roles,
    instance_from_item,
    record_label,
    split_from_name,
)
from groundstate.eval.benchmarks.offquery.t2_files import check_alignment, default_facts_path, read_facts, read_truth
from groundstate.eval.io import read_json, require_records
from groundstate.eval.sources import Records, Source, as_source
from groundstate.files import check_regular
from groundstate.records import OffQueryInstance

__all__ = ["DATASETS_THRESHOLD_BYTES", "DOMAINS", "OFFICIAL_MARKER", "infer_roles", "is_official_file", "load_offquery",
           "split_from_name"]


logger = logging.getLogger(__name__)


#: Files above this size are read through ``datasets.load_dataset("json", ...)`` when ``use_datasets`` is None.
DATASETS_THRESHOLD_BYTES = 50 * 1024 * 1024


#: The key whose presence in the first item marks a published OffQuery file.
OFFICIAL_MARKER = "shuffled_private_information"


# dict-valued published fields whose missing keys come back as None through an Arrow schema
_DICT_FIELDS = ("private_information", "options", "original_ditributed_information")


def load_offquery(path: Any, t2_truth: str | Path | None = None, condition: str | None = "unreliable", *,
                  domain: str | None = None, split: str | None = None, skip_invalid: bool = False,
                  problems: list[str] | None = None, use_datasets: bool | None = None,
                  allow_empty: bool = False, t2_facts: str | Path | None = None) -> list[OffQueryInstance]:
    """Load a published OffQuery file (a JSON list) into instances.

    Args:
        path: the data file (``mediQ_easy.json``, ``mediQ_hard.json``, ``CrisisFact.json``, ...), a Parquet file of
            the same items, or the items in memory (``datasets.Dataset``, pandas ``DataFrame``, list of dicts).
            groundstate's own instance format (JSONL of ``OffQueryInstance``) is recognised and loaded as such
            when no option of the published format is given; otherwise the error says what the file is.
        t2_truth: the T2 truth file, a JSON list aligned with ``path`` by position; ``None`` = no T2 facts.
        condition: ``"unreliable"`` and ``"reliable-private-unreliable-shared"`` require every item to have a
            non-empty ``unreliable_context``; the other conditions do not; ``None`` skips the check.
        domain: ``"healthcare"`` or ``"disaster"``; ``None`` infers it per item from the structure of
            ``original_ditributed_information``.
        split: the split tag for every instance; ``None`` takes it from the file name (see the module notes).
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record (and per ignored extra T2 entry).
        use_datasets: read through ``datasets.load_dataset("json", ...)``: ``None`` = only for files above
            50 MB, ``True`` = always, ``False`` = never. Both paths give identical instances; if ``datasets``
            cannot read the file, the plain JSON reader is used (and reports the exact problem).
        allow_empty: accept a file with no (valid) records; otherwise that is an error.
        t2_facts: the published facts file of ``t2_truth`` (``facts/<name>.json``; found beside
            ``truth/<name>.json`` when not given), used to check exactly that the truth file belongs to ``path``.

    Returns:
        The instances, in file order (bad records left out when ``skip_invalid``).

    Raises:
        InputError: bad input, naming the file, the record and the field (unless ``skip_invalid``).
        ConfigError: an unknown ``condition`` or ``domain``.
    """
    path = as_source(path, "OffQuery items")
    if condition is not None and condition not in CONDITIONS:
        raise ConfigError(f"condition must be one of {', '.join(CONDITIONS)} (got '{condition}')")
    if domain is not None and domain not in DOMAINS:
        raise ConfigError(f"domain must be one of {', '.join(DOMAINS)} (got '{domain}')")
    found = _other_format(path)
    if found is not None:
        kind, count = found
        if kind == "groundstate" and t2_truth is None and t2_facts is None and domain is None and split is None:
            logger.info("%s is a groundstate file of %d OffQuery records; loading it as instances", path, count)
            return load_instances(path, skip_invalid, problems, condition=condition, allow_empty=allow_empty)
        if kind == "groundstate":
            raise InputError(f"this is a groundstate JSONL file of {count} OffQuery records (OffQueryInstance dumps), "
                             "not a published OffQuery JSON list; its records carry their own T2 facts, domain and "
                             "split, so load it without t2_truth/t2_facts/domain/split (or with load_any)",
                             file=str(path))
        raise InputError(f"this is a JSON Lines file of {count} records whose first has keys {kind}, not a published "
                         f"OffQuery JSON list (items with '{OFFICIAL_MARKER}') nor groundstate OffQuery records "
                         "(with 'agents')", file=str(path))
    items = _read_official(path, use_datasets)
    t2_path = Path(t2_truth) if t2_truth is not None else None
    t2 = read_truth(t2_path) if t2_path is not None else None
    reported = problems if problems is not None else []
    if t2 is not None:
        facts_path = Path(t2_facts) if t2_facts is not None else default_facts_path(t2_path)
        facts = read_facts(facts_path) if facts_path is not None else None
        check_alignment(items, t2, path, t2_path, facts, facts_path)

    if t2 is not None and len(t2) != len(items):
        message = (f"the T2 truth file {t2_path} has {len(t2)} entries but {path} has {len(items)} records; "
                   "they must be aligned by position")
        if not skip_invalid:
            raise InputError(message, file=str(path), record=min(len(t2), len(items)), field="t2_truth")
        if len(t2) > len(items):
            reported.append(f"{InputError(message, file=str(t2_path), record=len(items))} (extra entries ignored)")

    context = ItemContext(path=path, t2_path=t2_path, condition=condition, domain=domain, split=split)
    instances: list[OffQueryInstance] = []
    seen: dict[str, Any] = {}
    for position, item in enumerate(items):
        try:
            if not isinstance(item, dict):
                raise InputError("not a JSON object", file=str(path), record=position)
            if t2 is not None and position >= len(t2):
                raise InputError(f"has no T2 truth entry: {t2_path} has only {len(t2)} entries (aligned by position)",
                                 file=str(path), record=record_label(item, position), field="t2_truth")
            entry = t2[position] if t2 is not None else None
            instance = instance_from_item(item, position, entry, context)
            if instance.id in seen:
                raise InputError(f"duplicate id '{instance.id}' (first used by record {seen[instance.id]})",
                                 file=str(path), record=record_label(item, position), field="id")
            seen[instance.id] = position
            instances.append(instance)
        except InputError as err:
            if not skip_invalid:
                raise
            reported.append(f"{err} (record skipped)")
    if len(instances) < len(items):
        logger.warning("%s: skipped %d of %d records", path, len(items) - len(instances), len(items))
    return require_records(instances, path, allow_empty, "OffQuery instances", len(items) - len(instances))

def _other_format(path: Source) -> tuple[str, int] | None:
    """``("groundstate", n)`` for groundstate OffQuery records, ``("<keys>", n)`` for other JSON Lines, or ``None``
    (published items, or a file whose problem the published reader reports exactly). Reads what the source keeps
    (its first record; its rows, read once, for JSON Lines and records in memory)."""
    if isinstance(path, Records):
        first, count = path.first(), len(path)
    elif path.is_file() and path.first_char() == "{":
        first, count = path.first(), sum(1 for _ in path.iter_rows())
    elif path.is_file() and path.first_char() == "[":
        first, count = path.first(), None
    else:
        return None
    if not isinstance(first, dict) or OFFICIAL_MARKER in first:
        return None
    if "agents" in first and "shared_context" in first:
        return "groundstate", count if count is not None else sum(1 for _ in path.iter_rows())
    if count is None:  # a JSON list of something else: the published reader names the field
        return None
    return ", ".join(repr(k) for k in list(first)[:5]), count


def _read_official(path: Source, use_datasets: bool | None) -> list[Any]:
    """The items of a published file (or in-memory/Parquet records), as plain Python values."""
    if isinstance(path, Records):
        return [{k: (clean_dict(v) if k in _DICT_FIELDS else v) for k, v in row.items()} if isinstance(row, dict)
                else row for row in path.rows]

    size = check_regular(path.path)  # a regular file within the size limit, before datasets or JSON opens it
    if use_datasets is None:
        use_datasets = size > DATASETS_THRESHOLD_BYTES
    # datasets also reads a single object or JSON Lines as rows; only a JSON list is a published file
    if use_datasets and path.first_char() == "[":
        try:
            rows = _read_with_datasets(path.path)
        except Exception as exc:  # any failure falls back to the plain reader, whose errors are exact
            logger.warning("datasets could not read %s (%s); reading it as plain JSON", path, exc)
        else:
            return [{k: (clean_dict(v) if k in _DICT_FIELDS else v) for k, v in row.items()} for row in rows]
    data = read_json(path.path)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of OffQuery items (got a JSON {type(data).__name__})", file=str(path))
    return data


def _read_with_datasets(path: Path) -> list[dict]:
    """Read a JSON list / JSON Lines file through ``datasets`` (Arrow), into a temporary cache."""
    import datasets  # noqa: PLC0415 (heavy: datasets)

    bars = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        with tempfile.TemporaryDirectory(prefix="groundstate-offquery-") as cache:
            dataset = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
            return dataset.to_list()
    finally:
        if bars:
            datasets.enable_progress_bars()


def is_official_file(path: Any) -> bool:
    """Whether ``path`` is a ``.json`` list (or Parquet/in-memory records) whose first item has
    ``shuffled_private_information``.

    Only the first item is parsed (the file is read incrementally), so this is cheap for large files.
    """
    path = as_source(path)
    if not isinstance(path, Records) and (path.suffix.lower() != ".json" or not path.is_file()
                                          or path.first_char() != "["):
        return False
    first = path.first()
    return isinstance(first, dict) and OFFICIAL_MARKER in first
