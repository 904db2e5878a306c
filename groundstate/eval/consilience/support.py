"""Per-fact support files beside a task file, and choosing the support simulated agents run on.

An LM annotation (:class:`~groundstate.programs.consilience.annotate.SupportAnnotator`) of ``tasks.json`` is
stored in ``tasks.json.support.json`` (:func:`support_path`), one JSON object::

    {"format": "groundstate-support/1", "tasks_file": "tasks.json", "tasks_sha256": "...",
     "annotator": {"lm": {...}, "program": "<hash of the annotator's prompts>"},
     "support": {"<task id>": {"<fact>": {"<option>": weight, ...}, ...}, ...},
     "failures": [{"task": "...", "fact": "...", "error": "..."}, ...]}

:func:`annotate_tasks` fills it fact by fact and writes it (atomically) after every task, so an interrupted
annotation loses at most one task's calls, and a second run asks the LM only about facts not yet rated (a
fact whose call failed is recorded in ``failures`` and asked again next time; failures never abort the run).
A file made by another annotator (another LM or other prompts) is not mixed with a new one: annotating again
with a different annotator needs ``replace=True``.

:func:`apply_support` gives simulated agents their support, by ``mode``:

- ``auto`` (default): each task's own support where it has one; for the others, the support file beside the
  task file when there is one (it must cover every fact of those tasks), otherwise the design default
  (:func:`~groundstate.programs.consilience.annotate.design_support`);
- ``task``: only the tasks' own support (an error names the first task without);
- ``file``: the support file (beside the task file, or ``support_file``) for every task without its own;
- ``design``: the design default for every task without its own.

It returns the tasks (copies carrying support) and a description of where the support came from, which goes
into the run's fingerprint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from groundstate.concurrency import thread_map
from groundstate.errors import ConfigError, InputError, one_line
from groundstate.eval.io import read_json
from groundstate.eval.results import write_json
from groundstate.eval.runner import file_hash, program_state_hash
from groundstate.lm.specs import describe_lm
from groundstate.records import HiddenProfileTask

logger = logging.getLogger(__name__)

FORMAT = "groundstate-support/1"
SUPPORT_MODES: tuple[str, ...] = ("auto", "task", "file", "design")


def support_path(tasks_file: str | Path) -> Path:
    """Where the support annotation of ``tasks_file`` is kept: ``<tasks_file>.support.json``."""
    tasks_file = Path(tasks_file)
    return tasks_file.with_name(tasks_file.name + ".support.json")


def read_support_file(path: str | Path) -> dict[str, Any]:
    """Read and check a support file (see the module docstring).

    Raises:
        InputError: unreadable, not a support file, or a weight that is not a finite number (one line naming
            the file, the task and the field).
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"not a support file (expected a JSON object with \"format\": \"{FORMAT}\")", file=str(path))
    support = data.get("support")
    if not isinstance(support, dict):
        raise InputError("must be an object of task id -> facts", file=str(path), field="support")
    for task_id, facts in support.items():
        if not isinstance(facts, dict):
            raise InputError("must be an object of fact -> option weights", file=str(path), record=task_id,
                             field="support")
        for fact, weights in facts.items():
            if not isinstance(weights, dict):
                raise InputError("must be an object of option -> weight", file=str(path), record=task_id,
                                 field=f"support[{fact[:40]!r}]")
            for option, weight in weights.items():
                if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                    raise InputError(f"weight {weight!r} for option '{option}' is not a finite number",
                                     file=str(path), record=task_id, field=f"support[{fact[:40]!r}]")
    if not isinstance(data.get("failures", []), list):
        raise InputError("must be a list", file=str(path), field="failures")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)


def annotator_description(annotator: Any, lm: Any) -> dict[str, Any]:
    """What identifies an annotation: the LM and the annotator's prompts (a hash of its saved state)."""
    return {"lm": describe_lm(lm), "program": program_state_hash(annotator)}


def annotate_tasks(tasks: Sequence[HiddenProfileTask], tasks_file: str | Path, annotator: Any, lm: Any, *,
                   out: str | Path | None = None, replace: bool = False, threads: int = 4,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Rate every fact of every task with ``annotator`` and keep the result beside ``tasks_file``.

    Args:
        tasks: the tasks (from ``tasks_file``).
        tasks_file: their file (named in the support file, with its hash).
        annotator: a :class:`~groundstate.programs.consilience.annotate.SupportAnnotator` (or anything with
            ``annotator(task=..., fact=...) -> Prediction(support=...)``).
        lm: the LM it runs on (``None``: DSPy's configured LM); described in the file.
        out: the support file (default :func:`support_path`).
        replace: start afresh when the existing file was made by another annotator.
        threads: concurrent calls within a task.
        progress: called with ``(tasks done, tasks)`` after each task.

    Returns:
        The support file's content (also written to ``out``): ``support``, ``failures`` and what it was made with.

    Raises:
        ConfigError: the existing file was made by another annotator and ``replace`` is false.
    """
    import dspy  # noqa: PLC0415 (heavy: dspy)

    path = Path(out) if out is not None else support_path(tasks_file)
    described = annotator_description(annotator, lm)
    data: dict[str, Any] = {"format": FORMAT, "tasks_file": Path(tasks_file).name,
                            "tasks_sha256": file_hash(tasks_file), "annotator": described, "support": {},
                            "failures": []}
    if path.exists():
        old = read_support_file(path)
        if old.get("annotator") != described and not replace:
            raise ConfigError(f"{path} was made by another annotator ({json.dumps(old.get('annotator'))[:120]}); "
                              "pass --replace to annotate afresh")
        if old.get("annotator") == described:
            data["support"] = old["support"]
    failures: list[dict[str, str]] = []
    for done, task in enumerate(tasks, start=1):
        have = data["support"].get(task.id, {})
        todo = [f for f in task.all_facts() if f not in have]

        def rate(fact: str, task: HiddenProfileTask = task) -> tuple[str, dict[str, float] | None, str | None]:
            try:
                return fact, dict(annotator(task=task, fact=fact).support), None
            except Exception as exc:  # an LM failure is recorded for this fact and retried next time
                return fact, None, f"{type(exc).__name__}: {one_line(str(exc))[:300]}"

        with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
            results = thread_map(rate, todo, max_workers=threads) if todo else []
        rated = dict(have)
        for fact, weights, error in results:
            if weights is None:
                failures.append({"task": task.id, "fact": fact, "error": error or "unknown"})
            else:
                rated[fact] = weights
        data["support"][task.id] = rated
        data["failures"] = failures
        _write(path, data)
        if progress is not None:
            progress(done, len(tasks))
    if failures:
        logger.warning("%d fact(s) could not be rated; run the annotation again to retry them", len(failures))
    return data


def _design(task: HiddenProfileTask) -> HiddenProfileTask:
    from groundstate.programs.consilience.annotate import design_support  # noqa: PLC0415 (heavy: dspy)

    return task.model_copy(update={"support": design_support(task)})


def apply_support(tasks: Sequence[HiddenProfileTask], tasks_file: str | Path, mode: str = "auto",
                  support_file: str | Path | None = None) -> tuple[list[HiddenProfileTask], dict[str, Any]]:
    """The tasks with the support simulated agents run on, and where it came from (see the module docstring).

    Raises:
        ConfigError: an unknown mode.
        InputError: ``task`` mode and a task without support; a support file that is missing (``file`` mode),
            unreadable, or lacks a fact of a task it must cover.
    """
    if mode not in SUPPORT_MODES:
        raise ConfigError(f"unknown support mode '{mode}'; choose from {', '.join(SUPPORT_MODES)}")
    bare = [t for t in tasks if not t.support]
    described: dict[str, Any] = {"own": len(tasks) - len(bare)}
    if not bare:
        return list(tasks), described
    path = Path(support_file) if support_file is not None else support_path(tasks_file)
    if mode == "task":
        raise InputError("simulated agents need per-fact support; annotate the tasks (groundstate hidden annotate) "
                         "or use --support design", file=str(tasks_file), record=bare[0].id, field="support")
    use_file = mode == "file" or (mode == "auto" and (support_file is not None or path.exists()))
    if not use_file:
        described.update(source="design", tasks=len(bare))
        return [t if t.support else _design(t) for t in tasks], described
    if not path.exists():
        raise InputError("no support file; write one with `groundstate hidden annotate` or use --support design",
                         file=str(path))
    data = read_support_file(path)
    out = []
    for task in tasks:
        if task.support:
            out.append(task)
            continue
        rated = data["support"].get(task.id)
        if rated is None:
            raise InputError("the support file has no annotation for this task; run `groundstate hidden annotate` "
                             "again", file=str(path), record=task.id)
        missing = next((f for f in task.all_facts() if f not in rated), None)
        if missing is not None:
            raise InputError(f"no support for the fact '{missing[:60]}' (its annotation failed or the task changed); "
                             "run `groundstate hidden annotate` again", file=str(path), record=task.id)
        out.append(task.model_copy(update={"support": {f: dict(rated[f]) for f in task.all_facts()}}))
    described.update(source="file", tasks=len(bare), file=path.name, sha256=file_hash(path),
                     annotator=data.get("annotator"))
    return out, described
