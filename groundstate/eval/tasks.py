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
        scorer: ``(record, prediction | None) -> {metric: value}`` (:mod:`groundstate.eval.scoring`); with
            ``None`` (the record's program failed) it names the metrics the record would have had (the runner
            records them as not measured; the values are ignored). ``scorer.from_outputs = True`` says it reads
            only the stored outputs, so a record whose scoring failed is re-scored without running again.
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


#: Modules that register groundstate's own tasks when imported (by name, so this registry imports no system and
#: the systems' task modules can import it without an import cycle).
BUILTIN_TASK_MODULES: tuple[str, ...] = ("groundstate.eval.reground.tasks",)


def load_builtin_tasks() -> dict[str, Task]:
    """Import the modules that register groundstate's own tasks (:data:`BUILTIN_TASK_MODULES`)."""
    import importlib

    for name in BUILTIN_TASK_MODULES:
        importlib.import_module(name)
    return TASKS


def run_task(task: Task | str, args: argparse.Namespace, *, lm: Any, lm_config: Any, settings: Any,
             extra_config: dict[str, Any] | None = None, program: Any = None, label: str | None = None):
    """Run a registered task durably: build its program, load its records, assemble the run config, run.

    Args:
        task: the task or its name.
        args: the parsed options the task reads (data, condition, program options, seed).
        lm: the default LM (already configured as DSPy's default by the caller).
        lm_config: the :class:`~groundstate.lm.config.LMConfig` whose roles are applied to the program.
        settings: the :class:`~groundstate.eval.runner.RunSettings` (out, threads, limit, shard, ...).
        extra_config: more fields of the run config (part of the fingerprint).
        program: a ready program to run instead of ``task.build(args)`` (a loaded optimized program).
        label: the progress bar's description (default: the task's name).

    Returns:
        The :class:`~groundstate.eval.runner.RunResult`. Raises
        :class:`~groundstate.eval.runner.RunAborted` when the run stops early (everything done is kept).
    """
    from groundstate.eval.runner import durable_run, run_config
    from groundstate.lm.specs import describe_lm

    task = get_task(task) if isinstance(task, str) else task
    program = program if program is not None else task.build(args)
    lm_config.apply(program)
    records, data = task.load(args)
    config = run_config(task.name, state=program, lm=describe_lm(lm),
                        lm_config=lm_config.describe() if lm_config.roles else None, data=data, seed=args.seed,
                        options=task.options(args), **(extra_config or {}))
    return durable_run(program, config, records, settings, inputs=task.inputs_for(args), scorer=task.scorer_for(args),
                       outputs=task.outputs, description=label or task.name)


# ---------------------------------------------------------------------------------------------------------
# qa: a one-step question answerer over a JSONL file of {id, question, answer?}
# ---------------------------------------------------------------------------------------------------------


def _qa_load(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from groundstate.eval.io import read_records
    from groundstate.eval.runner import file_hash

    if not args.data:
        raise ConfigError("qa needs --data FILE (JSON Lines, a JSON list or Parquet of {id, question, answer})")
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


def _qa_score(record: dict[str, Any], prediction: Any) -> dict[str, float | None]:
    """``exact_match`` against the record's ``answer`` (none without one; ``None``, not measured, for a failed
    record). Reads only the prediction's ``answer``, which the run stores."""
    if record.get("answer") is None:
        return {}
    if prediction is None:
        return {"exact_match": None}
    gold = str(record["answer"]).strip().lower().rstrip(".")
    got = str(getattr(prediction, "answer", "")).strip().lower().rstrip(".")
    return {"exact_match": float(gold == got)}


_qa_score.from_outputs = True  # type: ignore[attr-defined]


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
