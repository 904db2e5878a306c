"""Pydantic records shared by programs and evaluation, one module per system.

- :mod:`~groundstate.records.reground`: OffQuery (ReGround's benchmark): :class:`OffQueryInstance` (one
  collaboration episode with its labels), :class:`AgentEvidence`, :class:`T2Fact`, ``LETTERS``, ``CONDITIONS``.
- :mod:`~groundstate.records.consilience`: hidden-profile discussions: :class:`HiddenProfileTask`,
  :class:`Message`, :class:`Transcript`, :class:`Belief`, the :class:`DiscussionAgent` interface, ``ACTIONS``.
- :mod:`~groundstate.records.dhd`: Diverse Hypothesis Deliberation: :class:`Problem`, :class:`HypothesisMessage`.

Every name is re-exported here (``from groundstate.records import HiddenProfileTask`` is the usual import).
Programs receive only a record's inputs (:meth:`OffQueryInstance.inputs`); the labels stay with the record and
are used by the metrics outside the program.
"""

from groundstate.records.consilience import (
    ACTIONS,
    COMM_ACTIONS,
    Belief,
    DiscussionAgent,
    HiddenProfileTask,
    Message,
    Transcript,
)
from groundstate.records.dhd import AnswerKind, HypothesisMessage, Problem
from groundstate.records.reground import (
    CONDITIONS,
    LETTERS,
    AgentEvidence,
    Condition,
    Domain,
    OffQueryInstance,
    OptionLetter,
    T2Fact,
    default_question,
    options_text,
)

__all__ = ["ACTIONS", "COMM_ACTIONS", "CONDITIONS", "LETTERS", "AgentEvidence", "AnswerKind", "Belief", "Condition",
           "DiscussionAgent", "Domain", "HiddenProfileTask", "HypothesisMessage", "Message", "OffQueryInstance",
           "OptionLetter", "Problem", "T2Fact", "Transcript", "default_question", "options_text"]
