"""Report data for DHD replays: flip direction by proposal correctness (paper Fig. 4) and LOO rates by K (Fig. 8).

Plots are optional: matplotlib is imported lazily and the plot functions return ``False`` without it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from groundstate.eval.dhd.effects import GROUPS, EffectTable, as_records, pair_effects
from groundstate.eval.report import no_data_note
from groundstate.eval.stats import wilson_ci

logger = logging.getLogger(__name__)

CLASSES = (("wrong", 0), ("correct", 1), ("unknown", -1))


def flip_direction(table: EffectTable) -> dict[str, dict[str, Any]]:
    """Direction of the pairs that flip final correctness, by the message's proposal correctness.

    Every evaluable pair (message x block) is one observation, with one full-pool realization (replicate A for
    LOO: :meth:`~groundstate.eval.dhd.effects.EffectTable.realization_effects`), as the paper's single-realization
    flip statistics count final-correctness changes. Among flips (effect != 0), ``helpful_share`` is the
    share with effect +1 (with the message correct, without it wrong; for LOO: the full pool is right and the reduced
    pool wrong) and ``harmful_share`` the share with -1; they sum to 1. ``flip_rate`` is flips over all evaluable
    pairs (neutral ones included) and ``helpful_rate`` helpful flips over all evaluable pairs.

    Returns:
        For ``wrong``, ``correct``, ``unknown`` and ``all``: ``n_evaluable``, ``n_flips``, ``helpful``, ``harmful``,
        ``flip_rate``, ``helpful_rate``, ``helpful_share``, ``harmful_share`` (``None`` without flips) and
        ``helpful_share_ci`` (Wilson 95%, ``{"mean", "low", "high", "n"}``).
    """
    code = table.proposal_code
    effects = table.realization_effects()
    out = {}
    for name, c in (*CLASSES, ("all", None)):
        rows = effects if c is None else effects[code == c]
        n_eval = int((~np.isnan(rows)).sum())
        helpful, harmful = int((rows == 1).sum()), int((rows == -1).sum())
        flips = helpful + harmful
        out[name] = {"n_evaluable": n_eval, "n_flips": flips, "helpful": helpful, "harmful": harmful,
                     "flip_rate": flips / n_eval if n_eval else None,
                     "helpful_rate": helpful / n_eval if n_eval else None,
                     "helpful_share": helpful / flips if flips else None,
                     "harmful_share": harmful / flips if flips else None,
                     "helpful_share_ci": wilson_ci(helpful, flips)}
    return out


def _rates(table: EffectTable) -> dict[str, Any]:
    code = table.proposal_code[:, None]
    effects = table.realization_effects()
    eligible = ~np.isnan(effects) & (code >= 0)
    n = int(eligible.sum())
    counts = {"W+": int(((code == 0) & (effects == 1)).sum()), "W-": int(((code == 0) & (effects == -1)).sum()),
              "C+": int(((code == 1) & (effects == 1)).sum()), "C-": int(((code == 1) & (effects == -1)).sum())}
    return {"n_eligible": n, "n_messages": table.n_messages, "counts": counts,
            **{g: counts[g] / n if n else None for g in GROUPS}}


def loo_rates_by_K(rows: Any, by: str | None = None) -> dict[Any, Any]:
    """Per pool size K, the shares of W+, W-, C+, C- among eligible in-pool LOO observations (paper Fig. 8).

    An eligible observation is an evaluable LOO pair of a message whose proposal correctness is known (one per
    message with a single block; one per message and block with repeats; replicate A is the full pool). W+/C+:
    removal breaks a correct full-pool result (effect +1) for a wrong/correct proposal; W-/C-: removal fixes a wrong
    one (effect -1).

    Args:
        rows: pair rows (mappings or a DataFrame); only ``mode == "loo"`` rows are used.
        by: optional row field to split on first (e.g. ``"benchmark"``).

    Returns:
        ``{K: {"n_eligible", "n_messages", "counts", "W+", "W-", "C+", "C-"}}`` sorted by K, or
        ``{group: {K: ...}}`` with ``by``.
    """
    records = [r for r in as_records(rows) if r.get("mode") == "loo"]
    if by is not None:
        groups = dict.fromkeys(str(r.get(by)) for r in records)
        return {g: loo_rates_by_K([r for r in records if str(r.get(by)) == g]) for g in groups}
    sizes = sorted({int(r["K"]) for r in records})
    return {k: _rates(pair_effects(records, mode="loo", K=k, full="a")) for k in sizes}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or ``None`` when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: PLC0415 (optional extra: plot)
    except ImportError:
        logger.info("matplotlib is not installed: no chart")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 (optional extra: plot)

    return plt


def plot_flip_direction(stats: dict[str, dict[str, Any]], path: str | Path,
                        classes: Sequence[str] = ("wrong", "correct", "unknown")) -> bool:
    """Horizontal 100% bars of helpful vs harmful shares among flips per proposal class; ``False`` without
    matplotlib. Row labels carry the flip rate among all evaluable pairs; bar labels the event counts."""
    plt = pyplot()
    if plt is None:
        return False
    names = [c for c in classes if stats.get(c, {}).get("n_flips")]
    fig, ax = plt.subplots(figsize=(7, 0.7 * max(len(names), 1) + 1.2))
    for y, name in enumerate(names):
        entry = stats[name]
        helpful, harmful = entry["helpful_share"], entry["harmful_share"]
        ax.barh(y, helpful, color="#3b7dd8", label="helpful" if y == 0 else None)
        ax.barh(y, harmful, left=helpful, color="#d8553b", label="harmful" if y == 0 else None)
        ax.text(helpful / 2, y, f"{helpful:.0%} (n={entry['helpful']})", ha="center", va="center", color="white")
        ax.text(helpful + harmful / 2, y, f"{harmful:.0%} (n={entry['harmful']})", ha="center", va="center",
                color="white")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([f"{n} proposal\nflip rate {stats[n]['flip_rate']:.1%}" for n in names])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of correctness flips")
    if names:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    else:
        no_data_note(ax, "no data: no message flipped the outcome")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def plot_loo_rates(stats: dict[Any, dict[str, Any]], path: str | Path) -> bool:
    """Grouped bars of W+, W-, C+, C- shares per K (output of :func:`loo_rates_by_K` without ``by``);
    ``False`` without matplotlib."""
    plt = pyplot()
    if plt is None:
        return False
    sizes = list(stats)
    fig, ax = plt.subplots(figsize=(1.6 * max(len(sizes), 1) + 2, 3.5))
    width = 0.2
    colors = {"W+": "#3b7dd8", "W-": "#d8553b", "C+": "#8fb8ee", "C-": "#eea08f"}
    for i, group in enumerate(GROUPS):
        ax.bar(np.arange(len(sizes)) + (i - 1.5) * width, [stats[k][group] or 0.0 for k in sizes], width,
               label=group, color=colors[group])
    for x, k in enumerate(sizes):
        if not stats[k]["n_eligible"]:  # no eligible message at this K: no share, not a share of 0
            ax.text(x, 0.02, "no data", ha="center", va="bottom", color="grey", fontsize=8)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"K={k}\n(n={stats[k]['n_eligible']} message-blocks)" for k in sizes], fontsize=8)
    ax.set_ylabel("share of eligible LOO observations", fontsize=9)
    if any(stats[k]["n_eligible"] for k in sizes):
        # above the axes, outside them: a legend inside would cover the tallest bars
        ax.legend(ncol=4, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8,
                  handlelength=1.2, columnspacing=1.0)
    elif not sizes:
        no_data_note(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True
