"""ReGround: verify evidence, reconstruct a trusted shared state, resolve the task from that state.

Three stages, each a ``dspy.Module`` usable on its own and composed by :class:`ReGround`, following the paper
(§4, appendix C) and, where it is silent, the authors' public code (``whr000001/OffQuery``, ``ours/``):

1. :class:`Verify` (never sees the shared context): extract statements per agent; for ``M`` rounds name the
   most contradictory pair among the sources still standing (always a pair: the answer is constrained to
   the standing pairs; ``stop_early`` lets it say "none" instead), argue for and against each side using only
   the *other* standing sources' statements, adjudicate (objective findings over subjective reports; never
   "the majority is right"), and move the losing source into the candidate pool. Each candidate is scored
   1-5 against the statements of the sources still standing, and the detector picks the misleading agent
   among the candidates whenever there is one (the other candidates return to the trusted evidence). In
   multi-misleading mode every candidate is removed. :class:`~groundstate.programs.reground.statements.VerifyStatements`
   is the statement-level mode of §E.4.
2. :class:`Reconstruct`: decompose the shared context into atomic facts, verify each against the trusted
   evidence with a three-level importance (high/medium/low), keep a fact if it is *supported* or of *low*
   importance (the authors' rule; ``keep_rule="strict"`` keeps only supported or unverifiable-and-low facts),
   and write the state as a narrative of the kept facts plus the trusted statements.
3. :class:`Resolve`: choose the option from the reconstructed state only.

Independent calls (per-agent extraction, the four arguments, candidate scoring, per-fact verification) run
concurrently. Text a predictor produced (statements, arguments, scoring reasons, facts) is passed through
:func:`~groundstate.programs.common.as_data` before any later predictor sees it, exactly like evidence, so a
model that re-emits adapter markers cannot forge a field in a later prompt. Agents appear in prompts under
neutral ids only (``[3] Agent 3``), never their roles.

Where both sources are silent we chose: the conflict search's answer may name the two standing ids in any order
and in the common phrasings (``'5-0'``, ``'0 and 1'``, ``'Agent 1 vs Agent 2'``, ``[2, 0]``;
:func:`~groundstate.signatures.verification.read_pair`), with ChatAdapter and JSONAdapter alike; an answer that
names no standing pair (an id that is not a standing source, or the same id twice) ends the search and is
recorded in the trace; a detector answer outside the
candidate pool falls back to the candidate with the lowest consistency score.

Why one file (over 400 lines): every stage is a program of its own that Python users compose and save
(``save_program(Verify())``), and a saved program names its class by import path in its manifest
(:data:`groundstate.registry.BUILTIN`), e.g. ``groundstate.programs.reground.reground:Verify``; moving a stage to
a module of its own would change what every later save writes (the old path would load only through an alias).
The stages also share the source-block and statement helpers, and each has both a ``forward`` and the
``aforward`` of ``await program.acall(...)``; a stage or predictor swapped for a module with only ``forward``
runs on a worker thread under ``acall`` (:func:`~groundstate.programs.common.acall_stage`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from groundstate.concurrency import thread_map
from groundstate.programs.common import (
    ThreadedAsync,
    acall_stage,
    as_data,
    bullet_list,
    coerce_agents,
    format_options,
    offquery_prediction,
    on_worker_thread,
    saveable,
)
from groundstate.programs.reground.statements import (  # noqa: F401  (re-exported: their home until now)
    STATEMENT_RULES,
    VerifyStatements,
    model_text,
    unique_nonempty,
)
from groundstate.records import AgentEvidence
from groundstate.signatures.resolution import ChooseOption
from groundstate.signatures.state import DecomposeContext, RegenerateState, VerifyFact, VerifyFacts
from groundstate.signatures.verification import (
    Adjudicate,
    ArgueSource,
    DetectMisleadingSource,
    ExtractStatements,
    FindConflictPair,
    ScoreCandidate,
    read_pair,
    standing_pair,
)

logger = logging.getLogger(__name__)


def _source_block(agent: AgentEvidence, statements: Sequence[str]) -> str:
    body = bullet_list(list(statements)) if statements else "- (no statements)"
    return f"[{agent.agent}] {agent.name}:\n{body}"


def _sources_text(agents: Sequence[AgentEvidence], statements: dict[int, list[str]]) -> str:
    return "\n\n".join(_source_block(a, statements.get(a.agent, [])) for a in agents) or "(no sources)"


def conflict_pairs(ids: Sequence[int]) -> list[str]:
    """Every unordered pair of distinct source ids, as ``'i-j'`` with ``i < j`` (the only answers the conflict
    search may give)."""
    return standing_pair(ids).pairs()


@saveable
class Verify(ThreadedAsync, dspy.Module):
    """Stage 1: conflict-guided evidence verification (paper §4.1, appendix C; the authors' procedure).

    For ``M`` rounds: name the most contradictory pair among the sources still standing (the answer is
    constrained to the pairs of distinct standing sources, so every round yields a candidate), argue for and
    against each side using only the *other* standing sources' statements, adjudicate, and move the source
    judged incorrect into the candidate pool. Then each candidate is scored (1-5) against the statements of the
    sources still standing, and a detector names the misleading agent among the candidates; it runs whenever
    there is at least one candidate, and its answer is used when it names a candidate (otherwise the lowest
    score decides). The other candidates return to the trusted evidence.

    Args:
        max_candidates: M, the number of conflict rounds (3 in the paper; its ablation 1-5).
        multi_misleading: remove every candidate instead of picking one (the stress setting with several
            misleading agents).
        stop_early: let the conflict search answer "none" and stop when it does (the authors' code stops on
            "No contradiction"; the paper's procedure and our default always run ``M`` rounds).
        max_workers: threads for concurrent calls.

    ``forward(agents)`` returns ``Prediction(misleading_agent, candidates, statements, trusted, trace)``.
    """

    def __init__(self, max_candidates: int = 3, multi_misleading: bool = False, stop_early: bool = False,
                 max_workers: int = 8):
        super().__init__()
        if max_candidates < 1:
            raise ValueError("max_candidates must be at least 1")
        self.max_candidates = max_candidates
        self.multi_misleading = multi_misleading
        self.stop_early = stop_early
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

    def _pair_signature(self, remaining: Sequence[int]) -> type[dspy.Signature]:
        """The conflict search's signature for this round: ``pair`` constrained to the standing pairs (a
        :func:`~groundstate.signatures.verification.standing_pair` type: an ``enum`` to schema-constrained
        decoding, any order or common phrasing of two standing ids accepted from other LMs), and ``strength``
        allowed to be ``none`` under ``stop_early``, keeping any tuned instructions."""
        signature = self.find_pair.signature.with_updated_fields("pair", type_=standing_pair(remaining))
        if self.stop_early:
            signature = signature.with_updated_fields("strength", type_=Literal["strong", "moderate", "weak", "none"])
        return signature

    def find_conflict(self, standing: Sequence[AgentEvidence], statements: dict[int, list[str]]) -> dspy.Prediction:
        """The most contradictory pair of standing sources (``pair`` as ``'i-j'``)."""
        return self.find_pair(sources=_sources_text(standing, statements),
                              signature=self._pair_signature([a.agent for a in standing]))

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
            try:
                found = self.find_conflict(standing, statements)
            except AdapterParseError as exc:  # an unconstrained LM named something outside the standing pairs
                rounds.append({"round": number, "remaining": list(remaining),
                               "stop": f"invalid pair (not two distinct standing sources): {as_data(str(exc))[:200]}"})
                break
            entry: dict[str, Any] = {"round": number, "remaining": list(remaining), "pair": found.pair,
                                     "strength": found.strength, "conflict_reason": as_data(found.reason)}
            if found.strength == "none":
                entry["stop"] = "no conflict found (stop_early)"
                rounds.append(entry)
                break
            named = read_pair(found.pair, tuple(remaining))
            if named is None:  # only a signature without the standing-pair type can get here
                entry["stop"] = "invalid pair (not two distinct standing sources)"
                rounds.append(entry)
                break
            first, second = named
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
            entry.update(pair=[first, second],
                         arguments={f"{s}:{a.agent}": text for (a, s, _), text in zip(targets, arguments, strict=True)},
                         incorrect=loser, verdict_reason=as_data(verdict.reason))
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
            return {"candidate": candidate, "consistency": max(1, min(5, int(out.consistency))),
                    "reason": as_data(out.reason)}

        return thread_map(score, candidates, self.max_workers)

    def _decide(self, candidates, scores, remaining, by_id, statements):
        if self.multi_misleading:
            return list(candidates), {"rule": "multi-misleading: every flagged candidate"}
        if not candidates:
            return None, {"rule": "no candidate (the search stopped before the first round)"}
        verified = "\n".join(f"- {s}" for i in remaining for s in statements.get(i, [])) or "(none)"
        listing = "\n\n".join(
            f"{_source_block(by_id[s['candidate']], statements.get(s['candidate'], []))}\n"
            f"consistency: {s['consistency']}/5 ({s['reason']})" for s in scores)
        out = self.detect(verified_facts=verified, candidates=listing)
        if out.misleading_source in candidates:
            return out.misleading_source, {"rule": "detector", "reason": as_data(out.reason)}
        fallback = min(scores, key=lambda s: (s["consistency"], candidates.index(s["candidate"])))["candidate"]
        return fallback, {"rule": "detector answered outside the pool; lowest consistency",
                          "detector_answer": out.misleading_source, "reason": as_data(out.reason)}


KEEP_RULES = ("authors", "strict")


@saveable
class Reconstruct(dspy.Module):
    """Stage 2: rebuild the shared state from atomic facts checked against the trusted evidence (paper §4.2).

    Decompose the shared context into atomic facts, verify each against the trusted statements (verdict and a
    three-level importance), keep the facts the keep rule admits, and write the state as a narrative of the
    kept facts and the trusted statements.

    Args:
        keep_rule: ``authors`` (default; the authors' code): keep a fact if it is *supported* or its
            importance is *low*, whatever the verdict. ``strict`` (earlier groundstate): keep *supported*
            facts and *unverifiable* facts of *low* importance only, so a refuted fact never survives.
        batch_facts: check all facts in one call (:class:`~groundstate.signatures.state.VerifyFacts`, the
            same per-fact rule and evidence, one verdict and importance per fact) instead of one call per fact
            (default, the authors' code). Saves the evidence and instructions repeated per fact; facts the
            batched answer leaves out are checked one by one.
        max_workers: threads for the concurrent per-fact checks.

    ``forward(shared_context, trusted_statements)`` returns ``Prediction(state, kept_facts, removed_facts,
    trace)``.
    """

    def __init__(self, keep_rule: str = "authors", max_workers: int = 8, batch_facts: bool = False):
        super().__init__()
        if keep_rule not in KEEP_RULES:
            raise ValueError(f"keep_rule must be one of {KEEP_RULES}, got '{keep_rule}'")
        self.keep_rule = keep_rule
        self.max_workers = max_workers
        self.batch_facts = batch_facts
        self.decompose = dspy.Predict(DecomposeContext)
        self.verify_fact = dspy.Predict(VerifyFact)
        if batch_facts:
            self.verify_facts = dspy.Predict(VerifyFacts)
        self.regenerate = dspy.Predict(RegenerateState)

    def keep(self, verdict: str, importance: str) -> bool:
        """The fact filtering rule (see ``keep_rule``)."""
        if self.keep_rule == "authors":
            return verdict == "supported" or importance == "low"
        return verdict == "supported" or (verdict == "unverifiable" and importance == "low")

    @staticmethod
    def numbered(facts: Sequence[str]) -> str:
        """The facts of a batched check, one numbered line each."""
        return "\n".join(f"{k}. {fact}" for k, fact in enumerate(facts, 1))

    @staticmethod
    def by_fact(facts: Sequence[str], checks) -> dict[int, Any]:
        """The batched answer's checks by fact index, matched by the number each names (not by position, so a
        skipped fact never shifts the others); a number naming no listed fact, or a fact a second time, is
        ignored."""
        found: dict[int, Any] = {}
        for check in checks or []:
            number = getattr(check, "fact", None)
            if isinstance(number, int) and 1 <= number <= len(facts):
                found.setdefault(number - 1, check)
        return found

    @staticmethod
    def in_order(facts: Sequence[str], found: dict[int, Any], singles: Sequence[Any]) -> list[Any]:
        """Every fact's check in fact order: the batched one where there is one, else the next single check."""
        rest = iter(singles)
        return [found[i] if i in found else next(rest) for i in range(len(facts))]

    def forward(self, shared_context: str, trusted_statements: Sequence[str]) -> dspy.Prediction:
        facts = model_text(self.decompose(context=as_data(shared_context)).facts)
        evidence = bullet_list([as_data(s) for s in trusted_statements])
        found = self.by_fact(facts, self.verify_facts(facts=self.numbered(facts), evidence=evidence).checks) \
            if self.batch_facts and facts else {}
        missing = [f for i, f in enumerate(facts) if i not in found]  # checked one by one
        singles = thread_map(lambda f: self.verify_fact(fact=f, evidence=evidence), missing, self.max_workers)
        verdicts = self.in_order(facts, found, singles)
        checked = [{"fact": f, "verdict": v.verdict, "importance": v.importance,
                    "kept": self.keep(v.verdict, v.importance)} for f, v in zip(facts, verdicts, strict=True)]
        kept = [c["fact"] for c in checked if c["kept"]]
        removed = [c["fact"] for c in checked if not c["kept"]]
        state = self.regenerate(verified_facts=bullet_list(kept), trusted_statements=evidence).state
        return dspy.Prediction(state=state, kept_facts=kept, removed_facts=removed,
                               trace={"facts": checked, "keep_rule": self.keep_rule})

    async def aforward(self, shared_context: str, trusted_statements: Sequence[str]) -> dspy.Prediction:
        """:meth:`forward` for ``await reconstruct.acall(...)``: every call awaits the LM's async path, the
        per-fact checks concurrently (``asyncio.gather``, in fact order)."""
        facts = model_text((await acall_stage(self.decompose, context=as_data(shared_context))).facts)
        evidence = bullet_list([as_data(s) for s in trusted_statements])
        found = self.by_fact(facts, (await acall_stage(self.verify_facts, facts=self.numbered(facts),
                                                       evidence=evidence)).checks) if self.batch_facts and facts else {}
        missing = [f for i, f in enumerate(facts) if i not in found]
        singles = await asyncio.gather(*(acall_stage(self.verify_fact, fact=f, evidence=evidence) for f in missing))
        verdicts = self.in_order(facts, found, singles)
        checked = [{"fact": f, "verdict": v.verdict, "importance": v.importance,
                    "kept": self.keep(v.verdict, v.importance)} for f, v in zip(facts, verdicts, strict=True)]
        kept = [c["fact"] for c in checked if c["kept"]]
        removed = [c["fact"] for c in checked if not c["kept"]]
        state = (await acall_stage(self.regenerate, verified_facts=bullet_list(kept),
                                   trusted_statements=evidence)).state
        return dspy.Prediction(state=state, kept_facts=kept, removed_facts=removed,
                               trace={"facts": checked, "keep_rule": self.keep_rule})


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

    async def aforward(self, state: str, question: str, options) -> dspy.Prediction:
        """:meth:`forward` for ``await resolve.acall(...)`` (the LM's async path)."""
        out = await acall_stage(self.choose, information=as_data(state), question=as_data(question),
                                options=format_options(options))
        return dspy.Prediction(answer=out.answer, reason=out.reason)


MODES = ("agent", "statement")


@saveable
class ReGround(dspy.Module):
    """Verify -> reconstruct -> resolve.

    Args:
        max_candidates: M, the conflict rounds of verification (3 in the paper).
        multi_misleading: remove every agent verification flags (the stress variants with several liars).
        oracle_t1: skip attribution and trust the gold misleading agents passed as ``misleading=`` (the
            paper's oracle condition of the candidate-pool ablation).
        stop_early: let the conflict search stop when it finds no contradiction (see :class:`Verify`).
        keep_rule: the reconstruction's keep rule, ``authors`` (default) or ``strict`` (see :class:`Reconstruct`).
        mode: ``agent`` (find the misleading source, the main setting) or ``statement`` (find misleading
            statements spread over agents, §E.4; :class:`VerifyStatements`).
        max_workers: threads for the concurrent calls of each stage.
        batch_facts: check the shared-context facts in one call (see :class:`Reconstruct`).
        statement_rule: statement mode's rule, ``adjudicate`` (default: only the side of a contradiction judged
            misleading is removed) or ``refuted`` (the earlier release's; see :class:`VerifyStatements`).

    ``forward(agents, shared_context, question, options, misleading=None)`` returns
    ``Prediction(misleading_agent, state, kept_facts, removed_facts, answer, trace)`` (plus
    ``misleading_statements`` in statement mode).
    """

    #: What a saved manifest that predates ``statement_rule`` was built with
    #: (:func:`groundstate.registry.validate_kwargs`).
    legacy_kwargs = {"statement_rule": "refuted"}

    def __init__(self, max_candidates: int = 3, multi_misleading: bool = False, oracle_t1: bool = False,
                 stop_early: bool = False, keep_rule: str = "authors", mode: str = "agent", max_workers: int = 8,
                 batch_facts: bool = False, statement_rule: str = "adjudicate"):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got '{mode}'")
        self.oracle_t1 = oracle_t1
        self.mode = mode
        if mode == "statement":
            self.verify = VerifyStatements(max_workers=max_workers, rule=statement_rule)
        else:
            self.verify = Verify(max_candidates=max_candidates, multi_misleading=multi_misleading,
                                 stop_early=stop_early, max_workers=max_workers)
        self.reconstruct = Reconstruct(keep_rule=keep_rule, max_workers=max_workers, batch_facts=batch_facts)
        self.resolve = Resolve()

    def forward(self, agents, shared_context: str, question: str, options, misleading: Sequence[int] | None = None):
        agents = coerce_agents(agents)
        shared_context, question = as_data(shared_context), as_data(question)
        flagged, trusted_statements, verify_trace, extra = self.verification(agents, misleading)
        rebuilt = self.reconstruct(shared_context=shared_context, trusted_statements=trusted_statements)
        resolved = self.resolve(state=rebuilt.state, question=question, options=options)
        return self._prediction(flagged, verify_trace, rebuilt, resolved, extra)

    async def aforward(self, agents, shared_context: str, question: str, options,
                       misleading: Sequence[int] | None = None):
        """:meth:`forward` for ``await program.acall(...)``, same result. Stages 2 and 3 await the LM's async path
        (the per-fact checks concurrently); stage 1's multi-round search (argument fan-outs on
        :func:`~groundstate.concurrency.thread_map`) runs on one worker thread
        (:func:`~groundstate.programs.common.on_worker_thread`), which carries the DSPy context."""
        agents = coerce_agents(agents)
        shared_context, question = as_data(shared_context), as_data(question)
        flagged, trusted_statements, verify_trace, extra = await on_worker_thread(self.verification, agents,
                                                                                  misleading)
        rebuilt = await acall_stage(self.reconstruct, shared_context=shared_context,
                                    trusted_statements=trusted_statements)
        resolved = await acall_stage(self.resolve, state=rebuilt.state, question=question, options=options)
        return self._prediction(flagged, verify_trace, rebuilt, resolved, extra)

    def verification(self, agents: Sequence[AgentEvidence], misleading: Sequence[int] | None = None):
        """Stage 1 as :meth:`forward` runs it: ``(flagged, trusted_statements, verify_trace, extra outputs)``."""
        extra: dict[str, Any] = {}
        if self.oracle_t1:
            if misleading is None:
                raise ValueError("oracle_t1 needs the gold misleading agents: pass misleading=[...]")
            statements = self.verify.extract_statements(agents)
            gold = [int(i) for i in misleading]
            flagged = gold if len(gold) != 1 else gold[0]
            flagged = flagged if gold else None
            trusted_statements = [s for a in agents if a.agent not in set(gold) for s in statements.get(a.agent, [])]
            verify_trace = {"statements": {str(k): v for k, v in statements.items()}, "oracle_t1": gold}
        elif self.mode == "statement":
            verified = self.verify(agents)
            flagged, trusted_statements, verify_trace = verified.misleading_agent, verified.trusted, verified.trace
            extra["misleading_statements"] = verified.misleading_statements
        else:
            verified = self.verify(agents)
            statements, flagged, verify_trace = verified.statements, verified.misleading_agent, verified.trace
            trusted_statements = [s for i in verified.trusted for s in statements.get(i, [])]
        return flagged, trusted_statements, verify_trace, extra

    @staticmethod
    def _prediction(flagged, verify_trace, rebuilt, resolved, extra) -> dspy.Prediction:
        trace = {"verify": verify_trace, "reconstruct": rebuilt.trace,
                 "resolve": {"answer": resolved.answer, "reason": resolved.reason}}
        return offquery_prediction(misleading_agent=flagged, state=rebuilt.state, answer=resolved.answer,
                                   kept_facts=rebuilt.kept_facts, removed_facts=rebuilt.removed_facts, trace=trace,
                                   **extra)
