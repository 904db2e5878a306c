"""What names a run and its records: record ids, configuration fingerprints, file hashes and shards.

The durable runner (:mod:`groundstate.eval.runner`, which re-exports these) names a run directory
``<program>-<fingerprint(config)>``; :func:`fingerprint` leaves out ``runtime`` entries (settings that change how
fast a run goes, never its outputs). :func:`shard_of` assigns a record to a shard by a hash of its id alone.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from groundstate.errors import ConfigError
from groundstate.files import sha256
from groundstate.lm.embedded import RUNTIME_KEY


def record_id(record: Any) -> str:
    """A record's id: attribute ``id`` or key ``"id"``."""
    rid = record.get("id") if isinstance(record, dict) else getattr(record, "id", None)
    if rid is None:
        raise ConfigError(f"record {record!r:.80} has no 'id'")
    return str(rid)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def fingerprint(config: dict[str, Any], length: int = 12) -> str:
    """A short stable hash of a JSON-able configuration, without its ``runtime`` entries at any depth (how fast
    it ran, e.g. the embedded LM's contexts: :data:`~groundstate.lm.embedded.RUNTIME_KEY`)."""
    return hashlib.sha256(canonical_json(_without_runtime(config)).encode("utf-8")).hexdigest()[:length]


def _without_runtime(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_runtime(v) for k, v in value.items() if k != RUNTIME_KEY}
    if isinstance(value, list | tuple):
        return [_without_runtime(v) for v in value]
    return value


def file_hash(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes (the data part of a run fingerprint); only a regular file within the size limit is
    read (:func:`groundstate.files.sha256`: a FIFO, a device or a directory is one line, never a hang)."""
    return sha256(path)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"i/N"`` (0 <= i < N) -> ``(i, N)``; ``None`` -> ``None``."""
    if text is None:
        return None
    try:
        i, n = (int(part) for part in str(text).split("/"))
    except ValueError:
        raise ConfigError(f"--shard must look like i/N (for example 0/4), got '{text}'") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"--shard {text}: need 0 <= i < N (shards are numbered from 0)")
    return i, n


def shard_of(rid: str, n: int) -> int:
    """The shard (0..n-1) a record id belongs to: a stable hash, independent of order and of other records."""
    return int.from_bytes(hashlib.sha256(rid.encode("utf-8")).digest()[:8], "big") % n
