"""The fixed cost of an LM call (issue 18 item 2), each number measured against a baseline in the same run.

1. Zero-latency cost per call, with a scripted LM that answers at once, of the same ``dspy.Predict`` over the same
   questions: a plain loop with DSPy's ``JSONAdapter``, a plain loop with groundstate's cached adapter
   (:mod:`groundstate.lm.adapters`), ``dspy.Evaluate`` (one thread) and groundstate's
   :class:`~groundstate.eval.runner.Runner` (one thread: results file, metering, scoring), the last three with the
   cached adapter; and the runner with one no-op DSPy callback installed (what the runner cost when its meter was
   a callback). The ways are interleaved round by round and the median round is reported. Target: the runner
   costs at most 1.2x ``dspy.Evaluate`` per call.
2. Runner-thread scaling: ReGround (no fan-out inside the program, so the runner's threads are the only
   concurrency) through the runner with a scripted LM that sleeps 50 ms per call, at 1, 8 and 16 runner threads.
   Targets: at least 7x at 8 threads and 12x at 16, against 1 thread.

The machine these run on is usually shared, so absolute times are noisy; the ratios are what to read.
Usage: ``python bench/call_overhead.py [--n N] [--rounds R] [--instances K]``. Prints a table, writes
``bench/results/call_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.utils.callback import BaseCallback  # noqa: E402

from groundstate.eval.benchmarks.offquery.synthetic import generate  # noqa: E402
from groundstate.eval.runner import Runner  # noqa: E402
from groundstate.lm.adapters import json_adapter  # noqa: E402
from groundstate.programs.reground.reground import ReGround  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402

OUT = Path(__file__).parent / "results" / "call_overhead.json"


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def zero_latency(n: int = 300, rounds: int = 5) -> dict:
    """Milliseconds per LM call of each way of running ``dspy.Predict`` over ``n`` questions (median round)."""
    lm = scripted_lm(lambda req: {"answer": "x"})
    program = dspy.Predict("question -> answer")
    records = [{"id": f"r{i}", "question": f"question {i}"} for i in range(n)]
    devset = [dspy.Example(question=r["question"], answer="x").with_inputs("question") for r in records]

    def loop(adapter):
        with dspy.context(lm=lm, adapter=adapter):
            for record in records:
                program(question=record["question"])

    def evaluate():
        with dspy.context(lm=lm, adapter=json_adapter()):
            dspy.Evaluate(devset=devset, metric=lambda ex, pred, trace=None: float(pred.answer == ex.answer),
                          num_threads=1, display_progress=False)(program)

    def runner(callbacks=()):
        with tempfile.TemporaryDirectory() as tmp, dspy.context(callbacks=list(callbacks)):
            Runner(program, {"program": "qa", "t": time.time()}, out=tmp, threads=1,
                   inputs=lambda r: {"question": r["question"]},
                   scorer=lambda r, p: {"ok": float(p is not None and p.answer == "x")}, lm=lm,
                   adapter=json_adapter()).run(records)

    ways = {"predict_dspy_adapter": lambda: loop(dspy.JSONAdapter()), "predict": lambda: loop(json_adapter()),
            "evaluate": evaluate, "runner": runner,
            "runner_with_a_callback": lambda: runner([BaseCallback()])}  # what the callback meter cost
    for fn in ways.values():  # warm-up: imports, caches
        fn()
    times: dict[str, list[float]] = {name: [] for name in ways}
    for k in range(rounds):
        order = list(ways) if k % 2 == 0 else list(reversed(ways))
        for name in order:
            times[name].append(_timed(ways[name]) / n * 1000)
    ms = {name: statistics.median(t) for name, t in times.items()}
    ratios = [r / e for r, e in zip(times["runner"], times["evaluate"], strict=True)]
    return {"calls_per_way": n, "rounds": rounds, "ms_per_call": ms, "ms_per_call_rounds": times,
            "runner_vs_evaluate": statistics.median(ratios),
            "runner_vs_predict": ms["runner"] / ms["predict"],
            "cached_adapter_vs_dspy_adapter": ms["predict"] / ms["predict_dspy_adapter"],
            "target_runner_vs_evaluate": "<= 1.2"}


def _reground_run(data: list, threads: int, sleep: float) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and LM calls of ReGround (no inner fan-out) over ``data`` through the runner."""
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(ReGround(max_workers=1), {"program": "reground", "t": time.time()}, out=tmp, threads=threads,
                        inputs=lambda r: r.inputs("unreliable"), lm=scripted_lm(sleep=sleep), adapter=json_adapter())
        cpu, started = time.process_time(), time.perf_counter()
        result = runner.run(data)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.summary["n_error"] == 0, result.summary
    return wall, cpu, result.summary["lm_calls"]["total"]


def thread_scaling(instances: int = 64, sleep: float = 0.05, threads: tuple[int, ...] = (1, 8, 16),
                   rounds: int = 2) -> dict:
    """Wall time of ReGround through the runner at each thread count; speedups vs 1 thread in the same round."""
    data = generate("healthcare", "main", instances, seed=1)
    _reground_run(data[:2], 1, 0.0)  # warm-up: imports, LiteLLM's price map, adapter caches
    walls: dict[int, list[float]] = {n: [] for n in threads}
    cpus: dict[int, list[float]] = {n: [] for n in threads}
    for k in range(rounds):
        for count in (threads if k % 2 == 0 else tuple(reversed(threads))):
            wall, cpu, calls = _reground_run(data, count, sleep)
            walls[count].append(wall)
            cpus[count].append(cpu / calls * 1000)
    base = threads[0]
    speedups = {n: statistics.median(b / w for b, w in zip(walls[base], walls[n], strict=True)) for n in threads}
    return {"instances": instances, "sleep_per_call_s": sleep, "calls": calls, "rounds": rounds,
            "wall_s": {n: statistics.median(w) for n, w in walls.items()}, "wall_s_rounds": walls,
            "cpu_ms_per_call": {n: statistics.median(c) for n, c in cpus.items()}, "speedup": speedups,
            "targets": {"8": ">= 7", "16": ">= 12"}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="questions per way and round (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--instances", type=int, default=64, help="ReGround instances for thread scaling")
    parser.add_argument("--scaling-rounds", type=int, default=2, help="rounds of the thread scaling (default 2)")
    args = parser.parse_args()
    results = {"zero_latency": zero_latency(args.n, args.rounds),
               "thread_scaling": thread_scaling(args.instances, rounds=args.scaling_rounds)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    table = Table(title="Fixed cost per LM call")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    z = results["zero_latency"]
    for name, ms in z["ms_per_call"].items():
        table.add_row(f"{name}, ms per call", f"{ms:.3f}", "")
    table.add_row("runner / dspy.Evaluate", f"{z['runner_vs_evaluate']:.2f}x", "<= 1.2x")
    table.add_row("cached adapter / DSPy's JSONAdapter", f"{z['cached_adapter_vs_dspy_adapter']:.2f}x", "")
    s = results["thread_scaling"]
    for count, speedup in s["speedup"].items():
        target = {8: ">= 7x", 16: ">= 12x"}.get(count, "")
        table.add_row(f"ReGround, {count} runner threads (50 ms/call)", f"{s['wall_s'][count]:.1f}s "
                      f"(x{speedup:.1f}, {s['cpu_ms_per_call'][count]:.2f} ms CPU/call)", target)
    Console().print(table)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
