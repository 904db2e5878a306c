"""``groundstate experiment plan|run|table SPEC``: a paper table as data (:mod:`groundstate.eval.experiments`).

    groundstate experiment list                                              # the shipped specs
    groundstate experiment plan reground-table1-synthetic --set n=5          # calls, tokens, dollars, stored
    groundstate experiment run reground-table1-synthetic --lm openai/gpt-4o   # exactly the spec's cells
    groundstate experiment table reground-table1-synthetic --lm openai/gpt-4o # beside the paper's numbers

``SPEC`` is a spec file or the name of a shipped spec. ``--lm`` replaces the spec's models (the values of its
model axis, or its default LM), ``--set NAME=VALUE`` gives its inputs. The three commands plan the same cells
(the same run ids), so ``table`` finds exactly what ``run`` wrote; give them the same ``--set``, ``--lm``,
``--runs-dir`` and ``--limit``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from groundstate.cli.numbers import positive


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("experiment", help="paper tables as data: plan, run and tabulate a spec's cells")
    cmds = group.add_subparsers(dest="experiment_command", metavar="COMMAND", parser_class=type(group))
    cmds.required = True

    p = cmds.add_parser("list", help="the shipped specs: name, paper table, whether it runs offline, its inputs",
                        description="List the experiment specs shipped with groundstate (one per paper table it can "
                        "reproduce); give a name to plan, run or table.")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_list)

    p = cmds.add_parser("plan", help="per cell, without any LM call: run id, records, stored state, LM calls, "
                        "tokens and dollars", description="Plan every cell of the spec and count what it will cost "
                        "by a dry run with a counting scripted LM (no LM is called, nothing is written).")
    _common(p)
    _selection(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_plan)

    p = cmds.add_parser("run", help="run exactly the spec's cells, durably (resumable, threads or Ray, shardable)",
                        description="Run every cell of the spec (or those --cells selects) through the durable "
                        "runner; a finished cell is not run again, a failed one is reported and the others run.")
    _common(p)
    from groundstate.cli.options import add_call_threads, add_execution_options  # noqa: PLC0415 (--help stays light)

    add_execution_options(p)
    add_call_threads(p)
    # the spec's [defaults.run] applies where the command line leaves an option at its usual default
    p.set_defaults(func=cmd_run, usual={a.dest: a.default for a in p._actions if a.dest in SPEC_RUN_OPTIONS})

    p = cmds.add_parser("table", help="the table of exactly the spec's cells, beside the paper's numbers "
                        "(Markdown, JSON, PNG, terminal)", description="Tabulate each cell from the run its plan "
                        "names (or a run the spec adopts), refusing runs that differ from their cell.")
    _common(p, cells=False)
    _selection(p)
    p.add_argument("--use-run", action="append", default=[], metavar="CELL=RUN",
                   help="adopt a stored run (id or directory) for one cell (a selector such as "
                        "method:Standard,data:healthcare); it must match the cell's plan (repeatable)")
    from groundstate.cli.options import add_report_dir  # noqa: PLC0415 (--help stays light)

    add_report_dir(p, "where to write the table (default <runs-dir>/experiment-<name>)")
    p.add_argument("--no-png", action="store_true", help="skip the chart")
    p.set_defaults(func=cmd_table)


def _common(p: argparse.ArgumentParser, cells: bool = True) -> None:
    p.add_argument("spec", metavar="SPEC", help="an experiment spec (TOML) or the name of a shipped one")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="inputs",
                   help="a value for one of the spec's [inputs] (repeatable)")
    p.add_argument("--lm", nargs="+", default=None, metavar="MODEL",
                   help="the models under test, replacing the spec's (its model axis, or its default LM)")
    p.add_argument("--api-base", default=None, metavar="URL", help="server URL of every hosted LM of the spec")
    p.add_argument("--lm-timeout", type=positive, default=None, metavar="SECONDS",
                   help="give up on an LM call after SECONDS (hosted LMs)")
    if cells:
        p.add_argument("--cells", action="append", default=None, metavar="SELECTOR",
                       help="only the cells matching SELECTOR (axis:value pairs joined by commas; repeatable)")


def _selection(p: argparse.ArgumentParser) -> None:
    from groundstate.cli.options import add_selection_options  # noqa: PLC0415 (--help stays light)

    add_selection_options(p)


def load(args: argparse.Namespace) -> Any:
    """The spec the options name, with its inputs, models and LM options applied."""
    from groundstate.eval.experiments.cells import with_lm_options, with_models  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.load import load_spec, parse_assignments  # noqa: PLC0415 (--help stays light)

    spec = load_spec(args.spec, parse_assignments(args.inputs))
    return with_lm_options(with_models(spec, args.lm), args.api_base, args.lm_timeout)


#: Run options a spec's ``[defaults.run]`` may set (``groundstate.eval.experiments.spec.RunDefaults``).
SPEC_RUN_OPTIONS = ("threads", "call_threads", "max_error_rate", "backend", "ray_workers", "max_inflight")


def run_settings(spec: Any, args: argparse.Namespace) -> Any:
    """The run settings: the spec's ``defaults.run``, replaced by every option given on the command line with
    another value than its usual default (an option left at its usual default keeps the spec's value)."""
    from groundstate.eval.identity import parse_shard  # noqa: PLC0415 (--help stays light)

    given: dict[str, Any] = {"out": args.runs_dir, "limit": args.limit, "shard": parse_shard(args.shard),
                             "ray_address": getattr(args, "ray_address", None)}
    usual = getattr(args, "usual", {})
    for name in SPEC_RUN_OPTIONS:
        value = getattr(args, name, None)
        given[name] = None if name in usual and value == usual[name] else value
    if hasattr(args, "no_progress"):
        given["progress"] = not args.no_progress
    given.update(max_cost=getattr(args, "max_cost", None), mlflow=getattr(args, "mlflow", None) or None)
    return spec.run_settings(given)


def _note(text: str) -> None:
    print(text, file=sys.stderr)


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _dollars(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.4f}"


def cmd_list(args: argparse.Namespace) -> int:
    from groundstate.cli.tables import console, print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.load import shipped_specs  # noqa: PLC0415 (--help stays light)

    specs = shipped_specs()
    if args.json:
        print(json.dumps(specs, indent=2))
        return 0
    rows = [[s["name"], f"{s['paper']} {s['table']}".strip(), "yes" if s["offline"] else "no",
             ", ".join(s["required"]) or "-", str(s["references"]), s["title"]] for s in specs]
    header = ["name", "paper table", "offline", "--set required", "paper values", "title"]
    print_table(rows, columns=header, headers=header, title="shipped experiment specs", out=console())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from groundstate.cli.output import cell  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import console, print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.plan import plan_experiment  # noqa: PLC0415 (--help stays light)

    spec = load(args)
    plan = plan_experiment(spec, run_settings(spec, args), cells=args.cells, note=_note)
    if args.json:
        print(json.dumps(plan_json(plan), indent=2))
        return 0
    rows = []
    for row in plan.rows:
        count = row.count
        mark = "" if count.exact else "~"
        rows.append([row.label, row.cell.run_id, str(count.records), row.stored.describe(), _number(count.calls),
                     mark + _number(count.input_tokens), mark + _number(count.output_tokens),
                     _dollars(count.cost) if count.calls else "$0", count.method])
    out = console()
    header = ["cell", "run id", "records", "stored", "LM calls", "input tokens", "output tokens", "dollars",
              "counted by"]
    print_table(rows, columns=header, headers=header, title=f"plan: {spec.experiment.title}", out=out)
    for name, only in (("total", False), ("still to run", True)):
        t = plan.totals(only)
        out.print(cell(f"{name}: {t['runs']} run(s), {_number(t['calls'])} LM calls, {_number(t['input_tokens'])} "
                       f"input and {_number(t['output_tokens'])} output tokens, {_dollars(t['cost'])}", None))
    out.print(cell("note: " + plan.assumptions, None))
    return 0


def plan_json(plan: Any) -> dict[str, Any]:
    """The plan as JSON (cells, their counts per model, the totals and what the counts assume)."""

    return {"spec": plan.spec.source, "experiment": plan.spec.experiment.name, "assumptions": plan.assumptions,
            "cells": [{"cell": r.label, "run_id": r.cell.run_id, "task": r.cell.task.name,
                       "stored": {"state": r.stored.state, "done": r.stored.done, "selected": r.stored.selected},
                       "records": r.count.records, "counted_by": r.count.method, "dry_run_failures": r.count.failed,
                       "calls": r.count.calls, "input_tokens": r.count.input_tokens,
                       "output_tokens": r.count.output_tokens, "dollars": r.count.cost,
                       "by_model": [asdict(u) for u in r.count.usage]} for r in plan.rows],
            "total": plan.totals(), "still_to_run": plan.totals(only_to_run=True)}


def cmd_run(args: argparse.Namespace) -> int:
    from groundstate.cli.output import cell, report_failed_runs  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import console  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.execute import run_experiment  # noqa: PLC0415 (--help stays light)

    spec = load(args)
    out = console()
    outcome = run_experiment(spec, run_settings(spec, args), cells=args.cells, note=_note,
                             on_start=lambda c: out.print(cell(f"{c.cell.label} ({c.run_id})", None), style="bold"))
    for o in outcome.outcomes:
        summary = o.summary or {}
        stopped = o.failed and o.failed.startswith("stopped")  # by --max-error-rate or at the --max-cost cap
        state = (o.failed if stopped else f"failed: {o.failed}") if o.failed else \
            ("same run as an earlier cell" if o.reused else "done")
        out.print(cell(f"{o.label}: {o.run_id}, {summary.get('n_done', 0)}/{summary.get('n_selected', 0)} records, "
                       f"{(summary.get('lm_calls') or {}).get('total', 0)} LM calls ({state})", None))
    return report_failed_runs(outcome.summaries())


def print_built_table(table: Any, out: Any = None) -> None:
    """Print a built table (:class:`groundstate.eval.experiments.table.Table`) in the terminal: its header lines, a
    rich table (the subtitle as its caption), the paper's values for cells not in it, and its notes. Shared by
    ``experiment table`` and the front-ends (``compare --paper-tables``, ``consilience table``)."""
    from groundstate.cli.output import cell  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import console, print_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.render import cells as table_cells  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.render import paper_only_lines, title  # noqa: PLC0415 (--help stays light)

    out = out or console()
    for line in table.header:
        out.print(cell(line, None))
    header, body = table_cells(table)
    print_table(body, columns=header, headers=header, title=title(table), out=out, caption=table.subtitle)
    if table.paper_only:
        out.print(cell("paper values for cells not in this table:", None))
        for line in paper_only_lines(table):
            out.print(cell(f"  {line}", None))
    for note in table.notes:
        out.print(cell(f"note: {note}", None))


def cmd_table(args: argparse.Namespace) -> int:

    from groundstate.cli.output import cell  # noqa: PLC0415 (--help stays light)
    from groundstate.cli.tables import console  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.render import write_table  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.experiments.table import build_table  # noqa: PLC0415 (--help stays light)

    spec = load(args)
    table = build_table(spec, run_settings(spec, args), use_runs=args.use_run, note=_note)
    report_dir = Path(args.report_dir or Path(args.runs_dir) / f"experiment-{spec.experiment.name}")
    paths = write_table(table, report_dir, png=not args.no_png)
    out = console()
    print_built_table(table, out)
    out.print(cell("wrote " + ", ".join(paths.values()), None))
    return 0
