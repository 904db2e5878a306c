"""Fitting Consilience: exploration data, the MLP controller, and the round-wise conformal calibration.

- :func:`explore_tasks`: exhaustive action outcomes on training tasks (rows of state features and the
  reward of every action), the MLP controller's training data.
- :func:`train_controller`: fit :class:`~groundstate.optimizers.controller.MLPActionValue` on the paper's
  six features by default (:func:`feature_set` names the paper's Table 6 subsets, :func:`features_without`
  drops groups; the extras ``p_star`` and ``round_frac`` are used only when asked for).
- :func:`calibrate`: run a fixed configuration (controller, router, agents, loss weights, round limit) on
  calibration tasks with every proposal executed, collect the proposals' regrets per round, and fit
  :class:`~groundstate.optimizers.conformal.RoundwiseConformal`. The calibrator records that configuration
  (:class:`Configuration`, including the controller's termination rule, which decides where Vote is
  admissible, and the agents it was fitted on: the simulated agents' parameters or every agent role's LM, see
  :mod:`groundstate.programs.consilience.identity`); :func:`check_config` refuses to use it with another one.

Evaluation (held-out tasks, coverage) is in :mod:`groundstate.eval.consilience`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.concurrency import serial_map
from groundstate.errors import ConfigError, InputError
from groundstate.optimizers.artifacts import MANIFEST, load_sklearn, read_manifest
from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.optimizers.controller import MLPActionValue
from groundstate.optimizers.manifests import SklearnManifest
from groundstate.programs.consilience.consilience import Consilience, explore, proposal_scores
from groundstate.programs.consilience.identity import agents_identity
from groundstate.programs.consilience.state import (
    EXTRA_FEATURES,
    FEATURE_GROUPS,
    FEATURE_SETS,
    FEATURES,
    STORED_FEATURES,
    LossWeights,
)
from groundstate.records import COMM_ACTIONS, HiddenProfileTask
from groundstate.schema import validate


def features_without(groups: Sequence[str]) -> list[str]:
    """The paper's six state features left after dropping the named groups (belief, information, cost); the
    ``extra`` group is never in the default set, so dropping it changes nothing."""
    unknown = [g for g in groups if g not in FEATURE_GROUPS]
    if unknown:
        raise ConfigError(f"unknown feature group '{unknown[0]}'; choose from {', '.join(FEATURE_GROUPS)}")
    dropped = {f for g in groups for f in FEATURE_GROUPS[g]}
    kept = [f for f in FEATURES if f not in dropped]
    if not kept:
        raise ConfigError("dropping those groups leaves no feature")
    return kept


def feature_set(name: str, extras: bool = False) -> list[str]:
    """The features of a named set of the paper's Table 6 (:data:`FEATURE_SETS`), plus the extras when asked."""
    if name not in FEATURE_SETS:
        raise ConfigError(f"unknown feature set '{name}'; choose from {', '.join(FEATURE_SETS)}")
    return list(FEATURE_SETS[name]) + (list(EXTRA_FEATURES) if extras else [])


MapFn = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]
"""``map_fn(fn, items) -> [fn(x) for x in items]`` in order (:func:`~groundstate.concurrency.serial_map` by
default; ``groundstate.eval.task_map.backend_map`` builds the ``--backend threads|ray`` ones). Each task's episode
is seeded by the task, so any map gives the serial loop's results."""


@dataclass(frozen=True)
class ExploreEpisode:
    """One task's exploration rows (a picklable ``task -> rows`` for any ``map_fn``)."""

    team: Callable
    max_rounds: int = 10
    weights: LossWeights | None = None
    router: str = "action-conditional"
    policy: str = "random"
    seed: int = 0

    def __call__(self, task: HiddenProfileTask) -> list[dict[str, Any]]:
        return explore(task, self.team(task), max_rounds=self.max_rounds, weights=self.weights, router=self.router,
                       policy=self.policy, seed=self.seed)


@dataclass(frozen=True)
class EpisodeTrace:
    """One task's trajectory trace under ``program`` (a picklable ``task -> trace`` for any ``map_fn``)."""

    program: Any

    def __call__(self, task: HiddenProfileTask) -> list[dict[str, Any]]:
        return self.program(task=task).trace


def explore_tasks(tasks: Sequence[HiddenProfileTask], team: Callable, max_rounds: int = 10,
                  weights: LossWeights | None = None, router: str = "action-conditional", policy: str = "random",
                  seed: int = 0, map_fn: MapFn | None = None) -> list[dict[str, Any]]:
    """Exhaustive action outcomes on every task, in task order (see
    :func:`groundstate.programs.consilience.consilience.explore`); ``map_fn`` runs the per-task episodes
    (:data:`MapFn`)."""
    episode = ExploreEpisode(team, max_rounds, weights, router, policy, seed)
    return [row for rows in (map_fn or serial_map)(episode, list(tasks)) for row in rows]


def load_controller(directory: Any) -> tuple[MLPActionValue, list[str] | None]:
    """``(model, features)`` of an MLP controller saved by ``consilience train``: the model loaded as
    :func:`~groundstate.optimizers.artifacts.load_sklearn` loads it, and the state features its manifest names
    (``None`` when the manifest names none: the model's own or the paper's six are used).

    Raises:
        InputError: a ``features`` or ``actions`` field that is not a list of names, a feature that is not a state
            feature, or names that do not fit the model (as many features as it takes, its actions).
    """
    model = load_sklearn(directory)
    path = Path(directory) / MANIFEST
    manifest = validate(SklearnManifest, read_manifest(directory), file=path)
    features = manifest.features
    if features is not None:
        unknown = [f for f in features if f not in STORED_FEATURES]
        if unknown:
            raise InputError(f"'{unknown[0]}' is not a state feature (known: {', '.join(STORED_FEATURES)})",
                             file=str(path), field="features")
        expected = getattr(model, "n_features_in_", len(features))
        if len(features) != expected:
            raise InputError(f"names {len(features)} features, but the saved model takes {expected}",
                             file=str(path), field="features")
    actions = getattr(model, "actions_", None)
    if manifest.actions is not None and actions is not None and list(manifest.actions) != [str(a) for a in actions]:
        raise InputError(f"names the actions {manifest.actions}, but the saved model predicts {list(actions)}",
                         file=str(path), field="actions")
    return model, features


def train_controller(rows: Sequence[dict[str, Any]], features: Sequence[str] = FEATURES,
                     **params: Any) -> MLPActionValue:
    """Fit the MLP controller on exploration rows, using only ``features`` (names from the stored vector,
    :data:`STORED_FEATURES`); the reward columns are the rows' actions (the four communication actions)."""
    if not rows:
        raise ConfigError("no exploration rows to train on")
    unknown = [f for f in features if f not in STORED_FEATURES]
    if unknown:
        raise ConfigError(f"unknown feature '{unknown[0]}'; choose from {', '.join(STORED_FEATURES)}")
    index = [STORED_FEATURES.index(f) for f in features]
    X = np.array([[row["features"][i] for i in index] for row in rows], dtype=float)
    Y = np.array([row["rewards"] for row in rows], dtype=float)
    model = MLPActionValue(actions=list(rows[0].get("actions", COMM_ACTIONS)), **params).fit(X, Y)
    model.features_ = list(features)
    return model


@dataclass
class Configuration:
    """What a calibration is valid for: change any of it and the thresholds no longer apply.

    ``vote_rule`` is the controller's termination rule (``controller.vote_rule()``: where Vote is admissible),
    ``min_vote_round`` an extra lower bound on it (``None``: none), ``features`` the MLP's inputs. ``agents`` is
    the team the calibration is for, as :func:`~groundstate.programs.consilience.identity.agents_identity`
    describes it (the paper calibrates per agent model); ``None`` until :meth:`for_team` fills it in from the team
    (:func:`calibrate` and :func:`check_config` do so when they are given the team).
    """

    controller: str
    router: str = "action-conditional"
    max_rounds: int = 10
    weights: dict[str, float] | None = None
    agents: dict[str, Any] | None = None
    removed_actions: tuple[str, ...] = ()
    min_vote_round: int | None = None
    vote_rule: dict[str, Any] | None = None
    features: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"controller": self.controller, "router": self.router, "max_rounds": self.max_rounds,
                "weights": self.weights or LossWeights().to_dict(), "agents": self.agents,
                "removed_actions": sorted(self.removed_actions), "min_vote_round": self.min_vote_round,
                "vote_rule": self.vote_rule or {"kind": "never"},
                "features": list(self.features) if self.features is not None else None}

    def for_team(self, team: Any) -> Configuration:
        """This configuration with ``agents`` described from ``team`` when it names none (itself otherwise).

        Raises:
            ConfigError: the team cannot be described (an ``LMTeam`` built from a bare callable: build it with
                ``lm_config=``, or give ``agents`` yourself).
        """
        if self.agents is not None:
            return self
        described = agents_identity(team)
        if described is None:
            raise ConfigError("cannot tell which agents this team is, so a calibration could not be checked against "
                              "them: build an LMTeam with lm_config=, or give Configuration(agents=...)")
        return replace(self, agents=described)

    @classmethod
    def of(cls, name: str, controller: Any, **kwargs: Any) -> Configuration:
        """The configuration of ``controller`` (its termination rule and, for the MLP, its features)."""
        rule = controller.vote_rule() if hasattr(controller, "vote_rule") else None
        features = getattr(controller, "features", None)
        return cls(controller=name, vote_rule=rule, features=tuple(features) if features is not None else None,
                   **kwargs)

    def program(self, team: Callable, controller: Any, calibrator: Any = None, seed: int = 0,
                **kwargs: Any) -> Consilience:
        """A :class:`Consilience` program running this configuration."""
        return Consilience(team, controller, calibrator=calibrator, router=self.router, max_rounds=self.max_rounds,
                           weights=LossWeights(**self.weights) if self.weights else None,
                           removed_actions=self.removed_actions, min_vote_round=self.min_vote_round, seed=seed,
                           **kwargs)


def check_config(calibrator: RoundwiseConformal, config: Configuration, team: Any = None) -> None:
    """Refuse a calibrator fitted for another configuration (one line naming what differs). A setting the
    calibrator does not record (it was fitted by an earlier version, before the setting was part of the
    configuration) counts as different. ``team``: fills in ``config.agents`` when it names none
    (:meth:`Configuration.for_team`).

    Agents are compared in full (the simulated agents' parameters, every agent role's LM); a calibrator of an
    earlier version that recorded them only as ``"sim"`` or ``"lm"`` is refused with a hint to calibrate again."""
    if team is not None:
        config = config.for_team(team)
    saved = dict(calibrator.config or {})
    wanted = config.to_dict()
    if isinstance(saved.get("agents"), str):
        raise ConfigError(f"the calibrator records its agents only as {saved['agents']!r} (an earlier format that "
                          "does not say which agents or LMs it was fitted on); calibrate again with this version")
    diff = sorted(k for k in wanted if saved.get(k, _MISSING) != wanted[k])
    if diff:
        details = ", ".join(_agents_difference(saved.get(k, _MISSING), wanted[k]) if k == "agents" else
                            f"{k}: calibrated {saved.get(k, 'not recorded')!r}, now {wanted[k]!r}" for k in diff)
        raise ConfigError(f"the calibrator was fitted for another configuration ({details}); calibrate again")


_MISSING = object()


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """``value`` as ``{dotted path: leaf}`` (mappings and lists opened up)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}.{key}").items()} or {prefix: {}}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}.{i}").items()} or {prefix: []}
    return {prefix: value}


def _agents_difference(saved: Any, wanted: Any, shown: int = 4) -> str:
    """What differs between two agent descriptions, leaf by leaf (at most ``shown`` leaves, then a count)."""
    if saved is _MISSING or saved is None or wanted is None:
        return f"agents: calibrated {'not recorded' if saved is _MISSING else saved!r}, now {wanted!r}"
    old, new = _flat(saved, "agents"), _flat(wanted, "agents")
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k, _MISSING) != new.get(k, _MISSING))
    parts = [f"{k}: calibrated {old.get(k, 'absent')!r}, now {new.get(k, 'absent')!r}" for k in keys[:shown]]
    if len(keys) > shown:
        parts.append(f"and {len(keys) - shown} more agent setting(s)")
    return ", ".join(parts)


def calibrate(tasks: Sequence[HiddenProfileTask], team: Callable, controller: Any, config: Configuration,
              alpha: float = 0.1, seed: int = 0, map_fn: MapFn | None = None) -> RoundwiseConformal:
    """Fit round-wise thresholds from calibration trajectories of ``config`` (every proposal executed);
    ``map_fn`` runs the per-task trajectories (:data:`MapFn`). The calibrator records ``config`` with the agents
    of ``team`` (:meth:`Configuration.for_team`), so it is refused for any other agents.

    Raises:
        ConfigError: the team cannot be described, or the tasks produced no rounds.
    """
    config = config.for_team(team)
    program = config.program(team, controller, calibrator=None, seed=seed)
    rounds, scores = proposal_scores((map_fn or serial_map)(EpisodeTrace(program), list(tasks)))
    if not scores:
        raise ConfigError("the calibration tasks produced no rounds")
    return RoundwiseConformal(alpha=alpha, config=config.to_dict()).fit(rounds, scores)
