"""HiddenBench's own discussion protocol, as its public simulation script (``sim.py`` of ``Yassellee/HiddenBench``)
runs it: the steps behind the ``hiddenbench-pre``, ``hiddenbench`` and ``hiddenbench-full`` protocols of
:mod:`groundstate.programs.consilience.protocols` (which turns a :class:`HiddenBenchOutcome` into its result).

Step by step (each is what sim.py does unless said otherwise):

1. **Clue holders.** The task's private clues are dealt to the agents afresh for every discussion: a seeded
   permutation of ``task.private`` (sim.py reshuffles them with Python's global generator on every run). Agents
   speak in their fixed order 0..n-1, so the deal also decides whose clue is voiced first. ``holders[i]`` records
   which task agent's facts agent ``i`` held. ``fixed_holders=True`` keeps every agent on its own facts.
2. **Special agents.** ``ceil(n * special_share)`` agents, drawn with a seed, get ``special_prompt`` as an extra
   instruction, when their conversation starts and again at each later turn (sim.py puts it in the system prompt
   and in every turn's prompt except the first speaker's first one). sim.py takes the share and the text from its
   configuration file, which is not published, so there is no default text and the default share is 0 (no
   special agent); the mechanism is there for studies that set both.
3. **Facts.** The shared facts and the agent's own clue in one list, shuffled per agent and numbered "Fact k",
   with the note that their order means nothing.
4. **Initial vote.** Before any message, each agent chooses an option and gives a rationale from its facts alone.
   The prompt asks only for a decision (sim.py's first vote prompt mentions no discussion; it does not say one is
   over). These votes are Hidden-Pre.
5. **Discussion.** ``rounds`` rounds, every agent speaking once per round in the order 0..n-1. In round 1 a
   speaker is reminded of its initial vote *and its rationale*, and shown the messages of this round so far (the
   first speaker is told it speaks first); from round 2 on it is shown the latest message of every other agent,
   starting with the next one in order.
6. **Chat.** Each LM agent keeps its own multi-turn conversation (DSPy's ``History``: each earlier prompt a user
   turn, each of its own messages an assistant turn), as sim.py's agents keep their chat history, so whatever
   it was shown stays before it. Messages are kept whole: sim.py asks for one or two sentences and cuts nothing.
7. **Final vote.** After the last round each agent, at the end of its conversation, is shown the last round's
   messages (its own included) and chooses an option with a rationale.
8. **Answer.** Plurality, a tie going to the tied option whose first vote came earliest in agent order (the
   caller's ``tie="first-vote"``; sim.py takes the first most-counted answer of a tally kept in voting order).

**Full information** (``hiddenbench-full``): every agent holds every clue. Here the Consilience paper and sim.py
disagree, and the paper is followed: its Full-Info is "agents receive all evidence but do not discuss" (§4.1), so
by default the agents cast the initial vote only. sim.py's full-information condition holds the whole
discussion; ``full_discussion=True`` runs it (its answer is then the final vote, and its initial votes are the
paper's Full-Info).

**Rounds.** sim.py reads the number of rounds from its unpublished configuration file.
:data:`HIDDENBENCH_ROUNDS` (15) is the number HiddenBench's paper (arXiv 2505.11556) runs, as a public
reimplementation of it (``jonradoff/hiddenbench``) states; it is not in the published code.

**Where this differs from sim.py, on purpose.** A vote is the letter of an option, the options shown as
``A: ...`` when voting (sim.py asks for the answer's text: letters can be read back without guessing); like
sim.py, the discussion turns do not list the options and agents call each other "Person k" (1-based). HiddenBench
asks for no confidence, so a vote is recorded with all weight on the voted option (confidence 1), and an answer
naming no option counts for the first option, as :func:`~groundstate.programs.consilience.agents.repair_belief`
reads any unreadable vote. Simulated agents hold no conversation: they take the same steps seeing the messages
they were shown (``memory=True`` keeps what they saw; ``False``: only their current turn's messages).
``flat=True`` gives LM agents groundstate's earlier presentation instead of the chat: one transcript of what
they were shown, messages cut to two sentences / 300 characters, a note with the initial vote but not its
rationale, and the final-vote prompt (which says the discussion is over) for both votes.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

from groundstate.concurrency import thread_map
from groundstate.programs.common import as_data
from groundstate.programs.consilience.agents import option_labels, options_block, repair_belief, specialize
from groundstate.records import Belief, HiddenProfileTask, Message, Transcript
from groundstate.signatures.discussion import HiddenBenchTurn, HiddenBenchVote

HIDDENBENCH_ROUNDS = 15
"""HiddenBench's discussion rounds (see the module docstring)."""

FIRST_SPEAKER = "(nobody has spoken yet: you are the first to speak)"
"""What the first speaker of round 1 is shown instead of messages."""


@dataclass(frozen=True)
class HiddenBenchOptions:
    """How a HiddenBench discussion departs from sim.py's defaults (see the module docstring).

    Attributes:
        fixed_holders: every agent keeps its own clue (sim.py deals them afresh every run).
        special_share: the share of agents given ``special_prompt`` (rounded up, as sim.py does); 0 by default.
        special_prompt: the special agents' extra instruction (needed when ``special_share`` > 0).
        full_discussion: ``hiddenbench-full`` holds the discussion as sim.py does (the paper's Full-Info does not).
        flat: LM agents get groundstate's earlier single-transcript presentation instead of the chat.
        memory: simulated agents (and ``flat`` LM agents) keep the messages they were shown.
    """

    fixed_holders: bool = False
    special_share: float = 0.0
    special_prompt: str | None = None
    full_discussion: bool = False
    flat: bool = False
    memory: bool = True

    def __post_init__(self):
        share = self.special_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise ValueError(f"special_share must be a number from 0 to 1, got {share!r}")
        if share > 0 and not (self.special_prompt or "").strip():
            raise ValueError("special agents need their extra instruction: give special_prompt with special_share")

    def describe(self) -> dict[str, Any]:
        """The options as data (for run configurations)."""
        return asdict(self)


@dataclass
class HiddenBenchOutcome:
    """What one HiddenBench discussion produced: the initial votes (and rationales), the final votes (``None``
    without discussion), the public transcript, the rounds played, ``holders`` (agent ``i`` held the private facts
    of task agent ``holders[i]``) and the special agents."""

    initial: list[Belief]
    initial_rationales: list[str | None]
    votes: list[Belief] | None
    rationales: list[str | None] | None
    transcript: Transcript
    rounds: int
    holders: list[int]
    special: list[int]


def deal(task: HiddenProfileTask, seed: int, fixed: bool = False) -> tuple[HiddenProfileTask, list[int]]:
    """``(task as dealt, holders)``: the task's private facts dealt to its agents by a permutation seeded by
    ``(seed, task id)`` (the identity when ``fixed``); agent ``i`` of the dealt task holds
    ``task.private[holders[i]]``."""
    holders = list(range(task.n_agents))
    if not fixed:
        random.Random(f"hiddenbench-holders:{seed}:{task.id}").shuffle(holders)
    if holders == sorted(holders):
        return task, holders
    return task.model_copy(update={"private": [list(task.private[j]) for j in holders]}), holders


def special_agents(n: int, share: float, seed: int, task_id: str) -> list[int]:
    """The special agents of a discussion: ``ceil(n * share)`` of the ``n`` agents (at most ``n``), drawn with a
    seed, in order."""
    count = min(n, math.ceil(n * share))
    return sorted(random.Random(f"hiddenbench-special:{seed}:{task_id}").sample(range(n), count))


def shown_lines(messages: Sequence[Message]) -> str:
    """Messages as HiddenBench shows them: one per line, ``Person k: text`` (``k`` = speaker + 1)."""
    return "\n".join(f"Person {m.speaker + 1}: {m.text}" for m in messages)


@functools.lru_cache(maxsize=8)
def _turn_history(base: type) -> type:
    """``base`` (a DSPy adapter class) formatting a conversation's history as the turns it was held in
    (:class:`HiddenBenchTurn`), whatever the signature of the current request (a vote's turns are turns)."""
    turns = HiddenBenchTurn.delete("history")

    class TurnHistory(base):
        def format_conversation_history(self, signature, history_field_name, inputs):
            return super().format_conversation_history(turns, history_field_name, inputs)

    TurnHistory.__name__ = TurnHistory.__qualname__ = f"TurnHistory{base.__name__}"
    return TurnHistory


def _adapter() -> Any:
    """The adapter in use, as a copy that formats the history as turns (:func:`_turn_history`). Its fallback to a
    JSON adapter is off (that adapter would format the history by the current signature); an answer that does not
    parse is asked for once more instead (:meth:`HiddenBenchChat.vote`)."""
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    cls = _turn_history(type(adapter))
    copy = cls.__new__(cls)
    copy.__dict__.update(vars(adapter))
    if getattr(copy, "use_json_adapter_fallback", False):
        copy.use_json_adapter_fallback = False  # a fresh JSONAdapter would format the history as the vote's turns
    return copy


class HiddenBenchChat(dspy.Module):
    """The LM agents' two predictors in HiddenBench's protocol: ``turn`` (:class:`HiddenBenchTurn`, one message)
    and ``ballot`` (:class:`HiddenBenchVote`, a vote and its rationale). They run under each agent's own LM
    (:meth:`~groundstate.programs.consilience.agents.LMAgent.lm_context`), so a heterogeneous team keeps its LMs."""

    def __init__(self):
        super().__init__()
        self.turn = dspy.Predict(HiddenBenchTurn)
        self.ballot = dspy.Predict(HiddenBenchVote)

    def say(self, agent: Any, inputs: dict[str, str], history: Sequence[dict[str, str]]) -> str:
        """The agent's message for a turn with ``inputs``, after ``history``."""
        out = self._call(agent, self.turn, None, {**inputs, "history": dspy.History(messages=list(history))})
        return " ".join(str(out.get("message") or "").split())

    def vote(self, agent: Any, task: HiddenProfileTask, inputs: dict[str, str], history: Sequence[dict[str, str]]
             ) -> tuple[Belief, str]:
        """``(vote, rationale)`` of the agent asked with ``inputs`` after ``history`` (see the module docstring for
        how a vote becomes a belief)."""
        out = self._call(agent, self.ballot, tuple(option_labels(task.options)),
                         {**inputs, "options": options_block(task.options),
                          "history": dspy.History(messages=list(history))})
        belief = repair_belief(task.options, None, out.get("vote"), 1.0)
        return belief, " ".join(str(out.get("rationale") or "").split())

    @staticmethod
    def _call(agent: Any, predictor: dspy.Predict, labels: tuple[str, ...] | None, inputs: dict[str, Any]
              ) -> dspy.Prediction:
        """``predictor`` under the agent's LM and a turn-formatting adapter; a vote's outputs bound to the task's
        letters (:func:`specialize`), asked once more unbound if the answer does not parse under them."""
        with agent.lm_context():
            with dspy.context(adapter=_adapter()):
                bound = specialize(predictor.signature, labels) if labels else predictor.signature
                if bound is predictor.signature:
                    return predictor(**inputs)
                try:
                    return predictor(**inputs, signature=bound)
                except AdapterParseError:
                    return predictor(**inputs)


class ChatSession:
    """One LM agent's side of a HiddenBench discussion: its conversation so far (see the module docstring)."""

    def __init__(self, chat: HiddenBenchChat, agent: Any, task: HiddenProfileTask, seed: int,
                 instruction: str | None):
        self.chat, self.agent, self.task, self.instruction = chat, agent, task, instruction
        facts = task.facts_of(agent.index)
        random.Random(f"hiddenbench-facts:{seed}:{task.id}:{agent.index}").shuffle(facts)
        self.opening = {"scenario": as_data(task.description),
                        "facts": "\n".join(f"Fact {k}: {as_data(f)}" for k, f in enumerate(facts, start=1)) or "(none)"}
        if instruction:
            self.opening["instruction"] = instruction
        self.history: list[dict[str, str]] = []
        self.initial: tuple[Belief, str] | None = None
        self.rationale: str | None = None

    def initial_vote(self) -> Belief:
        self.initial = self.chat.vote(self.agent, self.task, dict(self.opening), [])
        self.rationale = self.initial[1]
        return self.initial[0]

    def speak(self, shown: Sequence[Message], round: int) -> Message:
        turn: dict[str, str] = {} if self.history else dict(self.opening)
        if not self.history and self.initial is not None:
            belief, why = self.initial
            label = option_labels(self.task.options)[self.task.options.index(belief.vote)]
            turn["initial_vote"] = f"{label}: {as_data(belief.vote)}. Your reason: {as_data(why) or '(none given)'}"
        elif self.history and self.instruction:
            turn["instruction"] = self.instruction
        turn["messages"] = shown_lines(shown) if shown else FIRST_SPEAKER
        text = as_data(self.chat.say(self.agent, turn, self.history))
        self.history.append({**turn, "message": text})
        return Message(speaker=self.agent.index, round=round, text=text, words=len(text.split()))

    def final_vote(self, shown: Sequence[Message]) -> Belief:
        belief, self.rationale = self.chat.vote(self.agent, self.task, {"messages": shown_lines(shown)}, self.history)
        return belief


class ViewSession:
    """A HiddenBench discussion for an agent that holds no conversation (simulated agents; LM agents with
    ``flat``): before each call it is given the transcript of what it was shown (with ``memory``, everything it
    was shown so far and its own messages, in the order it saw them)."""

    def __init__(self, agent: Any, task: HiddenProfileTask, seed: int, memory: bool):
        self.agent, self.task, self.seed, self.memory = agent, task, seed, memory
        self.seen: list[Message] = []
        self.rationale: str | None = None
        self.speaker = self._presented()

    def _presented(self, note: str | None = None) -> Any:
        present = getattr(self.agent, "with_presentation", None)
        return self.agent if present is None else present("shuffled", seed=self.seed, note=note)

    def _show(self, shown: Sequence[Message]) -> Transcript:
        if not self.memory:
            self.seen = []
        self.seen.extend(m for m in shown if not any(m is s for s in self.seen))
        return Transcript.model_construct(messages=list(self.seen))

    def initial_vote(self) -> Belief:
        belief = self.speaker.vote(self.task, Transcript.model_construct(messages=[]))
        self.speaker = self._presented(f"Before the discussion you voted for {belief.vote}.")
        return belief

    def speak(self, shown: Sequence[Message], round: int) -> Message:
        message = self.speaker.speak(self.task, self._show(shown), None, round)
        if self.memory:
            self.seen.append(message)
        return message

    def final_vote(self, shown: Sequence[Message]) -> Belief:
        return self.speaker.vote(self.task, self._show(shown))


def _each(fn: Callable[[Any], Any], sessions: Sequence[Any], threads: int | None) -> list[Any]:
    """``fn`` over the sessions: inline for simulated agents (or ``threads=1``), otherwise on threads."""
    if threads == 1 or all(getattr(s.agent, "is_simulated", False) for s in sessions):
        return [fn(s) for s in sessions]
    return thread_map(fn, list(sessions), max_workers=threads or len(sessions))


def discuss(task: HiddenProfileTask, agents: Sequence[Any], rounds: int, *, full_info: Callable | None = None,
            threads: int | None = None, seed: int = 0, options: HiddenBenchOptions | None = None,
            chat: HiddenBenchChat | None = None) -> HiddenBenchOutcome:
    """One HiddenBench discussion of ``task`` (see the module docstring): the initial votes, then ``rounds`` rounds
    (none when 0) and the final votes.

    Args:
        task: the task (``full_info(task)`` is the task every agent votes on when given: the full-information
            condition; its agents then hold every fact).
        agents: one agent per task agent, agent ``i`` at position ``i``.
        rounds: discussion rounds (0: the initial votes only).
        threads: concurrent votes (default: one per agent; simulated agents vote inline).
        seed: the deal of the clues, the special agents and each agent's order of its facts.
        options: :class:`HiddenBenchOptions` (default: sim.py's behaviour).
        chat: the LM agents' predictors (default: a fresh :class:`HiddenBenchChat`).
    """
    options = options or HiddenBenchOptions()
    dealt, holders = deal(task, seed, options.fixed_holders)
    if full_info is not None:
        dealt = full_info(dealt)
    n = len(agents)
    special = special_agents(n, options.special_share, seed, task.id) if options.special_share else []
    chat = chat or HiddenBenchChat()
    sessions = [ChatSession(chat, agent, dealt, seed, options.special_prompt if i in special else None)
                if hasattr(agent, "lm_context") and not options.flat else
                ViewSession(agent, dealt, seed, options.memory) for i, agent in enumerate(agents)]
    initial = _each(lambda s: s.initial_vote(), sessions, threads)
    initial_why = [s.rationale for s in sessions]
    public: list[Message] = []
    latest: list[Message | None] = [None] * n
    for round_ in range(1, rounds + 1):
        start = len(public)
        for i, session in enumerate(sessions):
            shown = public[start:] if round_ == 1 else [m for k in range(1, n) if (m := latest[(i + k) % n])]
            message = session.speak(shown, round_)
            public.append(message)
            latest[i] = message
    transcript = Transcript.model_construct(messages=public)
    if not rounds:
        return HiddenBenchOutcome(initial, initial_why, None, None, transcript, 0, holders, special)
    last = public[-n:]
    votes = _each(lambda s: s.final_vote(last), sessions, threads)
    return HiddenBenchOutcome(initial, initial_why, votes, [s.rationale for s in sessions], transcript, rounds,
                              holders, special)
