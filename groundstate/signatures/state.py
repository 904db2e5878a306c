"""Signatures for evidence-grounded state reconstruction (ReGround, stage 2). Kept compact for the reason given
in :mod:`groundstate.signatures.verification` (instructions are repeated in every call)."""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel

from groundstate.signatures.verification import DATA_NOTE, instructions


class DecomposeContext(dspy.Signature):
    __doc__ = instructions(f"""Split a shared context into atomic facts, each one claim checkable on its own.
    Keep values, negations and qualifiers exactly; add nothing. {DATA_NOTE}""")

    context: str = dspy.InputField(desc="the shared context")
    facts: list[str] = dspy.OutputField(desc="one claim each, at most 25 words each")


class VerifyFact(dspy.Signature):
    __doc__ = instructions(f"""Check one fact against trusted evidence and rate its importance for the case.
    Verdict, from the evidence alone (no outside knowledge or inference): supported if the evidence states or
    unambiguously entails it, refuted if the evidence explicitly conflicts with it, otherwise unverifiable
    (silent, only related matters, or not enough). Importance, whatever the verdict: high if it bears directly
    on the decision (diagnosis, treatment, incident response): key findings and symptoms, test and imaging
    results, measurements, procedures, allergies, significant medications, the course of events, telling
    negative findings; medium if useful context (relevant history, background conditions, circumstances that
    affect what can be done); low if unlikely to change the decision (administrative details, irrelevant
    demographics, general background). {DATA_NOTE}""")

    # the evidence first: the checks of one episode share it, so the embedded LM reuses its evaluation (the fact,
    # which differs per call, last; groundstate.lm.prefix)
    evidence: str = dspy.InputField(desc="trusted statements, the only basis for the verdict")
    fact: str = dspy.InputField(desc="the fact to check")
    verdict: Literal["supported", "refuted", "unverifiable"] = dspy.OutputField()
    importance: Literal["high", "medium", "low"] = dspy.OutputField()


class FactCheck(BaseModel):
    """One fact's verdict and importance (an item of :class:`VerifyFacts`), naming the fact by its number."""

    fact: int
    verdict: Literal["supported", "refuted", "unverifiable"]
    importance: Literal["high", "medium", "low"]


class VerifyFacts(dspy.Signature):
    __doc__ = ("Check each numbered fact separately against the trusted evidence; return one check per fact, in "
               "order.\n" + VerifyFact.__doc__.split("\n", 1)[1])  # the same rule as one fact's check

    evidence: str = dspy.InputField(desc="trusted statements, the only basis for the verdicts")
    facts: str = dspy.InputField(desc="the facts to check, numbered")
    checks: list[FactCheck] = dspy.OutputField(desc="one check per fact: its number, verdict and importance")


class RegenerateState(dspy.Signature):
    __doc__ = instructions(f"""Write the group's information state from the verified facts and trusted statements:
    a fluent account of the case as a professional would summarize it, not a list. Keep every value and finding
    exactly; add nothing; reach no decision. {DATA_NOTE}""")

    verified_facts: str = dspy.InputField(desc="shared-context facts that survived verification")
    trusted_statements: str = dspy.InputField(desc="statements of the sources judged reliable")
    state: str = dspy.OutputField(desc="a narrative in plain sentences")
