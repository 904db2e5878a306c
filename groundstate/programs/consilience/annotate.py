"""Per-fact support for hidden-profile tasks that have none, so simulated agents can run on them.

Simulated agents (:mod:`groundstate.programs.consilience.simulated`) weigh facts by their support for the options
(:attr:`~groundstate.records.HiddenProfileTask.support`, ``{fact: {option: weight}}``). Generated travel tasks
carry it; HiddenBench's published tasks do not. Two ways to supply it:

**The design default** (:func:`design_support`, offline, no LM). It encodes nothing but the hidden-profile
design that HiddenBench's tasks are built to (Stasser and Titus; HiddenBench §3): the information everybody holds
points away from the correct option, each private piece on its own is not enough to overturn that, and the
private pieces pooled together identify the correct option. Exactly:

- every private fact supports the correct option with weight 1 and no other option;
- the shared facts, together, support every *wrong* option with weight ``S = (m + 1) / 2``, where ``m`` is the
  number of distinct private facts, spread evenly (each shared fact gives ``S / len(shared)`` to every wrong
  option and nothing to the correct one);
- with no shared facts there is no counterweight (every wrong option gets 0).

So with the shared facts and ``j`` private facts, the correct option leads every wrong option by ``j - S``:
behind with one private fact (``1 < S`` whenever ``m >= 2``), level at ``j = (m + 1) / 2``, ahead beyond it, so
with all ``m`` (``m > S``). What it assumes and does not know: it reads no text, so it cannot tell which wrong
option the shared facts favour (it treats them alike), nor that some private facts rule out one option rather
than point at the right one, nor that some facts matter more than others. It uses the correct answer, as any
model of the design must; it is a plumbing default for running protocols and controllers offline, not a reading
of the tasks, and results on it say how the protocols handle that stylised profile, not how LLM agents would do.

**An LM annotator** (:class:`SupportAnnotator`): an LM rates each fact, alone, against every option on a
-2..+2 scale (:class:`~groundstate.signatures.discussion.RateFactSupport`, outputs bound to the task's option
letters so schema-constrained decoding can only give valid ratings). It sees the scenario, the options and the
one fact, never the correct answer or the task's rationale. The ratings are the weights. Files of annotations
are kept beside the task file and reused (:mod:`groundstate.eval.consilience.support`).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import dspy
from pydantic import ConfigDict, Field, create_model

from groundstate.programs.common import acall_stage, as_data
from groundstate.programs.consilience.agents import option_labels, options_block
from groundstate.records import HiddenProfileTask
from groundstate.signatures.discussion import RateFactSupport

RATINGS: tuple[int, ...] = (-2, -1, 0, 1, 2)
"""The allowed ratings, from strongly against to strongly in favour."""


def design_support(task: HiddenProfileTask) -> dict[str, dict[str, float]]:
    """The design default: ``{fact: {option: weight}}`` for every fact of ``task`` (see the module docstring)."""
    private = list(dict.fromkeys(f for facts in task.private for f in facts))
    shared = [f for f in dict.fromkeys(task.shared) if f not in set(private)]
    support: dict[str, dict[str, float]] = {}
    if shared:
        each = (len(private) + 1) / 2 / len(shared)
        for fact in shared:
            support[fact] = {o: (0.0 if o == task.correct else each) for o in task.options}
    for fact in private:
        support[fact] = {o: (1.0 if o == task.correct else 0.0) for o in task.options}
    return support


@functools.lru_cache(maxsize=64)
def _bound(labels: tuple[str, ...]) -> type[dspy.Signature]:
    """:class:`RateFactSupport` with ``ratings`` an object holding one rating in :data:`RATINGS` per letter."""
    fields: dict[str, Any] = {label: (Literal[RATINGS], Field(description=f"rating of option {label}"))
                              for label in labels}
    model = create_model("OptionRatings", __config__=ConfigDict(extra="forbid"), **fields)
    return RateFactSupport.with_updated_fields("ratings", type_=model)


class SupportAnnotator(dspy.Module):
    """Rates one fact against every option of a task: ``forward(task, fact) -> Prediction(support, ratings)``.

    ``support`` is ``{option: float(rating)}``; ``ratings`` is ``{letter: rating}`` as the LM gave it. The LM
    sees ``task.description``, the options and the fact, never ``task.correct`` or ``task.rationale``.

    Raises:
        ValueError: the LM's ratings do not name every option with an allowed rating (after the bound
            signature, only a model outside schema-constrained decoding can produce that).
    """

    def __init__(self):
        super().__init__()
        self.rate = dspy.Predict(RateFactSupport)

    def forward(self, task: HiddenProfileTask, fact: str) -> dspy.Prediction:
        return self.rated(task, self.rate(**self.rate_args(task, fact)))

    async def aforward(self, task: HiddenProfileTask, fact: str) -> dspy.Prediction:
        """:meth:`forward` for ``await annotator.acall(...)`` (the LM's async path)."""
        return self.rated(task, await acall_stage(self.rate, **self.rate_args(task, fact)))

    @staticmethod
    def rate_args(task: HiddenProfileTask, fact: str) -> dict[str, Any]:
        return {"scenario": as_data(task.description), "options": options_block(task.options),
                "information": as_data(fact), "signature": _bound(tuple(option_labels(task.options)))}

    @staticmethod
    def rated(task: HiddenProfileTask, out: dspy.Prediction) -> dspy.Prediction:
        """The support and ratings from the LM's answer, checked."""
        labels = tuple(option_labels(task.options))
        ratings = out.ratings.model_dump() if hasattr(out.ratings, "model_dump") else dict(out.ratings or {})
        missing = [label for label in labels if label not in ratings]
        if missing:
            raise ValueError(f"the ratings name no value for option {missing[0]}")
        bad = next((label for label in labels if ratings[label] not in RATINGS), None)
        if bad is not None:
            raise ValueError(f"rating {ratings[bad]!r} for option {bad} is not one of {RATINGS}")
        support = {option: float(ratings[label]) for label, option in zip(labels, task.options, strict=True)}
        return dspy.Prediction(support=support, ratings={label: int(ratings[label]) for label in labels})
