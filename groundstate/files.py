"""One reading layer for every file groundstate reads (JSON, JSON Lines, TOML, artifact parameters), and the one
JSON-encoding helper (:func:`jsonable`) for everything groundstate writes.

Every reader here turns the ways a file can be broken into one :class:`~groundstate.errors.InputError` line
that names the file, the record (line or position) and, where it is known, the field:

- the file is missing, unreadable, a directory, or larger than :data:`MAX_FILE_BYTES`;
- it is not UTF-8 text (a binary file, a stray byte): the error gives the line of the first bad byte;
- it is not valid JSON / TOML (with line and column);
- it nests deeper than :data:`MAX_DEPTH` levels (no groundstate format nests more than about eight; a deeper
  file is a mistake or an attack, and Python's parser would otherwise die of recursion);
- a number has more digits than Python will convert (its 4,300-digit limit), or the file uses ``NaN`` /
  ``Infinity``, which are not JSON and would poison every statistic computed from them.

The limits can be raised with the environment variables ``GROUNDSTATE_MAX_FILE_BYTES`` and
``GROUNDSTATE_MAX_DEPTH``. Nothing here writes files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from groundstate.errors import InputError, one_line  # noqa: F401  (one_line re-exported)

#: Largest file read (bytes); above it a file is refused before it is read.
MAX_FILE_BYTES = int(os.environ.get("GROUNDSTATE_MAX_FILE_BYTES", 4 * 1024**3))
#: Deepest nesting of lists and objects accepted in a JSON or TOML value.
MAX_DEPTH = int(os.environ.get("GROUNDSTATE_MAX_DEPTH", 64))


class _BadNumber(ValueError):
    """Raised from inside the JSON decoder for values we refuse (NaN, Infinity, absurdly long numbers)."""


def _refuse_constant(name: str) -> Any:
    raise _BadNumber(f"{name} is not a JSON number (NaN and Infinity are refused)")


def _parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _BadNumber(f"an integer with {len(text)} digits is too long to read") from None


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _BadNumber(f"the number {text[:20]}... overflows a float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int, parse_float=_parse_float)


def depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), computed without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads_json(text: str, *, file: str | None = None, record: str | int | None = None) -> Any:
    """Parse JSON text with groundstate's limits; every failure is an :class:`InputError`.

    Args:
        text: the JSON text.
        file: the file it came from (named in errors).
        record: the record it is (``at line 3``), named in errors.
    """
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        if record is None:
            message = f"malformed JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
        else:
            message = f"not valid JSON ({exc.msg}, column {exc.colno})"
        raise InputError(message, file=file, record=record) from None
    except _BadNumber as exc:
        raise InputError(str(exc), file=file, record=record) from None
    except RecursionError:
        raise InputError(f"nested too deeply to read (more than {MAX_DEPTH} levels of lists/objects)",
                         file=file, record=record) from None
    except ValueError as exc:  # e.g. Python's integer-digit limit raised outside parse_int
        raise InputError(f"not readable JSON ({exc})", file=file, record=record) from None
    if depth(value) > MAX_DEPTH:
        raise InputError(f"nested too deeply (more than {MAX_DEPTH} levels of lists/objects)", file=file,
                         record=record)
    return value


def _open_regular(path: Path, limit: int) -> tuple[int, int]:
    """``(fd, size)`` of a regular file opened for reading, refused with one line otherwise.

    The file is opened without blocking (a FIFO would otherwise wait forever for a writer) and checked on the open
    descriptor, so a symlink swapped in after a check, a FIFO, a device such as ``/dev/zero`` (or a link to one), a
    socket or a directory is refused before one byte is read, and an oversized file is refused by its size.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", file=str(path)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError("is a directory, not a file", file=str(path))
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"is a {_kind(info.st_mode)}, not a regular file; only regular files are read",
                             file=str(path))
        if info.st_size > limit:
            raise InputError(f"is {info.st_size} bytes, over the {limit}-byte limit (GROUNDSTATE_MAX_FILE_BYTES)",
                             file=str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def check_regular(path: str | os.PathLike, max_bytes: int | None = None) -> int:
    """The size of ``path`` if it is a regular file within ``max_bytes`` (default :data:`MAX_FILE_BYTES`); a
    missing file, a directory, a FIFO, a device, a socket or an oversized file is one :class:`InputError` line.
    Use it before handing a path to a library that reads the file itself (skops, pyarrow, ``datasets``)."""
    fd, size = _open_regular(Path(path), MAX_FILE_BYTES if max_bytes is None else max_bytes)
    os.close(fd)
    return size


def read_bytes(path: str | os.PathLike, max_bytes: int | None = None) -> bytes:
    """A regular file's bytes, refusing missing, special and oversized files with one line (see
    :func:`check_regular`). At most ``max_bytes`` are ever read, whatever size the file claims."""
    path = Path(path)
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    fd, size = _open_regular(path, limit)
    try:
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 24, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(f"grew past the {limit}-byte limit while it was read (GROUNDSTATE_MAX_FILE_BYTES)",
                                 file=str(path))
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", file=str(path)) from None
    finally:
        os.close(fd)


def iter_chunks(path: str | os.PathLike, max_bytes: int | None = None, chunk: int = 1 << 20) -> Iterator[bytes]:
    """A regular file's bytes in chunks of at most ``chunk`` bytes, for readers that stream (hashes, line counts,
    format sniffing). The file is checked as :func:`read_bytes` checks it (special and oversized files are one
    line, before anything is read) and at most ``max_bytes`` are ever read; memory stays at one chunk."""
    path = Path(path)
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    fd, _ = _open_regular(path, limit)
    try:
        os.set_blocking(fd, True)
        total = 0
        while True:
            try:
                data = os.read(fd, min(chunk, limit + 1 - total))
            except OSError as exc:
                raise InputError(f"cannot read ({exc.strerror or exc})", file=str(path)) from None
            if not data:
                return
            total += len(data)
            if total > limit:
                raise InputError(f"grew past the {limit}-byte limit while it was read (GROUNDSTATE_MAX_FILE_BYTES)",
                                 file=str(path))
            yield data
    finally:
        os.close(fd)


def sha256(path: str | os.PathLike, max_bytes: int | None = None) -> str:
    """The sha256 of a regular file's bytes (hex), read in chunks (see :func:`iter_chunks`)."""
    digest = hashlib.sha256()
    for data in iter_chunks(path, max_bytes):
        digest.update(data)
    return digest.hexdigest()


def decode(data: bytes, file: str | None = None) -> str:
    """UTF-8 text (a leading byte-order mark dropped); a bad byte names its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (a binary file?): bad byte at line {line}", file=file) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | os.PathLike, max_bytes: int | None = None) -> str:
    """A UTF-8 text file, with one-line errors."""
    return decode(read_bytes(path, max_bytes), str(path))


def read_json(path: str | os.PathLike, max_bytes: int | None = None) -> Any:
    """A JSON file, with one-line errors (see the module docstring)."""
    return loads_json(read_text(path, max_bytes), file=str(path))


def json_lines(path: str | os.PathLike, max_bytes: int | None = None) -> Iterator[tuple[int, Any, InputError | None]]:
    """``(line number, value, error)`` per non-blank line of a JSON Lines file.

    A line that does not parse yields ``(n, None, InputError)`` so callers can stop or skip; problems with the
    file itself (missing, too large) raise at once.
    """
    data = read_bytes(path, max_bytes)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text (a binary file?)", file=str(path), record=f"at line {number}") \
                    from None
            yield number, loads_json(line, file=str(path), record=f"at line {number}"), None
        except InputError as err:
            yield number, None, err


def read_toml(path: str | os.PathLike, max_bytes: int | None = 16 * 1024**2) -> dict[str, Any]:
    """A TOML file, with one-line errors."""
    text = read_text(path, max_bytes)
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML ({exc})", file=str(path)) from None
    except RecursionError:
        raise InputError(f"nested too deeply to read (more than {MAX_DEPTH} levels)", file=str(path)) from None
    if depth(value) > MAX_DEPTH:
        raise InputError(f"nested too deeply (more than {MAX_DEPTH} levels)", file=str(path))
    return value


def first_char(path: str | os.PathLike) -> str:
    """The first character of a regular file that is not whitespace or a byte-order mark ('' if none, or if the
    path is not a readable regular file: the reader that follows says why in one line)."""
    try:
        fd, _ = _open_regular(Path(path), MAX_FILE_BYTES)
    except InputError:
        return ""
    try:
        os.set_blocking(fd, True)
        head = os.read(fd, 4096)
    except OSError:
        return ""
    finally:
        os.close(fd)
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    return text[:1]


def jsonable(value: Any) -> Any:
    """Convert predictions, pydantic models and numpy values into plain JSON data."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    if hasattr(value, "toDict"):
        return jsonable(value.toDict())
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return jsonable(value.item())
    if hasattr(value, "tolist"):
        return jsonable(value.tolist())
    return str(value)
