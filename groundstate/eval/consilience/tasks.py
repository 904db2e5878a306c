"""Hidden-profile runs as registered tasks: ``hidden-protocol`` (``groundstate hidden run``) and ``consilience``
(one program of ``consilience evaluate``/``table``), and the evaluation of several programs on the same tasks.

- :func:`make_team`: the agents of a run, LM agents (one LM per ``agent.i`` role) or seeded simulated agents,
  with the description that goes into the run's fingerprint.
- :func:`prepare_team`: the tasks (given per-fact support for simulated agents) with their team and the
  descriptions that go into the run fingerprint, prepared once per :class:`~groundstate.eval.task.RunContext`
  (every program of an evaluation shares them; the notes about the support are said once).
- :data:`CONSILIENCE_TASKS`: the two tasks; each plans one durable run.

The Python entry points that run them (``run_protocol``, ``evaluate_programs``) are in
:mod:`groundstate.eval.consilience.evaluate`.

The run configurations are the ones these commands have always written: ``<protocol>-<agents kind>`` with the
protocol, its rounds and the agents for ``hidden run``; ``consilience-<label>`` with the program's options, the
agents and the label for an evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError, InputError
from groundstate.eval.consilience.settings import AgentSettings, ProgramSettings, ProtocolSettings
from groundstate.eval.consilience.support import apply_support
from groundstate.eval.run_settings import RunSettings, run_config
from groundstate.eval.task import PlannedRun, RunContext, Task
from groundstate.lm.specs import describe_lm
from groundstate.programs.consilience.control import build_controller
from groundstate.programs.consilience.hiddenbench import HiddenBenchOptions
from groundstate.programs.consilience.protocols import PROTOCOLS, HiddenProfileProtocol, discusses
from groundstate.programs.consilience.simulated import SimParams, SimTeam
from groundstate.records import HiddenProfileTask


@dataclass
class HiddenSetup:
    """Tasks ready to run, with their team: ``tasks`` (with support for simulated agents), ``data`` (the file's
    description), ``team``, ``agents`` and ``lm`` (the descriptions in the run configuration)."""

    tasks: list[Any]
    data: dict[str, Any]
    team: Any
    agents: dict[str, Any]
    lm: dict[str, Any]


def make_team(kind: str, tasks: Sequence[HiddenProfileTask], tasks_file: str, *, sim_params: Any = None,
              seed: int = 0, lm: Any = None, lm_config: Any = None, sim_agents: Sequence[Any] = ()
              ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(team, agents description, LM description)`` for ``kind`` ``sim`` or ``lm``.

    Args:
        kind: ``sim`` (seeded simulated agents, every task needs per-fact support) or ``lm``.
        tasks, tasks_file: the tasks and their file (named in errors).
        sim_params: the :class:`~groundstate.programs.consilience.simulated.SimParams` for ``sim``.
        seed: the simulated agents' seed.
        sim_agents: a heterogeneous simulated team: agent ``i`` uses ``sim_agents[i]`` (past the list:
            ``sim_params``); described as ``per_agent`` (only then, so a homogeneous team's run id is unchanged).
        lm, lm_config: the default LM and the per-role configuration for ``lm`` (agent ``i`` uses role
            ``agent.i``).

    Raises:
        InputError: simulated agents on a task without per-fact support.
    """
    from groundstate.programs.consilience.agents import LMTeam  # noqa: PLC0415 (--help stays light)

    if kind == "sim":
        params = sim_params or SimParams()
        unannotated = next((t for t in tasks if not t.support), None)
        if unannotated is not None:
            raise InputError("simulated agents need per-fact support; give the tasks support (--support) or use "
                             "--agents lm",
                             file=tasks_file, record=unannotated.id, field="support")
        described = {"kind": "sim", "params": asdict(params), "seed": seed}
        if sim_agents:
            described["per_agent"] = [asdict(p) for p in sim_agents]
        return SimTeam(params, seed, per_agent=list(sim_agents)), described, {"model": None}
    if kind != "lm":
        raise ConfigError(f"unknown agents '{kind}': use sim or lm")
    team = LMTeam(lm_config=lm_config)
    return team, {"kind": "lm", "lm_config": lm_config.describe() if lm_config.roles else None}, describe_lm(lm)


def prepare_team(settings: AgentSettings, tasks: list[Any], tasks_file: str, context: RunContext,
                 seed: int | None = None) -> tuple[list[Any], Any, dict[str, Any], dict[str, Any]]:
    """``(tasks, team, agents description, LM description)``: simulated agents (seeded by ``seed``, default the
    settings' own; a note says so when the settings did not name the agents) get per-fact support for their tasks
    first (:func:`~groundstate.eval.consilience.support.apply_support`; where it came from is part of the agents
    description, so of the run's fingerprint, and a note for the user); LM agents use the context's LMs."""
    if settings.agents == "sim":
        if "agents" not in settings.model_fields_set:
            context.tell("agents: sim, the default (seeded simulated agents, offline; --agents lm runs LM agents)")
        tasks, support = apply_support(tasks, tasks_file, settings.support, settings.support_file)
        if support.get("source"):
            where = "the hidden-profile design default" if support["source"] == "design" else support["file"]
            context.tell(f"simulated agents: per-fact support of {support['tasks']} task(s) from {where}")
        team, agents, lm = make_team("sim", tasks, tasks_file, sim_params=settings.sim_params(),
                                     seed=getattr(settings, "seed", 0) if seed is None else seed,
                                     sim_agents=settings.sim_agent_params())
        return tasks, team, {**agents, "support": support}, lm
    lm, lm_config = context.lm_pair()
    team, agents, described = make_team("lm", tasks, tasks_file, lm=lm, lm_config=lm_config)
    return tasks, team, agents, described


def hidden_setup(settings: Any, context: RunContext, source: Any = None) -> HiddenSetup:
    """The tasks of ``settings.data`` (or ``source``) and their team, prepared once per context for the same data
    and agents."""
    from groundstate.eval.consilience.data import load_tasks  # noqa: PLC0415 (--help stays light)

    agents = AgentSettings.parse(settings).model_dump_json()
    key = ("hidden", settings.data, settings.allow_empty, agents, getattr(settings, "seed", 0), id(source))

    def prepare() -> HiddenSetup:
        tasks, data = load_tasks(source if source is not None else settings.data, settings.allow_empty)
        tasks, team, described, lm = prepare_team(settings, tasks, settings.data, context)
        return HiddenSetup(tasks, data, team, described, lm)

    return context.once(key, prepare)


def protocol_program(protocol: str, rounds: int | None, team: Any, seed: int, hiddenbench: Any = None):
    """A :class:`~groundstate.programs.consilience.protocols.HiddenProfileProtocol` (one line for a bad value);
    ``hiddenbench``: HiddenBench's protocols' options."""
    try:
        return HiddenProfileProtocol(protocol, rounds, team=team, seed=seed, hiddenbench=hiddenbench)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def protocol_options(program: Any) -> dict[str, Any]:
    """What a reference protocol's run configuration records: the protocol, its rounds and, for HiddenBench's
    protocols, how they depart from its script (part of the run id)."""
    options = {"protocol": program.protocol, "rounds": program.rounds}
    if program.protocol.startswith("hiddenbench"):
        options["hiddenbench"] = (getattr(program, "hiddenbench", None) or HiddenBenchOptions()).describe()
    return options


def scores_initial_votes(program: Any) -> bool:
    """Whether a program's runs score the initial votes: HiddenBench's discussion (its Hidden-Pre), and its
    Full-Info when that discusses (the paper's Full-Info is then the initial votes)."""
    protocol = getattr(program, "protocol", None)
    options = getattr(program, "hiddenbench", None)
    return protocol == "hiddenbench" or (protocol == "hiddenbench-full" and bool(options and options.full_discussion))


def _discussion_run(program: Any, config: dict[str, Any], setup: HiddenSetup, initial: bool,
                    description: str) -> PlannedRun:
    from groundstate.eval.consilience.metrics import discussion_scorer  # noqa: PLC0415 (--help stays light)

    return PlannedRun(program, config, setup.tasks, inputs=lambda task: {"task": task},
                      scorer=discussion_scorer(initial=initial), description=description,
                      labels=lambda task: {"gold": task.correct})


class ProtocolTask(Task):
    """``groundstate hidden run``: one reference protocol (Hidden-Pre, Hidden-Post, Full-Info or HiddenBench's)
    over the tasks."""

    name, settings = "hidden-protocol", ProtocolSettings
    help = "run a discussion protocol (hidden-pre, hidden-post, full-info, or HiddenBench's) over tasks"

    def plan(self, settings: ProtocolSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        setup = hidden_setup(settings, context, source)
        program = program or protocol_program(settings.protocol, settings.rounds, setup.team, settings.seed,
                                              settings.hiddenbench_options())
        name = f"{settings.protocol}-{setup.agents['kind']}"
        config = run_config(name, state=program, lm=setup.lm, data=setup.data, seed=settings.seed,
                            options={**protocol_options(program), "agents": setup.agents})
        return _discussion_run(program, config, setup, scores_initial_votes(program), name)


def program_label(settings: ProgramSettings) -> str:
    """How an evaluation names a program: the protocol, or the controller, ``(uncertified)`` without a calibrator,
    and ``[sampled ...]`` with set sampling."""
    if settings.program in PROTOCOLS:
        return settings.program
    return settings.program + ("" if settings.calibrator else " (uncertified)") + (
        f" [sampled {settings.set_sampling}]" if settings.set_sampling != "off" else "")


def controller_named(name: str, mlp_dir: str | None, context: RunContext | None = None):
    """The controller ``name`` (``mlp``: loaded from ``mlp_dir``); an LLM controller gets the context's LMs built
    first (it needs an LM even when the agents are simulated)."""
    from groundstate.optimizers.consilience import load_controller  # noqa: PLC0415 (heavy: scikit-learn)

    if name.startswith("llm") and context is not None:
        context.lm_pair()
    model, features = None, None
    if name == "mlp" and mlp_dir:
        model, features = load_controller(mlp_dir)
    return build_controller(name, model, features)


def artifact_digests(calibrator: Any = None, mlp_dir: str | None = None) -> dict[str, str]:
    """Content hashes of the saved artifacts a program runs with, for its run configuration: ``calibrator`` (its
    parameters, canonical JSON) and ``mlp`` (the saved model file's bytes and its manifest), each only when given.

    The options also name the artifacts' paths; the hashes are what make a run id change when a file at the same
    path is refitted, so a stored run is never reused for a different calibrator or controller.
    """
    import hashlib  # noqa: PLC0415 (--help stays light)

    from groundstate.eval.identity import fingerprint  # noqa: PLC0415 (--help stays light)
    from groundstate.files import read_bytes  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.artifacts import MANIFEST, SKLEARN_MODEL  # noqa: PLC0415 (heavy: scikit-learn)

    digests: dict[str, str] = {}
    if calibrator is not None:
        digests["calibrator"] = fingerprint(calibrator.to_params(), 16)
    if mlp_dir:
        digest = hashlib.sha256()
        for name in (SKLEARN_MODEL, MANIFEST):
            digest.update(read_bytes(Path(mlp_dir) / name, max_bytes=256 * 1024**2))
        digests["mlp"] = digest.hexdigest()[:16]
    return digests


def load_calibrator(path: str, config: Any) -> Any:
    """The calibrator saved in ``path``, refused with one line when it was fitted for another configuration."""
    from groundstate.optimizers.artifacts import load_params  # noqa: PLC0415 (--help stays light)
    from groundstate.optimizers.consilience import check_config  # noqa: PLC0415 (heavy: scikit-learn)

    calibrator = load_params(path)
    check_config(calibrator, config)
    return calibrator


class ConsilienceTask(Task):
    """One program of a Consilience evaluation over the tasks: a reference protocol, or a controller with
    conformal acceptance when it has a calibrator (uncertified otherwise)."""

    name, settings = "consilience", ProgramSettings
    help = "one program of a Consilience evaluation: a reference protocol or a controller"

    def plan(self, settings: ProgramSettings, context: RunContext, *, run: RunSettings | None = None,
             program: Any = None, source: Any = None) -> PlannedRun:
        setup = hidden_setup(settings, context, source)
        label = program_label(settings)
        if settings.program in PROTOCOLS:
            hiddenbench = settings.hiddenbench_options()
            rounds = settings.rounds if discusses(settings.program, hiddenbench) else None
            program = program or protocol_program(settings.program, rounds, setup.team, settings.seed, hiddenbench)
            options = protocol_options(program)
        else:
            controller = controller_named(settings.program, settings.mlp, context)
            configuration = settings.configuration(settings.program, controller, setup.team)
            calibrator = load_calibrator(settings.calibrator, configuration) if settings.calibrator else None
            program = program or configuration.program(setup.team, controller, calibrator=calibrator,
                                                       seed=settings.seed, set_sampling=settings.set_sampling)
            options = {"configuration": configuration.to_dict(), "calibrator": settings.calibrator,
                       "set_sampling": settings.set_sampling}
            digests = artifact_digests(calibrator, settings.mlp if settings.program == "mlp" else None)
            if digests:  # absent without saved artifacts, so those runs keep their ids
                options["artifacts"] = digests
        config = run_config("consilience-" + label.split()[0].replace("+", "-"), state=program, lm=setup.lm,
                            data=setup.data, seed=settings.seed, options={**options, "agents": setup.agents,
                                                                          "label": label})
        return _discussion_run(program, config, setup, scores_initial_votes(program), label)


#: The hidden-profile tasks by name.
CONSILIENCE_TASKS: dict[str, Task] = {task.name: task for task in (ProtocolTask(), ConsilienceTask())}
