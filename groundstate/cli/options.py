"""The options several commands share, defined once, and the one grammar every command follows.

**The grammar.** Every command spells the same thing the same way:

- ``--data FILE``: the records the command works on (OffQuery instances, hidden-profile tasks, DHD problems,
  MediQ cases, exploration rows). A second input is ``--<split>-data`` (``optimize --val-data``,
  ``consilience ablate --calibration-data``). A DHD message cache is ``--cache DIR`` (it is read and written).
- ``--runs-dir DIR``: the directory of durable run directories (default ``runs/``; DHD: ``<cache>/runs``).
- ``--out PATH``: the one file or artifact directory the command creates (a data file, a saved program, a model).
- ``--report-dir DIR``: where tables and charts go (``compare``, ``evaluate``, ``consilience evaluate/table``,
  ``dhd analyze/crossfit/tables``).
- ``--threads N``: records (tasks, problems, cases, episodes) worked on at once, default 4;
  ``--call-threads N``: LM calls at once inside one record, default 8.
- ``--seed N``: the seed of everything random the command itself does, default 0; ``--synthetic-seed N``: the
  generator seed of ``--data synthetic``.
- ``--<share>-share X``: the share of a split (``split --train-share``, ``consilience split --test-share``).
- ``--no-progress``: no progress display, in every command that shows one (the runs, ``optimize``, the
  ``consilience`` steps); ``-v`` keeps the logs and bars of the libraries underneath (``optimize``: DSPy's).
- ``--judge-lm JUDGE``: the T2 judge of the OffQuery commands, one metric spec with one default and one help
  (:mod:`groundstate.eval.metric_spec`); ``evaluate`` defaults to the program's own judge.

A command group's module adds its own options and calls these for the shared ones, so every command spells
and documents them the same way; :func:`lm_config_from_args` and :func:`configure_lms` turn the LM options into
the :class:`~groundstate.lm.config.LMConfig` and the configured default LM, and :func:`run_settings` turns the
run options into :class:`~groundstate.eval.run_settings.RunSettings`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import dspy

from groundstate.cli.numbers import (  # noqa: F401  (bounded, share, temperature: re-exported)
    bounded,
    count,
    nonnegative,
    positive,
    positive_int,
    seed,
    share,
    temperature,
)
from groundstate.cli.settings import add_settings, settings_from
from groundstate.eval.consilience.settings import SIM_FIELDS, AgentSettings
from groundstate.eval.run_settings import DEFAULT_MAX_ERROR_RATE, RunSettings
from groundstate.eval.settings import LMSettings
from groundstate.eval.task import RunContext
from groundstate.lm.specs import default_adapter

VERBOSE_HELP = "more logging (-vv for debug); before or after the command"
_LATE_VERBOSE = "_verbose_after_command"  # where a command's own -v counts until the top parser adds them up


class Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other user error, and ``-v`` given after the
    command (:func:`add_verbose_options`) adds to ``verbose``."""

    def error(self, message: str):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if hasattr(namespace, "verbose"):  # the top parser (a command's parser sees only its own namespace)
            namespace.verbose += vars(namespace).pop(_LATE_VERBOSE, 0)
        return namespace, extras


def add_verbose_options(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose`` on ``parser`` and on every command group and command under it, so ``groundstate -v run
    qa`` and ``groundstate run qa -v`` are the same (call after the commands are registered). The counts before
    and after the command add up; a command's own count lives in a hidden attribute the top parser removes."""
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)

    def below(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                    sub.add_argument("-v", "--verbose", action="count", dest=_LATE_VERBOSE,
                                     default=argparse.SUPPRESS, help=VERBOSE_HELP)
                    below(sub)

    below(parser)


def add_lm_options(parser: argparse.ArgumentParser) -> None:
    """``--lm``, ``--api-base``, ``--temperature``, ``--max-tokens``, ``--lm-timeout``, ``--lm-config``,
    ``--lm-threads``, ``--lm-contexts``, ``--lm-quant``: the fields of
    :class:`~groundstate.eval.settings.LMSettings`."""
    add_settings(parser, LMSettings)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The LM options plus ``--threads``, ``--limit``, ``--seed``, ``--shard``, ``--runs-dir``, ``--max-error-rate``,
    ``--no-progress``, ``--backend``, ``--ray-address``, ``--ray-workers``, ``--max-inflight``, ``--max-cost``,
    ``--mlflow`` and ``--allow-empty``."""
    add_lm_options(parser)
    parser.add_argument("--seed", type=seed, default=0, help="seed for anything random (default 0)")
    add_execution_options(parser)
    add_allow_empty(parser)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    """``--limit``, ``--shard`` and ``--runs-dir``: which records a run covers and where its directory is (part of
    the run id: the commands that find stored runs take them too)."""
    parser.add_argument("--limit", type=count, default=None, help="run only the first N records")
    parser.add_argument("--shard", default=None, metavar="i/N",
                        help="run the deterministic shard i of N (0 <= i < N); merge with `groundstate runs merge`")
    add_runs_dir(parser)


def add_execution_options(parser: argparse.ArgumentParser) -> None:
    """The run options besides the LM options, ``--seed`` and ``--allow-empty``: :func:`add_selection_options`,
    ``--max-error-rate``, ``--no-progress``, the backend options and :func:`add_spend_options` (what ``experiment
    run`` takes, whose LMs and seeds come from its spec)."""
    add_selection_options(parser)
    parser.add_argument("--max-error-rate", type=share, default=0.5, metavar="X",
                        help="fail (exit 1, keeping results) once the share of failed records (program error or a "
                             "metric not measured) exceeds X (0-1; default 0.5); a run where every record failed "
                             "exits 1 whatever X is")
    add_progress_option(parser)
    add_backend_options(parser)
    add_spend_options(parser)


MAX_COST_HELP = ("stop cleanly once the priced LM spend of this command reaches USD dollars (LiteLLM's prices; "
                 "every LM must have one): no new record starts, finished ones are kept, exit 1; the same command "
                 "resumes")
MLFLOW_HELP = ("log one MLflow run per run: parameters (program, LM, decoding, judge, data, seed, run id) and summary "
               "metrics, to MLFLOW_TRACKING_URI or ./mlruns (pip install 'groundstate[trace]')")


def add_spend_options(parser: argparse.ArgumentParser) -> None:
    """``--max-cost USD`` (:mod:`groundstate.eval.cost_cap`) and ``--mlflow`` (:mod:`groundstate.eval.mlflow_log`)."""
    parser.add_argument("--max-cost", type=positive, default=None, metavar="USD", help=MAX_COST_HELP)
    parser.add_argument("--mlflow", action="store_true", help=MLFLOW_HELP)


PROGRESS_HELP = ("no progress display (a bar on a terminal; otherwise a line on stderr every 30 s, "
                 "GROUNDSTATE_PROGRESS_INTERVAL seconds if set, and at the end)")
"""The help of ``--no-progress``, the same in every command that has it."""


def add_progress_option(parser: argparse.ArgumentParser, help: str = PROGRESS_HELP) -> None:
    """``--no-progress``: no progress display (dest ``no_progress``). Every command that shows progress takes it
    (part of :func:`add_execution_options`; alone for ``optimize`` and the ``consilience`` steps)."""
    parser.add_argument("--no-progress", action="store_true", help=help)


def shows_progress(args: argparse.Namespace) -> bool:
    """Whether the command shows its progress display: it has ``--no-progress`` and it was not given."""
    return not getattr(args, "no_progress", True)


def add_runs_dir(parser: argparse.ArgumentParser, default: str | None = "runs",
                 help: str = "directory of run directories (default runs/)") -> None:
    """``--runs-dir DIR``: where durable runs live."""
    parser.add_argument("--runs-dir", default=default, metavar="DIR", help=help)


def add_data_option(parser: argparse.ArgumentParser, help: str, required: bool = True, metavar: str = "FILE",
                    flag: str = "--data", default: Any = None) -> None:
    """The input option ``flag`` (``--data``; dest ``data``, or ``<split>_data`` for ``--<split>-data``)."""
    parser.add_argument(flag, required=required, default=default, metavar=metavar, help=help)


def add_report_dir(parser: argparse.ArgumentParser, help: str) -> None:
    """``--report-dir DIR``: where a command writes its tables and charts."""
    parser.add_argument("--report-dir", default=None, metavar="DIR", help=help)


THREADS = 4
"""Default of ``--threads`` (records at once) everywhere."""
CALL_THREADS = 8
"""Default of ``--call-threads`` (LM calls at once inside one record) everywhere."""


def add_threads(parser: argparse.ArgumentParser, unit: str = "records") -> None:
    """``--threads N``: ``unit`` worked on at once (default :data:`THREADS`)."""
    parser.add_argument("--threads", type=positive_int, default=THREADS,
                        help=f"{unit} worked on at once (default {THREADS})")


def add_call_threads(parser: argparse.ArgumentParser, unit: str = "record") -> None:
    """``--call-threads N``: LM calls at once inside one ``unit``."""
    parser.add_argument("--call-threads", type=positive_int, default=CALL_THREADS, metavar="N",
                        help=f"LM calls at once inside one {unit} (default {CALL_THREADS})")


def add_shares(parser: argparse.ArgumentParser, defaults: dict[str, float], what: str = "data") -> None:
    """``--<name>-share X`` for each split ``name``, with its default."""
    for name, default in defaults.items():
        parser.add_argument(f"--{name}-share", type=share, default=default, metavar="X",
                            help=f"share of the {what} in the {name} split (default {default})")


def add_backend_options(parser: argparse.ArgumentParser, unit: str = "records") -> None:
    """``--threads``, ``--backend``, ``--ray-address``, ``--ray-workers`` and ``--max-inflight`` (part of
    :func:`add_run_options`; alone for the commands whose per-item loop is not a durable run, with
    :func:`backend_map`). ``unit`` names what runs concurrently in the help."""
    add_threads(parser, unit)
    parser.add_argument("--backend", choices=("threads", "ray"), default="threads",
                        help=f"where {unit} run: 'threads' in this process (default) or 'ray' tasks on a Ray "
                             "cluster (pip install 'groundstate[ray]'); this process still writes every result")
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="with --backend ray: the cluster's head (HOST:6379, or 'auto'); default: start or "
                             "join a local Ray cluster (RAY_ADDRESS if set)")
    parser.add_argument("--ray-workers", type=positive_int, default=None, metavar="N",
                        help=f"with --backend ray: N worker processes, each running --threads {unit} at once "
                             "(default: the cluster's CPUs)")
    parser.add_argument("--max-inflight", type=positive_int, default=None, metavar="N",
                        help="with --backend ray: at most N concurrent requests per LM across the cluster "
                             "(default: unbounded)")


def add_allow_empty(parser: argparse.ArgumentParser) -> None:
    """``--allow-empty``: accept an input file with no records (otherwise an empty file is an error)."""
    parser.add_argument("--allow-empty", action="store_true",
                        help="accept an input file with no records (by default that is an error, exit 2)")


def lm_settings(args: argparse.Namespace):
    """The :class:`~groundstate.eval.settings.LMSettings` of the LM options (those the command has)."""
    return settings_from(LMSettings, args)


def lm_config_from_args(args: argparse.Namespace):
    """The :class:`~groundstate.lm.config.LMConfig` the options describe (``--lm`` overrides the file's default)."""
    return lm_settings(args).config()


def configure_lms(args: argparse.Namespace) -> tuple[Any, Any]:
    """Build the default LM, make it DSPy's default (with its adapter) and return ``(lm, lm_config)``."""
    config = lm_config_from_args(args)
    lm = config.lm_for(None)
    dspy.configure(lm=lm, adapter=default_adapter(lm))
    return lm, config


def note(text: str) -> None:
    """A task's note to the user, on stderr."""
    print(text, file=sys.stderr)


def context_for(args: argparse.Namespace):
    """The :class:`~groundstate.eval.task.RunContext` of a command: its LM options, the LMs built by
    :func:`configure_lms` when a task first needs them, and notes printed on stderr."""
    return RunContext(lms=lm_settings(args), make_lms=lambda: configure_lms(args), note=note)


def run_settings(args: argparse.Namespace, out: Any = None):
    """The :class:`~groundstate.eval.run_settings.RunSettings` of the run options (``out`` overrides
    ``--runs-dir``)."""
    return RunSettings(out=out if out is not None else getattr(args, "runs_dir", "runs"),
                       threads=getattr(args, "threads", 1), call_threads=getattr(args, "call_threads", CALL_THREADS),
                       limit=getattr(args, "limit", None), shard=getattr(args, "shard", None),
                       max_error_rate=getattr(args, "max_error_rate", DEFAULT_MAX_ERROR_RATE),
                       progress=shows_progress(args), max_cost=getattr(args, "max_cost", None),
                       mlflow=getattr(args, "mlflow", False), **backend_settings(args))


def backend_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~groundstate.eval.run_settings.RunSettings` fields of ``--backend``, ``--ray-address``,
    ``--ray-workers`` and ``--max-inflight`` (with the key-free LM specs Ray workers build their LMs from)."""
    backend = getattr(args, "backend", "threads") or "threads"
    lm_spec = lm_config_from_args(args).worker_spec() if backend == "ray" else None  # no keys: workers use theirs
    return {"backend": backend, "ray_address": getattr(args, "ray_address", None),
            "ray_workers": getattr(args, "ray_workers", None), "max_inflight": getattr(args, "max_inflight", None),
            "lm_spec": lm_spec}


def backend_map(args: argparse.Namespace, needs_lm: bool = True, what: str = "task", progress: str | None = None):
    """The ``map_fn(fn, items)`` of the backend options (:func:`groundstate.eval.task_map.backend_map`);
    ``needs_lm=False`` (simulated agents) ships no LM specs, so Ray workers build no LM. With ``progress`` (the
    display's description) each map shows its progress unless ``--no-progress`` was given."""
    from groundstate.eval.task_map import backend_map as make  # noqa: PLC0415 (--help stays light)

    fields = backend_settings(args)
    if not needs_lm:
        fields["lm_spec"] = None
    settings = RunSettings(out=None, threads=getattr(args, "threads", 1), **fields)
    return make(settings.backend, settings.threads, settings.ray_options(), what,
                progress=progress if shows_progress(args) else None)


class _GivenAgents(argparse.Action):
    """``--agents`` that remembers it was given, so the note about the default appears only when it was not."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.agents_given = True


def add_agent_options(p: argparse.ArgumentParser, default: str = "sim") -> None:
    """``--agents lm|sim``, ``--sim-preset`` and the simulated agents' parameters (hidden-profile and Consilience
    commands; ``sim`` by default everywhere, so a forgotten option never starts a long LM run, and a note on stderr
    says so), from :class:`~groundstate.eval.consilience.settings.AgentSettings`. Every ``--sim-*`` parameter
    defaults to ``None``, meaning the preset's value, so an explicit one overrides the preset (:func:`sim_params`)."""
    at_least_one = bounded(int, 1, None, "a whole number of at least 1 or 'all'")

    def attention(text: str) -> int | str:
        return "all" if text.strip().lower() in ("all", "none") else at_least_one(text)

    attention.bounds = (1, None)  # a range-checked number (or 'all'): see tests/cli/test_grammar.py

    add_settings(p, AgentSettings, only=("agents",), overrides={"agents": {
        "action": _GivenAgents, "default": default, "help": "'lm' (agent i uses role agent.i of --lm-config) or 'sim' "
        f"(seeded simulated agents, offline and fast); default {default}"}})
    sim = p.add_argument_group("simulated agents (--agents sim)",
                               "each parameter defaults to the value of --sim-preset (shown for 'ideal')")
    add_settings(p, AgentSettings, only=SIM_FIELDS, group=sim, overrides={"sim_attention": {"type": attention}})


def sim_params(args: argparse.Namespace):
    """The :class:`~groundstate.programs.consilience.simulated.SimParams` the ``--sim-*`` options describe
    (:meth:`~groundstate.eval.consilience.settings.AgentSettings.sim_params`: the preset with each given parameter
    replacing its value). Values are checked by ``SimParams`` itself (one line naming the ``--sim-`` option)."""
    given = {name: getattr(args, name) for name in AgentSettings.model_fields if getattr(args, name, None) is not None}
    return AgentSettings.model_construct(**given).sim_params()


def add_support_options(p: argparse.ArgumentParser) -> None:
    """``--support`` and ``--support-file``: where simulated agents get per-fact support for tasks without it."""
    add_settings(p, AgentSettings, only=("support", "support_file"))


def agent_settings(model: Any, args: argparse.Namespace, **values: Any):
    """``model`` (a settings model with the agents' fields) from the options; ``--agents`` left out of the
    settings when it was not given, so the task can say that simulated agents run by default."""
    given = dict(vars(args))
    if not given.get("agents_given"):
        given.pop("agents", None)
    return settings_from(model, given, values=values)
