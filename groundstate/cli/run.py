"""``groundstate run PROGRAM``: any registered task (:mod:`groundstate.eval.tasks`) over a data set, durably."""

from __future__ import annotations

import argparse
import sys

from groundstate.cli.numbers import bound_options
from groundstate.cli.options import Parser, add_run_options, configure_lms, run_settings
from groundstate.cli.output import print_summary


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.eval.tasks import load_builtin_tasks

    run = sub.add_parser("run", help="run a program over a data set, durably (resumable, shardable)")
    run_sub = run.add_subparsers(dest="program", metavar="PROGRAM", parser_class=Parser)
    run_sub.required = True
    for task in load_builtin_tasks().values():
        p = run_sub.add_parser(task.name, help=task.help, description=task.help)
        p.add_argument("--data", default=None,
                       help="data file, or a shipped example ('example:qa', or a bare name that is not a file); "
                            "OffQuery programs: a file or 'synthetic', the default")
        if task.add_arguments:
            task.add_arguments(p)
            bound_options(p)
        add_run_options(p)
        p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from groundstate.errors import ConfigError
    from groundstate.eval.runner import RunAborted
    from groundstate.eval.tasks import run_task
    from groundstate.examples import resolve

    try:
        args.data = resolve(args.data)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc)) from None
    settings = run_settings(args)
    lm, lm_config = configure_lms(args)
    try:
        result = run_task(args.program, args, lm=lm, lm_config=lm_config, settings=settings)
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return 1
    print_summary(result)
    return 0
