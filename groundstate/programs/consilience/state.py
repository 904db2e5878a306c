"""The collective state of a hidden-profile discussion (Consilience §3.1.1) and its surrogate loss J.

Given every agent's belief and the public transcript after round ``t``:

- **H** group uncertainty: the entropy of the mean belief, divided by ``log K`` (0 = certain, 1 = uniform).
- **D** disagreement: the mean Jensen-Shannon *divergence* of each agent's belief from the mean belief, in
  bits (``scipy.spatial.distance.jensenshannon(p, q, base=2) ** 2``: the function returns the distance, its
  square is the divergence; base 2 keeps it in [0, 1]).
- **R** message redundancy and **G** evidence gain of the latest message:

  * *exact* (simulated agents, whose messages list the facts they state): R is the share of the message's
    facts that were already public (shared, or stated earlier); G is the share of its facts that were not
    public and carry support for some option.
  * *estimated* (LM transcripts, from words alone): R is the share of the message's content words already
    present in the shared facts or the earlier transcript; G is the share of its content words that are new
    there **and** occur in some agent's private facts, i.e. lexically new evidence. This is an approximation:
    paraphrases and inferences are invisible to it.

  Before any message, R = G = 0.
- **C** communication cost: transcript words / 1000.
- **P** premature consensus: ``p* (1 - G) * 1[p* > 0.70, G < 0.30, t < K + 2]`` with ``p*`` the largest mean
  belief and ``K`` the number of options.
- **J** = aH*H + aD*D + aR*R - aG*G + aC*C + aP*P with configurable weights (:class:`LossWeights`).

:data:`FEATURES` is the state vector given to controllers: the paper's six quantities H, D, R, G, C, P
(appendix C.1: "the six-dimensional collective-state representation"). :data:`EXTRA_FEATURES` (the leading
belief ``p_star`` and the elapsed share of the round limit ``round_frac``) are groundstate additions, stored
in exploration data (:data:`STORED_FEATURES`) and usable by the MLP only when asked for. :data:`FEATURE_GROUPS`
groups the six for the feature ablation (belief: H, D; information: R, G, P; cost: C; P, premature
consensus, is counted with information because it is driven by the evidence gain); :data:`FEATURE_SETS` are
the rows of the paper's Table 6.

Speed: :func:`branch_states` computes the states of all of a round's counterfactual branches together (one
array pass for every agent's divergence in every branch, :func:`js_divergences`), and the divergences are
returned with each state so that routing from it needs no second pass. A group of beliefs that carries its
probability matrix (``matrix_for(options)``, as the simulated agents' group beliefs do) is read from it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from groundstate.records import Belief, HiddenProfileTask, Transcript

FEATURES: tuple[str, ...] = ("H", "D", "R", "G", "C", "P")
EXTRA_FEATURES: tuple[str, ...] = ("p_star", "round_frac")
STORED_FEATURES: tuple[str, ...] = FEATURES + EXTRA_FEATURES
FEATURE_GROUPS: dict[str, tuple[str, ...]] = {
    "belief": ("H", "D"),
    "information": ("R", "G", "P"),
    "cost": ("C",),
    "extra": EXTRA_FEATURES,
}
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "all": FEATURES,
    "information": FEATURE_GROUPS["information"],
    "belief+information": FEATURE_GROUPS["belief"] + FEATURE_GROUPS["information"],
    "belief+cost": FEATURE_GROUPS["belief"] + FEATURE_GROUPS["cost"],
    "belief": FEATURE_GROUPS["belief"],
}
"""The feature sets of the paper's state-feature ablation (Table 6), each in :data:`FEATURES` order."""


@dataclass(frozen=True)
class LossWeights:
    """The weights of the surrogate loss J (all 1 by default)."""

    H: float = 1.0
    D: float = 1.0
    R: float = 1.0
    G: float = 1.0
    C: float = 1.0
    P: float = 1.0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class CollectiveState:
    """The state after round ``round``: the six quantities, the leading belief, and J."""

    round: int
    H: float
    D: float
    R: float
    G: float
    C: float
    P: float
    p_star: float
    leader: str
    J: float
    max_rounds: int

    def vector(self, features: Sequence[str] = FEATURES) -> np.ndarray:
        """The named features (default the paper's six; ``round_frac`` = round / max_rounds)."""
        values = {**self.to_dict(), "round_frac": self.round / max(1, self.max_rounds)}
        return np.array([float(values[f]) for f in features], dtype=float)

    def to_dict(self) -> dict[str, float | int | str]:
        """The fields as a dict (all scalars, so no deep copy is needed)."""
        return {name: getattr(self, name) for name in _STATE_FIELDS}


_STATE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CollectiveState))


def belief_matrix(beliefs: Sequence[Belief], options: Sequence[str]) -> np.ndarray:
    """The beliefs as an ``(agents, options)`` array (a missing option counts as 0)."""
    return np.array(_matrix(beliefs, options), dtype=float)


def _matrix(beliefs: Sequence[Belief], options: Sequence[str]) -> np.ndarray | list[list[float]]:
    """The beliefs' probabilities by option: the matrix a group of beliefs carries (``matrix_for(options)``, as
    the simulated agents' group beliefs do), else read off each belief (a missing option counts as 0)."""
    carried = getattr(beliefs, "matrix_for", None)
    matrix = carried(options) if carried is not None else None
    return matrix if matrix is not None else [[b.probs.get(o, 0.0) for o in options] for b in beliefs]


def mean_belief(beliefs: Sequence[Belief], options: Sequence[str]) -> np.ndarray:
    return belief_matrix(beliefs, options).mean(axis=0)


def uncertainty(mean: np.ndarray) -> float:
    """H: normalized entropy of the mean belief."""
    k = len(mean)
    p = mean[mean > 0]
    return float(-(p * np.log(p)).sum() / math.log(k)) if k > 1 else 0.0


_LOG2 = np.log(2.0)


def js_divergences(matrix: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    """Each row's Jensen-Shannon divergence (bits) from ``mean`` (default: the rows' mean), all rows at once.

    ``matrix`` is ``(agents, options)``, or ``(branches, agents, options)`` with ``mean`` ``(branches,
    options)``: every branch's agents in one pass. The same operations, in the same order, as
    ``scipy.spatial.distance.jensenshannon(row, mean, base=2) ** 2`` row by row (both distributions normalized,
    ``rel_entr`` against their midpoint, summed, divided by ``log 2``, the square root taken and squared), so
    the numbers are the same; a zero probability contributes nothing. A row equal to the mean up to rounding can
    sum to a tiny negative number, which scipy turns into NaN; here it counts as 0.
    """
    from scipy.special import rel_entr  # noqa: PLC0415 (heavy: scipy)

    if mean is None:
        mean = matrix.mean(axis=-2)
    p = matrix / matrix.sum(axis=-1, keepdims=True)
    q = (mean / mean.sum(axis=-1, keepdims=True))[..., None, :]
    m = (p + q) / 2.0
    js = rel_entr(p, m).sum(axis=-1) + rel_entr(q, m).sum(axis=-1)
    js /= _LOG2
    return np.sqrt(np.maximum(js, 0.0) / 2.0) ** 2


def divergences(beliefs: Sequence[Belief], options: Sequence[str]) -> np.ndarray:
    """Each agent's Jensen-Shannon divergence (bits) from the mean belief."""
    return js_divergences(belief_matrix(beliefs, options))


_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_STOP = frozenset("a an the and or of to in on at for with is are was were be i we you it that this my our as by "
                  "from but not no do does did have has had will would should can could me us they them their "
                  "there here what which who so if than then also just".split())


@functools.lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    """The content words of ``text`` (cached: every branch re-reads the shared facts and the transcript)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def redundancy_gain(task: HiddenProfileTask, transcript: Transcript) -> tuple[float, float]:
    """(R, G) of the latest message: exact when it lists its facts, estimated from words otherwise."""
    if not transcript.messages:
        return 0.0, 0.0
    last = transcript.messages[-1]
    earlier = transcript.messages[:-1]
    if last.facts:
        public = set(task.shared) | {f for m in earlier for f in m.facts}
        facts = list(dict.fromkeys(last.facts))
        old = sum(f in public for f in facts)
        new_relevant = sum(f not in public and any(v != 0 for v in task.support.get(f, {}).values()) for f in facts)
        return old / len(facts), new_relevant / len(facts)
    words = _words(last.text)
    if not words:
        return 1.0, 0.0
    public = set().union(*(_words(s) for s in task.shared), *(_words(m.text) for m in earlier)) if (
        task.shared or earlier) else set()
    private = set().union(*(_words(f) for facts in task.private for f in facts)) if task.private else set()
    old = len(words & public)
    gain = len((words - public) & private)
    return old / len(words), gain / len(words)


def collective_state(task: HiddenProfileTask, beliefs: Sequence[Belief], transcript: Transcript, round: int,
                     max_rounds: int, weights: LossWeights | None = None) -> CollectiveState:
    """The state of the discussion after ``round`` rounds (see the module docstring)."""
    return state_and_divergences(task, beliefs, transcript, round, max_rounds, weights)[0]


def state_and_divergences(task: HiddenProfileTask, beliefs: Sequence[Belief], transcript: Transcript, round: int,
                          max_rounds: int, weights: LossWeights | None = None) -> tuple[CollectiveState, np.ndarray]:
    """:func:`collective_state` and each agent's divergence from the mean belief (what routing needs), from one
    pass over the beliefs."""
    return branch_states(task, [beliefs], [transcript], round, max_rounds, weights)[0]


def branch_states(task: HiddenProfileTask, beliefs: Sequence[Sequence[Belief]], transcripts: Sequence[Transcript],
                  round: int, max_rounds: int, weights: LossWeights | None = None
                  ) -> list[tuple[CollectiveState, np.ndarray]]:
    """:func:`state_and_divergences` of several branches (``beliefs[b]`` at ``transcripts[b]``, the same agents
    in each) with the belief statistics of all of them computed together."""
    if not beliefs:
        return []
    options = task.options
    matrices = np.array([_matrix(group, options) for group in beliefs], dtype=float)
    means = matrices.mean(axis=1)
    spreads = js_divergences(matrices, means)
    weights = weights or LossWeights()
    summary = zip(means, spreads.mean(axis=1).tolist(), means.max(axis=1).tolist(), means.argmax(axis=1).tolist(),
                  transcripts, strict=True)
    return [(_state(task, mean, D, p_star, leader, transcript, round, max_rounds, weights), spread)
            for (mean, D, p_star, leader, transcript), spread in zip(summary, spreads, strict=True)]


def _state(task: HiddenProfileTask, mean: np.ndarray, D: float, p_star: float, leader: int, transcript: Transcript,
           round: int, max_rounds: int, weights: LossWeights) -> CollectiveState:
    """One state from its mean belief, disagreement D, leading belief and leader (by index)."""
    options = task.options
    H = uncertainty(mean)
    R, G = redundancy_gain(task, transcript)
    C = transcript.words / 1000.0
    P = p_star * (1 - G) if (p_star > 0.70 and G < 0.30 and round < len(options) + 2) else 0.0
    J = weights.H * H + weights.D * D + weights.R * R - weights.G * G + weights.C * C + weights.P * P
    return CollectiveState(round=round, H=H, D=D, R=R, G=G, C=C, P=P, p_star=p_star, leader=options[leader],
                           J=float(J), max_rounds=max_rounds)
