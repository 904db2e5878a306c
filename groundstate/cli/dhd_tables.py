"""``groundstate dhd tables``: the paper-layout tables of several analysed caches side by side.

``dhd analyze`` already writes the tables of one cache; this command combines the analysis directories of several
(for instance one per model family, as the paper's tables set OSS beside Gemma) into one ``tables.md`` /
``tables.json`` with charts (:mod:`groundstate.eval.dhd.tables`). It reads only what analyze wrote
(``report.json``, ``crossfit.json``) and, for Table 23, the ``mask_table.json`` of exactly one masking run of each
cache: the one named with ``--mask-run``, else the cache's only one
(:func:`groundstate.eval.dhd.blocks.choose_mask_run`); a cache with several masking runs and none named is refused
in one line listing them, never resolved by taking the newest. No statistic is recomputed, so the numbers are
exactly those of each cache's report (``groundstate experiment table dhd-table17`` ... ``dhd-table26`` is the
spec path: it computes them from exactly the replay runs its cells plan, beside the paper's numbers).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError


def register(dhd_sub: Any) -> None:
    """Add ``tables`` to the ``dhd`` command group."""
    p = dhd_sub.add_parser("tables", help="the paper-layout Tables 17-19 and 23-26 of several analysed caches",
                           description="Combine `dhd analyze` outputs (one directory per model) into the layout of "
                           "the paper's Tables 17, 18, 19, 23, 24, 25 and 26: tables.md, tables.json, charts.")
    p.add_argument("--analysis", nargs="+", required=True, metavar="DIR",
                   help="analysis directories written by `groundstate dhd analyze` (default there: <cache>/analysis)")
    p.add_argument("--label", nargs="+", default=None, metavar="NAME",
                   help="one model name per directory (default: each cache directory's name)")
    p.add_argument("--mask-run", nargs="+", default=[], metavar="RUN",
                   help="the masking run whose Table 23 a cache shows (run ids under <cache>/runs; needed for a "
                        "cache with several)")
    p.add_argument("--report-dir", required=True, metavar="DIR", help="where to write the combined tables")
    p.set_defaults(func=cmd_tables)


def _source(directory: str, label: str | None, mask_runs: list[str]):
    """The tables' source of one analysis directory (:class:`~groundstate.eval.dhd.tables.TableSource`), its Table 23
    from the masking run :func:`~groundstate.eval.dhd.blocks.choose_mask_run` picks among ``mask_runs``."""
    from groundstate.eval.dhd.blocks import MASK_TABLE, choose_mask_run  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.table_inputs import read_crossfit, read_mask_table, read_report  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.tables import TableSource  # noqa: PLC0415 (--help stays light)

    path = Path(directory)
    report_path = path / "report.json"
    if not report_path.is_file():
        raise InputError("has no report.json: run `groundstate dhd analyze --cache CACHE` first", file=str(path))
    report = read_report(report_path)
    crossfit = read_crossfit(path / "crossfit.json") if (path / "crossfit.json").is_file() else None
    cache = _cache_of(path, report)
    mask_dir = choose_mask_run(cache, None, mask_runs) if cache is not None else None
    mask = read_mask_table(mask_dir / MASK_TABLE) if mask_dir is not None else None
    name = label or (cache.dir if cache is not None else path.resolve().parent).resolve().name
    return TableSource(label=name, report=report, crossfit=crossfit, mask=mask,
                       crossfit_note=None if crossfit else "no crossfit.json beside the report")


def _cache_of(analysis: Path, report: dict[str, Any]):
    """The cache an analysis directory was made from: the one its report names, else (a relative path from another
    working directory) the directory above it, the usual layout; ``None`` when neither is a cache."""
    from groundstate.eval.dhd.cache import MessageCache  # noqa: PLC0415 (--help stays light)

    for cache_dir in (Path(str(report.get("cache", ""))), analysis.resolve().parent):
        if (cache_dir / "cache.json").is_file():
            return MessageCache(cache_dir)
    return None


def cmd_tables(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.blocks import mask_run_dirs  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.table_inputs import read_report  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.tables import write_tables  # noqa: PLC0415 (--help stays light)

    labels = args.label or [None] * len(args.analysis)
    if len(labels) != len(args.analysis):
        raise ConfigError(f"--label needs one name per --analysis directory ({len(args.analysis)}), got "
                          f"{len(labels)}")
    if args.mask_run:  # every name must be a masking run of one of the caches, before anything is chosen
        known = set()
        for directory in args.analysis:
            report_path = Path(directory) / "report.json"
            cache = _cache_of(Path(directory), read_report(report_path)) if report_path.is_file() else None
            known |= {p.name for p in mask_run_dirs(cache)} if cache is not None else set()
        unknown = [run for run in args.mask_run if run not in known]
        if unknown:
            raise ConfigError(f"--mask-run {unknown[0]}: no masking run of that id with a Table 23 under the runs of "
                              f"the caches given (theirs: {', '.join(sorted(known)) or 'none'})")
    sources = [_source(d, name, args.mask_run) for d, name in zip(args.analysis, labels, strict=True)]
    names = [s.label for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"two directories have the same model name ({', '.join(names)}): give --label")
    for name, path in write_tables(args.report_dir, sources).items():
        print(f"{name}: {path}")
    return 0
