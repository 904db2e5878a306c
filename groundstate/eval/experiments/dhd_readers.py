"""Cell readers of the DHD steps: a cell's replay (or masking) run becomes the numbers of the paper's appendix tables.

A DHD table's numbers are not a run summary's: they are the statistics of ``groundstate dhd analyze`` over the
cell's replay run, computed here with the same functions and defaults (:func:`groundstate.eval.dhd.analysis.
analyze` and :func:`~groundstate.eval.dhd.analysis.crossfit`, on exactly the cell's run ids; their files go to a
temporary directory, nothing is written beside the cache), then laid out as :mod:`groundstate.eval.dhd.tables`
lays them out. A metric is named ``<scope>:<column>`` where a table has rows per benchmark or arm (a spec's
benchmark axis reads one scope through ``AxisValue.scope``), and ``<column>`` where it has one row per model.
Rates and accuracies are fractions (a spec shows them as percentages or points with ``percent``); counts carry
``integer`` so they print without decimals.

- :func:`replay_reader` (``dhd-replay``): Tables 17 (``<benchmark>:disagreement``, ``<benchmark>:W+`` ...
  ``<benchmark>:indeterminate``), 18 (``<benchmark>:wrong``, ``:correct``, ``:correct_minus_wrong``), 19
  (``separated``, ``W+`` ... with the permutation null's range as the interval; ``BH W+`` ... and ``BY W+`` ...:
  the per-message selections on exact within-block permutation p-values, the paper's column, see
  :mod:`groundstate.eval.dhd.message_tests`; ``problem BH W+`` ... and ``problem BY W+`` ...: the problem-level
  selections, a second column the paper's table does not have; ``strict W+``, ``strict C-``), 24 (``full``,
  ``crossfit``, ``gain``), 25 (``<benchmark>:gain``) and 26 (``<arm>:observed``, ``<arm>:all_action_low`` ...,
  arms ``A``, ``B`` and ``(A+B)/2``). The pooled rows' scope is ``Pooled``.
- :func:`mask_reader` (``dhd-mask``): Table 23 from the run's ``mask_table.json``, ``<category>:<variant>`` and
  ``<category>:n`` (the messages sampled in the category); a category with no sampled message reads ``n`` 0 and
  its variants as not measured, never as missing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _number(value: Any, integer: bool = False, low: Any = None, high: Any = None, n: Any = None) -> dict[str, Any]:
    entry = {"mean": None if value is None else float(value), "low": None if low is None else float(low),
             "high": None if high is None else float(high), "n": n, "failed": 0}
    return {**entry, "integer": True} if integer else entry


def _fraction(pp: Any) -> float | None:
    """A percentage (as the DHD tables give them) back to a fraction."""
    return None if pp is None else float(pp) / 100


def _interval(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    entry = entry or {}
    return _number(_fraction(entry.get("mean")), low=_fraction(entry.get("low")), high=_fraction(entry.get("high")),
                   n=entry.get("n"))


def analysis_of(runs: Sequence[Mapping[str, Any]], cache_dir: str) -> dict[str, Any]:
    """The DHD tables (:func:`groundstate.eval.dhd.tables.paper_tables`) of ``runs`` (the cell's replay runs) over
    the cache at ``cache_dir``; Tables 24-26 are left out (with a note) when the runs cannot be cross-fitted."""
    from groundstate.errors import ConfigError, InputError  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.analysis import analyze, crossfit  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.cache import MessageCache  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.tables import TableSource, paper_tables  # noqa: PLC0415 (--help stays light)

    cache = MessageCache(cache_dir)
    runs_dir = Path(runs[0]["dir"]).parent
    run_ids = [str(run["run_id"]) for run in runs]
    with tempfile.TemporaryDirectory(prefix="groundstate-dhd-") as scratch:
        report = analyze(cache, Path(scratch) / "analysis", runs_dir=runs_dir, run_ids=run_ids, with_tables=False)
        try:
            fitted, note = crossfit(cache, Path(scratch) / "crossfit", runs_dir=runs_dir, run_ids=run_ids), None
        except (ConfigError, InputError) as exc:
            fitted, note = None, str(exc)
    return paper_tables([TableSource(label="cell", report=report, crossfit=fitted, crossfit_note=note)])


def replay_numbers(tables: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The metrics of :func:`replay_reader` from :func:`analysis_of`'s tables (see the module docstring)."""
    from groundstate.eval.dhd.tables import GROUPS  # noqa: PLC0415 (--help stays light)

    out: dict[str, dict[str, Any]] = {}
    rows = {number: (tables.get("tables", {}).get(number) or {}).get("rows") or [] for number in
            ("17", "18", "19", "24", "25", "26")}
    for row in rows["17"]:
        b = row["benchmark"]
        out[f"{b}:disagreement"] = _number(_fraction(row["disagreement"]), low=_fraction(row["low"]),
                                           high=_fraction(row["high"]), n=row.get("n_pairs"))
        for group in (*GROUPS, "indeterminate"):
            out[f"{b}:{group}"] = _number(row.get(group), integer=True)
    for row in rows["18"]:
        for column in ("wrong", "correct", "correct_minus_wrong"):
            out[f"{row['benchmark']}:{column}"] = _interval(row.get(column))
    for row in rows["19"]:
        for name in ("separated", *GROUPS):
            counts = row.get(name) or {}
            out[name] = _number(counts.get("observed"), True, counts.get("low"), counts.get("high"))
        for group in GROUPS:
            for column, name in (("bh", "BH"), ("by", "BY"), ("problem_bh", "problem BH"),
                                 ("problem_by", "problem BY")):
                out[f"{name} {group}"] = _number((row.get(column) or {}).get(group), integer=True)
        for group in ("W+", "C-"):
            out[f"strict {group}"] = _number((row.get("strict") or {}).get(group), integer=True)
    for row in rows["24"]:
        out["full"], out["crossfit"] = _number(_fraction(row["full"])), _number(_fraction(row["crossfit"]))
        out["gain"] = _interval(row.get("gain"))
    for row in rows["25"]:
        out[f"{row['benchmark']}:gain"] = _number(_fraction((row.get("cell") or {}).get("gain")))
    for row in rows["26"]:
        out[f"{row['arm']}:observed"] = _number(_fraction(row.get("observed")))
        for kind in ("all_action", "removal_identity"):
            for end in ("low", "high"):
                out[f"{row['arm']}:{kind}_{end}"] = _number(_fraction((row.get(kind) or {}).get(end)))
    return out


def replay_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """The numbers of Tables 17-19 and 24-26 from a DHD replay cell (see the module docstring).

    Raises:
        ConfigError: a cell without its settings (the cache is a setting, not part of the run's record).
        InputError, ConfigError: what the analysis raises on a malformed replay (one line).
    """
    from groundstate.errors import ConfigError  # noqa: PLC0415 (--help stays light)

    cache = getattr(settings, "cache", None)
    if cache is None:
        raise ConfigError("a DHD replay cell is read with its settings (its cache)")
    return replay_numbers(analysis_of(runs, str(cache)))


def mask_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """Table 23 from a masking cell: integrator success per ``<category>:<variant>`` (a fraction) and the sample
    size ``<category>:n``, from the ``mask_table.json`` of every run of the cell (one per seed), pooled: the success
    over all their outcomes (each run's rate weighted by its outcomes), the sample sizes summed. Every category has
    its rows (a table written before empty categories kept theirs shows n = 0). A cell with a run without a table
    reports nothing (never one seed's table for all)."""
    from groundstate.eval.dhd.blocks import MASK_TABLE  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.masking import CATEGORIES  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.table_inputs import read_mask_table  # noqa: PLC0415 (--help stays light)

    paths = [Path(run["dir"]) / MASK_TABLE for run in runs]
    if not paths or not all(path.is_file() for path in paths):
        return {}
    pooled: dict[str, list[tuple[float, int]]] = {}
    sampled: dict[str, int | None] = {category: 0 for category in CATEGORIES}
    for path in paths:
        table = read_mask_table(path)
        rows = dict(table.get("rows") or {})
        for category in CATEGORIES:  # a table written before empty categories kept their rows
            rows.setdefault(category, {"sampled": 0})
        for category, row in rows.items():
            count = row.get("sampled", row.get("pairs"))
            known = sampled.get(category, 0)
            sampled[category] = known + count if isinstance(count, int) and known is not None else None
            for variant in table.get("variants") or []:
                cell = row.get(variant) or {}
                parts = pooled.setdefault(f"{category}:{variant}", [])
                if cell.get("success") is not None and cell.get("n"):
                    parts.append((float(cell["success"]), int(cell["n"])))
    out = {f"{category}:n": _number(count, integer=True) for category, count in sampled.items()}
    for key, parts in pooled.items():
        n = sum(count for _, count in parts)
        rate = parts[0][0] if len(parts) == 1 else sum(r * count for r, count in parts) / n if n else None
        out[key] = _number(_fraction(rate), n=n or None)
    return out
