"""``groundstate hidden ...``: hidden-profile tasks (the Consilience wing's data and reference protocols).

    groundstate hidden generate travel --n 200 --seed 0 --out data/travel.jsonl
    groundstate hidden validate --data data/travel.jsonl
    groundstate hidden run --data tasks.jsonl --protocol hidden-post --rounds 3     # simulated agents (default)
    groundstate hidden run --data tasks.jsonl --protocol full-info --agents lm --lm-config team.toml

``--agents lm`` gives agent ``i`` the LM of role ``agent.i`` in ``--lm-config`` (``[default]`` otherwise), so a
group can be heterogeneous. ``--agents sim`` (the default of ``hidden run``: offline and fast) runs the seeded
LM-free agents of :mod:`groundstate.programs.consilience.simulated` (``--seed`` is their seed); every task then
needs per-fact support. Runs are stored under ``--runs-dir`` like any other run (resumable, shardable).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from groundstate.cli import options  # configure_lms looked up at call time: tests stand in for it
from groundstate.cli.numbers import count, nonnegative, positive_int, seed
from groundstate.cli.options import (
    add_agent_options,
    add_allow_empty,
    add_call_threads,
    add_data_option,
    add_lm_options,
    add_progress_option,
    add_run_options,
    add_support_options,
    agent_settings,
    context_for,
    run_settings,
)
from groundstate.cli.output import print_summary
from groundstate.cli.settings import add_settings
from groundstate.errors import ConfigError, one_line
from groundstate.eval.consilience.settings import ProtocolSettings
from groundstate.eval.consilience.support import annotate_tasks, support_path
from groundstate.eval.runner import RunAborted
from groundstate.eval.stats import format_ci, wilson_ci


def register(sub: argparse._SubParsersAction) -> None:
    hidden = sub.add_parser("hidden", help="hidden-profile tasks: generate travel tasks, validate task files")
    hidden_sub = hidden.add_subparsers(dest="hidden_command", metavar="COMMAND", parser_class=type(hidden))
    hidden_sub.required = True

    gen = hidden_sub.add_parser("generate", help="generate a hidden-profile benchmark")
    gen_sub = gen.add_subparsers(dest="benchmark", metavar="BENCHMARK", parser_class=type(hidden))
    gen_sub.required = True
    p = gen_sub.add_parser("travel", help="group-travel tasks (appendix F): four plans, private preferences",
                           description="Write group-travel hidden-profile tasks as groundstate JSON Lines (or "
                           "Parquet when --out ends in .parquet). The default builder is deterministic and LM-free; "
                           "--builder lm has an LM write each task, "
                           "checked by the same validator (generate -> validate -> repair -> review).")
    p.add_argument("--n", type=positive_int, default=20, help="number of tasks (default 20)")
    p.add_argument("--seed", type=seed, default=0, help="generator seed (default 0)")
    p.add_argument("--start", type=count, default=0, help="index of the first task (for extending a data set)")
    p.add_argument("--travelers", type=int, choices=(3, 4), default=None,
                   help="travelers per task (default: 3 or 4, varying by task)")
    p.add_argument("--out", required=True,
                   help="output file of hidden-profile tasks: JSON Lines, or Parquet for a .parquet path")
    p.add_argument("--builder", choices=("rule", "lm"), default="rule",
                   help="rule: deterministic, no LM (default); lm: an LM writes each task")
    p.add_argument("--max-repairs", type=count, default=2, help="LM builder: repair requests per candidate")
    p.add_argument("--no-review", action="store_true", help="LM builder: skip the LM semantic review")
    p.add_argument("--rewrite-statements", action="store_true",
                   help="LM builder: replace LM statements with the canonical wording of their predicates")
    add_lm_options(p)
    p.set_defaults(func=cmd_generate_travel)

    p = hidden_sub.add_parser("validate", help="check a HiddenBench file or a groundstate task file",
                              description="Validate a HiddenBench JSON file or groundstate JSONL of hidden-profile "
                              "tasks; records with a travel structure are re-checked with the travel validator. "
                              "Prints one line per problem; exit status 2 if there is any. Travel tasks also get "
                              "a report of how often rules reading only the public plans find the answer.")
    add_data_option(p, "a HiddenBench JSON file or groundstate JSONL/Parquet of hidden-profile tasks")
    p.add_argument("--skip-invalid", action="store_true", help="report bad records and check the rest")
    p.add_argument("--max-leak", type=nonnegative, default=None, metavar="POINTS",
                   help="count it as a problem when a rule reading only the public plans of the travel tasks finds "
                   "the answer more than POINTS percentage points above chance (default: only warn above 3)")
    add_allow_empty(p)
    p.set_defaults(func=cmd_validate)

    register_run(hidden_sub)
    register_annotate(hidden_sub)


def _distribution(letters: list[str]) -> str:
    counts = Counter(letters)
    return ", ".join(f"{k} {counts[k]}" for k in sorted(counts)) or "none"


def cmd_generate_travel(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.convert import to_hidden_profile  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.generator import (  # noqa: PLC0415 (--help stays light)
        generate_hidden_travel,
    )
    from groundstate.eval.benchmarks.travel.lm_generator import generate_travel_lm  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.predicates import score_plans  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.validator import fingerprint  # noqa: PLC0415 (--help stays light)

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

        options.configure_lms(args)
        travel, failures = generate_travel_lm(args.n, seed=args.seed, start=args.start, travelers=args.travelers,
                                              max_repairs=args.max_repairs, review=not args.no_review,
                                              rewrite_statements=args.rewrite_statements)
        tasks = [to_hidden_profile(t, id=f"travel-lm-{args.seed}-{i}",
                                   provenance={"source": "travel-lm", "seed": args.seed, "index": i,
                                               "fingerprint": fingerprint(t), "scores": score_plans(t)})
                 for i, t in travel.items()]
        for failure in failures:
            print(f"no valid task for index {failure['index']} after {failure['attempts']} attempt(s): "
                  + one_line("; ".join(map(str, failure["issues"][:3]))), file=sys.stderr)
    save_hidden_tasks(args.out, tasks)
    print(f"wrote {len(tasks)} travel tasks to {args.out}" + (f" ({len(failures)} failed)" if failures else ""))
    print(f"answers: {_distribution([t.correct for t in tasks])}")
    return 1 if failures and not tasks else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.convert import check_record  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.benchmarks.travel.leak import DEFAULT_MAX_LEAK, leak_rates  # noqa: PLC0415 (heavy: scipy)

    max_leak = getattr(args, "max_leak", None)
    if max_leak is not None and not max_leak >= 0:
        raise ConfigError("--max-leak must be a non-negative number of percentage points")
    problems: list[str] = []
    tasks = load_hidden_tasks(args.data, skip_invalid=args.skip_invalid, problems=problems,
                              allow_empty=args.allow_empty)
    travel = [task for task in tasks if task.structure and "agents" in task.structure]
    checked = len(travel)
    for task in travel:
        problems += [f"{one_line(args.data)}: record {one_line(task.id)}: {one_line(issue)}"
                     for issue in check_record(task)]
    leak = leak_rates(travel)
    limit = DEFAULT_MAX_LEAK if max_leak is None else max_leak / 100
    if max_leak is not None and leak.leaks(limit):
        problems.append(f"{one_line(args.data)}: public-only rule '{leak.worst}' beats chance by "
                        f"{100 * leak.excess:.1f} points (--max-leak {max_leak:g})")
    for line in problems:
        print(line)
    for line in leak.lines(limit):
        print(line)
    note = f" ({checked} checked against the travel validator)" if checked else ""
    letters = [t.correct for t in tasks]
    answers = f"; answers: {_distribution(letters)}" if tasks and all(len(x) == 1 for x in letters) else ""
    print(f"{len(tasks)} tasks loaded{note}, {len(problems)} problem(s){answers}")
    return 2 if problems else 0


# -- hidden run --------------------------------------------------------------------------------------------
def register_run(hidden_sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the ``hidden`` command group."""
    p = hidden_sub.add_parser(
        "run", help="run a discussion protocol (hidden-pre, hidden-post, full-info, or HiddenBench's) over tasks",
        description="Runs Hidden-Pre (vote without discussion), Hidden-Post (fixed round-robin discussion, then "
                    "vote) or Full-Info (every agent gets every fact, then votes) on each task, with LM or simulated "
                    "agents, and prints task accuracy, vote accuracy, rounds, words and tokens. The hiddenbench-* "
                    "protocols follow HiddenBench's own simulation script (clues dealt afresh, shuffled facts, an "
                    "initial vote with a rationale, 15 rounds in which each LM agent holds its own chat and sees the "
                    "others' latest messages, a first-vote tie rule); `hiddenbench` also reports its initial votes, "
                    "which are Hidden-Pre. `hiddenbench-full` does not discuss, as the Consilience paper's Full-Info "
                    "(--full-discussion: as HiddenBench's script).")
    add_data_option(p, "hidden-profile tasks (HiddenBench JSON or JSONL)")
    add_settings(p, ProtocolSettings, only=("protocol", "rounds"))
    group = p.add_argument_group("HiddenBench's protocols", "how they depart from HiddenBench's script (by default "
                                 "they do not, but for Full-Info)")
    add_settings(p, ProtocolSettings, only=("fixed_holders", "special_share", "special_prompt", "full_discussion",
                                            "flat_transcript"), group=group)
    add_agent_options(p)
    add_support_options(p)
    add_run_options(p)
    p.set_defaults(func=cmd_hidden_run)


def cmd_hidden_run(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.evaluate import run_protocol  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.consilience.metrics import pooled_vote_accuracy  # noqa: PLC0415 (--help stays light)

    settings = agent_settings(ProtocolSettings, args)
    run = run_settings(args)
    try:
        result = run_protocol(settings, run, context_for(args))
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return 1
    print_summary(result)
    print(f"vote accuracy pooled over all votes (§4.2): {format_ci(pooled_vote_accuracy(result.rows))}")
    if settings.protocol == "hiddenbench":
        initial = [v for r in result.rows if (v := (r.get("scores") or {}).get("initial_task_accuracy")) is not None]
        failed = sum(1 for r in result.rows if "initial_task_accuracy" in (r.get("score_errors") or {}))
        task_ci = format_ci({**wilson_ci(int(sum(initial)), len(initial)), "failed": failed})
        print(f"initial votes (Hidden-Pre of this run): task accuracy {task_ci}, "
              f"vote accuracy pooled {format_ci(pooled_vote_accuracy(result.rows, prefix='initial_'))}")
    return 0


# -- hidden annotate ---------------------------------------------------------------------------------------
def register_annotate(hidden_sub: argparse._SubParsersAction) -> None:
    """Add ``annotate`` to the ``hidden`` command group."""
    p = hidden_sub.add_parser(
        "annotate", help="rate every fact's support for each option with an LM (for simulated agents)",
        description="Asks an LM how each fact of each task, on its own, bears on each option (-2..+2); the LM "
                    "never sees the correct answer or the rationale. The ratings are written beside the task "
                    "file (<data>.support.json) and reused: a second run asks only about facts not yet rated. "
                    "Simulated agents (--agents sim) then run on them; without this file they use the "
                    "hidden-profile design default (see groundstate.programs.consilience.annotate).")
    add_data_option(p, "hidden-profile tasks (HiddenBench JSON or JSONL)")
    p.add_argument("--out", default=None, metavar="FILE", help="the support file (default <data>.support.json)")
    p.add_argument("--replace", action="store_true",
                   help="start afresh when the existing support file was made with another LM or prompts")
    add_call_threads(p, "task")
    add_allow_empty(p)
    add_lm_options(p)
    add_progress_option(p, help="no progress counter (on a terminal, 'annotated N/M tasks' as tasks finish)")
    p.set_defaults(func=cmd_hidden_annotate)


def cmd_hidden_annotate(args: argparse.Namespace) -> int:
    from groundstate.eval.consilience.data import load_tasks  # noqa: PLC0415 (--help stays light)
    from groundstate.programs.consilience.annotate import SupportAnnotator  # noqa: PLC0415 (--help stays light)

    tasks, _ = load_tasks(args.data, args.allow_empty)
    lm, _ = options.configure_lms(args)
    out = args.out or support_path(args.data)

    def progress(done: int, total: int) -> None:
        if options.shows_progress(args) and sys.stderr.isatty():
            print(f"\rannotated {done}/{total} tasks", end="" if done < total else "\n", file=sys.stderr)

    data = annotate_tasks(tasks, args.data, SupportAnnotator(), lm, out=out, replace=args.replace,
                          threads=args.call_threads, progress=progress)
    facts = sum(len(v) for v in data["support"].values())
    print(f"{facts} facts of {len(tasks)} tasks rated -> {out}")
    for failure in data["failures"][:5]:
        print(f"not rated: task {one_line(failure['task'], 80)}: {one_line(repr(str(failure['fact'])[:60]))}: "
              f"{one_line(failure['error'], 200)}", file=sys.stderr)
    if data["failures"]:
        print(f"{len(data['failures'])} fact(s) could not be rated; run the same command again to retry them",
              file=sys.stderr)
        return 1
    return 0
