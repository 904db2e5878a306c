"""Train / validation / test splits that never leak: disjoint by instance id and by source case.

Instances built from the same source case (a MediQ case built twice with different seeds, say) share a
*group* and always land in the same split. Groups are shuffled with the seed and assigned, one at a time, to
the split furthest below its target size.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError

SPLITS = ("train", "val", "test")


def group_key(instance: Any) -> str:
    """The source-case group of an instance: ``<source>:<case id>`` for built data, else its own id."""
    provenance = getattr(instance, "provenance", None) or {}
    case = provenance.get("case_id")
    if case is not None:
        return f"{provenance.get('source', 'source')}:{case}"
    return f"id:{instance.id}"


def content_hash(instances: Sequence[Any]) -> str:
    """sha256 of the instances' canonical JSON (what a manifest records about its data)."""
    digest = hashlib.sha256()
    for instance in instances:
        data = instance.model_dump(mode="json") if hasattr(instance, "model_dump") else instance
        digest.update(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def split_instances(instances: Sequence[Any], train: float = 0.6, val: float = 0.2, test: float = 0.2,
                    seed: int = 0) -> dict[str, list[Any]]:
    """``{"train", "val", "test"}`` lists, disjoint by id and by :func:`group_key`, sized by the fractions.

    Raises:
        ConfigError: fractions that are negative or do not sum to 1.
        InputError: duplicate instance ids.
    """
    fractions = {"train": train, "val": val, "test": test}
    if any(f < 0 for f in fractions.values()) or abs(sum(fractions.values()) - 1.0) > 1e-6:
        raise ConfigError("--train-share/--val-share/--test-share must be non-negative and sum to 1, "
                          f"got {train}/{val}/{test}")
    ids = [x.id for x in instances]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError("duplicate id; splits must be disjoint by id", record=dup, field="id")
    groups: dict[str, list[Any]] = {}
    for instance in instances:
        groups.setdefault(group_key(instance), []).append(instance)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    targets = {name: fractions[name] * len(instances) for name in SPLITS}
    out: dict[str, list[Any]] = {name: [] for name in SPLITS}
    for key in keys:
        name = max(SPLITS, key=lambda s: (targets[s] - len(out[s]), -SPLITS.index(s)))
        out[name].extend(groups[key])
    return out


def write_splits(splits: dict[str, list[Any]], source: str | Path, out_dir: str | Path | None = None,
                 seed: int | None = None) -> dict[str, str]:
    """Write ``<stem>.<split>.jsonl`` files and ``<stem>.splits.json`` (ids and hashes); return the paths."""
    from groundstate.eval.benchmarks.offquery.loader import save_instances

    source = Path(source)
    out_dir = Path(out_dir) if out_dir else source.parent
    stem = source.name.split(".")[0]
    paths = {}
    for name, items in splits.items():
        path = out_dir / f"{stem}.{name}.jsonl"
        save_instances(path, items)
        paths[name] = str(path)
    summary = {"source": str(source), "seed": seed,
               "splits": {name: {"n": len(items), "ids": [x.id for x in items], "sha256": content_hash(items),
                                 "groups": len({group_key(x) for x in items})} for name, items in splits.items()}}
    index = out_dir / f"{stem}.splits.json"
    index.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    paths["index"] = str(index)
    return paths
