"""DHD replay outcomes as a matched message x block table, and the full-pool disagreement rate.

A replay *pair row* (shared contract with the DHD program and its message cache) is a mapping with
``problem_id`` (str), ``message_id`` (int, the message's index in its problem's pool), ``mode`` (``"loo"``: full
pool vs pool without the message; ``"single"``: only the message vs independent solving), ``K`` (pool size),
``block`` (repeat index ``b = 0..B-1``), ``with_correct`` / ``without_correct`` (1, 0, or ``None`` when that arm
failed operationally: no parseable answer or an LM error) and ``proposal_correct`` (True/False, or ``None`` when the
message's own proposed answer could not be judged). An optional ``benchmark`` field is kept per problem (it is the
default stratum of :func:`groundstate.eval.dhd.bootstrap.hierarchical_bootstrap`).

The effect of a pair is ``with_correct - without_correct`` in {-1, 0, +1} when both arms are evaluable (+1 helpful,
-1 harmful, 0 neutral) and missing (NaN) otherwise. An operational failure is never a wrong answer: the pair is
simply not evaluable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MODES = ("loo", "single")
GROUPS = ("W+", "W-", "C+", "C-")


@dataclass
class EffectTable:
    """Matched replay effects: one row per (problem, message), one column per repeat block.

    Attributes:
        keys: ``(problem_id, message_id)`` per message (row).
        effects: float array (messages x blocks): ``with - without`` in {-1, 0, 1}, NaN when the pair is missing
            or one of its arms failed.
        proposal_correct: object array of True / False / None per message.
        problem_index: int per message, an index into ``problems``; a problem's messages share its blocks.
        problems: problem ids (derived from ``keys`` in first-appearance order when empty).
        with_correct: float array like ``effects`` with the with-arm correctness (1/0/NaN); for ``"loo"`` this is
            the full-pool outcome of the block, which :func:`crossfit_keep_or_remove` needs. ``None`` if unknown.
        without_correct: the other arm, likewise.
        mode: ``"loo"`` or ``"single"``.
        K: the pool size the rows came from (``None`` if mixed or unknown).
        strata: one label per problem (the rows' ``benchmark``), or ``None``.
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
        for name in ("with_correct", "without_correct"):
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
        """Boolean (messages x blocks): both arms evaluable."""
        return ~np.isnan(self.effects)

    @property
    def proposal_code(self) -> np.ndarray:
        """int8 per message: 0 proposal wrong, 1 proposal correct, -1 unknown."""
        return np.asarray([-1 if v is None else int(v) for v in self.proposal_correct], dtype=np.int8)

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
            strata=None if self.strata is None else [self.strata[i] for i in used])

    def by_stratum(self) -> dict[str | None, EffectTable]:
        """One sub-table per stratum label (e.g. per benchmark); ``{None: self}`` without strata."""
        if self.strata is None:
            return {None: self}
        labels = np.asarray(self.strata, dtype=object)[self.problem_index]
        return {s: self.select(labels == s) for s in dict.fromkeys(self.strata)}


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


def pair_effects(rows: Any, mode: str = "loo", K: int | None = None) -> EffectTable:
    """Build the matched effect table of one replay mode (and pool size) from pair rows.

    Args:
        rows: pair rows (mappings, or a pandas DataFrame) as described in the module docstring. Rows of other modes
            (and, when ``K`` is given, other pool sizes) are ignored.
        mode: ``"loo"`` or ``"single"``.
        K: keep only rows with this pool size. Required when the selected rows mix pool sizes, because
            ``message_id`` is only unique within one pool.

    Returns:
        An :class:`EffectTable` with ``B = max(block) + 1`` columns; blocks without a row, or whose row has a failed
        arm, are NaN. Messages are ordered by problem (first appearance) then ``message_id``.

    Raises:
        ValueError: unknown mode, mixed pool sizes without ``K``, a duplicated (problem, message, block), a bad
            correctness value, or conflicting ``proposal_correct`` values for one message.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
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
    cells: dict[tuple[str, int], dict[int, tuple[int | None, int | None]]] = {}
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
                         _label(row.get("without_correct"), "without_correct", i))
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
    with_arm = np.full((len(keys), n_blocks), np.nan)
    without_arm = np.full((len(keys), n_blocks), np.nan)
    for r, key in enumerate(keys):
        for b, (w, wo) in cells[key].items():
            with_arm[r, b] = np.nan if w is None else w
            without_arm[r, b] = np.nan if wo is None else wo
    strata = [stratum[p] for p in problems]
    return EffectTable(keys=keys, effects=with_arm - without_arm,
                       proposal_correct=np.asarray([proposal[k] for k in keys], dtype=object),
                       problem_index=np.asarray([order[p] for p, _ in keys], dtype=int), problems=problems,
                       with_correct=with_arm, without_correct=without_arm, mode=mode,
                       K=int(K) if K is not None else (next(iter(sizes)) if sizes else None),
                       strata=None if all(s is None for s in strata) else strata)


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
    from scipy import stats

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
