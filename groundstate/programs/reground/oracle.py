"""The Oracle (appendix D.3): the empirical upper bound, deciding from the complete reliable information, with T1
from a model reading every agent's private evidence (the authors' oracle) or from ground truth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from groundstate.programs.common import acall_stage, as_data, offquery_prediction, saveable
from groundstate.programs.reground.baseline import Agents
from groundstate.programs.reground.turns import (
    Case,
    turn,
)
from groundstate.records import OffQueryInstance
from groundstate.signatures.collaboration import FindMisleadingAgent, team_member
from groundstate.signatures.resolution import ChooseOption


@saveable
class Oracle(dspy.Module):
    """The empirical upper bound (appendix D.3): decide from the complete reliable information.

    T3 is predicted with ``ChooseOption`` over ``reliable_information``; T2's state is ``reliable_information``
    itself (the paper's oracle assumes the misleading agent identified and uses the ground-truth context).

    Args:
        oracle_t1: how T1 is obtained. ``model`` (default, the authors' oracle): a model reads every agent's
            private evidence (``Agent i: ...``), is told one agent is misleading, and names it; the answer is
            constrained to the team's agents. ``gold``: the gold misleading agent (its index if exactly one, the
            list if several, ``None`` if none), the upper bound of T1 itself.
    """

    program_name = "oracle"
    T1_MODES = ("model", "gold")

    def __init__(self, oracle_t1: str = "model"):
        super().__init__()
        if oracle_t1 not in self.T1_MODES:
            raise ValueError(f"oracle_t1 must be one of {self.T1_MODES}, got '{oracle_t1}'")
        self.oracle_t1 = oracle_t1
        self.attribute = dspy.Predict(FindMisleadingAgent)
        self.decide = dspy.Predict(ChooseOption)

    def forward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str,
                reliable_information: str, misleading: Sequence[int] | None = None) -> dspy.Prediction:
        case = Case.build(agents, shared_context, question, options)
        verdict = self.attribute(**self.attribute_args(case)) if self.oracle_t1 == "model" else None
        decision = self.decide(**self.decide_args(case, reliable_information))
        return self.result(case, misleading, reliable_information, verdict, decision)

    async def aforward(self, agents: Agents, shared_context: str, question: str, options: Mapping[str, str] | str,
                       reliable_information: str, misleading: Sequence[int] | None = None) -> dspy.Prediction:
        """:meth:`forward` for ``await program.acall(...)``: the attribution and the decision (independent) gathered."""
        case = Case.build(agents, shared_context, question, options)

        async def attribution() -> Any:
            return await acall_stage(self.attribute, **self.attribute_args(case)) if self.oracle_t1 == "model" else None

        deciding = self.decide_args(case, reliable_information)
        verdict, decision = await asyncio.gather(attribution(), acall_stage(self.decide, **deciding))
        return self.result(case, misleading, reliable_information, verdict, decision)

    def attribute_args(self, case: Case) -> dict[str, Any]:
        """The attributor's inputs: every agent's private evidence, the answer constrained to the team's agents."""
        signature = self.attribute.signature.with_updated_fields(
            "misleading_agent", type_=team_member(a.agent for a in case.agents))
        return {"opinions": "\n".join(f"{a.name}: {a.evidence}" for a in case.agents), "signature": signature}

    @staticmethod
    def decide_args(case: Case, reliable_information: str) -> dict[str, str]:
        return {"information": as_data(reliable_information), "question": case.question, "options": case.options}

    def result(self, case: Case, misleading: Sequence[int] | None, reliable_information: str, verdict: Any,
               decision: Any) -> dspy.Prediction:
        """The prediction from the attributor's verdict (``None`` under ``oracle_t1="gold"``) and the decision."""
        turns: list[dict] = []
        if verdict is None:
            gold = [int(i) for i in (misleading or [])]
            named: Any = gold[0] if len(gold) == 1 else (gold or None)
        else:
            named = case.index(verdict.misleading_agent)
            turns.append(turn("name_misleading", "attributor", None, [a.agent for a in case.agents],
                              {"misleading_agent": named, "raw": verdict.misleading_agent, "reason": verdict.reason},
                              input="private_evidence"))
        turns.append(turn("decide", "decider", None, [], {"answer": decision.answer, "reason": decision.reason},
                          input="reliable_information"))
        trace = {"program": self.program_name, "upper_bound": True, "t1": self.oracle_t1,
                 "t2_from_ground_truth": True, "turns": turns}
        return offquery_prediction(misleading_agent=named, state=reliable_information, answer=decision.answer,
                                   trace=trace)

    @staticmethod
    def inputs_for(instance: OffQueryInstance, condition: str = "unreliable") -> dict[str, Any]:
        """``instance.inputs(condition)`` plus the ground truth the Oracle takes (of the instance as ``condition``
        shows it: :meth:`~groundstate.records.OffQueryInstance.under`)."""
        view = instance.under(condition)
        return {**view.inputs(condition), "reliable_information": view.reliable_information(),
                "misleading": list(view.misleading)}
