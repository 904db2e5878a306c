"""How much of ReGround's prompt the embedded LM does not re-evaluate, by reuse mode (issue 27 item 2).

Runs ReGround (``groundstate compare reground``) on the first synthetic episode(s) of the demo's data with the embedded
LM, DSPy's response cache off, once per reuse mode of :data:`groundstate.lm.embedded.REUSE_MODES` compared here:

- ``last``: what earlier versions did: each context reuses only the prefix its own last prompt shares
  (llama-cpp-python's own reuse), contexts lent most-recent-first;
- ``routed``: calls lent to the context sharing the longest prefix, plus saved prompt states per signature
  (:mod:`groundstate.lm.prefix`).

Each mode runs in its own process (fresh contexts) with the same ``--contexts`` (default 2: the demo's
``--threads 2`` on a 2-core machine), so the two differ only in reuse. Reported per mode, from the run's own summary:
prompt tokens, prompt tokens reused (``tokens.reused_input``: the engine's count of tokens llama.cpp did not
evaluate), their share, LM calls, and the process's CPU seconds (user + system of the child, which on a shared
machine is steadier than wall time). The ratio routed/last of CPU per prompt token is the speed figure.

Cost: each mode runs the full episode(s) on the real model: a few CPU-minutes per mode and episode.

Usage: ``python bench/embedded_prefix.py [--episodes 2] [--contexts 2]``; writes ``bench/results/embedded_prefix.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results" / "embedded_prefix.json"
MODES = ("last", "routed")


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def groundstate(*args: str, cwd: Path) -> None:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [str(Path(sys.executable).with_name("groundstate")), *args]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"groundstate {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def summary_of(runs: Path) -> tuple[dict, list[dict]]:
    found = sorted(runs.rglob("summary.json"))
    if len(found) != 1:
        raise SystemExit(f"expected one run under {runs}, found {len(found)}")
    rows = [json.loads(line) for line in (found[0].parent / "results.jsonl").read_text().splitlines() if line]
    return json.loads(found[0].read_text()), rows


def share(reused, prompt) -> float | None:
    return round(reused / prompt, 4) if prompt and isinstance(reused, int) else None


def run_mode(mode: str, episodes: int, contexts: int, work: Path) -> dict:
    here = work / mode
    here.mkdir()
    (here / "lm.toml").write_text(f'[default]\nmodel = "embedded"\ncache = false\ncontexts = {contexts}\n'
                                  f'reuse = "{mode}"\n')
    groundstate("data", "generate", "offquery", "--domain", "both", "--variant", "all", "--n", "5", "--seed", "0",
                "--out", "synthetic.jsonl", cwd=here)
    cpu, wall = child_cpu(), time.perf_counter()
    groundstate("compare", "reground", "--data", "synthetic.jsonl", "--limit", str(episodes), "--runs-dir", "runs",
                "--report-dir", "report", "--threads", str(contexts), "--lm-config", "lm.toml", "--no-progress",
                cwd=here)
    cpu, wall = child_cpu() - cpu, time.perf_counter() - wall
    summary, rows = summary_of(here / "runs")
    tokens = summary["tokens"]
    episodes_seen = [{"id": r["id"], "prompt_tokens": r["input_tokens"],
                      "reused_prompt_tokens": r.get("reused_input_tokens"),
                      "reused_share": share(r.get("reused_input_tokens"), r["input_tokens"])} for r in rows]
    prompt, reused = int(tokens["input"]), tokens.get("reused_input")
    return {"mode": mode, "episodes": episodes, "contexts": contexts, "lm_calls": summary["lm_calls"]["total"],
            "failed_calls": summary["lm_calls"]["failed"], "prompt_tokens": prompt, "output_tokens": tokens["output"],
            "reused_prompt_tokens": reused, "reused_share": share(reused, prompt), "per_episode": episodes_seen,
            "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "cpu_ms_per_prompt_token": round(1000 * cpu / prompt, 3) if prompt else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--contexts", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_mode(mode, args.episodes, args.contexts, Path(tmp)) for mode in MODES]
    for r in results:
        share = "not measured" if r["reused_share"] is None else f"{100 * r['reused_share']:.1f}%"
        print(f"{r['mode']:>6}: {r['lm_calls']} calls, {r['prompt_tokens']:,} prompt tokens, {share} reused, "
              f"{r['cpu_s']} CPU-s ({r['cpu_ms_per_prompt_token']} CPU-ms per prompt token), {r['wall_s']} s wall")
        print("        per episode: " + ", ".join(
            "not measured" if e["reused_share"] is None else f"{100 * e['reused_share']:.1f}%"
            for e in r["per_episode"]))
    last, routed = results
    ratio = None
    if last["cpu_ms_per_prompt_token"] and routed["cpu_ms_per_prompt_token"]:
        ratio = round(routed["cpu_ms_per_prompt_token"] / last["cpu_ms_per_prompt_token"], 3)
        print(f"routed/last CPU per prompt token: {ratio}x")
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"results": results, "cpu_ratio_routed_over_last": ratio, "load_average": load,
                               "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
