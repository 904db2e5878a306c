"""Hidden-profile discussions (Consilience): LM agents, and (re-exported) the protocols, the plurality vote and
the metrics of :mod:`groundstate.programs.consilience.protocols`.

:class:`LMAgent` implements :class:`~groundstate.records.DiscussionAgent` with three predictors:

- ``elicit`` (:class:`~groundstate.signatures.discussion.ElicitBelief`): a probability per option, a vote and a
  confidence; :func:`repair_belief` turns whatever comes back into a valid :class:`~groundstate.records.Belief`;
- ``say`` (:class:`~groundstate.signatures.discussion.SpeakUnderAction`): one or two sentences under an action,
  whose meaning (:data:`ACTION_MEANINGS`) is the turn's instruction;
- ``decide`` (:class:`~groundstate.signatures.discussion.FinalVote`): the final vote and confidence.

An agent is stateless: everything it knows comes from the task (its own facts, by ``index``) and the transcript
it is given. Each agent may have its own LM (heterogeneous groups); :class:`LMTeam` builds one agent per task
agent, with an LM per index.

Options are shown to agents with letter labels (``A: ...``; an option that already is its letter is shown
as the letter alone), and votes are read back as labels: what an answer means (labels, votes, belief repair,
message length) is :mod:`~groundstate.programs.consilience.answers`, whose public names are re-exported here.

Facts are presented in one of two ways (:data:`PRESENTATIONS`): ``labelled`` (the default: the shared facts and
the agent's own facts in two fields saying which is which) or ``shuffled`` (HiddenBench's way: all of them in
one numbered list, shuffled per agent with a seed, with a note that the order means nothing and without saying
which facts the others hold; :meth:`LMAgent.with_presentation`). A presented agent can also carry a note, shown
above the discussion (HiddenBench reminds each agent of its vote before the discussion).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import dspy
from dspy.utils.exceptions import AdapterParseError
from pydantic import ConfigDict, Field, create_model

from groundstate.lm.specs import default_adapter, is_embedded
from groundstate.programs.common import acall_stage, as_data
from groundstate.programs.consilience.answers import (
    MAX_MESSAGE_CHARS,  # noqa: F401 (re-exported: imported from here too)
    message_text,
    option_labels,
    options_block,
    repair_belief,
    resolve_option,
)
from groundstate.records import Belief, HiddenProfileTask, Message, Transcript
from groundstate.signatures.discussion import (
    ACTION_MEANINGS,
    FREE_TURN_MEANING,
    ElicitBelief,
    FinalVote,
    SpeakUnderAction,
)

__all__ = ["ACTION_MEANINGS", "FREE_TURN_MEANING", "LMAgent", "LMTeam", "option_labels", "repair_belief",
           "resolve_option"]

logger = logging.getLogger(__name__)

PRESENTATIONS: tuple[str, ...] = ("labelled", "shuffled")
_FACTS_DESC = ("every fact you were given, numbered; the order is random and says nothing about how important "
               "the facts are or how they relate; the others may or may not hold any of them")
_TEAM_LOCK = threading.Lock()


def _lines(facts: Sequence[str]) -> str:
    return "\n".join(f"- {as_data(f)}" for f in facts) if facts else "(none)"


@functools.lru_cache(maxsize=256)
def specialize(signature: type[dspy.Signature], labels: tuple[str, ...]) -> type[dspy.Signature]:
    """``signature`` with its outputs bound to a task's options, so schema-constrained decoding can only produce
    valid ones: ``vote`` becomes one of the letters, ``probabilities`` an object with one number per letter.
    The instructions (and anything an optimizer changed) are kept; only the output types change."""
    if "vote" in signature.output_fields:
        signature = signature.with_updated_fields("vote", type_=Literal[labels])
    if "probabilities" in signature.output_fields:
        fields: dict[str, Any] = {label: (float, Field(description=f"probability of option {label}"))
                                  for label in labels}
        model = create_model("OptionProbabilities", __config__=ConfigDict(extra="forbid"), **fields)
        signature = signature.with_updated_fields("probabilities", type_=model)
    return signature


@functools.lru_cache(maxsize=64)
def shuffled_signature(signature: type[dspy.Signature]) -> type[dspy.Signature]:
    """``signature`` with its ``shared_facts`` and ``own_facts`` inputs replaced by one ``facts`` input (the
    ``shuffled`` presentation); instructions are kept."""
    if "shared_facts" not in signature.input_fields:
        return signature
    position = list(signature.input_fields).index("shared_facts")
    return signature.delete("shared_facts").delete("own_facts").insert(position, "facts",
                                                                        dspy.InputField(desc=_FACTS_DESC), str)


def _copy_sharing(module: Any, shared: tuple[str, ...], memo: dict) -> Any:
    """A deep copy of ``module`` in which the attributes ``shared`` (LMs) are the same objects: copying a program
    (as DSPy optimizers do) copies its prompts, never its LM clients."""
    new = module.__class__.__new__(module.__class__)
    memo[id(module)] = new
    for name, value in module.__dict__.items():
        new.__dict__[name] = value if name in shared else copy.deepcopy(value, memo)
    return new


class LMAgent(dspy.Module):
    """A hidden-profile agent backed by an LM.

    Args:
        index: the agent's index in the task (which private facts it holds).
        lm: its LM (``None`` = DSPy's configured LM). An embedded LM also gets the ``JSONAdapter``.
    """

    def __init__(self, index: int, lm: Any = None):
        super().__init__()
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"agent index must be an integer >= 0, got {index!r}")
        self.index = index
        self.agent_lm = lm
        self.presentation = "labelled"
        self.presentation_seed = 0
        self.note: str | None = None
        self.elicit = dspy.Predict(ElicitBelief)
        self.say = dspy.Predict(SpeakUnderAction)
        self.decide = dspy.Predict(FinalVote)

    def __deepcopy__(self, memo: dict) -> LMAgent:
        return _copy_sharing(self, ("agent_lm",), memo)

    def with_presentation(self, style: str = "shuffled", seed: int = 0, note: str | None = None) -> LMAgent:
        """This agent (sharing its predictors and LM) presenting its facts as ``style`` (see the module
        docstring), with the shuffle seeded by ``seed``, and ``note`` shown above the discussion."""
        if style not in PRESENTATIONS:
            raise ValueError(f"unknown presentation '{style}'; choose from {', '.join(PRESENTATIONS)}")
        agent = copy.copy(self)
        agent.presentation, agent.presentation_seed, agent.note = style, int(seed), note
        return agent

    def forward(self, task: HiddenProfileTask, transcript: Transcript | None = None) -> dspy.Prediction:
        """The final vote as a prediction (``vote``, ``confidence``, ``belief``)."""
        belief = self.vote(task, transcript or Transcript())
        return dspy.Prediction(vote=belief.vote, confidence=belief.confidence, belief=belief)

    async def aforward(self, task: HiddenProfileTask, transcript: Transcript | None = None) -> dspy.Prediction:
        """:meth:`forward` for ``await agent.acall(...)`` (the LM's async path)."""
        belief = await self.avote(task, transcript or Transcript())
        return dspy.Prediction(vote=belief.vote, confidence=belief.confidence, belief=belief)

    # -- the DiscussionAgent interface (each method with an awaitable twin: abelief, aspeak, avote) -------------
    def belief(self, task: HiddenProfileTask, transcript: Transcript, round: int) -> Belief:
        """Elicit a probability per option, a vote and a confidence, repaired into a valid belief."""
        return self._believed(task, self._predict(self.elicit, task, transcript))

    async def abelief(self, task: HiddenProfileTask, transcript: Transcript, round: int) -> Belief:
        return self._believed(task, await self._apredict(self.elicit, task, transcript))

    def speak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int) -> Message:
        """One or two sentences under ``action`` (its meaning is the instruction), or a free turn for ``None``."""
        return self._said(action, round, self._predict(self.say, task, transcript, **self._say_args(action)))

    async def aspeak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int
                     ) -> Message:
        out = await self._apredict(self.say, task, transcript, **self._say_args(action))
        return self._said(action, round, out)

    def vote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        """The final vote and confidence (the distribution is rebuilt from them, see :func:`repair_belief`)."""
        return self._voted(task, self._predict(self.decide, task, transcript))

    async def avote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        return self._voted(task, await self._apredict(self.decide, task, transcript))

    # -- internals ------------------------------------------------------------------------------------------
    @staticmethod
    def _believed(task: HiddenProfileTask, out: dspy.Prediction) -> Belief:
        return repair_belief(task.options, out.get("probabilities"), out.get("vote"), out.get("confidence"))

    @staticmethod
    def _say_args(action: str | None) -> dict[str, str]:
        if action is not None and action not in ACTION_MEANINGS:
            raise ValueError(f"unknown action '{action}'; expected one of {tuple(ACTION_MEANINGS)} or None")
        return {"action": action or "Free turn",
                "instruction": FREE_TURN_MEANING if action is None else ACTION_MEANINGS[action]}

    def _said(self, action: str | None, round: int, out: dspy.Prediction) -> Message:
        text = as_data(message_text(out.get("message")))  # model text that every later prompt quotes
        return Message(speaker=self.index, action=action, round=round, text=text, words=len(text.split()))

    @staticmethod
    def _voted(task: HiddenProfileTask, out: dspy.Prediction) -> Belief:
        return repair_belief(task.options, None, out.get("vote"), out.get("confidence"))

    def _attempts(self, predictor: dspy.Predict, task: HiddenProfileTask, transcript: Transcript, **extra: str
                  ) -> list[dict[str, Any]]:
        """The keyword arguments of ``predictor``'s call: outputs bound to the task's options (:func:`specialize`)
        and, when that changes the signature, the retry with the unbound one (see :meth:`_predict`)."""
        inputs = {**self._inputs(task, transcript), **extra}
        base = shuffled_signature(predictor.signature) if self.presentation == "shuffled" else predictor.signature
        bound = specialize(base, tuple(option_labels(task.options)))
        if bound is predictor.signature:
            return [inputs]
        plain = inputs if base is predictor.signature else {**inputs, "signature": base}
        return [{**inputs, "signature": bound}, plain]

    def _predict(self, predictor: dspy.Predict, task: HiddenProfileTask, transcript: Transcript, **extra: str
                 ) -> dspy.Prediction:
        """Call ``predictor`` with its outputs bound to the task's options (:func:`specialize`); if the LM's
        answer does not parse under those types, ask once more with the plain signature and repair the result."""
        first, *retry = self._attempts(predictor, task, transcript, **extra)
        with self.lm_context():
            try:
                return predictor(**first)
            except AdapterParseError as exc:
                if not retry:
                    raise
                self._log_retry(exc)
                return predictor(**retry[0])

    async def _apredict(self, predictor: dspy.Predict, task: HiddenProfileTask, transcript: Transcript,
                        **extra: str) -> dspy.Prediction:
        """:meth:`_predict` awaiting ``predictor.acall``."""
        first, *retry = self._attempts(predictor, task, transcript, **extra)
        with self.lm_context():
            try:
                return await acall_stage(predictor, **first)
            except AdapterParseError as exc:
                if not retry:
                    raise
                self._log_retry(exc)
                return await acall_stage(predictor, **retry[0])

    def _log_retry(self, exc: Exception) -> None:
        logger.debug("agent %d: output did not parse under the task's options (%s); asking again", self.index, exc)

    def lm_context(self):
        """A context in which DSPy calls use this agent's LM (and an embedded LM's adapter); a no-op without one."""
        if self.agent_lm is None:
            return contextlib.nullcontext()

        overrides: dict[str, Any] = {"lm": self.agent_lm}
        if is_embedded(self.agent_lm):
            overrides["adapter"] = default_adapter(self.agent_lm)
        return dspy.context(**overrides)

    def _inputs(self, task: HiddenProfileTask, transcript: Transcript) -> dict[str, str]:
        if self.index >= task.n_agents:
            raise ValueError(f"agent index {self.index} is out of range for task '{task.id}' with "
                             f"{task.n_agents} agents")
        discussion = as_data(transcript.text())
        if self.note:
            discussion = f"{as_data(self.note)}\n{discussion}"
        inputs = {"agent": f"Agent {self.index}", "task": as_data(task.description),
                  "options": options_block(task.options), "discussion": discussion}
        if self.presentation == "shuffled":
            facts = task.facts_of(self.index)
            random.Random(f"facts:{self.presentation_seed}:{task.id}:{self.index}").shuffle(facts)
            inputs["facts"] = "\n".join(f"Fact {k}: {as_data(f)}" for k, f in enumerate(facts, start=1)) or "(none)"
        else:
            inputs["shared_facts"] = _lines(task.shared)
            inputs["own_facts"] = _lines(task.private[self.index])
        return inputs


class LMTeam(dspy.Module):
    """One :class:`LMAgent` per agent of a task, each with its own LM when given.

    Args:
        lms: the agents' LMs: a list (agent ``i`` gets ``lms[i]``; agents past its end get ``None``), a callable
            ``index -> LM`` (e.g. ``lambda i: config.lm_for(f"agent.{i}")``), or ``None`` (DSPy's LM for all).

        n_agents: agents to create now (more are created when a task needs them). Create as many as the saved
            program had before loading a saved state into a team.
        lm_config: an :class:`~groundstate.lm.config.LMConfig`: agent ``i`` uses its role ``agent.i`` (when ``lms``
            is not given), and the team is described by it (:mod:`~groundstate.programs.consilience.identity`).

    Agents are kept (``members``), so their predictors can be optimized and saved.
    """

    def __init__(self, lms: Sequence[Any] | Callable[[int], Any] | None = None, n_agents: int = 0,
                 lm_config: Any = None):
        super().__init__()
        self.lm_config = lm_config
        self.lms = lms if lms is not None or lm_config is None else (lambda i: lm_config.lm_for(f"agent.{i}"))
        self.members: list[LMAgent] = [LMAgent(i, self.lm_of(i)) for i in range(n_agents)]

    def __deepcopy__(self, memo: dict) -> LMTeam:
        return _copy_sharing(self, ("lms", "lm_config"), memo)

    def lm_of(self, index: int) -> Any:
        if self.lms is None:
            return None
        if callable(self.lms):
            return self.lms(index)
        return self.lms[index] if index < len(self.lms) else None

    def for_task(self, task: HiddenProfileTask) -> list[LMAgent]:
        """The agents for ``task`` (its first ``task.n_agents`` members)."""
        with _TEAM_LOCK:
            while len(self.members) < task.n_agents:
                self.members.append(LMAgent(len(self.members), self.lm_of(len(self.members))))
            return self.members[: task.n_agents]

    def __call__(self, task: HiddenProfileTask) -> list[LMAgent]:
        """``team(task)``: the same as :meth:`for_task` (a team is the ``task -> agents`` callable programs take)."""
        return self.for_task(task)

    def forward(self, task: HiddenProfileTask) -> list[LMAgent]:
        return self.for_task(task)
