"""``groundstate dhd``: generate -> replay -> analyze -> crossfit -> mask with a scripted LM, resume, errors.

The group is wired on a throwaway parser (the lead registers :func:`groundstate.cli.dhd.register` in ``cli.py``).
"""

from __future__ import annotations

import json
import re

import dspy
import pytest

from groundstate.cli.dhd import register
from groundstate.cli.options import Parser as _Parser
from groundstate.errors import GroundstateError
from groundstate.eval.benchmarks.problems import load_problems
from groundstate.lm.config import LMConfig
from groundstate.testing import scripted_lm
from tests.helpers import DATA as TEST_DATA
from tests.helpers import is_rich_table, table_row

DATA = TEST_DATA / "dhd"
SCIBENCH = DATA / "scibench_small.json"


def parser():
    root = _Parser(prog="groundstate")
    register(root.add_subparsers(dest="command", parser_class=_Parser))
    return root


def run(argv: list[str]) -> int:
    args = parser().parse_args(["dhd", *argv])
    try:
        return args.func(args)
    except GroundstateError as exc:
        print(f"groundstate: error: {exc}")
        return exc.exit_code


class Solver:
    """Scripted DHD LM: message 0 proposes a wrong answer but makes the integrator right; message 1 proposes the
    gold answer; everything else is wrong."""

    def __init__(self):
        self.golds = {p.question: p.answer for p in load_problems(SCIBENCH)}

    def __call__(self, req):
        fields = req.output_fields
        if "roles" in fields:
            return {"roles": [f"Role{i}: view {i}" for i in range(int(req.field("n_roles")))]}
        gold = self.golds.get(req.field("problem") or "", "0")
        if "proposed_answer" in fields:
            i = int(re.search(r"Role(\d+)", req.field("role")).group(1))
            return {"proposed_answer": gold if i == 1 else "0.001", "reasoning_direction": f"MARK{i}X",
                    "key_idea": "k", "critical_assumption": "a", "what_to_check": "c", "confidence": "high",
                    "confidence_reason": "checked twice"}
        if "verdict" in fields:  # the judge: right iff the gold answer is in the response
            response = req.field("response") or ""
            return {"final_answer": response[-20:], "verdict": "correct" if gold in response else "incorrect"}
        if "answer" in fields:
            helped = "MARK0X" in (req.field("messages") or "")
            return {"reasoning": "r", "answer": gold if helped else "0.001"}
        return None


@pytest.fixture
def lm(monkeypatch):
    dspy.cache.reset_memory_cache()
    model = scripted_lm(Solver(), cache=True)

    def configure(args):
        dspy.configure(lm=model, adapter=dspy.JSONAdapter())
        return model, LMConfig()

    monkeypatch.setattr("groundstate.cli.options.configure_lms", configure)
    yield model
    dspy.cache.reset_memory_cache()


def test_every_dhd_command_has_help(capsys):
    for command in ("generate", "replay", "analyze", "mask", "crossfit"):
        with pytest.raises(SystemExit) as info:
            parser().parse_args(["dhd", command, "--help"])
        assert info.value.code == 0 and "usage:" in capsys.readouterr().out


def test_generate_replay_analyze_crossfit_mask(tmp_path, lm, capsys):
    cache = tmp_path / "cache"
    common = ["--cache", str(cache), "--threads", "2", "--no-progress"]
    assert run(["generate", "--data", str(SCIBENCH), "--k", "3", *common]) == 0
    assert "4 problems: 0 already cached, 4 generated" in capsys.readouterr().out
    assert lm.engine.calls == 4 * 4

    assert run(["replay", "--mode", "loo", "--repeats", "3", "--k", "1", "2", "3", *common]) == 0
    calls = lm.engine.calls
    assert calls == 16 + 4 * 3 * (3 + 4 + 5)  # problems x blocks x arms of K=1,2,3: every replay sampled
    assert run(["replay", "--mode", "loo", "--repeats", "3", "--k", "1", "2", "3", *common]) == 0
    assert lm.engine.calls == calls  # resumed: nothing re-run
    assert run(["replay", "--mode", "single", "--repeats", "2", "--k", "3", *common]) == 0
    assert lm.engine.calls == calls + 4 * 2 * 4
    capsys.readouterr()

    assert run(["analyze", "--cache", str(cache), "--permutations", "200", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("│ loo "))  # the rich table's LOO row
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[:5] == ["loo", "3", "12", "3", "4"] and cells[-1] == "0.0%"  # mode, K, messages, blocks, W+
    assert "permutation p" in out and "failed calls" in out and "|" not in out
    analysis = cache / "analysis"
    labels = [json.loads(line) for line in (analysis / "labels.jsonl").read_text().splitlines()]
    assert len(labels) == 12 + 12
    helpful = [x for x in labels if x["mode"] == "loo" and x["message_id"] == 0]
    assert all(x["label"] == "helpful" and x["proposal_correct"] is False and x["estimate"] == 1.0 for x in helpful)
    assert all(x["proposal_correct"] is True for x in labels if x["message_id"] == 1)
    report = (analysis / "report.md").read_text()
    assert "In-pool leave-one-out (K=3" in report and "Per-message LOO rates by K" in report
    pairs = (analysis / "pairs.jsonl").read_text().splitlines()
    assert len(pairs) == 4 * 3 * (1 + 2 + 3) + 4 * 2 * 3
    data = json.loads((analysis / "report.json").read_text())
    assert data["modes"]["loo"]["groups"]["W+"] == 4 and set(data["loo_rates_by_K"]) == {"1", "2", "3"}
    assert data["modes"]["loo"]["flip_direction"]["wrong"]["helpful_share"] == 1.0

    assert run(["crossfit", "--cache", str(cache), "--resamples", "50", "--shuffles", "20"]) == 0
    out = capsys.readouterr().out
    assert "replicate A (K=3)" in out and "replicate B" in out
    assert (analysis / "crossfit.json").is_file()

    before = lm.engine.calls
    assert run(["mask", "--sample", "3", "--repeats", "2", "--labels", str(analysis / "labels.jsonl"), *common]) == 0
    out = capsys.readouterr().out
    assert lm.engine.calls == before + 3 * 2 * 8  # eight outcomes per message and repetition
    assert is_rich_table(out) and "Diagnostic sample (n)" in out and "Neutral replacement" in out
    assert table_row(out, "Wrong-helpful (2)") == ["Wrong-helpful (2)", "100", "100", "0", "0", "100", "0"]  # message 0
    markdown = next(cache.rglob("mask_table.md")).read_text()  # the written file keeps its Markdown
    assert "| Wrong-helpful (2) | 100 | 100 | 0 | 0 | 100 | 0 |" in markdown
    assert "sample: 3 messages (Wrong-helpful 2, Indeterminate 1)" in out and "sample.json" in out
    assert run(["mask", "--sample", "3", "--repeats", "2", *common]) == 0  # --labels defaults to the analysis
    assert lm.engine.calls == before + 3 * 2 * 8  # resumed on the same fixed sample


def test_bad_problem_file_is_one_line_exit_2(tmp_path, lm, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"problem_text": "Q", "answer_number": "lots", "unit": "m", "problemid": "x1"}]))
    assert run(["generate", "--data", str(bad), "--cache", str(tmp_path / "c"), "--format", "scibench"]) == 2
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and str(bad) in line and "record position 0" in line and "field 'answer_number'" in line
    assert lm.engine.calls == 0


def test_steps_out_of_order_are_one_line_errors(tmp_path, lm, capsys):
    assert run(["replay", "--cache", str(tmp_path / "none"), "--mode", "loo"]) == 2
    assert "is not a DHD message cache" in capsys.readouterr().out
    cache = tmp_path / "cache"
    assert run(["generate", "--data", str(SCIBENCH), "--cache", str(cache), "--k", "2", "--no-progress"]) == 0
    capsys.readouterr()
    assert run(["analyze", "--cache", str(cache)]) == 2
    assert "no finished replay blocks" in capsys.readouterr().out
    assert run(["replay", "--cache", str(cache), "--mode", "loo", "--repeats", "1", "--k", "2", "--no-progress"]) == 0
    capsys.readouterr()
    assert run(["crossfit", "--cache", str(cache)]) == 2  # one block cannot be cross-fitted
    assert "needs more replays" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        parser().parse_args(["dhd", "replay", "--cache", str(cache), "--mode", "both"])
    assert info.value.code == 2


def read_configs(runs) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted(runs.glob("*/config.json")):
        config = json.loads(path.read_text())
        out.setdefault(config["program"], []).append(config)
    return out


def test_temperature_and_evaluator_options_reach_the_calls_and_the_run_config(tmp_path, lm, capsys, monkeypatch):
    seen: list[tuple[str, float | None]] = []
    complete = lm.engine.complete
    stages = {"roles": "recruiter", "proposed_answer": "hypothesizer", "answer": "integrator", "verdict": "judge"}

    def spy(request):
        fields = ((request.config.response_format or {}).get("schema") or {}).get("properties", {})
        seen.append((next(s for f, s in stages.items() if f in fields), request.config.temperature))
        return complete(request)

    lm.engine.complete = spy
    cache = tmp_path / "cache"
    common = ["--cache", str(cache), "--no-progress"]
    assert run(["generate", "--data", str(SCIBENCH), "--k", "2", "--recruiter-temperature", "0.1",
                "--hypothesizer-temperature", "0.9", *common]) == 0
    assert {(s, t) for s, t in seen} == {("recruiter", 0.1), ("hypothesizer", 0.9)}  # rules: no judge calls
    (generated,) = read_configs(cache / "runs")["dhd-generate"]
    assert generated["temperatures"] == {"recruiter": 0.1, "hypothesizer": 0.9, "judge": None}
    assert generated["evaluator"] == "rules" and "judge" not in generated

    del seen[:]
    replay = ["replay", "--mode", "loo", "--k", "2", *common]
    assert run([*replay, "--integrator-temperature", "0.3"]) == 0
    assert {t for s, t in seen} == {0.3} and {s for s, _ in seen} == {"integrator"}
    (replayed,) = read_configs(cache / "runs")["dhd-replay-loo"]
    assert replayed["temperatures"] == {"recruiter": 0.1, "hypothesizer": 0.9, "integrator": 0.3, "judge": None}
    calls = lm.engine.calls
    assert run([*replay, "--integrator-temperature=0.3"]) == 0 and lm.engine.calls == calls  # the same run
    assert run([*replay, "--no-judge"]) == 0 and lm.engine.calls > calls  # integrator 0 (default): another run
    assert len(read_configs(cache / "runs")["dhd-replay-loo"]) == 2
    capsys.readouterr()

    assert run([*replay, "--no-judge", "--evaluator", "judge"]) == 2
    assert "contradict" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser().parse_args(["dhd", *replay, "--judge-temperature", "3"])
    capsys.readouterr()

    monkeypatch.setattr("groundstate.lm.config.get_lm", lambda spec, **options: lm)
    del seen[:]
    assert run(["replay", "--mode", "single", "--k", "2", "--judge-lm", "some/judge", "--judge-temperature", "0.2",
                *common]) == 0
    judged = [t for s, t in seen if s == "judge"]
    assert judged and set(judged) == {0.2}  # a judge LM given: judge mode by default, at the chosen temperature
    (single,) = read_configs(cache / "runs")["dhd-replay-single"]
    assert single["evaluator"] == "judge" and single["temperatures"]["judge"] == 0.2 and single["judge_lm"]


def test_prompt_options_reach_the_calls_and_the_run_config(tmp_path, lm, capsys):
    from groundstate.signatures.deliberation import NO_SCORE_NOTE

    budgets: list[int | None] = []
    complete = lm.engine.complete

    def spy(request):
        if "answer" in ((request.config.response_format or {}).get("schema") or {}).get("properties", {}):
            budgets.append(request.config.max_tokens)
        return complete(request)

    lm.engine.complete = spy
    old, new = tmp_path / "old", tmp_path / "new"
    assert run(["generate", "--data", str(SCIBENCH), "--k", "2", "--confidence", "number", "--cache", str(old),
                "--no-progress"]) == 0
    assert "confidence" not in read_configs(old / "runs")["dhd-generate"][0]  # the earlier configuration
    assert run(["generate", "--data", str(SCIBENCH), "--k", "2", "--cache", str(new), "--no-progress"]) == 0
    assert read_configs(new / "runs")["dhd-generate"][0]["confidence"] == "level"
    assert all(m["confidence"] is None and m["confidence_note"].startswith("high")
               for line in (new / "messages.jsonl").read_text().splitlines() for m in json.loads(line)["messages"])
    capsys.readouterr()
    # the default (words) would mix formats in the old cache: refused, naming the option
    other = tmp_path / "more.json"
    other.write_text(json.dumps([{**json.loads(SCIBENCH.read_text())[0], "problemid": "extra-1"}]))
    assert run(["generate", "--data", str(other), "--k", "2", "--cache", str(old), "--no-progress"]) == 2
    assert "--confidence" in capsys.readouterr().out

    replay = ["replay", "--mode", "loo", "--k", "2", "--cache", str(new), "--no-progress"]
    assert run(replay) == 0
    (config,) = read_configs(new / "runs")["dhd-replay-loo"]
    assert config["integrator"] == {"prompt": "authors", "max_tokens": 4096} and config["confidence"] == "level"
    assert set(budgets) == {4096}
    shown = [r.field("messages") for r in lm.engine.requests if r.field("messages")]
    assert shown and all(text.startswith(f"{NO_SCORE_NOTE}\nHypothesis 1") for text in shown)
    del budgets[:]
    assert run([*replay, "--integrator-prompt", "compact"]) == 0  # another run, with the earlier prompt
    configs = read_configs(new / "runs")["dhd-replay-loo"]
    assert len(configs) == 2 and sum("integrator" not in c for c in configs) == 1
    assert set(budgets) == {lm.kwargs["max_tokens"]}
    assert lm.engine.requests[-1].field("messages") is None or lm.engine.requests[-1].field(
        "messages").startswith("Message 1")
    with pytest.raises(SystemExit):  # refused by the option's bounds
        parser().parse_args(["dhd", *replay, "--integrator-max-tokens", "0"])


def test_replay_single_defaults_k_to_the_cache_k(tmp_path, lm, monkeypatch, capsys):
    import groundstate.eval.dhd.steps as steps

    cache = tmp_path / "cache"
    assert run(["generate", "--data", str(SCIBENCH), "--cache", str(cache), "--k", "3", "--no-progress"]) == 0
    seen = {}
    real = steps.plan_replay

    def spy(cache_, mode, ks, *rest, **kwargs):
        seen["ks"] = ks
        return real(cache_, mode, ks, *rest, **kwargs)

    monkeypatch.setattr(steps, "plan_replay", spy)
    capsys.readouterr()
    assert run(["replay", "--cache", str(cache), "--mode", "single", "--no-progress"]) == 0
    assert seen["ks"] == [3]  # not 5, which a k=3 cache cannot fill
    assert "left out" not in capsys.readouterr().out
