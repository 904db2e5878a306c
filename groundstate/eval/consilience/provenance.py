"""What produced a hidden-profile result, in words every table, chart and terminal summary can carry.

Results of simulated agents are properties of the agents' parameters as much as of the methods compared: an
attention limit of 3 facts can turn "Consilience beats Full-Info" around, and on tasks whose per-fact support is
the hidden-profile design default (built from the correct answer, see
:func:`~groundstate.programs.consilience.annotate.design_support`) Full-Info is right by construction. A reader of
a table must therefore see which agents produced it. This module turns the agents description a run config holds
(``config["options"]["agents"]``, written by :func:`~groundstate.eval.consilience.tasks.prepare_team`) into that
text, so every report says it the same way:

- :func:`describe_agents`: one line, e.g. ``simulated agents, preset 'limited' (attention 3 facts, salience 0.5,
  recency 0.8, weight noise 0.3); support: the tasks' own`` or ``LM agents: openai/gpt-4o``; a heterogeneous
  simulated team names each agent's preset (``agent 0 'ideal', agent 1 'limited'``, ``*`` marking a preset with a
  value changed), then the preset of any other agent;
- :func:`is_fixed_by_construction` and :data:`FIXED_BY_CONSTRUCTION`: the warning a title carries when simulated
  agents ran on design-default support; :func:`warned_title` appends it;
- :func:`provenance`: both as a JSON-able mapping (for the JSON files beside a table);
- :func:`agents_of`: the agents description of a run config, or ``None`` for a run that is not a hidden-profile run;
- :func:`runs_provenance`: the same for the stored configs of several runs (the cells of one table).

The preset is not stored in the run config (its parameters are, and they make the run id), so the label names the
preset closest to the stored parameters (the fewest differing fields; the first preset of
:data:`~groundstate.programs.consilience.simulated.SIM_PRESETS` on a tie) and marks every value that differs from
it as ``[preset: value]``. The four limits of integration (attention, salience, recency, weight noise) are always
listed; the other parameters only when they differ from the preset.

Stored configs may come from anywhere: unknown fields are ignored, and every value is shown as a short one-line
text, never trusted as a number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groundstate.errors import one_line
from groundstate.programs.consilience.simulated import SIM_PRESETS

FIXED_BY_CONSTRUCTION = "support derived from the answer (design default): results fixed by construction"
"""The warning of results from simulated agents whose per-fact support is the hidden-profile design default."""

LIMITS: tuple[str, ...] = ("attention", "salience", "recency", "weight_noise")
"""The simulated agents' limits of integration, always named."""

OTHERS: tuple[str, ...] = ("beta", "noise", "recall", "shared_bias", "facts_per_message")
"""The other simulated-agent parameters, named when they differ from the preset."""


def agents_of(config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The agents description of a run config (``options.agents`` with a ``kind``), or ``None`` when the config
    describes no hidden-profile agents (any other run, or a malformed config)."""
    options = config.get("options") if isinstance(config, Mapping) else None
    agents = options.get("agents") if isinstance(options, Mapping) else None
    return agents if isinstance(agents, Mapping) and agents.get("kind") in ("sim", "lm") else None


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return one_line(repr(value), 24)
    return f"{value:g}"


def _value(name: str, value: Any) -> str:
    if name == "attention":
        if value is None:
            return "unlimited"
        return f"{_number(value)} fact{'' if value == 1 else 's'}"
    return _number(value)


def preset_of(params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The preset closest to ``params`` (a stored ``SimParams``) and the fields whose value differs from it,
    ``{field: preset's value}``; only the fields of :data:`LIMITS` and :data:`OTHERS` are compared."""
    best: tuple[str, dict[str, Any]] | None = None
    for name, preset in SIM_PRESETS.items():
        differs = {f: getattr(preset, f) for f in (*LIMITS, *OTHERS) if f in params and params[f] != getattr(preset, f)}
        if best is None or len(differs) < len(best[1]):
            best = (name, differs)
    assert best is not None  # SIM_PRESETS is never empty
    return best


def _support(support: Any) -> str:
    if not isinstance(support, Mapping):
        return ""
    own = support.get("own") if isinstance(support.get("own"), int) else 0
    source, tasks = support.get("source"), support.get("tasks")
    if source == "design":
        where = "the hidden-profile design default"
    elif source == "file":
        where = f"the annotation {one_line(support.get('file'), 60)}"
    else:
        return "support: the tasks' own"
    count = f" for {_number(tasks)} task(s)" if isinstance(tasks, int) else ""
    return f"support: {where}{count}" + (f", the tasks' own for {own}" if own else "")


def _lm_models(agents: Mapping[str, Any], lm: Mapping[str, Any] | None) -> str:
    config = agents.get("lm_config") if isinstance(agents.get("lm_config"), Mapping) else {}
    default = config.get("default") if isinstance(config.get("default"), Mapping) else lm
    shown = [one_line((default or {}).get("model") or "unknown", 80)]
    roles = config.get("roles") if isinstance(config.get("roles"), Mapping) else {}
    per_agent = [f"{one_line(pattern, 40)}: {one_line(entry.get('model'), 80)}" for pattern, entry in roles.items()
                 if str(pattern).startswith(("agent", "*")) and isinstance(entry, Mapping)]
    if per_agent:
        shown = [f"{shown[0]} (default)", *per_agent]
    return ", ".join(shown)


def describe_agents(agents: Mapping[str, Any] | None, lm: Mapping[str, Any] | None = None) -> str:
    """One line naming who discussed: the simulated agents' preset, their limits of integration (and any other
    parameter that differs from the preset) and where their support came from, or the LM agents' models.

    Args:
        agents: an agents description (``config["options"]["agents"]`` of a hidden-profile run, or the ``agents``
            of a :class:`~groundstate.eval.consilience.tasks.HiddenSetup`).
        lm: the run's LM description (``config["lm"]``), the LM agents' model when no LM configuration names one.

    Returns:
        The label; ``""`` when ``agents`` describes no agents. It is one line (no control characters) whatever
        the description holds.
    """
    if not isinstance(agents, Mapping):
        return ""
    if agents.get("kind") == "lm":
        return f"LM agents: {_lm_models(agents, lm)}"
    if agents.get("kind") != "sim":
        return ""
    params = agents.get("params") if isinstance(agents.get("params"), Mapping) else {}
    name, differs = preset_of(params)
    shown = []
    for field in (*LIMITS, *(f for f in OTHERS if f in differs)):
        if field not in params:
            continue
        text = f"{field.replace('_', ' ')} {_value(field, params[field])}"
        if field in differs:
            text += f" [preset: {_value(field, differs[field])}]"
        shown.append(text)
    preset = f"preset '{name}' ({', '.join(shown)})"
    label = f"simulated agents, {preset}"
    per_agent = agents.get("per_agent")
    if isinstance(per_agent, list) and per_agent:
        team = ", ".join(f"agent {i} '{_preset_label(p)}'" for i, p in enumerate(per_agent[:12]))
        more = f" and {len(per_agent) - 12} more" if len(per_agent) > 12 else ""
        label = f"simulated agents, a heterogeneous team: {team}{more} (any other agent: {preset})"
    support = _support(agents.get("support"))
    return label + (f"; {support}" if support else "")


def _preset_label(params: Any) -> str:
    """One agent's preset as a heterogeneous team's label names it: the closest preset, ``*`` when some value
    differs from it."""
    if not isinstance(params, Mapping):
        return "unknown"
    name, differs = preset_of(params)
    return name + ("*" if differs else "")


def is_fixed_by_construction(agents: Mapping[str, Any] | None) -> bool:
    """Whether simulated agents ran on the hidden-profile design default support for some task: that support is
    built from each task's correct answer, so the protocols' accuracies follow from it by construction."""
    if not isinstance(agents, Mapping) or agents.get("kind") != "sim":
        return False
    support = agents.get("support")
    return isinstance(support, Mapping) and support.get("source") == "design"


def warned_title(title: str, agents: Mapping[str, Any] | None) -> str:
    """``title``, followed by :data:`FIXED_BY_CONSTRUCTION` when :func:`is_fixed_by_construction`."""
    return f"{title}: {FIXED_BY_CONSTRUCTION}" if is_fixed_by_construction(agents) else title


def provenance(agents: Mapping[str, Any] | None, lm: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The label and the warning as JSON-able data: ``{"agents": describe_agents(...), "simulated": bool,
    "preset": name or None, "fixed_by_construction": bool, "warning": FIXED_BY_CONSTRUCTION or None}``."""
    simulated = isinstance(agents, Mapping) and agents.get("kind") == "sim"
    params = agents.get("params") if simulated and isinstance(agents.get("params"), Mapping) else None
    fixed = is_fixed_by_construction(agents)
    return {"agents": describe_agents(agents, lm), "simulated": simulated,
            "preset": preset_of(params)[0] if params is not None else None, "fixed_by_construction": fixed,
            "warning": FIXED_BY_CONSTRUCTION if fixed else None}


def runs_provenance(configs: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """What produced the runs of one table, from their stored configs: ``{"agents": [distinct labels, in order],
    "simulated": any simulated, "fixed_by_construction": any on design-default support, "warning":
    FIXED_BY_CONSTRUCTION or None}``. Configs of runs without hidden-profile agents add nothing."""
    labels: list[str] = []
    simulated = fixed = False
    for config in configs:
        agents = agents_of(config)
        if agents is None:
            continue
        label = describe_agents(agents, config.get("lm") if isinstance(config.get("lm"), Mapping) else None)
        if label not in labels:
            labels.append(label)
        simulated = simulated or agents.get("kind") == "sim"
        fixed = fixed or is_fixed_by_construction(agents)
    return {"agents": labels, "simulated": simulated, "fixed_by_construction": fixed,
            "warning": FIXED_BY_CONSTRUCTION if fixed else None}
