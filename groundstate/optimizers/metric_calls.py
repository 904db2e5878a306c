"""Metric wrappers ``tune`` calls the optimizers with: counting every call (:class:`CountingMetric`, which also
tells a progress listener) and adapting any metric to GEPA's feedback signature (:func:`gepa_feedback_metric`)."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

import dspy


class CountingMetric:
    """A metric wrapper that counts its calls and the ones that raised (the failed share is computed with the
    meter's failed LM calls: a failed LM call ends its program call, so the metric is never called for it), and
    tells ``listener`` (an object with ``on_metric_call(raised: bool)``, e.g. a progress display) of each call
    as it ends."""

    def __init__(self, metric: Callable, listener: Any = None):
        self.metric = metric
        self.listener = listener if hasattr(listener, "on_metric_call") else None
        self.calls = 0
        self.raised = 0
        self.first_error: str | None = None
        self.lock = threading.Lock()
        for name in ("spec", "judge", "feedback", "__name__"):
            if hasattr(metric, name):
                setattr(self, name, getattr(metric, name))

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
        try:
            value = self.metric(*args, **kwargs)
        except Exception as exc:
            with self.lock:
                self.raised += 1
                if self.first_error is None:
                    self.first_error = f"the metric raised {type(exc).__name__}: {exc}"
            if self.listener is not None:
                self.listener.on_metric_call(True)
            raise
        if self.listener is not None:
            self.listener.on_metric_call(False)
        return value


def accepts_gepa_arguments(metric: Callable) -> bool:
    """Whether ``metric`` can be called with GEPA's five positional arguments (the check ``dspy.GEPA`` makes)."""
    target = metric.metric if isinstance(metric, CountingMetric) else metric
    try:
        inspect.signature(target).bind(None, None, None, None, None)
    except (TypeError, ValueError):
        return False
    return True


def gepa_feedback_metric(metric: Callable) -> Callable:
    """``metric`` in GEPA's feedback signature ``(gold, pred, trace=None, pred_name=None, pred_trace=None)``.

    A metric that already takes those arguments is returned as it is. Any other metric (``(example, prediction,
    trace=None)``) is called with the first three and its result returned as ``dspy.Prediction(score, feedback)``:
    a result that already carries ``feedback`` is passed on, a bare score gets GEPA's own default text.

    Guarantees: the returned callable accepts both GEPA's five arguments and the two or three ``dspy.Evaluate``
    and the trace bootstrapping pass.
    """
    if accepts_gepa_arguments(metric):
        return metric

    def feedback(gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> Any:
        result = metric(gold, pred, trace)
        if getattr(result, "feedback", None) is not None:
            return result
        score = score_value(result)
        return dspy.Prediction(score=score, feedback=f"This trajectory got a score of {score:g}.")

    for name in ("spec", "judge", "__name__"):
        if hasattr(metric, name):
            setattr(feedback, name, getattr(metric, name))
    return feedback


def score_value(score: Any) -> float:
    return float(getattr(score, "score", score))
