"""A one-step question answerer: the smallest program the runner and the CLI can drive."""

from __future__ import annotations

import dspy

from groundstate.programs.common import acall_stage, saveable
from groundstate.signatures.resolution import AnswerQuestion


@saveable
class QuestionAnswering(dspy.Module):
    """``QuestionAnswering()(question=...)`` -> ``Prediction(answer=...)``."""

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict(AnswerQuestion)

    def forward(self, question: str) -> dspy.Prediction:
        return dspy.Prediction(answer=self.answer(question=question).answer)

    async def aforward(self, question: str) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)`` (the LM's async path)."""
        return dspy.Prediction(answer=(await acall_stage(self.answer, question=question)).answer)
