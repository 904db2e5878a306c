"""The Consilience paper's state-feature ablation (Table 6) and speaker-routing ablation (Table 8) as registered
tasks, so they run durably through the one runner and an experiment spec names their cells (the shipped specs
``consilience-table6`` and ``consilience-table8``).

- ``consilience-features`` (:class:`FeatureAblationTask`, :class:`~groundstate.eval.consilience.settings.
  FeatureAblationSettings`): **one row of Table 6 is one run.** Its program is the MLP controller trained on the
  row's feature set from the exploration rows (seeded: the same rows, features and seed give the same model),
  calibrated for the row's configuration on the calibration tasks, and run over the held-out tasks, one record
  per task. The exploration rows and the calibration tasks are a file each, as ``consilience ablate features``
  takes them, or, without ``calibration_data``, the task file is split (train / calibration / test, seeded, as
  ``consilience split`` splits it) and the training split is explored in the run, as ``consilience explore``
  explores it (what the offline spec ``consilience-table6-sim`` does).
- ``consilience-routing`` (:class:`RoutingTask`, :class:`~groundstate.eval.consilience.settings.RoutingSettings`):
  **Table 8 is one run**, whose rows are views of it. Each record is one task's discussion under the controller;
  at each round whose executed action is a communication action, that action is replayed once per agent as the
  speaker (:func:`~groundstate.eval.consilience.routing.speaker_outcomes`), and the record stores those steps.
  The table's reader scores every routing policy on the same pooled steps
  (:mod:`groundstate.eval.experiments.consilience_readers`), and a spec's policy axis reads one policy each
  (``scope``).

Why these shapes. A Table 6 row is a computation of its own (its own model, its own calibrator, its own
discussions), so it is a cell with a run id of its own: the run configuration records the feature set, the
exploration rows (the file's hash, or how the training split is explored), the calibration tasks (their hash, or
the split), ``alpha``, the round limit, the agents and the seed, so a change to any of them is another run. The
fitting is done when the run starts, never when it is planned (planning calls no LM): the fitted controller and
calibrator are written into the run directory (``controller/``, ``calibrator/``) before the first record runs, and
a resumed run loads them, so every record of a run uses one fit, even with LM agents, whose calibration episodes
would not repeat call for call. The five routing policies of Table 8, in contrast, are compared on the *same*
steps: as separate runs each would replay the discussions again (and with LM agents, different discussions), so
the ablation is one run and each policy a view of it.

Both give the numbers of ``consilience ablate features`` and ``consilience routing`` on the same inputs: the
programs are built by the same functions (:func:`~groundstate.eval.consilience.ablations.feature_controller`,
:func:`~groundstate.eval.consilience.ablations.calibrated_program`, the routing replay), every episode is seeded
per task (so running the tasks in any order, on any thread, gives each task's discussion unchanged), and each
record stores its position in the data, so the readers pool the records in the data's order and sum the means in
the order the in-memory commands sum them.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, GroundstateError, InputError
from groundstate.eval.consilience.settings import AgentSettings, FeatureAblationSettings, RoutingSettings
from groundstate.eval.consilience.tasks import (
    artifact_digests,
    controller_named,
    hidden_setup,
    load_calibrator,
    prepare_team,
)
from groundstate.eval.run_settings import RunSettings, run_config
from groundstate.eval.task import PlannedRun, RunContext, Task

#: Where a feature-ablation run keeps its fit (inside its run directory).
CONTROLLER_DIR, CALIBRATOR_DIR, FIT_LOCK = "controller", "calibrator", ".fit.lock"

#: The train / calibration / test shares of a task file split in the run (those of ``consilience split``).
SPLIT = (0.4, 0.3, 0.3)


def _positions(tasks: Sequence[Any]) -> Callable[[Any], dict[str, Any]]:
    """The runner's ``inputs``: the task and its position in the data (stored with its record)."""
    where = {task.id: i for i, task in enumerate(tasks)}
    return lambda task: {"task": task, "position": where[task.id]}


def _discussion_scorer():
    from groundstate.eval.consilience.metrics import discussion_scorer  # noqa: PLC0415 (--help stays light)

    return discussion_scorer()


class FitFailed(RuntimeError):
    """Fitting a feature-ablation row failed (an LM or program error in an episode); recorded on each record."""


class FeatureRowProgram:
    """The Consilience program of one Table 6 row, fitted the first time it is needed (:meth:`prepare`), then called
    as ``program(task=..., position=...)``; the prediction carries its ``position``.

    Args:
        settings: the row's settings.
        team: the agents.
        calibration: the calibration tasks.
        rows: ``() -> exploration rows`` (read from the file, or explored when first asked for).
    """

    def __init__(self, settings: FeatureAblationSettings, team: Any, calibration: Sequence[Any],
                 rows: Callable[[], list[dict[str, Any]]]):
        self.settings, self.team, self.calibration, self.rows = settings, team, list(calibration), rows
        self.program: Any = None
        self.failure: str | None = None
        self._lock = threading.Lock()

    @property
    def features(self) -> list[str]:
        from groundstate.programs.consilience.state import FEATURE_SETS  # noqa: PLC0415 (--help stays light)

        return list(FEATURE_SETS[self.settings.features])

    def prepare(self, directory: Path | None = None) -> Any:
        """The fitted program (fitted once). With ``directory`` (the run's), the fit saved there is loaded when
        there is one, else the fit is made and saved there; without one (a plan's dry run), the fit is made and
        kept in memory only.

        Raises:
            ConfigError, InputError: a saved fit that does not belong to this row, or that cannot be read, or no
                calibration rounds.
            FitFailed: the fitting failed otherwise (an LM or program error in an exploration or calibration
                episode); later calls raise it again at once.
        """
        with self._lock:
            if self.failure is not None:
                raise FitFailed(self.failure)
            if self.program is None:
                saved = directory is not None and (directory / CALIBRATOR_DIR / _manifest()).is_file()
                try:
                    self.program = self._load(directory) if saved else self._fit(directory)
                except GroundstateError:
                    raise
                except Exception as exc:  # an LM or program failure while fitting: the row's failure, said once
                    self.failure = f"fitting the row failed: {type(exc).__name__}: {exc}"
                    raise FitFailed(self.failure) from exc
            return self.program

    def _fit(self, directory: Path | None) -> Any:
        from groundstate.eval.consilience.ablations import calibrated_program, feature_controller  # noqa: PLC0415 (--help stays light)

        s = self.settings
        controller = feature_controller(self.rows(), self.features, seed=s.seed)
        program, calibrator = calibrated_program("mlp", controller, self.team, self.calibration, alpha=s.alpha,
                                                 max_rounds=s.max_rounds, seed=s.seed)
        if directory is not None:
            from groundstate.optimizers.artifacts import save_params, save_sklearn  # noqa: PLC0415 (--help stays light)

            model = controller.model
            save_sklearn(model, directory / CONTROLLER_DIR, purpose="consilience MLP controller (a Table 6 row)",
                         features=self.features, actions=list(model.actions_), feature_set=s.features)
            save_params(calibrator, directory / CALIBRATOR_DIR, purpose="consilience calibration (a Table 6 row)",
                        configuration=calibrator.config)
        return program

    def _load(self, directory: Path) -> Any:
        from groundstate.eval.consilience.ablations import calibrated_program  # noqa: PLC0415 (--help stays light)
        from groundstate.optimizers.artifacts import load_params  # noqa: PLC0415 (--help stays light)
        from groundstate.optimizers.consilience import load_controller  # noqa: PLC0415 (--help stays light)
        from groundstate.programs.consilience.control import ValueController  # noqa: PLC0415 (--help stays light)

        s = self.settings
        model, features = load_controller(directory / CONTROLLER_DIR)
        if list(features or []) != self.features:
            raise ConfigError(f"{directory / CONTROLLER_DIR} holds a controller trained on {features}, not this "
                              f"row's {self.features}; remove it to fit again")
        controller = ValueController(model, features=self.features)
        program, _ = calibrated_program("mlp", controller, self.team, self.calibration, alpha=s.alpha,
                                        max_rounds=s.max_rounds, seed=s.seed,
                                        calibrator=load_params(directory / CALIBRATOR_DIR))
        return program

    def before(self, run_dir: Path) -> None:
        """The plan's ``before``: fit (or load the fit of) the run in ``run_dir``, one process at a time. A fit that
        fails with :class:`FitFailed` is not raised here: each record then fails with its message, so the cell's
        run fails (and is reported) while the other cells still run; a configuration error is one line."""
        from filelock import FileLock  # noqa: PLC0415 (--help stays light)

        from groundstate.paths import check_entry, kind_of  # noqa: PLC0415 (--help stays light)

        check_entry(run_dir / FIT_LOCK, "run files")  # a FIFO there would block the lock, a link send it elsewhere
        for name in (CONTROLLER_DIR, CALIBRATOR_DIR):
            if kind_of(run_dir / name) not in (None, "directory"):
                raise InputError(f"is a {kind_of(run_dir / name)}, not the directory of the row's fit (remove it)",
                                 file=str(run_dir / name))
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make the run directory ({exc.strerror or exc})", file=str(run_dir)) from None
        with FileLock(str(run_dir / FIT_LOCK)), contextlib.suppress(FitFailed):
            self.prepare(run_dir)  # a failed fit is recorded on every record: the cell fails, the others still run

    def __call__(self, task: Any, position: int) -> Any:
        prediction = self.prepare()(task=task)
        prediction.position = position
        return prediction

    def __getstate__(self) -> dict[str, Any]:  # sent to Ray workers fitted: no lock, no way to fit again
        return {**self.__dict__, "_lock": None, "rows": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _manifest() -> str:
    from groundstate.optimizers.artifacts import MANIFEST  # noqa: PLC0415 (--help stays light)

    return MANIFEST


def _calibration_tasks(settings: FeatureAblationSettings, context: RunContext) -> tuple[list[Any], dict[str, Any]]:
    """The calibration tasks of ``calibration_data`` (given support, for simulated agents, as the test tasks are)
    and their description, read once per context."""
    from groundstate.eval.consilience.data import load_tasks  # noqa: PLC0415 (--help stays light)

    path = str(settings.calibration_data)
    key = ("calibration", path, AgentSettings.parse(settings).model_dump_json(), settings.seed)

    def read() -> tuple[list[Any], dict[str, Any]]:
        tasks, data = load_tasks(path)
        tasks, _, agents, _ = prepare_team(settings, tasks, path, context)
        return tasks, {**data, "support": agents.get("support")}

    return context.once(key, read)


def _exploration(settings: FeatureAblationSettings, context: RunContext, setup: Any,
                 train: Sequence[Any]) -> tuple[Callable[[], list[dict[str, Any]]], dict[str, Any]]:
    """``(rows, description)``: the file's rows, read and checked now (a bad file stops the plan with one line), or
    the training split explored when first asked for (once per context: every row of the table shares it)."""
    if settings.explore is not None:
        from groundstate.eval.consilience.data import load_exploration  # noqa: PLC0415 (--help stays light)
        from groundstate.files import sha256  # noqa: PLC0415 (--help stays light)

        path = str(settings.explore)
        rows = context.once(("exploration", path), lambda: load_exploration(path))
        return (lambda: rows), {"file": Path(path).name, "sha256": sha256(path), "rows": len(rows)}
    if not train:
        raise ConfigError(f"the training split of {settings.data} is empty: give more tasks, or exploration rows "
                          "(explore)")
    key = ("explored", settings.data, AgentSettings.parse(settings).model_dump_json(), settings.seed,
           settings.max_rounds)

    def explored() -> list[dict[str, Any]]:
        from groundstate.optimizers.consilience import explore_tasks  # noqa: PLC0415 (--help stays light)

        return context.once(key, lambda: explore_tasks(train, setup.team, max_rounds=settings.max_rounds,
                                                       seed=settings.seed))

    return explored, {"explored": "the training split", "tasks": len(train), "policy": "random",
                      "router": "action-conditional", "max_rounds": settings.max_rounds}


class FeatureAblationTask(Task):
    """One row of the state-feature ablation (Table 6): see the module docstring."""

    name, settings = "consilience-features", FeatureAblationSettings
    help = "one row of the state-feature ablation (Table 6): the MLP trained on one feature set, calibrated, run"

    def plan(self, settings: FeatureAblationSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        from groundstate.eval.consilience.data import split_tasks  # noqa: PLC0415 (--help stays light)

        setup = hidden_setup(settings, context, source)
        if settings.calibration_data is not None:
            if settings.explore is None:
                raise ConfigError("with calibration_data the MLP is trained on exploration rows: give explore (a "
                                  "file written by `consilience explore`), or leave calibration_data out to split "
                                  "the tasks")
            train, records = [], setup.tasks
            calibration, calibration_description = _calibration_tasks(settings, context)
        else:
            parts = split_tasks(setup.tasks, SPLIT, seed=settings.seed)
            train, calibration, records = parts["train"], parts["calibration"], parts["test"]
            calibration_description = {"split": list(SPLIT), "tasks": len(calibration)}
        if not calibration:
            raise ConfigError(f"no calibration tasks in {settings.calibration_data or settings.data}")
        if program is not None:
            raise ConfigError("a feature-ablation row fits its own program; it takes no saved program")
        rows, explore_description = _exploration(settings, context, setup, train)
        program = FeatureRowProgram(settings, setup.team, calibration, rows)
        config = run_config(f"consilience-features-{settings.features}", lm=setup.lm, data=setup.data,
                            seed=settings.seed,
                            options={"features": settings.features, "feature_names": program.features,
                                     "alpha": settings.alpha, "max_rounds": settings.max_rounds,
                                     "explore": explore_description, "calibration": calibration_description,
                                     "agents": setup.agents, "label": f"mlp [{settings.features}]"})
        return PlannedRun(program, config, records, inputs=_positions(records), scorer=_discussion_scorer(),
                          description=f"features: {settings.features}", before=program.before)


class RoutingProgram:
    """A Consilience program whose every communication round is replayed once per speaker; called as
    ``program(task=..., position=...)``, its prediction carries the discussion's fields, ``steps`` (one
    :func:`~groundstate.eval.consilience.routing.speaker_outcomes` per replayed round, in round order) and
    ``position``. Each call runs a shallow copy of the program, so concurrent records never share a collector."""

    def __init__(self, program: Any):
        self.program = program

    def __call__(self, task: Any, position: int) -> Any:
        from groundstate.eval.consilience.routing import speaker_outcomes  # noqa: PLC0415 (--help stays light)

        steps: list[dict[str, Any]] = []

        def collect(view: Any) -> None:
            step = speaker_outcomes(view)
            if step is not None:
                steps.append(step)

        program = copy.copy(self.program)
        program.on_round = collect
        prediction = program(task=task)
        prediction.steps, prediction.position = steps, position
        return prediction


class RoutingTask(Task):
    """The speaker-routing ablation (Table 8): see the module docstring."""

    name, settings = "consilience-routing", RoutingSettings
    help = "the speaker-routing ablation (Table 8): every speaker replayed at each communication round"

    def plan(self, settings: RoutingSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        setup = hidden_setup(settings, context, source)
        controller = controller_named(settings.controller, settings.mlp, context)
        configuration = settings.configuration(settings.controller, controller, setup.team)
        calibrator = load_calibrator(settings.calibrator, configuration) if settings.calibrator else None
        consilience = program if program is not None else configuration.program(
            setup.team, controller, calibrator=calibrator, seed=settings.seed)
        label = settings.controller + ("" if settings.calibrator else " (uncertified)")
        config = run_config("consilience-routing", state=consilience, lm=setup.lm, data=setup.data, seed=settings.seed,
                            options={"configuration": configuration.to_dict(), "calibrator": settings.calibrator,
                                     "agents": setup.agents, "label": label,
                                     **_artifacts(calibrator, settings.mlp if settings.controller == "mlp" else None)})
        return PlannedRun(RoutingProgram(consilience), config, setup.tasks, inputs=_positions(setup.tasks),
                          scorer=_discussion_scorer(), description=f"routing: {label}")


def _artifacts(calibrator: Any, mlp_dir: str | None) -> dict[str, Any]:
    """``{"artifacts": digests}`` of the saved calibrator/controller (:func:`artifact_digests`), ``{}`` without."""
    digests = artifact_digests(calibrator, mlp_dir)
    return {"artifacts": digests} if digests else {}


#: The study tasks by name.
STUDY_TASKS: dict[str, Task] = {task.name: task for task in (FeatureAblationTask(), RoutingTask())}
