"""``groundstate hidden ...``: hidden-profile task data: generate travel tasks, validate task files.

``groundstate hidden run`` is added by :mod:`groundstate.cli.hidden_run` when that module is present.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli import add_allow_empty, add_lm_options

    hidden = sub.add_parser("hidden", help="hidden-profile tasks: generate travel tasks, validate task files")
    hidden_sub = hidden.add_subparsers(dest="hidden_command", metavar="COMMAND", parser_class=type(hidden))
    hidden_sub.required = True

    gen = hidden_sub.add_parser("generate", help="generate a hidden-profile benchmark")
    gen_sub = gen.add_subparsers(dest="benchmark", metavar="BENCHMARK", parser_class=type(hidden))
    gen_sub.required = True
    p = gen_sub.add_parser("travel", help="group-travel tasks (appendix F): four plans, private preferences",
                           description="Write group-travel hidden-profile tasks as groundstate JSON Lines. The "
                           "default builder is deterministic and LM-free; --builder lm has an LM write each task, "
                           "checked by the same validator (generate -> validate -> repair -> review).")
    p.add_argument("--n", type=int, default=20, help="number of tasks (default 20)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="index of the first task (for extending a data set)")
    p.add_argument("--travelers", type=int, choices=(3, 4), default=None,
                   help="travelers per task (default: 3 or 4, varying by task)")
    p.add_argument("--out", required=True, help="output JSONL of hidden-profile tasks")
    p.add_argument("--builder", choices=("rule", "lm"), default="rule",
                   help="rule: deterministic, no LM (default); lm: an LM writes each task")
    p.add_argument("--max-repairs", type=int, default=2, help="LM builder: repair requests per candidate")
    p.add_argument("--no-review", action="store_true", help="LM builder: skip the LM semantic review")
    p.add_argument("--rewrite-statements", action="store_true",
                   help="LM builder: replace LM statements with the canonical wording of their predicates")
    add_lm_options(p)
    p.set_defaults(func=cmd_generate_travel)

    p = hidden_sub.add_parser("validate", help="check a HiddenBench file or a groundstate task file",
                              description="Validate a HiddenBench JSON file or groundstate JSONL of hidden-profile "
                              "tasks; records with a travel structure are re-checked with the travel validator. "
                              "Prints one line per problem; exit status 2 if there is any.")
    p.add_argument("file")
    p.add_argument("--skip-invalid", action="store_true", help="report bad records and check the rest")
    add_allow_empty(p)
    p.set_defaults(func=cmd_validate)

    try:
        from groundstate.cli.hidden_run import register_run
    except ImportError:
        pass
    else:
        register_run(hidden_sub)


def _distribution(letters: list[str]) -> str:
    counts = Counter(letters)
    return ", ".join(f"{k} {counts[k]}" for k in sorted(counts)) or "none"


def cmd_generate_travel(args: argparse.Namespace) -> int:
    from groundstate.errors import ConfigError
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.convert import to_hidden_profile
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.eval.benchmarks.travel.lm_generator import generate_travel_lm
    from groundstate.eval.benchmarks.travel.predicates import score_plans
    from groundstate.eval.benchmarks.travel.validator import fingerprint

    if args.n < 1:
        raise ConfigError("--n must be at least 1")
    if args.start < 0:
        raise ConfigError("--start must not be negative")
    if args.builder == "rule":
        tasks = generate_hidden_travel(args.n, seed=args.seed, start=args.start, travelers=args.travelers)
        failures: list[dict] = []
    else:
        if args.max_repairs < 0:
            raise ConfigError("--max-repairs must not be negative")
        from groundstate.cli import configure_lms

        configure_lms(args)
        travel, failures = generate_travel_lm(args.n, seed=args.seed, start=args.start, travelers=args.travelers,
                                              max_repairs=args.max_repairs, review=not args.no_review,
                                              rewrite_statements=args.rewrite_statements)
        tasks = [to_hidden_profile(t, id=f"travel-lm-{args.seed}-{i}",
                                   provenance={"source": "travel-lm", "seed": args.seed, "index": i,
                                               "fingerprint": fingerprint(t), "scores": score_plans(t)})
                 for i, t in travel.items()]
        for failure in failures:
            print(f"no valid task for index {failure['index']} after {failure['attempts']} attempt(s): "
                  + "; ".join(failure["issues"][:3]), file=sys.stderr)
    save_hidden_tasks(args.out, tasks)
    print(f"wrote {len(tasks)} travel tasks to {args.out}" + (f" ({len(failures)} failed)" if failures else ""))
    print(f"answers: {_distribution([t.correct for t in tasks])}")
    return 1 if failures and not tasks else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from groundstate.errors import one_line
    from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks
    from groundstate.eval.benchmarks.travel.convert import check_record

    problems: list[str] = []
    tasks = load_hidden_tasks(args.file, skip_invalid=args.skip_invalid, problems=problems,
                              allow_empty=args.allow_empty)
    checked = 0
    for task in tasks:
        if not task.structure or "agents" not in task.structure:
            continue
        checked += 1
        problems += [f"{one_line(args.file)}: record {one_line(task.id)}: {one_line(issue)}"
                     for issue in check_record(task)]
    for line in problems:
        print(line)
    note = f" ({checked} checked against the travel validator)" if checked else ""
    letters = [t.correct for t in tasks]
    answers = f"; answers: {_distribution(letters)}" if tasks and all(len(x) == 1 for x in letters) else ""
    print(f"{len(tasks)} tasks loaded{note}, {len(problems)} problem(s){answers}")
    return 2 if problems else 0
