"""Table 23 shows exactly one masking run (issue 24, item 7): the one named with ``--mask-run``, else the cache's
only one; a cache with several and none named is refused in one line listing them (``dhd tables`` and ``dhd
analyze``), never resolved by taking the newest. A masking cell of an experiment pools its seeds' tables."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from groundstate.cli import main
from groundstate.eval.dhd.masking import TITLES, VARIANTS

FAST = ["--permutations", "20", "--multiplicity-permutations", "20", "--resamples", "10"]


def _mask_run(cache, name: str, success: float, n: int = 2) -> None:
    """A finished masking run of ``cache`` (its config names the cache) whose Table 23 has ``success`` everywhere."""
    cell = {"success": success, "correct": 1, "n": n, "failures": 0}
    table = {"variants": list(VARIANTS), "columns": [{"variant": v, "title": TITLES[v]} for v in VARIANTS],
             "failures": 0, "rows": {"all": {"title": "All", "pairs": 1, "sampled": 1, **{v: cell for v in VARIANTS}}}}
    run = cache / "runs" / name
    run.mkdir(parents=True)
    (run / "mask_table.json").write_text(json.dumps(table))
    cache_id = json.loads((cache / "cache.json").read_text())["cache_id"]
    (run / "config.json").write_text(json.dumps({"program": "dhd-mask", "run_id": name, "cache": cache_id}))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mask-choice")
    cache = root / "cache"
    assert main(["dhd", "simulate", "--cache", str(cache), "--n", "6", "--blocks", "2"]) == 0
    here = os.getcwd()
    os.chdir(root)  # a relative --cache: the report names 'cache', which each test's copy is (its analysis' parent)
    try:
        assert main(["dhd", "analyze", "--cache", "cache", *FAST, "--no-tables"]) == 0
    finally:
        os.chdir(here)
    return cache


@pytest.fixture()
def two(analysed, tmp_path):
    """A copy of the analysed cache with two masking runs: ``dhd-mask-a`` (50%), then ``dhd-mask-b`` (75%), which
    is the newer by its modification time."""
    cache = tmp_path / "cache"
    shutil.copytree(analysed, cache)
    _mask_run(cache, "dhd-mask-a", 50.0)
    _mask_run(cache, "dhd-mask-b", 75.0)
    os.utime(cache / "runs" / "dhd-mask-a" / "mask_table.json", (1, 1))
    return cache


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _table23(path) -> list[dict]:
    """Table 23's rows of the masking run's own category (``all``; the five paper categories come first, empty)."""
    return [r for r in json.loads(path.read_text())["tables"]["23"]["rows"] if r["category"] == "all"]


def test_dhd_tables_refuses_several_masking_runs_unless_one_is_named(two, tmp_path, capsys):
    report = tmp_path / "t"
    argv = ["dhd", "tables", "--analysis", str(two / "analysis"), "--report-dir", str(report)]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert "dhd-mask-a" in line and "dhd-mask-b" in line and "--mask-run" in line and "2 masking runs" in line
    assert not report.exists()  # nothing written
    for name, success in (("dhd-mask-a", 50), ("dhd-mask-b", 75)):
        assert main([*argv, "--mask-run", name]) == 0
        assert _table23(report / "tables.json")[0]["full"] == success
    assert main([*argv, "--mask-run", "dhd-mask-c"]) == 2
    assert "--mask-run dhd-mask-c" in _one_line(capsys)


def test_a_directory_named_like_a_masking_run_is_not_one(analysed, tmp_path, capsys):
    cache = tmp_path / "cache"
    shutil.copytree(analysed, cache)
    _mask_run(cache, "dhd-mask-a", 50.0)
    (cache / "runs" / "dhd-mask-other").mkdir()  # no config: not a run
    shutil.copy(cache / "runs" / "dhd-mask-a" / "mask_table.json", cache / "runs" / "dhd-mask-other")
    report = tmp_path / "t"
    assert main(["dhd", "tables", "--analysis", str(cache / "analysis"), "--report-dir", str(report)]) == 0
    assert _table23(report / "tables.json")[0]["full"] == 50  # the cache's only masking run


def test_dhd_analyze_refuses_several_masking_runs_before_writing(two, tmp_path, capsys):
    out = tmp_path / "analysis"
    argv = ["dhd", "analyze", "--cache", str(two), "--report-dir", str(out), *FAST]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert "dhd-mask-a" in line and "dhd-mask-b" in line and "--mask-run" in line
    assert not out.exists()
    assert main([*argv, "--mask-run", "dhd-mask-a"]) == 0
    assert _table23(out / "tables.json")[0]["full"] == 50
    assert main([*argv, "--mask-run", "nope"]) == 2
    assert "--mask-run nope" in _one_line(capsys)
    assert main([*argv, "--no-tables"]) == 0  # no table: no masking run to choose


def test_a_masking_cell_pools_its_seeds(analysed, tmp_path):
    from groundstate.eval.experiments.dhd_readers import mask_reader

    cache = tmp_path / "cache"
    shutil.copytree(analysed, cache)
    _mask_run(cache, "s0", 50.0, n=2)
    _mask_run(cache, "s1", 80.0, n=8)
    runs = [{"dir": str(cache / "runs" / name)} for name in ("s0", "s1")]
    pooled = mask_reader(runs)["all:full"]
    assert pooled["mean"] == pytest.approx((0.5 * 2 + 0.8 * 8) / 10) and pooled["n"] == 10
    assert mask_reader(runs[:1])["all:full"]["mean"] == 0.5
    assert mask_reader([*runs, {"dir": str(tmp_path / "missing")}]) == {}  # a seed without its table: nothing
