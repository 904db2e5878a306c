"""How fast the embedded engine decodes: threads and a pool of contexts, as ratios.

Every measurement runs the same workload: DSPy's own JSONAdapter requests for ``StructuredCheck`` questions
(messages and JSON-schema grammar captured from the engine), greedy, each call on a freshly reset context so
every call pays for its prompt (about 400 tokens, which dominate short answers; calls/s is recorded too).
Configurations, each as output tokens/s and as a ratio against the baseline
measured in the same run under the same condition:

- ``baseline``: one context, one thread, calls one after another (the engine's default for a sequential caller);
- ``threads=2``: one context, two llama.cpp threads;
- ``pool=N``: N contexts of one thread each (:class:`groundstate.lm.contexts.ContextPool`), N calls at once.

Sampling is llama-cpp-python's own grammar chain. An earlier groundstate sampler that asked the grammar about the
greedy token first (replacing the library's private ``Llama._init_sampler``) measured 0.89x / 1.00x of the
library's chain in tokens/s (quiet / beside a neighbour) and was removed (issue 23).

Conditions: ``quiet`` and ``neighbour`` (a CPU-burning process per ``--neighbours``, started and stopped by this
script). Repeats are interleaved configuration by configuration. Outputs of every configuration are compared
with the baseline's (``same_outputs``): the pool must match; other thread counts may not
(greedy outputs depend on llama.cpp's thread count).

Run on a quiet machine; ``--quick`` is a smoke run (one question, few tokens). Prints a table and writes
``bench/results/embedded_engine.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from groundstate.lm.contexts import ContextPool, new_llama, usable_cores  # noqa: E402
from groundstate.lm.embedded import EmbeddedEngine, bound_schema  # noqa: E402
from groundstate.signatures.checks import StructuredCheck  # noqa: E402

OUT = Path(__file__).parent / "results" / "embedded_engine.json"

QUESTIONS = [
    ("Which planet is closest to the Sun?", "A: Mercury\nB: Venus\nC: Earth\nD: Mars"),
    ("Which of these is a fruit?", "A: apple\nB: chair\nC: stone\nD: car"),
    ("What do bees make?", "A: milk\nB: honey\nC: silk\nD: wax"),
    ("Which animal can fly?", "A: dog\nB: cat\nC: sparrow\nD: fish"),
    ("What is frozen water called?", "A: steam\nB: ice\nC: sand\nD: glass"),
    ("Which is a colour?", "A: red\nB: seven\nC: loud\nD: fast"),
]


class _Captured(Exception):
    pass


def capture_calls(engine: EmbeddedEngine, questions: list[tuple[str, str]]) -> list[dict]:
    """The llama.cpp arguments the engine would use for each question (no model call)."""
    calls = []

    class Capture(EmbeddedEngine):
        def complete(self, request):
            fmt = request.config.response_format
            calls.append({"messages": self._messages(request),
                          "grammar": engine.grammar(bound_schema(fmt["schema"], engine.max_string_length,
                                                                 engine.max_items))})
            raise _Captured

    lm = dspy.LM("embedded/smollm2-135m-instruct", engine=Capture(threads=1, contexts=1), cache=False,
                 num_retries=0)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for question, options in questions:
            before = len(calls)
            try:
                dspy.Predict(StructuredCheck)(question=question, options=options)
            except Exception:
                pass
            del calls[before + 1:]  # JSONAdapter's own retry repeats the request
    return calls


def decode(llama, call: dict, max_tokens: int) -> tuple[str, int, int]:
    llama.reset()
    out = llama.create_chat_completion(messages=call["messages"], grammar=call["grammar"], temperature=0.0,
                                       seed=0, max_tokens=max_tokens)
    usage = out["usage"]
    return out["choices"][0]["message"]["content"], int(usage["completion_tokens"]), int(usage["prompt_tokens"])


def run_sequential(llama, calls: list[dict], max_tokens: int) -> dict:
    started = time.perf_counter()
    results = [decode(llama, call, max_tokens) for call in calls]
    return _measure(results, time.perf_counter() - started)


def run_pool(pool: ContextPool, calls: list[dict], max_tokens: int, workers: int) -> dict:
    def one(call):
        with pool.context() as llama:
            return decode(llama, call, max_tokens)

    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as executor:
        results = list(executor.map(one, calls))
    return _measure(results, time.perf_counter() - started)


def _measure(results: list[tuple[str, int, int]], seconds: float) -> dict:
    return {"seconds": seconds, "tokens": sum(r[1] for r in results), "prompt_tokens": sum(r[2] for r in results),
            "calls": len(results), "outputs": [r[0] for r in results]}


def _burn(stop) -> None:  # pragma: no cover - runs in the neighbour process
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


class Neighbours:
    """``n`` CPU-burning processes for the duration of a ``with`` block."""

    def __init__(self, n: int):
        self.n = n
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list = []

    def __enter__(self):
        self._procs = [self._ctx.Process(target=_burn, args=(self._stop,), daemon=True) for _ in range(self.n)]
        for proc in self._procs:
            proc.start()
        time.sleep(1.0)  # let them reach the loop (spawn imports this script)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()


def bench(calls: list[dict], max_tokens: int, repeats: int, pool_sizes: list[int], neighbours: int) -> dict:
    path = EmbeddedEngine(threads=1, contexts=1).resolved_path()
    one = new_llama(path, 8192, 1)
    two = new_llama(path, 8192, 2)
    pools = {n: ContextPool(lambda: new_llama(path, 8192, 1), n) for n in pool_sizes}
    configs = {"baseline": lambda: run_sequential(one, calls, max_tokens),
               "threads=2": lambda: run_sequential(two, calls, max_tokens),
               **{f"pool={n}": (lambda n=n: run_pool(pools[n], calls, max_tokens, n)) for n in pool_sizes}}
    for n, pool in pools.items():  # load every context now, not inside a timed run
        with ExitStack() as stack:
            for _ in range(n):
                stack.enter_context(pool.context())
    decode(one, calls[0], 1)  # warm-up: page the weights in
    decode(two, calls[0], 1)
    conditions = {}
    for condition, burners in (("quiet", 0), ("neighbour", neighbours)):
        runs: dict[str, list[dict]] = {name: [] for name in configs}
        with Neighbours(burners):
            for _ in range(repeats):
                for name, config in configs.items():
                    runs[name].append(config())
        conditions[condition] = summarize(runs)
    quiet_base = conditions["quiet"]["baseline"]["tokens_per_s"]
    for condition in conditions.values():
        for row in condition.values():
            row["ratio_vs_quiet_baseline"] = row["tokens_per_s"] / quiet_base if quiet_base else None
    return conditions


def summarize(runs: dict[str, list[dict]]) -> dict:
    base_outputs = runs["baseline"][0]["outputs"]
    rates = {name: [r["tokens"] / r["seconds"] for r in rs] for name, rs in runs.items()}
    base = statistics.median(rates["baseline"])
    return {name: {"tokens_per_s": statistics.median(rate), "runs_tokens_per_s": rate,
                   "calls_per_s": statistics.median(r["calls"] / r["seconds"] for r in runs[name]),
                   "prompt_tokens_per_call": runs[name][0]["prompt_tokens"] / runs[name][0]["calls"],
                   "ratio_vs_baseline": statistics.median(rate) / base if base else None,
                   "same_outputs": all(r["outputs"] == base_outputs for r in runs[name])}
            for name, rate in rates.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: one question twice, 8 tokens, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--neighbours", type=int, default=1, help="CPU-burning processes in the 'neighbour' runs")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    cores = usable_cores()
    questions = QUESTIONS[:1] if args.quick else QUESTIONS
    repeats, max_tokens = (1, 8) if args.quick else (args.repeats, args.max_tokens)
    pool_sizes = sorted({2, max(2, cores)}) if not args.quick else [2]
    calls = capture_calls(EmbeddedEngine(threads=1, contexts=1), questions * (2 if args.quick else 1))
    started = time.perf_counter()
    conditions = bench(calls, max_tokens, repeats, pool_sizes, args.neighbours)
    result = {"cores": cores, "load_before": os.getloadavg(), "calls": len(calls), "max_tokens": max_tokens,
              "repeats": repeats, "neighbours": args.neighbours, "quick": args.quick,
              "seconds": time.perf_counter() - started, "conditions": conditions}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'condition':10} {'configuration':16} {'tokens/s':>9} {'x baseline':>10} {'x quiet':>8} same")
    for condition, rows in conditions.items():
        for name, row in rows.items():
            print(f"{condition:10} {name:16} {row['tokens_per_s']:9.1f} {row['ratio_vs_baseline']:10.2f} "
                  f"{row['ratio_vs_quiet_baseline']:8.2f} {row['same_outputs']}")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
