"""``groundstate consilience table`` as a front-end of the experiment layer: an experiment spec built in memory
from the command's options, its cells run and tabulated by :mod:`groundstate.eval.experiments`.

:func:`table_spec` turns the evaluation settings into a :class:`~groundstate.eval.experiments.spec.Spec` with one
axis, ``method``: the reference protocols, then the controllers, in the paper's order (Hidden-Pre, Hidden-Post,
Full-Info, Rules, MLP, LLM, LLM+Vote). Each value is the task ``consilience`` with exactly the settings
``consilience evaluate`` would give that program, so a cell's run is the run of exactly that program on those
tasks and agents (resumable; never "the newest run"). Under the HiddenBench preset, Hidden-Pre is a view of the
Hidden-Post run (its initial votes: HiddenBench records both in one discussion). With ``sensitivity``, the spec's
``[sensitivity]`` varies the simulated agents' attention limit (unlimited, 5, 3, 2 facts; same tasks and seeds).

:func:`tabulate` builds the table (:func:`~groundstate.eval.experiments.table.build_table`) and says what produced
it (:mod:`groundstate.eval.consilience.provenance`): the agents of the runs under the title (the table's
subtitle), the design-default warning in the title when simulated agents ran on support derived from the answer,
and, with the sensitivity rows, each attention limit's ordering of the methods and whether it holds
(:mod:`groundstate.eval.consilience.sensitivity`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.eval.consilience import sensitivity as sens
from groundstate.eval.consilience.provenance import agents_of, provenance, warned_title
from groundstate.eval.consilience.settings import AgentSettings, EvaluationSettings, ProgramSettings
from groundstate.eval.consilience.tables import CONTROLLER_NAMES, ORDER
from groundstate.eval.experiments.load import check_spec
from groundstate.eval.experiments.spec import SENSITIVITY, Spec

#: The reference protocols of each preset.
BASELINES = {"groundstate": ["hidden-pre", "hidden-post", "full-info"],
             "hiddenbench": ["hiddenbench", "hiddenbench-full"]}
METRICS = ("task_accuracy", "vote_accuracy", "messages", "words", "lm_calls")
LABELS = {"task_accuracy": "Task Acc.", "vote_accuracy": "Vote Acc.", "messages": "messages", "words": "words",
          "lm_calls": "LM calls/task"}
#: The protocols' rows: ``protocol -> [(key, label, note, from the initial votes)]``.
PROTOCOL_ROWS: dict[str, list[tuple[str, str, str, bool]]] = {
    "hidden-pre": [("hidden-pre", "Hidden-Pre", "", False)],
    "hidden-post": [("hidden-post", "Hidden-Post", "{rounds} rounds", False)],
    "full-info": [("full-info", "Full-Info", "", False)],
    "hiddenbench-pre": [("hiddenbench-pre", "Hidden-Pre", "HiddenBench", False)],
    "hiddenbench": [("hidden-pre", "Hidden-Pre", "the initial votes of the Hidden-Post run", True),
                    ("hiddenbench", "Hidden-Post", "HiddenBench round-robin, {rounds} rounds", False)],
    "hiddenbench-full": [("hiddenbench-full", "Full-Info", "HiddenBench, every fact, no discussion", False)],
}
DEFAULT_ROUNDS = {"hidden-post": 3, "hiddenbench": 15}


def _program_value(program: ProgramSettings) -> list[dict[str, Any]]:
    """The method axis values of one program (two for HiddenBench's discussion: its initial and final votes)."""
    from groundstate.eval.consilience.tasks import program_label  # noqa: PLC0415 (--help stays light)

    values = program.model_dump(include=program.model_fields_set, exclude={"seed"}, mode="json")
    if program.program in PROTOCOL_ROWS:
        rounds = program.rounds or DEFAULT_ROUNDS.get(program.program, 0)
        out = []
        for key, label, note, initial in PROTOCOL_ROWS[program.program]:
            if program.program == "hiddenbench-full" and program.full_discussion:  # HiddenBench's script discusses:
                rounds = program.rounds or DEFAULT_ROUNDS["hiddenbench"]  # the paper's Full-Info is its initial votes
                note, initial = "HiddenBench, every fact: the initial votes of a {rounds}-round discussion", True
            value = {"label": label, "key": key, "settings": values, "note": note.format(rounds=rounds) or None}
            if initial:  # a view of the same run: its initial votes, and no discussion figures
                value["metrics"] = {m: f"initial_{m}" for m in METRICS}
            out.append(value)
        return out
    name = program_label(program)
    base, _, rest = name.partition(" ")
    note = rest.strip("()[] ").replace("uncertified", "uncertified: no calibrator")
    return [{"label": CONTROLLER_NAMES.get(base, base), "key": program.program, "settings": values,
             "note": note or None}]


def title_of(settings: EvaluationSettings, preset: str = "groundstate", tasks: int | None = None) -> str:
    """The table's title: the task file, the agents, the protocols and (when known) the number of tasks."""
    protocols = "HiddenBench" if preset == "hiddenbench" else "groundstate"
    count = f", {tasks} tasks" if tasks is not None else ""
    return (f"{Path(settings.data).name}: task accuracy / vote accuracy ({settings.agents} agents, {protocols} "
            f"protocols{count})")


def table_spec(settings: EvaluationSettings, preset: str = "groundstate", sensitivity: bool = False) -> Spec:
    """The spec of ``consilience table``: one ``method`` value per program of ``settings`` (its baselines and
    controllers; the command gives the ``preset``'s protocols, :data:`BASELINES`, which the title names), in the
    paper's order; ``sensitivity`` adds the attention-limit cells.

    Raises:
        InputError: settings that do not make a valid spec, or a sensitivity the agents cannot take (one line).
    """
    programs = settings.programs()
    values = [v for program in programs for v in _program_value(program)]
    rank = {name: i for i, name in enumerate(ORDER)}
    values.sort(key=lambda v: rank.get(v["label"], len(ORDER)))  # stable: others after, as given
    raw: dict[str, Any] = {
        "experiment": {"name": "consilience-table", "title": title_of(settings, preset)},
        "defaults": {"task": "consilience", "seeds": [settings.seed]},
        "axes": {"method": values},
        "layout": {"rows": ["method"], "metrics": list(METRICS), "labels": LABELS,
                   "digits": {"task_accuracy": 3, "vote_accuracy": 3, "messages": 2, "words": 1, "lm_calls": 1}},
    }
    if sensitivity:
        raw["sensitivity"] = {k: list(v) for k, v in sens.ATTENTION_SENSITIVITY.items()}
        sens.sensitivity_variants(_agents(settings), raw["sensitivity"])  # a bad combination: one line, now
    spec = Spec.parse(raw, file="consilience table")
    spec.source = "consilience table"
    check_spec(spec)
    return spec


def _agents(settings: EvaluationSettings) -> dict[str, Any]:
    return settings.model_dump(include=set(AgentSettings.model_fields))


@dataclass
class ConsilienceTable:
    """A built table with what produced it: ``table`` (:class:`~groundstate.eval.experiments.table.Table`, its
    title warned and its subtitle the agents), ``provenance``
    (:func:`~groundstate.eval.consilience.provenance.provenance` of the base cells' runs) and the ``sensitivity``
    rows (:func:`~groundstate.eval.consilience.sensitivity.sensitivity_rows`; empty without a sensitivity)."""

    table: Any
    provenance: dict[str, Any]
    sensitivity: list[dict[str, Any]] = field(default_factory=list)

    @property
    def uncertified(self) -> list[str]:
        """The controllers that ran without a calibrator."""
        return [v.label for v in self.table.spec.axis_values()["method"] if v.note and "uncertified" in v.note]

    def extra_json(self) -> dict[str, Any]:
        """What the JSON file carries besides the table: the provenance and the sensitivity rows."""
        out: dict[str, Any] = {"provenance": self.provenance}
        if self.sensitivity:
            out["sensitivity"] = {"rows": self.sensitivity, "conclusion": sens.holds_line(self.sensitivity)}
        return out

    def extra_markdown(self) -> str:
        """The sensitivity section under the table (empty without a sensitivity)."""
        return sens.sensitivity_markdown(self.sensitivity, self.provenance["agents"]) if self.sensitivity else ""


def _tasks(table: Any) -> int:
    """How many tasks the base cells ran on (measured and failed)."""
    counts = [int((v.entry or {}).get("n") or 0) + int((v.entry or {}).get("failed") or 0)
              for row in table.rows if row.keys.get(SENSITIVITY, "base") == "base"
              for (_, metric), v in row.values.items() if metric == "task_accuracy"]
    return max(counts, default=0)


def tabulate(spec: Spec, settings: EvaluationSettings, run: Any, *, preset: str = "groundstate",
             lms: Callable[[Any], tuple[Any, Any]] | None = None,
             note: Callable[[str], None] | None = None) -> ConsilienceTable:
    """The table of ``spec`` (:func:`table_spec` of ``settings`` and ``preset``) from the runs under ``run.out``,
    with its provenance; its title counts the tasks the base cells ran on. No LM is called.

    Raises:
        ConfigError: a stored run that differs from its cell, or a cell two stored runs claim (one line).
    """
    from groundstate.eval.experiments.table import build_table  # noqa: PLC0415 (--help stays light)

    table = build_table(spec, run, lms=lms, note=note)
    table.show_paper = False
    base = [c for label, c in table.configs.items() if f"{SENSITIVITY}:" not in label or
            f"{SENSITIVITY}:base" in label]
    config = base[0] if base else {}
    about = provenance(agents_of(config), config.get("lm"))
    title = title_of(settings, preset, _tasks(table))
    table.spec = spec.model_copy(update={"experiment": spec.experiment.model_copy(
        update={"title": warned_title(title, agents_of(config))})})
    table.subtitle = about["agents"] or None
    return ConsilienceTable(table, about, sensitivity_rows(table, settings))


def sensitivity_rows(table: Any, settings: EvaluationSettings) -> list[dict[str, Any]]:
    """The sensitivity rows of a built table: per varied value, each method's task accuracy and the ordering of
    the methods (:func:`~groundstate.eval.consilience.sensitivity.sensitivity_rows`); empty without a sensitivity."""
    if not table.spec.sensitivity:
        return []
    variants = sens.sensitivity_variants(_agents(settings), table.spec.sensitivity)
    results: list[tuple[Any, Sequence[Mapping[str, Any]]]] = []
    for variant in variants:
        rows = [{"method": row.labels["method"], "task_accuracy": row.values[(0, "task_accuracy")].entry}
                for row in table.rows if row.keys[SENSITIVITY] == variant.label]
        results.append((variant, rows))
    return sens.sensitivity_rows(results)
