"""An exclusive lock on a run directory, so two processes never run the same run at once.

Two identical commands started together would otherwise both append every record to the same
``results.jsonl``. The runner holds :class:`RunLock` for the whole run; the second process stops at once with
one line naming the holder's pid.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from groundstate.errors import RunInUseError

LOCK = ".lock"


class RunLock:
    """An exclusive, non-blocking lock on a run directory (``<run-dir>/.lock``), held for a whole run.

    ``fcntl.flock`` locks belong to the open file, so the operating system releases the lock when the holder
    exits, even on SIGKILL; a stale ``.lock`` file never blocks a later run. The file holds the holder's pid,
    for the message the second process prints. Where ``fcntl`` does not exist (Windows) runs are not locked.

    Raises:
        RunInUseError: another process holds the lock.
    """

    def __init__(self, run_dir: str | os.PathLike, run_id: str | None = None):
        self.path = Path(run_dir) / LOCK
        self.run_id = run_id or Path(run_dir).name
        self._handle = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunInUseError(f"run {self.run_id} is in use by another groundstate process (pid {holder}); "
                                "wait for it or use another --runs-dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is None:
            return
        import fcntl

        try:
            self._handle.seek(0)
            self._handle.truncate()
            self._handle.flush()
        finally:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_holder(run_dir: str | os.PathLike) -> str | None:
    """The pid (as written in ``.lock``, or ``"unknown"``) of the live process running ``run_dir``; ``None``
    when no process holds its lock (finished, killed, or never started). Never blocks, never takes the lock
    for longer than the check."""
    path = Path(run_dir) / LOCK
    if not path.is_file():
        return None
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: runs are not locked
        return None
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            return handle.read().strip() or "unknown"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None
