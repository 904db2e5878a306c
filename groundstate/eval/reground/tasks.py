"""OffQuery programs as runnable tasks: ``groundstate run reground|standard|oracle|... --data FILE|synthetic``.

Every OffQuery task shares the data options (a file, or ``synthetic`` with ``--domain/--variant/--n``), the
``--condition`` (which shared context the program sees) and the T2 judge (``--judge-lm``: ``auto`` by default,
the paper's LM judge on ``--lm`` when that is a real model and the lexical judge otherwise; or ``lexical``, or an
LM spec). Scores per instance are T1, T2 (with its halves, retention and exclusion) and T3
(:func:`groundstate.eval.reground.scores.offquery_scores`).
"""

from __future__ import annotations

import argparse
from typing import Any

from groundstate.eval.reground.saved import CONDITIONS, KEEP_RULES, MODES, ORACLE_ATTRIBUTIONS, ORDERINGS, TOPOLOGIES
from groundstate.eval.tasks import Task, register

OFFQUERY_OUTPUTS = ("misleading_agent", "state", "kept_facts", "removed_facts", "answer")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Options every OffQuery task takes (``--data`` itself is added by the CLI)."""
    parser.add_argument("--condition", choices=CONDITIONS, default="unreliable",
                        help="which shared context programs see (default unreliable)")
    parser.add_argument("--t2-truth", default=None,
                        help="the published T2 truth file of --data (task2_evaluation/truth/<name>.json)")
    parser.add_argument("--t2-facts", default=None,
                        help="the published T2 facts file (task2_evaluation/facts/<name>.json; found beside the "
                             "truth file when not given)")
    parser.add_argument("--domain", choices=("healthcare", "disaster", "both"), default="healthcare",
                        help="with --data synthetic: which domain(s)")
    parser.add_argument("--variant", default="main",
                        help="with --data synthetic: main, misleading-shared, multi-misleading, distributed or all")
    parser.add_argument("--n", type=int, default=20, help="with --data synthetic: instances per domain and variant")
    parser.add_argument("--synthetic-seed", type=int, default=0,
                        help="with --data synthetic: the generator's seed (default 0; --seed seeds the run)")
    if hasattr(parser, "alias"):  # the CLI's parser: the earlier spelling still works
        parser.alias("--data-seed", "--synthetic-seed")
    parser.add_argument("--judge-lm", default="auto",
                        help="T2 judge: 'auto' (default: the LM judge on --lm when --lm names a real model, as in "
                             "the paper; else the lexical judge), 'lexical' (deterministic, approximate) or an LM spec")


def load_offquery_data(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """The instances ``--data`` names, and a description of them for the run fingerprint."""
    from pathlib import Path

    from groundstate.errors import ConfigError
    from groundstate.eval.benchmarks.offquery.loader import load_any
    from groundstate.eval.benchmarks.offquery.synthetic import VARIANTS, generate
    from groundstate.eval.runner import file_hash

    data = getattr(args, "data", None) or "synthetic"
    condition = args.condition
    if data == "synthetic":
        domains = ("healthcare", "disaster") if args.domain == "both" else (args.domain,)
        variants = VARIANTS if args.variant == "all" else (args.variant,)
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown:
            raise ConfigError(f"unknown --variant {unknown[0]}; choose from {', '.join(VARIANTS)} or all")
        if args.n < 1:
            raise ConfigError("--n must be at least 1")
        instances = [x for d in domains for v in variants for x in generate(d, v, args.n, seed=args.synthetic_seed)]
        return instances, {"synthetic": {"domains": list(domains), "variants": list(variants), "n": args.n,
                                         "seed": args.synthetic_seed}}
    instances = load_any(data, t2_truth=args.t2_truth, condition=condition,
                         allow_empty=getattr(args, "allow_empty", False), t2_facts=getattr(args, "t2_facts", None))
    description = {"file": Path(data).name, "sha256": file_hash(data)}
    if args.t2_truth:
        description["t2_truth_sha256"] = file_hash(args.t2_truth)
    return instances, description


def offquery_outputs(prediction: Any) -> dict[str, Any]:
    out = {key: prediction.get(key) if hasattr(prediction, "get") else getattr(prediction, key, None)
           for key in OFFQUERY_OUTPUTS}
    flagged = prediction.get("misleading_statements") if hasattr(prediction, "get") else None
    if flagged is not None:
        out["misleading_statements"] = flagged
    return out


def t2_judge(args: argparse.Namespace):
    from groundstate.eval.reground.judges import judge_for

    if not hasattr(args, "_judge"):
        args._judge = judge_for(args.judge_lm, getattr(args, "lm", None), api_base=getattr(args, "api_base", None),
                                timeout=getattr(args, "lm_timeout", None))
    return args._judge


def _register(name: str, help_text: str, build, add_arguments=None, options=None, inputs=None) -> None:
    def add(parser: argparse.ArgumentParser) -> None:
        add_data_arguments(parser)
        if add_arguments:
            add_arguments(parser)

    def scorer_factory(args):
        from groundstate.eval.reground.scores import make_scorer
        from groundstate.eval.reground.statements import statement_scorer

        scorer = make_scorer(t2_judge(args), halves=True)
        return statement_scorer(scorer, t2_judge(args)) if getattr(args, "mode", "agent") == "statement" else scorer

    def task_options(args):
        return {"condition": args.condition, "judge": getattr(t2_judge(args), "name", args.judge_lm),
                **(options(args) if options else {})}

    register(Task(
        name=name,
        help=help_text,
        build=build,
        load=load_offquery_data,
        scorer=None,
        scorer_factory=scorer_factory,
        outputs=offquery_outputs,
        inputs=None,
        inputs_factory=(inputs or (lambda args: lambda record: record.inputs(args.condition))),
        add_arguments=add,
        options=task_options,
    ))


# -- ReGround ----------------------------------------------------------------------------------------------


def add_reground_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-candidates", type=int, default=3, help="M, the conflict rounds (default 3)")
    parser.add_argument("--multi-misleading", action="store_true", help="remove every flagged agent")
    parser.add_argument("--oracle-t1", action="store_true", help="skip attribution: trust the gold misleading agent")
    parser.add_argument("--stop-early", action="store_true",
                        help="let the conflict search stop when it finds no contradiction (default: always M rounds)")
    parser.add_argument("--keep-rule", choices=KEEP_RULES, default="authors",
                        help="reconstruction: keep facts that are supported or of low importance (authors, default) "
                             "or only supported / unverifiable-and-low ones (strict)")
    parser.add_argument("--mode", choices=MODES, default="agent",
                        help="find the misleading agent (default) or misleading statements spread over agents "
                             "(§E.4; scores statement precision/recall on instances that plant them)")
    parser.add_argument("--batch-facts", action="store_true",
                        help="reconstruction: check all shared-context facts in one call (same rule and evidence; "
                             "fewer tokens) instead of one call per fact as the authors do")


def _reground_build(args: argparse.Namespace):
    from groundstate.errors import ConfigError
    from groundstate.programs.reground.reground import ReGround

    if args.max_candidates < 1:
        raise ConfigError("--max-candidates must be at least 1")
    return ReGround(max_candidates=args.max_candidates, multi_misleading=args.multi_misleading,
                    oracle_t1=args.oracle_t1, stop_early=args.stop_early, keep_rule=args.keep_rule, mode=args.mode,
                    batch_facts=getattr(args, "batch_facts", False))


def _reground_inputs(args: argparse.Namespace):
    if args.oracle_t1:
        return lambda record: {**record.inputs(args.condition), "misleading": list(record.misleading)}
    return lambda record: record.inputs(args.condition)


_register("reground", "ReGround: verify evidence, reconstruct the shared state, resolve (OffQuery T1/T2/T3)",
          _reground_build, add_reground_arguments,
          options=lambda a: {"max_candidates": a.max_candidates, "multi_misleading": a.multi_misleading,
                             "oracle_t1": a.oracle_t1,
                             **({"stop_early": True} if a.stop_early else {}),
                             **({"keep_rule": a.keep_rule} if a.keep_rule != "authors" else {}),
                             **({"mode": a.mode} if a.mode != "agent" else {}),
                             **({"batch_facts": True} if getattr(a, "batch_facts", False) else {})},
          inputs=_reground_inputs)


# -- Baselines ---------------------------------------------------------------------------------------------


def add_baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=None,
                        help="discussion rounds, where the baseline has rounds (default: the program's own; "
                             "standard and confidence: 3, as the authors run them)")
    parser.add_argument("--topology", choices=TOPOLOGIES, default="all-to-all",
                        help="standard collaboration: who hears whom (default all-to-all)")
    parser.add_argument("--ordering", choices=ORDERINGS, default=None,
                        help="shared context before discussion, or private evidence first (default: the program's "
                             "own; standard and confidence: private-first, as the authors run them)")
    parser.add_argument("--oracle-attribution", choices=ORACLE_ATTRIBUTIONS, default="model",
                        help="oracle: T1 from a model reading all private evidence (the authors' oracle, default) "
                             "or from ground truth (the upper bound)")


def _baseline_settings(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The options the baseline ``name`` takes, with each unset option at the program's own default."""
    import inspect

    from groundstate.programs.reground.baselines import BASELINES

    parameters = inspect.signature(BASELINES[name].__init__).parameters
    given = {"rounds": args.rounds, "topology": args.topology, "ordering": args.ordering, "seed": args.seed,
             "oracle_t1": getattr(args, "oracle_attribution", None)}
    return {k: (v if v is not None else parameters[k].default) for k, v in given.items() if k in parameters}


def _baseline_builder(name: str):
    def build(args: argparse.Namespace):
        from groundstate.programs.reground.baselines import BASELINES

        return BASELINES[name](**_baseline_settings(name, args))

    return build


def _baseline_options(name: str):
    def options(args: argparse.Namespace) -> dict[str, Any]:
        return {k: v for k, v in _baseline_settings(name, args).items() if k in ("rounds", "topology", "ordering",
                                                                                "oracle_t1")}

    return options


def _oracle_inputs(args: argparse.Namespace):
    return lambda record: {**record.inputs(args.condition), "reliable_information": record.reliable_information(),
                           "misleading": list(record.misleading)}


BASELINE_HELP = {
    "oracle": "Oracle: decides from complete reliable information (upper bound; T2 from ground truth, T1 from a "
              "model reading all private evidence or, with --oracle-attribution gold, from ground truth)",
    "standard": "standard collaboration as the authors run it: opinions, 3 rounds, summarizer, updater, decision",
    "voting": "voting: independent states and decisions, majority",
    "robin": "robin: random sequential speaking order, each turn sees the earlier ones",
    "manager": "manager: a compact state carried forward and updated turn by turn",
    "instructor": "instructor: asks one agent a focused question per turn",
    "self-reflect": "self-reflect: agents choose reflection or debate",
    "confidence": "confidence: peer confidence (1-100) as an input signal",
}

for _name, _help in BASELINE_HELP.items():
    _register(_name, _help, _baseline_builder(_name), add_baseline_arguments, options=_baseline_options(_name),
              inputs=_oracle_inputs if _name == "oracle" else None)
