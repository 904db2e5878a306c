"""``groundstate compare``: several OffQuery programs on the same instances and LM, in one table.

``--paper-tables`` also writes the paper's Tables 1, 10 and 11 (:mod:`groundstate.eval.reground.tables`): experiment
specs built in memory from the same options, so each cell is the run of exactly those options, tabulated by the
experiment layer. Without PROGRAM names nothing runs: the tables plan the paper's programs with the options given
and show what is stored (cells not stored say "not run"); stored runs of other options are named in a note, never
mixed in.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from groundstate.cli.options import add_report_dir, add_run_options, context_for, run_settings
from groundstate.cli.output import report_failed_runs
from groundstate.cli.run import RUN_OPTIONS, SHOW_TRACE_HELP
from groundstate.cli.settings import add_settings, settings_from
from groundstate.errors import ConfigError
from groundstate.eval.reground.settings import CompareSettings
from groundstate.eval.reground.tasks import OFFQUERY_TASKS
from groundstate.eval.report import comparison_rows, write_report
from groundstate.eval.runner import fingerprint


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
                        "oracle) and Table 11 (tokens) layouts: each cell is the run of exactly these options (LM, "
                        "data, judge, program options, seed; 'not run' when none is stored), never the newest run; "
                        "with no PROGRAM it runs nothing and plans the paper's programs")
    add_settings(p, CompareSettings, skip=RUN_OPTIONS)
    add_run_options(p)
    p.add_argument("--show-trace", action="store_true", help=SHOW_TRACE_HELP)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import console as tables_console  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import print_comparison  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.metric_spec import header_lines  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.compare import (  # noqa: PLC0415 (--help stays light)
        compare_programs,
        compared_with,
    )

    console = tables_console()
    if not args.programs and not args.paper_tables:
        raise ConfigError("compare needs PROGRAM names (or --paper-tables to tabulate the stored runs of the paper's "
                          "programs)")
    paths: dict[str, str] = {}
    summaries: dict = {}
    settings = settings_from(CompareSettings, args)
    context = context_for(args)
    if args.programs:
        run = run_settings(args)
        summaries, notes, run_ids = compare_programs(args.programs, settings, run, context, on_start=lambda name:
                                                     console.print(name, style="bold", markup=False))
        metrics = ("t1", "t2", "t2_retention", "t2_exclusion", "t3")
        rows = comparison_rows(summaries, metrics=metrics, notes=notes)
        report_dir = Path(args.report_dir or Path(args.runs_dir) / f"compare-{fingerprint(run_ids, 10)}")
        scoring = compared_with(settings, context)
        title = f"OffQuery (condition {settings.condition}; T2 judge: {scoring['judge']})"
        lines = header_lines(scoring)
        paths = write_report(rows, report_dir, config={"runs": run_ids, "condition": settings.condition,
                                                       "t2_judge": getattr(context.judge, "name", None), **scoring},
                             title=title, metrics=metrics, chart_metrics=("t1", "t2", "t3"), notes=lines)
        print_comparison(rows, metrics, title=title, out=console, notes=lines)
        if args.show_trace:
            from groundstate.cli.runs import show_run_traces  # noqa: PLC0415 (--help stays light)

            for run_id in run_ids.values():
                show_run_traces(Path(run.out) / run_id, settings.data)
    if args.paper_tables:
        paths.update(_paper_tables(args, settings, context, console))
    console.print("wrote " + ", ".join(paths.values()), markup=False)
    return report_failed_runs(summaries)


def _paper_tables(args: argparse.Namespace, settings, context, console) -> dict[str, str]:
    """Tables 1, 10 and 11 of exactly compare's options (:mod:`groundstate.eval.reground.tables`), printed and
    written; the stored OffQuery runs that are no cell of them are named in a note."""

    from groundstate.cli.experiment import print_built_table  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.options import note, run_settings  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.tables import paper_tables, stray_runs, write_tables  # noqa: PLC0415 (--help stays light)
    from groundstate.lm.specs import describe_lm  # noqa: PLC0415 (--help stays light)

    model = describe_lm(context.lm)["model"] or "configured"
    tables = paper_tables(settings, args.programs, run_settings(args), lms=lambda cell: context.lm_pair(),
                          model=model, note=note)
    tables_dir = Path(args.report_dir or Path(args.runs_dir) / "paper-tables")
    if args.programs and args.report_dir:
        tables_dir = tables_dir / "paper-tables"
    written = write_tables(tables, tables_dir)
    for table in tables.values():
        print_built_table(table, console)
    strays = stray_runs(args.runs_dir, tables)
    if strays:
        shown = ", ".join(strays[:5]) + (f" and {len(strays) - 5} more" if len(strays) > 5 else "")
        console.print(f"note: {len(strays)} stored OffQuery run(s) under {args.runs_dir} are no cell of these tables "
                      f"(another LM, decoding, judge, data, seed or program option): {shown}", markup=False)
    return written
