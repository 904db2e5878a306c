"""The paper's numbers in the shipped specs are the paper's (issue 24, item 4): every reference's quote occurs in the
paper's text (``../shared/papers/``, beside the repository) and holds each of its values as the paper prints it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from groundstate import experiments
from groundstate.eval.experiments.load import load_spec
from tests.eval.experiments.test_spec import placeholder_inputs

PAPER_FILES = {"reground": "000_9fd50a72e9adc048.txt", "dhd": "001_fc999c1b8bdfe61b.txt",
               "consilience": "002_201647806a734994.txt"}

#: A number as a paper prints it: a sign (ASCII or the minus sign), digits with thousands commas, decimals, and
#: a K (thousands) suffix.
NUMBER = re.compile(r"([-\u2212]?)\s*((?<!\[)\d{1,3}(?:,\d{3})+(?!\d)|\d+)(\.\d+)?(K?)")
NONE = re.compile(r"\bnone\b", re.IGNORECASE)


def papers_dir() -> Path | None:
    """``shared/papers`` beside the repository (or beside one of its parents: a worktree's layout)."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "papers"
        if (candidate / PAPER_FILES["reground"]).is_file():
            return candidate
    return None


def squash(text: str) -> str:
    return " ".join(text.split())


def printed(quote: str) -> list[tuple[float, int, bool]]:
    """Every number of ``quote``: ``(value, decimals, thousands)``; the word "none" prints a count of 0 (a caption
    that "retains none")."""
    out = []
    for sign, whole, decimals, kilo in NUMBER.findall(quote):
        number = float(whole.replace(",", "") + (decimals or ""))
        out.append((-number if sign else number, max(0, len(decimals) - 1), bool(kilo)))
    out += [(0.0, 0, False)] * len(NONE.findall(quote))
    return out


def holds(quote: str, value: float) -> bool:
    """Whether the quote prints ``value``: as it is, as a percentage (x100), or in thousands (``19.4K``), rounded
    to the printed decimals."""
    for number, decimals, kilo in printed(quote):
        candidates = [value / 1000] if kilo else [value, value * 100]
        if any(abs(round(c, decimals) - number) < 1e-9 for c in candidates):
            return True
    return False


def test_the_number_reader_reads_what_papers_print():
    assert holds("86.2% on T3", 0.862) and not holds("86.2% on T3", 0.861)
    assert holds("| 0.2537 | 0.2475 |", 0.2475) and holds("19.4K, 20.2K", 20200)
    assert holds("$-6.35\\;[-11.56,-2.00]$", -6.35) and holds("| OSS | Omni-MATH-2 | 4,181 |", 4181)
    assert not holds("−1.5", 1.5) and holds("−1.5", -1.5)
    assert holds("BY retains none.", 0) and not holds("BY retains none.", 1) and not holds("BY retains one.", 0)


PAPERS = papers_dir()
SPECS = [(name, i) for name in experiments.names()
         for i, _ in enumerate(load_spec(name, placeholder_inputs(name)).reference)]


@pytest.mark.skipif(PAPERS is None, reason="the papers are not beside the repository (../shared/papers): the "
                                           "reference check needs their text")
@pytest.mark.parametrize("name, index", SPECS, ids=[f"{n}[{i}]" for n, i in SPECS])
def test_every_reference_is_in_the_paper(name, index):
    spec = load_spec(name, placeholder_inputs(name))
    reference = spec.reference[index]
    assert spec.experiment.paper in PAPER_FILES, f"{name}: references need the paper they come from"
    text = squash((PAPERS / PAPER_FILES[spec.experiment.paper]).read_text(encoding="utf-8"))
    assert squash(reference.quote) in text, f"{name} reference[{index}]: the quote is not in the paper's text"
    for metric, value in reference.items():
        assert holds(reference.quote, value), f"{name} reference[{index}] {metric}: {value} is not in the quote"


def test_every_shipped_spec_has_references_or_says_why():
    for name in experiments.names():
        spec = load_spec(name, placeholder_inputs(name))
        if not spec.reference:
            assert "not in the available text" in (spec.experiment.note or ""), name
