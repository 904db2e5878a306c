"""Fields of the wrong type or missing, in every file groundstate reads back, are one line and exit 2 (issue 22, 5).

Each family builds intact files first (a saved program as ``optimize`` writes it, an MLP controller and a calibrator,
two shards of a run, a Parquet file), damages one field in a copy, and runs the real CLI in a forked
child (``run_cli`` of ``tests/test_hostile_files.py``): exit 2, exactly one line on stderr naming the file and the
field, no traceback, nothing run. Each family also has its control: the intact files work with the same command.
The DHD cache and the files the DHD tables read are in ``tests/eval/dhd/test_hostile_cache_fields.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_hostile_files import run_cli

# -- shared files -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scripted():
    """Every LM the CLI builds is a scripted one (forked children inherit the patch)."""
    from groundstate.lm.config import LMConfig
    from groundstate.testing import scripted_lm

    lm = scripted_lm()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
        yield lm


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, scripted):
    import numpy as np

    import groundstate.cli
    from groundstate.eval.benchmarks.hiddenbench import save_hidden_tasks
    from groundstate.eval.benchmarks.offquery.loader import save_instances
    from groundstate.eval.benchmarks.offquery.synthetic import generate
    from groundstate.eval.benchmarks.travel.generator import generate_hidden_travel
    from groundstate.optimizers.artifacts import save_params, save_program, save_sklearn
    from groundstate.optimizers.conformal import RoundwiseConformal
    from groundstate.optimizers.consilience import Configuration
    from groundstate.optimizers.controller import MLPActionValue
    from groundstate.programs.consilience.control import build_controller
    from groundstate.programs.consilience.state import FEATURES
    from groundstate.programs.reground.reground import ReGround
    from groundstate.records import COMM_ACTIONS

    groundstate.cli.build_parser()
    root = tmp_path_factory.mktemp("fields")
    train, test = generate("healthcare", "main", 3, seed=0), generate("healthcare", "main", 1, seed=9)
    save_instances(root / "test.jsonl", test)
    save_instances(root / "test.parquet", test)
    build_args = {"max_candidates": 1, "multi_misleading": False, "oracle_t1": False, "rounds": None,
                  "topology": "all-to-all", "ordering": None, "seed": 0, "stop_early": False, "keep_rule": "authors",
                  "mode": "agent", "oracle_attribution": "model", "batch_facts": False}
    save_program(ReGround(max_candidates=1), root / "program", task="reground",
                 task_options={"condition": "unreliable", "judge": "lexical", "max_candidates": 1},
                 build_args=build_args, data={"train": {"file": "train.jsonl", "ids": [x.id for x in train],
                                                        "sha256": "0" * 64, "groups": []}, "val": None})
    save_hidden_tasks(root / "tasks.jsonl", generate_hidden_travel(4, seed=0))
    for shard in ("0/2", "1/2"):
        code, _, err = run_cli(["hidden", "run", "--data", str(root / "tasks.jsonl"), "--agents", "sim",
                                "--runs-dir", str(root / "runs"), "--no-progress", "--shard", shard], root)
        assert code == 0, err
    rng = np.random.default_rng(0)
    model = MLPActionValue(hidden_layer_sizes=(4,), max_iter=50).fit(rng.normal(size=(30, len(FEATURES))),
                                                                     rng.normal(size=(30, len(COMM_ACTIONS))))
    save_sklearn(model, root / "mlp", features=list(FEATURES), actions=[str(a) for a in model.actions_])
    configuration = Configuration.of("rules", build_controller("rules"), router="action-conditional", max_rounds=10,
                                     agents="sim", removed_actions=(), min_vote_round=None)
    calibrator = RoundwiseConformal(alpha=0.2, config=configuration.to_dict()).fit([1] * 10 + [2] * 10,
                                                                                   rng.uniform(size=20))
    save_params(calibrator, root / "cal", configuration=configuration.to_dict())
    return root


def damaged(source: Path, target: Path, name: str, change) -> Path:
    """A copy of ``source`` with the JSON file ``name`` changed by ``change(value)`` (which may return a new value)."""
    shutil.copytree(source, target)
    path = target / name
    value = json.loads(path.read_text())
    new = change(value)
    path.write_text(json.dumps(value if new is None else new))
    return target


def one_line_error(argv: list[str], cwd: Path, *needles: str) -> str:
    code, out, err = run_cli(argv, cwd)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err + out, err[-3000:]
    assert code == 2 and len(lines) == 1, (code, err[-2000:])
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- saved programs: the fields evaluate reads ----------------------------------------------------------------------
def set_in(path: tuple, value):
    def change(manifest):
        node = manifest
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def delete(path: tuple):
    def change(manifest):
        node = manifest
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


PROGRAM_DAMAGE = {
    "build_args.oracle_t1": delete(("build_args", "oracle_t1")),
    "task": set_in(("task",), ["reground"]),
    "task_options": set_in(("task_options",), "abc"),
    "task_options.condition": set_in(("task_options", "condition"), "sometimes"),
    "build_args": set_in(("build_args",), [1, 2]),
    "build_args.max_candidates": set_in(("build_args", "max_candidates"), "3"),
    "build_args.topology": set_in(("build_args", "topology"), "ring"),
    "build_args.mode": set_in(("build_args", "mode"), None),
    "build_args.unknown": set_in(("build_args", "unknown"), 1),
    "data.train.ids": set_in(("data", "train", "ids"), "abc"),
    "versions": set_in(("versions",), ["1.0"]),
    "format": set_in(("format",), "1"),
    "program": delete(("program",)),
}


@pytest.mark.parametrize("field", sorted(PROGRAM_DAMAGE))
def test_a_bad_saved_program_field_is_one_line_before_any_work(workspace, tmp_path, field):
    program = damaged(workspace / "program", tmp_path / "program", "manifest.json", PROGRAM_DAMAGE[field])
    line = one_line_error(["evaluate", str(program), "--data", str(workspace / "test.jsonl"), "--runs-dir", "runs",
                           "--no-progress"], tmp_path, "manifest.json", f"field '{field}'")
    assert not (tmp_path / "runs").exists(), line  # nothing ran
    assert not (program / "evaluations").exists()


def test_a_task_that_is_not_an_offquery_program_is_refused(workspace, tmp_path):
    program = damaged(workspace / "program", tmp_path / "program", "manifest.json", set_in(("task",), "qa"))
    one_line_error(["evaluate", str(program), "--data", str(workspace / "test.jsonl"), "--runs-dir", "runs"],
                   tmp_path, "field 'task'", "not an OffQuery program")


@pytest.mark.parametrize("legacy", [False, True], ids=["today", "earlier-main"])
def test_the_intact_saved_program_evaluates(workspace, tmp_path, legacy):
    """The control: the same command succeeds; a manifest written before stop_early, keep_rule, mode,
    oracle_attribution and batch_facts existed still loads (they default to the earlier behaviour)."""
    def earlier(manifest):
        for key in ("stop_early", "keep_rule", "mode", "oracle_attribution", "batch_facts"):
            del manifest["build_args"][key]

    program = damaged(workspace / "program", tmp_path / "program", "manifest.json",
                      earlier if legacy else (lambda m: None))
    code, out, err = run_cli(["evaluate", str(program), "--data", str(workspace / "test.jsonl"), "--runs-dir", "runs",
                              "--no-progress"], tmp_path)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert "after (optimized)" in out and (tmp_path / "runs").is_dir()


# -- MLP controller and calibrator ------------------------------------------------------------------------------------
MLP_DAMAGE = {
    "features": set_in(("features",), "HDRGCP"),
    "features[1]": set_in(("features",), ["H", 7, "R", "G", "C", "P"]),
    "unknown feature": set_in(("features",), ["H", "D", "R", "G", "C", "X"]),
    "feature count": set_in(("features",), ["H", "D"]),
    "actions": set_in(("actions",), ["Vote"]),
}


@pytest.mark.parametrize("damage", sorted(MLP_DAMAGE))
def test_a_bad_controller_manifest_field_is_one_line(workspace, tmp_path, damage):
    mlp = damaged(workspace / "mlp", tmp_path / "mlp", "manifest.json", MLP_DAMAGE[damage])
    one_line_error(["consilience", "evaluate", "--data", str(workspace / "tasks.jsonl"), "--agents", "sim",
                    "--controllers", "mlp", "--mlp", str(mlp), "--baselines", "--runs-dir", "runs", "--no-progress"],
                   tmp_path, "manifest.json", "field '" + damage.split()[-1].replace("count", "features"))


CALIBRATOR_DAMAGE = {
    ("params.json", "alpha"): set_in(("alpha",), 1.5),
    ("params.json", "alpha "): set_in(("alpha",), True),
    ("params.json", "thresholds.a (key)"): set_in(("thresholds",), {"a": 0.5}),
    ("params.json", "thresholds.1"): set_in(("thresholds", "1"), "high"),
    ("params.json", "counts.1"): set_in(("counts", "1"), -4),
    ("params.json", "config"): set_in(("config",), [1]),
    ("manifest.json", "configuration"): set_in(("configuration",), "rules"),
    ("manifest.json", "object"): set_in(("object",), "RoundwiseConformal"),
}


@pytest.mark.parametrize("name, field", sorted(CALIBRATOR_DAMAGE))
def test_a_bad_calibrator_field_is_one_line(workspace, tmp_path, name, field):
    cal = damaged(workspace / "cal", tmp_path / "cal", name, CALIBRATOR_DAMAGE[(name, field)])
    one_line_error(["consilience", "coverage", "--data", str(workspace / "tasks.jsonl"), "--agents", "sim",
                    "--calibrator", str(cal)], tmp_path, name, f"field '{field.strip()}'")


def test_a_round_with_a_threshold_and_no_count_is_refused(workspace, tmp_path):
    cal = damaged(workspace / "cal", tmp_path / "cal", "params.json", set_in(("counts",), {}))
    one_line_error(["consilience", "coverage", "--data", str(workspace / "tasks.jsonl"), "--agents", "sim",
                    "--calibrator", str(cal)], tmp_path, "params.json", "has a threshold but no count")


def test_the_intact_controller_and_calibrator_load(workspace):
    from groundstate.optimizers.artifacts import load_params
    from groundstate.optimizers.consilience import load_controller
    from groundstate.programs.consilience.state import FEATURES

    model, features = load_controller(workspace / "mlp")
    assert features == list(FEATURES) and model.n_features_in_ == len(FEATURES)
    calibrator = load_params(workspace / "cal")
    assert calibrator.alpha == 0.2 and set(calibrator.thresholds_) == {1, 2} and calibrator.counts_ == {1: 10, 2: 10}


# -- run directories ---------------------------------------------------------------------------------------------------
RUN_DAMAGE = {
    ("config.json", "shard"): set_in(("shard",), 5),
    ("config.json", "shard "): set_in(("shard",), [3, 2]),
    ("config.json", "program"): delete(("program",)),
    ("config.json", "run_id"): set_in(("run_id",), 7),
    ("config.json", "lm"): set_in(("lm",), "sim"),
    ("config.json", "limit"): set_in(("limit",), -1),
    ("summary.json", "n_done"): set_in(("n_done",), "4"),
    ("summary.json", "tokens.input"): set_in(("tokens", "input"), None),
    ("summary.json", "finished"): set_in(("finished",), "yes"),
}


def run_dirs(workspace: Path, tmp_path: Path) -> tuple[Path, Path]:
    first, second = sorted(p for p in (workspace / "runs").iterdir() if p.is_dir())
    shutil.copytree(second, tmp_path / "runs" / second.name)
    return first, tmp_path / "runs" / second.name


@pytest.mark.parametrize("command", ["show", "merge", "list"])
@pytest.mark.parametrize("name, field", sorted(RUN_DAMAGE))
def test_a_bad_run_directory_field_is_one_line(workspace, tmp_path, name, field, command):
    first, second = run_dirs(workspace, tmp_path)
    broken = damaged(first, tmp_path / "runs" / first.name, name, RUN_DAMAGE[(name, field)])
    argv = {"show": ["runs", "show", str(broken)],
            "merge": ["runs", "merge", str(broken), str(second), "--runs-dir", str(tmp_path / "merged")],
            "list": ["runs", "list", "--runs-dir", str(tmp_path / "runs")]}[command]
    one_line_error(argv, tmp_path, name, f"field '{field.strip()}'")
    assert not (tmp_path / "merged").exists()


def test_a_bad_result_row_field_is_one_line(workspace, tmp_path):
    first, _ = run_dirs(workspace, tmp_path)
    broken = tmp_path / "runs" / first.name
    shutil.copytree(first, broken)
    (broken / "results.jsonl").write_text('{"id": "a", "input_tokens": -3}\n')
    one_line_error(["runs", "show", str(broken)], tmp_path, "results.jsonl", "at line 1", "field 'input_tokens'")


def test_a_run_without_a_summary_is_recomputed_and_merges(workspace, tmp_path):
    """The control: a run killed before its first summary shows and merges, its summary recounted."""
    first, second = run_dirs(workspace, tmp_path)
    shutil.copytree(first, tmp_path / "runs" / first.name)
    (tmp_path / "runs" / first.name / "summary.json").unlink()
    code, out, err = run_cli(["runs", "show", str(tmp_path / "runs" / first.name)], tmp_path)
    assert code == 0 and "records" in out and first.name in out, err[-2000:]
    code, out, err = run_cli(["runs", "merge", str(tmp_path / "runs" / first.name), str(second), "--runs-dir",
                              str(tmp_path / "merged")], tmp_path)
    assert code == 0 and "merged 2 shards" in out, err[-2000:]


# -- Parquet metadata and JSON columns ---------------------------------------------------------------------------------
def parquet_with(workspace: Path, target: Path, metadata: bytes | None = None, column: str | None = None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(workspace / "test.parquet")
    if column is not None:
        rows = table.to_pylist()
        rows[0]["provenance"] = column
        table = pa.Table.from_pylist(rows, schema=table.schema)
    if metadata is not None:
        table = table.replace_schema_metadata({**table.schema.metadata, b"groundstate": metadata})
    pq.write_table(table, target)
    return target


PARQUET_DAMAGE = {
    "metadata-not-json": ({"metadata": b"json_columns=provenance"}, "field 'metadata.groundstate'"),
    "metadata-list": ({"metadata": b'["provenance"]'}, "field 'metadata.groundstate'"),
    "metadata-columns": ({"metadata": b'{"json_columns": "provenance"}'}, "field 'metadata.groundstate.json_columns'"),
    "metadata-binary": ({"metadata": b"\xff\xfe\x00"}, "not UTF-8"),
    "metadata-nan": ({"metadata": b'{"json_columns": [], "n": NaN}'}, "NaN"),
    "column-not-json": ({"column": '{"source": '}, "record at position 0, field 'provenance'"),
    "column-infinity": ({"column": '{"n": Infinity}'}, "record at position 0, field 'provenance'"),
}


@pytest.mark.parametrize("command", ["validate", "stats"])
@pytest.mark.parametrize("case", sorted(PARQUET_DAMAGE))
def test_bad_parquet_metadata_or_json_column_is_one_line(workspace, tmp_path, case, command):
    kwargs, needle = PARQUET_DAMAGE[case]
    path = parquet_with(workspace, tmp_path / "bad.parquet", **kwargs)
    one_line_error(["data", command, "--data", str(path)], tmp_path, "bad.parquet", needle)


def test_the_intact_parquet_file_reads(workspace, tmp_path):
    code, out, err = run_cli(["data", "validate", "--data", str(workspace / "test.parquet")], tmp_path)
    assert code == 0 and "1 valid instances (1 checked against the generator's rule), 0 problem(s)" in out, err


# -- structurally wrong OffQuery records: every reader checks them as data validate does -----------------------------
STRUCTURE_FILES = ["structure-wrong-agent.jsonl", "structure-t2-misaligned.jsonl"]
READERS = {
    "data-stats": ["data", "stats", "--data", "{f}"],
    "split": ["split", "--data", "{f}", "--out", "splits"],
    "run-reground": ["run", "reground", "--data", "{f}", "--runs-dir", "runs", "--no-progress"],
    "compare": ["compare", "reground", "standard", "--data", "{f}", "--runs-dir", "runs", "--no-progress"],
    "optimize": ["optimize", "reground", "--data", "{f}", "--out", "opt"],
    "evaluate": ["evaluate", "{program}", "--data", "{f}", "--runs-dir", "runs", "--no-progress"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("name", STRUCTURE_FILES)
def test_every_reader_refuses_a_record_that_breaks_the_generators_rule(workspace, tmp_path, name, reader):
    from tests.test_hostile_files import BAD

    shutil.copy(BAD / name, tmp_path / name)
    argv = [a.replace("{f}", name).replace("{program}", str(workspace / "program")) for a in READERS[reader]]
    field = "misleading" if "agent" in name else "t2_facts"
    one_line_error(argv, tmp_path, name, f"field '{field}'", "breaks the generator's rule")
    written = [p.name for p in tmp_path.iterdir() if p.name not in (name, ".stdout", ".stderr")]
    assert not written, written


def test_skip_invalid_reports_the_record_and_checks_the_rest(workspace, tmp_path):
    from tests.test_hostile_files import BAD

    data = tmp_path / "mixed.jsonl"
    data.write_text((BAD / "structure-wrong-agent.jsonl").read_text() + (workspace / "test.jsonl").read_text())
    code, out, err = run_cli(["data", "validate", "--data", str(data), "--skip-invalid"], tmp_path)
    assert code == 2 and "Traceback" not in err
    assert "field 'misleading': breaks the generator's rule" in out and "(record skipped)" in out
    assert "1 valid instances (1 checked against the generator's rule), 1 problem(s)" in out
    code, out, err = run_cli(["data", "stats", "--data", str(workspace / "test.jsonl")], tmp_path)  # the control
    assert code == 0 and "instances" in out, err
