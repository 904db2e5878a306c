"""The durable runner's progress display: records done/total, LM calls, tokens, errors and elapsed time.

It is told of every finished LM call (it is the :class:`~groundstate.metering.Meter` listener of each record
the runner runs on a thread), not only of finished records, so a run of one long record still shows its calls
and tokens advancing. On a terminal it is a rich progress bar; off a terminal (a log file, CI) it prints one
plain line to stderr every ``interval`` seconds (default 30, or ``GROUNDSTATE_PROGRESS_INTERVAL``) and one
at the end::

    [groundstate] qa-1a2b3c: 3/10 records, 42 LM calls, 12,345 tokens, 0 errors, 1m05s elapsed

Records run as Ray tasks report their calls and tokens when each record finishes.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

DEFAULT_INTERVAL = 30.0
INTERVAL_ENV = "GROUNDSTATE_PROGRESS_INTERVAL"


def default_interval() -> float:
    """Seconds between plain progress lines off a terminal: ``$GROUNDSTATE_PROGRESS_INTERVAL`` or 30."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class RunProgress:
    """Progress of one run (a no-op when disabled): a rich bar on a TTY, interval lines otherwise.

    Args:
        description: the run's name (its id).
        total: records selected.
        done: records already done (resumed).
        enabled: show anything at all.
        tokens: tokens of the records already done.
        interval: seconds between plain lines off a terminal (default: :func:`default_interval`).
        stream: where to write (default ``sys.stderr``); a rich bar only when it is a terminal.

    Thread-safe: :meth:`on_lm_call` and :meth:`on_lm_usage` are called from worker threads.
    """

    def __init__(self, description: str, total: int, done: int, enabled: bool, tokens: int = 0,
                 interval: float | None = None, stream: TextIO | None = None):
        self.enabled, self.total, self.done = enabled, total, done
        self.description = description
        self.errors, self.tokens, self.calls, self.failed_calls = 0, tokens, 0, 0
        self.interval = default_interval() if interval is None else interval
        self.stream = stream
        self._lock = threading.Lock()
        self._streamed = False  # per-call events arrived: records' own counts are already included
        self._bar = None
        self._task = None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- events ------------------------------------------------------------------------------------------
    def on_lm_call(self, failed: bool) -> None:
        """One LM call finished (cache hits included)."""
        with self._lock:
            self._streamed = True
            self.calls += 1
            self.failed_calls += bool(failed)
        self._refresh()

    def on_lm_usage(self, input_tokens: int, output_tokens: int) -> None:
        """One LM call reported its tokens."""
        with self._lock:
            self._streamed = True
            self.tokens += int(input_tokens) + int(output_tokens)
        self._refresh()

    def advance(self, error: bool, tokens: int = 0, calls: int = 0) -> None:
        """One record finished; ``tokens``/``calls`` count only if no per-call events arrived (Ray)."""
        with self._lock:
            self.done += 1
            self.errors += bool(error)
            if not self._streamed:
                self.tokens += int(tokens)
                self.calls += int(calls)
        self._refresh()

    # -- display -----------------------------------------------------------------------------------------
    def line(self) -> str:
        """The plain progress line."""
        with self._lock:
            done, calls, tokens, errors = self.done, self.calls, self.tokens, self.errors
        return (f"[groundstate] {self.description}: {done}/{self.total} records, {calls} LM calls, "
                f"{tokens:,} tokens, {errors} errors, {_elapsed(time.monotonic() - self._started)} elapsed")

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def _refresh(self) -> None:
        if self._bar is not None:
            with self._lock:
                fields = {"completed": self.done, "errors": self.errors, "tokens": self.tokens, "calls": self.calls}
            self._bar.update(self._task, **fields)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            print(self.line(), file=self._out(), flush=True)

    def __enter__(self):
        if not self.enabled:
            return self
        out = self._out()
        if getattr(out, "isatty", lambda: False)():
            from rich.console import Console  # noqa: PLC0415 (--help stays light)
            from rich.progress import (  # noqa: PLC0415 (--help stays light)
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("calls {task.fields[calls]}  tokens {task.fields[tokens]}  "
                                            "errors {task.fields[errors]}"),
                                 console=Console(file=out), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, completed=self.done,
                                            errors=0, tokens=self.tokens, calls=0)
        else:
            self._ticker = threading.Thread(target=self._tick, name="groundstate-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            print(self.line(), file=self._out(), flush=True)
        return False
