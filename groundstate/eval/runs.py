"""Stored runs: list them, show one, merge shards into one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from groundstate.errors import InputError
from groundstate.eval.runner import CONFIG, RESULTS, SUMMARY, fingerprint, read_results, summarize, write_json


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """``{"run_id", "dir", "config", "summary", "rows"}`` for a run directory (summary recomputed if absent)."""
    run_dir = Path(run_dir)
    config_path = run_dir / CONFIG
    if not config_path.is_file():
        raise InputError("not a run directory (no config.json)", file=str(run_dir))
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"config.json is not valid JSON ({exc.msg})", file=str(config_path)) from None
    rows = read_results(run_dir / RESULTS)
    summary_path = run_dir / SUMMARY
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else summarize(rows)
    return {"run_id": config.get("run_id", run_dir.name), "dir": str(run_dir), "config": config,
            "summary": summary, "rows": rows}


def list_runs(out: str | Path = "runs") -> list[dict[str, Any]]:
    """One entry per run directory under ``out``, newest first."""
    out = Path(out)
    if not out.is_dir():
        return []
    entries = []
    for run_dir in sorted(out.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
        if (run_dir / CONFIG).is_file():
            run = load_run(run_dir)
            entries.append({k: run[k] for k in ("run_id", "dir", "config", "summary")})
    return entries


def merge_runs(run_dirs: list[str | Path], out: str | Path = "runs") -> dict[str, Any]:
    """Merge the shards of one run into a new run directory and return it (as :func:`load_run`).

    Every input must have the same configuration apart from ``shard``; records appear once (a record found
    in two shards keeps the successful row). Missing shards are allowed and reported in the summary.
    """
    if len(run_dirs) < 2:
        raise InputError("runs merge needs at least two run directories")
    runs = [load_run(d) for d in run_dirs]
    base = {k: v for k, v in runs[0]["config"].items() if k not in {"shard", "run_id"}}
    for run in runs[1:]:
        other = {k: v for k, v in run["config"].items() if k not in {"shard", "run_id"}}
        if other != base:
            diff = sorted(k for k in set(base) | set(other) if base.get(k) != other.get(k))
            raise InputError(f"cannot merge: configuration differs from {runs[0]['dir']} in {diff}", file=run["dir"])
    shards = [tuple(r["config"]["shard"]) if r["config"].get("shard") else None for r in runs]
    counts = {s[1] for s in shards if s}
    if None in shards or len(counts) != 1:
        raise InputError("cannot merge: every input must be a shard i/N of the same N")
    n = counts.pop()
    covered = sorted({s[0] for s in shards})
    merged: dict[str, dict[str, Any]] = {}
    for run in runs:
        for row in run["rows"]:
            kept = merged.get(row["id"])
            if kept is None or (kept.get("error") and not row.get("error")):
                merged[row["id"]] = row
    config = {**base, "shard": None, "merged_from": [r["run_id"] for r in runs]}
    run_id = f"{base.get('program', 'run')}-{fingerprint({**base, 'shard': None})}-merged"
    run_dir = Path(out) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = sorted(merged.values(), key=lambda r: r["id"])
    write_json(run_dir / CONFIG, {**config, "run_id": run_id})
    with open(run_dir / RESULTS, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    n_selected = sum(r["summary"].get("n_selected", len(r["rows"])) for r in runs)
    summary = {"run_id": run_id, **summarize(rows, n_selected), "shards": {"n": n, "covered": covered,
               "missing": [i for i in range(n) if i not in covered]}, "stopped_reason": None}
    write_json(run_dir / SUMMARY, summary)
    return load_run(run_dir)
