"""The durable runner's progress bar (rich): done/total, ETA, running error count and tokens."""

from __future__ import annotations


class RunProgress:
    """A rich progress bar with ETA, running error count and tokens (a no-op when disabled)."""

    def __init__(self, description: str, total: int, done: int, enabled: bool):
        self.enabled, self.total, self.done = enabled, total, done
        self.description = description
        self._bar = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("errors {task.fields[errors]}  tokens {task.fields[tokens]}"),
                                 transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total, completed=self.done,
                                            errors=0, tokens=0)
        return self

    def advance(self, errors: int, tokens: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=1, errors=errors, tokens=tokens)

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
        return False
