"""Fields of the wrong type or missing in a DHD cache and in the files the DHD tables read back are one line, exit 2,
and a warning never comes beside an error (issue 22, item 5).

A cache is simulated once (``dhd simulate``, no LM) and analysed once; each case damages a copy and runs the real CLI
in a forked child (``run_cli`` of ``tests/test_hostile_files.py``). Each family has its control: the intact cache
analyses, the intact analysis makes the tables, a torn line (an interrupted write) is skipped silently.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_hostile_fields import damaged, delete, one_line_error, set_in
from tests.test_hostile_files import run_cli


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    import groundstate.cli

    groundstate.cli.build_parser()
    root = tmp_path_factory.mktemp("dhd-fields")
    code, _, err = run_cli(["dhd", "simulate", "--cache", str(root / "cache"), "--n", "6", "--blocks", "2"], root)
    assert code == 0, err
    return root


# -- the DHD cache ----------------------------------------------------------------------------------------------------
ANALYZE = ["--permutations", "20", "--multiplicity-permutations", "20", "--resamples", "10", "--no-tables"]


def replace_line(name: str, number: int, text: str):
    def damage(cache: Path) -> None:
        path = cache / name
        lines = path.read_text().splitlines(keepends=True)
        lines[number - 1] = text + "\n"
        path.write_text("".join(lines))
    return damage


def rewrite_json(name: str, value):
    def damage(cache: Path) -> None:
        (cache / name).write_text(json.dumps(value))
    return damage


def in_run(name: str, text: str):
    def damage(cache: Path) -> None:
        run = next((cache / "runs").iterdir())
        (run / name).write_text(text)
    return damage


CACHE_DAMAGE = {
    "cache.json field 'cache_id'": rewrite_json("cache.json", {"k": 5}),
    "cache.json field 'cache_id' ": rewrite_json("cache.json", {"cache_id": ["x"], "k": 5}),
    "cache.json field 'k'": rewrite_json("cache.json", {"cache_id": "c1", "k": "five"}),
    "messages.jsonl, record at line 2: not valid JSON": replace_line("messages.jsonl", 2, "garbage"),
    "messages.jsonl, record at line 1, field 'problem_id'": replace_line("messages.jsonl", 1, '{"problem_id": 5}'),
    "problems.jsonl, record at line 3, field 'question'": replace_line("problems.jsonl", 3,
                                                                       '{"id": "q", "question": "", "answer": "1"}'),
    "problems.jsonl, record at line 1: must be a JSON object": replace_line("problems.jsonl", 1, "[1, 2]"),
    "config.json field 'shard'": in_run("config.json", json.dumps({"program": "dhd-replay-loo", "run_id": "r",
                                                                   "shard": 5})),
    "config.json: must be a JSON object": in_run("config.json", "[1, 2]"),
    "results.jsonl, record x, field 'outputs.mode'": in_run("results.jsonl", json.dumps(
        {"id": "x", "outputs": {"problem_id": "p", "mode": "all", "K": 2, "block": 0, "arms": []}}) + "\n"),
    "results.jsonl, record x, field 'outputs.arms[0].correct'": in_run("results.jsonl", json.dumps(
        {"id": "x", "outputs": {"problem_id": "p", "mode": "loo", "K": 2, "block": 0,
                                "arms": [{"arm": "full", "correct": "yes"}]}}) + "\n"),
}


@pytest.mark.parametrize("expected", sorted(CACHE_DAMAGE))
def test_a_bad_dhd_cache_file_is_one_line(workspace, tmp_path, expected):
    cache = tmp_path / "cache"
    shutil.copytree(workspace / "cache", cache)
    CACHE_DAMAGE[expected](cache)
    file, _, rest = expected.strip().partition(" ")
    one_line_error(["dhd", "analyze", "--cache", str(cache), *ANALYZE], tmp_path, file, rest.strip(", "))


def test_a_generator_record_of_the_wrong_shape_is_one_line(workspace, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(workspace / "cache", cache)
    path = cache / "messages.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["generator"] = {"settings": 5}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one_line_error(["dhd", "analyze", "--cache", str(cache), *ANALYZE], tmp_path, "messages.jsonl",
                   "field 'generator'", "settings")


def test_a_torn_cache_line_is_silent_and_an_error_after_it_is_one_line(workspace, tmp_path):
    """A line cut short by a killed write (here mid-file: the next append starts a new line) is skipped without a
    warning, so the analysis runs with an empty stderr; a later error is still the only line (no "warning +
    error" pair)."""
    cache = tmp_path / "cache"
    shutil.copytree(workspace / "cache", cache)
    path = cache / "messages.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:40] + "\n" + "".join(lines[2:]) + lines[3][:25])
    code, out, err = run_cli(["dhd", "analyze", "--cache", str(cache), *ANALYZE], tmp_path)
    assert code == 0 and not err.strip(), err[-2000:]
    (cache / "cache.json").write_text(json.dumps({"cache_id": "c1", "k": 0}))
    one_line_error(["dhd", "analyze", "--cache", str(cache), *ANALYZE], tmp_path, "cache.json", "field 'k'")


# -- what the DHD paper tables read back: report.json, crossfit.json, mask_table.json -------------------------------
@pytest.fixture(scope="module")
def analysed(workspace, tmp_path_factory):
    """An analysed copy of the cache (report.json and crossfit.json) with a masking run's table beside it."""
    from groundstate.eval.dhd.masking import TITLES, VARIANTS

    cache = tmp_path_factory.mktemp("analysed") / "cache"
    shutil.copytree(workspace / "cache", cache)
    # a relative --cache: the report names the cache as 'cache', which each test's copy is (run in its parent)
    code, _, err = run_cli(["dhd", "analyze", "--cache", "cache", *ANALYZE[:-1]], cache.parent)
    assert code == 0 and (cache / "analysis" / "crossfit.json").is_file(), err[-2000:]
    cell = {"success": 50.0, "correct": 1, "n": 2, "failures": 0}
    table = {"variants": list(VARIANTS), "columns": [{"variant": v, "title": TITLES[v]} for v in VARIANTS],
             "failures": 0, "rows": {"all": {"title": "All", "pairs": 1, "sampled": 1, **{v: cell for v in VARIANTS}}}}
    (cache / "runs" / "dhd-mask-test").mkdir()
    (cache / "runs" / "dhd-mask-test" / "mask_table.json").write_text(json.dumps(table))
    # a masking run is a run of this cache (its config says so), never a directory whose name looks like one
    cache_id = json.loads((cache / "cache.json").read_text())["cache_id"]
    (cache / "runs" / "dhd-mask-test" / "config.json").write_text(json.dumps(
        {"program": "dhd-mask", "run_id": "dhd-mask-test", "cache": cache_id}))
    return cache


TABLE_DAMAGE = {
    ("analysis/report.json", "modes.loo"): set_in(("modes", "loo"), 5),
    ("analysis/report.json", "modes.loo.groups"): set_in(("modes", "loo", "groups"), "x"),
    ("analysis/report.json", "modes.loo.permutation_null"): delete(("modes", "loo", "permutation_null", "null", "W+")),
    ("analysis/report.json", "modes.loo.bootstrap.wrong.mean"): set_in(("modes", "loo", "bootstrap", "wrong", "mean"),
                                                                       "high"),
    ("analysis/crossfit.json", "variants.main.gain"): set_in(("variants", "main", "gain"), 5),
    ("analysis/crossfit.json", "variants.main.full_accuracy"): delete(("variants", "main", "full_accuracy")),
    ("runs/dhd-mask-test/mask_table.json", "rows.all.full.success"): set_in(("rows", "all", "full", "success"), "x"),
    ("runs/dhd-mask-test/mask_table.json", "variants"): set_in(("variants",), "full"),
}


@pytest.mark.parametrize("name, field", sorted(TABLE_DAMAGE))
def test_a_bad_table_input_is_one_line(analysed, tmp_path, name, field):
    cache = damaged(analysed, tmp_path / "cache", name, TABLE_DAMAGE[(name, field)])
    one_line_error(["dhd", "tables", "--analysis", str(cache / "analysis"), "--report-dir", str(tmp_path / "t")],
                   tmp_path, name.split("/")[-1], f"'{field}'")
    assert not (tmp_path / "t").exists()


def test_the_intact_table_inputs_make_the_tables(analysed, tmp_path):
    code, out, err = run_cli(["dhd", "tables", "--analysis", str(analysed / "analysis"), "--report-dir",
                              str(tmp_path / "t")], tmp_path)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    tables = json.loads((tmp_path / "t" / "tables.json").read_text())["tables"]
    assert {"17", "19", "23", "24"} <= set(tables)


# -- DHD: a warning never comes beside an error --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["binary.jsonl", "not-json.jsonl", "string-records.json", "wrong-structure.jsonl",
                                  "structure-wrong-agent.jsonl"])
def test_dhd_generate_skip_invalid_on_a_file_of_bad_records_is_one_line(tmp_path, name):
    """Every record skipped: the error says how many, alone (no "skipped N record(s)" warning line before it)."""
    from tests.test_hostile_files import BAD

    shutil.copy(BAD / name, tmp_path / name)
    one_line_error(["dhd", "generate", "--data", name, "--cache", "cache", "--no-progress", "--skip-invalid"],
                   tmp_path, name, "were invalid and skipped")
    assert not (tmp_path / "cache").exists()
