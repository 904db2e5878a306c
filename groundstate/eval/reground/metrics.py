"""OffQuery metrics as DSPy metrics, weighted combinations, and GEPA feedback metrics.

Every metric takes ``(example, prediction, trace=None)`` where ``example`` comes from
:meth:`~groundstate.records.OffQueryInstance.to_example` (or :func:`examples_for`): its inputs plus the labels
``misleading``, ``misleading_roles``, ``t2_facts``, ``answer`` and ``domain``.

- :func:`t1_metric`, :data:`t2_metric` (:func:`make_t2_metric` for another judge), :func:`t3_metric`: one task each;
  each one's ``feedback`` attribute is the matching one-task :func:`gepa_metric`, so GEPA optimizes with the same
  feedback text as ``--optimizer gepa``.
- :func:`offquery_metric`: a weighted mean of T1/T2/T3 with weights the user chooses; its ``feedback``
  attribute is the matching :func:`gepa_metric`, which :func:`groundstate.optimizers.tune.tune` gives GEPA.
- :func:`gepa_metric`: the same score as a ``dspy.Prediction(score=..., feedback=...)`` with the GEPA signature
  ``(gold, pred, trace, pred_name, pred_trace)``; the feedback names which source was blamed instead of
  which, which reliable facts the state dropped and which misleading ones survived, and which option was
  chosen against which. For a predictor of one stage the feedback starts with that stage's task.

Metric specs are strings: ``t1``, ``t1+t2+t3``, ``0.5*t1+t2+2*t3``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import dspy

from groundstate.errors import ConfigError
from groundstate.eval.reground.contract import MISSING, field_of
from groundstate.eval.reground.judges import Judge, LexicalJudge
from groundstate.eval.reground.t1 import resolve_agents, t1_score
from groundstate.eval.reground.t2 import T2_MAX_FACTS, t2_score
from groundstate.eval.reground.t3 import option_letter, t3_score

__all__ = ["t1_metric", "t2_metric", "t3_metric", "offquery_metric", "gepa_metric", "parse_metric",
           "METRIC_NAMES", "STAGE_METRIC"]

METRIC_NAMES = ("t1", "t2", "t3")
STAGE_METRIC = {"verify": "t1", "reconstruct": "t2", "resolve": "t3"}
"""The task each ReGround stage is tuned against."""

# -- one task each -----------------------------------------------------------------------------------
def _example_roles(example: Any) -> list[str | None] | None:
    agents = field_of(example, "agents")
    if agents:
        return [field_of(a, "role") for a in agents]
    misleading = list(field_of(example, "misleading") or [])
    named = list(field_of(example, "misleading_roles") or [])
    if not misleading or len(named) != len(misleading):
        return None
    roles: list[str | None] = [None] * (max(misleading) + 1)
    for index, role in zip(misleading, named, strict=True):
        roles[index] = role
    return roles


def t1_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """DSPy metric: T1 on an ``OffQueryInstance.to_example()`` example (0.0 for a missing prediction).

    Roles come from the example's ``agents`` when present, else from ``misleading_roles``.
    """
    if prediction is None:
        return 0.0
    agent = field_of(prediction, "misleading_agent", MISSING)
    if agent is MISSING:
        return 0.0
    return t1_score(agent, list(field_of(example, "misleading") or []), _example_roles(example))


def make_t2_metric(judge: Judge | None = None) -> Callable[..., float]:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` computing T2 with ``judge``.

    The fact limit comes from the example's ``domain``. An example without T2 facts scores 0.0 (so it does not
    favour any program); a judge failure raises.

    Args:
        judge: the T2 judge (default :class:`LexicalJudge`).
    """
    judge = judge or LexicalJudge()

    def t2_metric(example: Any, prediction: Any, trace: Any = None) -> float:
        """DSPy metric: T2 of the prediction's ``state`` against the example's ``t2_facts``."""
        if prediction is None:
            return 0.0
        facts = field_of(example, "t2_facts") or []
        score = t2_score(field_of(prediction, "state"), facts, judge,
                         max_facts=T2_MAX_FACTS.get(str(field_of(example, "domain"))))
        return 0.0 if score is None else score

    t2_metric.judge = judge  # type: ignore[attr-defined]
    t2_metric.feedback = gepa_metric("t2", judge)  # type: ignore[attr-defined]  (what GEPA optimizes with)
    return t2_metric


def t3_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """DSPy metric: T3 (option letter exact match) on an ``OffQueryInstance.to_example()`` example."""
    if prediction is None:
        return 0.0
    return t3_score(field_of(prediction, "answer"), str(field_of(example, "answer")))


# -- weighted combinations and GEPA feedback -----------------------------------------------------------------
_TERM = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*\*\s*)?(t[123])\s*$")


def parse_metric(spec: str | Mapping[str, float]) -> dict[str, float]:
    """``"t1+t2+t3"`` or ``"0.5*t1+t3"`` (or a mapping) -> weights ``{"t1": 0.5, "t3": 1.0}``.

    Raises:
        ConfigError: an unknown metric name, a malformed term or weights that sum to zero.
    """
    if isinstance(spec, Mapping):
        weights = {str(k): float(v) for k, v in spec.items()}
    else:
        weights = {}
        for term in str(spec).split("+"):
            match = _TERM.match(term.lower())
            if not match:
                raise ConfigError(f"unknown metric '{term.strip()}' in '{spec}': use t1, t2, t3, sums like "
                                  "t1+t2+t3 and weights like 0.5*t1")
            weights[match.group(2)] = weights.get(match.group(2), 0.0) + float(match.group(1) or 1.0)
    unknown = set(weights) - set(METRIC_NAMES)
    if unknown:
        raise ConfigError(f"unknown metric '{sorted(unknown)[0]}': use {', '.join(METRIC_NAMES)}")
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ConfigError(f"metric weights must be non-negative and not all zero: {weights}")
    return {k: v for k, v in weights.items() if v > 0}


def _component_scores(example: Any, prediction: Any, weights: Mapping[str, float],
                      t2: Callable[..., float]) -> dict[str, float]:
    fns = {"t1": t1_metric, "t2": t2, "t3": t3_metric}
    return {name: float(fns[name](example, prediction)) for name in weights}


def offquery_metric(weights: str | Mapping[str, float] = "t1+t2+t3", judge: Judge | None = None) -> Callable:
    """A DSPy metric: the weighted mean of the chosen OffQuery tasks (weights normalized to sum to 1).

    Args:
        weights: a metric spec (``"t1+t2+t3"``) or a mapping of weights.
        judge: the T2 judge (default :class:`~groundstate.eval.reground.judges.LexicalJudge`).
    """
    weights = parse_metric(weights)
    total = sum(weights.values())
    t2 = make_t2_metric(judge) if "t2" in weights else t2_metric

    def metric(example: Any, prediction: Any, trace: Any = None) -> float:
        scores = _component_scores(example, prediction, weights, t2)
        return sum(weights[k] * scores[k] for k in weights) / total

    metric.weights = weights  # type: ignore[attr-defined]
    metric.spec = "+".join(f"{w:g}*{k}" if w != 1 else k for k, w in weights.items())  # type: ignore[attr-defined]
    metric.judge = getattr(t2, "judge", None)  # type: ignore[attr-defined]
    metric.__name__ = f"offquery_metric[{metric.spec}]"  # type: ignore[attr-defined]
    metric.feedback = gepa_metric(weights, judge)  # type: ignore[attr-defined]  (what GEPA optimizes with)
    return metric


# ---------------------------------------------------------------------------------------------------------
# GEPA feedback
# ---------------------------------------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    try:
        value = obj.get(name, default) if hasattr(obj, "get") else getattr(obj, name, default)
    except Exception:
        value = getattr(obj, name, default)
    return default if value is None and default is not None else value


def _agent_label(index: int, agents: Any) -> str:
    """``Agent 2``: a neutral id, never the role (the feedback reaches GEPA's reflection LM, which writes the
    instructions; a role there could teach it to single out the agent without a category)."""
    return f"Agent {index}"


def _t1_feedback(example: Any, prediction: Any) -> str:
    gold = sorted(int(i) for i in (_get(example, "misleading") or []))
    agents = _get(example, "agents") or []
    roles = [_get(a, "role") for a in agents] or None
    predicted = _get(prediction, "misleading_agent")
    found = resolve_agents(predicted, roles)
    gold_text = ", ".join(_agent_label(i, agents) for i in gold) or "no agent (all evidence was reliable)"
    if found is not None and found == set(gold):
        return f"T1 correct: identified {gold_text} as the misleading source."
    if found is None:
        return f"T1 wrong: the output '{predicted}' names no valid agent; the misleading source was {gold_text}."
    blamed = ", ".join(_agent_label(i, agents) for i in sorted(found)) or "no agent"
    return f"T1 wrong: blamed {blamed} instead of {gold_text}."


def _t2_feedback(example: Any, prediction: Any, judge: Judge) -> tuple[float, str]:
    facts = list(_get(example, "t2_facts") or [])[: T2_MAX_FACTS.get(str(_get(example, "domain")), None)]
    if not facts:
        return 0.0, "T2: no facts to check."
    state = _get(prediction, "state")
    if not isinstance(state, str) or not state.strip():
        return 0.0, "T2 wrong: no information state was produced."
    texts = [str(_get(f, "text")) for f in facts]
    labels = [int(_get(f, "label")) for f in facts]
    support = judge.supported(state, texts)
    dropped = [t for t, lab, sup in zip(texts, labels, support, strict=True) if lab == 1 and not sup]
    survived = [t for t, lab, sup in zip(texts, labels, support, strict=True) if lab == 0 and sup]
    score = sum((sup == (lab == 1)) for lab, sup in zip(labels, support, strict=True)) / len(facts)
    parts = [f"T2 {score:.2f}:"]
    if dropped:
        parts.append("the state dropped reliable facts: " + "; ".join(dropped) + ".")
    if survived:
        parts.append("misleading facts survived in the state: " + "; ".join(survived) + ".")
    if not dropped and not survived:
        parts.append("every reliable fact kept and every misleading fact excluded.")
    return score, " ".join(parts)


def _t3_feedback(example: Any, prediction: Any) -> str:
    gold = str(_get(example, "answer"))
    options = _get(example, "options") or {}
    chosen = option_letter(_get(prediction, "answer"))
    gold_text = f"{gold} ({options.get(gold, '')})".replace(" ()", "")
    if chosen == gold:
        return f"T3 correct: chose {gold_text}."
    if chosen is None:
        return f"T3 wrong: no valid option letter; the correct option was {gold_text}."
    return f"T3 wrong: chose {chosen} ({options.get(chosen, '')}) instead of {gold_text}.".replace(" ()", "")


def gepa_metric(weights: str | Mapping[str, float] = "t1+t2+t3", judge: Judge | None = None) -> Callable:
    """A GEPA feedback metric ``(gold, pred, trace=None, pred_name=None, pred_trace=None) -> Prediction``.

    The score is the weighted mean of :func:`offquery_metric`; the feedback explains each weighted task in
    words (see the module docstring). When ``pred_name`` belongs to a ReGround stage (``verify.*``,
    ``reconstruct.*``, ``resolve.*``), that stage's task comes first in the feedback.
    """
    weights = parse_metric(weights)
    total = sum(weights.values())
    judge = judge or LexicalJudge()

    def metric(gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
               pred_trace: Any = None) -> dspy.Prediction:
        if pred is None:
            return dspy.Prediction(score=0.0, feedback="The program failed to produce a prediction.")
        parts: dict[str, str] = {}
        scores: dict[str, float] = {}
        if "t1" in weights:
            scores["t1"] = t1_score(_get(pred, "misleading_agent"), _get(gold, "misleading") or [],
                                    [_get(a, "role") for a in (_get(gold, "agents") or [])] or None)
            parts["t1"] = _t1_feedback(gold, pred)
        if "t2" in weights:
            scores["t2"], parts["t2"] = _t2_feedback(gold, pred, judge)
        if "t3" in weights:
            scores["t3"] = t3_score(_get(pred, "answer"), str(_get(gold, "answer")))
            parts["t3"] = _t3_feedback(gold, pred)
        order = list(parts)
        stage = (pred_name or "").split(".")[0]
        focus = STAGE_METRIC.get(stage)
        if focus in parts:
            order.remove(focus)
            order.insert(0, focus)
        score = sum(weights[k] * scores[k] for k in weights) / total
        return dspy.Prediction(score=score, feedback=" ".join(parts[k] for k in order))

    metric.weights = weights  # type: ignore[attr-defined]
    return metric


# the exported one-task metrics, with the feedback GEPA optimizes with (gepa_metric is defined above)
t1_metric.feedback = gepa_metric("t1")  # type: ignore[attr-defined]
t3_metric.feedback = gepa_metric("t3")  # type: ignore[attr-defined]
t2_metric = make_t2_metric()
"""DSPy metric: T2 with the lexical judge (use :func:`make_t2_metric` for another judge)."""
