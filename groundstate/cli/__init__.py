"""The ``groundstate`` command.

Every command has ``--help``. A mistake the user can fix (bad file, bad record, unknown LM spec, unreadable
LM config, bad option) prints one line and exits with status 2; an interrupted run exits 130 and resumes
when the same command is run again.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from groundstate.errors import GroundstateError, install_log_scrubbing, scrub_secrets

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

logger = logging.getLogger("groundstate")

# Command groups contributed by other modules: each is a callable(subparsers) that adds its parsers.
COMMAND_GROUPS: list[Callable[[argparse._SubParsersAction], None]] = []


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other user error."""

    def error(self, message: str):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------------------------------------
# Shared options
# ---------------------------------------------------------------------------------------------------------


def add_lm_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lm", default=None, metavar="SPEC",
                        help="LM spec: 'embedded' (default, offline SmolLM2) or a LiteLLM model string "
                             "such as openai/gpt-4o-mini, ollama_chat/qwen3:8b, hosted_vllm/<model>")
    parser.add_argument("--api-base", default=None, help="server URL for --lm (vLLM, Ollama, any OpenAI-compatible)")
    parser.add_argument("--temperature", type=float, default=None, help="sampling temperature for --lm")
    parser.add_argument("--max-tokens", type=int, default=None, help="output token limit per call for --lm")
    parser.add_argument("--lm-timeout", type=float, default=None, metavar="SECONDS",
                        help="give up on an LM call after SECONDS (hosted LMs; default 120; the failed call is "
                             "recorded as that record's error). The embedded LM is local and ignores it")
    parser.add_argument("--lm-config", default=None, metavar="FILE",
                        help="TOML file of LM settings: [default] and [roles.<pattern>] (one LM per agent role)")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    add_lm_options(parser)
    parser.add_argument("--threads", type=int, default=4, help="records run concurrently (default 4)")
    parser.add_argument("--limit", type=int, default=None, help="run only the first N records")
    parser.add_argument("--seed", type=int, default=0, help="seed for anything random (default 0)")
    parser.add_argument("--shard", default=None, metavar="i/N",
                        help="run the deterministic shard i of N (0 <= i < N); merge with `groundstate runs merge`")
    parser.add_argument("--out", default="runs", help="directory of run directories (default runs/)")
    parser.add_argument("--max-error-rate", type=float, default=None, metavar="X",
                        help="stop the run once the share of failed records exceeds X (0-1), keeping results")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_allow_empty(parser)


def add_allow_empty(parser: argparse.ArgumentParser) -> None:
    """``--allow-empty``: accept an input file with no records (otherwise an empty file is an error)."""
    parser.add_argument("--allow-empty", action="store_true",
                        help="accept an input file with no records (by default that is an error, exit 2)")


def lm_config_from_args(args: argparse.Namespace):
    """The :class:`~groundstate.lm.LMConfig` the options describe (``--lm`` overrides the file's default)."""
    from groundstate.lm.config import LMConfig
    from groundstate.lm.specs import EMBEDDED_SPEC

    config = LMConfig.load(args.lm_config) if getattr(args, "lm_config", None) else LMConfig()
    if getattr(args, "lm", None):
        config.default = {"model": args.lm}
    extra = {k: v for k, v in {"api_base": getattr(args, "api_base", None),
                               "temperature": getattr(args, "temperature", None),
                               "max_tokens": getattr(args, "max_tokens", None),
                               "timeout": getattr(args, "lm_timeout", None)}.items() if v is not None}
    if extra:
        config.default = {**config.default, **extra}
    config.default.setdefault("model", EMBEDDED_SPEC)
    return config


def configure_lms(args: argparse.Namespace):
    """Build the default LM, make it DSPy's default (with its adapter) and return ``(lm, lm_config)``."""
    import dspy

    from groundstate.lm.specs import default_adapter

    config = lm_config_from_args(args)
    lm = config.lm_for(None)
    dspy.configure(lm=lm, adapter=default_adapter(lm))
    return lm, config


def program_state_hash(program: Any) -> str:
    from groundstate.eval.runner import canonical_json, fingerprint

    try:
        state = program.dump_state()
    except Exception:  # a program that cannot dump its state is identified by its class only
        state = {}
    return fingerprint({"class": type(program).__qualname__, "state": json.loads(canonical_json(state))}, 16)


def print_summary(result: Any, console: Any = None) -> None:
    """A table of a run's scores with 95% intervals, errors, calls and tokens."""
    from rich.console import Console
    from rich.table import Table

    from groundstate.eval.stats import format_ci

    console = console or Console()
    summary = result.summary if hasattr(result, "summary") else result
    table = Table(title=f"run {summary['run_id']}")
    table.add_column("metric")
    table.add_column("mean [95% CI]", justify="right")
    for name, entry in summary["scores"].items():
        table.add_row(name, format_ci(entry))
    table.add_row("records", f"{summary['n_done']}/{summary['n_selected']} ({summary['n_error']} errors)")
    cached = summary["lm_calls"].get("cached", 0)
    failed = summary["lm_calls"].get("failed", 0)
    notes = [f"{cached} of {summary['lm_calls']['total']} from cache"] if cached else []
    notes += [f"{failed} of {summary['lm_calls']['total']} failed"] if failed else []
    table.add_row("LM calls / record", f"{summary['lm_calls']['per_record']:.1f}"
                  + (f" ({'; '.join(notes)})" if notes else ""))
    table.add_row("tokens / record", f"{summary['tokens']['per_record']:.0f}")
    table.add_row("tokens total (in/out)", f"{summary['tokens']['input']}/{summary['tokens']['output']}")
    console.print(table)
    if hasattr(result, "run_dir"):
        console.print(f"stored in {result.run_dir}")


# ---------------------------------------------------------------------------------------------------------
# groundstate lm check
# ---------------------------------------------------------------------------------------------------------


def cmd_lm_check(args: argparse.Namespace) -> int:
    import dspy

    from groundstate.lm.embedded import EmbeddedEngine
    from groundstate.lm.specs import default_adapter, describe_lm
    from groundstate.signatures.checks import StructuredCheck

    config = lm_config_from_args(args)
    entry = dict(config.spec_for(args.role))
    spec = entry.pop("model")
    from groundstate.lm.specs import get_lm

    lm = get_lm(spec, **{**entry, "cache": False})
    print(f"LM: {json.dumps(describe_lm(lm))}")
    if isinstance(getattr(lm, "engine", None), EmbeddedEngine):
        from groundstate.lm.embedded import load_llama

        started = time.perf_counter()
        load_llama(lm.engine.resolved_path(), lm.engine.n_ctx, lm.engine.n_threads)
        print(f"model file: {lm.engine.resolved_path()} (loaded in {time.perf_counter() - started:.2f}s)")
    predict = dspy.Predict(StructuredCheck)
    with dspy.context(lm=lm, adapter=default_adapter(lm)), dspy.track_usage() as usage:
        started = time.perf_counter()
        try:
            out = predict(question="Which planet is closest to the Sun?",
                          options="A: Mercury\nB: Venus\nC: Earth\nD: Mars")
        except Exception as exc:  # a refused connection, a bad key, a hang, garbage: one line, not a traceback
            from groundstate.lm.faults import lm_failure

            raise lm_failure(exc, lm, "lm check") from None
        elapsed = time.perf_counter() - started
    totals = usage.get_total_tokens().get(lm.model, {})
    inp = int(totals.get("prompt_tokens") or 0)
    outp = int(totals.get("completion_tokens") or 0)
    print(f"structured call: choice={out.choice!r} facts={out.facts!r}")
    print(f"tokens: {inp} in, {outp} out; {elapsed:.2f}s; {outp / elapsed if elapsed else 0:.1f} output tokens/s")
    return 0


# ---------------------------------------------------------------------------------------------------------
# groundstate run NAME
# ---------------------------------------------------------------------------------------------------------


def run_task(args: argparse.Namespace, task_name: str, extra_config: dict[str, Any] | None = None,
             console: Any = None):
    """Build, configure and run a registered task from parsed options; return the :class:`RunResult`."""
    from groundstate.eval.runner import Runner, parse_shard
    from groundstate.eval.tasks import get_task
    from groundstate.lm.specs import describe_lm

    task = get_task(task_name)
    shard = parse_shard(args.shard)
    lm, lm_config = configure_lms(args)
    program = task.build(args)
    lm_config.apply(program)
    records, data = task.load(args)
    config = {
        "program": task.name,
        "program_state": program_state_hash(program),
        "lm": describe_lm(lm),
        "lm_config": lm_config.describe() if lm_config.roles else None,
        "data": data,
        "seed": args.seed,
        "options": task.options(args),
        **(extra_config or {}),
    }
    runner = Runner(program, config, out=args.out, threads=args.threads, inputs=task.inputs_for(args),
                    scorer=task.scorer_for(args), outputs=task.outputs, max_error_rate=args.max_error_rate,
                    progress=not args.no_progress and sys.stderr.isatty())
    return runner.run(records, limit=args.limit, shard=shard, description=task.name)


def cmd_run(args: argparse.Namespace) -> int:
    from groundstate.eval.runner import RunAborted

    try:
        result = run_task(args, args.program)
    except RunAborted as exc:
        print_summary(exc.result)
        print(f"groundstate: {exc}", file=sys.stderr)
        return 1
    print_summary(result)
    return 0


# ---------------------------------------------------------------------------------------------------------
# groundstate runs list/show/merge
# ---------------------------------------------------------------------------------------------------------


def cmd_runs_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from groundstate.eval.runs import list_runs

    runs = list_runs(args.out)
    if not runs:
        print(f"no runs under {args.out}/")
        return 0
    table = Table()
    for col in ("run id", "program", "LM", "records", "errors", "complete"):
        table.add_column(col)
    for run in runs:
        s = run["summary"]
        table.add_row(run["run_id"], str(run["config"].get("program")), str(run["config"].get("lm", {}).get("model")),
                      f"{s.get('n_done')}/{s.get('n_selected')}", str(s.get("n_error")), str(s.get("complete")))
    Console().print(table)
    return 0


def _resolve_run_dir(out: str, name: str) -> str:
    """A run directory from a path, a run id under ``out`` or a unique prefix of one."""
    import glob
    from pathlib import Path

    from groundstate.errors import InputError

    path = Path(name)
    if path.is_dir():
        return str(path)
    if path.is_absolute() or len(path.parts) != 1:
        raise InputError(f"no run directory {name} (it does not exist); see `groundstate runs list --out DIR`")
    candidate = Path(out) / name
    if candidate.is_dir():
        return str(candidate)
    matches = [p for p in Path(out).glob(f"{glob.escape(name)}*") if p.is_dir()] if Path(out).is_dir() else []
    if len(matches) == 1:
        return str(matches[0])
    raise InputError(f"no run '{name}' under {out}/ ({len(matches)} matches); see `groundstate runs list`")


def cmd_runs_show(args: argparse.Namespace) -> int:
    from groundstate.eval.runs import load_run

    run = load_run(_resolve_run_dir(args.out, args.run))
    if args.json:
        print(json.dumps({k: run[k] for k in ("run_id", "config", "summary")}, indent=2))
        return 0
    print(f"run {run['run_id']} ({run['dir']})")
    print("config: " + json.dumps({k: v for k, v in run["config"].items() if k != "run_id"}))
    print_summary(run["summary"])
    failed = [r for r in run["rows"] if r.get("error")]
    for row in failed[: args.errors]:
        print(f"  error on {row['id']}: {row['error'][:200]}")
    return 0


def cmd_runs_merge(args: argparse.Namespace) -> int:
    from groundstate.eval.runs import merge_runs

    runs = [_resolve_run_dir(args.out, r) for r in args.runs]
    merged = merge_runs(runs, out=args.out)
    print_summary(merged["summary"])
    missing = merged["summary"]["shards"]["missing"]
    print(f"merged {len(runs)} shards into {merged['dir']}" + (f" (missing shards: {missing})" if missing else ""))
    return 0


# ---------------------------------------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from groundstate.eval.tasks import load_builtin_tasks

    parser = _Parser(prog="groundstate", description="LM programs for multi-agent decisions from scattered, "
                     "partly wrong information (ReGround/OffQuery, DHD, Consilience).")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    lm = sub.add_parser("lm", help="LM utilities")
    lm_sub = lm.add_subparsers(dest="lm_command", metavar="COMMAND", parser_class=_Parser)
    lm_sub.required = True
    check = lm_sub.add_parser("check", help="which LM, one structured round trip, tokens/s")
    add_lm_options(check)
    check.add_argument("--role", default=None, help="check the LM the --lm-config file gives this role")
    check.set_defaults(func=cmd_lm_check)

    run = sub.add_parser("run", help="run a program over a data set, durably (resumable, shardable)")
    run_sub = run.add_subparsers(dest="program", metavar="PROGRAM", parser_class=_Parser)
    run_sub.required = True
    for task in load_builtin_tasks().values():
        p = run_sub.add_parser(task.name, help=task.help, description=task.help)
        p.add_argument("--data", default=None, help="data file (OffQuery programs: a file or 'synthetic', the default)")
        if task.add_arguments:
            task.add_arguments(p)
        add_run_options(p)
        p.set_defaults(func=cmd_run)

    runs = sub.add_parser("runs", help="stored runs: list, show, merge shards")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND", parser_class=_Parser)
    runs_sub.required = True
    p = runs_sub.add_parser("list", help="list stored runs")
    p.add_argument("--out", default="runs", help="directory of run directories")
    p.set_defaults(func=cmd_runs_list)
    p = runs_sub.add_parser("show", help="show one run's configuration and summary")
    p.add_argument("run", help="run id (or a unique prefix) or run directory")
    p.add_argument("--out", default="runs")
    p.add_argument("--json", action="store_true", help="print config and summary as JSON")
    p.add_argument("--errors", type=int, default=5, help="show up to N failed records")
    p.set_defaults(func=cmd_runs_show)
    p = runs_sub.add_parser("merge", help="merge the shards of one run into a single run")
    p.add_argument("runs", nargs="+", help="run ids or directories (the shards)")
    p.add_argument("--out", default="runs")
    p.set_defaults(func=cmd_runs_merge)

    from groundstate.cli import (
        consilience as cli_consilience,
    )
    from groundstate.cli import (
        data as cli_data,
    )
    from groundstate.cli import (
        dhd as cli_dhd,
    )
    from groundstate.cli import (
        hidden as cli_hidden,
    )
    from groundstate.cli import (
        optimize as cli_optimize,
    )
    from groundstate.cli import (
        reground as cli_offquery,
    )

    for group in (cli_data.register, cli_offquery.register, cli_optimize.register, cli_hidden.register,
                  cli_consilience.register, cli_dhd.register, *COMMAND_GROUPS):
        group(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    install_log_scrubbing()  # a server's error body can echo the key; libraries log such errors
    try:
        return int(args.func(args) or 0)
    except GroundstateError as exc:
        print(f"groundstate: error: {scrub_secrets(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("groundstate: interrupted; everything finished is kept. Run the same command again to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
