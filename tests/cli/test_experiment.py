"""``groundstate experiment list|plan|run|table`` end to end in a child process (issue 24, items 1-4): an offline
shipped spec is listed, planned, run (resumably, a cell filter at a time) and tabulated beside the paper's numbers;
bad input is one line on stderr with exit status 2 and no traceback."""

from __future__ import annotations

import json

from tests.test_hostile_files import run_cli

SPEC = "consilience-table2-sim"
ARGS = ["--set", "n=3", "--runs-dir", "runs"]


def one_line_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]


def test_list_names_every_shipped_spec(tmp_path):
    from groundstate import experiments

    code, out, err = run_cli(["experiment", "list", "--json"], tmp_path)
    assert code == 0, err
    listed = {entry["name"]: entry for entry in json.loads(out)}
    assert set(listed) == set(experiments.names())
    assert listed[SPEC]["offline"] and listed[SPEC]["references"] > 0


def test_plan_run_and_table_of_an_offline_spec(tmp_path):
    code, out, err = run_cli(["experiment", "plan", SPEC, *ARGS, "--json"], tmp_path)
    assert code == 0, err
    plan = json.loads(out)
    assert {c["stored"]["state"] for c in plan["cells"]} == {"not run"} and plan["total"]["calls"] == 0
    assert not (tmp_path / "runs").exists()  # planning writes nothing

    code, out, err = run_cli(["experiment", "run", SPEC, *ARGS, "--cells", "method:Rules", "--no-progress"],
                             tmp_path)
    assert code == 0, err
    code, out, err = run_cli(["experiment", "plan", SPEC, *ARGS, "--json"], tmp_path)
    states = {c["cell"]: c["stored"]["state"] for c in json.loads(out)["cells"]}
    assert {s for cell, s in states.items() if "method:Rules" in cell} == {"complete"}
    assert {s for cell, s in states.items() if "method:Rules" not in cell} == {"not run"}

    code, out, err = run_cli(["experiment", "table", SPEC, *ARGS, "--no-png"], tmp_path)
    assert code == 0, err
    assert "simulated agents" in out and "not run" in out and "65.44" not in out  # the table shows 4 digits
    assert "0.6544" in out and "not in the available text" in out
    report = tmp_path / "runs" / f"experiment-{SPEC}"
    table = json.loads((report / f"{SPEC}.json").read_text())
    rules = [r for r in table["rows"] if r["labels"]["method"] == "Rules" and r["keys"]["sensitivity"] == "base"]
    shown = {v["metric"]: v for v in rules[0]["values"]}
    assert shown["task_accuracy"]["status"] == "measured"
    assert shown["task_accuracy"]["reference"]["value"] == 0.6544 and shown["task_accuracy"]["difference"] is not None

    # an adopted run of another cell is refused with one line naming the cell and the field
    rules_run = next(run for cell, run in table["runs"].items() if cell.startswith("method:Rules,sensitivity:base"))
    code, out, err = run_cli(["experiment", "table", SPEC, *ARGS, "--no-png", "--use-run",
                              f"method:Hidden-Post,sensitivity:base={rules_run}"], tmp_path)
    one_line_error(code, out, err, "method:Hidden-Post", rules_run, "differs from the cell's plan")


def test_bad_specs_and_options_are_one_line_with_status_2(tmp_path):
    (tmp_path / "bad.toml").write_text('[experiment]\nname = "bad"\ntitle = "x"\n[layout]\nmetrics = ["a"]\n'
                                       '[defaults]\njudge = "auto"\n')
    one_line_error(*run_cli(["experiment", "plan", "bad.toml"], tmp_path), "bad.toml", "defaults.judge", "auto")
    one_line_error(*run_cli(["experiment", "plan", "no-such-spec"], tmp_path), "no experiment spec", SPEC)
    one_line_error(*run_cli(["experiment", "plan", SPEC, "--set", "m=3"], tmp_path), "no input 'm'")
    one_line_error(*run_cli(["experiment", "run", SPEC, *ARGS, "--cells", "methd:Rules"], tmp_path), "methd")
    one_line_error(*run_cli(["experiment", "table", SPEC, *ARGS, "--use-run", "method:Rules"], tmp_path),
                   "CELL=RUN")
    assert not (tmp_path / "runs").exists()
