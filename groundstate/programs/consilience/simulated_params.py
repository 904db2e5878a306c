"""The parameters of simulated agents: :class:`SimParams`, the named presets :data:`SIM_PRESETS` and
:func:`sim_preset`.

The parameters are plain validated data: they say how an agent forms beliefs (``beta``, ``noise`` and the
limits of integration ``attention``, ``salience``, ``recency``, ``weight_noise``, whose rules are in
:mod:`~groundstate.programs.consilience.simulated_belief`) and what it says (``recall``, ``shared_bias``,
``facts_per_message``, used by :mod:`~groundstate.programs.consilience.simulated_speech`). The agent itself is
:class:`~groundstate.programs.consilience.simulated.SimAgent`, which also re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

__all__ = ["SIM_PRESETS", "SimParams", "sim_preset"]


@dataclass(frozen=True)
class SimParams:
    """How simulated agents think and talk.

    Attributes:
        beta: belief sharpness (the softmax inverse temperature on summed support); 0 gives uniform beliefs.
        noise: standard deviation of the Gaussian noise added to each option's logit; 0 is deterministic.
        recall: probability that a fact the agent could state comes to mind when it speaks (0-1).
        shared_bias: weight of a shared fact relative to a private one (weight 1) when choosing what to say
            on a free turn; above 1 favours common information.
        facts_per_message: facts stated per message (1 or 2 keeps messages short; SeekEvidence states one).
        attention: at most this many informative facts enter a belief, the most salient first (recently
            spoken facts, then own private facts, then own shared facts); ``None`` attends to all of them.
        salience: extra weight of a fact on the transcript: it weighs ``1 + salience * recency ** age``
            against 1 for a fact the agent only holds; 0 weighs spoken and held facts alike.
        recency: how the extra weight of a spoken fact fades per later message (0-1; 1: no fading, 0: only
            the facts of the last message get it).
        weight_noise: standard deviation of the log of each fact's weighting factor (fixed per seed, task,
            agent and fact); 0 weighs every fact exactly.

    The last four fields set the limits of integration (:mod:`~groundstate.programs.consilience.simulated_belief`);
    all off is the ``ideal`` preset.
    """

    beta: float = 1.0
    noise: float = 0.5
    recall: float = 0.8
    shared_bias: float = 2.0
    facts_per_message: int = 1
    attention: int | None = None
    salience: float = 0.0
    recency: float = 1.0
    weight_noise: float = 0.0

    def __post_init__(self):
        checks = [
            ("beta", self.beta, math.isfinite(self.beta) and self.beta >= 0, "a finite number >= 0"),
            ("noise", self.noise, math.isfinite(self.noise) and self.noise >= 0, "a finite number >= 0"),
            ("recall", self.recall, 0.0 <= self.recall <= 1.0, "between 0 and 1"),
            ("shared_bias", self.shared_bias, math.isfinite(self.shared_bias) and self.shared_bias > 0,
             "a finite number > 0"),
            ("facts_per_message", self.facts_per_message, _is_count(self.facts_per_message), "an integer >= 1"),
            ("attention", self.attention, self.attention is None or _is_count(self.attention),
             "an integer >= 1 or None (attend to every fact)"),
            ("salience", self.salience, _is_number(self.salience) and self.salience >= 0, "a finite number >= 0"),
            ("recency", self.recency, _is_number(self.recency) and 0.0 <= self.recency <= 1.0, "between 0 and 1"),
            ("weight_noise", self.weight_noise, _is_number(self.weight_noise) and self.weight_noise >= 0,
             "a finite number >= 0"),
        ]
        for name, value, ok, need in checks:
            if not ok:
                raise ValueError(f"SimParams.{name} must be {need}, got {value!r}")

    @property
    def integrates_fully(self) -> bool:
        """True when no limit of integration is on (beliefs weigh every known fact exactly)."""
        return self.attention is None and self.salience == 0 and self.weight_noise == 0


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


SIM_PRESETS: MappingProxyType[str, SimParams] = MappingProxyType({
    "ideal": SimParams(),
    "limited": SimParams(attention=3, salience=0.5, recency=0.8, weight_noise=0.3),
})
"""Named parameter sets (read-only; derive variants with :func:`sim_preset`).

- ``ideal``: exactly ``SimParams()``: perfect integrators, the behaviour from before the limits existed.
- ``limited``: ``SimParams()`` plus ``attention=3`` (three informative facts per belief), ``salience=0.5`` with
  ``recency=0.8`` (a fact in the last message weighs 1.5, one five messages back about 1.16) and
  ``weight_noise=0.3`` (95% of the weighting factors within 0.56-1.8). On generated travel tasks full
  information then gets about half the tasks right instead of nearly all, while discussion still helps and the
  rule controller does a little better than full information on average (a few points of accuracy), because
  the facts a controlled discussion surfaces last are the ones the agents attend to.
"""


def sim_preset(name: str, **overrides: object) -> SimParams:
    """The preset ``name`` of :data:`SIM_PRESETS` with ``overrides`` (``SimParams`` fields) replacing its values.

    Raises:
        ValueError: an unknown preset or field, or a value :class:`SimParams` rejects.
    """
    if name not in SIM_PRESETS:
        raise ValueError(f"unknown simulated-agent preset '{name}'; choose from {', '.join(SIM_PRESETS)}")
    known = {f.name for f in fields(SimParams)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown SimParams field(s) {', '.join(unknown)}; fields are {', '.join(sorted(known))}")
    return replace(SIM_PRESETS[name], **overrides)
