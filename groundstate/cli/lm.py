"""``groundstate lm check``: which LM is built, one structured round trip, prompt and generation tokens/s (embedded
LM) and what a typical ReGround episode takes at that pace."""

from __future__ import annotations

import argparse
import json

from groundstate.cli.options import Parser, add_lm_options, lm_config_from_args
from groundstate.lm.contexts import usable_cores
from groundstate.lm.specs import describe_lm, get_lm


def register(sub: argparse._SubParsersAction) -> None:
    lm = sub.add_parser("lm", help="LM utilities")
    lm_sub = lm.add_subparsers(dest="lm_command", metavar="COMMAND", parser_class=Parser)
    lm_sub.required = True
    check = lm_sub.add_parser("check", help="which LM, one structured round trip, prompt and generation tokens/s, "
                              "a typical ReGround episode's time")
    add_lm_options(check)
    check.add_argument("--role", default=None, help="check the LM the --lm-config file gives this role")
    check.set_defaults(func=cmd_lm_check)


def cmd_lm_check(args: argparse.Namespace) -> int:
    from groundstate.eval.lm_check import check_lm, rate_lines  # noqa: PLC0415 (--help stays light)

    config = lm_config_from_args(args)
    entry = dict(config.spec_for(args.role))
    spec = entry.pop("model")
    lm = get_lm(spec, **{**entry, "cache": False})
    print(f"LM: {json.dumps(describe_lm(lm))}")
    report = check_lm(lm)
    if report.model_file:
        print(f"model file: {report.model_file} (loaded in {report.load_seconds:.2f}s)")
    print(f"structured call: choice={report.choice!r} facts={report.facts!r}")
    for line in rate_lines(report, cores=usable_cores() if report.rates is not None else None):
        print(line)
    return 0
