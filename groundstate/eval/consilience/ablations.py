"""The ablations of the Consilience paper's §5.5 and appendix, each run so its rows are comparable.

Every row is a full Consilience configuration *with its own calibrator*, fitted on the same calibration tasks
by :func:`~groundstate.optimizers.consilience.calibrate` for exactly that configuration (a removed action, a
feature set or a sampling rule changes the configuration, so the full method's thresholds do not apply to
it), and evaluated on the same held-out tasks:

- :func:`action_ablation` (Table 7): the full action set, then each action removed in turn, per controller;
  removing Vote is "NA" for controllers that never vote.
- :func:`feature_ablation` (Table 6): the MLP retrained on each feature set of :data:`FEATURE_SETS`
  (all, information only, belief + information, belief + cost, belief only), reporting success, mean
  communication cost ``C`` and mean final objective ``J`` at the end of the discussion.
- :func:`sampling_ablation` (Table 9): per controller, the executed action drawn uniformly from the conformal
  set at every round, reporting success and mean rounds per trial.
- the routing ablation (Table 8) is :func:`groundstate.eval.consilience.routing.routing_ablation`.

Runs are in memory, meant for simulated agents and small LM studies; for long LM runs use ``groundstate consilience
evaluate`` (durable) with a calibrator per configuration. Table 6's rows and Table 8 also run durably, one run per
row, as the registered tasks ``consilience-features`` and ``consilience-routing``
(:mod:`groundstate.eval.consilience.study_tasks`; the shipped specs ``consilience-table6`` and
``consilience-table8``), built from the same functions (:func:`feature_controller`, :func:`calibrated_program`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from groundstate.eval.report import pipe_lines
from groundstate.eval.stats import format_ci, wilson_ci
from groundstate.optimizers.consilience import Configuration, calibrate, check_config, train_controller
from groundstate.programs.consilience.control import ValueController
from groundstate.programs.consilience.state import FEATURE_SETS
from groundstate.records import ACTIONS, HiddenProfileTask


def summarize(predictions: Sequence[Any], tasks: Sequence[HiddenProfileTask]) -> dict[str, Any]:
    """Task accuracy (Wilson 95% interval), vote accuracy pooled over all votes (§4.2), mean messages, words,
    final ``C`` and final ``J`` of a set of Consilience predictions (or protocol predictions)."""
    hits = sum(bool(p.correct) for p in predictions)
    votes = [(v["vote"], t.correct) for p, t in zip(predictions, tasks, strict=True) for v in p.votes]
    good = sum(v == gold for v, gold in votes)
    finals = [getattr(p, "final_state", None) for p in predictions]
    out: dict[str, Any] = {
        "n": len(predictions),
        "task_accuracy": wilson_ci(hits, len(predictions)),
        "vote_accuracy": wilson_ci(good, len(votes)),
        "messages": float(np.mean([p.messages for p in predictions])) if predictions else None,
        "words": float(np.mean([p.words for p in predictions])) if predictions else None,
    }
    if finals and all(f is not None for f in finals):
        out["final_C"] = float(np.mean([f["C"] for f in finals]))
        out["final_J"] = float(np.mean([f["J"] for f in finals]))
    return out


def _run(program: Any, tasks: Sequence[HiddenProfileTask]) -> list[Any]:
    return [program(task=task) for task in tasks]


def calibrated_program(name: str, controller: Any, team: Callable, calibration: Sequence[HiddenProfileTask], *,
                       alpha: float = 0.1, max_rounds: int = 10, seed: int = 0, removed_actions: Sequence[str] = (),
                       program_options: Mapping[str, Any] | None = None, calibrator: Any = None,
                       **config: Any) -> tuple[Any, Any]:
    """``(program, calibrator)`` of one ablation row: ``controller``'s configuration calibrated on ``calibration``
    and the program that runs it with that calibrator. ``calibrator``: one already fitted for this row (a resumed
    run's), checked against the configuration (one line when it was fitted for another) instead of calibrating."""
    configuration = Configuration.of(name, controller, max_rounds=max_rounds, removed_actions=tuple(removed_actions),
                                     **config).for_team(team)
    if calibrator is None:
        calibrator = calibrate(calibration, team, controller, configuration, alpha=alpha, seed=seed)
    else:
        check_config(calibrator, configuration)
    program = configuration.program(team, controller, calibrator=calibrator, seed=seed, **(program_options or {}))
    return program, calibrator


def certified_rounds(calibrator: Any) -> list[int]:
    """The rounds a calibrator certifies (a finite threshold)."""
    return sorted(t for t, eps in calibrator.thresholds_.items() if np.isfinite(eps))


def calibrated_row(name: str, controller: Any, team: Callable, calibration: Sequence[HiddenProfileTask],
                   test: Sequence[HiddenProfileTask], *, alpha: float = 0.1, max_rounds: int = 10, seed: int = 0,
                   removed_actions: Sequence[str] = (), program_options: Mapping[str, Any] | None = None,
                   **config: Any) -> dict[str, Any]:
    """One ablation row: calibrate ``controller``'s configuration on ``calibration``, run it on ``test``
    (:func:`calibrated_program`)."""
    program, calibrator = calibrated_program(name, controller, team, calibration, alpha=alpha, max_rounds=max_rounds,
                                             seed=seed, removed_actions=removed_actions,
                                             program_options=program_options, **config)
    row = summarize(_run(program, test), test)
    row["certified_rounds"] = certified_rounds(calibrator)
    return row


def action_ablation(controllers: Mapping[str, Callable[[], Any]], team: Callable,
                    calibration: Sequence[HiddenProfileTask], test: Sequence[HiddenProfileTask], *,
                    alpha: float = 0.1, max_rounds: int = 10, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Table 7: ``{"full" | "-<action>": {controller: row or None (NA)}}``; ``controllers`` maps a name to a
    factory of a fresh controller."""
    table: dict[str, dict[str, Any]] = {}
    for removed in (None, *ACTIONS):
        label = "full" if removed is None else f"-{removed}"
        table[label] = {}
        for name, make in controllers.items():
            controller = make()
            if removed == "Vote" and not getattr(controller, "allow_vote", False):
                table[label][name] = None
                continue
            table[label][name] = calibrated_row(name, controller, team, calibration, test, alpha=alpha,
                                                max_rounds=max_rounds, seed=seed,
                                                removed_actions=() if removed is None else (removed,))
    return table


def feature_controller(rows: Sequence[dict[str, Any]], features: Sequence[str], *, seed: int = 0,
                       **mlp: Any) -> ValueController:
    """The MLP controller of one Table 6 row: trained on the exploration ``rows`` with only ``features``, seeded
    (``random_state=seed``), so the same rows, features and seed give the same model."""
    model = train_controller(rows, list(features), random_state=seed, **mlp)
    return ValueController(model, features=list(features))


def feature_ablation(rows: Sequence[dict[str, Any]], team: Callable, calibration: Sequence[HiddenProfileTask],
                     test: Sequence[HiddenProfileTask], *, sets: Mapping[str, Sequence[str]] = FEATURE_SETS,
                     alpha: float = 0.1, max_rounds: int = 10, seed: int = 0, **mlp: Any) -> dict[str, dict[str, Any]]:
    """Table 6: the MLP retrained on each feature set (from the same exploration ``rows``), calibrated and run."""
    table = {}
    for label, features in sets.items():
        controller = feature_controller(rows, features, seed=seed, **mlp)
        table[label] = calibrated_row("mlp", controller, team, calibration, test, alpha=alpha, max_rounds=max_rounds,
                                      seed=seed)
        table[label]["features"] = list(features)
    return table


def sampling_ablation(controllers: Mapping[str, Callable[[], Any]], team: Callable,
                      calibration: Sequence[HiddenProfileTask], test: Sequence[HiddenProfileTask], *,
                      alpha: float = 0.1, max_rounds: int = 10, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Table 9: per controller, its calibrated configuration run with ``set_sampling="every-round"``."""
    return {name: calibrated_row(name, make(), team, calibration, test, alpha=alpha, max_rounds=max_rounds,
                                 seed=seed, program_options={"set_sampling": "every-round"})
            for name, make in controllers.items()}


def actions_cells(table: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Table 7 as ``(header, cells)``: task accuracy (%) per configuration and controller, change from the full
    set in parentheses, ``NA`` for a removed action the controller never takes."""
    controllers = list(table["full"])
    body = []
    for label, cells in table.items():
        shown = [label]
        for name in controllers:
            row = cells[name]
            if row is None:
                shown.append("NA")
                continue
            mean = row["task_accuracy"]["mean"]
            delta = "" if label == "full" else f" ({100 * (mean - table['full'][name]['task_accuracy']['mean']):+.1f})"
            shown.append(f"{100 * mean:.1f}{delta}")
        body.append(shown)
    return ["configuration", *controllers], body


def features_cells(table: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Table 6 as ``(header, cells)``: success, communication cost and final objective per feature set."""
    header = ["features retained", "success", "communication cost", "final objective", "n"]
    return header, [[label, format_ci(row["task_accuracy"]), f"{row['final_C']:.4f}", f"{row['final_J']:.4f}",
                     str(row["n"])] for label, row in table.items()]


def sampling_cells(table: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Table 9 as ``(header, cells)``: mean success and mean rounds per trial per controller."""
    header = ["method", "mean success", "mean rounds/trial", "n"]
    return header, [[name, format_ci(row["task_accuracy"]), f"{row['messages']:.2f}", str(row["n"])]
                    for name, row in table.items()]


CELLS: dict[str, Callable[[Mapping[str, Mapping[str, Any]]], tuple[list[str], list[list[str]]]]] = {
    "actions": actions_cells, "features": features_cells, "sampling": sampling_cells}
"""Each ablation's table builder by its ``consilience ablate`` kind."""


def actions_markdown(table: Mapping[str, Mapping[str, Any]]) -> str:
    """Table 7's layout in Markdown (:func:`actions_cells`)."""
    return "\n".join(pipe_lines(*actions_cells(table))) + "\n"


def features_markdown(table: Mapping[str, Mapping[str, Any]]) -> str:
    """Table 6's layout in Markdown (:func:`features_cells`)."""
    return "\n".join(pipe_lines(*features_cells(table))) + "\n"


def sampling_markdown(table: Mapping[str, Mapping[str, Any]]) -> str:
    """Table 9's layout in Markdown (:func:`sampling_cells`)."""
    return "\n".join(pipe_lines(*sampling_cells(table))) + "\n"
