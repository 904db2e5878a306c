"""Which predictors an optimizer may touch.

``trainable`` is a list of glob patterns over predictor names (``verify.*``, ``resolve.choose``); a pattern
covers a name when it matches the name or one of its dotted prefixes. :func:`stage_target` gives the
paper's stage-wise targets: verification tuned against T1, reconstruction against T2, resolution against
T3, or everything against the weighted metric.

:func:`frozen_except` freezes the rest while an optimizer runs: a sub-module none of whose predictors is
trainable is marked compiled (DSPy optimizers then skip it entirely; DSPy has no public way to do this, so it goes
through :func:`groundstate.compat.set_compiled`); a non-trainable predictor inside a partly trainable module cannot
be hidden from DSPy that way, so its state (demos, instructions) is restored after optimization
(:meth:`Freeze.restore`). Either way the result differs from the input only in trainable
predictors, which the tests check.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from groundstate.compat import set_compiled
from groundstate.errors import ConfigError

FROZEN_MARK = "_groundstate_frozen"
"""Set on a sub-module :func:`frozen_except` marked compiled, so :meth:`Freeze.restore` unmarks only those (an
optimizer copies the program, and the mark travels with the copy)."""

STAGES = {"verify": ("verify.*", "t1"), "reconstruct": ("reconstruct.*", "t2"), "resolve": ("resolve.*", "t3"),
          "all": ("*", None)}


def stage_target(stage: str, metric: str | None = None) -> tuple[list[str], str]:
    """``(trainable patterns, metric spec)`` for a ReGround stage (``verify``, ``reconstruct``, ``resolve``, ``all``).

    ``metric`` overrides the stage's own task (for ``all`` it defaults to ``t1+t2+t3``).
    """
    if stage not in STAGES:
        raise ConfigError(f"unknown stage '{stage}': use {', '.join(STAGES)}")
    pattern, own = STAGES[stage]
    return [pattern], metric or own or "t1+t2+t3"


def matches(name: str, patterns: Sequence[str]) -> bool:
    parts = name.split(".")
    prefixes = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return any(fnmatch.fnmatchcase(p, pattern) for pattern in patterns for p in prefixes)


def trainable_names(program: Any, patterns: Sequence[str] | None) -> list[str]:
    """The predictor names ``patterns`` cover (every predictor when ``patterns`` is ``None``).

    Raises:
        ConfigError: the patterns cover no predictor.
    """
    names = [name for name, _ in program.named_predictors()]
    if patterns is None:
        return names
    chosen = [n for n in names if matches(n, patterns)]
    if not chosen:
        raise ConfigError(f"--trainable {list(patterns)} matches no predictor; the program has: {', '.join(names)}")
    return chosen


@dataclass
class Freeze:
    """What :func:`frozen_except` froze, so it can be undone and enforced on the result."""

    trainable: list[str]
    frozen_modules: list[Any] = field(default_factory=list)
    saved_states: dict[str, Any] = field(default_factory=dict)

    def thaw(self) -> None:
        for module in self.frozen_modules:
            set_compiled(module, False)

    def restore(self, optimized: Any) -> Any:
        """Put the saved state back on every non-trainable predictor of ``optimized`` and unfreeze it."""
        for name, predictor in optimized.named_predictors():
            if name in self.saved_states:
                predictor.load_state(copy.deepcopy(self.saved_states[name]))
        for _, module in _named_modules(optimized):
            if getattr(module, FROZEN_MARK, False):
                set_compiled(module, False)
                setattr(module, FROZEN_MARK, False)
        return optimized


def _named_modules(program: Any):
    return program.named_sub_modules()


def frozen_except(program: Any, patterns: Sequence[str] | None) -> Freeze:
    """Freeze every predictor of ``program`` that ``patterns`` do not cover (see the module docstring)."""
    import dspy  # noqa: PLC0415 (heavy: dspy)

    names = [name for name, _ in program.named_predictors()]
    keep = set(trainable_names(program, patterns))
    freeze = Freeze(trainable=sorted(keep))
    if patterns is None:
        return freeze
    predictors = dict(program.named_predictors())
    freeze.saved_states = {n: copy.deepcopy(p.dump_state()) for n, p in predictors.items() if n not in keep}
    for path, module in list(program.named_sub_modules()):
        if path == "self" or not isinstance(module, dspy.Module) or isinstance(module, dspy.Predict):
            continue
        prefix = path[len("self."):] if path.startswith("self.") else path
        inside = [n for n in names if n == prefix or n.startswith(prefix + ".")]
        if inside and not any(n in keep for n in inside):
            set_compiled(module, True)
            setattr(module, FROZEN_MARK, True)
            freeze.frozen_modules.append(module)
    return freeze
