"""What every ``groundstate consilience`` command needs: tasks with their team, controllers by name,
configurations and the calibrators fitted for them (from :mod:`groundstate.eval.consilience.tasks`, with the
settings of the options), and writing a result as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from groundstate.cli import options  # configure_lms looked up at call time: tests stand in for it
from groundstate.cli.options import agent_settings, backend_map, context_for
from groundstate.cli.settings import settings_from
from groundstate.eval.consilience import tasks as consilience_tasks
from groundstate.eval.consilience.settings import AgentSettings, ConfigurationSettings
from groundstate.eval.results import write_json


def load_tasks_file(path: str):
    from groundstate.eval.consilience.data import load_tasks  # noqa: PLC0415 (--help stays light)

    return load_tasks(path)


def tasks_and_team(args: argparse.Namespace, path: str):
    """``(tasks, data description, team, agents description, LM description)`` for the tasks in ``path``
    (:func:`groundstate.eval.consilience.tasks.prepare_team` with the options' agent settings)."""
    tasks, data = load_tasks_file(path)
    settings = agent_settings(AgentSettings, args)
    tasks, team, agents, lm = consilience_tasks.prepare_team(settings, tasks, path, context_for(args),
                                                             seed=getattr(args, "seed", 0))
    return tasks, data, team, agents, lm


def task_map(args: argparse.Namespace, controller: str | None = None, label: str | None = None):
    """The ``map_fn`` of ``--backend``/``--threads`` for per-task episodes; Ray workers get LM specs only when an
    agent or the controller (``llm...``) calls an LM. Each map shows a progress display (tasks done, LM calls,
    elapsed) named ``consilience <command>`` (or ``label``) unless ``--no-progress`` was given."""
    needs_lm = getattr(args, "agents", "lm") != "sim" or (controller or "").startswith("llm")
    label = label or f"consilience {getattr(args, 'consilience_command', None) or 'tasks'}"
    return backend_map(args, needs_lm=needs_lm, what="task", progress=label)


def write_json_out(path: str | None, value: Any) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_json(path, value)
        print(f"wrote {path}")


def configuration_for(args: argparse.Namespace, name: str, controller: Any, team: Any):
    """The configuration of controller ``name`` the options describe, for the agents of ``team``."""
    return settings_from(ConfigurationSettings, args).configuration(name, controller, team)


def controller_named(name: str, mlp_dir: str | None, args: argparse.Namespace | None = None):
    """The controller ``name``; an LLM controller with simulated agents gets the options' LMs configured first."""
    if name.startswith("llm") and args is not None and getattr(args, "agents", None) == "sim":
        options.configure_lms(args)  # the LLM controller needs an LM even when the agents are simulated
    return consilience_tasks.controller_named(name, mlp_dir)


def load_calibrator(path: str, config) -> Any:
    return consilience_tasks.load_calibrator(path, config)
