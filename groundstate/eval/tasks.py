"""What `groundstate run NAME` can run: a program, the records it runs on, and how they are scored.

A :class:`Task` binds a program builder to a data loader, a scorer and the options that identify a run.
Each system registers its tasks here (``register``); the CLI and the runner need nothing else.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError


@dataclass
class Task:
    """A runnable program with its data and scoring.

    Attributes:
        name: the CLI name (``groundstate run NAME``).
        help: one line for ``--help``.
        build: ``args -> program`` (a ``dspy.Module``).
        load: ``args -> (records, data_description)``; the description (file hash, generator settings) goes
            into the run's fingerprint.
        scorer: ``(record, prediction | None) -> {metric: value}``; ``None`` means the record failed.
        outputs: ``prediction -> dict`` of what is stored per record (default: every field but ``trace``).
        inputs: ``record -> kwargs`` (default: ``record.inputs()``).
        add_arguments: adds the task's own options to its ``run`` parser.
        options: ``args -> dict`` of the task options that change results (part of the fingerprint).
        scorer_factory: ``args -> scorer``, when the scorer depends on options (overrides ``scorer``).
        inputs_factory: ``args -> inputs``, when the inputs depend on options (overrides ``inputs``).
    """

    name: str
    help: str
    build: Callable[[argparse.Namespace], Any]
    load: Callable[[argparse.Namespace], tuple[list[Any], dict[str, Any]]]
    scorer: Callable[[Any, Any], dict[str, float]] | None = None
    outputs: Callable[[Any], dict[str, Any]] | None = None
    inputs: Callable[[Any], dict[str, Any]] | None = None
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    options: Callable[[argparse.Namespace], dict[str, Any]] = field(default=lambda args: {})
    scorer_factory: Callable[[argparse.Namespace], Callable[[Any, Any], dict[str, float]]] | None = None
    inputs_factory: Callable[[argparse.Namespace], Callable[[Any], dict[str, Any]]] | None = None

    def scorer_for(self, args: argparse.Namespace):
        """The scorer, built from the options when it depends on them (e.g. the T2 judge)."""
        return self.scorer_factory(args) if self.scorer_factory else self.scorer

    def inputs_for(self, args: argparse.Namespace):
        """The record -> inputs function, built from the options when it depends on them (e.g. the condition)."""
        return self.inputs_factory(args) if self.inputs_factory else self.inputs


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    load_builtin_tasks()
    if name not in TASKS:
        raise ConfigError(f"unknown program '{name}'; available: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def load_builtin_tasks() -> dict[str, Task]:
    """Import the modules that register groundstate's own tasks."""
    import groundstate.eval.reground.tasks  # noqa: F401

    return TASKS


# ---------------------------------------------------------------------------------------------------------
# qa: a one-step question answerer over a JSONL file of {id, question, answer?}
# ---------------------------------------------------------------------------------------------------------


def _qa_load(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from groundstate.eval.io import read_records
    from groundstate.eval.runner import file_hash

    if not args.data:
        raise ConfigError("qa needs --data FILE (JSON Lines of {id, question, answer})")
    rows = read_records(args.data, allow_empty=getattr(args, "allow_empty", False))
    seen = set()
    for i, row in enumerate(rows):
        for key in ("id", "question"):
            if key not in row or row[key] in (None, ""):
                raise InputError("missing field", file=args.data, record=row.get("id", i), field=key)
        if not isinstance(row["question"], str):
            raise InputError("must be a string", file=args.data, record=row["id"], field="question")
        if str(row["id"]) in seen:
            raise InputError("duplicate id", file=args.data, record=row["id"], field="id")
        seen.add(str(row["id"]))
    return rows, {"file": str(Path(args.data).name), "sha256": file_hash(args.data)}


def _qa_score(record: dict[str, Any], prediction: Any) -> dict[str, float]:
    if record.get("answer") is None:
        return {}
    if prediction is None:
        return {"exact_match": 0.0}
    gold = str(record["answer"]).strip().lower().rstrip(".")
    got = str(getattr(prediction, "answer", "")).strip().lower().rstrip(".")
    return {"exact_match": float(gold == got)}


def _qa_build(args: argparse.Namespace):
    from groundstate.programs.qa import QuestionAnswering

    return QuestionAnswering()


register(Task(
    name="qa",
    help="answer each question of a JSONL file {id, question, answer} (a smoke test of the runner)",
    build=_qa_build,
    load=_qa_load,
    scorer=_qa_score,
    inputs=lambda record: {"question": record["question"]},
))
