"""Every command's output paths, checked once before the command does any work.

:data:`OUTPUTS` lists, for each command that writes, the option that names each output, whether it is a file or a
directory and what the command writes into a directory. :func:`check_outputs` runs before the command (from
:func:`groundstate.cli.main`) and applies :func:`groundstate.paths.check_output` to each: an output that is one of
the command's inputs (``split --data x.jsonl --out x.jsonl``), a directory where a file is written, a file where
a directory is needed, or a path under a file is one line and exit status 2, before any data is read or any LM
is called. The inputs are every option that names a file or directory the command reads (:data:`INPUTS`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groundstate.paths import check_output

#: Options that name what a command reads (a list option, or ``NAME=DIR`` items, count each path).
INPUTS = ("data", "val_data", "calibration_data", "t2_truth", "t2_facts", "explore", "mlp", "calibrator",
          "support_file", "labels", "lm_config", "dir", "analysis")

#: Entries a DHD cache directory holds (see :mod:`groundstate.eval.dhd.cache`).
CACHE_ENTRIES = ("cache.json", "problems.jsonl", "messages.jsonl", "runs")

Writes = tuple[str, ...] | None | Callable[[argparse.Namespace], tuple[str, ...]]


def _split_outputs(args: argparse.Namespace) -> tuple[str, ...]:
    stem = Path(args.data).name.split(".")[0]
    return (*(f"{stem}.{name}.jsonl" for name in ("train", "val", "test")), f"{stem}.splits.json")


def _consilience_split_outputs(args: argparse.Namespace) -> tuple[str, ...]:
    stem = Path(args.data).with_suffix("").name
    return tuple(f"{stem}.{name}.jsonl" for name in ("train", "calibration", "test"))


def _beside_data(args: argparse.Namespace) -> str:
    return str(Path(args.data).parent)


RUNS: tuple[str, str, Writes] = ("runs_dir", "dir", ())
REPORT: tuple[str, str, Writes] = ("report_dir", "dir", ())

#: ``module.function`` of a command -> its outputs: ``(option, "file" | "dir", writes)``. For a directory,
#: ``writes`` is what the command writes into it (each checked against the inputs; ``()`` for run and report
#: directories, whose entries are named by the command itself) or ``None`` when the command owns the whole
#: directory (no input may lie inside it). An option may be a callable giving the path from the arguments.
OUTPUTS: dict[str, list[tuple[Any, str, Writes]]] = {
    "groundstate.cli.optimize.cmd_split": [(lambda a: a.out or _beside_data(a), "dir", _split_outputs)],
    "groundstate.cli.optimize.cmd_optimize": [("out", "dir", None)],
    "groundstate.cli.optimize.cmd_evaluate": [REPORT, RUNS],
    "groundstate.cli.data.cmd_generate_offquery": [("out", "file", None)],
    "groundstate.cli.data.cmd_build_offquery": [("out", "file", None)],
    "groundstate.cli.hidden.cmd_generate_travel": [("out", "file", None)],
    "groundstate.cli.hidden.cmd_hidden_annotate": [("out", "file", None)],
    "groundstate.cli.hidden.cmd_hidden_run": [RUNS],
    "groundstate.cli.run.cmd_run": [RUNS],
    "groundstate.cli.reground.cmd_compare": [REPORT, RUNS],
    "groundstate.cli.runs.cmd_runs_merge": [RUNS],
    "groundstate.cli.consilience.cmd_split": [(_beside_data, "dir", _consilience_split_outputs)],
    "groundstate.cli.consilience.cmd_explore": [("out", "file", None)],
    "groundstate.cli.consilience.cmd_train": [("out", "dir", None)],
    "groundstate.cli.consilience.cmd_calibrate": [("out", "dir", None)],
    "groundstate.cli.consilience.cmd_evaluate": [REPORT, RUNS],
    "groundstate.cli.consilience.cmd_table": [REPORT, RUNS],
    "groundstate.cli.consilience_studies.cmd_coverage": [("json_out", "file", None)],
    "groundstate.cli.consilience_studies.cmd_routing": [("json_out", "file", None)],
    "groundstate.cli.consilience_studies.cmd_ablate": [("json_out", "file", None)],
    "groundstate.cli.consilience_studies.cmd_generalize": [("json_out", "file", None)],
    "groundstate.cli.dhd.cmd_generate": [("cache", "dir", CACHE_ENTRIES), RUNS],
    "groundstate.cli.dhd.cmd_replay": [RUNS],
    "groundstate.cli.dhd.cmd_mask": [RUNS],
    "groundstate.cli.dhd.cmd_analyze": [REPORT, RUNS],
    "groundstate.cli.dhd_crossfit.cmd_crossfit": [REPORT, RUNS],
    "groundstate.cli.dhd_simulate.cmd_simulate": [("cache", "dir", None)],
    "groundstate.cli.dhd_tables.cmd_tables": [REPORT],
    "groundstate.cli.experiment.cmd_plan": [],  # reads the runs directory (what is stored), writes nothing
    "groundstate.cli.experiment.cmd_run": [RUNS],
    "groundstate.cli.experiment.cmd_table": [REPORT],
}


def inputs_of(args: argparse.Namespace) -> list[str]:
    """Every path the parsed command reads (the options of :data:`INPUTS` that are set)."""
    found: list[str] = []
    for name in INPUTS:
        value = getattr(args, name, None)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and item:
                found.append(item.partition("=")[2] if name == "calibrator" and "=" in item else item)
    return found


def check_outputs(args: argparse.Namespace) -> None:
    """Check the outputs of the parsed command (see the module docstring); one line for the first bad one.

    Raises:
        InputError: an output that is an input, of the wrong kind, or under a file.
    """
    func = getattr(args, "func", None)
    key = f"{getattr(func, '__module__', '')}.{getattr(func, '__name__', '')}"
    specs = OUTPUTS.get(key, [])
    if not specs:
        return
    sources = inputs_of(args)
    for option, kind, writes in specs:
        path = option(args) if callable(option) else getattr(args, option, None)
        if not path:
            continue
        what = "the output directory" if callable(option) else "--" + option.replace("_", "-")
        names = writes(args) if callable(writes) else writes
        check_output(path, kind=kind, inputs=sources, what=what, writes=names)
