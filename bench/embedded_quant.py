"""The embedded model's tensor types: speed per CPU-second and faithfulness to the shipped file, in one run.

Prompts: the requests of the demo's one synthetic ReGround episode (``bench/demo_budget.py``'s two commands, run
through the CLI with the scripted LM of realistic lengths under the embedded model's name, so the JSON adapter, the
signatures and the sources are groundstate's own; the scripted answers stand in for the model's, so later stages
see other inputs than with the real model). Each request is replayed with the embedded engine's own messages and
grammar (:meth:`~groundstate.lm.embedded.EmbeddedEngine.llama_arguments`). By default ``--calls 12`` of the 37, taken
in turn from each stage (every stage at least once); ``--full`` replays all.

For each type (``shipped`` q4_1, ``q8_0``, ``q4_0``, ``f16``; made with llama.cpp's own quantizer into a temporary
cache, :func:`groundstate.lm.quantize.model_for`), on one context of one thread, every call on a reset context:

- **speed**: a prompt-only call (``max_tokens=1``) timed with ``time.process_time`` (CPU time of this process) gives
  prompt tokens per CPU-second; the full call minus the prompt-only call gives generation tokens (all but the first)
  per CPU-second. Wall-clock rates are recorded beside them. CPU time counts what this process computed, so a busy
  machine slows the wall rates more than these;
- **faithfulness**: the full call's greedy output against the shipped file's for the same request: the share that
  is identical, and, over the calls whose signature has a decision field (an ``enum``, integer or boolean field:
  the pair, the verdict, the answer...), the share whose parsed decision fields agree (an output that does not parse
  as JSON disagrees).

Usage: ``python bench/embedded_quant.py [--calls N | --full] [--types q8_0 f16 ...]``. About 6 CPU-minutes by
default (12 calls; evaluating each prompt twice per type dominates).
Prints a table and writes ``bench/results/embedded_quant.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the demo's commands and responder of demo_budget.py

from demo_budget import DEMO_DATA, DEMO_REGROUND, responder, stage_of  # noqa: E402

from groundstate.cli import main as cli  # noqa: E402
from groundstate.eval.lm_check import timed_completion  # noqa: E402
from groundstate.lm.config import LMConfig  # noqa: E402
from groundstate.lm.contexts import new_llama  # noqa: E402
from groundstate.lm.embedded import CONTEXT_WINDOW, EMBEDDED_MODEL_NAME, EmbeddedEngine  # noqa: E402
from groundstate.lm.quantize import QUANT_TYPES, model_for  # noqa: E402

OUT = Path(__file__).parent / "results" / "embedded_quant.json"
DEFAULT_CALLS = 12


class Recorder:
    """A DSPy engine around another that keeps every request it passes on (ReGround's calls run concurrently)."""

    def __init__(self, inner):
        self.inner, self.requests = inner, []

    def complete(self, request):
        self.requests.append(request)
        return self.inner.complete(request)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def episode_requests() -> list:
    """The DSPy requests of the demo's ReGround part on one synthetic episode, answered by the scripted LM."""
    from groundstate.testing import scripted_lm

    built: dict = {}

    def lm_for(self, role=None):
        if "lm" not in built:
            lm = scripted_lm(responder(), model=EMBEDDED_MODEL_NAME, input_tokens=None, output_tokens=None)
            built["recorder"] = Recorder(lm.engine)
            built["lm"] = lm.copy(engine=built["recorder"], cache=False)
        return built["lm"]

    original = LMConfig.lm_for
    LMConfig.lm_for = lm_for
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            with contextlib.redirect_stdout(io.StringIO()):
                if cli(DEMO_DATA) != 0 or cli(DEMO_REGROUND) != 0:
                    raise SystemExit("the demo's ReGround commands failed")
    finally:
        os.chdir(cwd)
        LMConfig.lm_for = original
    return built["recorder"].requests


def choose(calls: list[dict], n: int | None) -> list[dict]:
    """``n`` calls (all for ``None``), in a fixed order whatever order the concurrent calls came in: by stage, then
    by prompt; taken in turn from each stage."""
    by_stage: dict[str, list] = {}
    for call in calls:
        by_stage.setdefault(call["stage"], []).append(call)
    queues = {stage: sorted(cs, key=lambda c: json.dumps(c["messages"])) for stage, cs in sorted(by_stage.items())}
    chosen: list[dict] = []
    while queues and (n is None or len(chosen) < n):
        for stage in list(queues):
            if n is not None and len(chosen) >= n:
                break
            chosen.append(queues[stage].pop(0))
            if not queues[stage]:
                del queues[stage]
    return chosen


def decision_fields(schema: dict | None) -> list[str]:
    """The fields of an output schema that hold a decision rather than free text: enums, consts, numbers, booleans."""
    fields = []
    for name, field in ((schema or {}).get("properties") or {}).items():
        options = field.get("anyOf") or [field]
        if any("enum" in o or "const" in o or o.get("type") in ("integer", "number", "boolean") for o in options):
            fields.append(name)
    return fields


def measure_type(path: str, calls: list[dict]) -> dict:
    """Prompt and generation rates of the model file at ``path`` and its outputs, one context of one thread."""
    llama = new_llama(path, CONTEXT_WINDOW, 1)
    timed_completion(llama, calls[0]["messages"], {**calls[0]["kwargs"], "max_tokens": 1})  # warm-up: page weights in
    rows = []
    for call in calls:
        first, p_wall, p_cpu = timed_completion(llama, call["messages"], {**call["kwargs"], "max_tokens": 1})
        full, f_wall, f_cpu = timed_completion(llama, call["messages"], call["kwargs"])
        rows.append({"prompt_tokens": first["usage"]["prompt_tokens"], "prompt_cpu_s": p_cpu, "prompt_wall_s": p_wall,
                     "generated_tokens": max(0, full["usage"]["completion_tokens"] - 1),
                     "generation_cpu_s": max(0.0, f_cpu - p_cpu), "generation_wall_s": max(0.0, f_wall - p_wall),
                     "output": full["choices"][0]["message"]["content"] or ""})
    llama.close()

    def rate(tokens: str, seconds: str) -> float | None:
        total = sum(r[seconds] for r in rows)
        return sum(r[tokens] for r in rows) / total if total > 0 else None

    return {"prompt_tokens_per_cpu_s": rate("prompt_tokens", "prompt_cpu_s"),
            "generation_tokens_per_cpu_s": rate("generated_tokens", "generation_cpu_s"),
            "prompt_tokens_per_wall_s": rate("prompt_tokens", "prompt_wall_s"),
            "generation_tokens_per_wall_s": rate("generated_tokens", "generation_wall_s"),
            "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "generated_tokens": sum(r["generated_tokens"] for r in rows), "calls": rows}


def parsed(text: str, fields: list[str]) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return {f: value.get(f) for f in fields} if isinstance(value, dict) else None


def faithfulness(base: list[dict], other: list[dict], calls: list[dict]) -> dict:
    """Identical outputs and agreeing decisions of ``other`` against ``base`` (the shipped file's)."""
    same = sum(a["output"] == b["output"] for a, b in zip(base, other, strict=True))
    with_decisions = [(a, b, c) for a, b, c in zip(base, other, calls, strict=True) if c["decision_fields"]]
    agree = sum(1 for a, b, c in with_decisions
                if (d := parsed(b["output"], c["decision_fields"])) is not None
                and d == parsed(a["output"], c["decision_fields"]))
    unparseable = sum(parsed(b["output"], []) is None for b in other)
    return {"identical_outputs": same, "calls": len(other), "identical_share": same / len(other),
            "decisions_agree": agree, "calls_with_decisions": len(with_decisions),
            "decision_agreement": agree / len(with_decisions) if with_decisions else None,
            "unparseable_outputs": unparseable}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS, help=f"requests replayed (default {DEFAULT_CALLS})")
    parser.add_argument("--full", action="store_true", help="replay every request of the episode")
    parser.add_argument("--types", nargs="+", default=list(QUANT_TYPES), choices=list(QUANT_TYPES))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    types = ["shipped", *(t for t in args.types if t != "shipped")]  # the reference comes first
    requests = episode_requests()
    engine = EmbeddedEngine(threads=1, contexts=1, quant="shipped")
    calls = []
    for request in requests:
        messages, kwargs = engine.llama_arguments(request)
        fmt = request.config.response_format or {}
        calls.append({"stage": stage_of(request), "messages": messages, "kwargs": kwargs,
                      "decision_fields": decision_fields(fmt.get("schema"))})
    calls = choose(calls, None if args.full else args.calls)
    source = engine.source_path()
    started, load = time.perf_counter(), os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache  # the copies are made here, not in the user's cache
        for quant in types:
            cpu = time.process_time()
            made = model_for(source, quant)
            if made.quant != quant:
                raise SystemExit(f"could not make the {quant} file")
            quantize_cpu = time.process_time() - cpu
            results[quant] = {"file_bytes": os.path.getsize(made.path), "quantize_cpu_s": quantize_cpu,
                              **measure_type(str(made.path), calls)}
    for quant in types:
        results[quant]["vs_shipped"] = faithfulness(results["shipped"]["calls"], results[quant]["calls"], calls)
        results[quant]["prompt_speedup_vs_shipped"] = (results[quant]["prompt_tokens_per_cpu_s"]
                                                       / results["shipped"]["prompt_tokens_per_cpu_s"])
    import llama_cpp

    out = {"llama_cpp_python": llama_cpp.__version__, "threads": 1, "n_ctx": CONTEXT_WINDOW,
           "episode_requests": len(requests), "replayed": len(calls),
           "stages": [c["stage"] for c in calls], "load_before": load, "seconds": time.perf_counter() - started,
           "types": results}
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{len(calls)} of the episode's {len(requests)} requests, one thread, load before {load[0]:.1f}")
    print(f"{'type':8} {'MB':>5} {'prompt tok/CPU-s':>16} {'x shipped':>9} {'gen tok/CPU-s':>13} "
          f"{'identical':>9} {'decisions agree':>15}")
    for quant, row in results.items():
        f = row["vs_shipped"]
        print(f"{quant:8} {row['file_bytes'] / 1e6:5.0f} {row['prompt_tokens_per_cpu_s']:16.1f} "
              f"{row['prompt_speedup_vs_shipped']:9.2f} {row['generation_tokens_per_cpu_s'] or 0:13.1f} "
              f"{f['identical_outputs']:>4}/{f['calls']:<4} {f['decisions_agree']:>7}/{f['calls_with_decisions']:<7}")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
