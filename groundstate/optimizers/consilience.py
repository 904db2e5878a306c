"""Consilience's training and evaluation workflow: explore, train, calibrate, evaluate, check coverage.

- :func:`explore_tasks`: exhaustive action outcomes on training tasks (rows of state features and the
  reward of every action), the MLP controller's training data.
- :func:`train_controller`: fit :class:`~groundstate.optimizers.controller.MLPActionValue` (optionally
  without some feature groups, for the feature ablation).
- :func:`calibrate`: run a fixed configuration (controller, router, agents, loss weights, round limit) on
  calibration tasks with every proposal executed, collect the proposals' regrets per round, and fit
  :class:`~groundstate.optimizers.conformal.RoundwiseConformal`. The calibrator records that configuration;
  :func:`check_config` refuses to use it with another one.
- :func:`coverage`: on held-out trajectories of the same configuration, the share of proposals whose regret
  is within each round's threshold, with its standard error.
- :func:`build_controller`: controllers by name (``rules``, ``mlp``, ``llm``, ``llm+vote``).

Task-level splits follow appendix C.1: fit on some tasks, evaluate on the others
(:func:`split_tasks`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundstate.errors import ConfigError, InputError
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.controller import MLPActionValue
from groundstate.programs.consilience.consilience import Consilience, explore, proposal_scores
from groundstate.programs.consilience.control import LLMController, RuleController, ValueController
from groundstate.programs.consilience.state import FEATURE_GROUPS, FEATURES, LossWeights
from groundstate.records import ACTIONS, HiddenProfileTask

CONTROLLERS = ("rules", "mlp", "llm", "llm+vote")


def features_without(groups: Sequence[str]) -> list[str]:
    """The state features left after dropping the named groups (belief, information, cost, time)."""
    unknown = [g for g in groups if g not in FEATURE_GROUPS]
    if unknown:
        raise ConfigError(f"unknown feature group '{unknown[0]}'; choose from {', '.join(FEATURE_GROUPS)}")
    dropped = {f for g in groups for f in FEATURE_GROUPS[g]}
    kept = [f for f in FEATURES if f not in dropped]
    if not kept:
        raise ConfigError("dropping those groups leaves no feature")
    return kept


def explore_tasks(tasks: Sequence[HiddenProfileTask], team: Callable, max_rounds: int = 10,
                  weights: LossWeights | None = None, router: str = "action-conditional", policy: str = "random",
                  seed: int = 0) -> list[dict[str, Any]]:
    """Exhaustive action outcomes on every task (see :func:`groundstate.programs.consilience.consilience.explore`)."""
    rows = []
    for task in tasks:
        rows.extend(explore(task, team(task), max_rounds=max_rounds, weights=weights, router=router, policy=policy,
                            seed=seed))
    return rows


def load_exploration(path: str, allow_empty: bool = False) -> list[dict[str, Any]]:
    """Exploration rows written by ``consilience explore``, each checked: ``features`` a list of
    ``len(FEATURES)`` finite numbers and ``rewards`` a list of one finite number per action.

    Raises:
        InputError: an unreadable file or a row with a missing, ragged or non-numeric field (one line naming
            the file, the line and the field), or no rows at all.
    """
    from groundstate.eval.io import read_jsonl, require_records

    rows = read_jsonl(path)
    sizes = {"features": len(FEATURES), "rewards": len(ACTIONS)}
    for number, row in enumerate(rows, start=1):
        for key, size in sizes.items():
            value = row.get(key)
            where = {"file": path, "record": f"{number}", "field": key}
            if not isinstance(value, list):
                raise InputError(f"must be a list of {size} numbers (got {_kind(value)})", **where)
            if len(value) != size:
                raise InputError(f"has {len(value)} values, expected {size} (one per "
                                 f"{'state feature' if key == 'features' else 'action'})", **where)
            bad = next((i for i, v in enumerate(value)
                        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)), None)
            if bad is not None:
                raise InputError(f"value {bad} is {value[bad]!r}, not a finite number", **where)
    return require_records(rows, path, allow_empty, "exploration rows")


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def train_controller(rows: Sequence[dict[str, Any]], features: Sequence[str] = FEATURES,
                     **params: Any) -> MLPActionValue:
    """Fit the MLP controller on exploration rows, using only ``features`` (a subset of the stored vector)."""
    if not rows:
        raise ConfigError("no exploration rows to train on")
    index = [FEATURES.index(f) for f in features]
    X = np.array([[row["features"][i] for i in index] for row in rows], dtype=float)
    Y = np.array([row["rewards"] for row in rows], dtype=float)
    model = MLPActionValue(**params).fit(X, Y)
    model.features_ = list(features)
    return model


def build_controller(name: str, model: Any = None, features: Sequence[str] | None = None):
    """A controller by name; ``mlp`` needs a fitted model (and the features it was trained on)."""
    if name == "rules":
        return RuleController()
    if name == "mlp":
        if model is None:
            raise ConfigError("the mlp controller needs a trained model (--mlp DIR from `consilience train`)")
        return ValueController(model, features=list(features or getattr(model, "features_", FEATURES)))
    if name == "llm":
        return LLMController(allow_vote=False)
    if name == "llm+vote":
        return LLMController(allow_vote=True)
    raise ConfigError(f"unknown controller '{name}'; choose from {', '.join(CONTROLLERS)}")


@dataclass
class Configuration:
    """What a calibration is valid for: change any of it and the thresholds no longer apply."""

    controller: str
    router: str = "action-conditional"
    max_rounds: int = 10
    weights: dict[str, float] | None = None
    agents: str = "sim"
    removed_actions: tuple[str, ...] = ()
    min_vote_round: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"controller": self.controller, "router": self.router, "max_rounds": self.max_rounds,
                "weights": self.weights or LossWeights().to_dict(), "agents": self.agents,
                "removed_actions": sorted(self.removed_actions), "min_vote_round": self.min_vote_round}


def check_config(calibrator: RoundwiseConformal, config: Configuration) -> None:
    """Refuse a calibrator fitted for another configuration (one line naming what differs)."""
    saved = dict(calibrator.config or {})
    wanted = config.to_dict()
    diff = sorted(k for k in wanted if k in saved and saved[k] != wanted[k])
    if diff:
        details = ", ".join(f"{k}: calibrated {saved[k]!r}, now {wanted[k]!r}" for k in diff)
        raise ConfigError(f"the calibrator was fitted for another configuration ({details}); calibrate again")


def run_tasks(program: Consilience, tasks: Sequence[HiddenProfileTask]) -> list[Any]:
    return [program(task=task) for task in tasks]


def calibrate(tasks: Sequence[HiddenProfileTask], team: Callable, controller: Any, config: Configuration,
              alpha: float = 0.1, seed: int = 0) -> RoundwiseConformal:
    """Fit round-wise thresholds from calibration trajectories of ``config`` (every proposal executed)."""
    program = Consilience(team, controller, calibrator=None, router=config.router, max_rounds=config.max_rounds,
                          weights=LossWeights(**config.weights) if config.weights else None,
                          removed_actions=config.removed_actions, min_vote_round=config.min_vote_round, seed=seed)
    rounds, scores = proposal_scores([p.trace for p in run_tasks(program, tasks)])
    if not scores:
        raise ConfigError("the calibration tasks produced no rounds")
    return RoundwiseConformal(alpha=alpha, config=config.to_dict()).fit(rounds, scores)


def coverage(calibrator: RoundwiseConformal, traces: Sequence[Sequence[dict[str, Any]]],
             min_calibration: int = 50) -> list[dict[str, Any]]:
    """Per round: held-out proposals within the threshold, their share, its standard error, and whether the
    round had at least ``min_calibration`` calibration trajectories (the rounds the guarantee is checked on).

    The guarantee is marginal over calibration and test draws, so the standard error combines both sample
    sizes: ``sqrt((1 - alpha) alpha (1/n_test + 1/(n_cal + 1)))``; a round is ``ok`` when its coverage is at
    least ``1 - alpha - 3 se``."""
    rounds, scores = proposal_scores(traces)
    out = []
    for t in sorted(set(rounds)):
        values = [s for r, s in zip(rounds, scores, strict=True) if r == t]
        eps = calibrator.threshold(t)
        hits = sum(v <= eps for v in values)
        n = len(values)
        share = hits / n
        target = 1 - calibrator.alpha
        n_cal = calibrator.counts_.get(t, 0)
        # the threshold is random too: the standard error counts the calibration sample as well as the test one
        se = math.sqrt(target * (1 - target) * (1 / n + 1 / (n_cal + 1)))
        out.append({"round": t, "n_test": n, "n_calibration": calibrator.counts_.get(t, 0),
                    "threshold": None if math.isinf(eps) else eps, "coverage": share, "se": se,
                    "checked": calibrator.counts_.get(t, 0) >= min_calibration,
                    "ok": share >= target - 3 * se})
    return out


def split_tasks(tasks: Sequence[HiddenProfileTask], fractions: Sequence[float] = (0.4, 0.3, 0.3),
                seed: int = 0) -> dict[str, list[HiddenProfileTask]]:
    """Task-level ``train`` / ``calibration`` / ``test`` splits (disjoint by task id)."""
    from groundstate.eval.splits import split_instances

    parts = split_instances(tasks, *fractions, seed=seed)
    return {"train": parts["train"], "calibration": parts["val"], "test": parts["test"]}


