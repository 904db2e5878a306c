"""Shared helpers for tests."""

from __future__ import annotations

from pathlib import Path

import dspy

from groundstate.testing import scripted_lm

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
"""The test data files (``tests/data``), wherever a test module lives."""
ROOT = TESTS.parent
"""The repository root."""


def qa_records(n: int, fail: set[int] = frozenset()) -> list[dict]:
    return [{"id": f"r{i:03d}", "question": f"{'FAIL ' if i in fail else ''}question number {i}", "answer": str(i)}
            for i in range(n)]


def echo_number_lm(**kwargs):
    """Answers 'question number N' with N (so exact match is 1); raises on questions containing FAIL."""

    def respond(req):
        text = req.user
        if "FAIL" in text:
            return RuntimeError("scripted LM failure")
        number = text.split("question number")[-1].split()[0].strip()
        return {"answer": number}

    return scripted_lm(respond, **kwargs)


def qa_score(record, prediction):
    if prediction is None:
        return {"exact_match": 0.0}
    return {"exact_match": float(str(prediction.answer).strip() == record["answer"])}


def json_adapter():
    return dspy.JSONAdapter()


def table_row(out: str, first: str) -> list[str]:
    """The cells of the rich table row of a command's terminal output whose first cell is ``first``."""
    line = next(line for line in out.splitlines() if line.startswith(f"│ {first} "))
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def is_rich_table(out: str) -> bool:
    """Whether ``out`` holds a rich table (box characters) and no Markdown table rule."""
    return "┏" in out and "│" in out and "|---" not in out
