"""Which arms a finished replay block must hold, what failed, and what that removed from the analysis.

A finished block (one runner record of ``dhd replay``) holds every arm of
:func:`~groundstate.eval.dhd.replay.replay_arms`: for LOO ``full``, ``full_b`` and one ``without`` per message of
the pool; for single ``independent`` and one ``only`` per message. :func:`replay_inventory` checks that before any
statistic is computed:

- **A missing arm** (a block stored without one of its arms: a foreign or damaged run) is refused: one
  :class:`~groundstate.errors.InputError` line naming the problem, the message (or the full pool) and the block
  (exit status 2 at the CLI). A cache whose LOO blocks have no ``full_b`` arm at all (replayed before the second
  full-pool call existed) is refused with the hint ``--full a`` when the paper's block effect (the mean of both
  replicates) is asked for.
- **A failed call** (an arm stored with ``correct=None``) is part of the design: it is never imputed, never counted
  as wrong, and its effects are not evaluable. It is *reported*, not silently dropped: the inventory lists every
  failed call (problem, block, arm, message, failure) and counts the problem-blocks whose baseline failed (no message
  is evaluable there: with ``full="mean"`` a failed replicate A or B removes the whole block for that problem) and
  the message-blocks lost to a failed removal (or ``only``) call.
- **A missing block** (a problem with fewer finished blocks than the others, e.g. a record that errored and was not
  re-run yet) is listed too; re-running ``dhd replay`` fills it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groundstate.errors import InputError

REMEDY = "the replay run is damaged or from another version; re-run `groundstate dhd replay` into a fresh --runs-dir"


def expected_arms(mode: str, full: str = "mean") -> tuple[tuple[str, ...], str]:
    """``(baseline arms, per-message arm)`` a finished block of ``mode`` must hold."""
    if mode == "loo":
        return (("full", "full_b") if full == "mean" else ("full",)), "without"
    return ("independent",), "only"


def replay_inventory(blocks: Iterable[Mapping[str, Any]], entries: Mapping[str, Any], mode: str, k: int,
                     full: str = "mean") -> dict[str, Any]:
    """Check the blocks of ``mode`` at pool size ``k`` and list their failed calls (see the module notes).

    Args:
        blocks: replay block outputs (:func:`~groundstate.eval.dhd.run.load_blocks`).
        entries: the cache's pool entries by problem id (each with ``pool(k)``).
        mode, k: the replay mode and pool size analysed.
        full: ``"mean"`` (both full-pool replicates needed) or ``"a"``.

    Returns:
        ``{n_blocks, n_failed_calls, failed_calls, blocks_without_baseline, message_blocks_lost, n_missing_blocks,
        missing_blocks}``.

    Raises:
        InputError: a block without one of its arms, or (``full="mean"``, LOO) no block with a ``full_b`` arm.
    """
    base_arms, message_arm = expected_arms(mode, full)
    selected = [b for b in blocks if b["mode"] == mode and int(b["K"]) == int(k)]
    if mode == "loo" and full == "mean" and selected and not any(
            a["arm"] == "full_b" for b in selected for a in b["arms"]):
        raise InputError(f"no LOO block at K={k} holds the second full-pool call (full_b), which the paper's block "
                         "effect (A + B) / 2 - removal needs: replay again, or pass --full a to use replicate A only "
                         "(the definition before issue 15)")
    failed, seen = [], {}
    without_baseline = lost = 0
    for block in sorted(selected, key=lambda b: (str(b["problem_id"]), int(b["block"]))):
        pid, index = str(block["problem_id"]), int(block["block"])
        entry = entries.get(pid)
        if entry is None:
            raise InputError(f"problem {pid!r}, block {index}: replayed ({mode}, K={k}) but the cache holds no "
                             "messages for it")
        pool = [m.index for m in entry.pool(k)]
        arms = {(a["arm"], a.get("message_id") if a["arm"] == message_arm else None): a for a in block["arms"]}
        for name in base_arms:
            if (name, None) not in arms:
                raise InputError(f"problem {pid!r}, full pool (all messages), block {index}: the {mode} block at "
                                 f"K={k} has no {name!r} arm; {REMEDY}")
        for message in pool:
            if (message_arm, message) not in arms:
                raise InputError(f"problem {pid!r}, message {message}, block {index}: the {mode} block at K={k} has "
                                 f"no {message_arm!r} arm for it; {REMEDY}")
        seen.setdefault(pid, set()).add(index)
        base_failed = False
        for (name, message), arm in arms.items():
            if name not in (*base_arms, message_arm) or (name == message_arm and message not in pool):
                continue
            if arm.get("correct") is None:
                failed.append({"problem_id": pid, "block": index, "arm": name, "message_id": message,
                               "failure": arm.get("failure")})
                base_failed = base_failed or name in base_arms
        if base_failed:
            without_baseline += 1
            lost += len(pool)
        else:
            lost += sum(1 for m in pool if arms[(message_arm, m)].get("correct") is None)
    n_blocks = 1 + max((i for indices in seen.values() for i in indices), default=-1)
    missing = [{"problem_id": pid, "block": b} for pid in sorted(seen) for b in range(n_blocks) if b not in seen[pid]]
    return {"n_blocks": len(selected), "n_failed_calls": len(failed), "failed_calls": failed,
            "blocks_without_baseline": without_baseline, "message_blocks_lost": lost,
            "n_missing_blocks": len(missing), "missing_blocks": missing}
