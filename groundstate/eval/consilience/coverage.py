"""Held-out coverage of a round-wise conformal calibrator: per round, the share of proposals within the threshold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from groundstate.optimizers.conformal import RoundwiseConformal
from groundstate.programs.consilience.consilience import proposal_scores


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
