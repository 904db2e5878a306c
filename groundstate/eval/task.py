"""What a runnable task is: typed settings in, a planned durable run out.

A :class:`Task` names its settings model (:mod:`groundstate.eval.settings`) and turns settings of that model,
with a :class:`RunContext` (the LMs, the judge, where notes go), into a :class:`PlannedRun`: the program, the
records, how a record becomes the program's inputs, how a prediction is scored and stored, and the run
configuration whose fingerprint names the run directory. :func:`execute` runs it through the one durable runner
(:func:`groundstate.eval.assemble.run_task` plans and executes). Nothing in a plan has run yet, so a plan can be
inspected (its run id, its records, its program's predictors) without any LM call; only a DHD step's plan
touches its cache first (creating it gives the cache the id that is part of the run config).

:class:`ProgramTask` is a task made of small functions of its settings (build, load, inputs, scorer, options),
as the OffQuery programs and ``qa`` are. The DHD steps and the hidden-profile runs implement :meth:`Task.plan`
themselves (:mod:`groundstate.eval.dhd.steps`, :mod:`groundstate.eval.consilience.tasks`).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundstate.eval.identity import fingerprint
from groundstate.eval.run_settings import RunSettings, run_config
from groundstate.eval.runner import RunResult, durable_run
from groundstate.eval.settings import LMSettings, Settings
from groundstate.lm.config import LMConfig
from groundstate.lm.specs import default_adapter, describe_lm
from groundstate.paths import safe_component

logger = logging.getLogger(__name__)


@dataclass
class RunContext:
    """What the runs of one command share besides their settings, each built once.

    Attributes:
        lms: the LM options as given.
        make_lms: ``() -> (default LM, LMConfig)``; default: DSPy's configured LM when ``lms`` names none, else
            ``lms.build()``. Called at most once, and only when a task needs an LM (simulated agents need none).
        note: where a task's notes to the user go (default: the log); the CLI prints them on stderr.
        judge: a built T2 judge every OffQuery run of this context uses (default: built once from the settings).
        scoped: ``make_lms`` builds LMs that nobody made DSPy's global LM (``evaluate`` rebuilding the LM a
            manifest names): each run sets them as DSPy's LM for its duration, as for LMs built from ``lms``.
    """

    lms: LMSettings = field(default_factory=LMSettings)
    make_lms: Callable[[], tuple[Any, Any]] | None = None
    note: Callable[[str], None] | None = None
    judge: Any = None
    scoped: bool = False
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def lm_pair(self) -> tuple[Any, Any]:
        """``(default LM, LMConfig)``, built on first use: by ``make_lms``; else, when ``lms`` names nothing and DSPy
        has an LM configured (``dspy.configure(lm=...)``), that LM with no per-role LMs; else from ``lms``."""
        return self.once("lms", self.make_lms or self._build)

    def _build(self) -> tuple[Any, Any]:
        import dspy  # noqa: PLC0415 (heavy: dspy)

        if self.lms == LMSettings() and dspy.settings.lm is not None:
            self._memo["configured"] = True
            return dspy.settings.lm, LMConfig()
        return self.lms.build()

    @property
    def lm(self) -> Any:
        return self.lm_pair()[0]

    @property
    def lm_config(self) -> Any:
        return self.lm_pair()[1]

    def built_lms(self) -> bool:
        """Whether the LMs were built by this context from ``lms``, or by a ``scoped`` ``make_lms`` (so a run sets
        them as DSPy's LM for its duration)."""
        return (self.make_lms is None or self.scoped) and "lms" in self._memo and "configured" not in self._memo

    def once(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()`` the first time ``key`` is asked for; the same value afterwards."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def tell(self, text: str) -> None:
        """A note to the user (``note``, else the log), said once per context."""
        if ("note", text) not in self._memo:
            self._memo[("note", text)] = True
            (self.note or logger.info)(text)


@dataclass
class LoadedData:
    """Records a task already loaded, with their description: passed as a plan's ``source`` so several runs over
    the same records (an evaluation's before and after) read them once."""

    records: list[Any]
    description: dict[str, Any]


@dataclass
class PlannedRun:
    """A durable run ready to execute.

    Attributes:
        program: the callable run on each record's inputs.
        config: the run configuration (:func:`~groundstate.eval.run_settings.run_config`); its fingerprint, with
            ``limit`` and ``shard``, names the run directory.
        records: the records (``None``: nothing to run; ``outcome`` says why).
        inputs, scorer, outputs: as for :func:`~groundstate.eval.runner.durable_run`.
        description: the progress display's label.
        default_out: where the run directories go when the run settings name no place.
        before: called with the run directory before the run starts; what it returns, unless ``None``, replaces
            ``records`` (DHD masking fixes its sample there and runs the sample fixed).
        after: ``(result) -> outcome``, called when the run finished; the value becomes ``result.outcome``.
        outcome: what a plan with nothing to run returns instead of a run result.
        ignore_warnings: warning messages (regular expressions) silenced while this run goes on, and only then.
        labels: record -> ``{"gold", "domain", "variant"}`` stored in its row
            (:data:`~groundstate.eval.runner.LABEL_KEYS`); ``None``: none.
    """

    program: Any
    config: dict[str, Any]
    records: list[Any] | None
    inputs: Callable[[Any], dict[str, Any]] | None = None
    scorer: Callable[[Any, Any], dict[str, Any]] | None = None
    outputs: Callable[[Any], dict[str, Any]] | None = None
    description: str | None = None
    default_out: str | Path = "runs"
    before: Callable[[Path], list[Any] | None] | None = None
    after: Callable[[Any], Any] | None = None
    outcome: Any = None
    ignore_warnings: tuple[str, ...] = ()
    labels: Callable[[Any], dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return str(self.config.get("program", "run"))

    def out(self, run: RunSettings) -> Path:
        """The directory of run directories this run goes to."""
        return Path(run.out or self.default_out)

    def run_id(self, run: RunSettings) -> str:
        """The run id the runner gives this run under ``run`` (the fingerprint of the config with ``limit`` and
        ``shard``, as :class:`~groundstate.eval.runner.Runner` names it)."""
        named = {**self.config, "limit": run.limit, "shard": list(run.shard) if run.shard else None}
        return f"{safe_component(self.name, 'program name')}-{fingerprint(named)}"


class Task(ABC):
    """A runnable task: a name, a settings model, and :meth:`plan`.

    Attributes:
        name: the task's name (``groundstate run NAME``, a spec's ``task``).
        help: one line describing it.
        settings: its settings model.
    """

    name: str
    help: str
    settings: type[Settings]

    @abstractmethod
    def plan(self, settings: Any, context: RunContext, *, run: RunSettings | None = None, program: Any = None,
             source: Any = None) -> PlannedRun:
        """The run ``settings`` describe (nothing runs yet). ``run``: the run settings it will run under;
        ``program`` replaces the task's own (a saved program); ``source`` gives the records instead of the
        settings' data (records in memory, or :class:`LoadedData`)."""


@dataclass
class ProgramTask(Task):
    """A task made of functions of its typed settings.

    Attributes:
        name, help, settings: see :class:`Task`.
        build: ``settings -> program`` (a ``dspy.Module``).
        load: ``(settings, source) -> (records, data description)``; the description (file name and hash, or the
            generator's settings) is the run config's ``data``. ``source`` is ``None`` or records given in memory.
        scorer: ``(settings, judge) -> scorer`` (:mod:`groundstate.eval.scoring`); ``None``: no scores.
        inputs: ``settings -> (record -> kwargs)``; ``None``: ``record.inputs()``.
        outputs: ``prediction -> dict`` stored per record (default: every field but ``trace``).
        options: ``(settings, judge) -> dict``, the config's ``options`` (what changes results).
        judge: ``(settings, context) -> judge`` (the T2 judge; ``context`` is the :class:`RunContext`, whose LMs an
            LM judge may use); ``None``: the task scores without one.
        labels: ``record -> {"gold", "domain", "variant"}``, stored in each record's row (:class:`PlannedRun`);
            ``None``: none.
    """

    name: str
    help: str
    settings: type[Settings]
    build: Callable[[Any], Any]
    load: Callable[[Any, Any], tuple[list[Any], dict[str, Any]]]
    scorer: Callable[[Any, Any], Callable[[Any, Any], dict[str, Any]]] | None = None
    inputs: Callable[[Any], Callable[[Any], dict[str, Any]]] | None = None
    outputs: Callable[[Any], dict[str, Any]] | None = None
    options: Callable[[Any, Any], dict[str, Any]] = field(default=lambda settings, judge: {})
    judge: Callable[[Any, RunContext], Any] | None = None
    labels: Callable[[Any], dict[str, Any]] | None = None

    def judge_for(self, settings: Any, context: RunContext) -> Any:
        """The context's judge, else one built from the settings (once per context and judge setting)."""
        if self.judge is None:
            return None
        if context.judge is not None:
            return context.judge
        key = ("judge", getattr(settings, "judge_lm", None))
        return context.once(key, lambda: self.judge(settings, context))

    def plan(self, settings: Any, context: RunContext, *, run: RunSettings | None = None, program: Any = None,
             source: Any = None) -> PlannedRun:
        program = program if program is not None else self.build(settings)
        lm, lm_config = context.lm_pair()
        lm_config.apply(program)
        if isinstance(source, LoadedData):
            records, data = source.records, source.description
        else:
            records, data = self.load(settings, source)
        judge = self.judge_for(settings, context)
        config = run_config(self.name, state=program, lm=describe_lm(lm),
                            lm_config=lm_config.describe() if lm_config.roles else None, data=data,
                            seed=getattr(settings, "seed", 0), options=self.options(settings, judge))
        return PlannedRun(program, config, records, inputs=self.inputs(settings) if self.inputs else None,
                          scorer=self.scorer(settings, judge) if self.scorer else None, outputs=self.outputs,
                          description=self.name, labels=self.labels)


def execute(planned: PlannedRun, run: RunSettings | None = None, context: RunContext | None = None
            ) -> RunResult | None:
    """Run a planned run durably under ``run`` (see :func:`~groundstate.eval.runner.durable_run`).

    Returns ``None`` when the plan has nothing to run (its ``outcome`` says why); otherwise the result, with
    ``result.outcome`` set by the plan's ``after``. Raises :class:`~groundstate.eval.runner.RunAborted` when the
    run fails (everything finished is kept). When ``context`` built the LMs itself (a Python caller gave LM
    settings, not built LMs), they are DSPy's LM and adapter for the run's duration, and Ray workers get their
    key-free specs.
    """
    run = run or RunSettings()
    if planned.records is None:
        return None
    built = context is not None and context.built_lms()
    if built and run.backend == "ray" and run.lm_spec is None and run.worker_setup is None:
        run = run.model_copy(update={"lm_spec": context.lm_config.worker_spec()})
    run = run.model_copy(update={"out": planned.out(run)})
    if planned.before is not None:
        records = planned.before(planned.out(run) / planned.run_id(run))
        if records is not None:
            planned.records = records
    with contextlib.ExitStack() as stack:
        if built:
            import dspy  # noqa: PLC0415 (heavy: dspy)

            stack.enter_context(dspy.context(lm=context.lm, adapter=default_adapter(context.lm)))
        if planned.ignore_warnings:
            stack.enter_context(warnings.catch_warnings())
            for message in planned.ignore_warnings:
                warnings.filterwarnings("ignore", message=message)
        result = durable_run(planned.program, planned.config, planned.records, run, inputs=planned.inputs,
                             scorer=planned.scorer, outputs=planned.outputs, description=planned.description,
                             labels=planned.labels)
    if planned.after is not None:
        result.outcome = planned.after(result)
    return result
