"""``groundstate dhd tables``: the paper-layout tables of several analysed caches side by side.

``dhd analyze`` already writes the tables of one cache; this command combines the analysis directories of several
(for instance one per model family, as the paper's tables set OSS beside Gemma) into one ``tables.md`` /
``tables.json`` with charts (:mod:`groundstate.eval.dhd.tables`). It reads only what analyze wrote
(``report.json``, ``crossfit.json``) and, when the cache has a masking run, its latest ``mask_table.json``; no
statistic is recomputed, so the numbers are exactly those of each cache's report.
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
    p.add_argument("--report-dir", required=True, metavar="DIR", help="where to write the combined tables")
    p.set_defaults(func=cmd_tables)


def _source(directory: str, label: str | None):
    from groundstate.eval.dhd.table_inputs import (  # noqa: PLC0415 (--help stays light)
        read_crossfit,
        read_mask_table,
        read_report,
    )
    from groundstate.eval.dhd.tables import TableSource  # noqa: PLC0415 (--help stays light)

    path = Path(directory)
    report_path = path / "report.json"
    if not report_path.is_file():
        raise InputError("has no report.json: run `groundstate dhd analyze --cache CACHE` first", file=str(path))
    report = read_report(report_path)
    crossfit = read_crossfit(path / "crossfit.json") if (path / "crossfit.json").is_file() else None
    mask = None
    cache_dir = Path(str(report.get("cache", "")))
    if not (cache_dir / "cache.json").is_file():  # a relative path from another working directory: the usual layout
        cache_dir = path.resolve().parent
    found = sorted((cache_dir / "runs").glob("dhd-mask*/mask_table.json"), key=lambda p: p.stat().st_mtime)
    if found:
        mask = read_mask_table(found[-1])
    name = label or cache_dir.resolve().name
    return TableSource(label=name, report=report, crossfit=crossfit, mask=mask,
                       crossfit_note=None if crossfit else "no crossfit.json beside the report")


def cmd_tables(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.tables import write_tables  # noqa: PLC0415 (--help stays light)

    labels = args.label or [None] * len(args.analysis)
    if len(labels) != len(args.analysis):
        raise ConfigError(f"--label needs one name per --analysis directory ({len(args.analysis)}), got "
                          f"{len(labels)}")
    sources = [_source(d, name) for d, name in zip(args.analysis, labels, strict=True)]
    names = [s.label for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"two directories have the same model name ({', '.join(names)}): give --label")
    for name, path in write_tables(args.report_dir, sources).items():
        print(f"{name}: {path}")
    return 0
