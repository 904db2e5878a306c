import json

import pytest

from groundstate.cli import main
from groundstate.eval.benchmarks.offquery.loader import load_instances
from tests.helpers import DATA as TEST_DATA

DATA = TEST_DATA


def test_generate_validate_stats(tmp_path, capsys):
    out = tmp_path / "syn.jsonl"
    assert main(["data", "generate", "offquery", "--domain", "both", "--variant", "all", "--n", "3",
                 "--seed", "4", "--out", str(out)]) == 0
    instances = load_instances(out)
    assert len(instances) == 2 * 4 * 3
    capsys.readouterr()
    assert main(["data", "validate", "--data", str(out)]) == 0
    assert "24 valid instances (24 checked against the generator's rule), 0 problem(s)" in capsys.readouterr().out
    assert main(["data", "stats", "--data", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["domain"] == {"disaster": 12, "healthcare": 12}


def test_validate_reports_a_broken_generated_instance(tmp_path, capsys):
    out = tmp_path / "syn.jsonl"
    main(["data", "generate", "offquery", "--n", "2", "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows[1]["answer"], rows[1]["wrong_answer"] = rows[1]["wrong_answer"], rows[1]["answer"]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["data", "validate", "--data", str(out)]) == 2  # the first bad record stops, in one line
    err = capsys.readouterr().err
    assert f"record {rows[1]['id']} (at line 2), field 'answer': breaks the generator's rule: reliable world does " \
           "not give the correct option" in err and err.count("\n") == 1
    assert main(["data", "validate", "--data", str(out), "--skip-invalid"]) == 2  # each reported, the rest checked
    text = capsys.readouterr().out
    assert f"record {rows[1]['id']}" in text and "(record skipped)" in text
    assert "1 valid instances (1 checked against the generator's rule), 1 problem(s)" in text


def test_validate_bad_file_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    good = json.loads(json.dumps(load_instances_from_generator()[0]))
    good["answer"] = "E"
    bad.write_text(json.dumps(good) + "\n")
    assert main(["data", "validate", "--data", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "bad.jsonl" in err and "answer" in err


def load_instances_from_generator():
    from groundstate.eval.benchmarks.offquery.synthetic import generate

    return [x.model_dump(mode="json") for x in generate("healthcare", "main", 1)]


def test_build_rule_from_mediq_fixture(tmp_path, capsys):
    source = DATA / "mediq" / "cases.jsonl"
    out = tmp_path / "built.jsonl"
    assert main(["data", "build", "offquery", "--data", str(source), "--builder", "rule",
                 "--out", str(out)]) == 0
    built = load_instances(out)
    assert built and all(len(x.misleading) == 1 for x in built)
    assert "wrote" in capsys.readouterr().out


def test_generate_rejects_bad_n(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:  # refused when the options are parsed
        main(["data", "generate", "offquery", "--n", "0", "--out", str(tmp_path / "x.jsonl")])
    assert info.value.code == 2 and "argument --n: expected a whole number of at least 1" in capsys.readouterr().err
