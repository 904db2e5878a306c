"""How long Standard's opinions are when the authors' prompts write them: an estimate from the paper's token totals.

The authors' prompts set no length for an opinion (``whr000001/OffQuery``):

- ``standard/prompts/independent.txt`` line 5: "Briefly share the information that you believe is important.";
  line 10: "Output the information only." (the opening turn);
- ``standard/prompts/discuss.txt`` line 15: "After considering the discussion, provide your updated opinion.";
  line 23: "Output the updated opinion only." (each of the 3 rounds);
- ``standard/main.py`` ``independent`` (lines 23-29) and ``discuss`` (lines 32-42) call
  ``obtain_response(inputs, model=model)`` with no length argument (``utils.py``, which defines it, is not in the
  repository).

Where the authors wanted a bound they wrote one: the summarizer's reason is "<1-2 sentences>"
(``oracle/misleading.txt``), the decision's "<2-3 sentences>" (``ours/prompts/decision_making.txt``). So an
opinion is as long as the model makes it, and the paper reports token totals only (Table 11: Standard with GPT-4o
52.1K tokens per instance on HEALTHCARE-S, 71.5K on HEALTHCARE-I, 31.2K on DISASTER). Our estimate:

- an opening opinion restates the agent's private evidence at its own length ("briefly", "the information
  only": one to a few sentences and nothing else);
- a revised opinion has the length at which the authors' own pipeline costs what Table 11 says:
  :func:`authors_standard_chars` counts the characters of every call of ``standard/main.py`` on an instance of
  the published size (the prompt files' sizes, the bounded replies, an updated context of the shared context
  plus 120 words), and :func:`calibrate` solves it for the revised opinion's length.

The result: about 900 characters (225 tokens at 4 characters per token, some 150 words) on HEALTHCARE-S and,
independently, on DISASTER (6 agents with twice the evidence each), and about 1,300 on HEALTHCARE-I, whose
instances are the same size as HEALTHCARE-S's (GPT-4o wrote longer opinions on the harder split). Two datasets
with 8.5 and 6 agents giving the same length is why ``bench/reground_cost.py`` keeps the revised length constant
across its grid. The published sizes below were sampled by hand (4 MediQ instances with 34 private pieces,
2 CrisisFact instances), so the estimate is good to perhaps +/- 15%; it moves little with them, since the
revised opinions (read by every agent in rounds 2-3, by the summarizer and the updater) make most of the total.

Usage: ``python bench/standard_opinions.py`` prints the calibration as JSON (``reground_cost.py`` uses it).
"""

from __future__ import annotations

import json
import sys

from groundstate.testing import CHARS_PER_TOKEN  # what the cost bench counts tokens with

#: Characters of the authors' prompt files (placeholders included). ``standard/main.py`` opens
#: ``prompts/misleading.txt`` and ``prompts/decision_making.txt``, which ``standard/`` does not ship:
#: ``oracle/misleading.txt`` and ``ours/prompts/decision_making.txt`` stand in.
AUTHORS_TEMPLATES = {"independent": 300, "discuss": 825, "misleading": 474, "correct": 580, "decision": 374}
#: Replies the prompts bound (the summarizer's JSON with a 1-2 sentence reason, the decision's with 2-3) and what
#: the updater adds to the shared context (as the cost bench scripts it: 120 words).
AUTHORS_REPLIES = {"misleading": 200, "decision": 300, "state_extra": 700}
#: Table 11's Standard totals (GPT-4o) and the published instances' mean sizes in characters: agents, private
#: evidence per agent, unreliable shared context, question and options (``datasets/mediQ_easy.json`` = 723
#: HEALTHCARE-S instances, ``mediQ_hard.json`` = 587 HEALTHCARE-I, ``CrisisFact.json`` = DISASTER).
PUBLISHED = {
    "healthcare_s": {"standard_tokens": 52_100, "agents": 8.5, "evidence": 140, "context": 550, "question": 200},
    "healthcare_i": {"standard_tokens": 71_500, "agents": 8.5, "evidence": 140, "context": 550, "question": 200},
    "disaster": {"standard_tokens": 31_200, "agents": 6, "evidence": 270, "context": 650, "question": 520},
}


def authors_standard_chars(agents: float, evidence: float, context: float, question: float, revised: float,
                           rounds: int = 3) -> float:
    """Characters of every prompt and reply of one instance of the authors' ``standard/main.py``: the opening
    turn (openings restate the evidence), ``rounds`` all-to-all rounds (each agent reads its previous opinion and
    the others'; revised opinions of ``revised`` characters), the summarizer, the updater (the shared context and
    the trusted opinions) and the decision. Linear in ``revised``."""
    t, r = AUTHORS_TEMPLATES, AUTHORS_REPLIES
    state = context + r["state_extra"]
    total = agents * (t["independent"] + 2 * evidence)
    previous = evidence
    for _ in range(rounds):
        total += agents * (t["discuss"] + previous + (agents - 1) * (previous + 1) + revised)
        previous = revised
    total += t["misleading"] + agents * (previous + len("Agent 0: \n")) + r["misleading"]
    total += t["correct"] + context + (agents - 1) * (previous + 1) + state
    return total + t["decision"] + state + question + r["decision"]


def calibrate() -> dict:
    """For each published setting, the revised-opinion length (characters, and tokens at
    :data:`CHARS_PER_TOKEN`) at which :func:`authors_standard_chars` equals Table 11's Standard total."""
    out = {}
    for name, p in PUBLISHED.items():
        size = {k: p[k] for k in ("agents", "evidence", "context", "question")}
        base = authors_standard_chars(**size, revised=0)
        slope = authors_standard_chars(**size, revised=1) - base
        revised = (p["standard_tokens"] * CHARS_PER_TOKEN - base) / slope
        out[name] = {**p, "revised_chars": round(revised), "revised_tokens": round(revised / CHARS_PER_TOKEN)}
    return out


def standard_lengths(calibration: dict) -> dict:
    """The Standard opinion lengths the cost bench scripts, as ``{name: {"opening": spec, "revised": spec}}`` with
    a spec ``("evidence", 0)`` (restate the evidence), ``("chars", n)`` or ``("words", n)``: ``central`` (the
    HEALTHCARE-S calibration), ``long`` (HEALTHCARE-I) and ``legacy`` (the bench's earlier 110 / 140 words, which
    also sent a ``confidence`` field Standard does not ask for; kept to reproduce issue 27's figures)."""
    return {"central": {"opening": ("evidence", 0), "revised": ("chars", calibration["healthcare_s"]["revised_chars"])},
            "long": {"opening": ("evidence", 0), "revised": ("chars", calibration["healthcare_i"]["revised_chars"])},
            "legacy": {"opening": ("words", 110), "revised": ("words", 140), "confidence": True}}


if __name__ == "__main__":
    print(json.dumps(calibrate(), indent=2))
    sys.exit(0)
