"""The ``groundstate`` command: one module per command group, each parsing options and printing, nothing else.

Every long job goes through the durable runner via a task or a function in ``groundstate.eval``; shared options
are defined once in :mod:`~groundstate.cli.options`. This floor may import every other floor; nothing imports it.
Every command has ``--help``. A mistake the user can fix (bad file, bad record, unknown LM spec, unreadable LM
config, bad option) prints one line and exits with status 2; an interrupted run exits 130 and resumes when the
same command is run again.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from groundstate.cli import consilience, data, dhd, experiment, hidden, lm, optimize, reground, run, runs
from groundstate.cli.options import Parser, add_verbose_options
from groundstate.cli.outputs import check_outputs
from groundstate.errors import GroundstateError, install_log_scrubbing, one_line, scrub_secrets

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

#: The command groups, in the order ``--help`` lists them.
GROUPS = (lm, run, runs, data, reground, optimize, hidden, consilience, dhd, experiment)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="groundstate", description="LM programs for multi-agent decisions from scattered, "
                    "partly wrong information (ReGround/OffQuery, DHD, Consilience).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for group in GROUPS:
        group.register(sub)
    add_verbose_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    install_log_scrubbing()  # a server's error body can echo the key; libraries log such errors
    try:
        check_outputs(args)  # before any work: an output onto an input, or of the wrong kind, is one line
        return int(args.func(args) or 0)
    except GroundstateError as exc:
        print(f"groundstate: error: {one_line(scrub_secrets(str(exc)), None)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("groundstate: interrupted; everything finished is kept. Run the same command again to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
