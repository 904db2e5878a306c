"""``groundstate dhd ...``: Diverse Hypothesis Deliberation: generate, replay, analyze, mask, crossfit.

Every LM step is a durable run (resumable: the same command skips finished work; ``--shard i/N``), stored under
``<cache>/runs`` unless ``--out`` is given. Predictor names for ``--lm-config`` roles: ``recruiter.recruit``,
``hypothesizer.propose``, ``integrator.integrate``, ``solver.solve`` and ``judge`` (the evaluator's LM judge).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

SAMPLE_HELP = ("sampling temperature of replay calls (default 0.7): each replay is an independent sample with its "
               "own rollout id; at 0 repeats are not independent")


def _cache_default_out(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(out=None)
    for action in parser._actions:
        if action.dest == "out":
            action.help = "directory of run directories (default: <cache>/runs)"


def register(sub: argparse._SubParsersAction) -> None:
    from groundstate.cli.options import add_run_options
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
    p.add_argument("--problems", required=True, metavar="FILE", help="SciBench JSON, JEEBench JSON or JSONL problems")
    p.add_argument("--format", choices=(*FORMATS, "auto"), default="auto", help="problem file format (default auto)")
    p.add_argument("--k", type=int, default=5, help="roles and messages per problem (default 5)")
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    p.add_argument("--skip-invalid", action="store_true", help="report bad problem records and use the rest")
    p.add_argument("--no-judge", action="store_true",
                   help="never ask the LM judge (text answers the rules cannot settle count as failures)")
    p.add_argument("--workers", type=int, default=8, help="concurrent LM calls per problem (default 8)")
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
    p.add_argument("--repeats", type=int, default=1, metavar="B", help="replay blocks per problem and K (default 1)")
    p.add_argument("--k", type=int, nargs="+", default=None, metavar="K",
                   help="pool sizes (default: 1 2 3 4 5 for loo, 5 for single)")
    _add_sampling(p)
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_replay)

    p = dhd_sub.add_parser("analyze", help="statistics, labels file and report from the finished replays",
                           description="Disagreement rate, message values and groups, hierarchical bootstrap, "
                           "permutation null, BH/BY selections, strict counts, flip direction and LOO rates by K; "
                           "writes labels.jsonl, pairs.jsonl, report.md, report.json and two charts.")
    _add_analysis_options(p)
    p.add_argument("--permutations", type=int, default=5000, help="within-block sign-flip permutations (default 5000)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--q", type=float, default=0.05, help="false-discovery level for BH/BY (default 0.05)")
    p.add_argument("--method", choices=("bootstrap", "sign-flip"), default="bootstrap",
                   help="separation rule of the message groups (default bootstrap)")
    p.set_defaults(func=cmd_analyze)

    p = dhd_sub.add_parser("mask", help="component masking on a sample of (problem, message) pairs",
                           description="For each sampled pair: full pool, its repeat, the message removed, replaced "
                           "by a neutral placeholder, with its answer hidden, with only its answer kept; each "
                           "--repeats times. Prints integrator success per sample category and variant.")
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    p.add_argument("--sample", type=int, required=True, metavar="N", help="number of (problem, message) pairs")
    p.add_argument("--repeats", type=int, default=5, metavar="R", help="repetitions per pair (default 5)")
    p.add_argument("--labels", default=None, metavar="FILE",
                   help="labels.jsonl from `dhd analyze` to draw the sample by category (default: the LOO replays)")
    p.add_argument("--k", type=int, default=None, help="pool size (default: every usable message)")
    p.add_argument("--runs", default=None, metavar="DIR", help="where the replay runs are (default <cache>/runs)")
    _add_sampling(p)
    add_run_options(p)
    _cache_default_out(p)
    p.set_defaults(func=cmd_mask)

    p = dhd_sub.add_parser("crossfit", help="cross-fitted keep-or-remove choice on held-out replay blocks",
                           description="Per problem, choose on all but one LOO block whether to keep the full pool "
                           "or remove one message, score the choice on the held-out block, with problem-clustered "
                           "bootstrap and two shuffled controls (replicates A and B of the full pool).")
    _add_analysis_options(p)
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--shuffles", type=int, default=1000, help="shuffles per control (default 1000)")
    p.add_argument("--all-problems", action="store_true",
                   help="also use problems with failed replays (default: complete problems only)")
    p.set_defaults(func=cmd_crossfit)


def _add_sampling(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample-temperature", type=float, default=0.7, help=SAMPLE_HELP)
    p.add_argument("--vary-seed", choices=("auto", "on", "off"), default="auto",
                   help="derive the sampling seed from the rollout id (auto: on for the embedded LM, whose sampler "
                        "would otherwise repeat itself)")
    p.add_argument("--no-judge", action="store_true",
                   help="never ask the LM judge (text answers the rules cannot settle count as failures)")
    p.add_argument("--workers", type=int, default=8, help="concurrent LM calls per work item (default 8)")


def _add_analysis_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", required=True, metavar="DIR", help="the message cache directory")
    p.add_argument("--out", default=None, metavar="DIR", help="report directory (default <cache>/analysis)")
    p.add_argument("--runs", default=None, metavar="DIR", help="where the replay runs are (default <cache>/runs)")
    p.add_argument("--run", nargs="+", default=None, metavar="ID",
                   help="use only these replay runs (ids or prefixes) when several configurations exist")
    p.add_argument("--k", type=int, default=None, help="main pool size (default: the largest replayed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")


# -- shared --------------------------------------------------------------------------------------------------------
def _options(args: argparse.Namespace, lm: Any, extra: dict[str, Any] | None = None):
    from groundstate.errors import ConfigError
    from groundstate.eval.dhd.run import RunOptions
    from groundstate.eval.runner import parse_shard
    from groundstate.lm.specs import describe_lm

    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    return RunOptions(out=args.out, threads=args.threads, workers=args.workers, limit=args.limit,
                      shard=parse_shard(args.shard), max_error_rate=args.max_error_rate,
                      progress=not args.no_progress and sys.stderr.isatty(), lm=describe_lm(lm), extra=extra)


def _programs(args: argparse.Namespace, lm: Any, lm_config: Any, temperature: float | None = None, k: int = 5):
    from groundstate.lm.specs import is_embedded
    from groundstate.programs.dhd.deliberation import DiverseHypothesisDeliberation
    from groundstate.programs.dhd.evaluator import AnswerEvaluator

    choice = getattr(args, "vary_seed", "auto")
    vary_seed = is_embedded(lm) if choice == "auto" else choice == "on"
    program = DiverseHypothesisDeliberation(k=k, temperature=temperature, vary_seed=vary_seed,
                                            max_workers=args.workers)
    evaluator = AnswerEvaluator(use_judge=not args.no_judge)
    lm_config.apply(program)
    lm_config.apply(evaluator)
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
    problems = load_problems(args.problems, args.format, skip_invalid=args.skip_invalid, problems=skipped)
    for line in skipped:
        print(f"skipped: {line}", file=sys.stderr)
    if not problems:
        raise ConfigError(f"no usable problems in {args.problems}")
    lm, lm_config = configure_lms(args)
    program, evaluator, _ = _programs(args, lm, lm_config, k=args.k)
    cache = MessageCache(args.cache)
    out = _run(generate, cache, problems, program=program, evaluator=evaluator, k=args.k,
               options=_options(args, lm, {"judge": not args.no_judge}), source=args.problems)
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


def cmd_replay(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.run import replay

    cache = MessageCache(args.cache)
    cache.require()
    ks = args.k or ([1, 2, 3, 4, 5] if args.mode == "loo" else [5])
    lm, lm_config = configure_lms(args)
    program, evaluator, vary_seed = _programs(args, lm, lm_config, temperature=args.sample_temperature)
    out = _run(replay, cache, args.mode, ks, args.repeats, program=program, evaluator=evaluator,
               options=_options(args, lm, {"judge": not args.no_judge}), temperature=args.sample_temperature,
               vary_seed=vary_seed)
    if out is None:
        return 1
    result, short = out
    _finish(result)
    for k, n in short.items():
        if n:
            print(f"K={k}: {n} problem(s) left out (fewer than {k} usable messages)")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.analysis import analyze
    from groundstate.eval.dhd.cache import MessageCache

    report = analyze(MessageCache(args.cache), args.out, runs_dir=args.runs, run_ids=args.run, k=args.k,
                     seed=args.seed, n_permutations=args.permutations, n_resamples=args.resamples, q=args.q,
                     method=args.method)
    for mode, section in report["modes"].items():
        groups = section["groups"]
        line = (f"{mode} K={section['K']}: {section['n_messages']} messages x {section['n_blocks']} blocks; "
                f"W+ {groups['W+']}, W- {groups['W-']}, C+ {groups['C+']}, C- {groups['C-']}; "
                f"permutation p={section['permutation_null']['p_value']:.4f}; "
                f"BH {section['fdr']['n_bh']}, BY {section['fdr']['n_by']}")
        if "disagreement" in section and section["disagreement"].get("rate") is not None:
            line += f"; disagreement {100 * section['disagreement']['rate']:.1f}%"
        print(line)
    for name, path in report["paths"].items():
        print(f"{name}: {path}")
    return 0


def cmd_mask(args: argparse.Namespace) -> int:
    from groundstate.cli.options import configure_lms
    from groundstate.eval.dhd.analysis import load_labels
    from groundstate.eval.dhd.cache import MessageCache
    from groundstate.eval.dhd.masking import mask_markdown
    from groundstate.eval.dhd.run import mask

    cache = MessageCache(args.cache)
    cache.require()
    labels = load_labels(args.labels) if args.labels else None
    lm, lm_config = configure_lms(args)
    program, evaluator, vary_seed = _programs(args, lm, lm_config, temperature=args.sample_temperature)
    out = _run(mask, cache, args.sample, args.repeats, program=program, evaluator=evaluator,
               options=_options(args, lm, {"judge": not args.no_judge}), seed=args.seed, labels=labels, k=args.k,
               temperature=args.sample_temperature, vary_seed=vary_seed, runs_dir=args.runs)
    if out is None:
        return 1
    result, table, sample = out
    _finish(result)
    print(f"integrator success (%) on {len(sample)} pairs x {args.repeats} repetitions:")
    print(mask_markdown(table))
    return 0


def cmd_crossfit(args: argparse.Namespace) -> int:
    from groundstate.eval.dhd.analysis import crossfit
    from groundstate.eval.dhd.cache import MessageCache

    result = crossfit(MessageCache(args.cache), args.out, runs_dir=args.runs, run_ids=args.run, k=args.k,
                      seed=args.seed, n_resamples=args.resamples, n_shuffles=args.shuffles,
                      complete_only=not args.all_problems)
    for name, entry in result["replicates"].items():
        gain = entry["gain"]
        low = "-" if gain.get("low") is None else f"{100 * gain['low']:+.2f}"
        high = "-" if gain.get("high") is None else f"{100 * gain['high']:+.2f}"
        full = entry.get("full_accuracy")
        fit = entry.get("crossfit_accuracy")
        print(f"replicate {name} (K={result['K']}): full {100 * full:.2f}% -> cross-fit {100 * fit:.2f}%, "
              f"gain {100 * gain['mean']:+.2f} pp [{low}, {high}] over {gain.get('n')} problems"
              if full is not None and fit is not None and gain.get("mean") is not None
              else f"replicate {name}: not enough complete problems")
    print(f"stored in {result['path']}")
    return 0
