"""The finished DHD work of a cache: its replay (and mask) runs, their blocks and the pair rows the statistics read.

:func:`replay_run_dirs` finds a cache's run directories (one configuration per replay mode, or the runs named),
:func:`choose_mask_run` the one masking run whose Table 23 a report shows (named, or the only one),
:func:`replay_run_settings` says what each mode's runs were made with, :func:`load_blocks` gathers every finished
block once (shards and merged shards included), and :func:`collect_pairs` turns the blocks into the pair rows of
the statistics modules of :mod:`groundstate.eval.dhd`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.replay import ReplayBlock, block_outputs, pair_rows
from groundstate.eval.results import CONFIG, RESULTS, read_results
from groundstate.eval.run_files import check_config
from groundstate.files import read_json
from groundstate.schema import validate

_IDENTITY_IGNORED = {"limit", "shard", "run_id", "merged_from"}


def replay_run_dirs(cache: MessageCache, runs_dir: str | Path | None = None, run_ids: Sequence[str] | None = None,
                    prefix: str = "dhd-replay-") -> dict[str, list[Path]]:
    """The run directories of this cache's runs (by mode for replays), checking each mode has one configuration.

    Raises:
        ConfigError: a mode with runs of several configurations (different LMs or sampling settings) and no
            ``run_ids`` to choose among them.
        InputError: a run configuration under ``runs_dir`` that is unreadable or not a run configuration
            (:class:`~groundstate.eval.run_files.RunConfig`).
    """
    runs_dir = Path(runs_dir) if runs_dir is not None else cache.runs_dir
    cache_id = cache.cache_id
    found: dict[str, dict[str, list[Path]]] = {}
    if not runs_dir.is_dir():
        return {}
    for path in sorted(runs_dir.iterdir()):
        config_path = path / CONFIG
        if not config_path.is_file():
            continue
        config = check_config(read_json(config_path), config_path)  # a corrupt one is an error, not skipped
        if not config["program"].startswith(prefix) or config.get("cache") != cache_id:
            continue
        if run_ids and not any(path.name == r or path.name.startswith(r) for r in run_ids):
            continue
        identity = json.dumps({k: v for k, v in config.items() if k not in _IDENTITY_IGNORED}, sort_keys=True)
        mode = str(config.get("mode", config.get("program")))
        found.setdefault(mode, {}).setdefault(identity, []).append(path)
    out = {}
    for mode, identities in found.items():
        if len(identities) > 1:
            names = sorted(p.name for paths in identities.values() for p in paths)
            raise ConfigError(f"{runs_dir} holds {mode} runs of {len(identities)} different configurations "
                              f"({', '.join(names)}); choose with --run")
        out[mode] = next(iter(identities.values()))
    return out


#: The file a finished masking run writes: the Table 23 it computed.
MASK_TABLE = "mask_table.json"


def mask_run_dirs(cache: MessageCache, runs_dir: str | Path | None = None) -> list[Path]:
    """The run directories of this cache's masking runs (``dhd mask``) that hold a :data:`MASK_TABLE`, by name.

    Raises:
        InputError: a run configuration under ``runs_dir`` that is unreadable or not a run configuration.
    """
    runs_dir = Path(runs_dir) if runs_dir is not None else cache.runs_dir
    if not runs_dir.is_dir():
        return []
    found = []
    for path in sorted(runs_dir.iterdir()):
        config_path = path / CONFIG
        if not config_path.is_file():
            continue
        config = check_config(read_json(config_path), config_path)
        if config["program"] == "dhd-mask" and config.get("cache") == cache.cache_id and (path / MASK_TABLE).is_file():
            found.append(path)
    return found


def choose_mask_run(cache: MessageCache, runs_dir: str | Path | None = None, named: Sequence[str] = (),
                    option: str = "--mask-run", own: bool = False) -> Path | None:
    """The one masking run whose Table 23 a report shows: the run among ``named`` (run ids, exact names) that is
    this cache's, else the cache's only masking run, else ``None`` when it has none. Never the newest of several.

    Args:
        own: every name of ``named`` must be one of this cache's masking runs (a command given one cache).

    Raises:
        ConfigError: several masking runs and none of them named, several of them named, or (``own``) a name that
            is none of them (one line listing them and naming ``option``).
    """
    runs = mask_run_dirs(cache, runs_dir)
    chosen = [path for path in runs if path.name in set(named)]
    missing = [name for name in named if name not in {p.name for p in runs}]
    if own and missing:
        raise ConfigError(f"{option} {missing[0]}: the cache {cache.dir} has no masking run with a Table 23 of that "
                          f"id (its masking runs: {', '.join(p.name for p in runs) or 'none'})")
    if len(chosen) == 1:
        return chosen[0]
    if len(chosen) > 1 or len(runs) > 1:
        names = ", ".join(p.name for p in (chosen or runs))
        raise ConfigError(f"the cache {cache.dir} has {len(chosen or runs)} masking runs with a Table 23 ({names}); "
                          f"a table shows one: name it with {option} RUN")
    return runs[0] if runs else None


SETTING_KEYS: tuple[str, ...] = ("temperatures", "evaluator", "judge_lm", "vary_seed", "lm")


def replay_run_settings(cache: MessageCache, runs_dir: str | Path | None = None,
                        run_ids: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per replay mode, what its runs were made with: :data:`SETTING_KEYS` of their run configuration (one
    configuration per mode, see :func:`replay_run_dirs`; a key an older run lacks is ``None``)."""
    out = {}
    for mode, paths in replay_run_dirs(cache, runs_dir, run_ids).items():
        config = read_json(paths[0] / CONFIG)
        out[mode] = {key: config.get(key) for key in SETTING_KEYS}
    return out


def load_blocks(cache: MessageCache, runs_dir: str | Path | None = None, run_ids: Sequence[str] | None = None,
                prefix: str = "dhd-replay-") -> list[dict[str, Any]]:
    """Every finished block of this cache's replay runs (or mask runs with ``prefix="dhd-mask"``), once each."""
    rows = []
    for paths in replay_run_dirs(cache, runs_dir, run_ids, prefix).values():
        for path in paths:
            for row in read_results(path / RESULTS, strict=True):
                if prefix == "dhd-replay-" and not row.get("error") and "arms" in (row.get("outputs") or {}):
                    validate(ReplayBlock, row["outputs"], file=path / RESULTS, record=row["id"],
                             loc=("outputs",))
                rows.append(row)
    return block_outputs(rows)


def collect_pairs(cache: MessageCache, runs_dir: str | Path | None = None,
                  run_ids: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(pair rows, blocks)`` of this cache's finished replays; pair rows carry ``benchmark`` (the source)."""
    blocks = load_blocks(cache, runs_dir, run_ids)
    rows = pair_rows(blocks, cache.entries())
    sources = {p.id: p.source or None for p in cache.problems()}
    for row in rows:
        row["benchmark"] = sources.get(row["problem_id"])
    return rows, blocks
