"""A run directory's files: ``results.jsonl`` (read, repaired, checked), ``config.json`` and ``summary.json``.

:func:`read_results` reads the one-line-per-record results file the :class:`~groundstate.eval.runner.Runner`
appends to, cutting a torn last line on resume; :func:`summarize` turns result rows into the summary (counts,
error rate, every score's mean with a 95% bootstrap interval, tokens, dollar cost where priced, calls).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from groundstate.files import jsonable

logger = logging.getLogger(__name__)


RESULTS = "results.jsonl"


CONFIG = "config.json"


SUMMARY = "summary.json"


def read_results(path: str | os.PathLike, repair: bool = False, strict: bool = False) -> list[dict[str, Any]]:
    """Read ``results.jsonl``.

    Args:
        path: the file.
        repair: cut a torn last line (and unreadable lines) off the file, as a resumed run does.
        strict: raise :class:`~groundstate.errors.InputError` naming the line (and the field) for an unreadable
            line, or one that is not a result row (:class:`~groundstate.eval.run_files.ResultRow`), other than a
            torn last line (what ``runs show`` and ``runs merge`` do: a garbage line in the middle is corruption,
            not an interrupted write); otherwise such lines are skipped.
    """
    from groundstate.errors import InputError
    from groundstate.eval.run_files import check_row
    from groundstate.files import loads_json

    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    rows, bad = [], 0
    pos, number = 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        number += 1
        if nl < 0:  # a torn last line: written without its newline before the process died
            bad += 1
            break
        line = data[pos:nl]
        pos = nl + 1
        if not line.strip():
            continue
        try:
            row = loads_json(line.decode("utf-8"), file=str(path), record=f"at line {number}")
            check_row(row, path, f"at line {number}")  # a result row as the runner writes it (run_files.ResultRow)
        except (InputError, UnicodeDecodeError) as exc:
            if strict:
                if isinstance(exc, UnicodeDecodeError):
                    raise InputError("not UTF-8 text", file=str(path), record=f"at line {number}") from None
                raise
            bad += 1
            continue
        rows.append(row)
    if repair and bad:
        logger.warning("%s: dropped %d torn or unreadable line(s)", path, bad)
        write_lines(path, rows)
    return rows


def write_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_json(path: str | os.PathLike, value: Any) -> None:
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(jsonable(value), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def summarize(rows: Sequence[dict[str, Any]], n_selected: int | None = None) -> dict[str, Any]:
    """Counts, error rate, per-score means with 95% bootstrap intervals, tokens, calls and latency."""
    from groundstate.eval.stats import mean_ci

    n = len(rows)
    errors = sum(1 for r in rows if r.get("error"))
    names: list[str] = []
    for row in rows:
        for key in (row.get("scores") or {}):
            if key not in names:
                names.append(key)
    scores = {}
    for name in names:
        values = [row["scores"][name] for row in rows if row.get("scores") and row["scores"].get(name) is not None]
        missing = n - len(values)
        scores[name] = {**mean_ci(values), "missing": missing}
    inp = sum(int(r.get("input_tokens") or 0) for r in rows)
    out = sum(int(r.get("output_tokens") or 0) for r in rows)
    calls = sum(int(r.get("lm_calls") or 0) for r in rows)
    cached = sum(int(r.get("cached_calls") or 0) for r in rows)
    failed = sum(int(r.get("failed_calls") or 0) for r in rows)
    latency = [float(r.get("latency_s") or 0.0) for r in rows]
    costs = [float(r["cost_usd"]) for r in rows if isinstance(r.get("cost_usd"), (int, float))]
    # null when no record was priced; otherwise the priced records' sum, with how many records had no price
    cost = {"total": sum(costs) if costs else None, "per_record": sum(costs) / len(costs) if costs else None,
            "unpriced_records": n - len(costs)}
    return {
        "n_selected": n_selected if n_selected is not None else n,
        "n_done": n,
        "n_ok": n - errors,
        "n_error": errors,
        "error_rate": errors / n if n else 0.0,
        "complete": n_selected is None or n >= n_selected,
        "scores": scores,
        "tokens": {"input": inp, "output": out, "total": inp + out,
                   "per_record": (inp + out) / n if n else 0.0},
        "cost_usd": cost,
        "lm_calls": {"total": calls, "per_record": calls / n if n else 0.0, "cached": cached, "failed": failed},
        "latency_s": {"total": sum(latency), "mean": sum(latency) / n if n else 0.0},
    }
