"""Loading OffQuery data: groundstate's own format (:mod:`.instances`), or either format by looking at the data
(:func:`load_any`).

The published files are read by :mod:`~groundstate.eval.benchmarks.offquery.published`; statistics of a data set
are in :mod:`~groundstate.eval.benchmarks.offquery.stats`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groundstate.errors import ConfigError
from groundstate.eval.benchmarks.offquery.instances import load_instances, save_instances
from groundstate.eval.benchmarks.offquery.published import is_official_file, load_offquery
from groundstate.eval.sources import as_source
from groundstate.records import OffQueryInstance

__all__ = ["load_any", "load_instances", "save_instances"]


def load_any(path: Any, t2_truth: str | Path | None = None, condition: str | None = None,
             skip_invalid: bool = False, problems: list[str] | None = None, *,
             allow_empty: bool = False, t2_facts: str | Path | None = None) -> list[OffQueryInstance]:
    """Load a published OffQuery file or a groundstate instance file, whichever ``path`` is.

    A ``.json`` file holding a list whose first item has ``shuffled_private_information`` is a published file
    (:func:`load_offquery`); anything else is groundstate's own format (:func:`load_instances`).

    In-memory records (a ``datasets.Dataset``, a ``DataFrame``, a list of dicts) and Parquet files are told apart
    the same way, by the first record.

    Args:
        path: the file or in-memory records (see :func:`~groundstate.eval.sources.as_source`).
        t2_truth: the T2 truth file for a published file (groundstate files carry their T2 facts).
        condition: one of :data:`~groundstate.records.CONDITIONS`: checks the instances can run under it (a
            corrupted shared context where it shows one); ``None`` = no check.
        skip_invalid: skip bad records (reporting them into ``problems``) instead of raising.
        problems: receives one line per skipped record.
        allow_empty: accept a file with no (valid) records; otherwise that is an error.
        t2_facts: the published facts file beside ``t2_truth`` (see :func:`load_offquery`).

    Raises:
        InputError: bad input (see the two loaders).
        ConfigError: ``t2_truth`` given for a groundstate file, or an unknown ``condition``.
    """
    path = as_source(path, "OffQuery instances")
    if is_official_file(path):
        return load_offquery(path, t2_truth, condition, skip_invalid=skip_invalid, problems=problems,
                             allow_empty=allow_empty, t2_facts=t2_facts)
    if t2_truth is not None or t2_facts is not None:
        raise ConfigError(f"{path} is not a published OffQuery file; a T2 truth file only goes with one "
                          "(groundstate instance files carry their T2 facts)")
    return load_instances(path, skip_invalid=skip_invalid, problems=problems, condition=condition,
                          allow_empty=allow_empty)
