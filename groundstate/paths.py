"""Where groundstate may write: names from data made into path components, and output paths checked before work.

Two rules, each with one function that every caller uses:

- **A name that comes from a file or a configuration becomes a path component only through**
  :func:`safe_component` (or :func:`child`, which also joins it and checks the result). A run id built from a
  config's ``program`` field, a merged run's name, a report or table name, a DHD cache key: ``../../x``, an
  absolute path, ``.``/``..``, an empty name, a separator, a control character or anything outside
  ``[A-Za-z0-9._-]`` (plus ``+``, ``=`` and ``@``) is refused with one :class:`~groundstate.errors.InputError` line
  naming where the name came from, so nothing a file says can place a file outside the directory it belongs to.
- **An output path is checked before any work is done** (:func:`check_output`): it must not be one of the
  command's inputs (the same file by resolved path or by inode, through a symlink or a hard link), a file
  output must not be an existing directory, a directory output must not be an existing file, and no existing
  ancestor may be a file. :func:`check_entry` refuses an existing entry of a run or cache directory that is a
  symlink, a directory, a FIFO or a device where groundstate keeps a regular file.

Nothing here writes; every refusal is one line.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from groundstate.errors import InputError, one_line

#: Longest name accepted as one path component (file systems allow 255 bytes; room is left for suffixes).
MAX_COMPONENT = 200
_SAFE = re.compile(r"[A-Za-z0-9._+=@-]+")


def safe_component(name: object, what: str = "name", source: str | os.PathLike | None = None) -> str:
    """``name`` if it is safe as one path component, else one :class:`InputError` line.

    Safe means: a string of 1 to :data:`MAX_COMPONENT` characters from ``[A-Za-z0-9._+=@-]``, not ``.`` or
    ``..`` and not starting with ``-`` (so it cannot be read as an option). A name that passes cannot contain a
    path separator, so joining it to a directory always gives an entry of that directory.

    Args:
        name: the candidate (from a file, a config, an option).
        what: what the name is, for the message (``"program name"``, ``"run id"``).
        source: the file the name came from, named in the message.
    """
    if not isinstance(name, str):
        raise InputError(f"{what} must be a string, got a {type(name).__name__}",
                         file=None if source is None else str(source))
    problem = None
    if not name:
        problem = "is empty"
    elif len(name) > MAX_COMPONENT:
        problem = f"is {len(name)} characters long (at most {MAX_COMPONENT})"
    elif name in (".", ".."):
        problem = "is not a name"
    elif name.startswith("-"):
        problem = "starts with '-'"
    elif not _SAFE.fullmatch(name):
        bad = next(ch for ch in name if not _SAFE.fullmatch(ch))
        problem = f"contains {one_line(repr(bad))}; only letters, digits and . _ - + = @ are allowed"
    if problem:
        raise InputError(f"{what} '{one_line(name, 80)}' cannot be used as a file name: it {problem}",
                         file=None if source is None else str(source))
    return name


def child(parent: str | os.PathLike, name: object, what: str = "name",
          source: str | os.PathLike | None = None) -> Path:
    """``parent / name`` for a ``name`` that passed :func:`safe_component`; the result is checked to be a direct
    entry of ``parent`` (by its lexical parts: nothing is resolved or created)."""
    parent = Path(parent)
    path = parent / safe_component(name, what, source)
    if path.parent != parent:  # pragma: no cover - safe_component already excludes separators
        raise InputError(f"{what} '{one_line(name, 80)}' leaves {parent}", file=None if source is None else str(source))
    return path


def _kind(mode: int) -> str:
    for test, label in ((stat.S_ISLNK, "symlink"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"),
                        (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                        (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "regular file")):
        if test(mode):
            return label
    return "special file"


def kind_of(path: str | os.PathLike) -> str | None:
    """What ``path`` itself is (``"regular file"``, ``"directory"``, ``"symlink"``, ``"FIFO (named pipe)"``, ...),
    without following a final symlink; ``None`` when nothing is there."""
    try:
        return _kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def check_entry(path: str | os.PathLike, what: str = "file") -> bool:
    """Whether ``path`` exists as a regular file (``False``: nothing is there); anything else groundstate does not
    write there itself (a symlink, a directory, a FIFO, a device, a socket) is one :class:`InputError` line.

    Used for the files groundstate keeps in its own directories (a run's ``config.json``, ``results.jsonl``,
    ``summary.json`` and ``.lock``; a DHD cache's files), which it opens for appending or replaces: a symlink
    there would send the write elsewhere, a FIFO would block it.
    """
    kind = kind_of(path)
    if kind is None:
        return False
    if kind != "regular file":
        raise InputError(f"is a {kind}, not a regular file; groundstate keeps its {what} here as a regular file "
                         "(remove it, or use another directory)", file=str(path))
    return True


def _same(a: Path, b: Path) -> bool:
    try:
        if os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return os.path.abspath(a) == os.path.abspath(b) or a.resolve() == b.resolve()


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def check_output(path: str | os.PathLike, *, kind: str = "file", inputs: Iterable[str | os.PathLike | None] = (),
                 what: str = "--out", writes: Iterable[str] | None = None) -> Path:
    """Check, before any work, that ``path`` can be written as a ``kind`` (``"file"`` or ``"dir"``) output.

    Refused, each with one :class:`InputError` line: an output that is one of ``inputs`` (same resolved path, or
    the same file through a symlink or hard link); a file output that is an existing directory; a directory
    output that exists and is not a directory; an output whose nearest existing ancestor is not a directory. For a
    directory output, ``writes`` names the entries the command writes into it (each must not be an input); with
    ``writes`` ``None`` the command owns the whole directory, so no input may lie inside it.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    sources = [Path(p) for p in inputs if p is not None and str(p) not in ("", "synthetic")]
    label = f"{what} {one_line(path)}"
    found = kind_of(path)
    if found == "symlink":
        found = kind_of(path.resolve()) if path.exists() else None
    if kind == "file" and found == "directory":
        raise InputError(f"{label} is a directory; it must name a file")
    if kind == "dir" and found not in (None, "directory"):
        raise InputError(f"{label} is a {found}; it must name a directory")
    ancestor = path.parent
    while kind_of(ancestor) is None and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    ancestor_kind = kind_of(ancestor.resolve() if ancestor.exists() else ancestor)
    if ancestor_kind not in (None, "directory"):
        raise InputError(f"{label} cannot be made: {one_line(ancestor)} is a {ancestor_kind}, not a directory")
    for source in sources:
        if _same(path, source):
            raise InputError(f"{label} is the input {one_line(source)}; writing it would destroy the input "
                             "(choose another output)")
        if kind == "dir" and writes is None and _inside(source, path):
            raise InputError(f"{label} holds the input {one_line(source)}; the command writes that whole "
                             "directory (choose another output)")
        if kind == "dir" and writes is not None:
            for name in writes:
                if _same(path / name, source):
                    raise InputError(f"{label}: writing {one_line(path / name)} would overwrite the input "
                                     f"{one_line(source)} (choose another output)")
    return path
