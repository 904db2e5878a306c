"""Signatures for evidence-grounded state reconstruction (ReGround, stage 2)."""

from __future__ import annotations

from typing import Literal

import dspy

from groundstate.signatures.verification import DATA_NOTE


class DecomposeContext(dspy.Signature):
    __doc__ = f"""Split a shared context into atomic facts: each fact states exactly one claim and can be checked
    on its own. Keep values, negations and qualifiers exactly as written; add nothing. {DATA_NOTE}"""

    context: str = dspy.InputField(desc="the shared context to decompose")
    facts: list[str] = dspy.OutputField(desc="atomic facts, one claim each, at most 25 words each")


class VerifyFact(dspy.Signature):
    __doc__ = f"""Check one fact against trusted evidence, and rate how much the fact matters for the case.

    Verdict, from the evidence alone (no outside knowledge, nothing inferred beyond it): supported when the
    evidence states or unambiguously entails the fact; refuted when the evidence explicitly conflicts with
    it; unverifiable when the evidence is silent, only touches related matters, or is not enough.

    Importance, whatever the verdict: high when the fact bears directly on the decision (the diagnosis or
    treatment, the response to the incident): key findings and symptoms, test and imaging results,
    measurements, procedures, allergies or significant medications, the course of events, telling negative
    findings. medium when it is useful context: relevant history and background conditions, circumstances
    that affect what can be done. low when it is unlikely to change the decision: administrative details,
    demographics that do not matter here, general background. {DATA_NOTE}"""

    fact: str = dspy.InputField(desc="the fact to check")
    evidence: str = dspy.InputField(desc="trusted statements (the only basis for the verdict)")
    verdict: Literal["supported", "refuted", "unverifiable"] = dspy.OutputField(desc="the verdict")
    importance: Literal["high", "medium", "low"] = dspy.OutputField(desc="how much the fact matters for the case")


class RegenerateState(dspy.Signature):
    __doc__ = f"""Write the group's information state from verified facts and the trusted sources' statements: a
    fluent, coherent account of the case, as a professional would summarize it, not a list. Keep every
    concrete value and finding exactly; include nothing that is not in the inputs; do not reach a decision.
    {DATA_NOTE}"""

    verified_facts: str = dspy.InputField(desc="shared-context facts that survived verification")
    trusted_statements: str = dspy.InputField(desc="statements from the sources judged reliable")
    state: str = dspy.OutputField(desc="the information state, as a narrative in plain sentences")
