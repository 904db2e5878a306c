"""Simulated hidden-profile discussions per second, on one core.

A *discussion* is one full Hidden-Post run of :func:`groundstate.programs.consilience.protocols.run_discussion` with
simulated agents: 4 agents x 2 round-robin rounds (8 messages), then 4 votes and the plurality decision. Also
measured: Hidden-Pre and Full-Info, and an action-driven discussion (8 messages cycling Challenge, Clarify,
SeekEvidence, Route: the group-leader computation every Challenge/Clarify needs) with a belief elicitation of
every agent before each message, as a controller does. Target: at least 1,000 Hidden-Post discussions/s with the
``ideal`` preset (``SimParams()``).

Each measurement runs for every preset in ``--presets`` (default ``ideal,limited``): ``limited`` switches on the
limits of integration (bounded attention, salience of spoken facts, imperfect weighting), whose beliefs take a
slower path than the ``ideal`` one; the table shows both side by side.

Tasks come from the travel generator (``groundstate.eval.benchmarks.travel.generator``, 4 travelers) when it is
available, otherwise from a small hand-annotated hidden-profile generator in this file. The process is pinned to
one CPU when the platform allows it. Prints a table and writes ``bench/results/simulate_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from groundstate.programs.consilience.protocols import run_discussion  # noqa: E402
from groundstate.programs.consilience.simulated import SIM_PRESETS, SimParams, sim_team  # noqa: E402
from groundstate.records import COMM_ACTIONS, HiddenProfileTask, Transcript  # noqa: E402

OUT = Path(__file__).parent / "results" / "simulate_speed.json"
TARGET = 1000.0


def hand_tasks(n: int, seed: int = 0, n_agents: int = 4) -> list[HiddenProfileTask]:
    """Hidden-profile tasks with per-fact support: 3 shared facts for a decoy, 2 private facts per agent mostly
    for the correct option."""
    rng = random.Random(seed)
    tasks = []
    for t in range(n):
        options = ["A", "B", "C", "D"]
        correct, decoy = rng.sample(options, 2)
        support: dict[str, dict[str, float]] = {}

        def fact(tag: str, favour: str, support: dict[str, dict[str, float]] = support) -> str:
            text = f"{tag}: plan {favour} suits the group on {rng.choice(['price', 'pace', 'meals', 'access'])}."
            support[text] = {favour: float(rng.choice([1, 2]))}
            return text

        shared = [fact(f"Public note {j}", decoy) for j in range(3)]
        private = [[fact(f"Traveller {i} note {j}", correct) for j in range(2)] for i in range(n_agents)]
        tasks.append(HiddenProfileTask(id=f"bench-{t}", description="Choose a trip plan.", shared=shared,
                                       private=private, options=options, correct=correct, support=support))
    return tasks


def travel_tasks(n: int, seed: int = 0) -> list[HiddenProfileTask] | None:
    try:
        from groundstate.eval.benchmarks.travel.convert import to_hidden_profile
        from groundstate.eval.benchmarks.travel.generator import generate_travel
    except ImportError:
        return None
    return [to_hidden_profile(task) for task in generate_travel(n, seed=seed, travelers=4)]


def rate(fn: Callable[[HiddenProfileTask], object], tasks: list[HiddenProfileTask], seconds: float) -> float:
    """Calls of ``fn`` per second, cycling over ``tasks`` (best of three timed passes)."""
    for task in tasks:  # warm up: per-task precomputation is cached, as in any real run
        fn(task)
    best = 0.0
    for _ in range(3):
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds / 3:
            for task in tasks:
                fn(task)
            done += len(tasks)
        best = max(best, done / (time.perf_counter() - started))
    return best


def controlled(task: HiddenProfileTask, params: SimParams) -> None:
    """8 action-driven messages with everyone's belief before each, then the votes (what a controller does)."""
    agents = sim_team(task.n_agents, params)
    transcript = Transcript.model_construct(messages=[])
    for step in range(8):
        for agent in agents:
            agent.belief(task, transcript, step)
        speaker = agents[step % len(agents)]
        transcript = transcript.with_message(speaker.speak(task, transcript, COMM_ACTIONS[step % 4], step + 1))
    for agent in agents:
        agent.vote(task, transcript)


def measure(params: SimParams, tasks: list[HiddenProfileTask], seconds: float) -> dict[str, float]:
    """Discussions per second of every measured kind with agents of ``params``."""

    def team(task: HiddenProfileTask):
        return sim_team(task.n_agents, params)

    return {
        "hidden-post (2 rounds)": rate(lambda t: run_discussion(t, team(t), "hidden-post", rounds=2), tasks, seconds),
        "hidden-post (3 rounds)": rate(lambda t: run_discussion(t, team(t), "hidden-post", rounds=3), tasks, seconds),
        "hidden-pre": rate(lambda t: run_discussion(t, team(t), "hidden-pre"), tasks, seconds),
        "full-info": rate(lambda t: run_discussion(t, team(t), "full-info"), tasks, seconds),
        "action-driven (8 messages, beliefs each step)": rate(lambda t: controlled(t, params), tasks, seconds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="distinct tasks to cycle over (default 200)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement (default 3)")
    parser.add_argument("--presets", default="ideal,limited",
                        help=f"comma-separated simulated-agent presets to measure ({', '.join(SIM_PRESETS)}; "
                             "default ideal,limited)")
    args = parser.parse_args()
    presets = [name.strip() for name in args.presets.split(",") if name.strip()]
    unknown = [name for name in presets if name not in SIM_PRESETS]
    if unknown or not presets:
        parser.error(f"unknown preset(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SIM_PRESETS)}")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    tasks = travel_tasks(args.tasks)
    source = "travel generator"
    if tasks is None:
        tasks, source = hand_tasks(args.tasks), "hand-annotated (travel generator not available)"
    sizes = {"agents": sum(t.n_agents for t in tasks) / len(tasks), "facts": sum(len(t.all_facts()) for t in tasks)
             / len(tasks), "options": sum(len(t.options) for t in tasks) / len(tasks)}
    by_preset = {name: measure(SIM_PRESETS[name], tasks, args.seconds) for name in presets}
    results = {
        "tasks": {"n": len(tasks), "source": source, "mean": sizes},
        "params": {name: asdict(SIM_PRESETS[name]) for name in presets},
        "per_second": by_preset,
        "target_per_second": TARGET,
    }
    if "ideal" in by_preset:
        results["meets_target"] = by_preset["ideal"]["hidden-post (2 rounds)"] >= TARGET
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"simulated discussions per second, one core ({len(tasks)} {source} tasks, "
                        f"{sizes['agents']:.1f} agents, {sizes['facts']:.1f} facts)")
    table.add_column("discussion")
    for name in presets:
        table.add_column(f"{name} /s", justify="right")
    for case in next(iter(by_preset.values())):
        table.add_row(case, *(f"{by_preset[name][case]:,.0f}" for name in presets))
    if "meets_target" in results:
        verdict = f"{TARGET:,.0f}: {'met' if results['meets_target'] else 'MISSED'}"
        table.add_row("target (ideal, hidden-post, 2 rounds)",
                      *(verdict if name == "ideal" else "" for name in presets))
    Console().print(table)
    print(f"wrote {OUT}")
    return 0 if results.get("meets_target", True) else 1


if __name__ == "__main__":
    sys.exit(main())
