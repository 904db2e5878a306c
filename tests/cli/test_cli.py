import argparse
import json

import pytest

from groundstate.cli import build_parser, main
from groundstate.lm.config import LMConfig
from tests.helpers import echo_number_lm


def all_command_paths(parser, prefix=()):
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.extend(all_command_paths(sub, prefix + (name,)))
    return paths


def test_every_command_has_help(capsys):
    paths = all_command_paths(build_parser())
    assert ("lm", "check") in paths and ("runs", "merge") in paths and ("run", "qa") in paths
    for path in paths:
        with pytest.raises(SystemExit) as info:
            main([*path, "--help"])
        assert info.value.code == 0
        assert "usage:" in capsys.readouterr().out


def one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err
    return err


def test_unknown_lm_spec_is_one_line_exit_2(capsys):
    assert main(["lm", "check", "--lm", "gpt4"]) == 2
    assert "unknown LM spec 'gpt4'" in one_line_error(capsys)


def test_unreadable_lm_config_is_one_line_exit_2(tmp_path, capsys):
    assert main(["lm", "check", "--lm-config", str(tmp_path / "nope.toml")]) == 2
    assert "LM config file not found" in one_line_error(capsys)
    bad = tmp_path / "bad.toml"
    bad.write_text("[default\n")
    assert main(["lm", "check", "--lm-config", str(bad)]) == 2
    assert "not valid TOML" in one_line_error(capsys)


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "qa", "--threads", "many"])
    assert info.value.code == 2
    assert "expected a whole number of at least 1, got 'many'" in capsys.readouterr().err


@pytest.fixture
def scripted_cli_lm(monkeypatch):
    lm = echo_number_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


def write_qa(path, n, bad_line=None):
    lines = [json.dumps({"id": f"r{i}", "question": f"question number {i}", "answer": str(i)}) for i in range(n)]
    if bad_line is not None:
        lines.insert(bad_line, "{not json")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bad_data_line_names_file_and_line(tmp_path, capsys, scripted_cli_lm):
    data = write_qa(tmp_path / "qa.jsonl", 3, bad_line=1)
    assert main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = one_line_error(capsys)
    assert "qa.jsonl" in err and "line 2" in err


def test_missing_field_names_record_and_field(tmp_path, capsys, scripted_cli_lm):
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "a", "answer": "1"}) + "\n")
    assert main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = one_line_error(capsys)
    assert "record a" in err and "field 'question'" in err


def test_run_shards_merge_list_show(tmp_path, capsys, scripted_cli_lm):
    data = write_qa(tmp_path / "qa.jsonl", 12)
    out = str(tmp_path / "runs")
    for i in range(2):
        assert main(["run", "qa", "--data", str(data), "--runs-dir", out, "--shard", f"{i}/2", "--threads", "2"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--runs-dir", out]) == 0
    listed = capsys.readouterr().out
    run_ids = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(run_ids) == 2 and all(r[:10] in listed for r in run_ids)
    assert main(["runs", "merge", *run_ids, "--runs-dir", out]) == 0
    assert "merged 2 shards" in capsys.readouterr().out
    merged = next(p for p in (tmp_path / "runs").iterdir() if p.name.endswith("-merged"))
    assert main(["runs", "show", merged.name, "--runs-dir", out, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["summary"]["n_done"] == 12 and shown["summary"]["scores"]["exact_match"]["mean"] == 1.0


def test_max_error_rate_exit_1_keeps_results(tmp_path, capsys, monkeypatch):
    lm = echo_number_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"FAIL question number {i}"}) + "\n"
                            for i in range(20)))
    code = main(["run", "qa", "--data", str(data), "--runs-dir", str(tmp_path / "runs"), "--threads", "1",
                 "--max-error-rate", "0.2"])
    assert code == 1
    assert "exceeds --max-error-rate" in capsys.readouterr().err
    results = next((tmp_path / "runs").glob("*/results.jsonl")).read_text().splitlines()
    assert 5 <= len(results) < 20


@pytest.mark.parametrize("name", ["example:qa", "qa"])
def test_shipped_examples_resolve_by_name_from_any_directory(tmp_path, monkeypatch, capsys, scripted_cli_lm, name):
    import groundstate.examples as examples

    monkeypatch.chdir(tmp_path)  # not the repository root
    assert examples.path("qa").endswith("qa.jsonl") and "qa" in examples.names()
    assert main(["run", "qa", "--data", name, "--limit", "2", "--runs-dir", str(tmp_path / "runs"),
                 "--no-progress"]) == 0
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["n_done"] == 2
    capsys.readouterr()
    assert main(["run", "qa", "--data", "example:nope", "--runs-dir", str(tmp_path / "runs")]) == 2
    captured = capsys.readouterr()
    assert "no example named 'nope'" in captured.out + captured.err


def test_runs_list_names_what_answered_a_run():
    from groundstate.cli.runs import lm_label

    assert lm_label({"lm": {"model": "openai/gpt-4o-mini"}}) == "openai/gpt-4o-mini"
    simulated = {"lm": {"model": None}, "options": {"agents": {"kind": "sim", "params": {}}}}
    assert lm_label(simulated) == "simulated agents"  # not "None": no LM answered these records
    assert lm_label({"lm": {"model": None}}) == lm_label({}) == "none"


def test_a_run_name_never_resolves_to_a_report_directory_beside_the_runs(tmp_path):
    from groundstate.errors import InputError
    from groundstate.eval.runs import resolve_run_dir

    (tmp_path / "consilience").mkdir()  # a report directory, as make demo leaves runs/demo/consilience
    (tmp_path / "consilience" / "table.md").write_text("x")
    for run_id in ("consilience-rules-1a2b", "consilience-full-info-3c4d"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "config.json").write_text("{}")
    with pytest.raises(InputError, match=r"\(2 matches\)"):  # the two runs it prefixes, not the report
        resolve_run_dir(tmp_path, "consilience")
    assert resolve_run_dir(tmp_path, "consilience-rules") == str(tmp_path / "consilience-rules-1a2b")
