"""groundstate: declarative LM programs (DSPy) for multi-agent decisions from scattered, partly wrong information.

The public API is re-exported here and imported lazily, so ``import groundstate`` stays light: it never
imports llama_cpp, litellm, ray or matplotlib until something that needs them is used.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # LMs
    "get_lm": "groundstate.lm",
    "configure": "groundstate.lm",
    "LMConfig": "groundstate.lm",
    "EmbeddedEngine": "groundstate.lm",
    # errors
    "GroundstateError": "groundstate.errors",
    "InputError": "groundstate.errors",
    "LMSetupError": "groundstate.errors",
    "ConfigError": "groundstate.errors",
    # running
    "Runner": "groundstate.eval.runner",
    "RunResult": "groundstate.eval.runner",
    "RunAborted": "groundstate.eval.runner",
    "thread_map": "groundstate.concurrency",
    # optimization and artifacts
    "tune": "groundstate.optimizers.tune",
    "Budget": "groundstate.optimizers.tune",
    "load": "groundstate.optimizers.artifacts",
    "save_program": "groundstate.optimizers.artifacts",
    "saveable": "groundstate.programs.common",
    "register": "groundstate.registry",
    "offquery_metric": "groundstate.optimizers.metrics",
    "gepa_metric": "groundstate.optimizers.metrics",
    # hidden-profile discussions
    "HiddenProfileTask": "groundstate.records",
    "Transcript": "groundstate.records",
    "Message": "groundstate.records",
    "Belief": "groundstate.records",
    "SimAgent": "groundstate.simulate",
    "SimParams": "groundstate.simulate",
    "SimTeam": "groundstate.simulate",
    "LMAgent": "groundstate.programs.discussion",
    "LMTeam": "groundstate.programs.discussion",
    "run_discussion": "groundstate.programs.discussion",
    "plurality": "groundstate.programs.discussion",
    "load_hidden_tasks": "groundstate.eval.benchmarks.hiddenbench",
    "generate_travel": "groundstate.eval.benchmarks.travel",
    "validate_travel": "groundstate.eval.benchmarks.travel",
    "to_hidden_profile": "groundstate.eval.benchmarks.travel",
    # consilience
    "Consilience": "groundstate.programs.consilience",
    "RuleController": "groundstate.programs.consilience_control",
    "ValueController": "groundstate.programs.consilience_control",
    "LLMController": "groundstate.programs.consilience_control",
    "collective_state": "groundstate.programs.consilience_state",
    "LossWeights": "groundstate.programs.consilience_state",
    "RoundwiseConformal": "groundstate.optimizers.conformal",
    "MLPActionValue": "groundstate.optimizers.controller",
    # diverse hypothesis deliberation
    "Problem": "groundstate.records",
    "HypothesisMessage": "groundstate.records",
    "DiverseHypothesisDeliberation": "groundstate.programs.deliberation",
    "AnswerEvaluator": "groundstate.programs.deliberation_evaluator",
    "load_problems": "groundstate.eval.benchmarks.problems",
    "MessageCache": "groundstate.eval.dhd_cache",
    # records and data
    "OffQueryInstance": "groundstate.records",
    "AgentEvidence": "groundstate.records",
    "T2Fact": "groundstate.records",
    "load_offquery": "groundstate.eval.benchmarks.offquery",
    "load_any": "groundstate.eval.benchmarks.offquery",
    "save_instances": "groundstate.eval.benchmarks.offquery",
    "generate_offquery": "groundstate.eval.benchmarks.synthetic:generate",
    # metrics
    "LexicalJudge": "groundstate.scoring",
    "LMJudge": "groundstate.scoring",
    "offquery_scores": "groundstate.scoring",
    "t1_metric": "groundstate.scoring",
    "t2_metric": "groundstate.scoring",
    "t3_metric": "groundstate.scoring",
    # programs
    "QuestionAnswering": "groundstate.programs.qa",
    "ReGround": "groundstate.programs.reground",
    "Verify": "groundstate.programs.reground",
    "Reconstruct": "groundstate.programs.reground",
    "Resolve": "groundstate.programs.reground",
    "Oracle": "groundstate.programs.collaboration",
    "StandardCollaboration": "groundstate.programs.collaboration",
    "Voting": "groundstate.programs.collaboration",
    "Robin": "groundstate.programs.collaboration",
    "Manager": "groundstate.programs.collaboration",
    "Instructor": "groundstate.programs.collaboration",
    "SelfReflect": "groundstate.programs.collaboration",
    "Confidence": "groundstate.programs.collaboration",
    "BASELINES": "groundstate.programs.collaboration",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'groundstate' has no attribute '{name}'")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
