"""ReGround's token budget and concurrency, each measured against a baseline in the same run.

1. Token budget: ReGround vs Standard collaboration on the same synthetic instances and the same LM
   (the embedded model by default), as total tokens per instance and their ratio. The paper reports
   19.4K vs 52.1K with GPT-4o on HEALTHCARE-S (ratio 0.37); with a 135M model the absolute numbers differ.
2. Concurrency: wall time of ReGround on 20 instances with a scripted LM that sleeps 50 ms per call: fully
   serial (1 runner thread, no fan-out inside the program), 1 runner thread with the program's own
   concurrent calls, and 8 runner threads. Speedups are against the fully serial run.

Usage: ``python bench/reground_cost.py [--n N] [--lm SPEC]``. Prints a table, writes
``bench/results/reground_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from groundstate.eval.benchmarks.offquery.synthetic import generate  # noqa: E402
from groundstate.eval.runner import Runner  # noqa: E402
from groundstate.lm.specs import default_adapter, get_lm  # noqa: E402
from groundstate.programs.reground.reground import ReGround  # noqa: E402
from groundstate.programs.reground.standard import StandardCollaboration  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402

OUT = Path(__file__).parent / "results" / "reground_cost.json"


def run(program, instances, lm, adapter, threads: int, tag: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(program, {"program": tag, "t": time.time()}, out=tmp, threads=threads,
                        inputs=lambda r: r.inputs("unreliable"), lm=lm, adapter=adapter)
        started = time.perf_counter()
        result = runner.run(instances)
        elapsed = time.perf_counter() - started
    s = result.summary
    return {"wall_s": elapsed, "tokens_per_instance": s["tokens"]["per_record"],
            "input_per_instance": s["tokens"]["input"] / max(1, s["n_done"]),
            "output_per_instance": s["tokens"]["output"] / max(1, s["n_done"]),
            "calls_per_instance": s["lm_calls"]["per_record"], "errors": s["n_error"]}


def token_budget(n: int, spec: str) -> dict:
    lm = get_lm(spec, cache=False)
    adapter = default_adapter(lm) or dspy.ChatAdapter()
    instances = generate("healthcare", "main", n, seed=0)
    reground = run(ReGround(), instances, lm, adapter, threads=2, tag="reground")
    standard = run(StandardCollaboration(), instances, lm, adapter, threads=2, tag="standard")
    return {"lm": spec, "instances": n, "reground": reground, "standard": standard,
            "ratio": reground["tokens_per_instance"] / standard["tokens_per_instance"],
            "paper_ratio_gpt4o_healthcare_s": 19.4 / 52.1}


def concurrency(n: int = 20, sleep: float = 0.05) -> dict:
    instances = generate("healthcare", "main", n, seed=1)
    adapter = dspy.JSONAdapter()
    serial = run(ReGround(max_workers=1), instances, scripted_lm(sleep=sleep), adapter, 1, "serial")
    fanout = run(ReGround(), instances, scripted_lm(sleep=sleep), adapter, 1, "fanout")
    threads8 = run(ReGround(), instances, scripted_lm(sleep=sleep), adapter, 8, "threads8")
    return {"instances": n, "sleep_per_call_s": sleep, "calls_per_instance": serial["calls_per_instance"],
            "serial_s": serial["wall_s"], "one_thread_s": fanout["wall_s"], "eight_threads_s": threads8["wall_s"],
            "speedup_one_thread": serial["wall_s"] / fanout["wall_s"],
            "speedup_eight_threads": serial["wall_s"] / threads8["wall_s"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4, help="instances for the token budget (default 4)")
    parser.add_argument("--lm", default="embedded", help="LM for the token budget (default embedded)")
    args = parser.parse_args()
    results = {"concurrency": concurrency()}
    try:
        results["token_budget"] = token_budget(args.n, args.lm)
    except Exception as exc:  # the LM is optional here; say why it was not measured
        results["token_budget"] = {"skipped": f"{type(exc).__name__}: {exc}"}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    table = Table(title="ReGround cost")
    table.add_column("measure")
    table.add_column("value", justify="right")
    c = results["concurrency"]
    table.add_row(f"serial, {c['instances']} instances x {c['calls_per_instance']:.0f} calls",
                  f"{c['serial_s']:.2f}s")
    table.add_row("1 runner thread + concurrent calls in the program", f"{c['one_thread_s']:.2f}s "
                  f"(x{c['speedup_one_thread']:.1f})")
    table.add_row("8 runner threads", f"{c['eight_threads_s']:.2f}s (x{c['speedup_eight_threads']:.1f})")
    t = results["token_budget"]
    if "skipped" in t:
        table.add_row("token budget", t["skipped"])
    else:
        table.add_row(f"ReGround tokens/instance ({t['lm']}, n={t['instances']})",
                      f"{t['reground']['tokens_per_instance']:.0f}")
        table.add_row("Standard collaboration tokens/instance", f"{t['standard']['tokens_per_instance']:.0f}")
        table.add_row("ratio ReGround / Standard (paper, GPT-4o: 0.37)", f"{t['ratio']:.2f}")
    Console().print(table)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
