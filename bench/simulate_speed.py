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

Consilience cost (``ideal`` agents, the rule controller, uncalibrated, 10-round limit): the time of one
Consilience episode in Hidden-Post discussions (3 rounds) on the same 4-agent tasks (target: at most
:data:`EPISODE_TARGET`), and controlled rounds per second with 2 to 16 agents (hand-annotated tasks; target: 16
agents at least :data:`SCALING_TARGET` of the rate with 2). Both are ratios of timings taken in the same run,
interleaved task by task, the median of several passes. They are CPU times of this process (simulated agents
run inline on one thread, so on an idle machine that is the wall time; on a shared one it leaves out the
other jobs). ``--quick`` shortens everything (fewer tasks, fewer passes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from groundstate.programs.consilience import (  # noqa: E402
    simulated,
    simulated_belief,
    simulated_group,
    simulated_speech,
)
from groundstate.programs.consilience.consilience import Consilience  # noqa: E402
from groundstate.programs.consilience.control import RuleController  # noqa: E402
from groundstate.programs.consilience.protocols import run_discussion  # noqa: E402
from groundstate.programs.consilience.simulated import SIM_PRESETS, SimParams, SimTeam, sim_team  # noqa: E402
from groundstate.records import COMM_ACTIONS, HiddenProfileTask, Transcript  # noqa: E402

OUT = Path(__file__).parent / "results" / "simulate_speed.json"
TARGET = 1000.0
EPISODE_TARGET = 10.0
SCALING_TARGET = 0.5
AGENT_COUNTS = (2, 4, 8, 16)
RATIO_KEY = f"ratio_{AGENT_COUNTS[-1]}_to_{AGENT_COUNTS[0]}"


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


def _cold() -> None:
    """Empty the simulated agents' caches, so that a pass does not reuse draws from an earlier pass over the
    same tasks (within an episode they are reused, as in any run)."""
    for module, name in ((simulated_belief, "_NOISE"), (simulated, "_GROUPS"), (simulated_speech, "_LEADERS"),
                         (simulated_group, "_PLANS")):
        getattr(module, name).clear()


def _timed(fn: Callable[[HiddenProfileTask], object], task: HiddenProfileTask) -> tuple[float, object]:
    """``fn(task)`` and its CPU time (this process only, so other jobs on a shared machine do not count)."""
    started = time.process_time()
    out = fn(task)
    return time.process_time() - started, out


def consilience_cost(tasks: list[HiddenProfileTask], passes: int) -> dict[str, float]:
    """One Consilience episode in Hidden-Post discussions on ``tasks`` (each task's episode and discussion
    timed back to back; the median over passes)."""
    team = SimTeam(SimParams(), seed=0)
    program = Consilience(team, RuleController(), max_rounds=10)
    episode = lambda t: program(task=t)  # noqa: E731
    post = lambda t: run_discussion(t, team(t), "hidden-post")  # noqa: E731
    episode(tasks[0]), post(tasks[0])
    ratios, episodes, posts = [], [], []
    for _ in range(passes):
        _cold()
        e = p = 0.0
        for task in tasks:
            e += _timed(episode, task)[0]
            p += _timed(post, task)[0]
        episodes.append(e / len(tasks))
        posts.append(p / len(tasks))
        ratios.append(e / p)
    return {"episode_ms": 1e3 * statistics.median(episodes), "hidden_post_ms": 1e3 * statistics.median(posts),
            "episode_in_hidden_post": statistics.median(ratios)}


def consilience_rounds(n_tasks: int, passes: int) -> dict[str, object]:
    """Controlled Consilience rounds per CPU second by group size (the sizes interleaved task by task; the
    median over passes)."""
    team = SimTeam(SimParams(), seed=0)
    program = Consilience(team, RuleController(), max_rounds=10)
    tasks = {n: hand_tasks(n_tasks, seed=n, n_agents=n) for n in AGENT_COUNTS}
    rates: dict[int, list[float]] = {n: [] for n in AGENT_COUNTS}
    for n in AGENT_COUNTS:
        program(task=tasks[n][0])
    for _ in range(passes):
        _cold()
        seconds = dict.fromkeys(AGENT_COUNTS, 0.0)
        rounds = dict.fromkeys(AGENT_COUNTS, 0)
        for i in range(n_tasks):
            for n in AGENT_COUNTS:
                spent, out = _timed(lambda t: program(task=t), tasks[n][i])
                seconds[n] += spent
                rounds[n] += len(out.trace)
        for n in AGENT_COUNTS:
            rates[n].append(rounds[n] / seconds[n])
    per_second = {str(n): statistics.median(r) for n, r in rates.items()}
    ratios = [a / b for a, b in zip(rates[AGENT_COUNTS[-1]], rates[AGENT_COUNTS[0]], strict=True)]
    return {"rounds_per_second": per_second, RATIO_KEY: statistics.median(ratios)}


def consilience_speed(tasks: list[HiddenProfileTask], quick: bool) -> dict[str, object]:
    """The Consilience measurements (module docstring) with their targets."""
    passes = 3 if quick else 7
    four = [t for t in tasks if t.n_agents == 4][: 20 if quick else 60] or hand_tasks(20 if quick else 60)
    cost = consilience_cost(four, passes)
    scaling = consilience_rounds(10 if quick else 30, passes)
    ratio = scaling[RATIO_KEY]
    return {"passes": passes, "tasks_4_agents": len(four), **cost, **scaling,
            "targets": {"episode_in_hidden_post": EPISODE_TARGET, "rounds_ratio": SCALING_TARGET},
            "meets_targets": cost["episode_in_hidden_post"] <= EPISODE_TARGET and ratio >= SCALING_TARGET}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="distinct tasks to cycle over (default 200)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement (default 3)")
    parser.add_argument("--quick", action="store_true", help="fewer tasks and shorter passes (about 20 s)")
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
    if args.quick:
        args.tasks, args.seconds = min(args.tasks, 40), min(args.seconds, 0.6)
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
        "consilience": consilience_speed(tasks, args.quick),
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
    c = results["consilience"]
    rates = ", ".join(f"{n} agents {r:,.0f}" for n, r in c["rounds_per_second"].items())
    print(f"Consilience episode = {c['episode_in_hidden_post']:.1f} Hidden-Post discussions at 4 agents "
          f"(target <= {EPISODE_TARGET:.0f}); rounds/s: {rates}; {AGENT_COUNTS[-1]} vs {AGENT_COUNTS[0]} agents "
          f"{c[RATIO_KEY]:.2f}x (target >= {SCALING_TARGET})")
    print(f"wrote {OUT}")
    return 0 if results.get("meets_target", True) else 1


if __name__ == "__main__":
    sys.exit(main())
