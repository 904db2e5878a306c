"""Train / validation / test splits that never leak and keep the data's mix: disjoint by instance id and by
source case, stratified by domain and variant.

Instances built from the same source case (a MediQ case built twice with different seeds, say) share a
*group* (:func:`group_key`) and always land in the same split. Within that constraint each split keeps the
data's mix of strata (:func:`stratum`: domain and variant), so a small split does not put every training
instance in one domain and every validation instance in the other. Both come from scikit-learn's
``StratifiedGroupKFold``: the data is cut into K folds, disjoint by group and each with the data's mix of strata,
and whole folds go to train, validation and test in proportion to the requested shares (:func:`fold_plan` picks
the K whose fold counts come closest to the shares). The split is a function of the instances, the shares and the
seed only.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.loader import save_instances

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


def stratum(instance: Any) -> str:
    """What a split keeps the mix of: ``<domain>/<variant>`` (``-`` for a missing one)."""
    return f"{getattr(instance, 'domain', None) or '-'}/{getattr(instance, 'variant', None) or '-'}"


MAX_FOLDS = 20
"""The most folds a split is cut into (shares are then met to within 1/20)."""


def fold_plan(fractions: dict[str, float], max_folds: int) -> tuple[int, dict[str, int]]:
    """``(K, folds per split)``: the smallest ``K`` in ``2..max_folds`` whose whole-fold counts (largest remainder)
    come closest to ``fractions``."""
    best: tuple[float, int, dict[str, int]] | None = None
    for k in range(2, max(2, max_folds) + 1):
        exact = {name: fractions[name] * k for name in SPLITS}
        counts = {name: int(exact[name]) for name in SPLITS}
        by_remainder = sorted(SPLITS, key=lambda n: (-(exact[n] - counts[n]), SPLITS.index(n)))
        for name in by_remainder[:k - sum(counts.values())]:
            counts[name] += 1
        error = max(abs(counts[name] / k - fractions[name]) for name in SPLITS)
        if best is None or error < best[0] - 1e-9:
            best = (error, k, counts)
    return best[1], best[2]


def split_instances(instances: Sequence[Any], train: float = 0.6, val: float = 0.2, test: float = 0.2,
                    seed: int = 0) -> dict[str, list[Any]]:
    """``{"train", "val", "test"}`` lists, disjoint by id and by :func:`group_key`, sized by the fractions and each
    with the data's mix of :func:`stratum` as far as the groups allow (see the module docstring).

    Guarantees: every instance is in exactly one split, in input order; no group spans two splits; the same
    instances, fractions and seed give the same splits; a split whose fraction is 0 is empty.

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
    out: dict[str, list[Any]] = {name: [] for name in SPLITS}
    groups = [group_key(x) for x in instances]
    strata = [stratum(x) for x in instances]
    if len(set(groups)) < 2:  # one group cannot be divided: it all goes to the largest share
        out[max(SPLITS, key=lambda s: (fractions[s], -SPLITS.index(s)))] = list(instances)
        return out
    largest_stratum = max(Counter(strata).values())
    if largest_stratum < 2:  # every instance its own stratum: nothing to keep the mix of
        strata, largest_stratum = ["-"] * len(instances), len(instances)
    k, counts = fold_plan(fractions, min(len(set(groups)), largest_stratum, MAX_FOLDS))
    owner = [name for name in SPLITS for _ in range(counts[name])]
    from sklearn.model_selection import StratifiedGroupKFold  # noqa: PLC0415 (heavy: scikit-learn)

    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    fold_of = [0] * len(instances)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        for fold, (_, members) in enumerate(splitter.split(ids, strata, groups)):
            for index in members:
                fold_of[index] = fold
    for index, instance in enumerate(instances):
        out[owner[fold_of[index]]].append(instance)
    return out


def write_splits(splits: dict[str, list[Any]], source: str | Path, out_dir: str | Path | None = None,
                 seed: int | None = None) -> dict[str, str]:
    """Write ``<stem>.<split>.jsonl`` files and ``<stem>.splits.json`` (ids and hashes); return the paths."""
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
