"""The LM builder of OffQuery instances (appendix B.2): misleading private evidence and a corrupted shared context.

``OffQueryLMBuilder()(case_context=..., question=..., options={...}, correct_answer="A", department="laboratory",
department_facts=..., shared_context=...)`` returns a ``dspy.Prediction`` with:

* ``wrong_answer``: the incorrect option letter the fabrication pushes;
* ``misleading_text``: the department's falsified private evidence;
* ``reason``: why that evidence points to ``wrong_answer``;
* ``corrupted_context``: the shared context rewritten to support ``wrong_answer`` without naming it (``None``
  when the fabrication chose the correct answer, see below);
* ``conflicts``, ``conflicting_points``: whether, and where, the misleading text contradicts the reliable case.

When the fabricated decision is the correct answer the output is unusable, so the later stages are skipped
(``corrupted_context=None``, ``conflicts=False``). The program validates nothing else: the caller
(:func:`groundstate.eval.benchmarks.offquery.mediq_lm.build_lm`) decides what to reject and retry.
"""

from __future__ import annotations

import dspy

from groundstate.concurrency import thread_map
from groundstate.records import options_text
from groundstate.signatures.generation import CheckConflict, CorruptSharedContext, FabricateMisleadingEvidence


class OffQueryLMBuilder(dspy.Module):
    """Fabricate -> (corrupt the shared context, check the conflict), the last two concurrently."""

    def __init__(self):
        super().__init__()
        self.fabricate = dspy.Predict(FabricateMisleadingEvidence)
        self.corrupt = dspy.Predict(CorruptSharedContext)
        self.check = dspy.Predict(CheckConflict)

    def fabricate_evidence(self, case_context: str, question: str, options: dict[str, str], correct_answer: str,
                           department: str, department_facts: str) -> dspy.Prediction:
        """Stage 1: ``wrong_answer``, ``misleading_evidence``, ``reason``."""
        return self.fabricate(case_context=case_context, question=question, options=options_text(options),
                              correct_answer=correct_answer, department=department,
                              department_facts=department_facts)

    def corrupt_context(self, shared_context: str, options: dict[str, str], wrong_answer: str,
                        misleading_text: str) -> str:
        """Stage 2: the corrupted shared context."""
        decision = f"{wrong_answer}: {options[wrong_answer]}"
        return self.corrupt(shared_context=shared_context, incorrect_decision=decision,
                            misleading_evidence=misleading_text).corrupted_context

    def check_conflict(self, reliable_context: str, candidate_text: str) -> dspy.Prediction:
        """Stage 3: ``conflicts`` and ``conflicting_points``."""
        return self.check(reliable_context=reliable_context, candidate_text=candidate_text)

    def forward(self, case_context: str, question: str, options: dict[str, str], correct_answer: str,
                department: str, department_facts: str, shared_context: str) -> dspy.Prediction:
        fabricated = self.fabricate_evidence(case_context, question, options, correct_answer, department,
                                             department_facts)
        wrong, text = fabricated.wrong_answer, (fabricated.misleading_evidence or "").strip()
        if wrong == correct_answer or wrong not in options:
            return dspy.Prediction(wrong_answer=wrong, misleading_text=text, reason=fabricated.reason,
                                   corrupted_context=None, conflicts=False, conflicting_points=[])
        corrupted, check = thread_map(lambda stage: stage(), [
            lambda: self.corrupt_context(shared_context, options, wrong, text),
            lambda: self.check_conflict(case_context, text),
        ], max_workers=2)
        return dspy.Prediction(wrong_answer=wrong, misleading_text=text, reason=fabricated.reason,
                               corrupted_context=corrupted, conflicts=bool(check.conflicts),
                               conflicting_points=list(check.conflicting_points or []))
