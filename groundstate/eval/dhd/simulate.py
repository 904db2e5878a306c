"""``dhd simulate``: replay data from a generative model of the real DHD design, in memory or as a replay cache.

**The model** (the design of the paper's controlled repeat, Tables 17-19). Problem ``p`` has its own full-pool
accuracy ``a_p = lo + (hi - lo) * Beta(alpha, beta)`` (``accuracy`` and ``accuracy_range``; a mixture of easy and
hard problems is ``hard_share`` of the problems drawn from ``hard_accuracy`` instead). Each of its ``K`` messages
has a proposal that is correct with probability ``lo + (hi - lo) * a_p`` (``proposal_range``: proposals are more
often right on the problems the integrator finds easy), or with the constant ``proposal_correct`` when that is
given (the model before issue 25). Planted effects (:class:`PlantedEffect`, e.g.
``W+:0.05:0.6``) pick messages of one proposal class, each with probability ``share``, and shift that message's
*removal* accuracy by ``size``: a helpful (+) message's removal call succeeds with ``clip(a_p - size)``, a harmful
(-) one's with ``clip(a_p + size)`` (clipped to [0, 1]; the first matching effect wins). In every block the two
full-pool calls and the ``K`` removal calls are independent Bernoulli draws: the full pool with ``a_p``, a removal
with its message's removal accuracy. Under the null (no planted effect) a block's ``K + 2`` outcomes are therefore
iid ``Bernoulli(a_p)``, and the ``K`` messages share the block's two full-pool outcomes. Every call fails
operationally with probability ``fail_rate`` (stored as a failure, never as a wrong answer). A message's true value
is its expected block effect ``a_p - removal accuracy``. Problems are assigned to ``benchmarks`` in turn (the
strata of the hierarchical bootstrap); all benchmarks share one accuracy distribution (simplification).

**The default is realistic** (issue 25; groundstate's choice, calibrated on the paper's published rates): accuracies
``Beta(0.15, 0.06)``, a U-shaped mix of problems the integrator nearly always solves, nearly never solves, and a few
borderline ones (mean accuracy 0.71, the OSS full-pool accuracy of Table 24, 71.85%; identical-input disagreement
``E[2 a (1 - a)]`` = 7.1%, inside the paper's 1.6-17.5% of Table 17 and near its OSS pooled 7.3%), and proposals
correct with probability ``0.05 + 0.8 a_p`` (about 0.62 on average, below the integrator's, as the paper's direct
solving is below its K = 5 integration in Table 11). The earlier default, ``Beta(2, 1)`` accuracies (34%
disagreement) with proposals correct with probability 0.6 whatever the problem, is
``DesignSpec(accuracy=(2.0, 1.0), proposal_correct=0.6)``.

**Outputs.** :func:`simulate` returns a :class:`Simulation` with the outcomes as arrays, which builds the
:class:`~groundstate.eval.dhd.effects.EffectTable` directly (:meth:`Simulation.table`, fast, for calibration
studies), the pair rows, the replay block outputs and the cache entries. :func:`write_cache` writes a replay cache
in the normal on-disk format (``cache.json``, ``problems.jsonl``, ``messages.jsonl`` through
:class:`~groundstate.eval.dhd.cache.MessageCache`, and one LOO replay run ``runs/dhd-replay-loo-<id>/`` written by
the durable runner, one record per problem and block with the arms of
:func:`~groundstate.eval.dhd.replay.replay_arms`), so ``groundstate dhd analyze --cache DIR`` runs on it unchanged,
and the ground truth ``simulation.json`` beside it (the settings, and per message: problem accuracy, proposal
correctness, planted effect, true value). Only LOO replays are simulated.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.errors import ConfigError
from groundstate.eval.dhd.cache import MessageCache, PoolEntry
from groundstate.eval.dhd.effects import GROUPS, EffectTable, block_effect
from groundstate.eval.results import write_json
from groundstate.eval.runner import RunSettings, durable_run, run_config
from groundstate.records import HypothesisMessage, Problem

TRUTH_FILE = "simulation.json"
GOLD, WRONG = "1", "0"


@dataclass(frozen=True)
class PlantedEffect:
    """Messages of one proposal class whose removal accuracy is shifted.

    Attributes:
        group: ``W+``, ``W-``, ``C+`` or ``C-``: proposal class (W wrong, C correct) and sign (+ helpful: removal
            lowers accuracy; - harmful: removal raises it).
        share: probability that a message of that class is planted.
        size: the shift of its removal accuracy (before clipping to [0, 1]).
    """

    group: str
    share: float
    size: float

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"planted effect group must be one of {', '.join(GROUPS)}, got {self.group!r}")
        if not 0 <= self.share <= 1 or not 0 <= self.size <= 1:
            raise ValueError(f"planted effect {self.group}: share and size must be in [0, 1]")

    @classmethod
    def parse(cls, text: str) -> PlantedEffect:
        """``GROUP:SHARE:SIZE``, e.g. ``W+:0.05:0.6``."""
        parts = text.split(":")
        try:
            if len(parts) != 3:
                raise ValueError("three fields needed")
            return cls(parts[0], float(parts[1]), float(parts[2]))
        except ValueError as exc:
            raise ValueError(f"bad planted effect {text!r} (want GROUP:SHARE:SIZE, e.g. W+:0.05:0.6): {exc}") from None


@dataclass(frozen=True)
class DesignSpec:
    """Settings of the generative model (module notes)."""

    n_problems: int = 200
    n_blocks: int = 5
    k: int = 5
    accuracy: tuple[float, float] = (0.15, 0.06)
    accuracy_range: tuple[float, float] = (0.0, 1.0)
    hard_share: float = 0.0
    hard_accuracy: tuple[float, float] = (1.0, 3.0)
    proposal_correct: float | None = None
    proposal_range: tuple[float, float] = (0.05, 0.85)
    effects: tuple[PlantedEffect, ...] = field(default_factory=tuple)
    fail_rate: float = 0.0
    benchmarks: tuple[str, ...] = ("sim",)

    def __post_init__(self) -> None:
        if self.n_problems < 1 or self.n_blocks < 1 or self.k < 1:
            raise ValueError("a simulated design needs at least one problem, block and message")
        lo, hi = self.accuracy_range
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"accuracy_range must satisfy 0 <= lo <= hi <= 1, got {self.accuracy_range}")
        if min(*self.accuracy, *self.hard_accuracy) <= 0:
            raise ValueError("Beta shape parameters must be positive")
        for name in ("hard_share", "proposal_correct", "fail_rate"):
            if getattr(self, name) is not None and not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1]")
        if not all(0 <= x <= 1 for x in self.proposal_range):
            raise ValueError(f"proposal_range must lie in [0, 1], got {self.proposal_range}")

    def proposal_probability(self, accuracy: np.ndarray) -> np.ndarray:
        """Per problem, the probability that a message's proposal is correct (module notes)."""
        if self.proposal_correct is not None:
            return np.full(np.shape(accuracy), float(self.proposal_correct))
        lo, hi = self.proposal_range
        return lo + (hi - lo) * np.asarray(accuracy, dtype=float)
        if not self.benchmarks:
            raise ValueError("at least one benchmark label")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Simulation:
    """One simulated data set: problems x blocks x calls, plus the truth (see :func:`simulate`).

    Attributes:
        spec, seed: how it was drawn.
        accuracy: (P,) full-pool accuracy per problem.
        proposal: (P, K) bool, the message's proposal is correct.
        planted: (P, K) int: +1 helpful, -1 harmful, 0 none.
        removal_accuracy: (P, K).
        full: (P, B, 2) replicates A and B (1/0/NaN failed); removal: (P, B, K).
    """

    spec: DesignSpec
    seed: int
    accuracy: np.ndarray
    proposal: np.ndarray
    planted: np.ndarray
    removal_accuracy: np.ndarray
    full: np.ndarray
    removal: np.ndarray

    @property
    def problem_ids(self) -> list[str]:
        width = max(4, len(str(self.spec.n_problems - 1)))
        return [f"sim{p:0{width}d}" for p in range(self.spec.n_problems)]

    @property
    def true_value(self) -> np.ndarray:
        """(P, K) expected block effect ``a_p - removal accuracy``."""
        return self.accuracy[:, None] - self.removal_accuracy

    def strata(self) -> list[str]:
        return [self.spec.benchmarks[p % len(self.spec.benchmarks)] for p in range(self.spec.n_problems)]

    def table(self, full: str = "mean") -> EffectTable:
        """The LOO :class:`EffectTable` (messages in problem order), equal to ``pair_effects(self.pair_rows())``."""
        n_problems, n_blocks, k = self.removal.shape
        a, b = np.repeat(self.full[:, :, 0], k, axis=0), np.repeat(self.full[:, :, 1], k, axis=0)
        without = self.removal.transpose(0, 2, 1).reshape(-1, n_blocks)
        ids = self.problem_ids
        strata = self.strata()
        return EffectTable(keys=[(ids[p], m) for p in range(n_problems) for m in range(k)],
                           effects=block_effect(a, without, b, "loo", full),
                           proposal_correct=list(self.proposal.ravel()),
                           problem_index=np.repeat(np.arange(n_problems), k), problems=ids, with_correct=a,
                           without_correct=without, mode="loo", K=k, strata=strata if len(set(strata)) > 1 else None,
                           full_b=b, full=full)

    def entries(self) -> list[Any]:
        """The cache's :class:`~groundstate.eval.dhd.cache.PoolEntry` per problem (placeholder message texts)."""
        out = []
        for p, pid in enumerate(self.problem_ids):
            messages = [HypothesisMessage(problem_id=pid, index=m, role=f"simulated role {m}",
                                          proposed_answer=GOLD if self.proposal[p, m] else WRONG,
                                          reasoning_direction="simulated", key_idea="simulated",
                                          critical_assumption="simulated", what_to_check="simulated")
                        for m in range(self.spec.k)]
            out.append(PoolEntry(problem_id=pid, roles=[m.role for m in messages], messages=messages,
                                 proposal_correct=[int(c) for c in self.proposal[p]],
                                 proposal_method=["simulated"] * self.spec.k, generator={"simulated": True}))
        return out

    def problems(self) -> list[Any]:
        strata = self.strata()
        return [Problem(id=pid, question=f"Simulated DHD problem {pid}", answer=GOLD, kind="number",
                        source=strata[p], metadata={"accuracy": float(self.accuracy[p])})
                for p, pid in enumerate(self.problem_ids)]

    def block(self, p: int, b: int) -> dict[str, Any]:
        """The replay block output of problem ``p``, block ``b`` (the runner's ``outputs`` of ``dhd replay``)."""
        from groundstate.eval.dhd.replay import replay_arms  # noqa: PLC0415 (heavy: dspy)

        pid, k = self.problem_ids[p], self.spec.k
        arms = []
        for arm in replay_arms(pid, list(range(k)), "loo", k, b):
            value = {"full": self.full[p, b, 0], "full_b": self.full[p, b, 1]}.get(arm.name)
            if value is None:
                value = self.removal[p, b, arm.message_id]
            failed = bool(np.isnan(value))
            arms.append({"arm": arm.name, "message_id": arm.message_id, "pattern": arm.pattern,
                         "shown": list(arm.shown), "key": arm.key,
                         "answer": None if failed else (GOLD if value else WRONG),
                         "correct": None if failed else int(value), "method": None if failed else "simulated",
                         "failure": "lm-error: simulated operational failure" if failed else None})
        return {"problem_id": pid, "mode": "loo", "K": k, "block": b, "arms": arms}

    def blocks(self) -> list[dict[str, Any]]:
        return [self.block(p, b) for b in range(self.spec.n_blocks) for p in range(self.spec.n_problems)]

    def pair_rows(self) -> list[dict[str, Any]]:
        """Pair rows as :func:`~groundstate.eval.dhd.run.collect_pairs` returns them for the written cache."""
        from groundstate.eval.dhd.replay import pair_rows  # noqa: PLC0415 (heavy: dspy)

        entries = {e.problem_id: e for e in self.entries()}
        strata = dict(zip(self.problem_ids, self.strata(), strict=True))
        rows = pair_rows(self.blocks(), entries)
        for row in rows:
            row["benchmark"] = strata[row["problem_id"]]
        return rows

    def truth(self) -> list[dict[str, Any]]:
        """One row per message: problem accuracy, proposal correctness, planted sign, removal accuracy, value."""
        value = self.true_value
        return [{"problem_id": pid, "message_id": m, "accuracy": float(self.accuracy[p]),
                 "proposal_correct": bool(self.proposal[p, m]), "planted": int(self.planted[p, m]),
                 "group": (("C" if self.proposal[p, m] else "W") + ("+" if self.planted[p, m] > 0 else "-"))
                 if self.planted[p, m] else None,
                 "removal_accuracy": float(self.removal_accuracy[p, m]), "true_value": float(value[p, m])}
                for p, pid in enumerate(self.problem_ids) for m in range(self.spec.k)]


def _accuracies(spec: DesignSpec, rng: np.random.Generator) -> np.ndarray:
    lo, hi = spec.accuracy_range
    easy = rng.beta(*spec.accuracy, size=spec.n_problems)
    hard = rng.beta(*spec.hard_accuracy, size=spec.n_problems)
    draw = np.where(rng.random(spec.n_problems) < spec.hard_share, hard, easy)
    return lo + (hi - lo) * draw


def simulate(spec: DesignSpec, seed: int = 0) -> Simulation:
    """Draw one data set from the generative model (module notes); the same ``(spec, seed)`` gives the same data."""
    rng = np.random.default_rng([seed, 15])
    n, b, k = spec.n_problems, spec.n_blocks, spec.k
    accuracy = _accuracies(spec, rng)
    proposal = rng.random((n, k)) < spec.proposal_probability(accuracy)[:, None]
    planted = np.zeros((n, k), dtype=int)
    size = np.zeros((n, k))
    for effect in spec.effects:
        klass = effect.group[0] == "C"
        pick = (planted == 0) & (proposal == klass) & (rng.random((n, k)) < effect.share)
        planted[pick] = 1 if effect.group[1] == "+" else -1
        size[pick] = effect.size
    removal_accuracy = np.clip(accuracy[:, None] - planted * size, 0.0, 1.0)
    full = (rng.random((n, b, 2)) < accuracy[:, None, None]).astype(float)
    removal = (rng.random((n, b, k)) < removal_accuracy[:, None, :]).astype(float)
    if spec.fail_rate > 0:
        full[rng.random(full.shape) < spec.fail_rate] = np.nan
        removal[rng.random(removal.shape) < spec.fail_rate] = np.nan
    return Simulation(spec=spec, seed=seed, accuracy=accuracy, proposal=proposal, planted=planted,
                      removal_accuracy=removal_accuracy, full=full, removal=removal)


class _SimulatedReplay:
    """The runner program that 'replays' a block by returning its simulated arms."""

    def __init__(self, simulation: Simulation):
        self.simulation = simulation
        self.index = {pid: p for p, pid in enumerate(simulation.problem_ids)}

    def __call__(self, work: dict[str, Any]) -> Any:
        import dspy  # noqa: PLC0415 (heavy: dspy)

        return dspy.Prediction(**self.simulation.block(self.index[work["problem_id"]], int(work["block"])))


def write_cache(simulation: Simulation, out: str | Path) -> dict[str, Any]:
    """Write ``simulation`` as a replay cache in ``out`` (module notes); returns what was written.

    Raises:
        ConfigError: ``out`` exists and is not empty.
    """
    from groundstate.eval.dhd.replay import replay_records  # noqa: PLC0415 (heavy: dspy)

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not empty: simulate into a new directory")
    spec = simulation.spec
    cache = MessageCache(out)
    meta = cache.ensure(spec.k)
    settings = {"seed": simulation.seed, **spec.as_dict()}
    digest = hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()[:12]
    meta_path = out / "cache.json"
    write_json(meta_path, {**meta, "cache_id": f"sim-{digest}", "simulated": True})
    cache.add_problems(simulation.problems(), source="simulation")
    cache.put(simulation.entries())
    entries = cache.entries()
    records, _ = replay_records(entries, simulation.problem_ids, "loo", [spec.k], spec.n_blocks)
    config = run_config("dhd-replay-loo", mode="loo", cache=cache.cache_id, lm={"model": "simulated"},
                        simulation=settings)
    result = durable_run(_SimulatedReplay(simulation), config, records, RunSettings(out=cache.runs_dir, threads=1),
                         inputs=lambda r: {"work": r},
                         outputs=lambda pred: {k: pred[k] for k in ("problem_id", "mode", "K", "block", "arms")},
                         description="dhd simulate")
    truth = {"settings": settings, "planted": [r for r in simulation.truth() if r["planted"]],
             "messages": simulation.truth()}
    write_json(out / TRUTH_FILE, truth)
    return {"cache": str(out), "run_id": result.run_id, "truth": str(out / TRUTH_FILE),
            "n_problems": spec.n_problems, "n_blocks": spec.n_blocks, "k": spec.k,
            "n_planted": len(truth["planted"]), "n_records": len(records)}
