"""The DHD generative model and its replay cache: the design it draws, the cache `analyze` reads unchanged, and the
analysis of a hand-built cache with every number worked out (block effects, failed calls, exclusions, refusals)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from groundstate.errors import ConfigError, InputError
from groundstate.eval.dhd.analysis import analyze
from groundstate.eval.dhd.cache import MessageCache
from groundstate.eval.dhd.effects import pair_effects
from groundstate.eval.dhd.run import collect_pairs
from groundstate.eval.dhd.simulate import DesignSpec, PlantedEffect, Simulation, simulate, write_cache
from groundstate.eval.results import RESULTS, read_results

FAST = {"n_permutations": 200, "n_resamples": 100, "n_multiplicity": 2000}


def test_the_model_draws_the_real_design():
    spec = DesignSpec(n_problems=4000, k=5, accuracy=(2.0, 2.0), proposal_correct=0.7,
                      effects=(PlantedEffect("W+", 0.5, 0.4),))
    sim = simulate(spec, 1)
    n = spec.n_problems
    assert sim.full.shape == (n, 5, 2) and sim.removal.shape == (n, 5, 5)
    assert abs(sim.proposal.mean() - 0.7) <= 3 * math.sqrt(0.21 / (5 * n))
    planted = sim.planted > 0
    assert not (planted & sim.proposal).any()  # W+ plants wrong-proposal messages only
    share = planted[~sim.proposal].mean()
    assert abs(share - 0.5) <= 3 * math.sqrt(0.25 / (~sim.proposal).sum())
    np.testing.assert_allclose(sim.true_value[planted], np.minimum(sim.accuracy[:, None], 0.4).repeat(5, 1)[planted])
    # null messages: removal calls have the problem's accuracy, like both full-pool calls
    null = ~planted[:, None, :].repeat(5, axis=1)
    accuracy = np.broadcast_to(sim.accuracy[:, None, None], sim.removal.shape)
    residual = sim.removal[null] - accuracy[null]
    assert abs(residual.mean()) <= 4 * residual.std() / math.sqrt(residual.size)
    full_residual = (sim.full - sim.accuracy[:, None, None]).ravel()
    assert abs(full_residual.mean()) <= 4 * full_residual.std() / math.sqrt(full_residual.size)
    # the five messages of a block share its two full-pool calls
    table = sim.table()
    assert (table.with_correct.reshape(n, 5, 5) == sim.full[:, None, :, 0]).all()
    assert simulate(spec, 1).removal.tolist() == sim.removal.tolist()  # seeded
    assert simulate(spec, 2).removal.tolist() != sim.removal.tolist()
    with pytest.raises(ValueError, match="GROUP:SHARE:SIZE"):
        PlantedEffect.parse("W+0.1")
    with pytest.raises(ValueError, match="group"):
        PlantedEffect.parse("X+:0.1:0.2")


def test_the_default_is_realistic_disagreement_in_the_papers_range_and_proposals_tied_to_difficulty():
    n = 20_000
    sim = simulate(DesignSpec(n_problems=n), 5)
    pairs = sim.full.reshape(-1, 2)
    rate = float((pairs[:, 0] != pairs[:, 1]).mean())
    margin = 3 * math.sqrt(0.07 * 0.93 / len(pairs))  # pairs of one problem are not independent: a loose margin
    assert 0.016 + margin <= rate <= 0.175 - margin, rate  # the paper's Table 17: 1.6% to 17.5%
    assert abs(rate - 0.071) <= 0.01  # E[2 a (1 - a)] under Beta(0.15, 0.06)
    assert 0.1 <= ((sim.accuracy > 0.1) & (sim.accuracy < 0.9)).mean() <= 0.25  # a few borderline problems
    easy, hard = sim.accuracy > 0.9, sim.accuracy < 0.1
    assert sim.proposal[easy].mean() > 0.8 > 0.1 > sim.proposal[hard].mean()  # proposals follow difficulty
    expected = 0.05 + 0.8 * sim.accuracy
    assert abs(sim.proposal.mean() - expected.mean()) <= 3 * math.sqrt(0.25 / sim.proposal.size)
    earlier = simulate(DesignSpec(n_problems=n, accuracy=(2.0, 1.0), proposal_correct=0.6), 5)  # before issue 25
    earlier_pairs = earlier.full.reshape(-1, 2)
    assert (earlier_pairs[:, 0] != earlier_pairs[:, 1]).mean() > 0.3
    assert abs(earlier.proposal[earlier.accuracy > 0.9].mean() - earlier.proposal[earlier.accuracy < 0.3].mean()) \
        <= 0.03
    with pytest.raises(ValueError, match="proposal_range"):
        DesignSpec(proposal_range=(0.2, 1.5))


def test_the_written_cache_is_what_analyze_reads(tmp_path):
    spec = DesignSpec(n_problems=12, n_blocks=3, fail_rate=0.03, benchmarks=("x", "y"),
                      effects=(PlantedEffect("C-", 0.3, 0.5),))
    sim = simulate(spec, 5)
    written = write_cache(sim, tmp_path / "c")
    cache = MessageCache(tmp_path / "c")
    rows, blocks = collect_pairs(cache)
    assert len(blocks) == 12 * 3 and written["n_records"] == 36
    table, direct = pair_effects(rows), sim.table()
    assert table.keys == direct.keys and table.strata == direct.strata
    for name in ("effects", "with_correct", "full_b", "without_correct"):
        np.testing.assert_array_equal(getattr(table, name), getattr(direct, name))
    np.testing.assert_array_equal(pair_effects(sim.pair_rows()).effects, direct.effects)
    truth = json.loads((tmp_path / "c" / "simulation.json").read_text())
    assert len(truth["messages"]) == 60 and truth["settings"]["seed"] == 5
    assert all(m["group"] == "C-" and m["proposal_correct"] for m in truth["planted"])
    with pytest.raises(ConfigError, match="not empty"):
        write_cache(sim, tmp_path / "c")


def hand_built() -> Simulation:
    """Three problems, two messages (0 wrong, 1 correct), three blocks; per block (A, B, removal 0, removal 1):

    - sim0000: (1, 0, 0, 1), (1, 1, 0, 1), (0, 1, 1, failed): effects m0 = 0.5, 1, -0.5 (value 1/3); m1 = -0.5, 0
      and not evaluable (value -1/4 over 2 blocks).
    - sim0001: (1, 1, 0, 1), (1, 0, 0, 1), (0, 0, 0, 0): m0 = 1, 0.5, 0 (1/2), m1 = 0, -0.5, 0 (-1/6); delta sums
      2 + 1 + 0 = 3 and 0 - 1 + 0 = -1.
    - sim0002: (1, failed, 0, 0), (1, 1, 1, 1), (1, 1, 1, 0): replicate B failed in block 0, so block 0 counts for
      neither message: m0 = 0, 0 (0), m1 = 0, 1 (1/2).
    """
    spec = DesignSpec(n_problems=3, n_blocks=3, k=2, proposal_correct=0.5)
    nan = np.nan
    full = np.array([[[1, 0], [1, 1], [0, 1]], [[1, 1], [1, 0], [0, 0]], [[1, nan], [1, 1], [1, 1]]], dtype=float)
    removal = np.array([[[0, 1], [0, 1], [1, nan]], [[0, 1], [0, 1], [0, 0]], [[0, 0], [1, 1], [1, 0]]], dtype=float)
    zeros = np.zeros((3, 2))
    return Simulation(spec=spec, seed=0, accuracy=np.full(3, 0.5), proposal=np.array([[False, True]] * 3),
                      planted=zeros.astype(int), removal_accuracy=zeros + 0.5, full=full, removal=removal)


def test_analysis_of_a_hand_built_cache(tmp_path):
    write_cache(hand_built(), tmp_path / "c")
    report = analyze(MessageCache(tmp_path / "c"), **FAST)
    labels = [json.loads(line) for line in (tmp_path / "c" / "analysis" / "labels.jsonl").read_text().splitlines()]
    estimates = {(r["problem_id"], r["message_id"]): (r["estimate"], r["n_blocks"]) for r in labels}
    assert estimates == {("sim0000", 0): (pytest.approx(1 / 3), 3), ("sim0000", 1): (-0.25, 2),
                         ("sim0001", 0): (0.5, 3), ("sim0001", 1): (pytest.approx(-1 / 6), 3),
                         ("sim0002", 0): (0.0, 2), ("sim0002", 1): (0.5, 2)}
    loo = report["modes"]["loo"]
    assert loo["effect"]["full"] == "mean" and "(A + B) / 2" in loo["effect"]["definition"]
    failures = loo["failures"]  # reported, never imputed
    assert failures["n_failed_calls"] == 2 and failures["blocks_without_baseline"] == 1
    assert failures["message_blocks_lost"] == 1 + 2
    assert {(f["problem_id"], f["block"], f["arm"], f["message_id"]) for f in failures["failed_calls"]} == {
        ("sim0000", 2, "without", 1), ("sim0002", 0, "full_b", None)}
    multi = loo["multiplicity"]
    assert multi["n_tested_problems"] == 1 and multi["n_excluded"] == 2
    assert {(e["problem_id"], e["block"], e["arm"], e["message_id"]) for e in multi["excluded"]} == {
        ("sim0000", 2, "without", 1), ("sim0002", 0, "full_b", None)}
    rows = [json.loads(line) for line in (tmp_path / "c" / "analysis" / "multiplicity.jsonl").read_text().splitlines()]
    assert rows[0]["problem_id"] == "sim0001" and rows[0]["statistics"]["W+"] == 3
    assert rows[0]["statistics"]["C-"] == 1 and set(multi["bh"]) >= {"W+", "W-", "C+", "C-"}
    assert loo["permutation_null"]["null_kind"] == "block"
    assert "BH (problems)" in (tmp_path / "c" / "analysis" / "report.md").read_text()
    # replicate A only: A - removal
    only_a = analyze(MessageCache(tmp_path / "c"), tmp_path / "a", full="a", **FAST)
    labels = [json.loads(line) for line in (tmp_path / "a" / "labels.jsonl").read_text().splitlines()]
    assert [r["estimate"] for r in labels][:2] == [pytest.approx(1 / 3), 0.0]  # (1, 1, -1) and (0, 0, failed)
    assert only_a["modes"]["loo"]["failures"]["blocks_without_baseline"] == 0  # replicate B is not needed


def edit_blocks(cache_dir, change) -> None:
    """Rewrite the replay run's results with ``change(outputs)`` applied to every block."""
    run_dir = next((cache_dir / "runs").iterdir())
    rows = read_results(run_dir / RESULTS)
    for row in rows:
        change(row["outputs"])
    (run_dir / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_missing_arm_is_refused_naming_problem_message_and_block(tmp_path):
    cache_dir = tmp_path / "c"
    write_cache(hand_built(), cache_dir)

    def drop(outputs):
        if outputs["problem_id"] == "sim0001" and outputs["block"] == 1:
            outputs["arms"] = [a for a in outputs["arms"] if not (a["arm"] == "without" and a["message_id"] == 1)]

    edit_blocks(cache_dir, drop)
    with pytest.raises(InputError) as info:
        analyze(MessageCache(cache_dir), **FAST)
    message = str(info.value)
    assert "\n" not in message and "problem 'sim0001', message 1, block 1" in message and "'without'" in message
    assert not (cache_dir / "analysis").exists()  # refused before anything was written


def test_an_old_cache_without_the_second_full_pool_call_needs_full_a(tmp_path):
    cache_dir = tmp_path / "c"
    write_cache(hand_built(), cache_dir)
    edit_blocks(cache_dir, lambda o: o.update(arms=[a for a in o["arms"] if a["arm"] != "full_b"]))
    with pytest.raises(InputError, match="--full a"):
        analyze(MessageCache(cache_dir), **FAST)
    report = analyze(MessageCache(cache_dir), full="a", **FAST)
    assert report["modes"]["loo"]["effect"]["full"] == "a"
    assert report["modes"]["loo"]["multiplicity"]["n_tested_problems"] == 2  # sim0002 is complete without B

    def drop_one(outputs):  # one block without its replicate B while the others have it: a damaged run
        if outputs["problem_id"] == "sim0000" and outputs["block"] == 2:
            outputs["arms"] = [a for a in outputs["arms"] if a["arm"] != "full_b"]

    write_cache(hand_built(), tmp_path / "d")
    edit_blocks(tmp_path / "d", drop_one)
    with pytest.raises(InputError, match="problem 'sim0000', full pool \\(all messages\\), block 2.*'full_b'"):
        analyze(MessageCache(tmp_path / "d"), **FAST)


def test_a_block_whose_record_failed_is_listed_as_missing_not_dropped_silently(tmp_path):
    cache_dir = tmp_path / "c"
    write_cache(hand_built(), cache_dir)
    run_dir = next((cache_dir / "runs").iterdir())
    rows = read_results(run_dir / RESULTS)
    for row in rows:  # the runner stores a failed record with its error and no outputs; a rerun retries it
        if row["id"] == "sim0001|loo|K2|b2":
            row.update(outputs={}, error="RuntimeError: simulated record failure")
    (run_dir / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = analyze(MessageCache(cache_dir), **FAST)
    failures = report["modes"]["loo"]["failures"]
    assert failures["missing_blocks"] == [{"problem_id": "sim0001", "block": 2}]
    multi = report["modes"]["loo"]["multiplicity"]
    assert multi["n_tested_problems"] == 0 and {e["problem_id"] for e in multi["excluded"]} == {
        "sim0000", "sim0001", "sim0002"}
    assert "1 blocks not finished" in (cache_dir / "analysis" / "report.md").read_text()
