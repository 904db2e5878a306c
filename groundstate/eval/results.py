"""A run directory's files: ``results.jsonl`` (read, repaired, checked), ``config.json`` and ``summary.json``.

:func:`read_results` reads the one-line-per-record results file the :class:`~groundstate.eval.runner.Runner`
appends to, cutting a torn last line on resume; :func:`summarize` turns result rows into the summary (counts,
error rate, every metric's mean with a 95% bootstrap interval over the records it was measured on and the count
of records it failed on, tokens, dollar cost where priced, calls).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import InputError
from groundstate.eval.run_files import check_row
from groundstate.eval.stats import mean_ci
from groundstate.files import iter_chunks, jsonable, loads_json, read_bytes

logger = logging.getLogger(__name__)


RESULTS = "results.jsonl"


CONFIG = "config.json"


SUMMARY = "summary.json"


def read_results(path: str | os.PathLike, repair: bool = False, strict: bool = False) -> list[dict[str, Any]]:
    """Read ``results.jsonl``: one row per record id. A record retried on resume may have several lines until the
    run compacts the file (a retry appends its new row, and the old one stays on disk until it is replaced); the
    last line of an id is its row.

    Args:
        path: the file.
        repair: cut a torn last line (and unreadable lines) off the file, as a resumed run does.
        strict: raise :class:`~groundstate.errors.InputError` naming the line (and the field) for an unreadable
            line, or one that is not a result row (:class:`~groundstate.eval.run_files.ResultRow`), other than a
            torn last line (what ``runs show`` and ``runs merge`` do: a garbage line in the middle is corruption,
            not an interrupted write); otherwise such lines are skipped.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return []
    data = read_bytes(path)  # a regular file within the size limit: a FIFO, a device or a directory is one line
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
    rows = list({row["id"]: row for row in rows}.values())  # the last line of each id (an earlier one was retried)
    if repair and bad:
        logger.warning("%s: dropped %d torn or unreadable line(s)", path, bad)
        write_lines(path, rows)
    return rows


def count_results(path: str | os.PathLike) -> dict[str, int]:
    """``{"n_done", "n_error"}`` of a ``results.jsonl``, streamed (what ``runs list`` reads when a run has no final
    summary): the file is never held whole, only one chunk, one line and each record id's last status (a record
    retried on resume has several lines until the run compacts the file; its last line counts). A torn last line
    is not counted.

    Raises:
        InputError: the file is not a regular file within the size limit, or a complete line is not a result
            row (naming the line).
    """
    path = Path(path)
    failed: dict[str, bool] = {}  # id -> whether its last line is a failure (a retried record has several lines)
    if not os.path.lexists(path):
        return {"n_done": 0, "n_error": 0}
    pending, number = b"", 0
    for chunk in iter_chunks(path):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            number += 1
            if not line.strip():
                continue
            try:
                row = loads_json(line.decode("utf-8"), file=str(path), record=f"at line {number}")
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text", file=str(path), record=f"at line {number}") from None
            check_row(row, path, f"at line {number}")
            failed[row["id"]] = bool(row.get("error"))
    return {"n_done": len(failed), "n_error": sum(failed.values())}


def _replace_with(path: Path, data: bytes, sync: bool = False) -> None:
    """Write ``data`` to ``path`` atomically: into ``<path>.tmp`` (a stale one, even a symlink, is removed first and
    the new one is created with ``O_EXCL | O_NOFOLLOW``, so the write never follows a planted link), then renamed
    over ``path``. A failure (``path`` is a directory, the disk is full, ...) is one :class:`InputError` line."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write ({exc.strerror or exc})", file=str(path)) from None


def write_lines(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace ``path`` with one JSON line per row, atomically and synced (see :func:`_replace_with`)."""
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    _replace_with(Path(path), data, sync=True)


def write_json(path: str | os.PathLike, value: Any) -> None:
    """Replace ``path`` with ``value`` as indented JSON, atomically (see :func:`_replace_with`)."""
    text = json.dumps(jsonable(value), indent=2, ensure_ascii=False) + "\n"
    _replace_with(Path(path), text.encode("utf-8"))


def summarize(rows: Sequence[dict[str, Any]], n_selected: int | None = None) -> dict[str, Any]:
    """Counts, error rate, per-metric means with 95% bootstrap intervals, tokens, calls and latency.

    Each metric's entry (``scores[name]``) is ``mean``, ``low``, ``high`` over the records it was measured on
    (``None`` when it was measured on none: a failure is never averaged in as 0), ``n`` (measured), ``failed``
    (records where it could not be measured: ``score_errors``, which includes every metric of a record whose
    program failed) and ``missing`` (records it does not apply to). ``n_error`` counts records whose program
    failed, ``n_score_failed`` records whose program succeeded but some metric could not be measured.
    """
    n = len(rows)
    errors = sum(1 for r in rows if r.get("error"))
    names = list(dict.fromkeys(k for r in rows for part in ("scores", "score_errors") for k in (r.get(part) or {})))
    scores = {}
    for name in names:
        values = [row["scores"][name] for row in rows if row.get("scores") and row["scores"].get(name) is not None]
        failed = sum(1 for row in rows if name in (row.get("score_errors") or {}))
        scores[name] = {**mean_ci(values), "failed": failed, "missing": max(0, n - len(values) - failed)}
    inp = sum(int(r.get("input_tokens") or 0) for r in rows)
    out = sum(int(r.get("output_tokens") or 0) for r in rows)
    reused = [int(r["reused_input_tokens"]) for r in rows if isinstance(r.get("reused_input_tokens"), int)]
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
        "n_score_failed": sum(1 for r in rows if not r.get("error") and r.get("score_errors")),
        "error_rate": errors / n if n else 0.0,
        "complete": n_selected is None or n >= n_selected,
        "scores": scores,
        "tokens": {"input": inp, "output": out, "total": inp + out,
                   "per_record": (inp + out) / n if n else 0.0,
                   # input tokens served from a cache (null: no record reported it; see Run.to_records)
                   "reused_input": sum(reused) if reused else None},
        "cost_usd": cost,
        "lm_calls": {"total": calls, "per_record": calls / n if n else 0.0, "cached": cached, "failed": failed},
        "latency_s": {"total": sum(latency), "mean": sum(latency) / n if n else 0.0},
    }
