"""Fitting Consilience: exploration data, the MLP controller, and the round-wise conformal calibration.

- :func:`explore_tasks`: exhaustive action outcomes on training tasks (rows of state features and the
  reward of every action), the MLP controller's training data.
- :func:`train_controller`: fit :class:`~groundstate.optimizers.controller.MLPActionValue` (optionally
  without some feature groups, for the feature ablation).
- :func:`calibrate`: run a fixed configuration (controller, router, agents, loss weights, round limit) on
  calibration tasks with every proposal executed, collect the proposals' regrets per round, and fit
  :class:`~groundstate.optimizers.conformal.RoundwiseConformal`. The calibrator records that configuration
  (:class:`Configuration`); :func:`check_config` refuses to use it with another one.

Evaluation (held-out tasks, coverage) is in :mod:`groundstate.eval.consilience`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundstate.errors import ConfigError
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.controller import MLPActionValue
from groundstate.programs.consilience.consilience import Consilience, explore, proposal_scores
from groundstate.programs.consilience.state import FEATURE_GROUPS, FEATURES, LossWeights
from groundstate.records import HiddenProfileTask


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


def calibrate(tasks: Sequence[HiddenProfileTask], team: Callable, controller: Any, config: Configuration,
              alpha: float = 0.1, seed: int = 0) -> RoundwiseConformal:
    """Fit round-wise thresholds from calibration trajectories of ``config`` (every proposal executed)."""
    program = Consilience(team, controller, calibrator=None, router=config.router, max_rounds=config.max_rounds,
                          weights=LossWeights(**config.weights) if config.weights else None,
                          removed_actions=config.removed_actions, min_vote_round=config.min_vote_round, seed=seed)
    rounds, scores = proposal_scores([program(task=task).trace for task in tasks])
    if not scores:
        raise ConfigError("the calibration tasks produced no rounds")
    return RoundwiseConformal(alpha=alpha, config=config.to_dict()).fit(rounds, scores)
