"""ReGround's token budget and concurrency, each measured against a baseline in the same run.

1. Token budget: ReGround vs standard collaboration as the authors run it (opening turn, 3 rounds, summarizer,
   updater, decision), on the same synthetic instances and LM, as tokens per instance and their ratio. The
   paper reports 19.4K vs 52.1K with GPT-4o on HEALTHCARE-S (ratio 0.37; target here <= 0.37). Measured twice:
   with a scripted LM that writes outputs of realistic length for every stage (every ReGround stage runs: M
   conflict rounds, scoring, detection, per-fact checks; token counts estimated from the text at 4 characters
   per token), and with the embedded model (whose short answers make its ratio a plumbing check only).
2. How cost grows: LM calls and tokens of both programs as agents go 4 -> 10 and sentences per agent 1 -> 12,
   every stage forced (the same scripted LM), with the prompt tokens of each stage at the paper's size.
3. Concurrency: wall time of ReGround on 20 instances with a scripted LM that sleeps 50 ms per call: fully
   serial (1 runner thread, no fan-out inside the program), 1 runner thread with the program's own
   concurrent calls, and 8 runner threads. Speedups are against the fully serial run.

Usage: ``python bench/reground_cost.py [--n N] [--lm SPEC] [--quick]``. Prints tables, writes
``bench/results/reground_cost.json``. ``--quick`` runs a smaller growth grid and fewer instances and skips the
embedded model.

Where the tokens go (measured with this bench, 9 agents x 2 sentences): ReGround's cost is mostly fixed per
call, not per agent. DSPy's JSON adapter sends each call its field list, the input/output layout and the
signature's instructions (170-230 tokens of layout alone, before the instructions), and ReGround makes
``N + K + 25`` calls (``K`` facts in the shared context), so the layout is about 8K of its 21K prompt tokens;
the instructions were trimmed to compact wording with the same decision rules (and no source indentation).
The inputs that scale are the statements: every conflict search, every argument (the statements of all
sources but the pair, as in the authors' code), every score and every fact check quotes them, so ReGround's
tokens grow with ``N x sentences``. Standard collaboration grows with ``N^2``: each of ``N`` agents reads
the ``N - 1`` other opinions in each of 3 rounds (``4N + 3`` calls); its opinions are as long as a model
writes them, whatever the evidence size. So the ratio falls with more agents and rises with longer evidence.
The per-fact checks repeat the trusted evidence and the long importance rubric once per fact;
``ReGround(batch_facts=True)`` checks all facts in one call with the same rule (measured as a second column).
The embedded model's ``max_items=8`` bounds its list outputs (at most 8 statements per agent and 8 facts, so at
most 8 fact checks); it does not apply to the scripted LM here or to API models.

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
from groundstate.lm.adapters import json_adapter  # noqa: E402
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


# Output lengths (words) of the realistic scripted LM, modelled on what a GPT-4o-class model writes for each
# prompt of the authors' code (our estimate: the paper gives totals only): short reasons, paragraph-long
# arguments and opinions, states as long as the facts they narrate.
LENGTHS = {"reason": 35, "argument": 70, "opinion": 110, "revised": 140, "context_extra": 120}


def _words(count: int, source: str) -> str:
    pool = source.split() or ["finding"]
    return " ".join(pool[i % len(pool)] for i in range(count))


def _sentences(text: str) -> list[str]:
    import re

    return [p.strip() for p in re.split(r"(?<=[.!?])\s+", text or "") if p.strip()]


def realistic(req):
    """Every stage answered at a realistic length; choices are the first allowed value (every stage runs)."""
    fields, text = req.output_fields, req.user
    props = (req.schema or {}).get("properties", {})

    def first(name):
        spec = props.get(name, {})
        return (spec.get("enum") or [spec.get("const")])[0]

    if "statements" in fields:
        return {"statements": _sentences(req.field("evidence"))}
    if "pair" in fields:
        return {"pair": first("pair"), "strength": "strong", "reason": _words(LENGTHS["reason"], text)}
    if "argument" in fields:
        return {"argument": _words(LENGTHS["argument"], req.field("others") or text)}
    if "incorrect" in fields:
        return {"incorrect": "first", "reason": _words(LENGTHS["reason"], text)}
    if "consistency" in fields:
        return {"consistency": 2, "reason": _words(LENGTHS["reason"], text)}
    if "misleading_source" in fields:
        import re

        return {"misleading_source": int(re.search(r"\[(\d+)\]", req.field("candidates")).group(1)),
                "reason": _words(LENGTHS["reason"], text)}
    if "facts" in fields:
        return {"facts": _sentences(req.field("context"))}
    if "verdict" in fields:
        return {"verdict": "supported", "importance": "high"}
    if "checks" in fields:  # the batched fact check: one check per numbered fact
        lines = [line for line in (req.field("facts") or "").splitlines() if line.strip()]
        return {"checks": [{"fact": k, "verdict": "supported", "importance": "high"} for k in range(1, len(lines) + 1)]}
    if "state" in fields and "verified_facts" in text:
        return {"state": " ".join([req.field("verified_facts") or "", req.field("trusted_statements") or ""])}
    if "opinion" in fields:
        length = LENGTHS["revised" if "previous_opinion" in text else "opinion"]
        return {"opinion": _words(length, req.field("private_evidence") or req.field("other_opinions") or text),
                "confidence": 70}
    if "misleading_agent" in fields:
        return {"misleading_agent": first("misleading_agent"), "reason": _words(LENGTHS["reason"], text)}
    if "state" in fields:
        return {"state": " ".join([req.field("shared_context") or "",
                                   _words(LENGTHS["context_extra"], req.field("opinions") or text)])}
    if "answer" in fields:
        return {"answer": "A", "reason": _words(30, text)}
    return None


def sized_instances(n_instances: int, n_agents: int, facts_per_agent: int, seed: int = 0) -> list:
    """Instances of a chosen size: ``n_agents`` agents with ``facts_per_agent`` sentences each (and a six-sentence
    shared context), drawn from the synthetic generator's sentences. The published MediQ instances have nine
    agents (eight departments and the misleading one) with one to three sentences each."""
    import random

    from groundstate.records import AgentEvidence, OffQueryInstance, T2Fact

    pool = [s for x in generate("healthcare", "main", 30, seed=seed) for a in x.agents for s in _sentences(a.evidence)]
    rng = random.Random(seed)
    out = []
    for k in range(n_instances):
        agents = [AgentEvidence(agent=i, evidence=" ".join(rng.choice(pool) for _ in range(facts_per_agent)))
                  for i in range(n_agents)]
        shared = " ".join(rng.choice(pool) for _ in range(6))
        out.append(OffQueryInstance(id=f"sized-{n_agents}-{facts_per_agent}-{k}", domain="healthcare", agents=agents,
                                    shared_context=shared, corrupted_context=shared, question="Which diagnosis?",
                                    options={"A": "one", "B": "two", "C": "three", "D": "four"}, answer="A",
                                    misleading=[0], t2_facts=[T2Fact(text=pool[0], label=1)]))
    return out


def forced_budget(n: int) -> dict:
    """Tokens per instance with every stage run at realistic output lengths (scripted LM, estimated tokens), on
    instances of the paper's size (9 agents, 2 sentences each) and on the synthetic generator's instances."""
    adapter = json_adapter()
    out = {"lm": "scripted (realistic lengths)", "instances": n, "output_words": LENGTHS, "target_ratio": 0.37,
           "paper_ratio_gpt4o_healthcare_s": 19.4 / 52.1}
    for name, instances in (("paper_size", sized_instances(n, 9, 2)),
                            ("synthetic", generate("healthcare", "main", n, seed=0))):
        reground = run(ReGround(), instances, scripted_lm(realistic, input_tokens=None, output_tokens=None), adapter,
                       threads=2, tag="reground")
        standard_lm = scripted_lm(realistic, input_tokens=None, output_tokens=None)
        standard = run(StandardCollaboration(), instances, standard_lm, adapter, threads=2, tag="standard")
        out[name] = {"agents_per_instance": sum(x.n_agents for x in instances) / len(instances),
                     "reground": reground, "standard": standard,
                     "ratio": reground["tokens_per_instance"] / standard["tokens_per_instance"]}
    out["ratio"] = out["paper_size"]["ratio"]
    out["meets_target"] = out["ratio"] <= 0.37
    return out


STAGES = {"statements": "extract statements", "pair": "conflict search", "argument": "arguments",
          "incorrect": "adjudication", "consistency": "candidate scoring", "misleading_source": "detection",
          "facts": "decompose context", "verdict": "fact checks",
          "checks": "fact checks (one batched call)", "opinion": "opinions (open + 3 rounds)",
          "misleading_agent": "summarizer", "answer": "decision"}


def _stage(messages: list[dict]) -> str:
    """The stage a call belongs to, from the first output field its system message lists."""
    import re

    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    found = re.search(r"Your output fields are:\s*1\. `(\w+)`", system)
    name = found.group(1) if found else "?"
    if name == "state":  # ReGround's narrative state vs the updater's state
        return "write state" if "verified_facts" in system else "updater"
    return STAGES.get(name, name)


def measure(program, instances) -> dict:
    """Calls and estimated tokens per instance of ``program`` under the realistic scripted LM, overall and per
    stage (prompt tokens; the LM's own usage records, 4 characters per token)."""
    lm = scripted_lm(realistic, input_tokens=None, output_tokens=None)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for instance in instances:
            program(**instance.inputs("unreliable"))
    n = len(instances)
    stages: dict[str, dict[str, float]] = {}
    prompt = completion = 0
    for entry in lm.history:
        usage = entry.get("usage") or {}
        stage = stages.setdefault(_stage(entry.get("messages") or []), {"calls": 0, "prompt_tokens": 0})
        stage["calls"] += 1 / n
        stage["prompt_tokens"] += usage.get("prompt_tokens", 0) / n
        prompt += usage.get("prompt_tokens", 0)
        completion += usage.get("completion_tokens", 0)
    return {"calls": len(lm.history) / n, "prompt_tokens": prompt / n, "completion_tokens": completion / n,
            "tokens": (prompt + completion) / n, "stages": stages}


GROWTH_AGENTS = (4, 5, 6, 7, 8, 9, 10)
GROWTH_FACTS = (1, 2, 3, 6, 9, 12)


def growth(agents=GROWTH_AGENTS, facts=GROWTH_FACTS, n: int = 2) -> dict:
    """How calls and tokens grow with the team (agents) and the evidence (sentences per agent), every stage
    forced; plus the per-stage prompt tokens at the paper's size (9 agents, 2 sentences)."""
    rows = []
    for n_agents in agents:
        for per_agent in facts:
            instances = sized_instances(n, n_agents, per_agent)
            reground, standard = measure(ReGround(), instances), measure(StandardCollaboration(), instances)
            batched = measure(ReGround(batch_facts=True), instances)
            rows.append({"agents": n_agents, "facts_per_agent": per_agent,
                         "reground": {k: v for k, v in reground.items() if k != "stages"},
                         "reground_batched_facts": {k: v for k, v in batched.items() if k != "stages"},
                         "standard": {k: v for k, v in standard.items() if k != "stages"},
                         "ratio": reground["tokens"] / standard["tokens"],
                         "ratio_batched_facts": batched["tokens"] / standard["tokens"],
                         "prompt_ratio": reground["prompt_tokens"] / standard["prompt_tokens"]})
    paper = sized_instances(n, 9, 2)
    return {"instances_per_cell": n, "rows": rows, "target_ratio": 0.37,
            "note": "sentences come from the synthetic generator (about 10 words each; MediQ's are longer)",
            "stages_at_paper_size": {"reground": measure(ReGround(), paper)["stages"],
                                     "reground_batched_facts": measure(ReGround(batch_facts=True), paper)["stages"],
                                     "standard": measure(StandardCollaboration(), paper)["stages"]}}


def growth_tables(result: dict) -> list:
    """The growth grid and the per-stage breakdown as rich tables."""
    from rich.table import Table

    grid = Table(title="How cost grows (scripted LM, every stage forced; tokens per instance)")
    for name in ("agents", "sentences per agent", "ReGround calls", "ReGround tokens", "Standard calls",
                 "Standard tokens", "ratio", "ratio (batched fact checks)"):
        grid.add_column(name, justify="right")
    for row in result["rows"]:
        rg, st = row["reground"], row["standard"]
        grid.add_row(str(row["agents"]), str(row["facts_per_agent"]), f"{rg['calls']:.0f}", f"{rg['tokens']:.0f}",
                     f"{st['calls']:.0f}", f"{st['tokens']:.0f}", f"{row['ratio']:.2f}",
                     f"{row['ratio_batched_facts']:.2f}")
    stages = Table(title="Prompt tokens per stage, 9 agents x 2 sentences (per instance)")
    for name in ("program", "stage", "calls", "prompt tokens", "per call"):
        stages.add_column(name, justify="right" if name in ("calls", "prompt tokens", "per call") else "left")
    for program, table in result["stages_at_paper_size"].items():
        for stage, v in sorted(table.items(), key=lambda kv: -kv[1]["prompt_tokens"]):
            stages.add_row(program, stage, f"{v['calls']:.0f}", f"{v['prompt_tokens']:.0f}",
                           f"{v['prompt_tokens'] / max(v['calls'], 1e-9):.0f}")
    return [grid, stages]


def concurrency(n: int = 20, sleep: float = 0.05) -> dict:
    instances = generate("healthcare", "main", n, seed=1)
    adapter = json_adapter()
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
    parser.add_argument("--quick", action="store_true",
                        help="a 3 x 3 growth grid, fewer instances, and no embedded-model run")
    args = parser.parse_args()
    if args.quick:
        results = {"concurrency": concurrency(n=8), "forced_token_budget": forced_budget(2),
                   "growth": growth(agents=(4, 7, 10), facts=(1, 6, 12), n=1),
                   "token_budget": {"skipped": "--quick"}}
    else:
        results = {"concurrency": concurrency(), "forced_token_budget": forced_budget(max(args.n, 6)),
                   "growth": growth()}
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
    for name, label in (("paper_size", "paper-size instances"), ("synthetic", "synthetic instances")):
        f = results["forced_token_budget"][name]
        table.add_row(f"ReGround tokens/instance (scripted, {label}, {f['agents_per_instance']:.1f} agents)",
                      f"{f['reground']['tokens_per_instance']:.0f}")
        table.add_row("  standard collaboration (authors') tokens/instance",
                      f"{f['standard']['tokens_per_instance']:.0f}")
        table.add_row("  ratio ReGround / standard" + (" (target <= 0.37)" if name == "paper_size" else ""),
                      f"{f['ratio']:.2f}")
    t = results["token_budget"]
    if "skipped" in t:
        table.add_row("token budget", t["skipped"])
    else:
        table.add_row(f"ReGround tokens/instance ({t['lm']}, n={t['instances']})",
                      f"{t['reground']['tokens_per_instance']:.0f}")
        table.add_row("Standard collaboration tokens/instance", f"{t['standard']['tokens_per_instance']:.0f}")
        table.add_row("ratio ReGround / Standard (paper, GPT-4o: 0.37)", f"{t['ratio']:.2f}")
    console = Console()
    console.print(table)
    for extra in growth_tables(results["growth"]):
        console.print(extra)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
