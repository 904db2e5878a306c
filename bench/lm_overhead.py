"""What the embedded engine's DSPy wrapper and the runner cost, measured against baselines in the same run.

1. Embedded LM throughput: output tokens/s of ``dspy.Predict`` on the embedded engine (adapter formatting,
   engine, parsing) vs raw llama-cpp-python on the *same* messages and JSON schema (captured from DSPy's
   own requests), interleaved prompt by prompt. Target: the wrapper costs under 5%.
2. Runner overhead: a zero-latency scripted LM, the same program called directly in a loop vs through
   :class:`groundstate.eval.runner.Runner` (results file, metering, scoring). Target: under 2 ms per LM call.

Prints a table and writes ``bench/results/lm_overhead.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from groundstate.eval.runner import Runner  # noqa: E402
from groundstate.lm.adapters import json_adapter  # noqa: E402
from groundstate.lm.embedded import EmbeddedEngine  # noqa: E402
from groundstate.programs.qa import QuestionAnswering  # noqa: E402
from groundstate.signatures.checks import StructuredCheck  # noqa: E402
from groundstate.testing import scripted_lm  # noqa: E402

OUT = Path(__file__).parent / "results" / "lm_overhead.json"

QUESTIONS = [
    ("Which planet is closest to the Sun?", "A: Mercury\nB: Venus\nC: Earth\nD: Mars"),
    ("Which animal can fly?", "A: dog\nB: eagle\nC: cow\nD: fish"),
    ("Which is a primary colour?", "A: red\nB: brown\nC: grey\nD: pink"),
    ("Which number is even?", "A: 3\nB: 7\nC: 8\nD: 11"),
    ("Which is a fruit?", "A: carrot\nB: apple\nC: potato\nD: onion"),
    ("Which metal is liquid at room temperature?", "A: iron\nB: gold\nC: mercury\nD: tin"),
]


class RecordingEngine(EmbeddedEngine):
    """The embedded engine, remembering the exact llama.cpp arguments of its last call."""

    def complete(self, request):
        from groundstate.lm.embedded import bound_schema

        fmt = request.config.response_format
        self.last = {
            "messages": self._messages(request),
            "grammar": self.grammar(bound_schema(fmt["schema"], self.max_string_length, self.max_items)),
            "max_tokens": request.config.max_tokens or 512,
        }
        return super().complete(request)


def bench_embedded(repeats: int = 3) -> dict:
    engine = RecordingEngine(contexts=1)  # one context: both paths use (and reset) the same one
    lm = dspy.LM("embedded/smollm2-135m-instruct", engine=engine, cache=False, temperature=0.0, max_tokens=256)
    pool = engine.pool()
    predict = dspy.Predict(StructuredCheck)
    wrapped_time = raw_time = 0.0
    wrapped_tokens = raw_tokens = 0
    with dspy.context(lm=lm, adapter=json_adapter()):
        predict(question=QUESTIONS[0][0], options=QUESTIONS[0][1])  # warm-up (model load, grammar caches)
        for rep in range(repeats):
            for i, (question, options) in enumerate(QUESTIONS):
                # llama.cpp reuses the KV cache of a shared prompt prefix; reset it before every timed call so
                # neither path gets the other's prompt evaluation for free, and alternate which path goes first.
                def wrapped(question=question, options=options):
                    with pool.context() as llama:
                        llama.reset()
                    with dspy.track_usage() as usage:
                        started = time.perf_counter()
                        predict(question=question, options=options)
                        elapsed = time.perf_counter() - started
                    return elapsed, usage.get_total_tokens()[lm.model]["completion_tokens"]

                def raw():
                    call = engine.last
                    with pool.context() as llama:
                        llama.reset()
                        started = time.perf_counter()
                        out = llama.create_chat_completion(messages=call["messages"], temperature=0.0, seed=0,
                                                           max_tokens=call["max_tokens"], grammar=call["grammar"])
                        elapsed = time.perf_counter() - started
                    return elapsed, out["usage"]["completion_tokens"]

                if (rep + i) % 2 == 0:
                    w, r = wrapped(), raw()
                else:
                    predict(question=question, options=options)  # records this prompt's exact llama arguments
                    r, w = raw(), wrapped()
                wrapped_time += w[0]
                wrapped_tokens += w[1]
                raw_time += r[0]
                raw_tokens += r[1]
    wrapped_tps = wrapped_tokens / wrapped_time
    raw_tps = raw_tokens / raw_time
    return {"calls": repeats * len(QUESTIONS), "dspy_tokens_per_s": wrapped_tps, "raw_tokens_per_s": raw_tps,
            "dspy_output_tokens": wrapped_tokens, "raw_output_tokens": raw_tokens,
            "wrapper_overhead": 1 - wrapped_tps / raw_tps, "target": "< 0.05"}


def bench_runner(n: int = 400, rounds: int = 3) -> dict:
    records = [{"id": f"r{i}", "question": f"question {i}"} for i in range(n)]
    program = QuestionAnswering()
    lm = scripted_lm(lambda req: {"answer": "x"})
    direct, through = [], []
    for _ in range(rounds):
        with dspy.context(lm=lm, adapter=json_adapter()):
            started = time.perf_counter()
            for record in records:
                program(question=record["question"])
            direct.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as tmp:
            runner = Runner(program, {"program": "qa", "bench": time.time()}, out=tmp, threads=1,
                            inputs=lambda r: {"question": r["question"]},
                            scorer=lambda r, p: {"ok": float(p is not None)}, lm=lm, adapter=json_adapter())
            started = time.perf_counter()
            runner.run(records)
            through.append(time.perf_counter() - started)
    d, t = statistics.median(direct), statistics.median(through)
    return {"records": n, "lm_calls_per_record": 1, "direct_s": d, "runner_s": t,
            "overhead_ms_per_call": (t - d) / n * 1000, "direct_ms_per_call": d / n * 1000, "target": "< 2 ms"}


def main() -> int:
    results = {"runner": bench_runner()}
    try:
        results["embedded"] = bench_embedded()
    except Exception as exc:  # the embedded model is optional; say why it was not measured
        results["embedded"] = {"skipped": f"{type(exc).__name__}: {exc}"}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    table = Table(title="LM and runner overhead")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("target", justify="right")
    r = results["runner"]
    table.add_row("program direct, ms per LM call", f"{r['direct_ms_per_call']:.3f}", "")
    table.add_row("runner overhead, ms per LM call", f"{r['overhead_ms_per_call']:.3f}", r["target"])
    e = results["embedded"]
    if "skipped" in e:
        table.add_row("embedded engine", e["skipped"], "")
    else:
        table.add_row("raw llama-cpp-python, output tokens/s", f"{e['raw_tokens_per_s']:.1f}", "")
        table.add_row("through DSPy, output tokens/s", f"{e['dspy_tokens_per_s']:.1f}", "")
        table.add_row("wrapper overhead", f"{e['wrapper_overhead']:.1%}", e["target"])
    Console().print(table)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
