"""An exclusive lock on a run directory, so two processes never run the same run at once.

Two identical commands started together would otherwise both append every record to the same
``results.jsonl``. The runner holds :class:`RunLock` for the whole run; the second process stops at once with
one line naming the holder's pid.

The lock is ``filelock``'s native lock (``flock``) on ``<run-dir>/.lock``, which it opens with ``O_NOFOLLOW``:
a ``.lock`` that is a symlink, a directory, a FIFO, a device or a file with other hard links is refused with one
line before anything is written to it, so a planted ``.lock`` can neither redirect the pid write nor empty another
file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from groundstate.errors import InputError, RunInUseError
from groundstate.files import read_text
from groundstate.paths import check_entry

LOCK = ".lock"
#: Most bytes read from a ``.lock`` (it holds a pid and a newline).
MAX_LOCK_BYTES = 64


def _check_descriptor(fd: int, path: Path) -> None:
    """Refuse a lock file that is not a regular file with a single link (checked on the open descriptor)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise InputError("is not a regular file; groundstate keeps its run lock here as a regular file (remove it)",
                         file=str(path))
    if info.st_nlink > 1:
        raise InputError(f"has {info.st_nlink} hard links; a run lock must be a file of its own (remove it)",
                         file=str(path))


def _file_lock(path: Path, on_acquired: Any) -> Any:
    from filelock import FileLock  # noqa: PLC0415 (--help stays light)

    return FileLock(str(path), blocking=False, thread_local=False, fallback_to_soft=False,
                    preserve_lock_file=True, on_acquired=on_acquired)


def _acquire(lock: Any, path: Path) -> bool:
    """Take ``lock`` without waiting: ``True`` if taken, ``False`` if another process holds it."""
    from filelock import Timeout  # noqa: PLC0415 (--help stays light)

    try:
        lock.acquire()
    except Timeout:
        return False
    except InputError:
        raise
    except OSError as exc:  # ELOOP for a symlink (O_NOFOLLOW), EISDIR, a read-only directory, ...
        check_entry(path, "run lock")
        raise InputError(f"cannot lock the run ({exc.strerror or exc})", file=str(path)) from None
    return True


def _holder_pid(path: Path) -> str:
    try:
        text = read_text(path, MAX_LOCK_BYTES).strip()
    except InputError:
        return "unknown"
    return text if text.isdigit() else "unknown"


class RunLock:
    """An exclusive, non-blocking lock on a run directory (``<run-dir>/.lock``), held for a whole run.

    ``flock`` locks belong to the open file, so the operating system releases the lock when the holder exits,
    even on SIGKILL; a stale ``.lock`` file never blocks a later run. While held, the file holds the holder's
    pid, for the message the second process prints; it is emptied on release.

    Raises:
        RunInUseError: another process holds the lock.
        InputError: ``.lock`` is a symlink, a directory or another non-regular file, or has other hard links.
    """

    def __init__(self, run_dir: str | os.PathLike, run_id: str | None = None):
        self.path = Path(run_dir) / LOCK
        self.run_id = run_id or Path(run_dir).name
        self._lock: Any = None
        self._fd: int | None = None

    def _on_acquired(self, fd: int) -> None:
        _check_descriptor(fd, self.path)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def acquire(self) -> RunLock:
        check_entry(self.path, "run lock")
        lock = _file_lock(self.path, self._on_acquired)
        if not _acquire(lock, self.path):
            raise RunInUseError(f"run {self.run_id} is in use by another groundstate process "
                                f"(pid {_holder_pid(self.path)}); wait for it or use another --runs-dir")
        self._lock = lock
        return self

    def release(self) -> None:
        if self._lock is None:
            return
        try:
            if self._fd is not None:
                os.ftruncate(self._fd, 0)
        finally:
            self._fd = None
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_holder(run_dir: str | os.PathLike) -> str | None:
    """The pid (as written in ``.lock``, or ``"unknown"``) of the live process running ``run_dir``; ``None``
    when no process holds its lock (finished, killed, or never started). Never blocks, never writes to the file,
    never takes the lock for longer than the check.

    Raises:
        InputError: ``.lock`` is a symlink, a directory or another non-regular file.
    """
    path = Path(run_dir) / LOCK
    if not check_entry(path, "run lock"):
        return None
    lock = _file_lock(path, lambda fd: _check_descriptor(fd, path))
    if _acquire(lock, path):
        lock.release()
        return None
    return _holder_pid(path)
