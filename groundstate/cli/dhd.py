"""``groundstate dhd ...``: Diverse Hypothesis Deliberation: generate, replay, analyze, mask, crossfit, simulate.

Every LM step is a durable run (resumable: the same command skips finished work; ``--shard i/N``), stored under
``<cache>/runs`` unless ``--runs-dir`` is given. Predictor names for ``--lm-config`` roles: ``recruiter.recruit``,
``hypothesizer.propose``, ``integrator.integrate``, ``solver.solve`` and ``judge`` (the evaluator's LM judge).

**Temperatures** (the authors' public configuration by default; each is sent with every call of its stage and
overrides the LM's own ``--temperature``): ``generate --recruiter-temperature`` (0) and
``--hypothesizer-temperature`` (0.7); ``replay``/``mask --integrator-temperature`` (0; the independent solver's
too); ``--judge-temperature`` (0). Repeats at temperature 0 are still separate calls (rollout ids), so their
variation is the model's own. The run configuration records them all (``temperatures``), so runs with other
temperatures never mix.

**Prompts:** ``replay``/``mask --integrator-prompt authors`` (default: the authors' protocol, think step by step,
a no-score note before every hypothesis, ``--integrator-max-tokens`` 4096) or ``compact`` (the earlier prompt;
runs made with it keep their run ids); ``generate --confidence level`` (default: low/medium/high with a reason) or
``number`` (0-1, the earlier format).

**Evaluator:** ``--evaluator judge`` (an LM judge sees the problem, the gold answer and the integrator's whole
response; proposals are judged from the proposed answer alone) or ``--evaluator rules`` (tolerance, option sets,
exact match; no LM). The default is ``judge`` when a judge LM is given (``--judge-lm`` or the ``--lm-config``
role ``judge``) and ``rules`` otherwise; ``--no-judge`` is ``--evaluator rules``.
"""

from __future__ import annotations

import argparse
import sys

from groundstate.cli.dhd_crossfit import cmd_crossfit
from groundstate.cli.dhd_simulate import register as register_simulate
from groundstate.cli.dhd_tables import register as register_tables
from groundstate.cli.numbers import level, positive_int, seed
from groundstate.cli.options import (
    add_call_threads,
    add_data_option,
    add_report_dir,
    add_run_options,
    add_runs_dir,
    context_for,
    run_settings,
)
from groundstate.cli.output import print_summary
from groundstate.cli.settings import add_settings, settings_from
from groundstate.errors import ConfigError
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.mask_sample import SAMPLE_FILE
from groundstate.eval.dhd.masking import CATEGORY_TITLES, failures_note, mask_cells
from groundstate.eval.dhd.settings import GenerateSettings, MaskSettings, ReplaySettings, SamplingSettings
from groundstate.eval.runner import RunAborted
from groundstate.eval.task import execute
from groundstate.eval.tasks import get_task

#: The integrator's and the evaluator's options, added once by :func:`_add_sampling`.
SAMPLING = ("evaluator", "no_judge", "judge_lm", "judge_api_base", "judge_temperature", "integrator_temperature",
            "integrator_prompt", "integrator_max_tokens", "vary_seed")

def _cache_default_out(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(runs_dir=None)
    for action in parser._actions:
        if action.dest == "runs_dir":
            action.help = "directory of run directories (default: <cache>/runs)"


def register(sub: argparse._SubParsersAction) -> None:
    dhd = sub.add_parser("dhd", help="Diverse Hypothesis Deliberation: generate messages, replay, analyze",
                         description="Diverse Hypothesis Deliberation: cache K role-based messages per problem, "
                         "replay the integrator with messages shown or hidden, and measure each message's "
                         "trajectory value.")
    dhd_sub = dhd.add_subparsers(dest="dhd_command", metavar="COMMAND", parser_class=type(dhd))
    dhd_sub.required = True

    p = dhd_sub.add_parser("generate", help="recruit roles and cache one message per role for each problem",
                           description="Load problems, then for every problem not yet in the cache: a recruiter "
                           "assigns K roles (never seeing the answer), K hypothesizers write one message each "
                           "(concurrently, without peers or the answer), and each proposal is evaluated. Messages "
                           "are generated once and reused by every replay.")
    add_data_option(p, "SciBench JSON, JEEBench JSON or JSONL problems")
    add_settings(p, GenerateSettings)
    add_call_threads(p, "problem")
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_generate)

    p = dhd_sub.add_parser("replay", help="replay the integrator with messages hidden (loo) or alone (single)",
                           description="Replay the cached messages. loo: the full pool (twice: the repeat pair) "
                           "vs the pool without each message; single: each message alone vs independent solving. "
                           "Pools are nested (the first K usable messages). Rerunning skips finished blocks; more "
                           "--repeats later runs only the new blocks.")
    add_settings(p, ReplaySettings, skip=SAMPLING)
    _add_sampling(p)
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_replay)

    p = dhd_sub.add_parser("analyze", help="statistics, labels file and report from the finished replays",
                           description="Disagreement rate, message values and groups (block effect (A + B) / 2 - "
                           "removal), hierarchical bootstrap, within-block permutation null, per-message BH/BY "
                           "selections on exact within-block permutation p-values (Table 19's column) and "
                           "problem-level BH/BY selections, strict counts, failed calls, flip direction and LOO "
                           "rates by K; writes labels.jsonl, pairs.jsonl, multiplicity.jsonl, report.md, "
                           "report.json and two charts.")
    _add_analysis_options(p)
    p.add_argument("--permutations", type=positive_int, default=5000,
                   help="permutations of the null of the group counts (default 5000)")
    p.add_argument("--null", choices=("block", "sign-flip"), default="block",
                   help="null of the counts and the per-message tests: within-block permutation of the block's "
                        "calls (default) or the old per-message sign flip (miscalibrated when messages share the "
                        "full-pool calls; its p-values cannot go below 0.0625 at five blocks)")
    p.add_argument("--full", choices=("mean", "a"), default="mean",
                   help="LOO block effect: mean of both full-pool replicates minus the removal (default, the "
                        "paper's) or replicate A only (caches replayed without the second full-pool call)")
    p.add_argument("--multiplicity-permutations", type=positive_int, default=100_000, metavar="N",
                   help="permutations per pattern of the problem-level max-statistic null behind BH/BY "
                        "(default 100000)")
    p.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--q", type=level, default=0.05, help="false-discovery level for BH/BY (default 0.05)")
    p.add_argument("--method", choices=("bootstrap", "sign-flip"), default="bootstrap",
                   help="separation rule of the message groups (default bootstrap)")
    p.add_argument("--label", default=None, metavar="NAME",
                   help="model name in the paper-layout tables (default: the cache directory's name)")
    p.add_argument("--no-tables", action="store_true",
                   help="skip the cross-fit and the paper-layout tables (tables.md, tables.json, two charts)")
    p.add_argument("--mask-run", default=None, metavar="RUN",
                   help="the masking run whose Table 23 the tables show (a run id; default: the cache's only one; "
                        "with several, name one)")
    p.set_defaults(func=cmd_analyze)

    p = dhd_sub.add_parser("mask", help="component masking (the paper's Table 23) on messages labelled by repeated "
                           "LOO replay",
                           description="Draws a stratified sample of messages from the repeated-LOO labels of `dhd "
                           "analyze` (W+, C+, W-, C-, indeterminate), fixes it in sample.json, then for each message "
                           "and repetition runs eight integrator calls: the full pool twice, its repeat twice, the "
                           "message removed, replaced by length-matched neutral filler, with its answer filled, with "
                           "its reasoning filled (the message keeps its slot). Prints integrator success per "
                           "category and variant in the layout of the paper's Table 23. Needs `dhd replay --mode loo "
                           "--repeats 5` and `dhd analyze` first.")
    add_settings(p, MaskSettings, only=("cache",))
    add_settings(p, MaskSettings, only=("per_category", "sample"), group=p.add_mutually_exclusive_group())
    add_settings(p, MaskSettings, skip=(*SAMPLING, "seed"))
    _add_sampling(p)
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_mask)

    p = dhd_sub.add_parser("crossfit", help="cross-fitted keep-or-remove choice on held-out replay blocks",
                           description="Per problem, choose on all but one LOO block whether to keep the full pool "
                           "or remove one message, score the choice on the held-out block (the paper's Tables "
                           "24-26): the main estimate scores the full pool as the mean of its two replicates, "
                           "replicates A and B alone are sensitivity rows; problem-clustered bootstrap intervals, "
                           "gains by benchmark, and the all-action and removal-identity shuffled controls.")
    _add_analysis_options(p)
    p.add_argument("--resamples", type=positive_int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--shuffles", type=positive_int, default=1000, help="shuffles per control (default 1000)")
    p.add_argument("--all-problems", action="store_true",
                   help="also use problems with failed replays (default: complete problems only; the others are "
                        "listed as excluded)")
    p.add_argument("--control-draw", choices=("problem", "block"), default="problem",
                   help="shuffled controls: one permutation per problem, kept on all its blocks (default), or one "
                        "per held-out block")

    p.set_defaults(func=cmd_crossfit)

    register_simulate(dhd_sub)
    register_tables(dhd_sub)


def _add_sampling(p: argparse.ArgumentParser) -> None:
    add_settings(p, SamplingSettings)
    add_call_threads(p, "work item")


def _add_analysis_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    add_report_dir(p, "report directory (default <cache>/analysis)")
    add_runs_dir(p, default=None, help="where the replay runs are (default <cache>/runs)")
    p.add_argument("--run", nargs="+", default=None, metavar="ID",
                   help="use only these replay runs (ids or prefixes) when several configurations exist")
    p.add_argument("--k", type=positive_int, default=None, help="main pool size (default: the largest replayed)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the resampling (default 0)")


# -- the durable steps --------------------------------------------------------------------------------------------
def _step(args: argparse.Namespace, name: str):
    """Run the DHD step ``name`` (a registered task) with the options' settings and print its summary; return
    ``(result, outcome)``: ``(None, None)`` for a run stopped by --max-error-rate (its summary printed), ``(None,
    counts)`` for a generate with nothing left to do."""
    from groundstate.eval.assemble import assemble  # noqa: PLC0415 (--help stays light)

    run = run_settings(args)
    context = context_for(args)
    task, settings, planned = assemble(name, settings_from(_model(name), args), context, run=run)
    try:
        result = execute(planned, run, context)
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return None, None
    if result is not None:
        print_summary(result)
    return result, (result.outcome if result is not None else planned.outcome)


def _model(name: str):
    return get_task(name).settings


def cmd_generate(args: argparse.Namespace) -> int:
    _, counts = _step(args, "dhd-generate")
    if counts is None:
        return 1
    print(f"{counts['problems']} problems: {counts['cached_before']} already cached, {counts['generated']} generated"
          + (f", {counts['failed']} failed (rerun to retry)" if counts["failed"] else "")
          + (f"; {counts['failed_messages']} hypothesizer failure(s) stored and left out of pools"
             if counts["failed_messages"] else "") + f"; cache {MessageCache(args.cache).dir}")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    result, short = _step(args, "dhd-replay")
    if result is None:
        return 1
    for k, n in short.items():
        if n:
            print(f"K={k}: {n} problem(s) left out (fewer than {k} usable messages)")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.analysis import analyze  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.effects import GROUPS  # noqa: PLC0415 (--help stays light)

    if args.permutations < 1 or args.multiplicity_permutations < 1:
        raise ConfigError("--permutations and --multiplicity-permutations must be at least 1")

    report = analyze(MessageCache(args.cache), args.report_dir, runs_dir=args.runs_dir, run_ids=args.run, k=args.k,
                     seed=args.seed, n_permutations=args.permutations, n_resamples=args.resamples, q=args.q,
                     method=args.method, full=args.full, null=args.null,
                     n_multiplicity=args.multiplicity_permutations, label=args.label, with_tables=not args.no_tables,
                     mask_run=args.mask_run)
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)

    rows = []
    for mode, section in report["modes"].items():
        groups = section["groups"]
        disagreement = (section.get("disagreement") or {}).get("rate")
        rows.append({"mode": mode, "K": section["K"], "messages": section["n_messages"],
                     "blocks": section["n_blocks"], **{g: groups[g] for g in GROUPS},
                     "permutation p": f"{section['permutation_null']['p_value']:.4f}",
                     "BH messages W+/W-/C+/C-": "/".join(str(section["fdr"]["counts"]["bh"][g]) for g in GROUPS),
                     "BH problems W+/W-/C+/C-": "/".join(str(section["multiplicity"]["bh"][g]) for g in GROUPS),
                     "failed calls": section["failures"]["n_failed_calls"],
                     "disagreement": "-" if disagreement is None else f"{100 * disagreement:.1f}%"})
    print_table(rows, title="message values by mode (W+/W-/C+/C-: messages per group)")
    _print_planted(report.get("planted_truth") or {})
    for name, path in report["paths"].items():
        print(f"{name}: {path}")
    return 0


def _print_planted(planted: dict) -> None:
    """A simulated cache's selections against its planted truth (:mod:`groundstate.eval.dhd.planted`)."""
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.dhd.planted import MEANING, recall_cells  # noqa: PLC0415 (--help stays light)

    for mode, entry in planted.items():
        header, rows = recall_cells(entry)
        clipped = entry.get("n_clipped") or 0
        print_table(rows, columns=header, headers=header,
                    title=f"{mode}: selections against the {entry['n_planted']} planted effects (simulated cache)",
                    caption=MEANING + (f"; {clipped} planted messages that clipping to [0, 1] left without an effect "
                                       "count as no effect" if clipped else ""))


def cmd_mask(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import print_table  # noqa: PLC0415 (--help stays light)

    result, outcome = _step(args, "dhd-mask")
    if result is None:
        return 1
    table, sample, labels = outcome
    drawn = ", ".join(f"{CATEGORY_TITLES[c]} {n}" for c, n in sample["drawn"].items() if n)
    print(f"sample: {len(sample['pairs'])} messages ({drawn}) from {labels.path} (LOO, K={labels.K}, up to "
          f"{labels.n_blocks} blocks), fixed in {result.run_dir / SAMPLE_FILE}")
    if sample["shortfall"]:
        print("fewer candidates than asked: " + ", ".join(
            f"{CATEGORY_TITLES[c]} {sample['drawn'][c]} of {sample['requested'][c]}" for c in sample["shortfall"]))
    header, body = mask_cells(table)
    print_table(body, columns=header,
                title=f"integrator success (%, no intervals) over {args.repeats} repetitions (Full and Repeat: two "
                      "outcomes each)")
    if failures_note(table):
        print(failures_note(table))
    return 0
