"""Threads vs Ray on one machine: records/s and the Ray overhead per record (issue 16's bench).

A scripted LM with 50 ms latency answers 200 QA records through :class:`groundstate.eval.runner.Runner`, with
2 and 4 Ray worker processes (actors of 2 threads each, on a local cluster of that many CPUs) against the threads
backend at the same concurrency (4 and 8 threads in one process). The actors are started by a first "cold" run
(its extra time is reported as the cold start); then each arm is the median of 3 runs, and a third Ray arm adds
``--max-inflight`` (set to the concurrency, so it never blocks) to price its semaphore. Ray's overhead per
record is its extra wall time times the concurrency, divided by the records. Targets: overhead under 5 ms per
record, Ray throughput at least 0.9x threads at equal concurrency. Prints a table and writes
``bench/results/ray_scaling.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from groundstate.eval.ray_backend import RayOptions  # noqa: E402
from groundstate.eval.runner import Runner  # noqa: E402
from groundstate.programs.qa import QuestionAnswering  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402

RECORDS = 200
LATENCY_S = 0.05
WORKERS = (2, 4)
THREADS_PER_WORKER = 2
REPEATS = 3
OUT = Path(__file__).resolve().parent / "results" / "ray_scaling.json"


def responder(request):
    return {"answer": request.user.split("question number")[-1].split()[0].strip()}


def worker_setup():
    return {"lm": scripted_lm(responder, sleep=LATENCY_S), "adapter": dspy.JSONAdapter()}


def records():
    return [{"id": f"r{i:04d}", "question": f"question number {i}", "answer": str(i)} for i in range(RECORDS)]


def timed(make: Callable[[str], Runner], repeats: int = REPEATS) -> float:
    """The median wall time of ``repeats`` fresh runs (``make(label)`` gives a runner with its own directory)."""
    times = []
    for i in range(repeats):
        started = time.perf_counter()
        result = make(str(i)).run(records())
        times.append(time.perf_counter() - started)
        assert result.summary["n_error"] == 0, result.summary
    return statistics.median(times)


def qa_runner(out: Path, threads: int, **kwargs) -> Runner:
    return Runner(QuestionAnswering(), {"program": "qa", "out": out.name}, out=out, threads=threads,
                  inputs=lambda r: {"question": r["question"]}, **kwargs)


def arm(base: Path, threads: int, **kwargs) -> Callable[[str], Runner]:
    """Runners of one arm, each in its own directory (so every repeat runs all records)."""
    return lambda label: qa_runner(Path(f"{base}{label}"), threads, **kwargs)


def main() -> int:
    import ray

    rows = []
    for workers in WORKERS:
        n = workers * THREADS_PER_WORKER  # equal concurrency: the threads arm runs n threads in one process
        with tempfile.TemporaryDirectory() as tmp:
            setup = worker_setup()
            threads = timed(arm(Path(tmp) / "threads", n, lm=setup["lm"], adapter=setup["adapter"]))
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            try:
                options = RayOptions(worker_setup=worker_setup, workers=workers)
                bounded = RayOptions(worker_setup=worker_setup, workers=workers, max_inflight=n)
                cold = timed(arm(Path(tmp) / "cold", THREADS_PER_WORKER, ray=options), 1)
                qa_runner(Path(tmp) / "warm", THREADS_PER_WORKER, ray=bounded).run(records()[:n])  # its semaphore
                on_ray = timed(arm(Path(tmp) / "ray", THREADS_PER_WORKER, ray=options))
                limited = timed(arm(Path(tmp) / "bounded", THREADS_PER_WORKER, ray=bounded))
            finally:
                ray.shutdown()
        rows.append({"workers": workers, "threads_per_worker": THREADS_PER_WORKER, "concurrency": n,
                     "threads_records_per_s": RECORDS / threads, "ray_records_per_s": RECORDS / on_ray,
                     "ray_vs_threads": threads / on_ray,
                     "ray_overhead_ms_per_record": 1000 * (on_ray - threads) * n / RECORDS,
                     "ray_cold_start_s": cold - on_ray,
                     "max_inflight_cost_ms_per_call": 1000 * (limited - on_ray) * n / RECORDS})
    print(f"{'workers':>7} {'in flight':>9} {'threads rec/s':>14} {'ray rec/s':>10} {'ray/threads':>12} "
          f"{'overhead ms/rec':>16} {'cold start s':>13} {'--max-inflight ms/call':>23}")
    for r in rows:
        print(f"{r['workers']:>7} {r['concurrency']:>9} {r['threads_records_per_s']:>14.1f} "
              f"{r['ray_records_per_s']:>10.1f} {r['ray_vs_threads']:>12.2f} {r['ray_overhead_ms_per_record']:>16.2f} "
              f"{r['ray_cold_start_s']:>13.2f} {r['max_inflight_cost_ms_per_call']:>23.2f}")
    for r in rows:
        misses = [m for m, bad in (("overhead >= 5 ms/record", r["ray_overhead_ms_per_record"] >= 5),
                                   ("throughput < 0.9x threads", r["ray_vs_threads"] < 0.9)) if bad]
        print(f"{r['workers']} workers: " + ("targets met" if not misses else "MISSED: " + ", ".join(misses)))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"records": RECORDS, "latency_s": LATENCY_S, "rows": rows}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
