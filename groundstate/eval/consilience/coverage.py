"""Held-out coverage of a round-wise conformal calibrator, per round, under two policies.

Proposition 1 bounds the proposal's regret for a trajectory *of the calibrated configuration*: calibration
trajectories execute every proposal, so the guarantee is about trajectories that do the same
(``policy="calibrated"``). A deployed Consilience program accepts or replaces proposals
(``policy="deployed"``), which changes which states later rounds reach; whether the proposal's regret is
still within the threshold there is an empirical question this module answers too, together with the
executed action's regret (within the threshold by construction in every certified round; reported as a
check).

For each round ``t``: ``n_reached`` trajectories reached it; ``coverage`` is the share whose proposal regret
is ``<= threshold_t``, with an exact (Clopper-Pearson) 95% binomial interval from scipy; ``certified`` says
whether the round has a finite threshold (at least ``ceil((1 - alpha) / alpha)`` calibration scores); a
round is ``checked`` when it also had at least ``min_calibration`` calibration scores, and ``ok`` when its
coverage is at least ``1 - alpha - 3 se`` with ``se = sqrt((1 - alpha) alpha (1/n_reached + 1/(n_cal + 1)))``
(the guarantee is marginal over calibration and test draws, so the threshold's own randomness counts).
Uncertified rounds have an infinite threshold: every action is admissible there and coverage is 1 trivially.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from scipy.stats import binomtest

from groundstate.optimizers.conformal import RoundwiseConformal

POLICIES: tuple[str, ...] = ("calibrated", "deployed")


def coverage(calibrator: RoundwiseConformal, traces: Sequence[Sequence[dict[str, Any]]],
             min_calibration: int = 50, policy: str = "calibrated") -> list[dict[str, Any]]:
    """Per-round coverage of held-out ``traces`` (see the module docstring).

    Args:
        calibrator: the fitted calibrator.
        traces: the trajectories' traces (``Consilience(...)(task=...).trace``).
        min_calibration: calibration scores a round needs to be checked.
        policy: which policy produced ``traces`` (``calibrated``: every proposal executed; ``deployed``: the
            accept-or-replace program); recorded in each row.

    Returns:
        One row per round reached: ``round``, ``policy``, ``n_reached``, ``n_calibration``, ``threshold``
        (``None`` when infinite), ``certified``, ``hits``, ``coverage``, ``ci_low``, ``ci_high``, ``se``,
        ``executed_coverage`` (share of executed actions within the threshold), ``checked``, ``ok``.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy '{policy}'; choose from {', '.join(POLICIES)}")
    by_round: dict[int, list[tuple[float, float]]] = {}
    for trace in traces:
        for entry in trace:
            regrets = entry["regrets"]
            by_round.setdefault(int(entry["round"]), []).append(
                (float(regrets[entry["proposal"]]), float(regrets[entry["executed"]])))
    target = 1 - calibrator.alpha
    out = []
    for t in sorted(by_round):
        pairs = by_round[t]
        eps = calibrator.threshold(t)
        n = len(pairs)
        hits = sum(p <= eps for p, _ in pairs)
        executed = sum(e <= eps for _, e in pairs)
        n_cal = calibrator.counts_.get(t, 0)
        ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
        se = math.sqrt(target * (1 - target) * (1 / n + 1 / (n_cal + 1)))
        share = hits / n
        out.append({"round": t, "policy": policy, "n_reached": n, "n_test": n, "n_calibration": n_cal,
                    "threshold": None if math.isinf(eps) else eps, "certified": math.isfinite(eps),
                    "hits": hits, "coverage": share, "ci_low": float(ci.low), "ci_high": float(ci.high),
                    "se": se, "executed_coverage": executed / n, "checked": n_cal >= min_calibration,
                    "ok": share >= target - 3 * se})
    return out


def uncertified_rounds(rows: Sequence[dict[str, Any]]) -> list[int]:
    """The rounds in ``rows`` with no finite threshold."""
    return [r["round"] for r in rows if not r["certified"]]


def coverage_report(calibrator: RoundwiseConformal, calibrated_traces: Sequence[Sequence[dict[str, Any]]],
                    deployed_traces: Sequence[Sequence[dict[str, Any]]], min_calibration: int = 50
                    ) -> dict[str, Any]:
    """Coverage under both policies, the uncertified rounds, and whether every checked round is ok."""
    calibrated = coverage(calibrator, calibrated_traces, min_calibration, "calibrated")
    deployed = coverage(calibrator, deployed_traces, min_calibration, "deployed")
    return {"alpha": calibrator.alpha, "target": 1 - calibrator.alpha, "min_calibration": min_calibration,
            "calibrated": calibrated, "deployed": deployed,
            "uncertified_rounds": sorted(set(uncertified_rounds(calibrated)) | set(uncertified_rounds(deployed))),
            "all_checked_ok": all(r["ok"] for r in [*calibrated, *deployed] if r["checked"])}
