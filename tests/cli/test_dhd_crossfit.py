"""``groundstate dhd crossfit`` on a scripted replay cache: the three variants, and a damaged block refused."""

from __future__ import annotations

import json

from tests.cli.test_dhd import SCIBENCH, lm, run  # noqa: F401  (lm: the scripted-LM fixture)


def _replayed(tmp_path, capsys):
    cache = tmp_path / "cache"
    common = ["--cache", str(cache), "--threads", "2", "--no-progress"]
    assert run(["generate", "--data", str(SCIBENCH), "--k", "3", *common]) == 0
    assert run(["replay", "--mode", "loo", "--repeats", "3", "--k", "3", *common]) == 0
    capsys.readouterr()
    return cache


def test_crossfit_reports_main_and_both_replicates(tmp_path, lm, capsys):  # noqa: F811
    cache = _replayed(tmp_path, capsys)
    assert run(["crossfit", "--cache", str(cache), "--resamples", "50", "--shuffles", "20",
                "--control-draw", "block"]) == 0
    out = capsys.readouterr().out
    assert "main (full pool = mean of replicates A and B) (K=3)" in out and "replicate B (K=3)" in out
    assert "all-action null" in out and "removal-identity null" in out and "gain by benchmark" in out
    data = json.loads((cache / "analysis" / "crossfit.json").read_text())
    assert set(data["variants"]) == {"main", "A", "B"} and data["headline"] == "main" and data["K"] == 3
    assert data["control_draw"] == "block" and data["n_excluded_problems"] == 0
    assert data["variants"]["main"]["n_units"] == 4 * 3


def test_crossfit_refuses_a_block_without_one_of_its_arms(tmp_path, lm, capsys):  # noqa: F811
    cache = _replayed(tmp_path, capsys)
    results = next((cache / "runs").glob("dhd-replay-*/results.jsonl"))
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    damaged = next(r for r in lines if r.get("outputs", {}).get("arms"))
    damaged["outputs"]["arms"] = [a for a in damaged["outputs"]["arms"] if a["arm"] != "full_b"]
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert run(["crossfit", "--cache", str(cache)]) == 2
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and f"problem {damaged['outputs']['problem_id']!r}" in line
    assert f"block {damaged['outputs']['block']}" in line and "'full_b'" in line
    assert not (cache / "analysis" / "crossfit.json").exists()
