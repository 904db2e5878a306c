"""Threads vs Ray on one machine: records/s and the Ray overhead per record (issue 16's bench).

A scripted LM with 50 ms latency answers 200 QA records; each arm runs them through
:class:`groundstate.eval.runner.Runner` with 2 and 4 records in flight: threads (``threads=N``) and Ray (a local
cluster of N worker CPUs, ``max_inflight=N``). Ray's overhead per record is its extra wall time times the
concurrency, divided by the records. Targets: overhead under 5 ms per record, Ray throughput at least 0.9x
threads at equal concurrency. Prints a table and writes ``bench/results/ray_scaling.json``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from groundstate.eval.ray_backend import RayOptions  # noqa: E402
from groundstate.eval.runner import Runner  # noqa: E402
from groundstate.programs.qa import QuestionAnswering  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402

RECORDS = 200
LATENCY_S = 0.05
CONCURRENCY = (2, 4)
OUT = Path(__file__).resolve().parent / "results" / "ray_scaling.json"


def responder(request):
    return {"answer": request.user.split("question number")[-1].split()[0].strip()}


def worker_setup():
    return {"lm": scripted_lm(responder, sleep=LATENCY_S), "adapter": dspy.JSONAdapter()}


def records():
    return [{"id": f"r{i:04d}", "question": f"question number {i}", "answer": str(i)} for i in range(RECORDS)]


def timed(runner: Runner) -> float:
    started = time.perf_counter()
    result = runner.run(records())
    elapsed = time.perf_counter() - started
    assert result.summary["n_error"] == 0, result.summary
    return elapsed


def main() -> int:
    import ray

    rows = []
    for n in CONCURRENCY:
        with tempfile.TemporaryDirectory() as tmp:
            setup = worker_setup()
            threads = timed(Runner(QuestionAnswering(), {"program": "qa", "n": n}, out=Path(tmp) / "threads",
                                   threads=n, inputs=lambda r: {"question": r["question"]},
                                   lm=setup["lm"], adapter=setup["adapter"]))
            ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False)
            try:
                warm = Runner(QuestionAnswering(), {"program": "warm", "n": n}, out=Path(tmp) / "warm", threads=n,
                              inputs=lambda r: {"question": r["question"]},
                              ray=RayOptions(worker_setup=worker_setup, max_inflight=n))
                warm.run(records()[: 2 * n])  # start the worker processes outside the timing
                on_ray = timed(Runner(QuestionAnswering(), {"program": "qa", "n": n}, out=Path(tmp) / "ray",
                                      threads=n, inputs=lambda r: {"question": r["question"]},
                                      ray=RayOptions(worker_setup=worker_setup, max_inflight=n)))
            finally:
                ray.shutdown()
        rows.append({"concurrency": n, "threads_records_per_s": RECORDS / threads,
                     "ray_records_per_s": RECORDS / on_ray, "ray_vs_threads": threads / on_ray,
                     "ray_overhead_ms_per_record": 1000 * (on_ray - threads) * n / RECORDS})
    print(f"{'N':>3} {'threads rec/s':>14} {'ray rec/s':>10} {'ray/threads':>12} {'overhead ms/rec':>16}")
    for r in rows:
        print(f"{r['concurrency']:>3} {r['threads_records_per_s']:>14.1f} {r['ray_records_per_s']:>10.1f} "
              f"{r['ray_vs_threads']:>12.2f} {r['ray_overhead_ms_per_record']:>16.2f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"records": RECORDS, "latency_s": LATENCY_S, "rows": rows}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
