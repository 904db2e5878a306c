"""``groundstate dhd ...``: Diverse Hypothesis Deliberation: generate, replay, analyze, mask, crossfit, simulate.

Every LM step is a durable run (resumable: the same command skips finished work; ``--shard i/N``), stored under
``<cache>/runs`` unless ``--runs-dir`` is given. Predictor names for ``--lm-config`` roles: ``recruiter.recruit``,
``hypothesizer.propose``, ``integrator.integrate``, ``solver.solve`` and ``judge`` (the evaluator's LM judge).

**Temperatures** (the authors' public configuration by default; each is sent with every call of its stage and
overrides the LM's own ``--temperature``): ``generate --recruiter-temperature`` (0) and
``--hypothesizer-temperature`` (0.7); ``replay``/``mask --integrator-temperature`` (0; the independent solver's
too; ``--sample-temperature`` is its earlier name, still accepted); ``--judge-temperature`` (0). Repeats at
temperature 0 are still separate calls (rollout ids), so their variation is the model's own. The run
configuration records them all (``temperatures``), so runs with other temperatures never mix.

**Evaluator:** ``--evaluator judge`` (an LM judge sees the problem, the gold answer and the integrator's whole
response; proposals are judged from the proposed answer alone) or ``--evaluator rules`` (tolerance, option sets,
exact match; no LM). The default is ``judge`` when a judge LM is given (``--judge-lm`` or the ``--lm-config``
role ``judge``) and ``rules`` otherwise; ``--no-judge`` is ``--evaluator rules``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from groundstate.cli.numbers import count, level, positive_int, seed, temperature

SAMPLE_HELP = ("the integrator's (and independent solver's) sampling temperature (default 0, as the authors run it); "
               "every replay is a separate call with its own rollout id at any temperature, so at 0 repeats differ "
               "only by the model's own variation. --sample-temperature is the earlier name of this option")
EVALUATOR_MODES = ("judge", "rules")


def _cache_default_out(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(runs_dir=None)
    for action in parser._actions:
        if action.dest == "runs_dir":
            action.help = "directory of run directories (default: <cache>/runs)"


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli.options import add_call_threads, add_data_option, add_run_options
    from groundstate.eval.benchmarks.problems import FORMATS

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
    add_data_option(p, "SciBench JSON, JEEBench JSON or JSONL problems", old=("--problems",))
    p.add_argument("--format", choices=(*FORMATS, "auto"), default="auto", help="problem file format (default auto)")
    p.add_argument("--k", type=positive_int, default=5, help="roles and messages per problem (default 5)")
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    p.add_argument("--skip-invalid", action="store_true", help="report bad problem records and use the rest")
    p.add_argument("--recruiter-temperature", type=temperature, default=0.0, metavar="T",
                   help="the recruiter's sampling temperature (default 0, as the authors run it)")
    p.add_argument("--hypothesizer-temperature", type=temperature, default=0.7, metavar="T",
                   help="the hypothesizers' sampling temperature (default 0.7, as the authors run it)")
    _add_evaluator(p)
    add_call_threads(p, "problem")
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_generate)

    p = dhd_sub.add_parser("replay", help="replay the integrator with messages hidden (loo) or alone (single)",
                           description="Replay the cached messages. loo: the full pool (twice: the repeat pair) "
                           "vs the pool without each message; single: each message alone vs independent solving. "
                           "Pools are nested (the first K usable messages). Rerunning skips finished blocks; more "
                           "--repeats later runs only the new blocks.")
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    p.add_argument("--mode", choices=("loo", "single"), required=True, help="replay mechanism")
    p.add_argument("--repeats", type=positive_int, default=1, metavar="B",
                   help="replay blocks per problem and K (default 1)")
    p.add_argument("--k", type=positive_int, nargs="+", default=None, metavar="K",
                   help="pool sizes (default from the cache's k: 1..k for loo, k for single; 5 if the cache "
                        "does not record k)")
    _add_sampling(p)
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_replay)

    p = dhd_sub.add_parser("analyze", help="statistics, labels file and report from the finished replays",
                           description="Disagreement rate, message values and groups (block effect (A + B) / 2 - "
                           "removal), hierarchical bootstrap, within-block permutation null, problem-level BH/BY "
                           "selections, strict counts, failed calls, flip direction and LOO rates by K; writes "
                           "labels.jsonl, pairs.jsonl, multiplicity.jsonl, report.md, report.json and two charts.")
    _add_analysis_options(p)
    p.add_argument("--permutations", type=positive_int, default=5000,
                   help="permutations of the null of the group counts (default 5000)")
    p.add_argument("--null", choices=("block", "sign-flip"), default="block",
                   help="null of the counts: within-block permutation of the block's calls (default) or the old "
                        "per-message sign flip (miscalibrated when messages share the full-pool calls)")
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
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--per-category", type=count, nargs="+", default=None, metavar="N",
                      help="messages per category: one number for all, or five for W+ C+ W- C- indeterminate "
                           "(default 10 3 3 2 4, the paper's sample)")
    size.add_argument("--sample", type=positive_int, default=None, metavar="N",
                      help="N messages in all, spread round-robin over the five categories")
    p.add_argument("--repeats", type=positive_int, default=5, metavar="R", help="repetitions per message (default 5)")
    p.add_argument("--labels", default=None, metavar="FILE",
                   help="labels.jsonl written by `dhd analyze` from repeated LOO replay (default "
                        "<cache>/analysis/labels.jsonl)")
    p.add_argument("--k", type=positive_int, default=None, help="pool size (default: the pool size of the labels)")
    p.add_argument("--same-problem", action="store_true",
                   help="allow several sampled messages from one problem (default: at most one per problem, as in "
                        "the authors' control manifest)")
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
    from groundstate.cli.dhd_crossfit import cmd_crossfit

    p.set_defaults(func=cmd_crossfit)

    from groundstate.cli.dhd_simulate import register as register_simulate
    from groundstate.cli.dhd_tables import register as register_tables

    register_simulate(dhd_sub)
    register_tables(dhd_sub)


def _add_sampling(p: argparse.ArgumentParser) -> None:
    from groundstate.cli.options import add_call_threads

    p.add_argument("--integrator-temperature", "--sample-temperature", dest="integrator_temperature",
                   type=temperature, default=0.0, metavar="T", help=SAMPLE_HELP)
    p.add_argument("--vary-seed", choices=("auto", "on", "off"), default="auto",
                   help="derive the sampling seed from the rollout id (auto: on for the embedded LM, whose sampler "
                        "would otherwise repeat itself at a temperature above 0)")
    _add_evaluator(p)
    add_call_threads(p, "work item")


def _add_evaluator(p: argparse.ArgumentParser) -> None:
    p.add_argument("--evaluator", choices=EVALUATOR_MODES, default=None,
                   help="how answers are graded: judge (an LM judge sees the problem, the gold answer and the whole "
                        "response, as in the paper; a proposal is judged from its proposed answer alone) or rules "
                        "(tolerance, option sets, exact match; no LM). In both an answer with no usable value, or "
                        "hedging between several values, is wrong. Default: judge when a judge LM is given "
                        "(--judge-lm or the --lm-config role 'judge'), else rules")
    p.add_argument("--no-judge", action="store_true", help="the same as --evaluator rules (the earlier spelling)")
    p.add_argument("--judge-lm", default=None, metavar="SPEC",
                   help="LM spec of the judge, like --lm (for more settings use the --lm-config role 'judge'); "
                        "makes judge the default evaluator")
    p.add_argument("--judge-temperature", type=temperature, default=0.0, metavar="T",
                   help="the judge's sampling temperature (default 0, as the authors run it)")


def _add_analysis_options(p: argparse.ArgumentParser) -> None:
    from groundstate.cli.options import add_report_dir, add_runs_dir

    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    add_report_dir(p, "report directory (default <cache>/analysis)", old=("--out",))
    add_runs_dir(p, default=None, help="where the replay runs are (default <cache>/runs)", old=("--runs",))
    p.add_argument("--run", nargs="+", default=None, metavar="ID",
                   help="use only these replay runs (ids or prefixes) when several configurations exist")
    p.add_argument("--k", type=positive_int, default=None, help="main pool size (default: the largest replayed)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the resampling (default 0)")


# -- shared --------------------------------------------------------------------------------------------------------
def _options(args: argparse.Namespace, lm: Any, extra: dict[str, Any] | None = None):
    from groundstate.cli.options import backend_settings
    from groundstate.eval.dhd.run import RunOptions
    from groundstate.eval.runner import parse_shard
    from groundstate.lm.specs import describe_lm

    return RunOptions(out=args.runs_dir, threads=args.threads, workers=args.call_threads, limit=args.limit,
                      shard=parse_shard(args.shard), max_error_rate=args.max_error_rate,
                      progress=not args.no_progress, lm=describe_lm(lm), extra=extra,
                      backend=backend_settings(args))


def _programs(args: argparse.Namespace, lm: Any, lm_config: Any, temperature: float | None = None, k: int = 5):
    """The DHD program and evaluator the options describe (``temperature``, if given, is the integrator's)."""
    import warnings

    from groundstate.errors import ConfigError
    from groundstate.lm.specs import is_embedded
    from groundstate.programs.dhd import deliberation
    from groundstate.programs.dhd.evaluator import AnswerEvaluator

    if args.no_judge and args.evaluator == "judge":
        raise ConfigError("--no-judge and --evaluator judge contradict each other; give one")
    choice = getattr(args, "vary_seed", "auto")
    vary_seed = is_embedded(lm) if choice == "auto" else choice == "on"
    if temperature is None:
        temperature = getattr(args, "integrator_temperature", deliberation.DEFAULT_INTEGRATOR_TEMPERATURE)
    program = deliberation.DiverseHypothesisDeliberation(
        k=k, vary_seed=vary_seed, max_workers=args.call_threads, integrator_temperature=temperature,
        recruiter_temperature=getattr(args, "recruiter_temperature", deliberation.DEFAULT_RECRUITER_TEMPERATURE),
        hypothesizer_temperature=getattr(args, "hypothesizer_temperature",
                                         deliberation.DEFAULT_HYPOTHESIZER_TEMPERATURE))
    evaluator = AnswerEvaluator(mode="rules" if args.no_judge else args.evaluator, temperature=args.judge_temperature)
    if args.judge_lm:
        lm_config.roles = {"judge": {"model": args.judge_lm}, **lm_config.roles}
    lm_config.apply(program)
    lm_config.apply(evaluator)
    # DSPy warns that a rollout id "has no effect" at temperature 0; here it does (it keeps repeats separate calls)
    warnings.filterwarnings("ignore", message="rollout_id has no effect when temperature=0")
    return program, evaluator, vary_seed


def _finish(result: Any) -> None:
    from groundstate.cli.output import print_summary

    print_summary(result)


def _run(fn, *args: Any, **kwargs: Any):
    """Call a DHD step; a run stopped by --max-error-rate prints its summary and returns ``None``."""
    from groundstate.eval.runner import RunAborted

    try:
        return fn(*args, **kwargs)
    except RunAborted as exc:
        _finish(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return None


# -- commands ------------------------------------------------------------------------------------------------------
def cmd_generate(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.errors import ConfigError
    from groundstate.eval.benchmarks.problems import load_problems
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.run import generate

    if args.k < 1:
        raise ConfigError("--k must be at least 1")
    skipped: list[str] = []
    problems = load_problems(args.data, args.format, skip_invalid=args.skip_invalid, problems=skipped)
    for line in skipped:
        print(f"skipped: {line}", file=sys.stderr)
    if not problems:
        raise ConfigError(f"no usable problems in {args.data}")
    lm, lm_config = configure_lms(args)
    program, evaluator, _ = _programs(args, lm, lm_config, k=args.k)
    cache = MessageCache(args.cache)
    out = _run(generate, cache, problems, program=program, evaluator=evaluator, k=args.k, options=_options(args, lm),
               source=args.data)
    if out is None:
        return 1
    result, counts = out
    if result is not None:
        _finish(result)
    print(f"{counts['problems']} problems: {counts['cached_before']} already cached, {counts['generated']} generated"
          + (f", {counts['failed']} failed (rerun to retry)" if counts["failed"] else "")
          + (f"; {counts['failed_messages']} hypothesizer failure(s) stored and left out of pools"
             if counts["failed_messages"] else "") + f"; cache {cache.dir}")
    return 0


def _cache_k(cache) -> int:
    """The cache's pool size: its recorded ``k``, else its largest pool, else 5."""
    k = cache.meta().get("k")
    if isinstance(k, int) and not isinstance(k, bool) and k > 0:
        return k
    sizes = [len(entry.pool()) for entry in cache.entries().values()]
    return max(sizes) if sizes and max(sizes) > 0 else 5


def cmd_replay(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.run import replay

    cache = MessageCache(args.cache)
    cache.require()
    k = _cache_k(cache)
    ks = args.k or (list(range(1, k + 1)) if args.mode == "loo" else [k])
    lm, lm_config = configure_lms(args)
    program, evaluator, vary_seed = _programs(args, lm, lm_config)
    out = _run(replay, cache, args.mode, ks, args.repeats, program=program, evaluator=evaluator,
               options=_options(args, lm), temperature=args.integrator_temperature, vary_seed=vary_seed)
    if out is None:
        return 1
    result, short = out
    _finish(result)
    for k, n in short.items():
        if n:
            print(f"K={k}: {n} problem(s) left out (fewer than {k} usable messages)")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from groundstate.errors import ConfigError
    from groundstate.eval.dhd.analysis import analyze
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.effects import GROUPS

    if args.permutations < 1 or args.multiplicity_permutations < 1:
        raise ConfigError("--permutations and --multiplicity-permutations must be at least 1")

    report = analyze(MessageCache(args.cache), args.report_dir, runs_dir=args.runs_dir, run_ids=args.run, k=args.k,
                     seed=args.seed, n_permutations=args.permutations, n_resamples=args.resamples, q=args.q,
                     method=args.method, full=args.full, null=args.null,
                     n_multiplicity=args.multiplicity_permutations, label=args.label, with_tables=not args.no_tables)
    from groundstate.cli.tables import print_table

    rows = []
    for mode, section in report["modes"].items():
        groups = section["groups"]
        disagreement = (section.get("disagreement") or {}).get("rate")
        rows.append({"mode": mode, "K": section["K"], "messages": section["n_messages"],
                     "blocks": section["n_blocks"], **{g: groups[g] for g in GROUPS},
                     "permutation p": f"{section['permutation_null']['p_value']:.4f}",
                     "BH problems W+/W-/C+/C-": "/".join(str(section["multiplicity"]["bh"][g]) for g in GROUPS),
                     "failed calls": section["failures"]["n_failed_calls"],
                     "disagreement": "-" if disagreement is None else f"{100 * disagreement:.1f}%"})
    print_table(rows, title="message values by mode (W+/W-/C+/C-: messages per group)")
    for name, path in report["paths"].items():
        print(f"{name}: {path}")
    return 0


def cmd_mask(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.cli.tables import print_table
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.mask_sample import SAMPLE_FILE, default_labels_path, load_repeated_labels, resolve_quotas
    from groundstate.eval.dhd.masking import CATEGORY_TITLES, failures_note, mask_cells
    from groundstate.eval.dhd.run import mask

    cache = MessageCache(args.cache)
    cache.require()
    resolve_quotas(args.per_category, args.sample, {})  # bad sizes stop here, before anything is loaded
    # the labels are checked before any LM is set up: without repeated-replay labels nothing starts
    labels = load_repeated_labels(args.labels or default_labels_path(cache.dir), k=args.k, cache_dir=cache.dir)
    lm, lm_config = configure_lms(args)
    program, evaluator, vary_seed = _programs(args, lm, lm_config, temperature=args.integrator_temperature)
    out = _run(mask, cache, args.repeats, per_category=args.per_category, sample_size=args.sample, labels=labels,
               seed=args.seed, one_per_problem=not args.same_problem, program=program, evaluator=evaluator,
               options=_options(args, lm), temperature=args.integrator_temperature, vary_seed=vary_seed)
    if out is None:
        return 1
    result, table, sample = out
    _finish(result)
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
