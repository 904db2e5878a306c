"""The argparse types of every number the command line takes, each with its range checked when it is parsed.

A number outside its range (``--alpha 1.5``, ``--threads 0``, ``--temperature -1``, ``--seed -3``, ``--q nan``)
is an argparse error: one line naming the option and what it expects, exit status 2, before any file is read or
any work starts. ``tests/cli/test_grammar.py`` checks that no command has a plain ``int`` or ``float`` option.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any


def bounded(kind: type, low: float | None, high: float | None, what: str, *, open_low: bool = False,
            open_high: bool = False) -> Callable[[str], Any]:
    """An argparse type: a ``kind`` number from ``low`` to ``high`` (``None``: no bound; ``open_low``/``open_high``:
    the bound itself is excluded); ``what`` names the expected value in the one-line error. NaN and infinities
    are never accepted."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)) \
                or (low is not None and (value <= low if open_low else value < low)) \
                or (high is not None and (value >= high if open_high else value > high)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = f"bounded_{kind.__name__}"
    parse.bounds = (low, high)  # what the grammar test reads: this type checks a range
    return parse


positive_int = bounded(int, 1, None, "a whole number of at least 1")
count = bounded(int, 0, None, "a whole number of at least 0")
seed = bounded(int, 0, None, "a seed: a whole number of at least 0")
share = bounded(float, 0.0, 1.0, "a share from 0 to 1")
temperature = bounded(float, 0.0, 2.0, "a temperature from 0 to 2")
level = bounded(float, 0.0, 1.0, "a level strictly between 0 and 1", open_low=True, open_high=True)
nonnegative = bounded(float, 0.0, None, "a number of at least 0")
positive = bounded(float, 0.0, None, "a number above 0", open_low=True)
