import json

import pytest

from groundstate.cli import main
from groundstate.eval.benchmarks.offquery.loader import load_instances, save_instances
from groundstate.eval.benchmarks.offquery.synthetic import generate
from groundstate.eval.splits import group_key, split_instances
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.conftest import requires_embedded


@pytest.fixture
def placeholder_lm(monkeypatch):
    lm = scripted_lm()
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: lm)
    return lm


def test_splits_are_disjoint_by_id_and_source_case():
    instances = generate("healthcare", "main", 20, seed=0)
    # two instances built from the same source case must stay together
    shared = [x.model_copy(update={"id": f"{x.id}-b", "provenance": {**x.provenance, "source": "mediq",
                                                                        "case_id": i % 7}})
              for i, x in enumerate(instances)]
    splits = split_instances(shared, 0.6, 0.2, 0.2, seed=3)
    assert sum(len(v) for v in splits.values()) == 20
    groups = {name: {group_key(x) for x in items} for name, items in splits.items()}
    assert not groups["train"] & groups["val"] and not groups["train"] & groups["test"]
    assert not groups["val"] & groups["test"]
    plain = split_instances(instances, 0.6, 0.2, 0.2, seed=3)
    assert [len(plain[k]) for k in ("train", "val", "test")] == [12, 4, 4]
    assert split_instances(instances, 0.6, 0.2, 0.2, seed=3) == plain  # deterministic


@pytest.mark.parametrize("seed", range(20))
def test_a_small_split_keeps_both_domains_in_every_split_and_stays_disjoint_by_source_case(seed):
    """12 instances, two domains: each of train, val and test holds both (the earlier greedy assignment left a
    split with one domain for 13 of these 20 seeds); with pairs built from one source case, no pair straddles two
    splits and both halves still hold both domains; the split is a function of the seed."""
    data = generate("healthcare", "main", 6, seed=0) + generate("disaster", "main", 6, seed=0)
    splits = split_instances(data, 0.6, 0.2, 0.2, seed=seed)
    assert all({x.domain for x in splits[name]} == {"healthcare", "disaster"} for name in ("train", "val", "test"))
    assert sorted(x.id for items in splits.values() for x in items) == sorted(x.id for x in data)
    assert split_instances(data, 0.6, 0.2, 0.2, seed=seed) == splits
    paired = [x.model_copy(update={"provenance": {"source": "mediq", "case_id": f"{x.domain}-{i // 2}"}})
              for i, x in enumerate(data)]  # pairs built from one source case
    halves = split_instances(paired, 0.5, 0.5, 0.0, seed=seed)
    assert all({x.domain for x in halves[name]} == {"healthcare", "disaster"} for name in ("train", "val"))
    groups = {name: {group_key(x) for x in items} for name, items in halves.items()}
    assert not groups["train"] & groups["val"] and len(groups["train"] | groups["val"]) == 6


def test_a_share_of_zero_gets_nothing_and_one_source_case_is_never_divided():
    data = generate("healthcare", "main", 6, seed=0) + generate("disaster", "main", 6, seed=0)
    splits = split_instances(data, 0.8, 0.2, 0.0, seed=1)
    assert splits["test"] == [] and len(splits["train"]) + len(splits["val"]) == 12
    assert {x.domain for x in splits["val"]} == {"healthcare", "disaster"}
    one_case = [x.model_copy(update={"provenance": {"source": "mediq", "case_id": 1}}) for x in data]
    assert [len(v) for v in split_instances(one_case, 0.6, 0.2, 0.2).values()] == [12, 0, 0]


def test_split_optimize_evaluate_cli(tmp_path, capsys, placeholder_lm):
    data = tmp_path / "syn.jsonl"
    save_instances(data, generate("healthcare", "main", 10, seed=0))
    assert main(["split", "--data", str(data), "--train-share", "0.6", "--val-share", "0.2", "--test-share",
                 "0.2", "--seed", "1"]) == 0
    train, val, test = (tmp_path / f"syn.{s}.jsonl" for s in ("train", "val", "test"))
    ids = [{x.id for x in load_instances(p)} for p in (train, val, test)]
    assert not ids[0] & ids[1] and not ids[0] & ids[2] and sum(map(len, ids)) == 10
    out = tmp_path / "opt"
    assert main(["optimize", "reground", "--stage", "resolve", "--optimizer", "bootstrap", "--data", str(train),
                 "--val-data", str(val), "--out", str(out), "--max-demos", "1"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["task"] == "reground" and manifest["metric"]["spec"] == "t3"
    assert manifest["optimizer"]["trainable"] == ["resolve.choose"]
    assert set(manifest["data"]["train"]["ids"]) == ids[0] and manifest["data"]["train"]["sha256"]
    assert set(manifest["scores"]) == {"train", "val"} and manifest["cost"]["lm_calls"] > 0
    capsys.readouterr()
    assert main(["evaluate", str(out), "--data", str(test), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "before (unoptimized)" in text and "after (optimized)" in text
    assert all(f" {h} " in text for h in ("T1", "T2", "T3", "tokens/inst."))
    assert "|" not in text and "---" not in text  # a rich table, not Markdown
    report = next((out / "evaluations").glob("*/evaluate.json"))
    rows = json.loads(report.read_text())["rows"]
    assert [r["n"] for r in rows] == [len(ids[2])] * 2


@pytest.mark.parametrize("argv,message", [
    (["--metric", "t9"], "unknown metric 't9'"),
    (["--optimizer", "mipro"], "needs a validation set"),
    (["--max-demos", "0"], "zero demos"),
    (["--optimizer", "mipro", "--budget", "light", "--trials", "4"], "--budget light) chooses the candidates"),
    (["--optimizer", "mipro", "--budget", "heavy", "--candidates", "2"], "not both"),
    (["--budget", "medium"], "is MIPROv2's: use it with the optimizer 'mipro', not 'bootstrap'"),
])
def test_optimize_bad_input_is_one_line_exit_2(tmp_path, capsys, placeholder_lm, argv, message):
    data = tmp_path / "d.jsonl"
    save_instances(data, generate("healthcare", "main", 3))
    assert main(["optimize", "oracle", "--data", str(data), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_evaluate_refuses_incompatible_artifact(tmp_path, capsys, placeholder_lm):
    data = tmp_path / "d.jsonl"
    save_instances(data, generate("healthcare", "main", 3))
    main(["optimize", "oracle", "--data", str(data), "--out", str(tmp_path / "o"), "--metric", "t3"])
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    manifest["versions"]["dspy"] = "2.5.0"
    (tmp_path / "o" / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "o"), "--data", str(data)]) == 2
    assert "incompatible" in capsys.readouterr().err


@pytest.mark.embedded
@requires_embedded
def test_embedded_bootstrap_then_held_out_evaluation(tmp_path, capsys):
    instances = generate("healthcare", "main", 4, seed=5)  # the minimum that proves the path
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    save_instances(train, instances[:3])
    save_instances(test, instances[3:])
    out = tmp_path / "opt"
    assert main(["optimize", "oracle", "--optimizer", "bootstrap", "--metric", "t3", "--max-demos", "1",
                 "--data", str(train), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cost"]["lm_calls"] >= 3 and manifest["cost"]["input_tokens"] > 0
    assert main(["evaluate", str(out), "--data", str(test), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    rows = json.loads(next((out / "evaluations").glob("*/evaluate.json")).read_text())["rows"]
    assert [r["n"] for r in rows] == [1, 1] and all(r["errors"] == 0 for r in rows)


def test_optimize_whose_lm_calls_fail_exits_nonzero_and_saves_nothing(tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.jsonl"
    save_instances(data, generate("healthcare", "main", 4))
    dead = scripted_lm(lambda req: ConnectionError("connection refused"))
    monkeypatch.setattr(LMConfig, "lm_for", lambda self, role=None: dead)
    out = tmp_path / "o"
    assert main(["optimize", "oracle", "--data", str(data), "--out", str(out), "--metric", "t3"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # DSPy logs each failed example before it
    assert "metric calls failed" in last and "nothing to save" in last and not out.exists()


def test_gepa_with_an_unbuildable_reflection_lm_is_one_config_line(tmp_path, capsys, placeholder_lm):
    data, val = tmp_path / "d.jsonl", tmp_path / "v.jsonl"
    instances = generate("healthcare", "main", 4)
    save_instances(data, instances[:2])
    save_instances(val, instances[2:])
    argv = ["optimize", "oracle", "--data", str(data), "--val-data", str(val), "--out", str(tmp_path / "o"),
            "--metric", "t3", "--optimizer", "gepa", "--reflection-lm", "no-such-provider/x"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "reflection LM" in err and "\n" not in err and not (tmp_path / "o").exists()


def test_unchanged_optimization_is_flagged_and_evaluate_refuses_overlap(tmp_path, capsys, placeholder_lm):
    data = tmp_path / "d.jsonl"
    save_instances(data, generate("healthcare", "main", 3))
    out = tmp_path / "o"
    # the placeholder LM answers every case wrongly, so bootstrapping keeps no demo: nothing changes
    assert main(["optimize", "oracle", "--data", str(data), "--out", str(out), "--metric", "t3"]) == 0
    assert "left the program unchanged" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["program_state"]["unchanged"] is True
    assert manifest["program_state"]["before"] == manifest["program_state"]["after"]
    assert manifest["data"]["train"]["groups"]
    runs = str(tmp_path / "runs")
    assert main(["evaluate", str(out), "--data", str(data), "--runs-dir", runs, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "was in the program's train data" in err and "--allow-overlap" in err and "\n" not in err
    assert main(["evaluate", str(out), "--data", str(data), "--runs-dir", runs, "--no-progress",
                 "--allow-overlap"]) == 0
    assert "warning: the saved program's state equals the unoptimized" in capsys.readouterr().out


def test_optimize_budget_preset_reaches_miprov2(tmp_path, capsys, placeholder_lm, monkeypatch):
    import dspy

    seen = {}

    class SpyMIPRO(dspy.MIPROv2):
        def __init__(self, **kwargs):
            seen["init"] = kwargs
            super().__init__(**kwargs)

        def compile(self, student, **kwargs):
            seen["compile"] = kwargs
            return student  # what reached MIPROv2 is the point here; tests/optimizers runs it for real

    monkeypatch.setattr(dspy, "MIPROv2", SpyMIPRO)
    train, val = tmp_path / "train.jsonl", tmp_path / "val.jsonl"
    data = generate("healthcare", "main", 6)
    save_instances(train, data[:4])
    save_instances(val, data[4:])
    assert main(["optimize", "oracle", "--optimizer", "mipro", "--budget", "medium", "--metric", "t3", "--data",
                 str(train), "--val-data", str(val), "--out", str(tmp_path / "o")]) == 0
    assert seen["init"]["auto"] == "medium" and "num_candidates" not in seen["init"]
    assert "num_trials" not in seen["compile"]
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert manifest["optimizer"]["budget"]["auto"] == "medium"
    seen.clear()
    assert main(["optimize", "oracle", "--optimizer", "mipro", "--trials", "3", "--candidates", "2", "--metric",
                 "t3", "--data", str(train), "--val-data", str(val), "--out", str(tmp_path / "o2")]) == 0
    assert seen["init"]["auto"] is None and seen["init"]["num_candidates"] == 2
    assert seen["compile"]["num_trials"] == 3
