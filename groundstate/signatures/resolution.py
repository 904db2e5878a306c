"""Signatures that turn information into an answer."""

from __future__ import annotations

import dspy


class AnswerQuestion(dspy.Signature):
    """Answer the question briefly and directly, using only what the question states."""

    question: str = dspy.InputField(desc="the question to answer")
    answer: str = dspy.OutputField(desc="the answer: a word, a number or a short phrase")
