"""A table never mixes what it should not: every run is checked against its cell, and the cells against each other.

- :func:`check_run`: a cell's stored run (the one named by its planned run id, or one the spec adopts) must have
  the configuration the cell plans, field by field: a difference in the judge, the LM (model, per-role LMs),
  the decoding (temperature, max tokens), the protocol options (Standard's rounds, ...) or the data (its hash)
  refuses the table with one line naming the cell and the field.
- :func:`check_across`: two cells whose stored runs differ in the judge or the decoding must differ in an axis
  that varies it in the spec's own plan (a ``judge`` axis, a model axis with the judge ``same-as-lm``, a
  ``temperature`` axis); otherwise the table is refused (it would mix judges or decodings silently).

Fields that say how a run was executed, not what it computed (the run id, its shard, the shards it was merged
from, runtime settings such as the embedded LM's contexts), are not compared.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from groundstate.errors import ConfigError, one_line

#: Run configuration fields that never decide a table's numbers.
IGNORED = ("run_id", "shard", "merged_from")

#: The order in which differences are named (the first found in this order is the one reported).
CATEGORIES = ("judge", "LM", "decoding", "protocol options", "data", "program", "seed", "records (limit)",
              "configuration")

DECODING = ("temperature", "max_tokens", "top_p")


def normalized(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run configuration as JSON values (tuples as lists), without :data:`IGNORED` fields and ``runtime`` entries."""
    from groundstate.lm.embedded import RUNTIME_KEY  # noqa: PLC0415 (--help stays light)

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != RUNTIME_KEY}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    plain = json.loads(json.dumps(dict(config), default=str))
    return strip({k: v for k, v in plain.items() if k not in IGNORED})


def category(path: str) -> str:
    """What a differing field is, for the one-line message (``options.judge`` -> ``judge``)."""
    parts = path.split(".")
    if (parts[0] == "options" and len(parts) > 1 and parts[1] == "judge") or parts[0] in ("evaluator", "judge_lm"):
        return "judge"
    if parts[0] == "temperatures":  # the DHD steps' per-stage temperatures
        return "decoding"
    if parts[0] in ("lm", "lm_config"):
        return "decoding" if parts[-1] in DECODING else "LM"
    return {"options": "protocol options", "data": "data", "program": "program", "program_state": "program",
            "seed": "seed", "limit": "records (limit)"}.get(parts[0], "configuration")


def differences(planned: Any, stored: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf where the two configurations differ: ``(field path, planned value, stored value)``."""
    if isinstance(planned, dict) and isinstance(stored, dict):
        out = []
        for key in [*planned, *(k for k in stored if k not in planned)]:
            where = f"{path}.{key}" if path else str(key)
            out += differences(planned.get(key, "<absent>"), stored.get(key, "<absent>"), where)
        return out
    return [] if planned == stored else [(path or "config", planned, stored)]


def first_difference(planned: Mapping[str, Any], stored: Mapping[str, Any]) -> tuple[str, Any, Any, int] | None:
    """The difference to report (by :data:`CATEGORIES` order) and how many fields differ, or ``None``."""
    found = differences(normalized(planned), normalized(stored))
    if not found:
        return None
    found.sort(key=lambda d: CATEGORIES.index(category(d[0])))
    return (*found[0], len(found))


def _shown(value: Any) -> str:
    return one_line(json.dumps(value, default=str) if not isinstance(value, str) else repr(value), 80)


def check_run(cell: str, planned: Mapping[str, Any], stored: Mapping[str, Any], run: str, adopted: bool) -> None:
    """Refuse a run whose configuration differs from its cell's plan.

    Args:
        cell: the cell's label; planned: its planned configuration (with ``limit``); stored: the run's config.json;
        run: the run's id or directory; adopted: whether the spec (``[runs]``/``--use-run``) chose the run.

    Raises:
        ConfigError: one line naming the cell, the run, the field, its kind and both values.
    """
    diff = first_difference(planned, stored)
    if diff is None:
        return
    path, want, got, count = diff
    how = "the adopted run" if adopted else "the stored run"
    more = f" (and {count - 1} more field(s))" if count > 1 else ""
    raise ConfigError(f"experiment table: cell {cell}: {how} {run} differs from the cell's plan in the "
                      f"{category(path)}: field '{path}' is {_shown(got)}, the cell plans {_shown(want)}{more}; "
                      "run the cell (`groundstate experiment run`) or adopt a run that matches it")


def judge_of(config: Mapping[str, Any]) -> Any:
    """The judge a run configuration records (``None``: the task has none): the OffQuery tasks' ``options.judge``
    (``lexical(threshold=0.75)``, ``lm:<model>``), or a DHD step's evaluator (``rules``, ``lm:<model>``)."""
    judge = (config.get("options") or {}).get("judge")
    if judge is None and "evaluator" in config:
        judge_lm = config.get("judge_lm") if isinstance(config.get("judge_lm"), Mapping) else {}
        judge = "rules (no LM)" if config.get("evaluator") == "rules" else f"lm:{judge_lm.get('model')}"
    return judge


def decoding_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The decoding a run configuration records: each LM's temperature and max tokens, by LM."""
    lm = config.get("lm") or {}
    out = {"default": {k: lm.get(k) for k in DECODING if k in lm}}
    if isinstance(config.get("temperatures"), Mapping):
        out["stages"] = dict(config["temperatures"])
    for pattern, entry in ((config.get("lm_config") or {}).get("roles") or {}).items():
        out[pattern] = {k: entry.get(k) for k in DECODING if k in entry}
    return out


FIELDS = {"judge": judge_of, "decoding": decoding_of}


def varying_axes(cells: Sequence[tuple[Mapping[str, str], Mapping[str, Any]]]) -> dict[str, set[str]]:
    """Per field (``judge``, ``decoding``), the axes that vary it in the plan: two planned cells that differ in
    that axis alone have different values of the field. ``cells``: ``(keys incl. seed, planned config)``."""
    out: dict[str, set[str]] = {name: set() for name in FIELDS}
    for (keys_a, config_a), (keys_b, config_b) in itertools.combinations(cells, 2):
        apart = [axis for axis in keys_a if keys_a[axis] != keys_b.get(axis)]
        if len(apart) != 1:
            continue
        for name, read in FIELDS.items():
            if read(config_a) != read(config_b):
                out[name].add(apart[0])
    return out


def check_across(stored: Sequence[tuple[str, Mapping[str, str], Mapping[str, Any]]],
                 varies: Mapping[str, set[str]]) -> None:
    """Refuse a table whose runs differ in the judge or the decoding between cells that differ in no axis that
    varies it (see the module docstring).

    Args:
        stored: ``(cell label, keys incl. seed, stored config)`` of every cell with a run.
        varies: :func:`varying_axes` of the plan.

    Raises:
        ConfigError: one line naming both cells and the field.
    """
    for (label_a, keys_a, config_a), (label_b, keys_b, config_b) in itertools.combinations(stored, 2):
        apart = {axis for axis in keys_a if keys_a[axis] != keys_b.get(axis)}
        for name, read in FIELDS.items():
            a, b = read(config_a), read(config_b)
            if a != b and not apart & varies.get(name, set()):
                raise ConfigError(f"experiment table: cells {label_a} and {label_b} were run with different "
                                  f"{name}s ({_shown(a)} vs {_shown(b)}), and no axis of the spec varies the "
                                  f"{name}: a table never mixes {name}s; run both cells with the spec's {name}")
