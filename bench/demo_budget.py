"""The LM budget of ``make demo``'s ReGround part: its LM calls and prompt tokens, counted, not timed (issue 27 item 3).

The demo runs ReGround on one episode with the embedded LM and prints its trace::

    groundstate data generate offquery --domain both --variant all --n 5 --seed 0 --out runs/demo/synthetic.jsonl
    groundstate compare reground --data runs/demo/synthetic.jsonl --limit 1 --runs-dir runs/demo \\
        --report-dir runs/demo/offquery --threads 2 --show-trace

This bench runs exactly those two commands through the CLI's entry point, in a temporary directory, with the LM the
command builds wrapped in a counting engine (:class:`CountingEngine`: every request that reaches the engine is one
call; its prompt and output tokens are the ones the engine reports) and DSPy's response cache off, so a second run
counts every call again. Each call is also filed under its stage (the first output field of its signature: conflict
search, arguments, fact checks...), and the runner's own meter (the run's ``summary.json``) is kept beside the counts
as a cross-check.

- Default: a scripted LM named as the embedded model (so the demo's JSON adapter and prompts are used) that answers
  every stage at a realistic length (``realistic`` of ``bench/reground_cost.py``); token counts are estimated at 4
  characters per token. Cheap: seconds.
- ``--embedded``: the real embedded LM, as the demo builds it; token counts are the model's own tokenizer's. Slow (the
  demo's ReGround part itself: minutes on a quiet 2-core machine).

Usage: ``python bench/demo_budget.py [--embedded]``. Prints the counts and writes ``bench/results/demo_budget.json``
(the scripted and the embedded counts under their own keys, so running one keeps the other).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the realistic scripted LM of reground_cost.py

from reground_cost import STAGES, realistic  # noqa: E402

from groundstate.cli import main as cli  # noqa: E402
from groundstate.lm.config import LMConfig  # noqa: E402

OUT = Path(__file__).parent / "results" / "demo_budget.json"
DEMO_DATA = ["data", "generate", "offquery", "--domain", "both", "--variant", "all", "--n", "5", "--seed", "0",
             "--out", "synthetic.jsonl"]
DEMO_REGROUND = ["compare", "reground", "--data", "synthetic.jsonl", "--limit", "1", "--runs-dir", "runs",
                 "--report-dir", "offquery", "--threads", "2", "--show-trace", "--no-progress"]


def responder():
    """``realistic`` of ``bench/reground_cost.py``: the responder itself before issue 27 item 6, a factory of one
    (taking Standard's opinion lengths, which ReGround never asks for) after it; either way the responder."""
    return realistic if list(inspect.signature(realistic).parameters) == ["req"] else realistic({})


def stage_of(request) -> str:
    """The stage a request belongs to: the first output field its system message lists (DSPy's adapters list
    them), named as ``bench/reground_cost.py`` names the stages."""
    system = request.system if isinstance(request.system, str) else " ".join(
        str(getattr(part, "text", part)) for part in (request.system or ()))
    if not system:
        system = " ".join(str(getattr(m, "content", "")) for m in request.messages
                          if getattr(m, "role", "") == "system")
    found = re.search(r"Your output fields are:\s*1\. `(\w+)`", system)
    name = found.group(1) if found else "?"
    if name == "state":
        return "write state"
    return STAGES.get(name, name)


class CountingEngine:
    """A DSPy engine around another: passes every request on and counts it, with the prompt and output tokens the
    inner engine's response reports, overall and per stage (thread-safe: ReGround's calls run concurrently). Every
    other attribute is the inner engine's, so DSPy sees the same capabilities (schema-constrained decoding) and
    sends the same requests."""

    def __init__(self, inner):
        self.inner = inner
        self.lock = threading.Lock()
        self.calls = self.prompt_tokens = self.output_tokens = self.reused_tokens = 0
        self.largest_prompt = 0
        self.stages: dict[str, dict[str, int]] = {}

    def complete(self, request):
        response = self.inner.complete(request)
        usage = response.usage
        prompt, output = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        reused = int(getattr(usage, "cache_read_tokens", None) or 0)  # the embedded LM's reused prompt prefix
        stage = stage_of(request)
        with self.lock:
            self.calls += 1
            self.prompt_tokens += prompt
            self.output_tokens += output
            self.reused_tokens += reused
            self.largest_prompt = max(self.largest_prompt, prompt)
            entry = self.stages.setdefault(stage, {"calls": 0, "prompt_tokens": 0, "output_tokens": 0})
            entry["calls"] += 1
            entry["prompt_tokens"] += prompt
            entry["output_tokens"] += output
        return response

    def __getattr__(self, name):  # capabilities (supports_response_schema, supported_params...), stream, close
        return getattr(self.inner, name)

    def counts(self) -> dict:
        return {"lm_calls": self.calls, "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "reused_prompt_tokens": self.reused_tokens,
                "largest_prompt_tokens": self.largest_prompt,
                "stages": dict(sorted(self.stages.items(), key=lambda kv: -kv[1]["prompt_tokens"]))}


def counting_lm(embedded: bool, built: dict):
    """``LMConfig.lm_for`` replaced: the LM the command would build (``embedded``) or the realistic scripted LM under
    the embedded model's name, wrapped in a :class:`CountingEngine`, DSPy's cache off; built once."""
    original = LMConfig.lm_for

    def lm_for(self, role=None):
        if "lm" not in built:
            if embedded:
                lm = original(self, role)
            else:
                from groundstate.lm.embedded import EMBEDDED_MODEL_NAME
                from groundstate.testing import scripted_lm

                lm = scripted_lm(responder(), model=EMBEDDED_MODEL_NAME, input_tokens=None, output_tokens=None)
            built["engine"] = CountingEngine(lm.engine)
            built["lm"] = lm.copy(engine=built["engine"], cache=False)
        return built["lm"]

    return lm_for


def measure(embedded: bool) -> dict:
    """Run the demo's ReGround commands in a temporary directory and count what reached the LM."""
    built: dict = {}
    LMConfig.lm_for = counting_lm(embedded, built)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            shown = io.StringIO()
            with contextlib.redirect_stdout(shown):
                if cli(DEMO_DATA) != 0 or cli(DEMO_REGROUND) != 0:
                    raise SystemExit("the demo's ReGround command failed:\n" + shown.getvalue())
            summary = json.loads(next(Path("runs").glob("reground-*/summary.json")).read_text())
        finally:
            os.chdir(cwd)
    counts = built["engine"].counts()
    meter = {"lm_calls": summary["lm_calls"]["total"], "input_tokens": summary["tokens"]["input"],
             "output_tokens": summary["tokens"]["output"], "records": summary["n_done"], "errors": summary["n_error"]}
    return {"lm": "embedded" if embedded else "scripted (realistic lengths, 4 characters per token)",
            "command": " ".join(["groundstate", *DEMO_REGROUND]), **counts, "runner_meter": meter,
            "meter_agrees": (meter["lm_calls"], meter["input_tokens"]) == (counts["lm_calls"], counts["prompt_tokens"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedded", action="store_true",
                        help="count the real embedded LM's calls and tokens (slow: the demo's ReGround part itself)")
    args = parser.parse_args()
    result = measure(args.embedded)
    meter = "agrees" if result["meter_agrees"] else "differs: " + json.dumps(result["runner_meter"])
    print(f"demo ReGround part, {result['lm']}: {result['lm_calls']} LM calls, {result['prompt_tokens']} prompt "
          f"tokens ({result['largest_prompt_tokens']} in the largest call; {result['reused_prompt_tokens']} reused "
          f"from an evaluated prefix), {result['output_tokens']} output tokens; the runner's meter {meter}")
    for stage, entry in result["stages"].items():
        print(f"  {stage:32s} {entry['calls']:4d} calls {entry['prompt_tokens']:7d} prompt tokens")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    stored = json.loads(OUT.read_text()) if OUT.is_file() else {}
    stored["embedded" if args.embedded else "scripted"] = result
    OUT.write_text(json.dumps(stored, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
