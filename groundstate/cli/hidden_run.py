"""``groundstate hidden run``: a reference discussion protocol over a file of hidden-profile tasks, durably.

    groundstate hidden run --tasks tasks.jsonl --protocol hidden-post --agents sim --rounds 3
    groundstate hidden run --tasks tasks.jsonl --protocol full-info --agents lm --lm-config team.toml

``--agents lm`` gives agent ``i`` the LM of role ``agent.i`` in ``--lm-config`` (``[default]`` otherwise), so a
group can be heterogeneous. ``--agents sim`` runs the seeded LM-free agents of :mod:`groundstate.programs.consilience.simulated`
(``--seed`` is their seed); every task then needs per-fact support. Runs are stored under ``--out`` like any
other run (resumable, shardable); the per-task scores are task accuracy, vote accuracy, rounds and words, and
the summary adds LM tokens.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

AGENT_KINDS = ("lm", "sim")


def register_run(hidden_sub: argparse._SubParsersAction) -> None:
    """Add ``run`` to the ``hidden`` command group."""
    from groundstate.cli import add_run_options
    from groundstate.programs.consilience.protocols import PROTOCOLS

    p = hidden_sub.add_parser(
        "run", help="run a discussion protocol (hidden-pre, hidden-post, full-info) over hidden-profile tasks",
        description="Runs Hidden-Pre (vote without discussion), Hidden-Post (fixed round-robin discussion, then "
                    "vote) or Full-Info (every agent gets every fact, then votes) on each task, with LM or simulated "
                    "agents, and prints task accuracy, vote accuracy, rounds, words and tokens.")
    p.add_argument("--tasks", required=True, metavar="FILE", help="hidden-profile tasks (JSON Lines)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="hidden-post", help="the protocol (default hidden-post)")
    p.add_argument("--rounds", type=int, default=3, help="round-robin rounds for hidden-post (default 3)")
    add_agent_options(p)
    add_run_options(p)
    p.set_defaults(func=cmd_hidden_run)


def add_agent_options(p: argparse.ArgumentParser) -> None:
    """``--agents lm|sim`` and the simulated agents' parameters."""
    from groundstate.programs.consilience.simulated import SimParams

    defaults = SimParams()
    p.add_argument("--agents", choices=AGENT_KINDS, default="lm",
                   help="'lm' (agent i uses role agent.i of --lm-config) or 'sim' (seeded simulated agents)")
    sim = p.add_argument_group("simulated agents (--agents sim)")
    sim.add_argument("--sim-beta", type=float, default=defaults.beta,
                     help=f"belief sharpness on summed support (default {defaults.beta})")
    sim.add_argument("--sim-noise", type=float, default=defaults.noise,
                     help=f"std of the per-option noise on beliefs (default {defaults.noise})")
    sim.add_argument("--sim-recall", type=float, default=defaults.recall,
                     help=f"probability a fact comes to mind when speaking (default {defaults.recall})")
    sim.add_argument("--sim-shared-bias", type=float, default=defaults.shared_bias,
                     help=f"weight of shared vs private facts on free turns (default {defaults.shared_bias})")
    sim.add_argument("--sim-facts-per-message", type=int, default=defaults.facts_per_message,
                     help=f"facts stated per message (default {defaults.facts_per_message})")


def build_team(args: argparse.Namespace, tasks: list[Any], tasks_file: str) -> tuple[Any, dict[str, Any], Any]:
    """``(team, agents description, LM description)`` from ``--agents`` and its options."""
    from groundstate.cli import configure_lms
    from groundstate.errors import InputError
    from groundstate.lm.specs import describe_lm
    from groundstate.programs.consilience.agents import LMTeam
    from groundstate.programs.consilience.simulated import SimTeam

    if args.agents == "sim":
        params = sim_params(args)
        unannotated = next((t for t in tasks if not t.support), None)
        if unannotated is not None:
            raise InputError("simulated agents need per-fact support; annotate the task or use --agents lm",
                             file=tasks_file, record=unannotated.id, field="support")
        return SimTeam(params, args.seed), {"kind": "sim", "params": asdict(params), "seed": args.seed}, {"model": None}
    lm, lm_config = configure_lms(args)
    team = LMTeam(lambda i: lm_config.lm_for(f"agent.{i}"))
    return team, {"kind": "lm", "lm_config": lm_config.describe() if lm_config.roles else None}, describe_lm(lm)


def cmd_hidden_run(args: argparse.Namespace) -> int:
    from groundstate.cli import print_summary
    from groundstate.eval.runner import RunAborted

    try:
        result = run_hidden(args)
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return 1
    print_summary(result)
    from groundstate.eval.consilience.metrics import pooled_vote_accuracy
    from groundstate.eval.stats import format_ci

    print(f"vote accuracy pooled over all votes (§4.2): {format_ci(pooled_vote_accuracy(result.rows))}")
    return 0


def load_tasks(path: str, allow_empty: bool = False) -> tuple[list[Any], dict[str, Any]]:
    """The tasks in ``path`` (HiddenBench JSON or groundstate JSONL) and a description of the file for the run
    fingerprint. A file with no tasks is an error unless ``allow_empty``."""
    from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks
    from groundstate.eval.runner import file_hash

    tasks = load_hidden_tasks(path, allow_empty=allow_empty)
    return tasks, {"file": Path(path).name, "sha256": file_hash(path)}


def sim_params(args: argparse.Namespace):
    """The :class:`~groundstate.programs.consilience.simulated.SimParams` the ``--sim-*`` options describe."""
    from groundstate.errors import ConfigError
    from groundstate.programs.consilience.simulated import SimParams

    try:
        return SimParams(beta=args.sim_beta, noise=args.sim_noise, recall=args.sim_recall,
                         shared_bias=args.sim_shared_bias, facts_per_message=args.sim_facts_per_message)
    except ValueError as exc:
        raise ConfigError(str(exc).replace("SimParams.", "--sim-").replace("_", "-")) from None


def run_hidden(args: argparse.Namespace):
    """Build the agents and the protocol from parsed options and run them over the tasks; return the
    :class:`~groundstate.eval.runner.RunResult`."""
    from groundstate.cli import program_state_hash
    from groundstate.errors import ConfigError
    from groundstate.eval.consilience.metrics import discussion_scores
    from groundstate.eval.runner import Runner, parse_shard
    from groundstate.programs.consilience.protocols import HiddenProfileProtocol

    if args.rounds < 0:
        raise ConfigError("--rounds must be >= 0")
    shard = parse_shard(args.shard)
    tasks, data = load_tasks(args.tasks, getattr(args, "allow_empty", False))
    team, agents, lm_description = build_team(args, tasks, args.tasks)
    program = HiddenProfileProtocol(args.protocol, args.rounds, team=team)
    rounds = args.rounds if args.protocol == "hidden-post" else 0
    config = {
        "program": f"{args.protocol}-{args.agents}",
        "program_state": program_state_hash(program),
        "lm": lm_description,
        "data": data,
        "seed": args.seed,
        "options": {"protocol": args.protocol, "rounds": rounds, "agents": agents},
    }
    runner = Runner(program, config, out=args.out, threads=args.threads, inputs=lambda task: {"task": task},
                    scorer=discussion_scores, max_error_rate=args.max_error_rate,
                    progress=not args.no_progress and sys.stderr.isatty())
    return runner.run(tasks, limit=args.limit, shard=shard, description=config["program"])
