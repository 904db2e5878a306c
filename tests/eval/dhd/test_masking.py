"""DHD component masking (the paper's Table 23): eight arms per repetition, length-matched filler in the message's
own slot, the table's Full/Repeat averaging, the sample fixed from repeated-LOO labels, refusal without them,
resume on the fixed sample. Scripted LMs only."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import dspy
import pytest

from groundstate.cli import main
from groundstate.errors import ConfigError, InputError
from groundstate.eval.dhd.cache import MessageCache, PoolEntry
from groundstate.eval.dhd.mask_sample import (
    PAPER_PER_CATEGORY,
    SAMPLE_FILE,
    label_candidates,
    load_repeated_labels,
    resolve_quotas,
    sample_document,
    select_sample,
)
from groundstate.eval.dhd.masking import (
    CATEGORIES,
    REASONING_FIELDS,
    VARIANTS,
    filler,
    mask_arms,
    mask_inputs,
    mask_markdown,
    mask_table,
    masked_message,
)
from groundstate.eval.dhd.run import generate, mask
from groundstate.eval.results import read_results
from groundstate.eval.run_settings import RunSettings
from groundstate.programs.dhd.deliberation import render_pool
from groundstate.records import HypothesisMessage, Problem
from groundstate.signatures.deliberation import NO_SCORE_NOTE
from groundstate.testing import scripted_lm

GOLD = "4321"
WRONG = "17"
GROUP_OF = {"wrong-helpful": "W+", "correct-helpful": "C+", "wrong-harmful": "W-", "correct-harmful": "C-",
            "indeterminate": "indeterminate"}


class World:
    """Message ``i`` carries ``MARK<i>X`` in its reasoning and proposes ``700<i>``; the integrator is right iff the
    marker of message 0 is shown; ``failing`` maps a set of shown markers to an exception."""

    def __init__(self, failing=None):
        self.failing = failing or {}

    def __call__(self, req):
        fields = req.output_fields
        if "roles" in fields:
            return {"roles": [f"Role{i}: angle {i}" for i in range(5)]}
        if "proposed_answer" in fields:
            i = int(re.search(r"Role(\d+)", req.field("role")).group(1))
            return {"proposed_answer": str(7000 + i), "reasoning_direction": f"MARK{i}X", "key_idea": f"idea {i}",
                    "critical_assumption": "none at all", "what_to_check": "the units", "confidence": "low",
                    "confidence_reason": "rough guess"}
        if "equivalent" in fields:
            return {"equivalent": False}
        if "answer" in fields:
            shown = frozenset(int(x) for x in re.findall(r"MARK(\d+)X", req.field("messages") or ""))
            if shown in self.failing:
                return self.failing[shown]
            return {"reasoning": "r", "answer": GOLD if 0 in shown else WRONG}
        return None


def integrator_requests(lm):
    return [r for r in lm.engine.requests if "answer" in r.output_fields and "roles" not in r.output_fields
            and "proposed_answer" not in r.output_fields]


def within(lm, fn):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return fn()


@pytest.fixture(autouse=True)
def _fresh_dspy_cache():
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()


def label_row(pid, mid, group, n_blocks=5, k=5, mode="loo", **extra):
    return {"problem_id": pid, "message_id": mid, "estimate": 0.0, "low": None, "high": None, "p_value": 1.0,
            "group": group, "label": "neutral-or-unclear", "proposal_correct": group.startswith("C"),
            "n_blocks": n_blocks, "strict": True, "mode": mode, "K": k, **extra}


def write_labels(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def cache3(tmp_path):
    """A generated cache of three problems with five messages each, and its labels: message 0 W+ (wrong but
    helpful), the others indeterminate, from five LOO blocks."""
    cache = MessageCache(tmp_path / "cache")
    problems = [Problem(id=f"w-{j}", question=f"Problem w-{j}: how long is the rod?", answer=GOLD, kind="number",
                        unit="cm", source="tiny") for j in range(3)]
    within(scripted_lm(World(), cache=True), lambda: generate(cache, problems, run=RunSettings(threads=2)))
    rows = [label_row(f"w-{j}", i, "W+" if i == 0 else "indeterminate") for j in range(3) for i in range(5)]
    write_labels(cache.dir / "analysis" / "labels.jsonl", rows)
    return cache


def message(i: int, **fields) -> HypothesisMessage:
    base = {"problem_id": "p", "index": i, "role": f"Role {i}: a careful checker", "proposed_answer": f"0.{i}25 m/s",
            "reasoning_direction": f"MARK{i}X use energy conservation", "key_idea": "kinetic = potential at the top",
            "critical_assumption": "no friction, g = 9.8", "what_to_check": "units and sign", "confidence": 0.73}
    return HypothesisMessage(**{**base, **fields})


# -- the eight arms of one repetition ---------------------------------------------------------------------------------
def test_one_repetition_has_eight_arms_with_distinct_keys():
    arms = mask_arms("p", [0, 1, 2, 3, 4], 2, 3)
    assert [(a.variant, a.replicate) for a in arms] == [
        ("full", 0), ("full", 1), ("repeat", 0), ("repeat", 1), ("remove", 0), ("neutral", 0), ("hide_answer", 0),
        ("hide_reasoning", 0)]
    assert [a.arm.pattern for a in arms] == ["11111"] * 4 + ["11011", "11n11", "11a11", "11r11"]
    assert arms[0].arm.key == "dhd-mask|p|m2|11111|rep3|full|x0"
    assert arms[3].arm.key == "dhd-mask|p|m2|11111|rep3|repeat|x1"
    assert arms[6].arm.key == "dhd-mask|p|m2|11a11|rep3|hide_answer|x0"
    assert [a.view for a in arms] == [None] * 5 + ["neutral", "hide_answer", "hide_reasoning"]
    assert [a.slot for a in arms] == [2, 2, 2, 2, None, 2, 2, 2]  # the masked message stays in its slot
    assert arms[4].arm.shown == (0, 1, 3, 4) and all(a.arm.shown == (0, 1, 2, 3, 4) for a in arms if a.slot)
    assert all(set(a.arm.views) == {"full"} for a in arms)  # masking substitutes the filled copy
    keys = [a.arm.key for r in range(5) for a in mask_arms("p", [0, 1, 2, 3, 4], 2, r)]
    assert len(keys) == len(set(keys)) == 5 * 8  # unique per variant, replicate and repetition
    with pytest.raises(ValueError, match="not in the pool"):
        mask_arms("p", [0, 1], 4, 0)


def test_filler_matches_length_and_word_count_and_carries_nothing():
    for text in ("derive the  expression 3.5e-2", "7003", "", "a", "energy-conservation-based argument", "x\ty"):
        filled = filler(text)
        assert len(filled) == len(text) and len(filled.split()) == len(text.split())
        assert [m.span() for m in re.finditer(r"\s+", filled)] == [m.span() for m in re.finditer(r"\s+", text)]
        assert not re.search(r"\d", filled) and set(filled) <= set("masked- \t")
        assert filler(text) == filled  # deterministic
    assert filler("seven") == "maske" and filler("conservation") == "masked------"


def test_masking_arms_keep_slot_and_length():
    pool = [message(i) for i in range(5)]
    full_text = render_pool(pool)
    full_blocks = full_text.split("\n\n")
    fields = {"hide_answer": ("proposed_answer",), "hide_reasoning": REASONING_FIELDS,
              "neutral": ("role", "proposed_answer", *REASONING_FIELDS)}
    for arm in mask_arms("p", [m.index for m in pool], 3, 0):
        shown = mask_inputs(pool, arm)
        text = render_pool(shown, list(arm.arm.views))
        blocks = text.split("\n\n")
        if arm.variant == "remove":
            assert [m.index for m in shown] == [0, 1, 2, 4] and "MARK3X" not in text
            continue
        assert [m.index for m in shown] == [0, 1, 2, 3, 4]  # same messages, same order: the slot is kept
        assert len(text) == len(full_text) and len(blocks) == len(full_blocks)
        assert [b for i, b in enumerate(blocks) if i != 3] == [b for i, b in enumerate(full_blocks) if i != 3]
        assert blocks[3].startswith(f"{NO_SCORE_NOTE}\nHypothesis 4 ")  # its own number, after the no-score note
        target, original = shown[3], pool[3]
        filled = fields.get(arm.variant, ())
        for name in ("role", "proposed_answer", *REASONING_FIELDS):
            before, after = getattr(original, name), getattr(target, name)
            if name in filled:
                assert after != before and len(after) == len(before) and len(after.split()) == len(before.split())
                assert not re.search(r"\d", after)
            else:
                assert after == before
        assert target.confidence == (0.5 if arm.variant == "neutral" else 0.73)
        if arm.variant in fields:
            assert len(blocks[3]) == len(full_blocks[3]) and blocks[3] != full_blocks[3]
        else:
            assert text == full_text
    hidden = render_pool([masked_message(pool[0], "hide_answer")])
    assert "MARK0X" in hidden and "0.025" not in hidden
    hidden = render_pool([masked_message(pool[0], "hide_reasoning")])
    assert "MARK0X" not in hidden and "0.025 m/s" in hidden and "careful checker" in hidden
    hidden = render_pool([masked_message(pool[0], "neutral")])
    assert not any(s in hidden for s in ("MARK0X", "0.025", "careful", "friction", "0.73"))


# -- the table --------------------------------------------------------------------------------------------------------
def block(pid, mid, rep, category, outcomes):
    arms = []
    for variant, values in outcomes.items():
        for j, value in enumerate(values if isinstance(values, list) else [values]):
            arms.append({"arm": variant, "variant": variant, "replicate": j, "correct": value,
                         "failure": "lm-error: x" if value is None else None})
    return {"problem_id": pid, "message_id": mid, "repeat": rep, "category": category, "K": 5, "arms": arms}


def test_table_averages_each_full_and_repeat_pair_over_repetitions():
    o = {"remove": 0, "neutral": 0, "hide_answer": 1, "hide_reasoning": 0}
    blocks = [
        block("a", 0, 0, "wrong-helpful", {"full": [1, 1], "repeat": [1, 0], **o}),
        block("a", 0, 1, "wrong-helpful", {"full": [1, 0], "repeat": [1, 1], **o, "neutral": 1}),
        block("b", 2, 0, "wrong-helpful", {"full": [0, 1], "repeat": [None, 1], **o, "remove": 1,
                                           "hide_reasoning": None}),
        block("b", 2, 1, "wrong-helpful", {"full": [1, 0], "repeat": [0, 0], **o}),
        block("c", 1, 0, "indeterminate", {"full": [1, 0], "repeat": [0, 0], "remove": 1, "neutral": 1,
                                           "hide_answer": 0, "hide_reasoning": 1}),
    ]
    table = mask_table(blocks)
    assert table["variants"] == list(VARIANTS)
    assert [c["title"] for c in table["columns"]] == ["Full", "Repeat", "Remove", "Neutral replacement",
                                                      "Hide answer", "Hide reasoning"]
    helpful = table["rows"]["wrong-helpful"]
    assert (helpful["pairs"], helpful["repetitions"]) == (2, 4)
    # Full: per repetition (1+1)/2, (1+0)/2, (0+1)/2, (1+0)/2 -> mean 0.625 = 5 of 8 outcomes
    assert helpful["full"] == {"success": 62.5, "correct": 5, "n": 8, "failures": 0}
    # Repeat: 1,0 | 1,1 | failed,1 | 0,0 -> 4 of 7 evaluable, the failed call counted apart
    assert helpful["repeat"]["correct"] == 4 and helpful["repeat"]["n"] == 7 and helpful["repeat"]["failures"] == 1
    assert helpful["repeat"]["success"] == pytest.approx(400 / 7)
    assert helpful["remove"]["success"] == 25.0 and helpful["neutral"]["success"] == 25.0
    assert helpful["hide_answer"]["success"] == 100.0
    assert helpful["hide_reasoning"] == {"success": 0.0, "correct": 0, "n": 3, "failures": 1}
    other = table["rows"]["indeterminate"]
    assert other["full"]["success"] == 50.0 and other["repeat"]["success"] == 0.0 and other["pairs"] == 1
    everything = table["rows"]["all"]
    assert everything["full"]["n"] == 10 and everything["full"]["correct"] == 6 and table["failures"] == 2
    # every category has its row in the paper's order, an empty one too (shown empty, never dropped)
    assert list(table["rows"]) == ["wrong-helpful", "correct-helpful", "wrong-harmful", "correct-harmful",
                                   "indeterminate", "all"]
    empty = table["rows"]["correct-helpful"]
    assert (empty["pairs"], empty["sampled"], empty["repetitions"]) == (0, 0, 0)
    assert all(empty[v] == {"success": None, "correct": 0, "n": 0, "failures": 0} for v in VARIANTS)
    lines = mask_markdown(table).splitlines()
    assert lines[0] == ("| Diagnostic sample (n) | Full | Repeat | Remove | Neutral replacement | Hide answer "
                        "| Hide reasoning |")
    assert lines[2] == "| Wrong-helpful (2) | 63 | 57 (1 failed) | 25 | 25 | 100 | 0 (1 failed) |"  # 62.5 rounds up
    assert lines[3] == "| Correct-helpful (0) | - | - | - | - | - | - |"
    assert lines[6] == "| Indeterminate (1) | 50 | 0 | 100 | 100 | 0 | 100 |"
    assert "2 failed call(s)" in lines[-1]
    sample = {"pairs": [{"category": "wrong-helpful"}] * 2 + [{"category": "correct-harmful"}]}
    rows = mask_table(blocks[:2], sample)["rows"]
    assert rows["wrong-helpful"]["sampled"] == 2 and rows["wrong-helpful"]["pairs"] == 1
    assert rows["correct-harmful"]["sampled"] == 1 and rows["correct-harmful"]["full"]["success"] is None


# -- the sample -------------------------------------------------------------------------------------------------------
def labelled_world(tmp_path, n_problems=12):
    """Labels over ``n_problems`` problems x five messages: every category present, some with too few blocks."""
    cycle = ["W+", "C+", "W-", "C-", "indeterminate"]
    rows, entries = [], {}
    for j in range(n_problems):
        pid = f"p{j:02d}"
        entries[pid] = PoolEntry(problem_id=pid, roles=["r"] * 5,
                                 messages=[HypothesisMessage(problem_id=pid, index=i, role="r") for i in range(5)])
        for i in range(5):
            rows.append(label_row(pid, i, cycle[(i + j) % 5], n_blocks=1 if (i, j) == (0, 0) else 5))
        rows.append(label_row(pid, 0, "W+", mode="single", n_blocks=5))
    return rows, entries


def test_sample_from_labels_is_seeded_stratified_and_one_message_per_problem(tmp_path):
    rows, entries = labelled_world(tmp_path)
    path = write_labels(tmp_path / "labels.jsonl", rows)
    labels = load_repeated_labels(path)
    assert (labels.K, labels.n_blocks, len(labels.rows)) == (5, 5, 60)  # the single-mode rows are not used
    candidates, excluded = label_candidates(labels, entries)
    assert excluded == 1 and len(candidates) == 59
    group = {(r["problem_id"], r["message_id"]): r["group"] for r in rows if r["mode"] == "loo"}
    quotas = resolve_quotas()
    assert quotas == PAPER_PER_CATEGORY == {"wrong-helpful": 10, "correct-helpful": 3, "wrong-harmful": 3,
                                            "correct-harmful": 2, "indeterminate": 4}
    document = sample_document(labels, candidates, excluded, {c: 2 for c in CATEGORIES}, seed=7,
                               one_per_problem=True)
    pairs = document["pairs"]
    assert [p["category"] for p in pairs] == [c for c in CATEGORIES for _ in range(2)]  # stratified, table order
    assert all(GROUP_OF[p["category"]] == p["group"] == group[(p["problem_id"], p["message_id"])] for p in pairs)
    assert len({p["problem_id"] for p in pairs}) == 10  # one message per problem
    assert document["labels"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert document["drawn"] == {c: 2 for c in CATEGORIES} and document["shortfall"] == {}
    assert sample_document(labels, candidates, excluded, {c: 2 for c in CATEGORIES}, 7, True) == document
    shuffled = write_labels(tmp_path / "shuffled.jsonl", list(reversed(rows)))
    again = label_candidates(load_repeated_labels(shuffled), entries)[0]
    assert select_sample(again, {c: 2 for c in CATEGORIES}, seed=7) == pairs  # row order does not matter
    others = [select_sample(candidates, {c: 2 for c in CATEGORIES}, seed=s) for s in range(1, 4)]
    assert any(o != pairs for o in others)  # the seed drives the draw
    paper = sample_document(labels, candidates, excluded, quotas, seed=0, one_per_problem=True)
    assert sum(paper["drawn"].values()) == 12  # twelve problems, one message each
    assert sum(paper["shortfall"].values()) == 22 - 12  # reported, not hidden
    loose = select_sample(candidates, quotas, seed=0, one_per_problem=False)
    assert Counter(p["category"] for p in loose) == Counter(quotas)
    assert resolve_quotas(1) == dict.fromkeys(CATEGORIES, 1) and resolve_quotas([4, 0, 0, 0, 1])["indeterminate"] == 1
    assert resolve_quotas(None, 7, {"wrong-helpful": 9, "indeterminate": 1}) == {
        "wrong-helpful": 6, "correct-helpful": 0, "wrong-harmful": 0, "correct-harmful": 0, "indeterminate": 1}
    for bad in ([1, 2], [0], -1):
        with pytest.raises(ConfigError, match="--per-category"):
            resolve_quotas(bad)


def test_labels_of_another_cache_or_malformed_rows_are_one_line_errors(tmp_path):
    rows, entries = labelled_world(tmp_path, 2)
    labels = load_repeated_labels(write_labels(tmp_path / "l.jsonl", rows + [label_row("zz", 0, "W+")]))
    with pytest.raises(InputError, match="problem zz message 0 is not in this cache's pool of K=5"):
        label_candidates(labels, entries)
    with pytest.raises(InputError, match="record 2, field 'group'.*unknown group 'X'"):
        load_repeated_labels(write_labels(tmp_path / "g.jsonl", [rows[0], {**rows[1], "group": "X"}]))
    with pytest.raises(InputError, match="field 'n_blocks'"):
        load_repeated_labels(write_labels(tmp_path / "n.jsonl", [{**rows[0], "n_blocks": None}]))
    with pytest.raises(ConfigError, match="not at --k 3"):
        load_repeated_labels(tmp_path / "l.jsonl", k=3)


# -- refusal without repeated-replay labels ----------------------------------------------------------------------------
def tree_state(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("labels, says", [
    (None, "no labels file"),
    ([label_row("w-0", i, "indeterminate", n_blocks=1) for i in range(5)], "from 1 LOO replay block(s) at K=5"),
    ([label_row("w-0", i, "W+", mode="single") for i in range(5)], "single-message replay only"),
])
def test_mask_without_repeated_replay_labels_is_refused_with_one_line(cache3, monkeypatch, capsys, labels, says):
    path = cache3.dir / "analysis" / "labels.jsonl"
    if labels is None:
        path.unlink()
    else:
        write_labels(path, labels)
    before = tree_state(cache3.dir)

    def no_lm(args):
        raise AssertionError("the LM was set up before the labels were checked")

    monkeypatch.setattr("groundstate.cli.options.configure_lms", no_lm)
    assert main(["dhd", "mask", "--cache", str(cache3.dir), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err and str(path) in err
    assert "groundstate dhd replay" in err and "--mode loo --repeats 5" in err and "groundstate dhd analyze" in err
    assert tree_state(cache3.dir) == before  # nothing written, nothing lost


# -- end to end: the eight outcomes, the fixed sample, resume ---------------------------------------------------------
def test_mask_runs_eight_outcomes_on_the_fixed_sample_and_resumes_on_it(cache3):
    lm = scripted_lm(World(), cache=True)
    options = RunSettings(threads=2)
    quotas = {"wrong-helpful": 2, "indeterminate": 1}

    probe = within(lm, lambda: mask(cache3, 2, per_category=quotas, seed=3, run=RunSettings(limit=0)))
    assert lm.engine.calls == 0 and (probe[0].run_dir / SAMPLE_FILE).is_file()  # fixed before any LM call

    result, table, sample = within(lm, lambda: mask(cache3, 2, per_category=quotas, seed=3, run=options))
    pairs = sample["pairs"]
    assert [p["category"] for p in pairs] == ["wrong-helpful", "wrong-helpful", "indeterminate"]
    assert len({p["problem_id"] for p in pairs}) == 3 and all(p["message_id"] == 0 for p in pairs[:2])
    assert json.loads((result.run_dir / SAMPLE_FILE).read_text()) == sample
    assert sample["labels"]["path"].endswith("labels.jsonl") and len(sample["labels"]["sha256"]) == 64
    assert lm.engine.calls == 3 * 2 * 8  # eight calls per message and repetition, none collapsed
    requests = integrator_requests(lm)
    # a problem's full pool: four identical-input calls per repetition, two repetitions, all sent
    assert max(Counter(r.text for r in requests).values()) == 4 * 2
    entries = cache3.entries()
    expected: Counter = Counter()
    for row in result.rows:
        out = row["outputs"]
        assert len(out["arms"]) == 8 and Counter(a["variant"] for a in out["arms"]) == {
            "full": 2, "repeat": 2, "remove": 1, "neutral": 1, "hide_answer": 1, "hide_reasoning": 1}
        pool = entries[out["problem_id"]].pool(5)
        for arm in mask_arms(out["problem_id"], [m.index for m in pool], out["message_id"], out["repeat"]):
            expected[render_pool(mask_inputs(pool, arm))] += 1
    assert Counter(r.field("messages") for r in requests) == expected  # exactly the intended inputs
    keys = [a["key"] for row in result.rows for a in row["outputs"]["arms"]]
    assert len(keys) == len(set(keys)) == 48
    rows = table["rows"]
    assert {v: rows["wrong-helpful"][v]["success"] for v in VARIANTS} == {
        "full": 100.0, "repeat": 100.0, "remove": 0.0, "neutral": 0.0, "hide_answer": 100.0,
        "hide_reasoning": 0.0}  # its reasoning carries the effect
    assert rows["wrong-helpful"]["full"]["n"] == 2 * 2 * 2 and rows["indeterminate"]["remove"]["success"] == 100.0
    assert (result.run_dir / "mask_table.md").read_text().startswith("| Diagnostic sample (n) | Full | Repeat |")
    assert json.loads((result.run_dir / "mask_table.json").read_text())["rows"]["all"]["full"]["n"] == 12

    results = result.run_dir / "results.jsonl"
    results.write_text("\n".join(results.read_text().splitlines()[:4]) + "\n")  # killed: two records lost
    calls = lm.engine.calls
    resumed, _, again = within(lm, lambda: mask(cache3, 2, per_category=quotas, seed=3, run=options))
    assert resumed.run_dir == result.run_dir and resumed.skipped == 4 and again == sample
    assert lm.engine.calls == calls and len(read_results(results)) == 6  # re-run from DSPy's cache

    labels_path = cache3.dir / "analysis" / "labels.jsonl"
    rows_now = [json.loads(line) for line in labels_path.read_text().splitlines()]
    write_labels(labels_path, [{**r, "p_value": 0.5} for r in reversed(rows_now)])  # same sample, other bytes
    same, _, kept = within(lm, lambda: mask(cache3, 2, per_category=quotas, seed=3, run=options))
    assert same.run_dir == result.run_dir and same.skipped == 6 and kept == sample

    moved = [{**r, "group": "W-"} if (r["problem_id"], r["message_id"]) == (pairs[0]["problem_id"], 0) else r
             for r in rows_now]
    write_labels(labels_path, moved)
    stored = (result.run_dir / SAMPLE_FILE).read_text()
    finished = results.read_text()
    with pytest.raises(ConfigError, match="now gives a different sample") as info:
        within(lm, lambda: mask(cache3, 2, per_category=quotas, seed=3, run=options))
    assert "\n" not in str(info.value) and result.run_dir.name in str(info.value)
    assert (result.run_dir / SAMPLE_FILE).read_text() == stored and results.read_text() == finished
    assert lm.engine.calls == calls


def test_failed_calls_are_counted_in_their_cells_never_dropped(cache3):
    lm = scripted_lm(World(failing={frozenset({1, 2, 3, 4}): RuntimeError("LM down")}), cache=True)
    result, table, sample = within(lm, lambda: mask(cache3, 1, per_category={"wrong-helpful": 1}))
    assert all(row["error"] is None for row in result.rows)
    cells = table["rows"]["wrong-helpful"]
    # without message 0's marker the integrator fails: remove, neutral and hide-reasoning of message 0
    for variant in ("remove", "neutral", "hide_reasoning"):
        assert cells[variant] == {"success": None, "correct": 0, "n": 0, "failures": 1}
    assert cells["full"]["n"] == 2 and cells["hide_answer"]["success"] == 100.0 and table["failures"] == 3
    assert "- (1 failed)" in mask_markdown(table) and "3 failed call(s)" in mask_markdown(table)
    failed = [a for a in result.rows[0]["outputs"]["arms"] if a["correct"] is None]
    assert len(failed) == 3 and all(a["failure"].startswith("lm-error") for a in failed)
