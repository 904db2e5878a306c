"""Which agents a team is, as data: what a Consilience calibration records and checks (the paper calibrates per
agent model, appendix: "calibration is performed separately for every configuration ... including the ...
agent model").

:func:`agents_identity` describes a team so that two teams get the same description exactly when they behave
alike:

- simulated agents (:class:`~groundstate.programs.consilience.simulated.SimTeam`): ``{"kind": "sim", "params":
  {...}}``, every :class:`~groundstate.programs.consilience.simulated.SimParams` field (so the preset and its limits
  of integration by value: a preset is a name for a set of values, and ``--sim-preset ideal`` with the limits of
  ``limited`` given one by one *is* ``limited``), plus ``"per_agent": [{...}, ...]`` when agents have parameters
  of their own (a heterogeneous team). The agents' seed is left out: a calibration is meant to hold for fresh
  discussions of the same agents, and another seed is exactly that.
- LM agents (:class:`~groundstate.programs.consilience.agents.LMTeam`): ``{"kind": "lm", "default": {...},
  "roles": {pattern: {...}}}``, the LM every agent role resolves to: the configuration's default and each
  ``[roles.<pattern>]`` that can match an agent role (``agent.<i>``), each as its model and the settings that
  change what it says (:data:`OUTPUT_SETTINGS`: decoding, and for the embedded model its file, context, threads,
  tensor type and engine revision), never where it is served (``api_base``), how long a call may take or any key.
  A team built from a list of LMs is described per agent (``agent.<i>``), one without LMs by DSPy's configured LM.

A team this module cannot describe (an :class:`LMTeam` built from a bare callable, any other callable) gives
``None``; a team may describe itself with an ``agents_identity()`` method.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import dspy

from groundstate.lm.specs import describe_lm
from groundstate.programs.consilience.agents import LMTeam
from groundstate.programs.consilience.simulated import SimTeam

OUTPUT_SETTINGS = frozenset({"model", "temperature", "max_tokens", "top_p", "model_path", "n_ctx", "threads",
                             "n_threads", "max_string_length", "max_items", "seed", "quant", "revision"})
"""The settings of an LM that change what it says (the others change where, how fast or how patiently)."""

AGENT_ROLES = ("agent", *(f"agent.{i}" for i in range(256)))
"""The agent roles a role pattern is tried against (agent ``i`` of a task uses role ``agent.i``)."""


def lm_entry(entry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An LM's described settings (``LMConfig.describe()`` entry or :func:`~groundstate.lm.specs.describe_lm`) cut to
    :data:`OUTPUT_SETTINGS`, the embedded engine's settings folded in (``n_threads`` read as ``threads``)."""
    if not isinstance(entry, Mapping):
        return None
    engine = entry.get("engine") if isinstance(entry.get("engine"), Mapping) else {}
    merged = {**{k: v for k, v in engine.items() if k != "runtime"}, **entry}
    if "n_threads" in merged:
        merged.setdefault("threads", merged.pop("n_threads"))
    return {k: merged[k] for k in sorted(merged) if k in OUTPUT_SETTINGS and merged[k] is not None}


def applies_to_agents(pattern: str) -> bool:
    """Whether an LM configuration's role pattern can match an agent's role (``agent`` or ``agent.<i>``)."""
    return any(fnmatch.fnmatchcase(role, pattern) for role in AGENT_ROLES)


def _lm_team(team: LMTeam) -> dict[str, Any] | None:
    config = getattr(team, "lm_config", None)
    if config is not None:
        described = config.describe()
        return {"kind": "lm", "default": lm_entry(described["default"]),
                "roles": {p: lm_entry(e) for p, e in described["roles"].items() if applies_to_agents(p)}}
    if team.lms is None or isinstance(team.lms, (list, tuple)):
        default = lm_entry(describe_lm(dspy.settings.lm))
        roles = {f"agent.{i}": lm_entry(describe_lm(lm)) for i, lm in enumerate(team.lms or ()) if lm is not None}
        return {"kind": "lm", "default": default, "roles": roles}
    return None


def agents_identity(team: Any) -> dict[str, Any] | None:
    """The description of ``team`` a calibration records (see the module docstring); ``None`` when it cannot be
    described."""
    own = getattr(team, "agents_identity", None)
    if callable(own):
        return own()
    if isinstance(team, SimTeam):
        described: dict[str, Any] = {"kind": "sim", "params": asdict(team.params)}
        per_agent = getattr(team, "per_agent", None)
        if per_agent:
            described["per_agent"] = [asdict(p) for p in per_agent]
        return described
    if isinstance(team, LMTeam):
        return _lm_team(team)
    return None
