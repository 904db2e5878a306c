"""``groundstate run PROGRAM``: any registered program task (:mod:`groundstate.eval.tasks`) over a data set,
durably. Each program's options are its settings model's fields (:mod:`groundstate.cli.settings`)."""

from __future__ import annotations

import argparse
import sys

from groundstate.cli.options import Parser, add_run_options, context_for, run_settings
from groundstate.cli.output import print_summary
from groundstate.cli.settings import add_settings, settings_from
from groundstate.eval.runner import RunAborted
from groundstate.eval.tasks import get_task, program_tasks

DATA_HELP = ("data file, or a shipped example ('example:qa', or a bare name that is not a file); OffQuery programs: "
             "a file or 'synthetic', the default")

SHOW_TRACE_HELP = ("after the run, print each record's stored trace (ReGround stage by stage: the conflict pairs, "
                   "who was blamed, the facts kept and dropped, the answer, beside the gold labels); any stored run: "
                   "`groundstate runs show RUN --trace`")

#: Task options that the shared run options add (``--seed``, ``--allow-empty``), so a task does not add them again.
RUN_OPTIONS = ("seed", "allow_empty")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a program over a data set, durably (resumable, shardable)")
    run_sub = run.add_subparsers(dest="program", metavar="PROGRAM", parser_class=Parser)
    run_sub.required = True
    for task in program_tasks().values():
        p = run_sub.add_parser(task.name, help=task.help, description=task.help)
        p.add_argument("--data", default=None, help=DATA_HELP)
        add_settings(p, task.settings, skip=RUN_OPTIONS)
        add_run_options(p)
        p.add_argument("--show-trace", action="store_true", help=SHOW_TRACE_HELP)
        p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from groundstate.eval.assemble import run_task  # noqa: PLC0415 (--help stays light)

    task = get_task(args.program)
    settings = settings_from(task.settings, args)
    run = run_settings(args)
    try:
        result = run_task(task, settings, run, context=context_for(args))
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return 1
    print_summary(result)
    if args.show_trace:
        from groundstate.cli.runs import show_run_traces  # noqa: PLC0415 (--help stays light)

        show_run_traces(result.run_dir, getattr(settings, "data", None))
    return 0
