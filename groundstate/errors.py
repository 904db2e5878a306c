"""Exceptions that the CLI turns into one clear line and exit status 2.

Every error a user can fix (a bad file, a bad record, an unknown LM spec, a missing model file) is a
:class:`GroundstateError`. Its message is the whole story: what is wrong, where (file, record, field) and,
where it helps, how to fix it. Anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


class GroundstateError(Exception):
    """Base class for errors the user can fix; the CLI prints ``str(err)`` and exits 2."""

    exit_code = 2


class InputError(GroundstateError, ValueError):
    """Bad input data: names the file, the record and the field when they are known."""

    def __init__(self, message: str, *, file: str | None = None, record: str | int | None = None,
                 field: str | None = None):
        self.file, self.record, self.field = file, record, field
        where = []
        if file is not None:
            where.append(str(file))
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class LMSetupError(GroundstateError):
    """An LM cannot be built: unknown spec, missing model file, unreadable LM config."""


class ConfigError(GroundstateError):
    """A bad option or combination of options (unknown metric, zero budget, ...)."""
