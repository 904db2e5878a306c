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
    __doc__ = f"""Check one fact against trusted evidence.

    supported: the evidence states or directly implies it. refuted: the evidence contradicts it.
    unverifiable: the evidence says nothing decisive about it. Importance is high when the fact could change
    a decision about the case, low when it is background. {DATA_NOTE}"""

    fact: str = dspy.InputField(desc="the fact to check")
    evidence: str = dspy.InputField(desc="trusted statements (the only basis for the verdict)")
    verdict: Literal["supported", "refuted", "unverifiable"] = dspy.OutputField(desc="the verdict")
    importance: Literal["high", "low"] = dspy.OutputField(desc="how much the fact matters for decisions")


class RegenerateState(dspy.Signature):
    __doc__ = f"""Write the group's information state: a concise, faithful summary of the verified facts and the
    trusted private statements. Include every concrete value; include nothing that is not in the inputs; do
    not reach a decision. {DATA_NOTE}"""

    verified_facts: str = dspy.InputField(desc="shared-context facts that survived verification")
    trusted_statements: str = dspy.InputField(desc="statements from the sources judged reliable")
    state: str = dspy.OutputField(desc="the information state, in plain sentences (at most 1500 chars)")
