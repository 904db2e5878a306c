"""Statistics of Diverse Hypothesis Deliberation (DHD) replays: the public entry point.

Pure and vectorized; every test statistic and interval comes from scipy where scipy has it. The pieces:

- :mod:`groundstate.eval.dhd_table`: pair rows -> :class:`EffectTable` (:func:`pair_effects`), the full-pool
  repeat :func:`disagreement_rate` (Wilson interval).
- :mod:`groundstate.eval.dhd_values`: per-message :func:`message_values` (estimate, bootstrap interval, exact
  sign-flip p-value, W+/W-/C+/C-/indeterminate group), the separation rule (:func:`separation_rule`), its
  within-block :func:`permutation_null`, :func:`fdr_selection` (BH/BY), :func:`strict_counts`, :func:`labels_rows`.
- :mod:`groundstate.eval.dhd_bootstrap`: :func:`hierarchical_bootstrap` (problems, then matched blocks).
- :mod:`groundstate.eval.dhd_crossfit`: :func:`crossfit_keep_or_remove` with its two shuffled controls.
- :mod:`groundstate.eval.dhd_report`: :func:`flip_direction` (paper Fig. 4), :func:`loo_rates_by_K` (Fig. 8) and
  their optional plots.

Typical use::

    table = pair_effects(rows, mode="loo", K=5)
    values = message_values(table)
    null = permutation_null(table, n_permutations=5000)
    fdr = fdr_selection(values["p_value"], q=0.05, values=values)
    labels = labels_rows(table, values)
"""

from __future__ import annotations

from groundstate.eval.dhd_bootstrap import hierarchical_bootstrap
from groundstate.eval.dhd_crossfit import crossfit_keep_or_remove
from groundstate.eval.dhd_report import flip_direction, loo_rates_by_K, plot_flip_direction, plot_loo_rates
from groundstate.eval.dhd_table import GROUPS, EffectTable, disagreement_rate, pair_effects
from groundstate.eval.dhd_values import (
    METHODS,
    SeparationRule,
    block_counts,
    fdr_selection,
    group_counts,
    labels_rows,
    message_values,
    permutation_null,
    separation_rule,
    strict_counts,
)

__all__ = [
    "GROUPS",
    "METHODS",
    "EffectTable",
    "SeparationRule",
    "block_counts",
    "crossfit_keep_or_remove",
    "disagreement_rate",
    "fdr_selection",
    "flip_direction",
    "group_counts",
    "hierarchical_bootstrap",
    "labels_rows",
    "loo_rates_by_K",
    "message_values",
    "pair_effects",
    "permutation_null",
    "plot_flip_direction",
    "plot_loo_rates",
    "separation_rule",
    "strict_counts",
]
