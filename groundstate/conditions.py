"""OffQuery conditions: what a program sees of an instance (the paper's Table 2 settings, §5.2 and §D.5, in the
published data's terms).

- ``reliable``: the reliable shared context, the private evidence as given (the misleading agent's included):
  Table 2's "misleading private, reliable shared".
- ``unreliable``: the corrupted shared context, the private evidence as given: the main setting (Table 1).
- ``reliable-private``: the reliable shared context and reliable private evidence: "reliable private and shared
  information".
- ``reliable-private-unreliable-shared``: the corrupted shared context and reliable private evidence: "reliable
  private with misleading shared information".

Reliable private evidence (:func:`under`): each misleading agent's evidence is replaced by its reliable version
when the instance records one (a generated instance's ``provenance.structure.reliable_evidence``, a published
one's ``provenance.misleading_reliable_evidence``: the text of the category the corruption took the place of),
and the agent is left out otherwise (a published misleading agent that only adds fabricated information). The
functions here take an :class:`~groundstate.records.OffQueryInstance` (typed ``Any``: this module sits below
:mod:`groundstate.records`, which imports it); the record's ``context_for``, ``under``, ``inputs`` and
``to_example`` call them.
"""

from __future__ import annotations

from typing import Any, Literal

Condition = Literal["reliable", "unreliable", "reliable-private", "reliable-private-unreliable-shared"]
CONDITIONS: tuple[str, ...] = ("reliable", "unreliable", "reliable-private", "reliable-private-unreliable-shared")
#: The conditions that show the corrupted shared context (an instance needs one to run under them).
CORRUPTED_CONDITIONS: tuple[str, ...] = ("unreliable", "reliable-private-unreliable-shared")
#: The conditions whose private evidence is made reliable (:func:`under`).
RELIABLE_PRIVATE_CONDITIONS: tuple[str, ...] = ("reliable-private", "reliable-private-unreliable-shared")


def check(condition: str) -> str:
    """``condition`` if it is one of :data:`CONDITIONS`; ``ValueError`` otherwise."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got '{condition}'")
    return condition


def shared_context_for(instance: Any, condition: str) -> str:
    """The shared context a program sees under ``condition`` (``ValueError`` when it shows a corrupted context the
    instance does not have)."""
    if check(condition) in CORRUPTED_CONDITIONS:
        if instance.corrupted_context is None:
            raise ValueError(f"instance {instance.id} has no corrupted shared context; use condition='reliable'")
        return instance.corrupted_context
    return instance.shared_context


def under(instance: Any, condition: str) -> Any:
    """The instance as programs see it and the metrics score it under ``condition``.

    Itself, except under the reliable-private conditions, where the misleading agents' evidence is made reliable
    (see the module docstring), the agents left are renumbered 0..n-1 in order, and ``misleading`` and
    ``misleading_statements`` are empty (T1's gold answer is "no misleading agent"); the T2 facts, the question
    and the answer are unchanged, and ``provenance.private_made_reliable`` says which agents were replaced and
    which left out. Idempotent.
    """
    if check(condition) not in RELIABLE_PRIVATE_CONDITIONS or not (instance.misleading or
                                                                    instance.misleading_statements):
        return instance
    provenance = dict(instance.provenance or {})
    structure = dict(provenance.get("structure") or {})
    truthful = dict(structure.get("reliable_evidence") or {})
    published = provenance.get("misleading_reliable_evidence")
    if isinstance(published, str) and published.strip() and len(instance.misleading) == 1:
        truthful.setdefault(str(instance.misleading[0]), published)
    agents, replaced, left_out = [], [], []
    for agent in instance.agents:
        if agent.agent in instance.misleading:
            text = truthful.get(str(agent.agent))
            if not (isinstance(text, str) and text.strip()):
                left_out.append(agent.agent)
                continue
            replaced.append(agent.agent)
            agent = agent.model_copy(update={"evidence": text})
        agents.append(agent.model_copy(update={"agent": len(agents)}))
    if structure:  # every agent's evidence is now its reliable version: nothing is left to map
        provenance["structure"] = {**structure, "reliable_evidence": {}}
    if "misleading_reliable_evidence" in provenance:
        provenance["misleading_reliable_evidence"] = None
    provenance["private_made_reliable"] = {"replaced": replaced, "left_out": left_out}
    return instance.model_copy(update={"agents": agents, "misleading": [], "misleading_statements": [],
                                       "provenance": provenance})
