"""``groundstate compare``: several OffQuery programs on the same instances and LM, in one table."""

from __future__ import annotations

import argparse
from pathlib import Path

from groundstate.cli.options import add_report_dir, add_run_options, context_for, run_settings
from groundstate.cli.output import report_failed_runs
from groundstate.cli.run import RUN_OPTIONS
from groundstate.cli.settings import add_settings, settings_from
from groundstate.errors import ConfigError
from groundstate.eval.reground.settings import CompareSettings
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.report import comparison_rows, write_report
from groundstate.eval.runner import fingerprint
from groundstate.eval.tasks import offquery_names


def register(sub: argparse._SubParsersAction) -> None:
    names = list(OFFQUERY_TASKS)
    p = sub.add_parser("compare", help="run several OffQuery programs on the same data and LM; table + chart",
                       description="Runs each program (or reuses its stored run) and writes compare.md, "
                                   "compare.json and compare.png. Programs: " + ", ".join(names))
    p.add_argument("programs", nargs="*", metavar="PROGRAM", help="programs to compare: " + ", ".join(names))
    p.add_argument("--data", default=None, help="an OffQuery data file, or 'synthetic' (default)")
    add_report_dir(p, "where to write the report (default <runs-dir>/compare-<id>)")
    p.add_argument("--paper-tables", action="store_true",
                   help="also write the paper's Table 1 (T1/T2/T3 and gains over standard), Table 10 (M = 1..5 and "
                        "oracle) and Table 11 (tokens) layouts from every stored OffQuery run under --runs-dir "
                        "(run the programs first, or name them here)")
    add_settings(p, CompareSettings, skip=RUN_OPTIONS)
    add_run_options(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import console as tables_console  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import print_comparison  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.compare import compare_programs  # noqa: PLC0415 (--help stays light)

    console = tables_console()
    if not args.programs and not args.paper_tables:
        raise ConfigError("compare needs PROGRAM names (or --paper-tables to tabulate the stored runs)")
    paths: dict[str, str] = {}
    summaries: dict = {}
    settings = settings_from(CompareSettings, args)
    if args.programs:
        run = run_settings(args)
        context = context_for(args)
        summaries, notes, run_ids = compare_programs(args.programs, settings, run, context, on_start=lambda name:
                                                     console.print(name, style="bold", markup=False))
        metrics = ("t1", "t2", "t2_retention", "t2_exclusion", "t3")
        rows = comparison_rows(summaries, metrics=metrics, notes=notes)
        report_dir = Path(args.report_dir or Path(args.runs_dir) / f"compare-{fingerprint(run_ids, 10)}")
        judge = getattr(context.judge, "name", str(settings.judge_lm))
        title = f"OffQuery ({settings.condition} shared context; T2 judge: {judge})"
        paths = write_report(rows, report_dir, config={"runs": run_ids, "condition": settings.condition,
                                                       "t2_judge": judge},
                             title=title, metrics=metrics, chart_metrics=("t1", "t2", "t3"))
        print_comparison(rows, metrics, title=title, out=console)
    if args.paper_tables:
        from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)
        from groundstate.eval.reground.tables import (  # noqa: PLC0415 (--help stays light)
            TITLES,
            built_tables,
            cells,
            offquery_runs,
            write_tables,
        )

        runs = offquery_runs(args.runs_dir, offquery_names())
        tables_dir = Path(args.report_dir or Path(args.runs_dir) / "paper-tables")
        if args.programs and args.report_dir:
            tables_dir = tables_dir / "paper-tables"
        written = write_tables(runs, tables_dir)
        for name, rows in built_tables(runs).items():
            header, body = cells(name, rows)
            print_table(body, columns=header, title=TITLES[name], out=console)
        paths.update(written)
    console.print("wrote " + ", ".join(paths.values()), markup=False)
    return report_failed_runs(summaries)
