"""``groundstate compare``: several OffQuery programs on the same instances and LM, in one table."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli import add_run_options
    from groundstate.eval.reground.tasks import (
        BASELINE_HELP,
        _baseline_arguments,
        _reground_arguments,
        add_data_arguments,
    )

    names = ["reground", *BASELINE_HELP]
    p = sub.add_parser("compare", help="run several OffQuery programs on the same data and LM; table + chart",
                       description="Runs each program (or reuses its stored run) and writes compare.md, "
                                   "compare.json and compare.png. Programs: " + ", ".join(names))
    p.add_argument("programs", nargs="+", metavar="PROGRAM", help="programs to compare: " + ", ".join(names))
    p.add_argument("--data", default=None, help="an OffQuery data file, or 'synthetic' (default)")
    p.add_argument("--report-dir", default=None, help="where to write the report (default <out>/compare-<id>)")
    add_data_arguments(p)
    _reground_arguments(p)
    _baseline_arguments(p)
    add_run_options(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from groundstate.cli import run_task
    from groundstate.errors import ConfigError
    from groundstate.eval.report import comparison_rows, markdown_table, write_report
    from groundstate.eval.runner import RunAborted, fingerprint
    from groundstate.eval.tasks import load_builtin_tasks

    tasks = load_builtin_tasks()
    unknown = [p for p in args.programs if p not in tasks or p == "qa"]
    if unknown:
        raise ConfigError(f"unknown program '{unknown[0]}' for compare")
    console = Console()
    summaries, notes, run_ids = {}, {}, {}
    for name in dict.fromkeys(args.programs):
        console.print(f"[bold]{name}[/bold]")
        try:
            result = run_task(args, name)
        except RunAborted as exc:
            result = exc.result
            notes[name] = "stopped early"
            print(f"groundstate: {name}: {exc}", file=sys.stderr)
        summaries[name] = result.summary
        run_ids[name] = result.run_id
        if name == "oracle":
            notes[name] = "upper bound; T1/T2 from ground truth"
    rows = comparison_rows(summaries, notes=notes)
    report_dir = Path(args.report_dir or Path(args.out) / f"compare-{fingerprint(run_ids, 10)}")
    title = f"OffQuery ({args.condition} shared context)"
    paths = write_report(rows, report_dir, config={"runs": run_ids, "condition": args.condition}, title=title)
    print(markdown_table(rows, title=title))
    console.print("wrote " + ", ".join(paths.values()))
    return 0
