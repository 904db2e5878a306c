"""A stored run's per-record trace as lines a person reads: ReGround stage by stage, beside the gold labels.

``results.jsonl`` keeps each record's ``trace`` (:mod:`groundstate.eval.runner`). For a ReGround record
(``{"verify", "reconstruct", "resolve"}``, :class:`~groundstate.programs.reground.reground.ReGround`)
:func:`trace_lines` shows, stage by stage:

- **T1, verification**: the statements extracted per source, each conflict round (the pair named, its strength and
  reason, the side the adjudicator judged incorrect), the candidate pool with its consistency scores, and who was
  blamed (the detector's pick or the fallback) against the gold misleading agent(s) and T1;
- **T2, reconstruction**: every atomic fact of the shared context with its verdict and importance, kept or dropped
  under the keep rule, against T2;
- **T3, resolution**: the option chosen and why, against the gold answer and T3.

Any other program's trace (the baselines' ``turns``, a user's program) is shown key by key as compact JSON.

Every value comes from a file and is shown through :func:`~groundstate.errors.one_line` (no control, bidi or
line-separator character reaches the terminal, long text is cut); nothing is parsed as markup, and a trace of the
wrong shape (a list where an object belongs, a missing key) is shown as far as it goes, never a traceback.

The gold labels are not in ``results.jsonl``: :func:`run_gold` takes them from the run's data, given again (its
sha256 must be the one the run's config recorded) or, for ``--data synthetic``, regenerated from the generator
settings the config recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import InputError, one_line

TEXT = 160
"""Characters shown of one text from a trace (a reason, a fact, a statement)."""

REGROUND_KEYS = frozenset({"verify", "reconstruct", "resolve"})


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any, limit: int | None = TEXT) -> str:
    return one_line(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str), limit)


def _agents(value: Any) -> str:
    """A blamed or gold agent set as text: ``agent 5``, ``agents 1, 3``, ``no agent``."""
    if isinstance(value, str):  # a program that names its agent in words: shown as it said it
        return _text(value, 60)
    items = value if isinstance(value, list) else [] if value is None else [value]
    if not items:
        return "no agent"
    return ("agent " if len(items) == 1 else "agents ") + ", ".join(_text(i, 40) for i in items)


def _score(row: Mapping[str, Any], name: str) -> str:
    """``T1 1`` / ``T1 0`` / ``T1 not measured (why)`` for a row."""
    scores, errors = _dict(row.get("scores")), _dict(row.get("score_errors"))
    if name in errors:
        return f"{name.upper()} not measured ({_text(errors[name], 120)})"
    value = scores.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name.upper()} not measured"
    return f"{name.upper()} {value:g}"


def _verdict(hit: bool | None) -> str:
    return "" if hit is None else (" -> right" if hit else " -> wrong")


def verification_lines(verify: Mapping[str, Any], row: Mapping[str, Any], gold: Mapping[str, Any] | None
                       ) -> list[str]:
    """Stage 1 of a ReGround trace (see the module notes)."""
    lines = []
    statements = _dict(verify.get("statements"))
    counts = ", ".join(f"{_text(k, 20)}: {len(_list(v))}" for k, v in statements.items())
    lines.append(f"  T1 verification: {len(statements)} sources; statements extracted per source: {counts or '-'}")
    if "oracle_t1" in verify:
        lines.append(f"    oracle T1: the gold {_agents(verify['oracle_t1'])} given; no conflict search")
    for entry in _list(verify.get("rounds")):
        entry = _dict(entry)
        number = entry.get("round")
        label = f"round {number + 1}" if isinstance(number, int) and not isinstance(number, bool) else "round ?"
        pair = entry.get("pair")
        named = "-".join(_text(i, 20) for i in pair) if isinstance(pair, list) else _text(pair, 40)
        text = f"    {label}: conflict pair {named}"
        if entry.get("strength") is not None:
            text += f" ({_text(entry['strength'], 20)})"
        if entry.get("conflict_reason"):
            text += f": {_text(entry['conflict_reason'])}"
        lines.append(text)
        if "incorrect" in entry:
            lines.append(f"      adjudicated: agent {_text(entry['incorrect'], 20)} judged incorrect"
                         + (f" ({_text(entry['verdict_reason'])})" if entry.get("verdict_reason") else ""))
        if entry.get("stop"):
            lines.append(f"      search stopped: {_text(entry['stop'])}")
    if "candidates" in verify:
        scores = {_text(_dict(s).get("candidate"), 20): _dict(s).get("consistency")  # keyed by text: any JSON value
                  for s in _list(verify.get("scores"))}
        pool = ", ".join(f"agent {_text(c, 20)}" + (f" (consistency {_text(scores[_text(c, 20)], 10)}/5)"
                                                    if scores.get(_text(c, 20)) is not None else "")
                         for c in _list(verify.get("candidates")))
        lines.append(f"    candidate pool: {pool or 'empty'}")
    for key, value in verify.items():  # statement mode and any other stage-1 variant: shown as it is
        if key not in {"statements", "oracle_t1", "rounds", "candidates", "scores", "decision"}:
            lines.append(f"    {_text(key, 40)}: {_text(value)}")
    decision = _dict(verify.get("decision"))
    outputs = _dict(row.get("outputs"))
    blamed = f"    blamed: {_agents(outputs.get('misleading_agent'))}"
    if decision.get("rule"):
        blamed += f" ({_text(decision['rule'], 80)}" + (f": {_text(decision['reason'])}" if decision.get("reason")
                                                        else "") + ")"
    lines.append(blamed)
    lines.append(_against_gold("misleading", gold, "gold misleading", _agents, row, "t1"))
    return lines


def _against_gold(key: str, gold: Mapping[str, Any] | None, label: str, show, row: Mapping[str, Any],
                  metric: str) -> str:
    """``    gold ...: X -> right (T1 1)``, or the score alone when the gold labels are not known."""
    value = (row.get("scores") or {}).get(metric) if isinstance(row.get("scores"), dict) else None
    hit = None if isinstance(value, bool) or not isinstance(value, int | float) else value >= 1
    if gold is None or key not in gold:
        return f"    {label}: not known here (give the run's data with --data); {_score(row, metric)}"
    return f"    {label}: {show(gold[key])}{_verdict(hit)} ({_score(row, metric)})"


def reconstruction_lines(reconstruct: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """Stage 2 of a ReGround trace: each fact with its verdict and importance, kept or dropped."""
    facts = [_dict(f) for f in _list(reconstruct.get("facts"))]
    kept = sum(1 for f in facts if f.get("kept") is True)
    lines = [f"  T2 reconstruction (keep rule {_text(reconstruct.get('keep_rule', '?'), 20)}): {len(facts)} atomic "
             f"facts from the shared context, {kept} kept, {len(facts) - kept} dropped"]
    for fact in facts:
        mark = "kept   " if fact.get("kept") is True else "dropped"
        lines.append(f"    {mark} {_text(fact.get('fact'))} ({_text(fact.get('verdict'), 20)}, "
                     f"{_text(fact.get('importance'), 20)} importance)")
    scores = _dict(row.get("scores"))
    halves = [f"{name.replace('t2_', '')} {scores[name]:g}" for name in ("t2_retention", "t2_exclusion")
              if isinstance(scores.get(name), int | float) and not isinstance(scores.get(name), bool)]
    lines.append(f"    {_score(row, 't2')}" + (f" ({', '.join(halves)})" if halves else ""))
    return lines


def resolution_lines(resolve: Mapping[str, Any], row: Mapping[str, Any], gold: Mapping[str, Any] | None
                     ) -> list[str]:
    """Stage 3 of a ReGround trace: the option chosen against the gold answer."""
    answer = _dict(row.get("outputs")).get("answer", resolve.get("answer"))
    line = f"  T3 resolution: answered {_text(answer, 20)}"
    if resolve.get("reason"):
        line += f" ({_text(resolve['reason'])})"
    return [line, _against_gold("answer", gold, "gold answer", lambda v: _text(v, 20), row, "t3")]


def trace_lines(row: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> list[str]:
    """The lines that show one result row's trace (see the module notes); ``gold`` is ``{"misleading": [...],
    "answer": "B"}`` when known. Guarantees: every line is one safe terminal line; any JSON value as ``row`` (or
    its ``trace``) gives lines, never an exception."""
    row = _dict(row)
    head = f"record {_text(row.get('id'), 120)}"
    if row.get("error"):
        return [head, f"  the program failed on it, so there is no trace: {_text(row['error'], 300)}"]
    trace = row.get("trace")
    if isinstance(trace, dict) and REGROUND_KEYS <= set(trace):
        return [head, *verification_lines(_dict(trace["verify"]), row, gold),
                *reconstruction_lines(_dict(trace["reconstruct"]), row),
                *resolution_lines(_dict(trace["resolve"]), row, gold)]
    if trace is None:
        return [head, "  no trace stored"]
    lines = [head]
    for key, value in (trace.items() if isinstance(trace, dict) else [("trace", trace)]):
        lines.append(f"  {_text(key, 40)}: {_text(value, 600)}")
    scores = _dict(row.get("scores"))
    if scores:
        lines.append("  scores: " + ", ".join(f"{_text(k, 40)} {_text(v, 20)}" for k, v in scores.items()))
    return lines


def gold_labels(instances: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """``{id: {"misleading", "answer"}}`` of OffQuery instances (as the run's condition shows them)."""
    return {x.id: {"misleading": list(x.misleading), "answer": x.answer} for x in instances}


def row_gold(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The gold labels a result row stores itself (``gold``: ``{"misleading_agent", "answer"}``, written by runs
    since issue 26), as ``{"misleading", "answer"}``; ``None`` for a row without them (an earlier run) or with a
    malformed label (a hostile file: the trace then shows the scores alone)."""
    gold = row.get("gold")
    if not isinstance(gold, Mapping) or "answer" not in gold:
        return None
    agents = gold.get("misleading_agent")
    if agents is None:
        misleading: list[Any] = []
    elif isinstance(agents, int) and not isinstance(agents, bool):
        misleading = [agents]
    elif isinstance(agents, list) and all(isinstance(a, int) and not isinstance(a, bool) for a in agents):
        misleading = list(agents)
    else:
        return None
    return {"misleading": misleading, "answer": gold["answer"]}


def run_gold(config: Mapping[str, Any], data: str | Path | None = None) -> dict[str, dict[str, Any]] | None:
    """The gold labels of a stored OffQuery run's records, under the run's condition, or ``None`` when they cannot be
    known: not an OffQuery run, or a run on a file given no ``data``.

    With ``data`` the file is read and must be the run's (its sha256 is the one the run's config recorded); without
    it a run on ``--data synthetic`` is regenerated from the generator settings its config recorded (checked against
    the generator's own domains and variants first).

    Raises:
        InputError: ``data`` is not the file the run ran on, or is not a readable OffQuery file (one line).
    """
    from groundstate.conditions import CONDITIONS  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.reground.tasks import OFFQUERY_TASKS  # noqa: PLC0415 (--help stays light)

    options = _dict(config.get("options"))
    condition = options.get("condition", "unreliable")
    program = config.get("program")
    if not isinstance(program, str) or program not in OFFQUERY_TASKS or condition not in CONDITIONS:
        return None
    recorded = _dict(config.get("data"))
    if data is not None:
        from groundstate.eval.reground.settings import OffQueryData  # noqa: PLC0415 (--help stays light)
        from groundstate.eval.reground.tasks import load_offquery_data  # noqa: PLC0415 (--help stays light)

        instances, description = load_offquery_data(OffQueryData(data=str(data), condition=condition))
        if description.get("sha256") != recorded.get("sha256"):
            raise InputError(f"is not the data run {one_line(config.get('run_id'), 80)} ran on (its sha256 differs "
                             "from the one the run's config.json recorded)", file=str(data))
        return gold_labels(instances)
    return _synthetic_gold(_dict(recorded.get("synthetic")), condition) if "synthetic" in recorded else None


def _synthetic_gold(settings: Mapping[str, Any], condition: str) -> dict[str, dict[str, Any]] | None:
    """The gold labels of a synthetic run regenerated from its recorded generator settings; ``None`` when they are
    not settings the generator takes."""
    from groundstate.eval.benchmarks.offquery.synthetic import DOMAINS, VARIANTS, generate  # noqa: PLC0415 (--help stays light)

    domains, variants = _list(settings.get("domains")), _list(settings.get("variants"))
    n, seed = settings.get("n"), settings.get("seed")
    whole = [isinstance(v, int) and not isinstance(v, bool) for v in (n, seed)]
    if not (all(whole) and 1 <= n <= 10_000 and seed >= 0 and domains and variants
            and all(isinstance(d, str) and d in DOMAINS for d in domains)
            and all(isinstance(v, str) and v in VARIANTS for v in variants)):
        return None
    return gold_labels([x.under(condition) for d in domains for v in variants for x in generate(d, v, n, seed=seed)])
