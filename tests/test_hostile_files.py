"""Every command that reads a file answers every malformed file with one line and exit status 2.

Each case runs the real CLI (``groundstate.cli.main``) in a child process forked from this one (so the heavy
imports are paid once), with stdout and stderr captured to files and the working directory set to a fresh
directory that holds a copy of the bad file. The child prints a traceback and exits 1 on any exception the
CLI lets escape, exactly as the console script would. Each case asserts: exit status 2, exactly one line on
stderr, no "Traceback", and nothing written outside the run's own ``runs/`` directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import traceback
import unicodedata
from pathlib import Path

import pytest

BAD = Path(__file__).parent / "data" / "bad"
GOOD_QA = Path(__file__).resolve().parents[1] / "examples" / "qa.jsonl"
STATIC = sorted(p.name for p in BAD.iterdir() if p.name != "README.md")
GENERATED = ["deep.json", "deep.jsonl", "huge-int.json", "huge-int.jsonl"]

# Every command that reads a data file; {f} is the bad file (a copy in the case's own directory).
COMMANDS = {
    "data-validate": ["data", "validate", "--data", "{f}"],
    "data-stats": ["data", "stats", "--data", "{f}"],
    "split": ["split", "--data", "{f}", "--out", "splits"],
    "run-qa": ["run", "qa", "--data", "{f}", "--runs-dir", "runs", "--no-progress"],
    "run-reground": ["run", "reground", "--data", "{f}", "--runs-dir", "runs", "--no-progress"],
    "hidden-validate": ["hidden", "validate", "--data", "{f}"],
    "hidden-run": ["hidden", "run", "--data", "{f}", "--agents", "sim", "--runs-dir", "runs", "--no-progress"],
    "consilience-split": ["consilience", "split", "--data", "{f}"],
    "consilience-explore": ["consilience", "explore", "--data", "{f}", "--agents", "sim", "--out", "x.jsonl"],
    "consilience-train": ["consilience", "train", "--data", "{f}", "--out", "mlp"],
    "consilience-calibrate": ["consilience", "calibrate", "--data", "{f}", "--agents", "sim", "--out", "cal"],
    "consilience-evaluate": ["consilience", "evaluate", "--data", "{f}", "--agents", "sim", "--runs-dir", "runs",
                             "--no-progress"],
    "data-build": ["data", "build", "offquery", "--data", "{f}", "--out", "built.jsonl"],
    "data-build-skip": ["data", "build", "offquery", "--data", "{f}", "--out", "built.jsonl",
                        "--skip-invalid"],
    "dhd-generate": ["dhd", "generate", "--data", "{f}", "--cache", "cache", "--no-progress"],
    "optimize": ["optimize", "reground", "--data", "{f}", "--out", "opt"],
    "lm-config": ["run", "qa", "--data", str(GOOD_QA), "--lm-config", "{f}", "--runs-dir", "runs", "--no-progress"],
}


def make_generated(directory: Path) -> None:
    depth = 100_000
    (directory / "deep.json").write_text("[" * depth + "]" * depth)
    (directory / "deep.jsonl").write_text('{"id": "a", "x": ' + "[" * depth + "]" * depth + "}\n")
    digits = "7" * 5000
    (directory / "huge-int.json").write_text(f'[{{"id": "a", "n": {digits}}}]')
    (directory / "huge-int.jsonl").write_text(f'{{"id": "a", "n": {digits}}}\n')


#: The reading layer's size limit in a child that gets an ``over-cap`` file (a sparse file one byte over it).
SMALL_CAP = 1 << 20
SPECIAL_KINDS = ("fifo", "dev-zero-link", "directory", "over-cap")
#: Unicode categories no output line may carry raw (controls, bidi and other format characters, separators).
UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def make_special(path: Path, kind: str) -> None:
    """A special file at ``path``: a FIFO no one writes to, a symlink to ``/dev/zero`` (a device that reports size 0
    and never ends), a directory, or a sparse file one byte over :data:`SMALL_CAP` (it takes no disk)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero-link":
        os.symlink("/dev/zero", path)
    elif kind == "directory":
        path.mkdir()
    else:
        with open(path, "wb") as handle:
            handle.truncate(SMALL_CAP + 1)


def assert_one_clean_line(argv: list[str], code: int, out: str, err: str) -> None:
    """Exit status 2, exactly one line on stderr, no traceback and no raw control, bidi or separator character."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err + out, f"{argv}: traceback\n{err[-3000:]}"
    assert code == 2, f"{argv}: exit {code}\nstdout: {out[-1500:]}\nstderr: {err[-1500:]}"
    assert len(lines) == 1, f"{argv}: {len(lines)} lines on stderr:\n{err[-1500:]}"
    raw = sorted({f"U+{ord(c):04X}" for c in err + out if c != "\n" and unicodedata.category(c) in UNSAFE})
    assert not raw, f"{argv}: raw {raw} reached the terminal"


def run_cli(argv: list[str], cwd: Path, max_file_bytes: int | None = None) -> tuple[int, str, str]:
    """Run ``groundstate argv`` in a forked child with ``cwd``; return (status, stdout, stderr).

    ``max_file_bytes`` lowers the reading layer's size limit in the child (``GROUNDSTATE_MAX_FILE_BYTES``), so a
    small sparse file can stand for an oversized one. If the parent is interrupted while it waits (a pytest
    timeout on a hanging child), the child is killed, so a hang fails the test instead of outliving it.
    """
    out_path, err_path = cwd / ".stdout", cwd / ".stderr"
    pid = os.fork()
    if pid == 0:  # the child: behave like the console script
        code = 1
        try:
            if max_file_bytes is not None:
                import groundstate.files

                groundstate.files.MAX_FILE_BYTES = max_file_bytes
            os.chdir(cwd)
            out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            sys.stdout = os.fdopen(1, "w", closefd=False)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            from groundstate.cli import main

            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 1)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    code = os.waitstatus_to_exitcode(status)
    return code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")


def tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        digest.update(str(path.relative_to(directory)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    directory = tmp_path_factory.mktemp("generated-bad")
    make_generated(directory)
    return directory


@pytest.fixture(scope="module", autouse=True)
def _warm_imports():
    """Import what the commands use once, here, so every forked child starts warm."""
    import dspy  # noqa: F401
    import scipy.stats  # noqa: F401
    import sklearn.neural_network  # noqa: F401

    import groundstate.cli
    import groundstate.eval.benchmarks.offquery.mediq  # noqa: F401
    import groundstate.eval.benchmarks.problems  # noqa: F401
    import groundstate.eval.reground.tasks  # noqa: F401

    groundstate.cli.build_parser()


@pytest.fixture(scope="module", autouse=True)
def _corpus_unchanged():
    before = tree_hash(BAD)
    yield
    assert tree_hash(BAD) == before, "a command wrote into tests/data/bad"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", STATIC + GENERATED)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_reading_command_refuses_every_bad_file(command, name, generated, tmp_path, monkeypatch):
    source = (generated if name in GENERATED else BAD) / name
    case = tmp_path / "case"
    case.mkdir()
    shutil.copy(source, case / name)
    argv = [part.replace("{f}", name) for part in COMMANDS[command]]
    code, out, err = run_cli(argv, case)
    assert_one_clean_line(argv, code, out, err)
    written = [p.relative_to(case) for p in case.rglob("*")
               if p.is_file() and p.name not in (name, ".stdout", ".stderr")]
    outside = [str(p) for p in written if p.parts[0] != "runs"]
    assert not outside, f"{argv}: wrote {outside}"


def test_error_lines_escape_newlines_and_ansi_sequences(tmp_path):
    """The offending id contains a newline and ANSI colour codes; the message shows them escaped."""
    case = tmp_path / "case"
    case.mkdir()
    shutil.copy(BAD / "newline-id.jsonl", case / "f.jsonl")
    code, _, err = run_cli(["data", "validate", "--data", "f.jsonl"], case)
    assert code == 2
    assert "evil\\nsecond line\\x1b[31mRED" in err and "\x1b" not in err and err.count("\n") == 1


def test_error_lines_escape_bidi_overrides_and_line_separators(tmp_path):
    """The offending id carries U+202E, U+2028, U+2029 and a zero-width space raw; the message shows each escaped."""
    case = tmp_path / "case"
    case.mkdir()
    shutil.copy(BAD / "bidi-id.jsonl", case / "f.jsonl")
    code, _, err = run_cli(["data", "validate", "--data", "f.jsonl"], case)
    assert code == 2 and err.count("\n") == 1
    assert "evil\\u202eRTL\\u2028second\\u2029para\\u200bzw" in err
    assert not any(ch in err for ch in "\u202e\u2028\u2029\u200b")


@pytest.mark.parametrize("command", ["data-validate", "run-qa", "hidden-validate", "data-build"])
def test_empty_input_is_accepted_only_when_asked_for(command, tmp_path):
    case = tmp_path / "case"
    case.mkdir()
    (case / "empty.jsonl").write_text("")
    argv = [part.replace("{f}", "empty.jsonl") for part in COMMANDS[command]]
    code, _, err = run_cli(argv, case)
    assert code == 2 and "--allow-empty" in err
    code, out, err = run_cli([*argv, "--allow-empty"], case)
    assert code == 0, err
    assert "0 " in out or "records" in out or "instances" in out or "tasks" in out


def test_nan_support_is_refused_in_python_too():
    from groundstate.records import HiddenProfileTask

    with pytest.raises(ValueError, match="finite"):
        HiddenProfileTask(id="t", description="d", private=[["a"], ["b"]], options=["A", "B"], correct="A",
                          support={"a": {"A": float("nan"), "B": 0.0}})


def test_generated_files_are_what_they_claim(generated):
    """The deep file really is deeper than Python's recursion limit and the number longer than its digit limit,
    so the cases above test what they say."""
    with pytest.raises(RecursionError):
        json.loads((generated / "deep.json").read_text())
    with pytest.raises(ValueError, match="digits"):
        json.loads((generated / "huge-int.jsonl").read_text())


# -- corrupt run directories and saved artifacts ---------------------------------------------------------------
@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A small travel task file, a finished (simulated) run, a saved program, MLP and calibrator."""
    import numpy as np

    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.optimizers.artifacts import save_params, save_program, save_sklearn
    from groundstate.optimizers.conformal import RoundwiseConformal
    from groundstate.optimizers.controller import MLPActionValue
    from groundstate.programs.consilience.state import FEATURES
    from groundstate.programs.reground.reground import ReGround
    from groundstate.records import COMM_ACTIONS

    root = tmp_path_factory.mktemp("workspace")
    save_hidden_tasks(root / "tasks.jsonl", generate_hidden_travel(4, seed=0))
    for shard in ("0/2", "1/2"):
        code, _, err = run_cli(["hidden", "run", "--data", str(root / "tasks.jsonl"), "--agents", "sim",
                                "--runs-dir", str(root / "runs"), "--no-progress", "--shard", shard], root)
        assert code == 0, err
    save_program(ReGround(max_candidates=1), root / "program")
    rng = np.random.default_rng(0)
    model = MLPActionValue(hidden_layer_sizes=(4,), max_iter=50).fit(rng.normal(size=(30, len(FEATURES))),
                                                                     rng.normal(size=(30, len(COMM_ACTIONS))))
    save_sklearn(model, root / "mlp", features=list(FEATURES))
    calibrator = RoundwiseConformal(alpha=0.2).fit([1] * 10 + [2] * 10, rng.uniform(size=20))
    from groundstate.optimizers.consilience import Configuration
    from groundstate.programs.consilience.control import build_controller
    from groundstate.programs.consilience.identity import agents_identity
    from groundstate.programs.consilience.simulated import SimTeam, sim_preset

    # the configuration `consilience coverage --agents sim` (default options) checks the calibrator against: the
    # simulated agents of the default preset, described as a calibration records them
    configuration = Configuration.of("rules", build_controller("rules"), router="action-conditional", max_rounds=10,
                                     agents=agents_identity(SimTeam(sim_preset("ideal"))), removed_actions=(),
                                     min_vote_round=None)
    calibrator.config = configuration.to_dict()
    save_params(calibrator, root / "cal", configuration=configuration.to_dict())
    code, _, err = run_cli(["dhd", "simulate", "--cache", "cache", "--n", "6", "--blocks", "2", "--k", "3"], root)
    assert code == 0, err
    return root


def corrupt(source: Path, target: Path, damage: str) -> Path:
    shutil.copytree(source, target)
    if damage.startswith("file-missing:"):
        (target / damage.split(":", 1)[1]).unlink()
    elif damage.startswith("truncate:"):
        path = target / damage.split(":", 1)[1]
        path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])
    elif damage.startswith("replace:"):
        name, text = damage.split(":", 2)[1:]
        (target / name).write_bytes(text.encode("latin-1"))
    elif damage.startswith("special:"):
        kind, name = damage.split(":", 2)[1:]
        path = target / name
        path.unlink()
        make_special(path, kind)
    elif damage == "garbage-middle-line":
        path = target / "results.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text(lines[0] + "}}} garbage {{{\n" + "".join(lines[1:]))
    return target


RUN_DAMAGE = ["replace:summary.json:not json", "replace:summary.json:[1, 2]",
              'replace:summary.json:{"scores": "x", "tokens": {}, "lm_calls": {}}',
              "replace:config.json:[1, 2]", "replace:config.json:\xff\xfe", "garbage-middle-line",
              'replace:results.jsonl:{"id": "a", "scores": "high"}\n',
              *(f"special:{kind}:{name}" for kind in ("fifo", "dev-zero-link", "directory", "over-cap")
                for name in ("results.jsonl", "summary.json", "config.json"))]


def shards(workspace: Path) -> list[Path]:
    return sorted(p for p in (workspace / "runs").iterdir() if p.is_dir())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damage", RUN_DAMAGE)
@pytest.mark.parametrize("command", ["show", "merge", "list"])
def test_corrupt_run_directories_are_one_line_errors(workspace, tmp_path, command, damage):
    first, second = shards(workspace)[:2]
    runs = tmp_path / "runs"
    broken = corrupt(first, runs / first.name, damage)
    shutil.copytree(second, runs / second.name)
    argv = {"show": ["runs", "show", str(broken)],
            "merge": ["runs", "merge", str(broken), str(runs / second.name), "--runs-dir", str(tmp_path / "merged")],
            "list": ["runs", "list", "--runs-dir", str(runs)]}[command]
    code, out, err = run_cli(argv, tmp_path, max_file_bytes=SMALL_CAP)
    assert_one_clean_line(argv, code, out, err)
    assert not (tmp_path / "merged").exists()


ARTIFACT_CASES = {
    "program": (["file-missing:program.json", "truncate:program.json", "replace:manifest.json:[1]",
                 "replace:manifest.json:\xff", 'replace:manifest.json:{"format": 1, "kind": "dspy-program"}',
                 "file-missing:manifest.json"],
                ["evaluate", "{dir}", "--data", "synthetic", "--n", "1", "--runs-dir", "runs", "--no-progress"]),
    "mlp": (["file-missing:model.skops", "truncate:model.skops", "replace:model.skops:PK\x03\x04junk"],
            ["consilience", "evaluate", "--data", "{tasks}", "--agents", "sim", "--controllers", "mlp", "--mlp",
             "{dir}", "--baselines", "--runs-dir", "runs", "--no-progress"]),
    "cal": (["file-missing:params.json", "truncate:params.json",
             'replace:params.json:{"alpha": 0.1, "thresholds": [1]}', 'replace:params.json:{"alpha": "x"}'],
            ["consilience", "coverage", "--data", "{tasks}", "--agents", "sim", "--calibrator", "{dir}"]),
    "cache": (["replace:cache.json:[1]", "replace:messages.jsonl:[1]\n"],
              ["dhd", "analyze", "--cache", "{dir}", "--report-dir", "report"]),
}
SPECIAL_ARTIFACT_FILES = {"program": ("program.json", "manifest.json"), "mlp": ("model.skops", "manifest.json"),
                          "cal": ("params.json", "manifest.json"),
                          "cache": ("cache.json", "problems.jsonl", "messages.jsonl")}
for _kind, _names in SPECIAL_ARTIFACT_FILES.items():
    ARTIFACT_CASES[_kind][0].extend(f"special:{special}:{name}" for name in _names
                                    for special in ("fifo", "dev-zero-link", "directory", "over-cap"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind, damage", [(k, d) for k, (ds, _) in ARTIFACT_CASES.items() for d in ds])
def test_corrupt_artifacts_are_one_line_errors(workspace, tmp_path, kind, damage):
    broken = corrupt(workspace / kind, tmp_path / kind, damage)
    template = ARTIFACT_CASES[kind][1]
    argv = [p.replace("{dir}", str(broken)).replace("{tasks}", str(workspace / "tasks.jsonl")) for p in template]
    code, out, err = run_cli(argv, tmp_path, max_file_bytes=SMALL_CAP)
    assert_one_clean_line(argv, code, out, err)


@pytest.mark.parametrize("kind", ["mlp", "cal"])
def test_the_intact_artifacts_work_with_the_same_commands(workspace, tmp_path, kind):
    """The control for the corrupt-artifact cases: undamaged, the same command succeeds."""
    template = ARTIFACT_CASES[kind][1]
    argv = [p.replace("{dir}", str(workspace / kind)).replace("{tasks}", str(workspace / "tasks.jsonl"))
            for p in template]
    code, out, err = run_cli(argv, tmp_path)
    assert code in (0, 1) and "Traceback" not in err, err[-2000:]  # coverage exits 1 when a round is below target
    assert out.strip()


def test_the_intact_program_and_runs_load(workspace, tmp_path):
    from groundstate.optimizers.artifacts import load_program
    from groundstate.programs.reground.reground import ReGround

    assert isinstance(load_program(workspace / "program"), ReGround)
    first, second = shards(workspace)[:2]
    code, out, err = run_cli(["runs", "merge", str(first), str(second), "--runs-dir", str(tmp_path / "m")], tmp_path)
    assert code == 0, err
    code, out, err = run_cli(["runs", "show", str(first)], tmp_path)
    assert code == 0, err


# -- special files: FIFOs, devices, directories, oversized files ---------------------------------------------------
OFFQUERY = Path(__file__).parent / "data" / "offquery" / "CrisisFact.json"
#: COMMANDS, plus the inputs that are not a command's main data file.
SPECIAL_COMMANDS = {
    **COMMANDS,
    "t2-truth": ["data", "validate", "--data", str(OFFQUERY), "--t2-truth", "{f}"],
    "lm-check-config": ["lm", "check", "--lm-config", "{f}"],
}
#: The reading paths that depend on the suffix (JSON list, Parquet), walked for a few commands.
SUFFIX_COMMANDS = ("data-validate", "hidden-validate", "run-qa", "optimize")


def special_cases() -> list[tuple[str, str, str]]:
    cases = []
    for command in sorted(SPECIAL_COMMANDS):
        suffixes = [".toml"] if "config" in command else [".jsonl"]
        if command in SUFFIX_COMMANDS:
            suffixes += [".json", ".parquet"]
        cases += [(command, kind, suffix) for kind in SPECIAL_KINDS for suffix in suffixes]
    return cases


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command, kind, suffix", special_cases())
def test_every_reading_command_refuses_special_files(command, kind, suffix, tmp_path):
    """A FIFO (which would block an open for ever), a link to /dev/zero (size 0, endless), a directory and a file
    over the size limit, given where a command reads a file: one line and exit 2, before anything is read. A hang
    fails the test by its timeout (the child is killed)."""
    case = tmp_path / "case"
    case.mkdir()
    name = "bad" + suffix
    make_special(case / name, kind)
    argv = [part.replace("{f}", name) for part in SPECIAL_COMMANDS[command]]
    code, out, err = run_cli(argv, case, max_file_bytes=SMALL_CAP)
    assert_one_clean_line(argv, code, out, err)
    written = [p.relative_to(case) for p in case.rglob("*") if p.is_file() and not p.is_symlink()
               and p.name not in (name, ".stdout", ".stderr")]
    assert not [str(p) for p in written if p.parts[0] != "runs"], f"{argv}: wrote {written}"


def test_the_special_files_are_what_they_claim(tmp_path):
    """The cases above test what they say: the FIFO would block a plain open, /dev/zero reports size 0 and never
    ends, and the sparse file is over the child's limit while taking (almost) no disk."""
    import stat

    for kind in SPECIAL_KINDS:
        make_special(tmp_path / kind, kind)
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    assert os.stat(tmp_path / "dev-zero-link").st_size == 0
    with open(tmp_path / "dev-zero-link", "rb") as handle:
        assert handle.read(1 << 16) == b"\0" * (1 << 16)
    assert (tmp_path / "directory").is_dir()
    info = os.stat(tmp_path / "over-cap")
    assert info.st_size == SMALL_CAP + 1 and info.st_blocks * 512 < SMALL_CAP
