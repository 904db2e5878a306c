"""A small structured signature used to check that an LM answers in the shape groundstate needs."""

from __future__ import annotations

from typing import Literal

import dspy


class StructuredCheck(dspy.Signature):
    """Pick the option that best answers the question and list up to three short facts you relied on."""

    question: str = dspy.InputField(desc="a multiple-choice question")
    options: str = dspy.InputField(desc="the options, one per line, as 'A: ...'")
    choice: Literal["A", "B", "C", "D"] = dspy.OutputField(desc="the letter of the chosen option")
    facts: list[str] = dspy.OutputField(desc="at most three short facts, a few words each")
