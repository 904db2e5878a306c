"""Progress displays of long jobs: records (or tasks) done/total, LM calls, tokens, errors and elapsed time.

:class:`RunProgress` is the durable runner's (and the in-memory task maps' of ``consilience explore``,
``calibrate`` and ``coverage``); :class:`TuneProgress` is ``optimize``'s (metric calls, LM calls and failed calls
while a DSPy optimizer runs). Both are told of every finished LM call (they are the
:class:`~groundstate.metering.Meter` listener), not only of finished records, so a run of one long record still
shows its calls and tokens advancing. On a terminal they are a rich display; off a terminal (a log file, CI) they
print one plain line to stderr every ``interval`` seconds (default 30, or ``GROUNDSTATE_PROGRESS_INTERVAL``) and
one at the end::

    [groundstate] qa-1a2b3c: 3/10 records, 42 LM calls, 12,345 tokens (189.9 tokens/s), 0 errors, 1m05s elapsed
    [groundstate] optimize reground (bootstrap): optimizing, 40 metric calls (0 raised), 52 LM calls (1 failed), ...

The tokens/s of :class:`RunProgress` are the tokens this display saw advance (prompt and output; a resumed run's
earlier records left out) divided by the time since it started, so they read the pace of the run as it goes, the
LM's waits and the records' own work included.

Records run on Ray workers are counted there: the workers' running totals reach :meth:`RunProgress.on_worker_totals`
about once a second (:func:`groundstate.eval.ray_backend.execute_on_ray`), so the calls advance while records
run; without those totals (no poll answered yet) the calls and tokens are counted when each record returns.

The stream is chosen when the display starts (``stream``, else the ``sys.stderr`` of that moment), so work that
redirects ``sys.stderr`` meanwhile (``tune(quiet=True)``) does not hide it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, TextIO

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


class ProgressDisplay(ABC):
    """What every progress display shares (a no-op when disabled): a rich display on a TTY, interval lines
    otherwise. Subclasses say what they count (:meth:`line`, :meth:`counts`) and how a rich display shows it.

    Thread-safe: the ``on_*`` events of subclasses are called from worker threads.
    """

    #: Start showing when a subclass's first event calls :meth:`_start` instead of on entering the block (a refusal
    #: before any work then prints only its own line): :class:`TuneProgress`.
    lazy = False
    #: Let a rich display catch what is printed meanwhile (off for a display that may start inside a block that
    #: redirects the standard streams itself).
    redirect = True

    def __init__(self, description: str, enabled: bool, interval: float | None = None,
                 stream: TextIO | None = None):
        self.enabled, self.description = enabled, description
        self.interval = default_interval() if interval is None else interval
        self.stream = stream
        self._lock = threading.Lock()
        self._bound: TextIO | None = None
        self._bar = None
        self._task = None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._entered = self._shown = False

    @abstractmethod
    def counts(self) -> str:
        """What the line says after the description (without the elapsed time)."""

    def line(self) -> str:
        """The plain progress line."""
        return (f"[groundstate] {self.description}: {self.counts()}, "
                f"{_elapsed(time.monotonic() - self._started)} elapsed")

    def _columns(self) -> list:
        from rich.progress import (  # noqa: PLC0415 (--help stays light)
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        return [TextColumn("{task.description}"), SpinnerColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[counts]}")]

    def _task_fields(self) -> dict[str, Any]:
        return {"counts": self.counts()}

    def _out(self) -> TextIO:
        if self._bound is not None:
            return self._bound
        return self.stream if self.stream is not None else sys.stderr

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, **self._task_fields())

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            print(self.line(), file=self._out(), flush=True)

    def __enter__(self):
        if not self.enabled:
            return self
        self._bound = self._out()
        self._entered = True
        if not self.lazy:
            self._start()
        return self

    def _start(self) -> None:
        """Show the display (once, and only inside the ``with`` block)."""
        with self._lock:
            if not self._entered or self._shown:
                return
            self._shown = True
            self._started = time.monotonic()
        out = self._bound
        if getattr(out, "isatty", lambda: False)():
            from rich.console import Console  # noqa: PLC0415 (--help stays light)
            from rich.progress import Progress  # noqa: PLC0415 (--help stays light)

            bar = Progress(*self._columns(), console=Console(file=out), transient=False,
                           redirect_stdout=self.redirect, redirect_stderr=self.redirect)
            bar.__enter__()
            self._task = bar.add_task(self.description, **self._task_fields())
            self._bar = bar  # set last: events refresh it only once its task exists
        else:
            self._ticker = threading.Thread(target=self._tick, name="groundstate-progress", daemon=True)
            self._ticker.start()

    def __exit__(self, *exc):
        self._entered = False
        if self._bar is not None:
            self._refresh()
            self._bar.__exit__(*exc)
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            print(self.line(), file=self._out(), flush=True)
        return False


class RunProgress(ProgressDisplay):
    """Progress of one run or task map: ``done/total`` units, LM calls, tokens and errors.

    Args:
        description: the run's name (its id), or the command.
        total: records (or tasks) selected.
        done: records already done (resumed).
        enabled: show anything at all.
        tokens: tokens of the records already done.
        interval: seconds between plain lines off a terminal (default: :func:`default_interval`).
        stream: where to write (default ``sys.stderr``); a rich bar only when it is a terminal.
        unit: what ``total`` counts (``records``; ``tasks`` for the task maps).
    """

    def __init__(self, description: str, total: int, done: int, enabled: bool, tokens: int = 0,
                 interval: float | None = None, stream: TextIO | None = None, unit: str = "records"):
        super().__init__(description, enabled, interval, stream)
        self.total, self.done, self.unit = total, done, unit
        self.errors, self.tokens, self.calls, self.failed_calls = 0, tokens, 0, 0
        self._base_tokens = tokens
        self._streamed = False  # per-call events arrived: records' own counts are already included
        self._workers: tuple[int, int, int] | None = None  # the Ray workers' running totals (calls, failed, tokens)

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

    def on_worker_totals(self, calls: int, failed: int, tokens: int) -> None:
        """The running totals of this session's LM calls on Ray workers (records still running included)."""
        with self._lock:
            self._workers = (int(calls), int(failed), int(tokens))
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
    def _snapshot(self) -> tuple[int, int, int, int]:
        """``(done, calls, tokens, errors)``: the larger of the returned records' counts and the workers' totals
        (a worker that died takes its running total with it; its records' rows still count)."""
        with self._lock:
            calls, tokens = self.calls, self.tokens
            if self._workers is not None:
                calls = max(calls, self._workers[0])
                tokens = max(tokens, self._base_tokens + self._workers[2])
            return self.done, calls, tokens, self.errors

    def tokens_per_second(self, tokens: int) -> float:
        """Tokens advanced since the display started (``tokens`` now, minus those of resumed records) per second."""
        elapsed = time.monotonic() - self._started
        return max(0, tokens - self._base_tokens) / elapsed if elapsed > 0 else 0.0

    def counts(self) -> str:
        done, calls, tokens, errors = self._snapshot()
        return (f"{done}/{self.total} {self.unit}, {calls} LM calls, {tokens:,} tokens "
                f"({self.tokens_per_second(tokens):,.1f} tokens/s), {errors} errors")

    def _columns(self) -> list:
        from rich.progress import (  # noqa: PLC0415 (--help stays light)
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        return [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("calls {task.fields[calls]}  tokens {task.fields[tokens]} ({task.fields[rate]:,.1f}/s)  "
                           "errors {task.fields[errors]}")]

    def _task_fields(self) -> dict[str, Any]:
        done, calls, tokens, errors = self._snapshot()
        return {"total": self.total, "completed": done, "errors": errors, "tokens": tokens, "calls": calls,
                "rate": self.tokens_per_second(tokens)}


class TuneProgress(ProgressDisplay):
    """Progress of ``tune`` (``groundstate optimize``): the phase, metric calls (and how many raised), LM calls
    (and how many failed), tokens and elapsed time. The optimizer's own total is not known in advance (it stops
    early, bootstraps until it has its demos), so nothing is shown as a share of it.

    It is the listener :func:`~groundstate.optimizers.tune.tune` takes: :meth:`on_phase`, :meth:`on_metric_call`
    and the meter's :meth:`on_lm_call` / :meth:`on_lm_usage`.
    """

    def __init__(self, description: str, enabled: bool, interval: float | None = None,
                 stream: TextIO | None = None):
        super().__init__(description, enabled, interval, stream)
        self.phase = "starting"
        self.metric_calls = self.metric_raised = self.calls = self.failed_calls = self.tokens = 0

    lazy = True  # shown from the first phase on: a refusal before any work stays one line
    redirect = False  # it starts inside tune(quiet=True), which redirects the standard streams itself

    def on_phase(self, phase: str) -> None:
        """The optimizer moved on (``scoring the starting program``, ``optimizing``, ...); the first phase starts
        the display."""
        with self._lock:
            self.phase = phase
        self._start()
        self._refresh()

    def on_metric_call(self, raised: bool) -> None:
        """The metric scored one prediction (``raised``: the metric itself raised)."""
        with self._lock:
            self.metric_calls += 1
            self.metric_raised += bool(raised)
        self._refresh()

    def on_lm_call(self, failed: bool) -> None:
        """One LM call finished (cache hits included)."""
        with self._lock:
            self.calls += 1
            self.failed_calls += bool(failed)
        self._refresh()

    def on_lm_usage(self, input_tokens: int, output_tokens: int) -> None:
        """One LM call reported its tokens."""
        with self._lock:
            self.tokens += int(input_tokens) + int(output_tokens)
        self._refresh()

    def counts(self) -> str:
        with self._lock:
            return (f"{self.phase}, {self.metric_calls} metric calls ({self.metric_raised} raised), {self.calls} LM "
                    f"calls ({self.failed_calls} failed), {self.tokens:,} tokens")
