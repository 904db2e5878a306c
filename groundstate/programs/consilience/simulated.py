"""LM-free simulated agents for hidden-profile discussions, in the spirit of Stasser's DISCUSS model.

A :class:`SimAgent` implements :class:`~groundstate.records.DiscussionAgent`, so every protocol and controller
that runs LM agents runs simulated ones too, thousands of discussions per second. It needs a task whose facts
carry support for the options (:attr:`HiddenProfileTask.support`, ``{fact text: {option: weight}}``): generated
travel tasks carry it, and any task can be annotated by hand. A fact without an annotation supports nothing.

The agent is one class over four concepts, one module each:

- what it concludes (the scoring rule, its beliefs and votes, and the limits of integration: bounded attention,
  salient spoken facts, imperfect weighting): :mod:`~groundstate.programs.consilience.simulated_belief`;
- what it says (the message rules of the four actions and of a free turn, recall, passing):
  :mod:`~groundstate.programs.consilience.simulated_speech`;
- how it is set (:class:`SimParams`, the presets :data:`SIM_PRESETS` and :func:`sim_preset`):
  :mod:`~groundstate.programs.consilience.simulated_params`;
- its counter-based random streams: :mod:`~groundstate.programs.consilience.simulated_streams`, and the array
  code that asks a large group at once: :mod:`~groundstate.programs.consilience.simulated_group`.

This module holds the agent (:class:`SimAgent`), its teams (:func:`sim_team`, :class:`SimTeam`) and
:func:`group_beliefs`, and re-exports the public names of the others (``from
groundstate.programs.consilience.simulated import SimParams, sim_preset, PASS_TEXT`` keeps working).

Determinism. Every random draw comes from a counter-based hash of (agent seed, task id, agent index,
transcript length, round, action, purpose), never from global state, so the same transcript and action always
give the same belief and message; the limits' per-fact draws (attention order, weighting factors) hash
(agent seed, task id, agent index, purpose, fact text) and do not depend on the transcript at all. A
controller can therefore branch counterfactually from one transcript, and a run is reproducible in another
process (no global random state, no salted string hashing: fact texts and task ids are keyed by CRC-32).

Speed: tasks are precomputed once by :mod:`~groundstate.programs.consilience.support`; with every limit off
beliefs take the same incremental path as before the limits existed, and with limits on a belief costs one
pass over the transcript and the agent's facts (``bench/simulate_speed.py`` measures both). A controller asks
the whole group at once (:func:`group_beliefs`): the stated facts are read once, and branches that state the
same facts share their beliefs. Large groups without limits are computed as arrays
(:func:`~groundstate.programs.consilience.simulated_group.full_beliefs`): the group's constants are gathered
once per discussion, a branch's summed scores extend its parent's, and the logit noise of a (transcript
length, round) is hashed as arrays once for all the counterfactual branches that share it. Every number is the
one an agent's own :meth:`SimAgent.belief` gives.
"""

from __future__ import annotations

import numpy as np

from groundstate.programs.consilience.simulated_belief import BELIEF, VOTE, probabilities, to_belief
from groundstate.programs.consilience.simulated_group import (
    GroupBeliefs,
    full_beliefs,
    trusted_belief,  # noqa: F401 (imported from here too)
)
from groundstate.programs.consilience.simulated_params import SIM_PRESETS, SimParams, sim_preset
from groundstate.programs.consilience.simulated_speech import PASS_TEXT, message
from groundstate.programs.consilience.simulated_streams import mix_rows, normal_rows
from groundstate.programs.consilience.support import CompiledTask, compile_task
from groundstate.records import Belief, HiddenProfileTask, Message, Transcript

__all__ = ["PASS_TEXT", "SIM_PRESETS", "SimAgent", "SimParams", "SimTeam", "group_beliefs", "sim_preset", "sim_team"]


_GROUPS_SIZE = 64


_VECTOR_MIN = 8
"""From this many agents (without limits of integration) a group's beliefs are computed as arrays; below it the
per-agent loop is faster. Both give the same numbers."""


_GROUPS: dict[tuple, list[Belief]] = {}
"""A group's beliefs by all they depend on: the compiled task, the agents (objects), the facts of every message
(a belief reads nothing else of a transcript), the round and the purpose. Counterfactual branches that state the
same facts (SeekEvidence and Route with one fact per message) share them. Cleared when full."""


class SimAgent:
    """A seeded, LM-free hidden-profile agent (its rules: the module docstring and the modules it names).

    Args:
        index: the agent's index in the task (which private facts it holds).
        params: how it thinks and talks (:class:`SimParams`).
        seed: its random seed; all of its draws are a function of the seed and the discussion state.
    """

    is_simulated = True

    def __init__(self, index: int, params: SimParams | None = None, seed: int = 0):
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"agent index must be an integer >= 0, got {index!r}")
        self.index = index
        self.params = params or SimParams()
        self.seed = int(seed)

    def __repr__(self) -> str:
        return f"SimAgent(index={self.index}, params={self.params}, seed={self.seed})"

    # -- the DiscussionAgent interface --------------------------------------------------------------------
    def belief(self, task: HiddenProfileTask, transcript: Transcript, round: int) -> Belief:
        """The agent's noisy softmax belief from the facts it knows at ``transcript``."""
        compiled = self._compiled(task)
        return to_belief(compiled, probabilities(self, compiled, transcript, None, round, BELIEF))

    def vote(self, task: HiddenProfileTask, transcript: Transcript) -> Belief:
        """The final vote: the same rule as :meth:`belief`, with its own noise draw."""
        compiled = self._compiled(task)
        return to_belief(compiled, probabilities(self, compiled, transcript, None, 0, VOTE))

    def speak(self, task: HiddenProfileTask, transcript: Transcript, action: str | None, round: int) -> Message:
        """A message under ``action`` (or a free turn for ``None``) stating the facts its intent calls for
        (:func:`~groundstate.programs.consilience.simulated_speech.message`)."""
        return message(self, self._compiled(task), transcript, action, round)

    def _compiled(self, task: HiddenProfileTask) -> CompiledTask:
        """The compiled task, checking that the agent's index is one of its agents."""
        compiled = compile_task(task)
        if self.index >= len(compiled.own):
            raise ValueError(f"agent index {self.index} is out of range for task '{task.id}' "
                             f"with {len(compiled.own)} agents")
        return compiled


def group_beliefs(agents: list[SimAgent], task: HiddenProfileTask, transcript: Transcript, round: int,
                  final: bool = False) -> list[Belief]:
    """``[agent.belief(task, transcript, round) for agent in agents]`` (``final``: ``agent.vote(task,
    transcript)``), the same beliefs with the work they share done once: the task lookup and the facts stated
    on the transcript; a group asked again about the same facts, round and purpose gets the same beliefs
    (cached in :data:`_GROUPS`; beliefs are values, do not change them in place)."""
    if not agents:
        return []
    compiled = agents[0]._compiled(task)
    for agent in agents:
        if agent.index >= len(compiled.own):
            agent._compiled(task)  # raises the out-of-range error
    round, purpose = (0, VOTE) if final else (round, BELIEF)
    key = (compiled, tuple(agents), tuple(tuple(m.facts) for m in transcript.messages), round, purpose)
    beliefs = _GROUPS.get(key)
    if beliefs is None:
        stated = compiled.stated(transcript)
        if len(agents) >= _VECTOR_MIN and all(agent.params.integrates_fully for agent in agents):
            n_messages = len(transcript.messages)
            beliefs = full_beliefs(agents, compiled, stated, n_messages, round, purpose,
                                   lambda rows: _noise_rows([agents[r] for r in rows], compiled, n_messages, round,
                                                            purpose))
        else:
            beliefs = [to_belief(compiled, probabilities(agent, compiled, transcript, stated, round, purpose))
                       for agent in agents]
        if len(_GROUPS) >= _GROUPS_SIZE:
            _GROUPS.clear()
        _GROUPS[key] = beliefs
    return beliefs.copy() if isinstance(beliefs, GroupBeliefs) else list(beliefs)


def _noise_rows(agents: list[SimAgent], compiled: CompiledTask, n_messages: int, round: int, purpose: int
                ) -> np.ndarray:
    """``[simulated_belief.logit_noise(agent, compiled, n_messages, round, purpose) for agent in agents]`` as one
    array, the same numbers hashed as arrays."""
    keys = mix_rows([a.seed for a in agents], compiled.key, [a.index for a in agents], n_messages, round, 0, purpose)
    return normal_rows(keys, compiled.k)


def sim_team(n_agents: int, params: SimParams | None = None, seed: int = 0) -> list[SimAgent]:
    """``n_agents`` simulated agents with the same parameters and seed (each agent's index varies its draws)."""
    return [SimAgent(i, params, seed) for i in range(n_agents)]


class SimTeam:
    """Simulated agents for any task (``for_task(task)``), with one seed and the same parameters, or parameters of
    their own (a heterogeneous team, the paper's §5.5.4 with simulated agents).

    Args:
        params: how the agents think and talk (every agent past ``per_agent``).
        seed: the agents' seed.
        per_agent: agent ``i`` uses ``per_agent[i]`` (``None`` or empty: every agent uses ``params``).
    """

    is_simulated = True

    def __init__(self, params: SimParams | None = None, seed: int = 0, per_agent: list[SimParams] | None = None):
        self.params = params or SimParams()
        self.seed = int(seed)
        self.per_agent = list(per_agent or [])

    def __repr__(self) -> str:
        extra = f", per_agent={self.per_agent}" if self.per_agent else ""
        return f"SimTeam(params={self.params}, seed={self.seed}{extra})"

    def params_of(self, index: int) -> SimParams:
        """The parameters of agent ``index``."""
        return self.per_agent[index] if index < len(self.per_agent) else self.params

    def for_task(self, task: HiddenProfileTask) -> list[SimAgent]:
        """One agent per agent of ``task``."""
        if not self.per_agent:
            return sim_team(task.n_agents, self.params, self.seed)
        return [SimAgent(i, self.params_of(i), self.seed) for i in range(task.n_agents)]

    def __call__(self, task: HiddenProfileTask) -> list[SimAgent]:
        """``team(task)``: the same as :meth:`for_task` (a team is the ``task -> agents`` callable programs take)."""
        return self.for_task(task)
