"""What every ``groundstate consilience`` command needs: tasks with their team, controllers by name,
configurations and the calibrators fitted for them, and writing a result as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def load_tasks_file(path: str):
    from groundstate.eval.consilience.data import load_tasks

    return load_tasks(path)


def tasks_and_team(args: argparse.Namespace, path: str):
    """``(tasks, team, agents description, LM description)`` for the tasks in ``path``."""
    from groundstate.cli.options import prepare_team

    tasks, data = load_tasks_file(path)
    tasks, team, agents, lm = prepare_team(args, tasks, path)
    return tasks, data, team, agents, lm


def task_map(args: argparse.Namespace, controller: str | None = None):
    """The ``map_fn`` of ``--backend``/``--threads`` for per-task episodes; Ray workers get LM specs only when an
    agent or the controller (``llm...``) calls an LM."""
    from groundstate.cli.options import backend_map

    needs_lm = getattr(args, "agents", "lm") != "sim" or (controller or "").startswith("llm")
    return backend_map(args, needs_lm=needs_lm, what="task")


def write_json_out(path: str | None, value: Any) -> None:
    if path:
        from groundstate.eval.results import write_json

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_json(path, value)
        print(f"wrote {path}")


def configuration_for(args: argparse.Namespace, name: str, controller: Any):
    from groundstate.optimizers.consilience import Configuration

    return Configuration.of(name, controller, router=args.router, max_rounds=args.max_rounds, agents=args.agents,
                            removed_actions=tuple(args.remove_action), min_vote_round=args.min_vote_round)


def controller_named(name: str, mlp_dir: str | None, args: argparse.Namespace | None = None):
    from groundstate.optimizers.consilience import load_controller
    from groundstate.programs.consilience.control import build_controller

    if name.startswith("llm") and args is not None and getattr(args, "agents", None) == "sim":
        from groundstate.cli.options import configure_lms

        configure_lms(args)  # the LLM controller needs an LM even when the agents are simulated
    model, features = None, None
    if name == "mlp" and mlp_dir:
        model, features = load_controller(mlp_dir)
    return build_controller(name, model, features)


def load_calibrator(path: str, config) -> Any:
    from groundstate.optimizers.artifacts import load_params
    from groundstate.optimizers.consilience import check_config

    calibrator = load_params(path)
    check_config(calibrator, config)
    return calibrator
