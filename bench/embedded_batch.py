"""The embedded model's batch sizes: prompt tokens per CPU-second and outputs by ``n_batch``/``n_ubatch`` (issue 27).

llama.cpp evaluates a prompt in logical batches of ``n_batch`` tokens, each split into physical batches of
``n_ubatch``; llama-cpp-python's defaults are 512 and 512, which the embedded engine keeps. This bench replays
requests of the demo's ReGround episode (``bench/embedded_quant.py``'s: the scripted LM of realistic lengths, so
the prompts are groundstate's own) on one context of one thread of the default q8_0 file, once per batch setting,
every call on a reset context:

- prompt tokens per CPU-second of a prompt-only call (``max_tokens=1``), ``time.process_time`` of this process;
- the full call's greedy output against the 512/512 setting's: identical or not (a setting that changes outputs
  would change answers and run ids, so it would have to be part of the engine's identity).

Prefix reuse (``groundstate.lm.prefix``) evaluates a prompt's suffix starting at any position, so whatever the
setting, ``n_batch`` stays a multiple of ``n_ubatch`` here.

Usage: ``python bench/embedded_batch.py [--calls 8]``; about 4 CPU-minutes; writes
``bench/results/embedded_batch.json``.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_budget import stage_of  # noqa: E402
from embedded_quant import choose, decision_fields, episode_requests, faithfulness  # noqa: E402

from groundstate.eval.lm_check import timed_completion  # noqa: E402
from groundstate.lm.contexts import FLASH_ATTENTION  # noqa: E402
from groundstate.lm.embedded import CONTEXT_WINDOW, EmbeddedEngine  # noqa: E402
from groundstate.lm.quantize import DEFAULT_QUANT, model_for  # noqa: E402

OUT = Path(__file__).parent / "results" / "embedded_batch.json"
SETTINGS = ((512, 512), (1024, 1024), (256, 256), (128, 128))  # the default first: the reference


def measure(path: str, n_batch: int, n_ubatch: int, calls: list[dict]) -> dict:
    from llama_cpp import Llama

    llama = Llama(model_path=path, n_ctx=CONTEXT_WINDOW, n_threads=1, n_threads_batch=1, n_batch=n_batch,
                  n_ubatch=n_ubatch, flash_attn=FLASH_ATTENTION, verbose=False)
    timed_completion(llama, calls[0]["messages"], {**calls[0]["kwargs"], "max_tokens": 1})  # warm-up
    rows = []
    for call in calls:
        first, _, cpu = timed_completion(llama, call["messages"], {**call["kwargs"], "max_tokens": 1})
        full, _, _ = timed_completion(llama, call["messages"], call["kwargs"])
        rows.append({"prompt_tokens": first["usage"]["prompt_tokens"], "prompt_cpu_s": cpu,
                     "output": full["choices"][0]["message"]["content"] or ""})
    llama.close()
    seconds = sum(r["prompt_cpu_s"] for r in rows)
    return {"n_batch": n_batch, "n_ubatch": n_ubatch, "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
            "prompt_tokens_per_cpu_s": sum(r["prompt_tokens"] for r in rows) / seconds if seconds else None,
            "calls": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=8, help="requests replayed (default 8)")
    args = parser.parse_args(argv)
    engine = EmbeddedEngine(threads=1, contexts=1, quant="shipped")
    calls = []
    for request in episode_requests():
        messages, kwargs = engine.llama_arguments(request)
        fmt = request.config.response_format or {}
        calls.append({"stage": stage_of(request), "messages": messages, "kwargs": kwargs,
                      "decision_fields": decision_fields(fmt.get("schema"))})
    calls = choose(calls, args.calls)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        made = model_for(engine.source_path(), DEFAULT_QUANT)
        results = [measure(str(made.path), b, u, calls) for b, u in SETTINGS]
    reference = results[0]
    for row in results:
        row["vs_default"] = faithfulness(reference["calls"], row["calls"], calls)
        row["prompt_speed_vs_default"] = row["prompt_tokens_per_cpu_s"] / reference["prompt_tokens_per_cpu_s"]
    print(f"{len(calls)} requests, {made.quant}, one thread, load before {load[0]:.1f}")
    for row in results:
        f = row["vs_default"]
        print(f"n_batch {row['n_batch']:5d} n_ubatch {row['n_ubatch']:5d}: "
              f"{row['prompt_tokens_per_cpu_s']:6.1f} prompt tokens per CPU-s ({row['prompt_speed_vs_default']:.2f}x), "
              f"outputs identical to 512/512: {f['identical_outputs']}/{f['calls']}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"quant": made.quant, "threads": 1, "load_before": load, "replayed": len(calls),
                               "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "settings": results}, indent=2) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
