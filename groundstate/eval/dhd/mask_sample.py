"""The diagnostic sample of DHD component masking, fixed from repeated LOO labels before any masking call.

**The sample** is fixed from repeated LOO replay before any masking call: the rows of the labels file that
``groundstate dhd analyze`` writes (``labels.jsonl``) with ``mode`` ``loo``, at the pool size ``K``, whose message
had at least two evaluable blocks (:data:`MIN_BLOCKS`); the file must hold such rows (else the run stops with one
line saying what to run first). Their ``group`` gives the category: W+ wrong-helpful, C+ correct-helpful,
W- wrong-harmful, C- correct-harmful, else indeterminate. Per category the candidates are sorted and shuffled by a
``random.Random`` seeded with the seed and the category, then drawn up to the category's quota (default
:data:`PAPER_PER_CATEGORY`, the paper's 10/3/3/2/4); by default at most one message per problem, as the authors'
control manifest has one target per problem, categories with fewer candidates choosing first. The sample (pairs,
categories, the labels file's path and sha256) is written to ``sample.json`` in the run directory before the first
call; a resumed run reuses it and refuses to go on if the labels now give a different sample (:func:`fix_sample`).

Sizes: :func:`resolve_quotas` (the paper's sizes by default, one number for every category, five in category
order, or a total spread round-robin). Fixing the sample before any call follows the paper (Table 23); one
message per problem follows the authors' control manifest, which refuses a problem named twice; pass
``one_per_problem=False`` (``--same-problem``) to allow several.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.dhd.cache import PoolEntry
from groundstate.eval.dhd.masking import CATEGORIES, GROUP_CATEGORY
from groundstate.eval.io import read_jsonl
from groundstate.eval.results import write_json
from groundstate.eval.runner import file_hash
from groundstate.files import read_json

logger = logging.getLogger(__name__)

PAPER_PER_CATEGORY: dict[str, int] = {"wrong-helpful": 10, "correct-helpful": 3, "wrong-harmful": 3,
                                      "correct-harmful": 2, "indeterminate": 4}
"""The paper's diagnostic sample sizes (Table 23)."""
MIN_BLOCKS = 2
"""A message's labels count as repeated with at least this many evaluable LOO blocks."""
SAMPLE_FILE = "sample.json"


# -- the labels the sample is drawn from -----------------------------------------------------------------------------
def default_labels_path(cache_dir: str | Path) -> Path:
    """Where ``groundstate dhd analyze`` writes the labels by default."""
    return Path(cache_dir) / "analysis" / "labels.jsonl"


def _run_first(cache_dir: str | Path | None) -> str:
    cache = f" --cache {cache_dir}" if cache_dir is not None else ""
    return (f"run `groundstate dhd replay{cache} --mode loo --repeats 5` and then `groundstate dhd analyze{cache}` "
            "first")


@dataclass(frozen=True)
class RepeatedLabels:
    """Labels from repeated LOO replay: the rows at pool size ``K`` and where they came from.

    Attributes:
        path, sha256: the labels file and the hash of its bytes.
        K: the pool size of the labels.
        n_blocks: the most evaluable LOO blocks of any message (at least :data:`MIN_BLOCKS`).
        rows: the ``loo`` rows at ``K`` (``problem_id``, ``message_id``, ``group``, ``n_blocks``, ...).
    """

    path: Path
    sha256: str
    K: int
    n_blocks: int
    rows: tuple[dict[str, Any], ...]

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "mode": "loo", "K": self.K, "n_blocks": self.n_blocks}


def _int_field(row: Mapping[str, Any], name: str, path: Path, number: int) -> int:
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise InputError("must be a whole number", file=str(path), record=number, field=name)
    return int(value)


def load_repeated_labels(path: str | Path, k: int | None = None,
                         cache_dir: str | Path | None = None) -> RepeatedLabels:
    """The labels file's repeated LOO rows at ``K`` (``k``, else the largest ``K`` labelled).

    Raises:
        ConfigError: no such file, no LOO labels (single mode only), labels from fewer than two blocks, no labels
            at ``k``: one line saying what to run first.
        InputError: a row without ``problem_id``, ``message_id``, ``group``, ``n_blocks`` or ``K``.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no labels file {path}: the masking sample is drawn from repeated-replay labels; "
                          f"{_run_first(cache_dir)} (or give --labels FILE)")
    rows = read_jsonl(path)
    loo = []
    for number, row in enumerate(rows, start=1):
        if row.get("mode") != "loo":
            continue
        for name in ("problem_id", "group"):
            if row.get(name) in (None, ""):
                raise InputError("is missing (a labels row needs problem_id, message_id, group, n_blocks, K)",
                                 file=str(path), record=number, field=name)
        if row["group"] not in GROUP_CATEGORY:
            raise InputError(f"unknown group '{row['group']}' (expected {', '.join(GROUP_CATEGORY)})",
                             file=str(path), record=number, field="group")
        loo.append({**row, "problem_id": str(row["problem_id"]),
                    **{n: _int_field(row, n, path, number) for n in ("message_id", "n_blocks", "K")}})
    if not loo:
        kind = "single-message replay only (mode single)" if rows else "no labels at all"
        raise ConfigError(f"{path} holds {kind}; the masking sample needs labels from repeated LOO replay: "
                          f"{_run_first(cache_dir)}")
    sizes = sorted({r["K"] for r in loo})
    if k is None:
        k = sizes[-1]
    elif k not in sizes:
        raise ConfigError(f"{path} holds LOO labels at K={', '.join(map(str, sizes))}, not at --k {k}: run "
                          f"`groundstate dhd analyze --k {k}` first (or leave --k out)")
    at_k = [r for r in loo if r["K"] == k]
    seen: set[tuple[str, int]] = set()
    for row in at_k:
        key = (row["problem_id"], row["message_id"])
        if key in seen:
            raise InputError(f"problem {key[0]} message {key[1]} is labelled twice at K={k}", file=str(path))
        seen.add(key)
    most = max(r["n_blocks"] for r in at_k)
    if most < MIN_BLOCKS:
        raise ConfigError(f"{path} holds labels from {most} LOO replay block(s) at K={k}; the masking sample needs "
                          f"labels from repeated replay (at least {MIN_BLOCKS} blocks): {_run_first(cache_dir)}")
    return RepeatedLabels(path=path, sha256=file_hash(path), K=k, n_blocks=most, rows=tuple(at_k))


def label_candidates(labels: RepeatedLabels, entries: Mapping[str, PoolEntry]) -> tuple[list[dict[str, Any]], int]:
    """``(candidates, excluded)``: one ``{problem_id, message_id, category, group}`` per labelled message with at
    least :data:`MIN_BLOCKS` evaluable blocks, sorted; ``excluded`` counts those with fewer.

    Raises:
        InputError: a labelled message that is not in the cache's pool of ``K`` (labels of another cache).
    """
    out, excluded = [], 0
    for row in labels.rows:
        pid, mid = row["problem_id"], row["message_id"]
        entry = entries.get(pid)
        if entry is None or mid not in [m.index for m in entry.pool(labels.K)]:
            raise InputError(f"problem {pid} message {mid} is not in this cache's pool of K={labels.K} (labels of "
                             "another cache?)", file=str(labels.path))
        if row["n_blocks"] < MIN_BLOCKS:
            excluded += 1
            continue
        out.append({"problem_id": pid, "message_id": mid, "category": GROUP_CATEGORY[row["group"]],
                    "group": row["group"]})
    out.sort(key=lambda c: (c["problem_id"], c["message_id"]))
    return out, excluded


# -- drawing the sample ----------------------------------------------------------------------------------------------
def resolve_quotas(per_category: int | Sequence[int] | Mapping[str, int] | None = None, total: int | None = None,
                   available: Mapping[str, int] | None = None) -> dict[str, int]:
    """Messages wanted per category: the paper's sizes by default; one number for all; five in category order; or
    ``total`` spread round-robin (in category order) over the categories that have candidates left."""
    if per_category is not None and total is not None:
        raise ConfigError("give either --per-category or --sample, not both")
    if total is not None:
        if total < 1:
            raise ConfigError("--sample must be at least 1")
        left = {c: int((available or {}).get(c, 0)) for c in CATEGORIES}
        quotas = dict.fromkeys(CATEGORIES, 0)
        while sum(quotas.values()) < total and any(left.values()):
            for c in CATEGORIES:
                if left[c] and sum(quotas.values()) < total:
                    quotas[c] += 1
                    left[c] -= 1
        return quotas
    if per_category is None:
        return dict(PAPER_PER_CATEGORY)
    if isinstance(per_category, int):
        quotas = dict.fromkeys(CATEGORIES, per_category)
    elif isinstance(per_category, Mapping):
        unknown = set(per_category) - set(CATEGORIES)
        if unknown:
            raise ConfigError(f"unknown categories {', '.join(sorted(unknown))} (choose from {', '.join(CATEGORIES)})")
        quotas = {c: int(per_category.get(c, 0)) for c in CATEGORIES}
    else:
        values = [int(v) for v in per_category]
        if len(values) not in (1, len(CATEGORIES)):
            raise ConfigError("--per-category takes one number (every category) or five (W+ C+ W- C- indeterminate)")
        quotas = dict(zip(CATEGORIES, values * len(CATEGORIES) if len(values) == 1 else values, strict=True))
    if any(v < 0 for v in quotas.values()) or not any(quotas.values()):
        raise ConfigError("--per-category needs numbers >= 0, at least one of them above 0")
    return quotas


def select_sample(candidates: Sequence[Mapping[str, Any]], quotas: Mapping[str, int], seed: int = 0,
                  one_per_problem: bool = True) -> list[dict[str, Any]]:
    """The stratified seeded draw (see the module notes): pairs in category order, each category in draw order."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in sorted(candidates, key=lambda c: (str(c["problem_id"]), int(c["message_id"]))):
        groups[c["category"]].append(dict(c))
    for category, members in groups.items():
        random.Random(f"dhd-mask|{seed}|{category}").shuffle(members)
    order = sorted(CATEGORIES, key=lambda c: (len(groups.get(c, [])), CATEGORIES.index(c)))
    used: set[str] = set()
    drawn: dict[str, list[dict[str, Any]]] = {c: [] for c in CATEGORIES}
    for category in order:
        for member in groups.get(category, []):
            if len(drawn[category]) >= quotas.get(category, 0):
                break
            if one_per_problem and member["problem_id"] in used:
                continue
            drawn[category].append(member)
            used.add(member["problem_id"])
    return [m for c in CATEGORIES for m in drawn[c]]


def sample_document(labels: RepeatedLabels, candidates: Sequence[Mapping[str, Any]], excluded: int,
                    quotas: Mapping[str, int], seed: int, one_per_problem: bool) -> dict[str, Any]:
    """What ``sample.json`` holds: the draw's inputs, the counts, and the pairs."""
    pairs = select_sample(candidates, quotas, seed, one_per_problem)
    available = {c: sum(1 for x in candidates if x["category"] == c) for c in CATEGORIES}
    drawn = {c: sum(1 for x in pairs if x["category"] == c) for c in CATEGORIES}
    return {"protocol": "paper Table 23: eight outcomes per repetition, sample fixed from repeated LOO labels",
            "labels": labels.describe(), "seed": seed, "one_per_problem": one_per_problem,
            "requested": dict(quotas), "available": available, "drawn": drawn,
            "shortfall": {c: quotas.get(c, 0) - drawn[c] for c in CATEGORIES if quotas.get(c, 0) > drawn[c]},
            "excluded_few_blocks": excluded, "pairs": pairs}


def fix_sample(run_dir: str | Path, document: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``sample.json`` into a new run directory, or return the stored one of a resumed run.

    Raises:
        ConfigError: the run directory holds a different sample (the labels changed since the run began).
    """
    path = Path(run_dir) / SAMPLE_FILE
    if not path.is_file():
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        write_json(path, document)
        return dict(document)
    stored = read_json(path)
    if not isinstance(stored, dict) or stored.get("pairs") != document["pairs"] or (
            stored.get("labels") or {}).get("K") != document["labels"]["K"]:
        before = (stored.get("labels") or {}) if isinstance(stored, dict) else {}
        raise ConfigError(
            f"the mask run {Path(run_dir).name} was started on the sample in {path} (from {before.get('path')}, "
            f"sha256 {str(before.get('sha256'))[:12]}); {document['labels']['path']} (sha256 "
            f"{document['labels']['sha256'][:12]}) now gives a different sample, and one run never mixes two: "
            "restore the labels it was drawn from to finish it, or give --runs-dir DIR to start a new mask run")
    if (stored.get("labels") or {}).get("sha256") != document["labels"]["sha256"]:
        logger.info("%s changed since the sample was drawn but gives the same sample; resuming", document["labels"])
    return stored
