"""Stored runs: list them, show one, merge shards into one run."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError, one_line
from groundstate.eval.lock import lock_holder
from groundstate.eval.results import (
    CONFIG,
    RESULTS,
    SUMMARY,
    count_results,
    read_results,
    summarize,
    write_json,
    write_lines,
)
from groundstate.eval.run_files import check_config, check_summary
from groundstate.eval.runner import fingerprint
from groundstate.files import read_json
from groundstate.paths import check_entry, child, safe_component

#: The per-record columns of :meth:`Run.to_records`, before the ``gold.*``, ``score.*`` and ``output.*`` ones.
RUN_COLUMNS: tuple[str, ...] = ("run_id", "id", "error", "input_tokens", "output_tokens", "total_tokens", "lm_calls",
                                "failed_calls", "cached_calls", "latency_s", "attempt", "cost_usd", "gold", "domain",
                                "variant", "reused_input_tokens")


class Run(dict):
    """A stored run: the dict :func:`load_run` always returned (``run_id``, ``dir``, ``config``, ``summary``,
    ``rows``), plus flat-table exports.

    One row per record; the columns are :data:`RUN_COLUMNS`, then ``gold.<name>`` per field of a structured gold
    answer, ``score.<name>`` per score (null where it was not measured), ``score_error.<name>`` per metric that
    failed on some record (why it was not measured) and ``output.<name>`` per program output. An output holding a list
    or an object, or whose values differ in type between records, is JSON text, so every column has one type (the
    trace is left out: see ``results.jsonl``); ``gold`` and the ``gold.<name>`` columns follow the same rule.

    The columns of :data:`RUN_COLUMNS`:

    - ``run_id``, ``id``: the run and the record; ``error``: why the program failed on it (null: it did not);
    - ``input_tokens``, ``output_tokens``, ``total_tokens``, ``lm_calls``, ``failed_calls``, ``cached_calls``,
      ``latency_s``, ``attempt``: what the record cost to run, as the runner counted it;
    - ``cost_usd``: the record's dollars as the runner priced them with LiteLLM's cost map (cache hits excluded),
      null when a model it called is unpriced; for rows written before runs priced records, the tokens priced as
      the run's one LM (its config's ``lm``) when LiteLLM prices it, else null (a run with per-role LMs is null);
    - ``gold``: the record's gold answer as its task defines it (OffQuery: an object of ``misleading_agent``, T1's
      misleading agent index, a list of them or null as programs answer it, and ``answer``, T3's correct option;
      ``qa``: the answer; hidden-profile discussions: the correct option); null for a task that stores none and for
      runs written before rows stored it;
    - ``domain``, ``variant``: an OffQuery record's domain and variant (null for other tasks, an unknown variant,
      and runs written before rows stored them);
    - ``reused_input_tokens``: the record's input tokens the LM served from a cache instead of evaluating them
      (the embedded LM's reused prompt prefixes, :mod:`groundstate.lm.prefix`; a provider's prompt cache when it
      reports one), part of ``input_tokens``; null when no call reported it and for runs written before rows
      stored it.
    """

    def to_records(self) -> list[dict[str, Any]]:
        """The flat rows, as a list of dicts (what :meth:`to_pandas` and :meth:`to_dataset` are built from)."""
        rows = self["rows"]
        scores = list(dict.fromkeys(k for r in rows for part in ("scores", "score_errors")
                                    for k in (r.get(part) or {})))
        failed = list(dict.fromkeys(k for r in rows for k in (r.get("score_errors") or {})))
        outputs = list(dict.fromkeys(k for r in rows for k in (r.get("outputs") or {})))
        as_json = {k for k in outputs if _needs_json([(r.get("outputs") or {}).get(k) for r in rows])}
        golds = _gold_fields(rows)
        gold_json = {k for k in golds if _needs_json([_gold_field(r, k) for r in rows])}
        whole_gold_json = _needs_json([r.get("gold") for r in rows])
        model = _priced_model(self["config"])
        flat = []
        for r in rows:
            inp, out = int(r.get("input_tokens") or 0), int(r.get("output_tokens") or 0)
            row: dict[str, Any] = {"run_id": self["run_id"], "id": r["id"], "error": r.get("error"),
                                   "input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
            for key in ("lm_calls", "failed_calls", "cached_calls", "latency_s", "attempt"):
                row[key] = r.get(key)
            row["cost_usd"] = _row_cost(r, model)
            row["gold"] = _as_cell(r.get("gold"), whole_gold_json)
            row["domain"], row["variant"] = r.get("domain"), r.get("variant")
            row["reused_input_tokens"] = r.get("reused_input_tokens")
            for name in golds:
                row[f"gold.{name}"] = _as_cell(_gold_field(r, name), name in gold_json)
            for name in scores:
                value = (r.get("scores") or {}).get(name)
                row[f"score.{name}"] = float(value) if isinstance(value, int | float) else value
            for name in failed:
                row[f"score_error.{name}"] = (r.get("score_errors") or {}).get(name)
            for name in outputs:
                row[f"output.{name}"] = _as_cell((r.get("outputs") or {}).get(name), name in as_json)
            flat.append(row)
        return flat

    def to_pandas(self) -> Any:
        """The flat table as a pandas ``DataFrame`` (one row per record)."""
        import pandas  # noqa: PLC0415 (heavy: pandas)

        return pandas.DataFrame(self.to_records(), columns=self._columns())

    def to_dataset(self) -> Any:
        """The flat table as a ``datasets.Dataset`` (one row per record)."""
        import datasets  # noqa: PLC0415 (heavy: datasets)

        records = self.to_records()
        return datasets.Dataset.from_dict({c: [r.get(c) for r in records] for c in self._columns()})

    def _columns(self) -> list[str]:
        rows = self["rows"]
        return [*RUN_COLUMNS, *(f"gold.{k}" for k in _gold_fields(rows)),
                *dict.fromkeys(f"score.{k}" for r in rows for part in ("scores", "score_errors")
                               for k in (r.get(part) or {})),
                *dict.fromkeys(f"score_error.{k}" for r in rows for k in (r.get("score_errors") or {})),
                *dict.fromkeys(f"output.{k}" for r in rows for k in (r.get("outputs") or {}))]


def _gold_fields(rows: list[dict[str, Any]]) -> list[str]:
    """The fields of the rows' structured (object) gold answers, in order of appearance."""
    return list(dict.fromkeys(k for r in rows if isinstance(r.get("gold"), dict) for k in r["gold"]))


def _gold_field(row: dict[str, Any], name: str) -> Any:
    gold = row.get("gold")
    return gold.get(name) if isinstance(gold, dict) else None


def _as_cell(value: Any, as_json: bool) -> Any:
    """``value`` as a table cell: JSON text when its column is (:func:`_needs_json`), else as it is."""
    return json.dumps(value, ensure_ascii=False) if as_json and value is not None else value


def _priced_model(config: dict[str, Any]) -> str | None:
    """The model whose LiteLLM price prices a run's old rows (those without ``cost_usd``): the config's one LM when
    LiteLLM prices it; ``None`` with per-role LMs (which LM spent which tokens is unknown) or no price."""
    from groundstate.metering import model_price  # noqa: PLC0415 (heavy: litellm)

    lm, lm_config = config.get("lm"), config.get("lm_config")
    roles = lm_config.get("roles") if isinstance(lm_config, dict) else None
    model = lm.get("model") if isinstance(lm, dict) else None
    if roles or not isinstance(model, str) or not model:
        return None
    return model if model_price(model) is not None else None


def _row_cost(row: dict[str, Any], model: str | None) -> float | None:
    """A row's dollars: its ``cost_usd`` as the runner priced it (null: unpriced); for a row written before rows
    carried one, its tokens priced as ``model`` (``None``: unpriced, or no LM call)."""
    from groundstate.metering import call_cost  # noqa: PLC0415 (heavy: litellm)

    if "cost_usd" in row:
        value = row["cost_usd"]
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if model is None or not row.get("lm_calls"):
        return None
    return call_cost(model, int(row.get("input_tokens") or 0), int(row.get("output_tokens") or 0))


def _needs_json(values: list[Any]) -> bool:
    """Whether a column of outputs must be JSON text: it holds lists or objects, or mixes types."""
    present = [v for v in values if v is not None]
    if any(isinstance(v, list | dict) for v in present):
        return True
    kinds = {float if isinstance(v, int | float) and not isinstance(v, bool) else type(v) for v in present}
    return len(kinds) > 1


def load_run(run_dir: str | Path) -> Run:
    """``{"run_id", "dir", "config", "summary", "rows"}`` for a run directory (summary recomputed if absent), as a
    :class:`Run`: ``load_run(d).to_pandas()`` and ``.to_dataset()`` give one flat row per record.

    Every file is checked against its model (:mod:`groundstate.eval.run_files`) as it is read.

    Raises:
        InputError: not a run directory, or a corrupt ``config.json``, ``summary.json`` or ``results.jsonl``
            (one line naming the file, the field and, for results, the line).
    """
    run_dir = Path(run_dir)
    config = _read_config(run_dir)
    rows = read_results(run_dir / RESULTS, strict=True)
    summary = _read_summary(run_dir)
    if summary is None:  # a run killed before it wrote any summary: recount what results.jsonl holds
        summary = summarize(rows)
    elif summary.get("finished") is False:  # the run's first summary: recount what results.jsonl holds
        summary = {**summary, **summarize(rows, summary["n_selected"])}
    summary = {"run_id": config["run_id"], **summary}
    return Run(run_id=config["run_id"], dir=str(run_dir), config=config, summary=summary,
               rows=rows)


def _read_config(run_dir: Path) -> dict[str, Any]:
    """A run directory's ``config.json`` (a JSON object), or one line: not a run directory, or a bad file."""
    config_path = run_dir / CONFIG
    if not os.path.lexists(config_path):
        raise InputError("not a run directory (no config.json)", file=str(run_dir))
    # only a regular file is read (a FIFO or a device is one line), then checked against its model
    return check_config(read_json(config_path), config_path)


def _read_summary(run_dir: Path) -> dict[str, Any] | None:
    """A run directory's checked ``summary.json``, ``None`` when there is none."""
    summary_path = run_dir / SUMMARY
    if not os.path.lexists(summary_path):
        return None
    return check_summary(read_json(summary_path), summary_path)


def run_state(run_dir: str | Path, summary: dict[str, Any] | None = None) -> str:
    """What a run directory's files say about it, honestly:

    - ``running (pid N)``: a live process holds its lock (:class:`~groundstate.eval.lock.RunLock`);
    - ``stopped: <reason>``: the run ended early (``--max-error-rate``);
    - ``failed: <reason>``: it went through its records but too many failed (``--max-error-rate``), or all did;
    - ``killed``: no live holder and the run never wrote its final summary (no ``summary.json``, a first
      summary with ``finished`` false, or a summary older than ``results.jsonl``);
    - ``incomplete``: it finished with fewer records than it selected;
    - ``complete``.
    """
    run_dir = Path(run_dir)
    holder = lock_holder(run_dir)
    if holder is not None:
        return f"running (pid {holder})"
    summary_path, results_path = run_dir / SUMMARY, run_dir / RESULTS
    if summary is None and summary_path.is_file():
        summary = read_json(summary_path)
    if not summary_path.is_file() or not isinstance(summary, dict) or summary.get("finished") is False:
        return "killed"
    # one run's own files: results appended after its summary mean it was stopped mid-way (no choice among runs)
    if results_path.is_file() and summary_path.stat().st_mtime_ns < results_path.stat().st_mtime_ns:
        return "killed"
    if summary.get("stopped_reason"):
        return str(summary["stopped_reason"])
    if not summary.get("complete", True) or summary.get("n_done", 0) < summary.get("n_selected", 0):
        return "incomplete"
    return "complete"


def list_runs(out: str | Path = "runs") -> list[dict[str, Any]]:
    """One entry per run directory under ``out``, newest first, with its :func:`run_state` as ``state``.

    Reads what a listing needs and no more: ``config.json`` and ``summary.json``. ``results.jsonl`` is read only
    when the run has no final summary (it was killed, is running, or its summary is older than its results), and
    then streamed to count its records (:func:`~groundstate.eval.results.count_results`), never loaded whole.
    """
    out = Path(out)
    if not out.is_dir():
        return []
    entries = []
    # newest first is the order `runs list` shows them in, nothing more: no table or report chooses a run by it (a
    # table's cell is the run its plan names, groundstate.eval.experiments.table)
    for run_dir in sorted(out.iterdir(), key=lambda p: p.lstat().st_mtime, reverse=True):
        if not run_dir.is_dir() or not os.path.lexists(run_dir / CONFIG):
            continue
        entries.append(run_entry(run_dir))
    return entries


def run_entry(run_dir: str | Path) -> dict[str, Any]:
    """What :func:`list_runs` says about one run directory: ``run_id``, ``dir``, ``config``, ``summary`` (its
    counts: ``n_done``, ``n_error``, ``n_selected``) and ``state`` (:func:`run_state`), reading ``config.json`` and
    ``summary.json`` and, only when the run has no final summary, streaming ``results.jsonl`` to count its records.

    Raises:
        InputError: not a run directory, or a corrupt file (one line).
    """
    run_dir = Path(run_dir)
    config = _read_config(run_dir)
    summary = _read_summary(run_dir)
    results = run_dir / RESULTS
    stale = summary is None or summary.get("finished") is False or (
        os.path.lexists(results) and check_entry(results, "results")
        and (run_dir / SUMMARY).stat().st_mtime_ns < results.stat().st_mtime_ns)
    if stale:
        counted = count_results(results)
        selected = summary["n_selected"] if summary else counted["n_done"]
        summary = {**(summary or {}), **counted, "n_selected": selected}
    return {"run_id": str(config.get("run_id", run_dir.name)), "dir": str(run_dir), "config": config,
            "summary": summary, "state": run_state(run_dir, summary)}


def merge_runs(run_dirs: list[str | Path], out: str | Path = "runs") -> dict[str, Any]:
    """Merge the shards of one run into a new run directory and return it (as :func:`load_run`).

    Every input must have the same configuration apart from ``shard``. A directory given twice, two inputs
    that are the same shard ``i/N``, or two inputs that share a record id are refused (merging them would
    count records twice). Missing shards are allowed and reported in the summary.

    Raises:
        ConfigError: a shard given twice or overlapping shards.
        InputError: an input that is not a run directory, or inputs of different configurations.
    """
    if len(run_dirs) < 2:
        raise InputError("runs merge needs at least two run directories")
    seen_dirs: dict[Path, str] = {}
    for d in run_dirs:
        resolved = Path(d).resolve()
        if resolved in seen_dirs:
            raise ConfigError(f"runs merge: {d} is given twice (as {seen_dirs[resolved]} and {d}); "
                              "give each shard once")
        seen_dirs[resolved] = str(d)
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
    owner: dict[int, str] = {}
    for run, shard in zip(runs, shards, strict=True):
        if shard[0] in owner:
            raise ConfigError(f"runs merge: shard {shard[0]}/{n} is given twice ({owner[shard[0]]} and {run['dir']}); "
                              "give each shard once")
        owner[shard[0]] = run["dir"]
    covered = sorted(owner)
    merged: dict[str, dict[str, Any]] = {}
    found_in: dict[str, str] = {}
    for run in runs:
        for row in run["rows"]:
            if row["id"] in found_in and found_in[row["id"]] != run["dir"]:
                raise ConfigError(f"runs merge: record '{one_line(row['id'], 120)}' is in both "
                                  f"{found_in[row['id']]} and {run['dir']}; the shards overlap, so merging would "
                                  "count it twice")
            found_in[row["id"]] = run["dir"]
            merged[row["id"]] = row
    config = {**base, "shard": None, "merged_from": [r["run_id"] for r in runs]}
    program = safe_component(base.get("program", "run"), "program name", source=Path(runs[0]["dir"]) / CONFIG)
    run_id = f"{program}-{fingerprint({**base, 'shard': None})}-merged"
    run_dir = child(out, run_id, "merged run id")
    for name in (CONFIG, RESULTS, SUMMARY):
        check_entry(run_dir / name, "run files")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make the merged run directory ({exc.strerror or exc})", file=str(run_dir)) from None
    rows = sorted(merged.values(), key=lambda r: r["id"])
    write_json(run_dir / CONFIG, {**config, "run_id": run_id})
    write_lines(run_dir / RESULTS, rows)
    n_selected = sum(r["summary"].get("n_selected", len(r["rows"])) for r in runs)
    summary = {"run_id": run_id, **summarize(rows, n_selected), "shards": {"n": n, "covered": covered,
               "missing": [i for i in range(n) if i not in covered]}, "stopped_reason": None}
    write_json(run_dir / SUMMARY, summary)
    return load_run(run_dir)


def _is_run_dir(path: Path) -> bool:
    """A directory holding a run: its ``config.json`` or its ``results.jsonl``."""
    return path.is_dir() and ((path / "config.json").is_file() or (path / "results.jsonl").is_file())


def resolve_run_dir(out: str | Path, name: str, *, prefix: bool = True) -> str:
    """A run directory from a path, a run id under ``out`` or (``prefix``, for names a user types) a unique prefix
    of one. A name that comes from a file (an experiment spec's ``[runs]``) is resolved with ``prefix=False``:
    exactly the run id it gives, never another run that happens to start with it.

    Raises:
        InputError: no such run, or a prefix that matches several.
    """
    path = Path(name)
    if path.is_dir():
        return str(path)
    if path.is_absolute() or len(path.parts) != 1:
        raise InputError(f"no run directory {one_line(name)} (it does not exist); see "
                         "`groundstate runs list --runs-dir DIR`")
    candidate = child(out, name, "run id")
    if _is_run_dir(candidate):  # a report directory beside the runs (runs/demo/consilience) is no run
        return str(candidate)
    matches = [p for p in Path(out).glob(f"{glob.escape(name)}*") if _is_run_dir(p)] \
        if prefix and Path(out).is_dir() else []
    if len(matches) == 1:
        return str(matches[0])
    raise InputError(f"no run '{one_line(name)}' under {one_line(out)}/ ({len(matches)} matches); see "
                     "`groundstate runs list`")
