"""``groundstate data ...``: build, generate, validate and describe OffQuery data sets."""

from __future__ import annotations

import argparse
import json
import sys

from groundstate.cli import options  # configure_lms looked up at call time: tests stand in for it
from groundstate.cli.numbers import count, positive_int, seed
from groundstate.cli.options import add_allow_empty, add_data_option, add_lm_options, add_threads
from groundstate.conditions import CONDITIONS
from groundstate.errors import ConfigError, InputError, one_line
from groundstate.eval.benchmarks.offquery.synthetic import VARIANTS, generate


def register(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="OffQuery data: build from MediQ, generate synthetic, validate, stats")
    data_sub = data.add_subparsers(dest="data_command", metavar="COMMAND", parser_class=type(data))
    data_sub.required = True

    build = data_sub.add_parser("build", help="build a benchmark from source cases")
    build_sub = build.add_subparsers(dest="benchmark", metavar="BENCHMARK", parser_class=type(data))
    build_sub.required = True
    p = build_sub.add_parser("offquery", help="OffQuery-style healthcare instances from MediQ cases")
    add_data_option(p, "MediQ JSONL cases (id, question, context, ...)")
    p.add_argument("--builder", choices=("rule", "lm"), default="rule",
                   help="rule: deterministic corruption, no LM; lm: an LM writes misleading evidence (appendix B.2)")
    p.add_argument("--out", required=True, help="output JSONL of OffQuery instances")
    p.add_argument("--seed", type=seed, default=0, help="seed of the corruption choices (default 0)")
    p.add_argument("--limit", type=count, default=None, help="use only the first N cases")
    p.add_argument("--tag-split", action="store_true",
                   help="tag HEALTHCARE-S / HEALTHCARE-I by whether the LM answers from the shared context alone")
    add_threads(p, "cases (--builder lm)")
    p.add_argument("--skip-invalid", action="store_true", help="report and skip bad cases instead of stopping")
    add_allow_empty(p)
    add_lm_options(p)
    p.set_defaults(func=cmd_build_offquery)

    gen = data_sub.add_parser("generate", help="generate a synthetic benchmark (no LM, seeded)")
    gen_sub = gen.add_subparsers(dest="benchmark", metavar="BENCHMARK", parser_class=type(data))
    gen_sub.required = True
    p = gen_sub.add_parser("offquery", help="synthetic OffQuery instances with provably right answers")
    p.add_argument("--domain", choices=("healthcare", "disaster", "both"), default="healthcare",
                   help="which domain(s) to generate (default healthcare)")
    p.add_argument("--variant", choices=(*VARIANTS, "all"), default="main",
                   help="which corruption variant, or all of them (default main)")
    p.add_argument("--n", type=positive_int, default=20, help="instances per domain and variant")
    p.add_argument("--seed", type=seed, default=0, help="generator seed (default 0)")
    p.add_argument("--out", required=True, help="output JSONL")
    p.set_defaults(func=cmd_generate_offquery)

    p = data_sub.add_parser("validate", help="check a data file; one line per problem")
    add_data_option(p, "an OffQuery data file (JSON, JSONL or Parquet)")
    p.add_argument("--t2-truth", default=None,
                   help="the published T2 truth file of --data (task2_evaluation/truth/<name>.json)")
    p.add_argument("--t2-facts", default=None,
                   help="the published T2 facts file (task2_evaluation/facts/<name>.json; found beside the truth "
                        "file when not given): checks exactly that the truth file belongs to --data")
    p.add_argument("--condition", choices=CONDITIONS, default=None,
                   help="also require what this condition needs (a corrupted context for 'unreliable' and "
                        "'reliable-private-unreliable-shared')")
    p.add_argument("--skip-invalid", action="store_true", help="report bad records and check the rest")
    add_allow_empty(p)
    p.set_defaults(func=cmd_validate)

    p = data_sub.add_parser("stats", help="counts per domain, split, agents, facts, label balance")
    add_data_option(p, "an OffQuery data file (JSON, JSONL or Parquet)")
    p.add_argument("--t2-truth", default=None, help="the published T2 truth file of --data")
    p.add_argument("--t2-facts", default=None, help="the published T2 facts file beside the truth file")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    add_allow_empty(p)
    p.set_defaults(func=cmd_stats)


def cmd_generate_offquery(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.loader import save_instances  # noqa: PLC0415 (--help stays light)

    if args.n < 1:
        raise ConfigError("--n must be at least 1")
    domains = ("healthcare", "disaster") if args.domain == "both" else (args.domain,)
    variants = VARIANTS if args.variant == "all" else (args.variant,)
    instances = [x for d in domains for v in variants for x in generate(d, v, args.n, seed=args.seed)]
    save_instances(args.out, instances)
    print(f"wrote {len(instances)} instances to {args.out}")
    return 0


def cmd_build_offquery(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.loader import save_instances  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.offquery.mediq import load_mediq  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.offquery.mediq_lm import (  # noqa: PLC0415 (--help stays light)
        build_lm,
        tag_sufficiency,
    )
    from groundstate.eval.benchmarks.offquery.mediq_rule import (  # noqa: PLC0415 (--help stays light)
        BuildReport,
        build_rule,
    )

    problems: list[str] = []
    cases = load_mediq(args.data, skip_invalid=args.skip_invalid, problems=problems,
                       allow_empty=args.allow_empty)
    for line in problems:
        print(f"skipped: {line}", file=sys.stderr)
    if args.limit is not None:
        cases = cases[: args.limit]
    if args.builder == "lm" or args.tag_split:
        options.configure_lms(args)
    report = BuildReport()
    if args.builder == "rule":
        instances = build_rule(cases, seed=args.seed, report=report)
    else:
        instances = build_lm(cases, seed=args.seed, threads=args.threads, report=report)
    if args.tag_split:
        instances = tag_sufficiency(instances, threads=args.threads)
        failed = sum(1 for x in instances if x.split is None)
        tagged = {s: sum(1 for x in instances if x.split == s) for s in ("healthcare-s", "healthcare-i")}
        print(f"split: {tagged}" + (f", {failed} untagged (LM failures)" if failed else ""))
    if not instances and not args.allow_empty:
        for entry in report.skipped:
            print(f"skipped case {one_line(entry['case_id'])}: {one_line(entry['reason'])}", file=sys.stderr)
        raise InputError(f"no instance could be built from {len(cases)} case(s); nothing written to {args.out} "
                         "(pass --allow-empty to write an empty file)", file=args.data)
    save_instances(args.out, instances)
    for entry in report.skipped:
        print(f"skipped case {one_line(entry['case_id'])}: {one_line(entry['reason'])}", file=sys.stderr)
    if report.rejections:
        print(f"{len(report.rejections)} LM attempt(s) rejected (wrong answer = gold, no conflict, ...)",
              file=sys.stderr)
    print(f"wrote {len(instances)} instances from {len(cases)} cases to {args.out} ({len(report.skipped)} skipped)")
    return 0


def _load(args: argparse.Namespace, skip_invalid: bool, problems: list[str], condition=None):
    from groundstate.eval.benchmarks.offquery.loader import load_any  # noqa: PLC0415 (--help stays light)

    return load_any(args.data, t2_truth=args.t2_truth, condition=condition, skip_invalid=skip_invalid,
                    problems=problems, allow_empty=args.allow_empty, t2_facts=getattr(args, "t2_facts", None))


def cmd_validate(args: argparse.Namespace) -> int:
    """Every record is checked as every reader checks it (generated ones against the generator's rule too); the
    first bad record stops with one line, or with ``--skip-invalid`` each is reported and the rest checked."""
    problems: list[str] = []
    instances = _load(args, args.skip_invalid, problems, condition=args.condition)
    generated = [x for x in instances if (x.provenance or {}).get("structure")]
    for line in problems:
        print(line)
    checked = f" ({len(generated)} checked against the generator's rule)" if generated else ""
    print(f"{len(instances)} valid instances{checked}, {len(problems)} problem(s)")
    return 2 if problems else 0


def cmd_stats(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.offquery.stats import (  # noqa: PLC0415 (--help stays light)
        dataset_stats,
        format_stats,
    )

    instances = _load(args, False, [])
    stats = dataset_stats(instances)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0
