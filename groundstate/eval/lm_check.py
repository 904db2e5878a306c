"""``groundstate lm check``: which LM was built, one structured round trip, tokens and tokens per second.

The round trip asks :class:`~groundstate.signatures.checks.StructuredCheck` (a ``Literal`` and a ``list[str]``
field), so a check that passes proves the LM answers in a form the adapters parse. A failed call becomes one
:class:`~groundstate.errors.LMCallError` line (:func:`~groundstate.lm.faults.lm_failure`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from groundstate.lm.embedded import EmbeddedEngine
from groundstate.lm.faults import lm_failure
from groundstate.lm.specs import default_adapter, describe_lm


@dataclass
class CheckReport:
    """What :func:`check_lm` measured."""

    description: dict[str, Any]
    model_file: str | None
    load_seconds: float | None
    choice: Any
    facts: Any
    input_tokens: int
    output_tokens: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.output_tokens / self.seconds if self.seconds else 0.0


def check_lm(lm: Any) -> CheckReport:
    """Load the model (embedded LM), make one structured call, and report.

    Raises:
        LMCallError: the call failed (one line: what failed, which LM, how to fix it).
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    from groundstate.signatures.checks import StructuredCheck  # noqa: PLC0415 (heavy: dspy)

    model_file, load_seconds = None, None
    if isinstance(getattr(lm, "engine", None), EmbeddedEngine):
        started = time.perf_counter()
        with lm.engine.pool().context():  # loads the first context (or finds it loaded)
            pass
        model_file, load_seconds = lm.engine.resolved_path(), time.perf_counter() - started
    predict = dspy.Predict(StructuredCheck)
    with dspy.context(lm=lm, adapter=default_adapter(lm)), dspy.track_usage() as usage:
        started = time.perf_counter()
        try:
            out = predict(question="Which planet is closest to the Sun?",
                          options="A: Mercury\nB: Venus\nC: Earth\nD: Mars")
        except Exception as exc:  # a refused connection, a bad key, a hang, garbage: one line, not a traceback
            raise lm_failure(exc, lm, "lm check") from None
        elapsed = time.perf_counter() - started
    totals = usage.get_total_tokens().get(lm.model, {})
    return CheckReport(description=describe_lm(lm), model_file=model_file, load_seconds=load_seconds,
                       choice=out.choice, facts=out.facts, input_tokens=int(totals.get("prompt_tokens") or 0),
                       output_tokens=int(totals.get("completion_tokens") or 0), seconds=elapsed)
