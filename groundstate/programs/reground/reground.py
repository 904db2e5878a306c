"""ReGround: verify evidence, reconstruct a trusted shared state, resolve the task from that state.

Three stages, each a ``dspy.Module`` usable on its own and composed by :class:`ReGround`:

1. :class:`Verify` (never sees the shared context): extract statements per agent; for up to ``M`` rounds find
   the most contradictory pair among the sources still standing, argue for and against each side using
   only the *other* sources' statements, adjudicate, and drop the losing source into the candidate pool;
   stop early when no conflict is found. Each candidate is then scored against the statements of the
   sources still standing, and a detector picks the misleading agent among the candidates (the other
   candidates return to the trusted evidence). In multi-misleading mode every flagged candidate is removed.
2. :class:`Reconstruct`: decompose the shared context into atomic facts, verify each against the trusted
   evidence, keep a fact if it is *supported*, or *unverifiable* but of *low* importance; drop refuted facts
   and unverifiable high-importance ones. Regenerate the state from the kept facts plus the trusted
   statements.
3. :class:`Resolve`: choose the option from the reconstructed state only.

Independent calls (per-agent extraction, the four arguments, candidate scoring, per-fact verification) run
concurrently. Text a predictor produced (statements, arguments, scoring reasons, facts) is passed through
:func:`~groundstate.programs.common.as_data` before any later predictor sees it, exactly like evidence, so a
model that re-emits adapter markers cannot forge a field in a later prompt.

Where the paper summary is silent we chose: source ids in prompts are the agents' 0-based indices; an
invalid pair (an id that is not a standing source, or the same id twice) ends the search and
is recorded in the trace; a detector answer outside the candidate pool falls back to the candidate with the
lowest consistency score.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import dspy

from groundstate.concurrency import thread_map
from groundstate.programs.common import (
    as_data,
    bullet_list,
    coerce_agents,
    format_options,
    offquery_prediction,
    saveable,
)
from groundstate.records import AgentEvidence
from groundstate.signatures.resolution import ChooseOption
from groundstate.signatures.state import DecomposeContext, RegenerateState, VerifyFact
from groundstate.signatures.verification import (
    Adjudicate,
    ArgueSource,
    DetectMisleadingSource,
    ExtractStatements,
    FindConflictPair,
    ScoreCandidate,
)

logger = logging.getLogger(__name__)


def unique_nonempty(items: Sequence[Any] | None) -> list[str]:
    """Strings from an LM list output, stripped, without blanks and repeats (small models repeat themselves)."""
    seen: dict[str, None] = {}
    for item in items or []:
        text = str(item).strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)


def model_text(items: Sequence[Any] | None) -> list[str]:
    """:func:`unique_nonempty` strings from an LM output, each made safe to place in a later prompt
    (:func:`~groundstate.programs.common.as_data`)."""
    return unique_nonempty([as_data(item) for item in items or []])


def _source_block(agent: AgentEvidence, statements: Sequence[str]) -> str:
    body = bullet_list(list(statements)) if statements else "- (no statements)"
    return f"[{agent.agent}] {agent.name}:\n{body}"


def _sources_text(agents: Sequence[AgentEvidence], statements: dict[int, list[str]]) -> str:
    return "\n\n".join(_source_block(a, statements.get(a.agent, [])) for a in agents) or "(no sources)"


@saveable
class Verify(dspy.Module):
    """Stage 1: conflict-guided evidence verification.

    Args:
        max_candidates: M, the number of conflict rounds (the paper uses 3; its ablation 1-5).
        multi_misleading: remove every flagged candidate instead of picking one.
        max_workers: threads for concurrent calls.

    ``forward(agents)`` returns ``Prediction(misleading_agent, candidates, statements, trusted, trace)``.
    """

    def __init__(self, max_candidates: int = 3, multi_misleading: bool = False, max_workers: int = 8):
        super().__init__()
        if max_candidates < 1:
            raise ValueError("max_candidates must be at least 1")
        self.max_candidates = max_candidates
        self.multi_misleading = multi_misleading
        self.max_workers = max_workers
        self.extract = dspy.Predict(ExtractStatements)
        self.find_pair = dspy.Predict(FindConflictPair)
        self.argue_for = dspy.Predict(ArgueSource)
        self.argue_against = dspy.Predict(ArgueSource)
        self.adjudicate = dspy.Predict(Adjudicate)
        self.score = dspy.Predict(ScoreCandidate)
        self.detect = dspy.Predict(DetectMisleadingSource)

    def extract_statements(self, agents: Sequence[AgentEvidence]) -> dict[int, list[str]]:
        """Each agent's evidence as statements (one concurrent call per agent)."""
        outs = thread_map(lambda a: self.extract(source=a.name, evidence=a.evidence), agents, self.max_workers)
        return {a.agent: model_text(o.statements) for a, o in zip(agents, outs, strict=True)}

    def forward(self, agents, statements: dict[int, list[str]] | None = None) -> dspy.Prediction:
        agents = coerce_agents(agents)
        by_id = {a.agent: a for a in agents}
        if statements is None:
            statements = self.extract_statements(agents)
        else:
            statements = {k: [as_data(s) for s in v] for k, v in statements.items()}
        remaining = [a.agent for a in agents]
        candidates: list[int] = []
        rounds: list[dict[str, Any]] = []
        for number in range(self.max_candidates):
            if len(remaining) < 2:
                rounds.append({"round": number, "stop": "fewer than two sources left"})
                break
            standing = [by_id[i] for i in remaining]
            pair = self.find_pair(sources=_sources_text(standing, statements))
            entry: dict[str, Any] = {"round": number, "remaining": list(remaining),
                                     "pair": [pair.first_source, pair.second_source], "strength": pair.strength,
                                     "conflict_reason": pair.reason}
            if not pair.conflict_found or pair.strength == "none":
                entry["stop"] = "no conflict found"
                rounds.append(entry)
                break
            first, second = pair.first_source, pair.second_source
            if first not in remaining or second not in remaining or first == second:
                entry["stop"] = "invalid pair (not two distinct standing sources)"
                rounds.append(entry)
                break
            others = [by_id[i] for i in remaining if i not in (first, second)]
            others_text = _sources_text(others, statements) if others else "(no other sources)"
            targets = [(by_id[first], "support", self.argue_for), (by_id[first], "refute", self.argue_against),
                       (by_id[second], "support", self.argue_for), (by_id[second], "refute", self.argue_against)]
            def argue(t, others_text=others_text):
                return as_data(t[2](target=_source_block(t[0], statements.get(t[0].agent, [])), others=others_text,
                                    stance=t[1]).argument)

            arguments = thread_map(argue, targets, self.max_workers)
            arguments_text = "\n".join(
                f"{'For' if stance == 'support' else 'Against'} {agent.name}: {text}"
                for (agent, stance, _), text in zip(targets, arguments, strict=True))
            verdict = self.adjudicate(first=_source_block(by_id[first], statements.get(first, [])),
                                      second=_source_block(by_id[second], statements.get(second, [])),
                                      arguments=arguments_text)
            loser = first if verdict.incorrect == "first" else second
            remaining.remove(loser)
            candidates.append(loser)
            entry.update(arguments={f"{s}:{a.agent}": text for (a, s, _), text in zip(targets, arguments, strict=True)},
                         incorrect=loser, verdict_reason=verdict.reason)
            rounds.append(entry)

        scores = self._score(candidates, remaining, by_id, statements)
        misleading, decision = self._decide(candidates, scores, remaining, by_id, statements)
        flagged = set(misleading) if isinstance(misleading, list) else {misleading} - {None}
        trusted = [a.agent for a in agents if a.agent not in flagged]
        trace = {"statements": {str(k): v for k, v in statements.items()}, "rounds": rounds,
                 "candidates": candidates, "scores": scores, "decision": decision}
        return dspy.Prediction(misleading_agent=misleading, candidates=candidates, statements=statements,
                               trusted=trusted, trace=trace)

    def _score(self, candidates, remaining, by_id, statements) -> list[dict[str, Any]]:
        if not candidates:
            return []
        verified = "\n".join(f"- {s}" for i in remaining for s in statements.get(i, [])) or "(none)"

        def score(candidate: int) -> dict[str, Any]:
            out = self.score(candidate=_source_block(by_id[candidate], statements.get(candidate, [])),
                             verified_facts=verified)
            return {"candidate": candidate, "consistency": max(0, min(10, int(out.consistency))),
                    "reason": as_data(out.reason)}

        return thread_map(score, candidates, self.max_workers)

    def _decide(self, candidates, scores, remaining, by_id, statements):
        if self.multi_misleading:
            return list(candidates), {"rule": "multi-misleading: every flagged candidate"}
        if not candidates:
            return None, {"rule": "no conflict: no misleading agent"}
        if len(candidates) == 1:
            return candidates[0], {"rule": "single candidate"}
        verified = "\n".join(f"- {s}" for i in remaining for s in statements.get(i, [])) or "(none)"
        listing = "\n\n".join(
            f"{_source_block(by_id[s['candidate']], statements.get(s['candidate'], []))}\n"
            f"consistency: {s['consistency']}/10 ({s['reason']})" for s in scores)
        out = self.detect(verified_facts=verified, candidates=listing)
        if out.misleading_source in candidates:
            return out.misleading_source, {"rule": "detector", "reason": out.reason}
        fallback = min(scores, key=lambda s: (s["consistency"], candidates.index(s["candidate"])))["candidate"]
        return fallback, {"rule": "detector answered outside the pool; lowest consistency",
                          "detector_answer": out.misleading_source, "reason": out.reason}


@saveable
class Reconstruct(dspy.Module):
    """Stage 2: rebuild the shared state from atomic facts checked against the trusted evidence.

    ``forward(shared_context, trusted_statements)`` returns ``Prediction(state, kept_facts, removed_facts,
    trace)``. The filtering rule: keep *supported* facts and *unverifiable* facts of *low* importance; drop
    *refuted* facts and *unverifiable* facts of *high* importance.
    """

    def __init__(self, max_workers: int = 8):
        super().__init__()
        self.max_workers = max_workers
        self.decompose = dspy.Predict(DecomposeContext)
        self.verify_fact = dspy.Predict(VerifyFact)
        self.regenerate = dspy.Predict(RegenerateState)

    @staticmethod
    def keep(verdict: str, importance: str) -> bool:
        """The fact filtering rule."""
        return verdict == "supported" or (verdict == "unverifiable" and importance == "low")

    def forward(self, shared_context: str, trusted_statements: Sequence[str]) -> dspy.Prediction:
        facts = model_text(self.decompose(context=as_data(shared_context)).facts)
        evidence = bullet_list([as_data(s) for s in trusted_statements])
        verdicts = thread_map(lambda f: self.verify_fact(fact=f, evidence=evidence), facts, self.max_workers)
        checked = [{"fact": f, "verdict": v.verdict, "importance": v.importance,
                    "kept": self.keep(v.verdict, v.importance)} for f, v in zip(facts, verdicts, strict=True)]
        kept = [c["fact"] for c in checked if c["kept"]]
        removed = [c["fact"] for c in checked if not c["kept"]]
        state = self.regenerate(verified_facts=bullet_list(kept), trusted_statements=evidence).state
        return dspy.Prediction(state=state, kept_facts=kept, removed_facts=removed, trace={"facts": checked})


@saveable
class Resolve(dspy.Module):
    """Stage 3: choose the option from the reconstructed state only.

    ``forward(state, question, options)`` returns ``Prediction(answer, reason)``.
    """

    def __init__(self):
        super().__init__()
        self.choose = dspy.Predict(ChooseOption)

    def forward(self, state: str, question: str, options) -> dspy.Prediction:
        out = self.choose(information=as_data(state), question=as_data(question), options=format_options(options))
        return dspy.Prediction(answer=out.answer, reason=out.reason)


@saveable
class ReGround(dspy.Module):
    """Verify -> reconstruct -> resolve.

    Args:
        max_candidates: M, the conflict rounds of verification (3 in the paper).
        multi_misleading: remove every agent verification flags (the stress variants with several liars).
        oracle_t1: skip attribution and trust the gold misleading agents passed as ``misleading=`` (the
            paper's oracle condition of the candidate-pool ablation).
        max_workers: threads for the concurrent calls of each stage.

    ``forward(agents, shared_context, question, options, misleading=None)`` returns
    ``Prediction(misleading_agent, state, kept_facts, removed_facts, answer, trace)``.
    """

    def __init__(self, max_candidates: int = 3, multi_misleading: bool = False, oracle_t1: bool = False,
                 max_workers: int = 8):
        super().__init__()
        self.oracle_t1 = oracle_t1
        self.verify = Verify(max_candidates=max_candidates, multi_misleading=multi_misleading,
                             max_workers=max_workers)
        self.reconstruct = Reconstruct(max_workers=max_workers)
        self.resolve = Resolve()

    def forward(self, agents, shared_context: str, question: str, options, misleading: Sequence[int] | None = None):
        agents = coerce_agents(agents)
        shared_context, question = as_data(shared_context), as_data(question)
        if self.oracle_t1:
            if misleading is None:
                raise ValueError("oracle_t1 needs the gold misleading agents: pass misleading=[...]")
            statements = self.verify.extract_statements(agents)
            gold = [int(i) for i in misleading]
            flagged = gold if len(gold) != 1 else gold[0]
            flagged = flagged if gold else None
            trusted = [a.agent for a in agents if a.agent not in set(gold)]
            verify_trace = {"statements": {str(k): v for k, v in statements.items()}, "oracle_t1": gold}
        else:
            verified = self.verify(agents)
            statements, flagged, trusted, verify_trace = (verified.statements, verified.misleading_agent,
                                                          verified.trusted, verified.trace)
        trusted_statements = [s for i in trusted for s in statements.get(i, [])]
        rebuilt = self.reconstruct(shared_context=shared_context, trusted_statements=trusted_statements)
        resolved = self.resolve(state=rebuilt.state, question=question, options=options)
        trace = {"verify": verify_trace, "reconstruct": rebuilt.trace,
                 "resolve": {"answer": resolved.answer, "reason": resolved.reason}}
        return offquery_prediction(misleading_agent=flagged, state=rebuilt.state, answer=resolved.answer,
                                   kept_facts=rebuilt.kept_facts, removed_facts=rebuilt.removed_facts, trace=trace)
