"""Running Consilience and the reference protocols on held-out hidden-profile tasks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groundstate.programs.consilience.consilience import Consilience
from groundstate.records import HiddenProfileTask


def run_tasks(program: Consilience, tasks: Sequence[HiddenProfileTask]) -> list[Any]:
    return [program(task=task) for task in tasks]
