import json

import pytest

from groundstate import cli
from groundstate.cli import hidden as cli_hidden
from groundstate.eval.benchmarks.hiddenbench import load_hidden_tasks
from groundstate.eval.benchmarks.travel.records import TravelTask
from groundstate.eval.benchmarks.travel.validator import validate_travel
from tests.helpers import DATA as TEST_DATA

DATA = TEST_DATA / "hiddenbench"


@pytest.fixture(autouse=True)
def _hidden_commands(monkeypatch):
    """Register the `hidden` group unless the CLI already does (it will once the lead wires it in)."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    if "hidden" not in commands:
        monkeypatch.setattr(cli, "COMMAND_GROUPS", [*cli.COMMAND_GROUPS, cli_hidden.register])


def test_generate_travel_writes_tasks_and_prints_the_answer_distribution(tmp_path, capsys):
    out = tmp_path / "travel.jsonl"
    assert cli.main(["hidden", "generate", "travel", "--n", "8", "--seed", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"wrote 8 travel tasks to {out}" in text and "answers: A 2, B 2, C 2, D 2" in text
    tasks = load_hidden_tasks(out)
    assert [t.id for t in tasks] == [f"travel-3-{i}" for i in range(8)]
    for task in tasks:
        assert validate_travel(TravelTask.model_validate(task.structure)) == []
    assert cli.main(["hidden", "generate", "travel", "--n", "4", "--seed", "3", "--travelers", "4",
                     "--out", str(out)]) == 0
    assert {t.n_agents for t in load_hidden_tasks(out)} == {4}


def test_validate_generated_and_hiddenbench_files(tmp_path, capsys):
    out = tmp_path / "travel.jsonl"
    cli.main(["hidden", "generate", "travel", "--n", "5", "--out", str(out)])
    capsys.readouterr()
    assert cli.main(["hidden", "validate", "--data", str(out)]) == 0
    assert "5 tasks loaded (5 checked against the travel validator), 0 problem(s)" in capsys.readouterr().out
    assert cli.main(["hidden", "validate", "--data", str(DATA / "sample.json")]) == 0
    assert "3 tasks loaded, 0 problem(s)" in capsys.readouterr().out


def test_validate_reports_every_travel_violation_and_exits_2(tmp_path, capsys):
    out = tmp_path / "travel.jsonl"
    cli.main(["hidden", "generate", "travel", "--n", "3", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    structure = rows[1]["structure"]
    structure["name"] = "Not Snake"
    structure["agents"][0]["preferences"][0]["statement"] = "I like nice trips."
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert cli.main(["hidden", "validate", "--data", str(out)]) == 2
    lines = capsys.readouterr().out.splitlines()
    prefix = f"{out}: record {rows[1]['id']}: "
    assert f"{prefix}name 'Not Snake' is not a short snake_case name" in lines
    assert any(line.startswith(prefix + "statement of t1_") and "does not state its predicate" in line
               for line in lines)
    assert f"{prefix}field 'private' differs from what its travel structure gives" in lines
    assert lines[-1].startswith("3 tasks loaded (3 checked against the travel validator), 4 problem(s)")


def test_validate_bad_hiddenbench_file(tmp_path, capsys):
    assert cli.main(["hidden", "validate", "--data", str(DATA / "mixed.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "mixed.json" in err and "record 1 (id 'bad-2')" in err
    assert "field 'correct_answer'" in err
    assert cli.main(["hidden", "validate", "--data", str(DATA / "mixed.json"), "--skip-invalid"]) == 2
    out = capsys.readouterr().out
    assert out.count("(record skipped)") == 2 and "2 tasks loaded, 2 problem(s)" in out
    assert cli.main(["hidden", "validate", "--data", str(DATA / "malformed.json")]) == 2
    assert "malformed JSON" in capsys.readouterr().err


def test_bad_options_are_one_line_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:  # refused when the options are parsed
        cli.main(["hidden", "generate", "travel", "--n", "0", "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2 and "argument --n: expected a whole number of at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["hidden", "generate", "travel", "--travelers", "5", "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2


def test_generate_travel_with_the_lm_builder(tmp_path, capsys, monkeypatch):
    import dspy

    from groundstate.eval.benchmarks.travel.generator import generate_travel
    from groundstate.testing import scripted_lm

    made = {t.correct_answer: t.model_dump(mode="json") for t in generate_travel(4, seed=1, travelers=3)}

    def respond(request):
        if "`task`" in request.user:
            return {"task": made[request.field("target")]}
        if "`accepted`" in request.user:
            return {"accepted": True, "issues": []}
        return None

    def configure(args):
        lm = scripted_lm(respond)
        dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
        return lm, None

    monkeypatch.setattr("groundstate.cli.options.configure_lms", configure)
    out = tmp_path / "lm.jsonl"
    assert cli.main(["hidden", "generate", "travel", "--builder", "lm", "--n", "4", "--seed", "1", "--travelers", "3",
                     "--out", str(out)]) == 0
    assert "answers: A 1, B 1, C 1, D 1" in capsys.readouterr().out
    tasks = load_hidden_tasks(out)
    assert [t.id for t in tasks] == [f"travel-lm-1-{i}" for i in range(4)]
    assert cli.main(["hidden", "validate", "--data", str(out)]) == 0
