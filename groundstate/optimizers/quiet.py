"""Holding DSPy's own output back while groundstate shows its own progress (``optimize`` without ``-v``).

DSPy's optimizers log at INFO through DSPy's logging stream, ``print`` their steps to stdout and draw tqdm bars
(``dspy.Evaluate(display_progress=True)`` and ``tqdm`` over the training set are fixed inside
``BootstrapFewShot``, ``BootstrapFewShotWithRandomSearch``, ``MIPROv2`` and ``GEPA``; nothing passed to them turns
those off). :func:`quiet_dspy` silences the logs with DSPy's own switch (``dspy.disable_logging``) and sends what
the optimizers write to ``sys.stdout``/``sys.stderr`` (their prints and bars) nowhere for the block; afterwards
DSPy's logging switch and both streams are as they were. groundstate's own logging (handlers made before the
block) and a progress display that took its stream before the block still reach the terminal.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout


class _Nowhere(io.TextIOBase):
    """A text stream that accepts everything and keeps nothing (not a terminal, so tqdm draws no escapes)."""

    def write(self, text: str) -> int:
        return len(text)

    def isatty(self) -> bool:
        return False


@contextmanager
def quiet_dspy(enabled: bool = True) -> Iterator[None]:
    """Within the block, DSPy logs nothing and what is written to ``sys.stdout``/``sys.stderr`` is dropped (see
    the module docstring); ``enabled=False`` changes nothing.

    Guarantees: on leaving the block (normally or by an exception), DSPy's logging is enabled again exactly when
    it was enabled before, and ``sys.stdout``/``sys.stderr`` are the objects they were.
    """
    if not enabled:
        yield
        return
    import dspy  # noqa: PLC0415 (heavy: dspy)
    from dspy.utils.logging_utils import DSPY_LOGGING_STREAM  # noqa: PLC0415 (heavy: dspy)

    was_enabled = DSPY_LOGGING_STREAM.enabled
    dspy.disable_logging()
    nowhere = _Nowhere()
    try:
        with redirect_stdout(nowhere), redirect_stderr(nowhere):
            yield
    finally:
        if was_enabled:
            dspy.enable_logging()
