"""Small pieces every OffQuery program shares: input coercion, prompt formatting, the output contract.

Every OffQuery program (ReGround and the collaboration baselines) takes ``agents`` (a list of
:class:`~groundstate.records.AgentEvidence` or dicts of the same shape), ``shared_context``, ``question`` and
``options`` (letter -> text) and returns :func:`offquery_prediction`'s ``dspy.Prediction`` with:

- ``misleading_agent``: the index of the agent judged misleading (``None`` = no agent; a list of indices
  in multi-misleading mode),
- ``state``: the information state the group carries forward (natural language),
- ``kept_facts`` / ``removed_facts``: the shared-context facts kept or dropped (empty for programs that do
  not filter facts),
- ``answer``: the chosen option letter,
- ``trace``: a JSON-able record of every step (who said what, each verdict).

Evidence text is always passed to predictors as a field value, never spliced into an instruction.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dspy

from groundstate.records import AgentEvidence, options_text
from groundstate.registry import register

logger = logging.getLogger(__name__)


def saveable(cls):
    """Class decorator: remember the keyword arguments a program was built with (``program.init_kwargs``) and
    register the class, so saved artifacts may name it.

    A saved program records its class and these arguments in its manifest, so
    :func:`groundstate.optimizers.artifacts.load_program` can rebuild it without pickles and then load its
    DSPy state. Only the outermost class's arguments are kept (a subclass calling ``super().__init__`` does
    not overwrite them). Arguments must be JSON-serializable. Decorating a class is the explicit registration
    that :mod:`groundstate.registry` asks for: a manifest can name it only in a process that imported it.
    """
    original = cls.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if "_init_kwargs" not in self.__dict__:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            self.__dict__["_init_kwargs"] = {k: v for k, v in list(bound.arguments.items())[1:]
                                            if signature.parameters[k].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                                    inspect.Parameter.VAR_KEYWORD)}
        original(self, *args, **kwargs)

    cls.__init__ = __init__
    cls.init_kwargs = property(lambda self: dict(self.__dict__.get("_init_kwargs", {})))
    return register(cls, kind="program")


async def acall_stage(stage: Any, *args: Any, **kwargs: Any) -> Any:
    """``await stage.acall(...)`` for a stage with an async path, else its ``forward`` on a worker thread.

    A program's stages can be swapped for the user's own modules (``rg.resolve = MyResolve()``); one that defines
    only ``forward`` (or is any callable) has no ``aforward`` for ``acall`` to await. Such a stage is called
    through ``dspy.asyncify``, which runs ``stage(...)`` on one of DSPy's worker threads (bounded by
    ``dspy.settings.async_max_workers``) with the caller's DSPy context (LM, adapter, callbacks, usage tracking).

    Guarantees: the same result as ``stage(*args, **kwargs)``; the event loop is never blocked by a synchronous
    stage.
    """
    if callable(getattr(stage, "aforward", None)) and callable(getattr(stage, "acall", None)):
        return await stage.acall(*args, **kwargs)
    return await dspy.asyncify(stage)(*args, **kwargs)


class ThreadedAsync:
    """Mixin giving a program whose stages are synchronous an ``aforward``, so ``await program.acall(...)`` (and
    ``dspy.streamify(program, is_async_program=True)``) work on it.

    ``aforward`` runs the program's own ``forward`` on one of DSPy's worker threads through ``dspy.asyncify``, with
    the caller's DSPy settings (LM, adapter, usage tracking, a streaming sink); the fan-outs inside ``forward``
    (:func:`~groundstate.concurrency.thread_map`) run as they do in a plain call. Guarantees: the same prediction
    as ``program(...)``; the event loop is never blocked by the program's LM calls.
    """

    async def aforward(self, *args: Any, **kwargs: Any) -> Any:
        return await on_worker_thread(type(self).forward, self, *args, **kwargs)  # via the class: DSPy warns on
        # a direct ``self.forward`` outside ``__call__``


async def on_worker_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` awaited on one of DSPy's worker threads (``dspy.asyncify``: an AnyIO worker thread,
    bounded by ``dspy.settings.async_max_workers``) with the caller's DSPy settings and context variables.

    An AnyIO thread rather than ``asyncio.to_thread``: under ``dspy.streamify`` the LM calls made there (and on the
    :func:`~groundstate.concurrency.thread_map` workers they start) reach the stream, which needs AnyIO's bridge to
    the event loop.
    """
    return await dspy.asyncify(functools.partial(fn, *args, **kwargs))()


_MARKER = re.compile(r"\[\[\s*##\s*([^\]#]*?)\s*##\s*\]\]")


def as_data(text: Any) -> str:
    """Text from agents or files, made safe to place in a prompt as a field value.

    DSPy's adapters delimit fields with markers like ``[[ ## answer ## ]]``. A marker inside evidence is
    rewritten to ``(## answer ##)`` so that neither the prompt nor an output that echoes the evidence can
    open or close a field. JSON fragments and instructions need no rewriting: they stay inside a field value
    (and, under ``JSONAdapter``, inside a JSON string), and every instruction says such text is data.
    """
    return _MARKER.sub(lambda m: f"(## {m.group(1).strip()} ##)", "" if text is None else str(text))


def coerce_agents(agents: Iterable[AgentEvidence | Mapping[str, Any]]) -> list[AgentEvidence]:
    """Accept agents as records or plain dicts (``agent``, ``role``, ``evidence``); evidence goes through
    :func:`as_data`."""
    out = []
    for i, agent in enumerate(agents):
        if isinstance(agent, AgentEvidence):
            data = agent.model_dump()
        elif isinstance(agent, Mapping):
            data = dict(agent)
            data.setdefault("agent", i)
        else:
            raise TypeError(f"agent {i} must be an AgentEvidence or a dict, not {type(agent).__name__}")
        data["evidence"] = as_data(data.get("evidence"))
        if data.get("role") is not None:
            data["role"] = as_data(data["role"])
        out.append(AgentEvidence(**data))
    return out


def format_options(options: Mapping[str, str] | str) -> str:
    """``A: ...`` lines (a string is passed through), as data (see :func:`as_data`)."""
    return as_data(options if isinstance(options, str) else options_text(dict(options)))


def format_sources(agents: Sequence[AgentEvidence], statements: Mapping[int, Sequence[str]] | None = None) -> str:
    """One block per agent: ``Agent 2 (laboratory):`` followed by its statements (or its evidence) as bullets."""
    blocks = []
    for agent in agents:
        lines = statements.get(agent.agent, []) if statements is not None else [agent.evidence]
        body = "\n".join(f"- {line}" for line in lines) if lines else "- (no statements)"
        blocks.append(f"{agent.name}:\n{body}")
    return "\n\n".join(blocks)


def bullet_list(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def offquery_prediction(*, misleading_agent: int | list[int] | None, state: str, answer: str | None,
                        kept_facts: Sequence[str] = (), removed_facts: Sequence[str] = (),
                        trace: Any = None, **extra: Any) -> dspy.Prediction:
    """The output every OffQuery program returns (see the module docstring)."""
    return dspy.Prediction(misleading_agent=misleading_agent, state=state, kept_facts=list(kept_facts),
                           removed_facts=list(removed_facts), answer=answer, trace=trace or {}, **extra)


def agent_index(value: Any, agents: Sequence[AgentEvidence]) -> int | None:
    """An agent index from an LM output (``2``, ``"2"``, ``"Agent 2"``, a role name); ``None`` if none matches."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < len(agents) else None
    if isinstance(value, str):
        text = value.strip().lower()
        match = re.search(r"-?\d+", text)
        if match:
            index = int(match.group())
            return index if 0 <= index < len(agents) else None
        for agent in agents:
            if agent.role and agent.role.lower() in text:
                return agent.agent
    return None


CONFIDENCE_TIE_TOLERANCE = 1e-9
"""Summed confidences closer than this count as tied (:func:`plurality`)."""


TIE_RULES: tuple[str, ...] = ("confidence", "first-vote")


def plurality(votes: Sequence[Any], options: Sequence[str] | None = None, tie: str = "confidence") -> Any:
    """The most frequent vote, the one group decision rule of every program.

    ``votes`` are plain values (an option letter, an agent index, ``None`` for "nothing") or beliefs with a
    ``vote`` and a ``confidence`` (:class:`~groundstate.records.Belief`). Ties among the most frequent values
    go, for beliefs, to the value whose voters' confidences sum highest (the Consilience paper's §3.1.5); what
    is still tied (within :data:`CONFIDENCE_TIE_TOLERANCE`) goes to the first tied value in ``options`` order
    when ``options`` is given, else to the tied value whose first vote came earliest.

    ``tie="first-vote"`` is HiddenBench's rule instead (its simulation takes the first most-counted value of a
    tally kept in voting order): a tie goes to the tied value whose first vote came earliest, confidence
    ignored.

    Args:
        votes: the ballots.
        options: the closed answer set, when there is one: every vote must be in it and an empty ballot is an
            error. Without it any hashable value can be voted (``None`` included) and an empty ballot has no
            winner (``None``).
        tie: ``confidence`` (the default, above) or ``first-vote``.

    Raises:
        ValueError: with ``options``, no votes or a vote that is not one of them.
    """
    if tie not in TIE_RULES:
        raise ValueError(f"unknown tie rule '{tie}'; choose from {', '.join(TIE_RULES)}")
    values = [getattr(v, "vote", v) for v in votes]
    weights = [float(getattr(v, "confidence", 0.0) or 0.0) for v in votes]
    if not values:
        if options is not None:
            raise ValueError("plurality needs at least one vote")
        return None
    if options is not None:
        bad = next((v for v in values if v not in options), _NO_VOTE)
        if bad is not _NO_VOTE:
            raise ValueError(f"vote '{bad}' is not one of the options {list(options)}")
    counts: dict[Any, int] = {}
    confidence: dict[Any, float] = {}
    for value, weight in zip(values, weights, strict=True):
        counts[value] = counts.get(value, 0) + 1
        confidence[value] = confidence.get(value, 0.0) + weight
    most = max(counts.values())
    if tie == "first-vote":
        return next(v for v in dict.fromkeys(values) if counts[v] == most)
    order = list(options) if options is not None else list(dict.fromkeys(values))
    tied = [v for v in order if counts.get(v) == most]
    best = max(confidence[v] for v in tied)
    return next(v for v in tied if confidence[v] >= best - CONFIDENCE_TIE_TOLERANCE)


_NO_VOTE = object()
