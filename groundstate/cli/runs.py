"""``groundstate runs list|show|merge``: stored runs, and joining the shards of one run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from groundstate.cli.numbers import count
from groundstate.cli.options import Parser, add_runs_dir
from groundstate.cli.output import cell, print_summary
from groundstate.errors import ConfigError, InputError, one_line


def register(sub: argparse._SubParsersAction) -> None:
    runs = sub.add_parser("runs", help="stored runs: list, show, merge shards")
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND", parser_class=Parser)
    runs_sub.required = True
    p = runs_sub.add_parser("list", help="list stored runs and their state",
                            description="One row per run: records done/selected, errors and its state: running "
                            "(a live process holds the run's lock), killed (ended without its final summary), "
                            "stopped (with the reason), incomplete or complete.")
    add_runs_dir(p)
    p.set_defaults(func=cmd_runs_list)
    p = runs_sub.add_parser("show", help="show one run's configuration and summary")
    p.add_argument("run", help="run id (or a unique prefix) or run directory")
    add_runs_dir(p)
    p.add_argument("--json", action="store_true", help="print config and summary as JSON")
    p.add_argument("--errors", type=count, default=5,
                   help="show up to N failed records (and up to N records with a metric not measured)")
    p.add_argument("--trace", action="store_true",
                   help="also show each record's stored trace: ReGround stage by stage (the conflict pairs, who was "
                        "blamed, the facts kept and dropped, the answer) beside the gold labels and T1/T2/T3")
    p.add_argument("--record", default=None, metavar="ID", help="with --trace: only the record with this id")
    p.add_argument("--data", default=None, metavar="FILE",
                   help="with --trace: the OffQuery file the run ran on, for the gold labels (checked against the "
                        "sha256 the run recorded; a run on --data synthetic is regenerated without it)")
    p.set_defaults(func=cmd_runs_show)
    p = runs_sub.add_parser("merge", help="merge the shards of one run into a single run")
    p.add_argument("runs", nargs="+", help="run ids or directories (the shards)")
    add_runs_dir(p)
    p.set_defaults(func=cmd_runs_merge)


def lm_label(config: dict) -> str:
    """What answered a run's records, for ``runs list``: its LM's model, "simulated agents" for a discussion run
    whose agents were simulated (no LM), "none" for a run that called no LM."""
    lm = config.get("lm") if isinstance(config.get("lm"), dict) else {}
    if isinstance(lm.get("model"), str):
        return lm["model"]
    options = config.get("options") if isinstance(config.get("options"), dict) else {}
    agents = options.get("agents") if isinstance(options.get("agents"), dict) else {}
    return "simulated agents" if agents.get("kind") == "sim" else "none"


def cmd_runs_list(args: argparse.Namespace) -> int:
    from rich.table import Table  # noqa: PLC0415 (--help stays light)

    from groundstate.cli.tables import console  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.runs import list_runs  # noqa: PLC0415 (--help stays light)

    runs = list_runs(args.runs_dir)
    if not runs:
        print(f"no runs under {one_line(args.runs_dir)}/")
        return 0
    table = Table()
    for col in ("run id", "program", "LM", "records", "errors", "state"):
        table.add_column(col)
    for run in runs:
        s, config = run["summary"], run["config"]
        table.add_row(*(cell(v) for v in (run["run_id"], config.get("program"), lm_label(config),
                                          f"{s.get('n_done')}/{s.get('n_selected')}", s.get("n_error"),
                                          run["state"])))
    console().print(table)
    return 0


def cmd_runs_show(args: argparse.Namespace) -> int:
    from groundstate.eval.runs import load_run, resolve_run_dir  # noqa: PLC0415 (--help stays light)

    if (args.record is not None or args.data is not None) and not args.trace:
        raise ConfigError("--record and --data go with --trace (they choose and label the traces shown)")
    if args.trace and args.json:
        raise ConfigError("--trace shows the traces as text and --json prints the config and summary: give one "
                          "(the traces as JSON are the 'trace' field of the run's results.jsonl)")
    run = load_run(resolve_run_dir(args.runs_dir, args.run))
    gold = None
    if args.trace:  # the data is checked before anything is printed
        from groundstate.eval.reground.trace import run_gold  # noqa: PLC0415 (--help stays light)

        gold = run_gold(run["config"], args.data)
    if args.json:
        print(json.dumps({k: run[k] for k in ("run_id", "config", "summary")}, indent=2))
        return 0
    print(f"run {one_line(run['run_id'], None)} ({one_line(run['dir'], None)})")
    print("config: " + json.dumps({k: v for k, v in run["config"].items() if k != "run_id"}))  # ASCII-escaped
    print_summary(run["summary"], config=run["config"])
    failed = [r for r in run["rows"] if r.get("error")]
    for row in failed[: args.errors]:
        print(f"  error on {one_line(row['id'])}: {one_line(row['error'], 200)}")
    unscored = [r for r in run["rows"] if not r.get("error") and isinstance(r.get("score_errors"), dict)
                and r["score_errors"]]
    for row in unscored[: args.errors]:  # the program succeeded; a metric (the judge's) could not be measured
        names = ", ".join(one_line(name, 40) for name in row["score_errors"])
        text = next(iter(row["score_errors"].values()))
        print(f"  not measured on {one_line(row['id'])} ({names}): {one_line(text, 200)}")
    if args.trace:
        print_traces(run, gold, args.record)
    return 0


def print_traces(run: dict, gold: dict | None = None, record: str | None = None) -> None:
    """Print the stored trace of each record of ``run`` (:func:`~groundstate.eval.runs.load_run`), or of the record
    ``record`` only, as :func:`~groundstate.eval.reground.trace.trace_lines` shows it, with ``gold`` (``{id:
    {"misleading", "answer"}}``, :func:`~groundstate.eval.reground.trace.run_gold`), else the labels the row stores
    itself (:func:`~groundstate.eval.reground.trace.row_gold`), beside it when known. Plain
    ``print``: every line is escaped by ``trace_lines`` and nothing is read as markup.

    Raises:
        InputError: ``record`` is not a record of the run.
    """
    from groundstate.eval.reground.trace import row_gold, trace_lines  # noqa: PLC0415 (--help stays light)

    rows = [r for r in run["rows"] if record is None or r.get("id") == record]
    if record is not None and not rows:
        raise InputError(f"no record '{one_line(record, 120)}' in run {one_line(run['run_id'], 80)}",
                         file=str(Path(run["dir"]) / "results.jsonl"))
    program = run["config"].get("program")
    print(f"traces of run {one_line(run['run_id'], None)} (program {one_line(program, 60)}; {len(rows)} "
          f"record{'' if len(rows) == 1 else 's'})")
    for row in rows:
        rid = row.get("id")
        known = (gold or {}).get(rid) if isinstance(rid, str) else None
        for line in trace_lines(row, known if known is not None else row_gold(row)):
            print(line)


def cmd_runs_merge(args: argparse.Namespace) -> int:
    from groundstate.eval.runs import merge_runs, resolve_run_dir  # noqa: PLC0415 (--help stays light)

    runs = [resolve_run_dir(args.runs_dir, r) for r in args.runs]
    merged = merge_runs(runs, out=args.runs_dir)
    print_summary(merged["summary"], config=merged.get("config"))
    missing = merged["summary"]["shards"]["missing"]
    print(f"merged {len(runs)} shards into {one_line(merged['dir'], None)}"
          + (f" (missing shards: {one_line(missing)})" if missing else ""))
    return 0


def show_run_traces(run_dir: str | Path, data: str | None) -> None:
    """After a run (``run PROGRAM --show-trace``, ``compare --show-trace``): print its traces (:func:`print_traces`)
    with the gold labels of ``data``, the run's own ``--data`` (``synthetic`` or ``None``: regenerated from the run's
    config)."""
    from groundstate.eval.reground.trace import run_gold  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.runs import load_run  # noqa: PLC0415 (--help stays light)

    run = load_run(run_dir)
    print_traces(run, run_gold(run["config"], data if data not in (None, "synthetic") else None))
