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
    "get_lm": "groundstate.lm.specs",
    "configure": "groundstate.lm.specs",
    "LMConfig": "groundstate.lm.config",
    "EmbeddedEngine": "groundstate.lm.embedded",
    # errors
    "GroundstateError": "groundstate.errors",
    "InputError": "groundstate.errors",
    "LMSetupError": "groundstate.errors",
    "ConfigError": "groundstate.errors",
    "CostCapReached": "groundstate.errors",
    # running
    "run_task": "groundstate.eval.assemble",
    "RunSettings": "groundstate.eval.run_settings",
    "LMSettings": "groundstate.eval.settings",
    "RunContext": "groundstate.eval.task",
    "Runner": "groundstate.eval.runner",
    "load_run": "groundstate.eval.runs",
    "Run": "groundstate.eval.runs",
    "RunResult": "groundstate.eval.runner",
    "RunAborted": "groundstate.eval.runner",
    "CostCapStopped": "groundstate.eval.run_result",
    "ScoringError": "groundstate.eval.scoring",
    "thread_map": "groundstate.concurrency",
    # optimization and artifacts
    "tune": "groundstate.optimizers.tune",
    "Budget": "groundstate.optimizers.tune",
    "load": "groundstate.optimizers.artifacts",
    "save_program": "groundstate.optimizers.artifacts",
    "saveable": "groundstate.programs.common",
    "register": "groundstate.registry",
    "offquery_metric": "groundstate.eval.reground.metrics",
    "evaluate": "groundstate.eval.reground.evaluate",
    "Evaluation": "groundstate.eval.reground.evaluate",
    "paired_difference": "groundstate.eval.paired",
    "PairedDifference": "groundstate.eval.paired",
    "ReGroundSettings": "groundstate.eval.reground.settings",
    "BaselineSettings": "groundstate.eval.reground.settings",
    "MetricSpec": "groundstate.eval.metric_spec",
    "gepa_metric": "groundstate.eval.reground.metrics",
    # hidden-profile discussions
    "HiddenProfileTask": "groundstate.records",
    "Transcript": "groundstate.records",
    "Message": "groundstate.records",
    "Belief": "groundstate.records",
    "SimAgent": "groundstate.programs.consilience.simulated",
    "SimParams": "groundstate.programs.consilience.simulated",
    "SimTeam": "groundstate.programs.consilience.simulated",
    "LMAgent": "groundstate.programs.consilience.agents",
    "LMTeam": "groundstate.programs.consilience.agents",
    "run_discussion": "groundstate.programs.consilience.protocols",
    "plurality": "groundstate.programs.common",
    "coerce_agents": "groundstate.programs.common",
    "load_hidden_tasks": "groundstate.eval.benchmarks.hiddenbench",
    "generate_travel": "groundstate.eval.benchmarks.travel.generator",
    "validate_travel": "groundstate.eval.benchmarks.travel.validator",
    "to_hidden_profile": "groundstate.eval.benchmarks.travel.convert",
    # consilience
    "Consilience": "groundstate.programs.consilience.consilience",
    "RuleController": "groundstate.programs.consilience.control",
    "ValueController": "groundstate.programs.consilience.control",
    "LLMController": "groundstate.programs.consilience.control",
    "collective_state": "groundstate.programs.consilience.state",
    "LossWeights": "groundstate.programs.consilience.state",
    "RoundwiseConformal": "groundstate.optimizers.conformal",
    "MLPActionValue": "groundstate.optimizers.controller",
    # diverse hypothesis deliberation
    "Problem": "groundstate.records",
    "HypothesisMessage": "groundstate.records",
    "DiverseHypothesisDeliberation": "groundstate.programs.dhd.deliberation",
    "AnswerEvaluator": "groundstate.programs.dhd.evaluator",
    "load_problems": "groundstate.eval.benchmarks.problems",
    "MessageCache": "groundstate.eval.dhd.cache",
    # records and data
    "OffQueryInstance": "groundstate.records",
    "AgentEvidence": "groundstate.records",
    "T2Fact": "groundstate.records",
    "load_offquery": "groundstate.eval.benchmarks.offquery.published",
    "load_any": "groundstate.eval.benchmarks.offquery.loader",
    "save_instances": "groundstate.eval.benchmarks.offquery.loader",
    "load_instances": "groundstate.eval.benchmarks.offquery.instances",
    "generate_offquery": "groundstate.eval.benchmarks.offquery.synthetic:generate",
    # metrics
    "LexicalJudge": "groundstate.eval.reground.judges",
    "LMJudge": "groundstate.eval.reground.judges",
    "offquery_scores": "groundstate.eval.reground.scores",
    "t1_metric": "groundstate.eval.reground.metrics",
    "t2_metric": "groundstate.eval.reground.metrics",
    "t3_metric": "groundstate.eval.reground.metrics",
    # programs
    "QuestionAnswering": "groundstate.programs.qa",
    "ReGround": "groundstate.programs.reground.reground",
    "Verify": "groundstate.programs.reground.reground",
    "Reconstruct": "groundstate.programs.reground.reground",
    "Resolve": "groundstate.programs.reground.reground",
    "Oracle": "groundstate.programs.reground.oracle",
    "StandardCollaboration": "groundstate.programs.reground.standard",
    "Voting": "groundstate.programs.reground.baselines",
    "Robin": "groundstate.programs.reground.baselines",
    "Manager": "groundstate.programs.reground.centralized",
    "Instructor": "groundstate.programs.reground.centralized",
    "SelfReflect": "groundstate.programs.reground.baselines",
    "Confidence": "groundstate.programs.reground.standard",
    "BASELINES": "groundstate.programs.reground.baselines",
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
