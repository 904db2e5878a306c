"""The shipped specs of the Consilience paper's Tables 6 and 8 from the command line (issue 24, item 4): the offline
one runs and tabulates beside the paper's numbers, and every path the user gives ``consilience-table6`` with
``--set`` that is not a readable file of the right shape is one line with exit status 2, before anything runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli.test_experiment import one_line_error
from tests.test_hostile_files import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module", autouse=True)
def lm_layer_loaded():
    """Import the LM layer once here, so each forked child (which builds the spec's hosted LM, calling nothing)
    inherits it instead of importing it again."""
    from groundstate.compat import quiet_litellm
    from groundstate.lm.specs import describe_lm  # noqa: F401

    quiet_litellm()


def test_the_offline_routing_spec_runs_and_tabulates_from_the_command_line(tmp_path):
    args = ["consilience-table8-sim", "--set", "n=4", "--runs-dir", "runs"]
    code, out, err = run_cli(["experiment", "run", *args, "--cells", "sensitivity:base", "--no-progress"], tmp_path)
    assert code == 0, err
    assert len(list((tmp_path / "runs").glob("consilience-routing-*"))) == 1  # five policies, one run
    code, out, err = run_cli(["experiment", "table", *args, "--no-png"], tmp_path)
    assert code == 0, err
    assert "simulated agents" in out and "Mean ΔJ" in out and "-0.0079" in out and "not run" in out
    table = json.loads((tmp_path / "runs" / "experiment-consilience-table8-sim" /
                        "consilience-table8-sim.json").read_text())
    base = [r for r in table["rows"] if r["keys"]["sensitivity"] == "base"]
    assert len(base) == 5 and all(v["status"] == "measured" for r in base for v in r["values"])


def explore_row(**change) -> str:
    row = {"features": [0.1, 0.2, 0.3, 0.1, 0.5, 0.0, 0.4, 0.1], "rewards": [0.1, -0.2, 0.05, 0.3], **change}
    return json.dumps(row) + "\n"


def hostile(tmp_path: Path, kind: str) -> str:
    """A path that is not a readable exploration (or task) file."""
    if kind == "fifo":
        os.mkfifo(tmp_path / "in.fifo")
        return "in.fifo"
    if kind == "directory":
        (tmp_path / "in.d").mkdir()
        return "in.d"
    if kind == "link-to-fifo":
        os.mkfifo(tmp_path / "target.fifo")
        (tmp_path / "in.link").symlink_to(tmp_path / "target.fifo")
        return "in.link"
    if kind == "missing":
        return "no-such.jsonl"
    if kind == "oversized":
        with open(tmp_path / "big.jsonl", "wb") as f:
            f.truncate(8192)  # sparse: stands for a file over the (lowered) size limit
        return "big.jsonl"
    raise AssertionError(kind)


@pytest.fixture()
def given(tmp_path: Path) -> Path:
    shutil.copy(DATA / "hiddenbench" / "sample.json", tmp_path / "hb.json")
    (tmp_path / "explore.jsonl").write_text(explore_row() * 3)
    return tmp_path


def table6(explore: str = "explore.jsonl", calibration: str = "hb.json", command: str = "plan") -> list[str]:
    return ["experiment", command, "consilience-table6", "--set", "hiddenbench=hb.json", "--set",
            f"calibration={calibration}", "--set", f"explore={explore}", "--runs-dir", "runs"]


@pytest.mark.parametrize("which, kind", [*(("explore", k) for k in ("fifo", "directory", "link-to-fifo", "missing",
                                                                     "oversized")),
                                         ("calibration", "fifo"), ("calibration", "oversized")])
def test_a_path_that_is_not_a_readable_file_is_one_line(given, kind, which):
    path = hostile(given, kind)
    argv = table6(explore=path) if which == "explore" else table6(calibration=path)
    code, out, err = run_cli(argv, given, max_file_bytes=4096 if kind == "oversized" else None)
    one_line_error(code, out, err, path)
    assert not (given / "runs").exists()


@pytest.mark.parametrize("row, field, words", [
    (explore_row(features=[1, 2, 3]), "features", "expected 8"),
    (explore_row(rewards=[1, 2, 3, 4, 5]), "rewards", "Vote column"),
    (explore_row(rewards=[0.1, "x", 0.0, 1.0]), "rewards", "not a finite number"),
    ('{"features": [1, 2\n', None, "explore.jsonl"),
    ("[1, 2, 3]\n", None, "JSON object"),
])
def test_a_malformed_exploration_row_is_one_line_naming_it(given, row, field, words):
    (given / "explore.jsonl").write_text(explore_row() + row)
    code, out, err = run_cli(table6(command="run"), given)  # refused while planning: nothing runs, nothing is written
    one_line_error(code, out, err, "explore.jsonl", words, *([f"field '{field}'"] if field else []))
    assert not (given / "runs").exists()


def test_calibration_tasks_that_are_not_tasks_are_one_line(given):
    (given / "cal.json").write_text(json.dumps([{"name": "t", "options": ["A"]}]))
    code, out, err = run_cli(table6(calibration="cal.json"), given)
    one_line_error(code, out, err, "cal.json")
    assert not (given / "runs").exists()
