"""Cell readers: per task, how the stored runs of one table cell (one run per seed) become the table's numbers.

A reader takes the cell's loaded runs (:class:`~groundstate.eval.runs.Run`: ``config``, ``summary``, ``rows``)
and its validated task settings, and returns ``{metric: entry}``, each entry a dict with ``mean``, ``low``,
``high`` (``None`` without an interval), ``n`` (what it is over) and ``failed`` (records it could not be measured
on): the shape of a run summary's scores, which :func:`groundstate.eval.stats.format_ci` prints ("not measured
(N failed)" when nothing was measured). Runs of several seeds are pooled record by record.

- :func:`summary_reader` (the default): every score of the runs' summaries, plus ``tokens_input``,
  ``tokens_output``, ``tokens_total``, ``lm_calls``, ``cached_calls`` (calls served from DSPy's cache, which bill no
  tokens) and ``cost_usd`` per record (the paper's token tables).
- :func:`hidden_profile_reader` (``consilience`` and ``hidden-protocol``): as the summary reader, with task
  accuracy over tasks and vote accuracy pooled over every agent's vote (§4.2 of the Consilience paper), each with
  a Wilson interval, for the final and (HiddenBench's discussion) the initial votes.

- ``dhd-replay`` and ``dhd-mask``: the DHD analysis of the cell's replay run (Tables 17-19, 24-26) and the
  masking run's table (Table 23), :mod:`~groundstate.eval.experiments.dhd_readers`.
- ``consilience-features`` and ``consilience-routing``: the Consilience paper's Table 6 (final communication cost
  and objective beside the accuracies) and Table 8 (per routing policy, ``<policy>:mean_dJ`` and
  ``<policy>:normalized_regret``), :mod:`~groundstate.eval.experiments.consilience_readers`.

A task registers its own with :func:`register_reader`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Reader = Callable[[Sequence[Mapping[str, Any]], Any], dict[str, dict[str, Any]]]
"""``(runs, settings) -> {metric: entry}``: the cell's runs and its validated task settings."""

#: Per-record figures every run has, besides its scores.
COST_METRICS = ("tokens_input", "tokens_output", "tokens_total", "lm_calls", "cached_calls", "cost_usd")


def _rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [row for run in runs for row in run["rows"]]


def cost_entries(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tokens, calls (and those served from a cache) and dollars per record (means over the records, no
    interval)."""
    n = len(rows)

    def per_record(values: list[float], over: int) -> dict[str, Any]:
        return {"mean": sum(values) / over if over else None, "low": None, "high": None, "n": over, "failed": 0}

    inp = [float(r.get("input_tokens") or 0) for r in rows]
    out = [float(r.get("output_tokens") or 0) for r in rows]
    costs = [float(r["cost_usd"]) for r in rows if isinstance(r.get("cost_usd"), int | float)]
    return {"tokens_input": per_record(inp, n), "tokens_output": per_record(out, n),
            "tokens_total": per_record([a + b for a, b in zip(inp, out, strict=True)], n),
            "lm_calls": per_record([float(r.get("lm_calls") or 0) for r in rows], n),
            "cached_calls": per_record([float(r.get("cached_calls") or 0) for r in rows], n),
            "cost_usd": per_record(costs, len(costs)) if len(costs) == n else
            {"mean": None, "low": None, "high": None, "n": 0, "failed": 0}}


def summary_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """Every score of the runs (one run: its summary as stored; several: the records pooled) and the per-record
    costs (see the module docstring)."""
    from groundstate.eval.results import summarize  # noqa: PLC0415 (--help stays light)

    rows = _rows(runs)
    scores = dict(runs[0]["summary"].get("scores") or {}) if len(runs) == 1 else summarize(rows)["scores"]
    return {**{k: dict(v) for k, v in scores.items()}, **cost_entries(rows)}


def hidden_profile_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """The summary reader's numbers, with task and vote accuracy as the Consilience paper reports them (§4.2)."""
    from groundstate.eval.consilience.metrics import pooled_vote_accuracy  # noqa: PLC0415 (--help stays light)
    from groundstate.eval.stats import wilson_ci  # noqa: PLC0415 (--help stays light)

    rows = _rows(runs)
    out = summary_reader(runs, settings)
    for prefix in ("", "initial_"):
        key = f"{prefix}task_accuracy"
        hits = [float(v) for r in rows if (v := (r.get("scores") or {}).get(key)) is not None]
        failed = sum(1 for r in rows if key in (r.get("score_errors") or {}))
        if hits or failed or key in out:
            out[key] = {**wilson_ci(int(round(sum(hits))), len(hits)), "failed": failed}
            out[f"{prefix}vote_accuracy"] = pooled_vote_accuracy(rows, prefix=prefix)
    return out


def dhd_replay_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """DHD's Tables 17-19 and 24-26 (:func:`groundstate.eval.experiments.dhd_readers.replay_reader`)."""
    from groundstate.eval.experiments.dhd_readers import replay_reader  # noqa: PLC0415 (--help stays light)

    return replay_reader(runs, settings)


def dhd_mask_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """DHD's Table 23 (:func:`groundstate.eval.experiments.dhd_readers.mask_reader`)."""
    from groundstate.eval.experiments.dhd_readers import mask_reader  # noqa: PLC0415 (--help stays light)

    return mask_reader(runs, settings)


def consilience_features_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """The Consilience paper's Table 6: the hidden-profile numbers with the final communication cost and objective
    (:func:`groundstate.eval.experiments.consilience_readers.features_numbers`)."""
    from groundstate.eval.experiments.consilience_readers import features_numbers  # noqa: PLC0415 (--help stays light)

    return {**hidden_profile_reader(runs, settings), **features_numbers(runs)}


def consilience_routing_reader(runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """The Consilience paper's Table 8: the hidden-profile numbers of the discussions and every routing policy's
    (:func:`groundstate.eval.experiments.consilience_readers.routing_numbers`)."""
    from groundstate.eval.experiments.consilience_readers import routing_numbers  # noqa: PLC0415 (--help stays light)

    return {**hidden_profile_reader(runs, settings), **routing_numbers(runs)}


#: Readers by task name (default :func:`summary_reader`).
READERS: dict[str, Reader] = {"consilience": hidden_profile_reader, "hidden-protocol": hidden_profile_reader,
                              "dhd-replay": dhd_replay_reader, "dhd-mask": dhd_mask_reader,
                              "consilience-features": consilience_features_reader,
                              "consilience-routing": consilience_routing_reader}


def register_reader(task: str, reader: Reader) -> Reader:
    """Read the cells of task ``task`` with ``reader`` (replacing any reader it had); returns the reader."""
    READERS[task] = reader
    return reader


def read_cell(task: str, runs: Sequence[Mapping[str, Any]], settings: Any = None) -> dict[str, dict[str, Any]]:
    """The numbers of one table cell from its runs (one per seed) and its task settings, by its task's reader."""
    return READERS.get(task, summary_reader)(runs, settings)
