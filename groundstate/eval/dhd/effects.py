"""DHD replay outcomes as a matched message x block table, the paper's block effect, and the disagreement rate.

A replay *pair row* (shared contract with the DHD program and its message cache) is a mapping with
``problem_id`` (str), ``message_id`` (int, the message's index in its problem's pool), ``mode`` (``"loo"``: full
pool vs pool without the message; ``"single"``: only the message vs independent solving), ``K`` (pool size),
``block`` (repeat index ``b = 0..B-1``), ``with_correct`` / ``without_correct`` (1, 0, or ``None`` only when that arm
failed operationally: the LM call failed, including unparseable LM output, or the judge's verdict could not be had;
an answer with no usable value, or a hedged one, is a wrong answer, 0) and ``proposal_correct`` (True/False, or
``None`` when the hypothesizer or the judging of its proposal failed). ``"loo"`` rows also carry
``with_correct_b``: the second full-pool call of the same block (replicate B; ``with_correct`` is replicate A). An
optional ``benchmark`` field is kept per problem (the default stratum of
:func:`groundstate.eval.dhd.bootstrap.hierarchical_bootstrap`).

**The block effect** (the paper's controlled repeat, Tables 17-19; the authors'
``problem_blocked_replay_multiplicity.py`` sums ``full1 + full2 - 2 * removal`` per block). A LOO block holds two
full-pool calls (A and B, shared by all messages of the problem) and one removal call per message; the effect of
message ``i`` in block ``b`` is ``(A_b + B_b) / 2 - removal_{i,b}``, one of -1, -0.5, 0, 0.5, 1 (``full="mean"``,
the default). ``full="a"`` uses replicate A only (``A_b - removal_{i,b}``, in {-1, 0, 1}: the definition before
issue 15, kept for caches replayed without the second full-pool call and as a sensitivity row). ``"single"`` mode
has one baseline call per block (the independent solver), so its effect stays ``only_{i,b} - independent_b``.

**No value is imputed** (the paper, Table 17). An effect is evaluable only when every call it needs is: with
``full="mean"``, a block where A or B failed is not evaluable for any message of that problem (it is not scored on
the surviving replicate), and a failed removal call makes only that message's block non-evaluable. An operational
failure is never a wrong answer. When ``full="mean"`` is asked of LOO rows that carry no ``with_correct_b`` at all
(an old cache), :func:`pair_effects` refuses and names ``full="a"``; rows that lack the field while others carry it
count as a failed replicate B.

The table keeps every arm (:class:`EffectTable` ``with_correct`` = replicate A, ``full_b`` = replicate B,
``without_correct`` = the removals for LOO; the ``only`` and ``independent`` arms for single), so statistics that
need the raw outcomes (the within-block permutation null, the problem-level max statistics, cross-fitting) read
them from :meth:`EffectTable.block_outcomes`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MODES = ("loo", "single")
GROUPS = ("W+", "W-", "C+", "C-")
FULL = ("mean", "a")
EFFECT_VALUES = (-1.0, -0.5, 0.0, 0.5, 1.0)


@dataclass(frozen=True)
class BlockOutcomes:
    """A table's raw outcomes regrouped per problem and block (see :meth:`EffectTable.block_outcomes`).

    Attributes:
        outcomes: float (problems x blocks x slots): 1 / 0 / NaN (failed, absent, or padding). Slots
            ``0 .. n_base-1`` are the block's baseline calls (LOO: replicate A, then B with ``full="mean"``;
            single: the independent solver), then one slot per message position.
        rows: int (problems x message positions): the table row of each message slot, -1 for padding.
        n_base: baseline slots (2 for LOO with ``full="mean"``, else 1).
        sign: +1 when a message's effect is ``mean(baseline) - slot`` (LOO), -1 when it is ``slot - baseline``
            (single).
    """

    outcomes: np.ndarray
    rows: np.ndarray
    n_base: int
    sign: int

    def effects(self) -> np.ndarray:
        """(problems x blocks x message positions) block effects recomputed from the outcomes."""
        base = self.outcomes[..., : self.n_base].mean(axis=-1, keepdims=True)
        return self.sign * (base - self.outcomes[..., self.n_base:])


@dataclass
class EffectTable:
    """Matched replay effects: one row per (problem, message), one column per repeat block.

    Attributes:
        keys: ``(problem_id, message_id)`` per message (row).
        effects: float array (messages x blocks): the block effect (module notes) in {-1, -0.5, 0, 0.5, 1}, NaN when
            a call it needs failed or the block is missing.
        proposal_correct: object array of True / False / None per message.
        problem_index: int per message, an index into ``problems``; a problem's messages share its blocks.
        problems: problem ids (derived from ``keys`` in first-appearance order when empty).
        with_correct: float array like ``effects`` with the with-arm correctness (1/0/NaN); for ``"loo"`` this is
            replicate A of the block's full pool (what :func:`~groundstate.eval.dhd.crossfit.crossfit_keep_or_remove`
            reads as replicate A). ``None`` if unknown.
        without_correct: the other arm (the removal calls for ``"loo"``, the independent solver for ``"single"``).
        mode: ``"loo"`` or ``"single"``.
        K: the pool size the rows came from (``None`` if mixed or unknown).
        strata: one label per problem (the rows' ``benchmark``), or ``None``.
        full_b: for ``"loo"``: replicate B of the block's full pool, like ``with_correct`` (``None``: not known).
        full: how the LOO effect uses the full pool: ``"mean"`` of A and B (the paper) or replicate ``"a"`` only.
            Ignored for ``"single"``.
    """

    keys: list[tuple[str, int]]
    effects: np.ndarray
    proposal_correct: np.ndarray
    problem_index: np.ndarray
    problems: list[str] = field(default_factory=list)
    with_correct: np.ndarray | None = None
    without_correct: np.ndarray | None = None
    mode: str = "loo"
    K: int | None = None
    strata: list[str | None] | None = None
    full_b: np.ndarray | None = None
    full: str = "mean"

    def __post_init__(self) -> None:
        self.keys = [(str(p), int(m)) for p, m in self.keys]
        self.effects = np.asarray(self.effects, dtype=float)
        if self.effects.ndim != 2 or self.effects.shape[0] != len(self.keys):
            self.effects = self.effects.reshape(len(self.keys), -1)
        self.proposal_correct = np.asarray([None if v is None else bool(v) for v in self.proposal_correct],
                                           dtype=object)
        if not self.problems:
            self.problems = list(dict.fromkeys(p for p, _ in self.keys))
        index = {p: i for i, p in enumerate(self.problems)}
        if self.problem_index is None or len(self.problem_index) == 0:
            self.problem_index = np.asarray([index[p] for p, _ in self.keys], dtype=int)
        self.problem_index = np.asarray(self.problem_index, dtype=int)
        if self.full not in FULL:
            raise ValueError(f"EffectTable.full must be one of {FULL}, got {self.full!r}")
        for name in ("with_correct", "without_correct", "full_b"):
            arm = getattr(self, name)
            if arm is not None:
                arm = np.asarray(arm, dtype=float)
                if arm.shape != self.effects.shape:
                    raise ValueError(f"EffectTable.{name} has shape {arm.shape}, effects have {self.effects.shape}")
                setattr(self, name, arm)
        n = len(self.keys)
        if self.proposal_correct.shape != (n,) or self.problem_index.shape != (n,):
            raise ValueError("EffectTable: keys, proposal_correct and problem_index must have one entry per message")
        if n and (self.problem_index.min() < 0 or self.problem_index.max() >= len(self.problems)):
            raise ValueError("EffectTable.problem_index points outside problems")
        if self.strata is not None and len(self.strata) != len(self.problems):
            raise ValueError("EffectTable.strata needs one label per problem")

    @property
    def n_messages(self) -> int:
        """Number of (problem, message) rows."""
        return len(self.keys)

    @property
    def n_blocks(self) -> int:
        """Number of repeat blocks ``B`` (columns)."""
        return int(self.effects.shape[1])

    @property
    def evaluable(self) -> np.ndarray:
        """Boolean (messages x blocks): every call the block effect needs is evaluable."""
        return ~np.isnan(self.effects)

    @property
    def proposal_code(self) -> np.ndarray:
        """int8 per message: 0 proposal wrong, 1 proposal correct, -1 unknown."""
        return np.asarray([-1 if v is None else int(v) for v in self.proposal_correct], dtype=np.int8)

    @property
    def full_a(self) -> np.ndarray | None:
        """Replicate A of the full pool (``with_correct``) for ``"loo"`` tables, else ``None``."""
        return self.with_correct if self.mode == "loo" else None

    def realization_effects(self) -> np.ndarray:
        """``with_correct - without_correct`` in {-1, 0, 1}: one realization per block (LOO: replicate A only).

        The single-realization flip statistics (flip direction, LOO rates by K) use it; falls back to ``effects``
        when the table has no arms.
        """
        if self.with_correct is None or self.without_correct is None:
            return self.effects
        return self.with_correct - self.without_correct

    def problem_slots(self) -> np.ndarray:
        """int (problems x max messages per problem): the table row of each message position, -1 for padding."""
        order = np.argsort(self.problem_index, kind="stable")
        problem = self.problem_index[order]
        counts = np.bincount(problem, minlength=len(self.problems))
        width = int(counts.max()) if len(counts) else 0
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
        slots = np.full((len(self.problems), width), -1, dtype=int)
        slots[problem, np.arange(len(order)) - starts[problem]] = order
        return slots

    def block_outcomes(self) -> BlockOutcomes:
        """The raw outcomes per problem and block: the shared baseline call(s), then one slot per message.

        Raises:
            ValueError: the table has no arms, or the messages of one block carry different baseline outcomes (a
                block's full pool, or its independent solver, is one call shared by its messages).
        """
        if self.with_correct is None or self.without_correct is None:
            raise ValueError("this statistic needs the replay arms (with_correct, without_correct): build the table "
                             "with pair_effects")
        slots = self.problem_slots()
        pad = (slots < 0)[..., None]

        def per_slot(arm: np.ndarray) -> np.ndarray:  # (P, W, B)
            return np.where(pad, np.nan, arm[np.maximum(slots, 0)])

        if self.mode == "loo":
            bases = [("A", self.with_correct)]
            if self.full == "mean":
                if self.full_b is None:
                    raise ValueError("full='mean' needs replicate B of the full pool (full_b)")
                bases.append(("B", self.full_b))
            message, sign = self.without_correct, 1
        else:
            bases, message, sign = [("independent", self.without_correct)], self.with_correct, -1
        shared = [self._shared(per_slot(arm), slots, name) for name, arm in bases]
        outcomes = np.concatenate([np.stack(shared, axis=-1), per_slot(message).transpose(0, 2, 1)], axis=-1)
        return BlockOutcomes(outcomes=outcomes, rows=slots, n_base=len(shared), sign=sign)

    def _shared(self, cells: np.ndarray, slots: np.ndarray, name: str) -> np.ndarray:
        known = ~np.isnan(cells)
        low = np.where(known, cells, np.inf).min(axis=1)
        high = np.where(known, cells, -np.inf).max(axis=1)
        clash = known.any(axis=1) & (low != high)
        if clash.any():
            p, b = (int(x) for x in np.argwhere(clash)[0])
            ids = [self.keys[slots[p, w]][1] for w in np.flatnonzero(known[p, :, b])]
            raise ValueError(f"problem {self.problems[p]!r}, block {b}: messages {sorted(ids)} carry different "
                             f"baseline outcomes ({name}); a block's baseline is one call shared by its messages")
        return np.where(known.any(axis=1), low, np.nan)

    def select(self, mask: Sequence[bool] | np.ndarray) -> EffectTable:
        """The sub-table of the messages where ``mask`` is true (problems re-indexed, blocks kept)."""
        mask = np.asarray(mask, dtype=bool)
        keep = np.flatnonzero(mask)
        used = list(dict.fromkeys(int(i) for i in self.problem_index[keep]))
        remap = {old: new for new, old in enumerate(used)}

        def rows(arm: np.ndarray | None) -> np.ndarray | None:
            return None if arm is None else arm[keep]

        return EffectTable(
            keys=[self.keys[i] for i in keep], effects=self.effects[keep],
            proposal_correct=self.proposal_correct[keep],
            problem_index=np.asarray([remap[int(i)] for i in self.problem_index[keep]], dtype=int),
            problems=[self.problems[i] for i in used], with_correct=rows(self.with_correct),
            without_correct=rows(self.without_correct), mode=self.mode, K=self.K,
            strata=None if self.strata is None else [self.strata[i] for i in used], full_b=rows(self.full_b),
            full=self.full)

    def by_stratum(self) -> dict[str | None, EffectTable]:
        """One sub-table per stratum label (e.g. per benchmark); ``{None: self}`` without strata."""
        if self.strata is None:
            return {None: self}
        labels = np.asarray(self.strata, dtype=object)[self.problem_index]
        return {s: self.select(labels == s) for s in dict.fromkeys(self.strata)}


def block_effect(with_a: np.ndarray, without: np.ndarray, full_b: np.ndarray | None = None, mode: str = "loo",
                 full: str = "mean") -> np.ndarray:
    """The block effect from the arms (module notes): NaN wherever a needed call is NaN."""
    with_a, without = np.asarray(with_a, dtype=float), np.asarray(without, dtype=float)
    if mode == "loo" and full == "mean":
        if full_b is None:
            raise ValueError("full='mean' needs replicate B of the full pool")
        return (with_a + np.asarray(full_b, dtype=float)) / 2 - without
    return with_a - without


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _label(value: Any, name: str, i: int) -> int | None:
    """1 / 0 / None from a correctness field (bools and 0/1 numbers accepted)."""
    if _is_missing(value):
        return None
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | float | np.integer | np.floating) and float(value) in (0.0, 1.0):
        return int(value)
    raise ValueError(f"replay row {i}: field {name!r} must be 1, 0 or None, got {value!r}")


def as_records(rows: Any) -> list[Mapping[str, Any]]:
    if hasattr(rows, "to_dict"):  # a pandas DataFrame
        return list(rows.to_dict("records"))
    return list(rows)


def pair_effects(rows: Any, mode: str = "loo", K: int | None = None, full: str = "mean") -> EffectTable:
    """Build the matched effect table of one replay mode (and pool size) from pair rows.

    Args:
        rows: pair rows (mappings, or a pandas DataFrame) as described in the module docstring. Rows of other modes
            (and, when ``K`` is given, other pool sizes) are ignored.
        mode: ``"loo"`` or ``"single"``.
        K: keep only rows with this pool size. Required when the selected rows mix pool sizes, because
            ``message_id`` is only unique within one pool.
        full: ``"mean"`` (the paper's block effect: mean of the two full-pool replicates minus the removal) or
            ``"a"`` (replicate A only); see the module notes. Ignored for ``"single"``.

    Returns:
        An :class:`EffectTable` with ``B = max(block) + 1`` columns; blocks without a row, or whose row has a failed
        call the effect needs, are NaN. Messages are ordered by problem (first appearance) then ``message_id``.
        ``full_b`` holds replicate B whenever the rows carry it (also with ``full="a"``).

    Raises:
        ValueError: unknown mode or ``full``, mixed pool sizes without ``K``, ``full="mean"`` on LOO rows without any
            ``with_correct_b``, a duplicated (problem, message, block), a bad correctness value, or conflicting
            ``proposal_correct`` values for one message.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if full not in FULL:
        raise ValueError(f"full must be one of {FULL}, got {full!r}")
    selected = []
    for i, row in enumerate(as_records(rows)):
        if row.get("mode") != mode:
            continue
        if K is not None and (_is_missing(row.get("K")) or int(row["K"]) != int(K)):
            continue
        selected.append((i, row))
    sizes = {int(row["K"]) for _, row in selected if not _is_missing(row.get("K"))}
    if K is None and len(sizes) > 1:
        raise ValueError(f"{mode} rows mix pool sizes {sorted(sizes)}: pass K= to select one")
    has_b = mode == "loo" and any("with_correct_b" in row for _, row in selected)
    if mode == "loo" and full == "mean" and selected and not has_b:
        raise ValueError("the LOO rows carry no second full-pool replicate (with_correct_b), which the paper's block "
                         "effect (A + B) / 2 - removal needs: replay again, or pass full='a' to use replicate A only")
    cells: dict[tuple[str, int], dict[int, tuple[int | None, int | None, int | None]]] = {}
    proposal: dict[tuple[str, int], bool | None] = {}
    stratum: dict[str, str | None] = {}
    for i, row in selected:
        key = (str(row["problem_id"]), int(row["message_id"]))
        block = int(row["block"])
        if block < 0:
            raise ValueError(f"replay row {i}: field 'block' must be >= 0, got {block}")
        blocks = cells.setdefault(key, {})
        if block in blocks:
            raise ValueError(f"replay row {i}: duplicate {mode} pair for problem {key[0]!r}, message {key[1]}, "
                             f"block {block}")
        blocks[block] = (_label(row.get("with_correct"), "with_correct", i),
                         _label(row.get("without_correct"), "without_correct", i),
                         _label(row.get("with_correct_b"), "with_correct_b", i) if has_b else None)
        value = row.get("proposal_correct")
        value = None if _is_missing(value) else bool(value)
        previous = proposal.get(key)
        if previous is not None and value is not None and previous != value:
            raise ValueError(f"replay row {i}: proposal_correct of problem {key[0]!r}, message {key[1]} "
                             f"conflicts with an earlier row")
        proposal[key] = previous if value is None else value
        bench = row.get("benchmark")
        if stratum.get(key[0]) is None:
            stratum[key[0]] = None if _is_missing(bench) else str(bench)
    problems = list(dict.fromkeys(p for p, _ in cells))
    order = {p: i for i, p in enumerate(problems)}
    keys = sorted(cells, key=lambda k: (order[k[0]], k[1]))
    n_blocks = 1 + max((b for blocks in cells.values() for b in blocks), default=-1)
    arms = np.full((3, len(keys), n_blocks), np.nan)  # with (A), without, with_b (B)
    for r, key in enumerate(keys):
        for b, values in cells[key].items():
            for a, value in enumerate(values):
                if value is not None:
                    arms[a, r, b] = value
    with_arm, without_arm, b_arm = arms
    b_arm = b_arm if has_b else None
    strata = [stratum[p] for p in problems]
    return EffectTable(keys=keys, effects=block_effect(with_arm, without_arm, b_arm, mode, full),
                       proposal_correct=np.asarray([proposal[k] for k in keys], dtype=object),
                       problem_index=np.asarray([order[p] for p, _ in keys], dtype=int), problems=problems,
                       with_correct=with_arm, without_correct=without_arm, mode=mode,
                       K=int(K) if K is not None else (next(iter(sizes)) if sizes else None),
                       strata=None if all(s is None for s in strata) else strata, full_b=b_arm, full=full)


def disagreement_rate(pairs: Iterable[Sequence[Any]], confidence: float = 0.95) -> dict[str, float | int | None]:
    """Share of identical-input full-pool repeat pairs whose correctness labels differ, with a Wilson interval.

    Args:
        pairs: two correctness labels (1/0/None, or bools) per pair, from two identical-input full-pool replays with
            distinct rollout ids; a mapping's two values are used in order.
        confidence: interval level.

    Returns:
        ``{rate, low, high, n, n_failed}``: ``n`` evaluable pairs (both labels known), ``n_failed`` pairs with a
        failed replay (excluded, never counted as disagreement). The interval is
        ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``; with ``n == 0`` all three are ``None``.
    """
    from scipy import stats  # noqa: PLC0415 (heavy: scipy)

    n = n_failed = differ = 0
    for i, pair in enumerate(pairs):
        values = list(pair.values()) if isinstance(pair, Mapping) else list(pair)
        if len(values) != 2:
            raise ValueError(f"repeat pair {i} must hold two correctness labels, got {len(values)}")
        a, b = (_label(v, "correct", i) for v in values)
        if a is None or b is None:
            n_failed += 1
            continue
        n += 1
        differ += int(a != b)
    if n == 0:
        return {"rate": None, "low": None, "high": None, "n": 0, "n_failed": n_failed}
    ci = stats.binomtest(differ, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {"rate": differ / n, "low": float(ci.low), "high": float(ci.high), "n": n, "n_failed": n_failed}
