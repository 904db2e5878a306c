"""Run directories that lie: a hostile ``program`` in a shard's config, a planted ``.lock``, names and reasons that
would reorder or break the terminal, and ``runs list`` reading only what a listing needs (issue 22, items 2-4)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.test_hostile_files import assert_one_clean_line, run_cli

RTL, LINE = "\u202e", "\u2028"


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[Path]:
    """Two finished shards of one simulated hidden-profile run."""
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel

    root = tmp_path_factory.mktemp("shards")
    save_hidden_tasks(root / "tasks.jsonl", generate_hidden_travel(4, seed=0))
    for shard in ("0/2", "1/2"):
        code, _, err = run_cli(["hidden", "run", "--data", "tasks.jsonl", "--agents", "sim", "--runs-dir", "runs",
                                "--no-progress", "--shard", shard], root)
        assert code == 0, err
    return sorted(p for p in (root / "runs").iterdir() if p.is_dir())


def copy_runs(shards: list[Path], target: Path, **config: object) -> list[Path]:
    """Copies of the shards under ``target``, with ``config`` fields set in each ``config.json``."""
    copies = []
    for shard in shards:
        copy = target / shard.name
        shutil.copytree(shard, copy)
        path = copy / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config}), encoding="utf-8")
        copies.append(copy)
    return copies


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- merge: the merged run's name comes from the shards' config --------------------------------------------------
@pytest.mark.timeout(120)
@pytest.mark.parametrize("program", ["../../escaped", "ABSOLUTE", "[/x]", "a/b", f"x{RTL}y"])
def test_merge_refuses_a_program_name_that_would_leave_the_runs_dir(shards, tmp_path, program):
    work = tmp_path / "work"
    if program == "ABSOLUTE":
        program = str(tmp_path / "absolute-target")
    inputs = copy_runs(shards, work / "in", program=program)
    before = tree(tmp_path)
    argv = ["runs", "merge", *map(str, inputs), "--runs-dir", str(work / "a" / "merged")]
    code, out, err = run_cli(argv, work)
    assert_one_clean_line(argv, code, out, err)
    assert "program name" in err
    assert tree(tmp_path) - before <= {"work/.stdout", "work/.stderr"}, "merge wrote a file"


def test_merge_still_works_with_an_ordinary_program_name(shards, tmp_path):
    inputs = copy_runs(shards, tmp_path / "in")
    code, out, err = run_cli(["runs", "merge", *map(str, inputs), "--runs-dir", "merged"], tmp_path)
    assert code == 0, err
    (merged,) = (tmp_path / "merged").iterdir()
    assert merged.name.startswith("hidden-post-sim-") and merged.name.endswith("-merged")


# -- the run lock --------------------------------------------------------------------------------------------------
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "hard-link"])
@pytest.mark.parametrize("command", ["resume", "list"])
def test_a_planted_lock_is_refused_and_its_target_untouched(shards, tmp_path, kind, command):
    (run,) = copy_runs(shards[:1], tmp_path / "runs")
    sentinel = tmp_path / "precious.txt"
    sentinel.write_text("do not empty me\n")
    lock = run / ".lock"
    lock.unlink(missing_ok=True)
    {"symlink": lambda: os.symlink(sentinel, lock), "directory": lock.mkdir, "fifo": lambda: os.mkfifo(lock),
     "hard-link": lambda: os.link(sentinel, lock)}[kind]()
    config = json.loads((run / "config.json").read_text())
    tasks = shards[0].parents[1] / "tasks.jsonl"
    argv = {"resume": ["hidden", "run", "--data", str(tasks), "--agents", "sim", "--runs-dir", "runs",
                       "--no-progress", "--shard", "/".join(map(str, config["shard"]))],
            "list": ["runs", "list", "--runs-dir", "runs"]}[command]
    code, out, err = run_cli(argv, tmp_path)
    assert_one_clean_line(argv, code, out, err)
    assert ".lock" in err
    assert sentinel.read_text() == "do not empty me\n"


def test_the_lock_still_names_a_live_holder(tmp_path):
    """The control: a regular .lock held by another process makes the run 'running (pid N)' in the listing."""
    import subprocess
    import sys

    from groundstate.eval.lock import lock_holder

    run = tmp_path / "run"
    run.mkdir()
    script = ("import sys, time; from groundstate.eval.lock import RunLock; held = RunLock(sys.argv[1]).acquire(); "
              "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", script, str(run)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_holder(run) == str(holder.pid)
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(run) is None


# -- runs list reads what a listing needs ------------------------------------------------------------------------
def test_runs_list_does_not_read_results_when_the_summary_is_final(shards, tmp_path, monkeypatch):
    from groundstate.eval import results, runs

    (run,) = copy_runs(shards[:1], tmp_path / "runs")
    summary = json.loads((run / "summary.json").read_text())

    def refuse(*args, **kwargs):
        raise AssertionError("runs list read results.jsonl")

    monkeypatch.setattr(runs, "read_results", refuse)
    monkeypatch.setattr(runs, "count_results", refuse)
    monkeypatch.setattr(results, "read_results", refuse)
    (listed,) = runs.list_runs(tmp_path / "runs")
    assert listed["summary"]["n_done"] == summary["n_done"] and listed["state"] == "complete"


def test_runs_list_counts_results_by_streaming_when_there_is_no_summary(shards, tmp_path, monkeypatch):
    from groundstate.eval import results, runs

    (run,) = copy_runs(shards[:1], tmp_path / "runs")
    n_done = json.loads((run / "summary.json").read_text())["n_done"]
    (run / "summary.json").unlink()
    monkeypatch.setattr(runs, "read_results", lambda *a, **k: pytest.fail("results.jsonl was loaded whole"))
    monkeypatch.setattr(results, "read_results", lambda *a, **k: pytest.fail("results.jsonl was loaded whole"))
    (listed,) = runs.list_runs(tmp_path / "runs")
    assert listed["summary"]["n_done"] == n_done and listed["state"] == "killed"


def test_a_garbage_results_file_behind_a_final_summary_is_not_read_by_list(shards, tmp_path):
    """With the file itself: list succeeds from the summary, while show (which reads the rows) refuses the file."""
    (run,) = copy_runs(shards[:1], tmp_path / "runs")
    results = run / "results.jsonl"
    results.write_text("}}} not json {{{\n" * 3)
    stamp = (run / "summary.json").stat().st_mtime_ns
    os.utime(results, ns=(stamp - 10**9, stamp - 10**9))  # older than the final summary, as the runner leaves it
    code, out, err = run_cli(["runs", "list", "--runs-dir", "runs"], tmp_path)
    assert code == 0 and run.name in out, err
    code, out, err = run_cli(["runs", "show", str(run)], tmp_path)
    assert_one_clean_line(["runs", "show"], code, out, err)


# -- what runs list and runs show print -------------------------------------------------------------------------
def test_runs_list_and_show_print_file_text_escaped_and_without_markup(shards, tmp_path):
    run_id = f"run{RTL}gnp.exe{LINE}x"
    (run,) = copy_runs(shards[:1], tmp_path / "runs", program="[/x]", run_id=run_id,
                       lm={"model": f"[bold]m{RTL}odel"})
    summary = json.loads((run / "summary.json").read_text())
    summary.update(run_id=run_id, stopped_reason=f"stopped: because{LINE}[/x]{RTL}")
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    rows[0].update(id=f"rec{RTL}ord", error=f"boom{LINE}[/x]")
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stamp = (run / "results.jsonl").stat().st_mtime_ns
    os.utime(run / "summary.json", ns=(stamp + 10**9, stamp + 10**9))
    for argv in (["runs", "list", "--runs-dir", "runs"], ["runs", "show", str(run)]):
        code, out, err = run_cli(argv, tmp_path)
        assert code == 0 and "Traceback" not in err + out, err[-2000:]
        assert RTL not in out + err and LINE not in out + err, f"{argv}: a raw bidi or line separator"
        assert "\\u202e" in out, out
    code, out, _ = run_cli(["runs", "list", "--runs-dir", "runs"], tmp_path)
    assert "[/x]" in out and "[bold]m" in out and "stopped: because\\u2028[/x]\\u202e" in out
    code, out, _ = run_cli(["runs", "show", str(run)], tmp_path)
    assert "rec\\u202eord" in out and "boom\\u2028[/x]" in out
