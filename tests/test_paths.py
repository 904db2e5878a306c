"""Names from data become path components only when safe; outputs are checked against inputs before any work;
text from files reaches the terminal escaped (issue 22, items 2 and 4)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from groundstate.errors import InputError, one_line
from groundstate.paths import check_entry, check_output, child, safe_component
from tests.test_hostile_files import assert_one_clean_line, run_cli

REPO = Path(__file__).resolve().parents[1]
QA = REPO / "groundstate" / "examples" / "qa.jsonl"
MEDIQ = REPO / "tests" / "data" / "mediq" / "cases.jsonl"
OFFQUERY = REPO / "tests" / "data" / "offquery" / "CrisisFact.json"


# -- safe names ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../x", "..", ".", "", "/tmp/abs", "a/b", "a\\b", "[/x]", "x\x00y", "x\ny",
                                  "rtl\u202eexe", "line\u2028sep", "-rf", "é", "x" * 201, 7, None])
def test_unsafe_names_are_refused_with_one_line(name):
    with pytest.raises(InputError) as caught:
        safe_component(name, "program name", source="runs/r/config.json")
    message = str(caught.value)
    assert "\n" not in message and "\u202e" not in message and "\u2028" not in message
    assert "program name" in message and "runs/r/config.json" in message


@pytest.mark.parametrize("name", ["qa", "hidden-post-sim-0123abcd", "consilience-rules", "dhd-replay-loo", "a.b_c"])
def test_safe_names_pass_and_stay_inside_their_parent(name, tmp_path):
    assert safe_component(name) == name
    assert child(tmp_path, name).parent == tmp_path


def test_a_runner_program_name_cannot_place_a_run_outside_its_directory(tmp_path):
    from groundstate.eval.runner import Runner

    out = tmp_path / "a" / "runs"
    for program in ("../../escaped", str(tmp_path / "abs")):
        with pytest.raises(InputError, match="program name"):
            Runner(lambda **_: {}, {"program": program}, out=out).run([{"id": "1"}])
    assert sorted(p.name for p in tmp_path.rglob("*")) == [], "the runner made a directory"


# -- output paths ------------------------------------------------------------------------------------------------
def test_check_output_refuses_an_input_and_a_wrong_kind(tmp_path):
    data = tmp_path / "x.jsonl"
    data.write_text("{}\n")
    os.symlink(data, tmp_path / "link.jsonl")
    os.link(data, tmp_path / "hard.jsonl")
    for out in (data, tmp_path / "link.jsonl", tmp_path / "hard.jsonl", tmp_path / "." / "x.jsonl"):
        with pytest.raises(InputError, match="is the input"):
            check_output(out, inputs=[data])
    with pytest.raises(InputError, match="is a directory"):
        check_output(tmp_path, inputs=[])
    with pytest.raises(InputError, match="must name a directory"):
        check_output(data, kind="dir")
    with pytest.raises(InputError, match="not a directory"):
        check_output(data / "sub" / "out.jsonl")
    with pytest.raises(InputError, match="holds the input"):
        check_output(tmp_path, kind="dir", inputs=[data])
    with pytest.raises(InputError, match="would overwrite the input"):
        check_output(tmp_path, kind="dir", inputs=[data], writes=["x.jsonl"])
    assert check_output(tmp_path, kind="dir", inputs=[data], writes=["y.jsonl"]) == tmp_path
    assert check_output(tmp_path / "new" / "out.jsonl", inputs=[data]) == tmp_path / "new" / "out.jsonl"


def test_check_entry_refuses_everything_but_a_regular_file(tmp_path):
    assert check_entry(tmp_path / "missing") is False
    (tmp_path / "file").write_text("x")
    assert check_entry(tmp_path / "file") is True
    os.symlink(tmp_path / "file", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name, kind in (("link", "symlink"), ("fifo", "FIFO"), ("dir", "directory")):
        with pytest.raises(InputError, match=kind):
            check_entry(tmp_path / name)


#: (name, files to lay out (None: an empty directory; "FILE": a sentinel file), argv). Each writes onto an input,
#: or needs a directory where a file is (or the reverse): refused in one line before any work.
OUTPUT_CASES = [
    ("split onto input", {"x.train.jsonl": "FILE"}, ["split", "--data", "x.train.jsonl", "--out", "."]),
    ("split out is a file", {"x.json": OFFQUERY}, ["split", "--data", "x.json", "--out", "x.json"]),
    ("split out under a file", {"x.json": OFFQUERY}, ["split", "--data", "x.json", "--out", "x.json/sub"]),
    ("build onto input", {"m.jsonl": MEDIQ}, ["data", "build", "offquery", "--data", "m.jsonl", "--out", "m.jsonl"]),
    ("build out is a directory", {"m.jsonl": MEDIQ, "o": None},
     ["data", "build", "offquery", "--data", "m.jsonl", "--out", "o"]),
    ("generate out under a file", {"o": "FILE"}, ["data", "generate", "offquery", "--n", "1", "--out", "o/x.jsonl"]),
    ("travel out is a directory", {"o": None}, ["hidden", "generate", "travel", "--n", "1", "--out", "o"]),
    ("explore onto input", {"t.jsonl": "TASKS"},
     ["consilience", "explore", "--data", "t.jsonl", "--agents", "sim", "--out", "t.jsonl"]),
    ("train out holds its input", {"d/e.jsonl": "FILE"}, ["consilience", "train", "--data", "d/e.jsonl", "--out", "d"]),
    ("calibrate out is the input", {"t.jsonl": "TASKS"},
     ["consilience", "calibrate", "--data", "t.jsonl", "--agents", "sim", "--out", "t.jsonl"]),
    ("optimize out is the input", {"x.json": OFFQUERY},
     ["optimize", "reground", "--data", "x.json", "--out", "x.json"]),
    ("dhd cache is the input", {"p.jsonl": "FILE"}, ["dhd", "generate", "--data", "p.jsonl", "--cache", "p.jsonl"]),
    ("dhd cache holds an input's name", {"c/problems.jsonl": "FILE"},
     ["dhd", "generate", "--data", "c/problems.jsonl", "--cache", "c"]),
    ("simulate cache is a file", {"c": "FILE"}, ["dhd", "simulate", "--cache", "c", "--n", "3"]),
    ("json-out onto input", {"t.jsonl": "TASKS"},
     ["consilience", "coverage", "--data", "t.jsonl", "--agents", "sim", "--calibrator", "cal", "--json-out",
      "t.jsonl"]),
    ("runs dir is a file", {"q.jsonl": QA, "r": "FILE"}, ["run", "qa", "--data", "q.jsonl", "--runs-dir", "r"]),
    ("report dir is a file", {"t.jsonl": "TASKS", "r": "FILE"},
     ["consilience", "evaluate", "--data", "t.jsonl", "--agents", "sim", "--report-dir", "r"]),
    ("merge runs dir is a file", {"r": "FILE"}, ["runs", "merge", "a", "b", "--runs-dir", "r"]),
    ("annotate onto input", {"t.jsonl": "TASKS"}, ["hidden", "annotate", "--data", "t.jsonl", "--out", "t.jsonl"]),
]


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory):
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel

    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    save_hidden_tasks(path, generate_hidden_travel(2, seed=0))
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, layout, argv", OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
def test_an_output_onto_an_input_or_of_the_wrong_kind_is_one_line_before_any_work(name, layout, argv, tmp_path,
                                                                                 tasks_file):
    for rel, source in layout.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if source is None:
            path.mkdir()
        elif source == "FILE":
            path.write_text("keep me\n")
        else:
            shutil.copy(tasks_file if source == "TASKS" else source, path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name not in (".stdout", ".stderr")}
    assert after == before, f"{argv}: files changed or were written"


# -- escaping ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b",
                                  "\ufeff", "\u2028", "\u2029", "\x1b", "\x9b", "\n", "\r", "\t", "\x00", "\ud800"])
def test_one_line_escapes_every_bidi_separator_and_control_character(char):
    shown = one_line(f"id{char}exe")
    assert char not in shown and shown.startswith("id\\") and shown.endswith("exe")


def test_one_line_keeps_ordinary_text():
    assert one_line("Zürich 東京 [/x] a b") == "Zürich 東京 [/x] a b"


def test_a_record_id_with_bidi_and_line_separators_is_shown_escaped(tmp_path):
    (tmp_path / "f.jsonl").write_text('{"id": "evil\\u202egnp.exe\\u2028second line", "question": 1}\n',
                                      encoding="utf-8")
    argv = ["data", "validate", "--data", "f.jsonl"]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert "evil\\u202egnp.exe\\u2028second line" in err


def test_the_output_table_covers_every_command_that_writes():
    """Every entry of OUTPUTS names a real command function, and every command with an output option is in it."""
    import argparse
    import importlib

    from groundstate.cli import build_parser
    from groundstate.cli.outputs import OUTPUTS

    for key in OUTPUTS:
        module, _, name = key.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name, None)), key
    missing = []

    def walk(parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subs:
            for sub in action.choices.values():
                walk(sub)
        func = parser.get_default("func")
        dests = {a.dest for a in parser._actions}
        if not subs and func is not None and dests & {"out", "report_dir", "json_out", "runs_dir"}:
            key = f"{func.__module__}.{func.__name__}"
            if key not in OUTPUTS and key not in ("groundstate.cli.runs.cmd_runs_list",
                                                  "groundstate.cli.runs.cmd_runs_show"):
                missing.append(key)

    walk(build_parser())
    assert not missing, missing


def test_log_lines_carry_file_text_escaped(caplog):
    """A warning that quotes a record id (newline, ANSI escape, U+202E) is one escaped line once the CLI's log
    scrubbing is installed, as every command installs it."""
    import logging

    from groundstate.errors import install_log_scrubbing

    previous = logging.getLogRecordFactory()
    install_log_scrubbing()
    try:
        with caplog.at_level(logging.WARNING):
            logging.getLogger("groundstate.test").warning("record %s skipped", "evil\nfake\x1b[31m\u202eline")
    finally:
        logging.setLogRecordFactory(previous)
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == "record evil\\nfake\\x1b[31m\\u202eline skipped"
