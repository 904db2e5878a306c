"""Reading a final answer's value: numbers (with hedges, ranges, restatements and percents), option letters, text.

What the rules evaluator (:mod:`groundstate.programs.dhd.evaluator`) compares with the gold answer. A text with
``\\boxed{...}`` is read from its last boxed span only (the authors' extraction).

**The final stated value is the answer** (:func:`read_number`). A number answer is cut at its last restatement
marker (*i.e.*, *that is*, *which is*, *namely*, *equivalently*, *therefore*, *thus*, *hence*, *so*) and only what
follows is read: ``2 moles, i.e. 0.123`` reads 0.123, and so does ``2 mol of gas; therefore 0.123 M``. What
remains is split into alternatives at ``or``, ``and``, ``either``, ``vs``, ``;`` and a comma followed by a space;
each alternative states one value, the first number after its last ``=`` (or ``\\approx``), so
``v = 3 \\times 4 = 12 m/s`` reads 12. Precision notes (``to 3 significant figures``) are dropped first. A
restatement in another unit (``0.123 m, i.e. 12.3 cm``) therefore reads the restated number: the rules cannot
convert units (the judge can).

**Hedges** (:attr:`NumberReading.hedge`): a *range* is a hedge whatever its width (``approximately 0.12-0.13``,
``0.12 to 0.13``, ``0.12 m - 0.13 m``, ``between 0.12 and 0.13``, ``from 3 to 5``), and so are alternatives whose
values differ by more than the problem's tolerance (``0.123 or 0.246``, ``x = 2 or x = 3``); ``42 or 42.0`` and
``0.123 or 12.3%`` are one value stated twice. A value with its uncertainty (``2.5 ± 0.1``) is not a range.

**Percents** compare with fractions: a value written with ``%`` (``\\%``, *percent*) may be read as that many
hundredths (``12.5%`` matches a gold 0.125 and a gold 12.5), and when the gold answer is a percentage (its unit or
its text has ``%``) a bare fraction may be read as that many percent (``0.125`` matches a gold 12.5 %).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_NUMBER = re.compile(
    r"(?<![A-Za-z_\d.])"                                    # not glued to a word (C2H6) or another number
    r"(?P<mant>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[+-]?\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+(?:\.\d+)?)(?![\d.]))?"          # a simple fraction 3/2
    r"(?:\s*[eE]\s*(?P<e>[+-]?\d+))?"                        # 1.2e-3
    r"(?:\s*x\s*10\s*\^\s*\(?\s*(?P<p>[+-]?\d+)\s*\)?)?"     # 1.2 x 10^-3
)
_POWER_ONLY = re.compile(r"(?<![A-Za-z_\d.])(?P<s>[+-]?)10\s*\^\s*\(?\s*(?P<p>[+-]?\d+)\s*\)?")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]+?)\s*\}\s*\{\s*([^{}]+?)\s*\}")
_OPTION_WORDS = re.compile(r"\b(options?|choices?|answers?|and|or|either|the|is|are|correct|both|final)\b", re.I)
_ALTERNATIVE = re.compile(r"\b(?:or|and|either|versus|vs)\b\.?|;|,\s+", re.I)
_RESTATED = re.compile(r"\bi\.\s*e\.|\b(?:that is|which is|namely|equivalently|therefore|thus|hence)\b|\bso\b(?!-)",
                       re.I)
_PRECISION = re.compile(r"[(\[]?\s*(?:(?:correct|rounded|accurate)\s+)?(?:to\s+|with\s+)?\d+\s*"
                        r"(?:significant\s+(?:figures?|digits?)|sig\.?\s*figs?\.?|s\.\s*f\.|d\.\s*p\.|"
                        r"decimal\s+places?)\s*[)\]]?", re.I)
_VALUE = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_RANGE = re.compile(rf"(?<![\w.^]){_VALUE}(?:\s*%|\s+[A-Za-zµμ°]{{1,5}}(?:/[A-Za-z]{{1,5}})?)?\s*(?:-|–|—|\bto\b)\s*"
                    rf"{_VALUE}")
_BETWEEN = re.compile(rf"\bbetween\b[^;]*?{_VALUE}[^;]*?\band\b\s*{_VALUE}", re.I)
_PERCENT = re.compile(r"\s*(?:%|percent\b|per\s*cent\b)", re.I)


def parse_plain_number(text: Any) -> float | None:
    """``float(text)`` for a plain decimal or scientific number (``+65.49``, ``1e-3``, ``1,250``); else ``None``."""
    if isinstance(text, bool) or text is None:
        return None
    if isinstance(text, int | float):
        return float(text) if math.isfinite(float(text)) else None
    stripped = str(text).strip().replace(",", "")
    if not _PLAIN_NUMBER.match(stripped):
        return None
    value = float(stripped)
    return value if math.isfinite(value) else None


def boxed(text: str) -> str:
    """The content of the last ``\\boxed{...}`` (balanced braces), or the text itself."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return text
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    return text[i + 1:]


def clean_math(text: str) -> str:
    """The last boxed span (or the text) with LaTeX and Unicode math written as plain text (``x 10^-3``, ``3/2``)."""
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^" + m.group().translate(_SUPERSCRIPTS), boxed(str(text)))
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("$", " ").replace("\\%", "%")
    for token in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "~", "{,}"):
        text = text.replace(token, "" if token in ("\\left", "\\right", "{,}") else " ")
    text = re.sub(r"\\(?:times|cdot)|[×·*]", " x ", text)
    text = _FRAC.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", text)
    text = re.sub(r"\^\s*\{\s*([+-]?\s*\d+)\s*\}", lambda m: "^" + m.group(1).replace(" ", ""), text)
    return text


def _first(text: str) -> tuple[float, bool] | None:
    """``(value, written as a percent)`` of the first number not glued to a word (the ``2`` of ``C2H6`` is not)."""
    best: tuple[int, int, float] | None = None  # start, end, value
    match = _NUMBER.search(text)
    if match:
        try:
            value = float(match.group("mant").replace(",", ""))
            if match.group("den"):
                den = float(match.group("den"))
                value = value / den if den else math.nan
            if match.group("e"):
                value *= 10.0 ** int(match.group("e"))
            if match.group("p"):
                value *= 10.0 ** int(match.group("p"))
            best = (match.start(), match.end(), value)
        except (ValueError, OverflowError):
            best = None
    power = _POWER_ONLY.search(text)
    if power and (best is None or power.start() <= best[0]):
        try:
            sign = -1.0 if power.group("s") == "-" else 1.0
            best = (power.start(), power.end(), sign * 10.0 ** int(power.group("p")))
        except OverflowError:
            pass
    if best is None or not math.isfinite(best[2]):
        return None
    return best[2], bool(_PERCENT.match(text, best[1]))


def _after_equals(text: str) -> str:
    parts = re.split(r"=|\\approx|≈", text)
    return parts[-1] if parts[-1].strip() else text


def extract_number(text: Any) -> float | None:
    """The number a short final answer states first, or ``None`` (see :func:`read_number` for the final value).

    Handles signs, thousands separators, decimals, ``1.2e-3``, ``1.2 x 10^-3``, ``3.2 \\times 10^{-3}``,
    ``10^{5}``, Unicode superscripts, simple fractions (``3/2``, ``\\frac{3}{2}``) and ``\\boxed{}``. When the
    text has ``=`` (or ``\\approx``) only what follows the last one is read.
    """
    if text is None:
        return None
    found = _first(_after_equals(clean_math(text)))
    return None if found is None else found[0]


@dataclass(frozen=True)
class NumberReading:
    """What a number answer states (see the module notes).

    Attributes:
        values: ``(value, written as a percent)`` per alternative of the final statement, in order.
        hedge: ``"range"`` when the final statement gives a range, else ``None`` (alternatives that disagree are
            judged against the problem's tolerance by the evaluator).
        text: the final statement that was read.
    """

    values: list[tuple[float, bool]] = field(default_factory=list)
    hedge: str | None = None
    text: str = ""


def read_number(text: Any) -> NumberReading:
    """The final stated value(s) of a number answer, and whether it is a range (module notes)."""
    if text is None:
        return NumberReading()
    cleaned = _PRECISION.sub(" ", clean_math(text))
    cut = list(_RESTATED.finditer(cleaned))
    if cut and _first(cleaned[cut[-1].end():]) is not None:
        cleaned = cleaned[cut[-1].end():]
    values = []
    ranged = bool(_BETWEEN.search(cleaned))
    for alternative in _ALTERNATIVE.split(cleaned):
        final = _after_equals(alternative) if alternative.strip() else ""
        ranged = ranged or bool(_RANGE.search(final))
        found = _first(final) if final else None
        if found is not None:
            values.append(found)
    return NumberReading(values=values, hedge="range" if ranged else None, text=cleaned.strip())


def number_candidates(text: Any) -> list[float]:
    """Every value a final answer states, one per alternative of its final statement (module notes).

    ``"0.123 or 0.246"`` -> ``[0.123, 0.246]``; ``"x = 2 or x = 3"`` -> ``[2, 3]``; ``"4.2 m/s^2"`` -> ``[4.2]``;
    ``"2 moles, i.e. 0.123"`` -> ``[0.123]``; ``"12.5%"`` -> ``[12.5]``; no number -> ``[]``.
    """
    return [value for value, _ in read_number(text).values]


def is_percent(text: Any) -> bool:
    """Whether a gold answer or a unit is a percentage (``%``, ``\\%``, *percent*)."""
    return bool(text) and bool(re.search(r"%|\bper\s*cent\b", str(text), re.I))


def unit_scale(unit: str | None) -> float | None:
    """The power of ten a unit starts with (``$10^{-19} \\mathrm{~J}$`` -> 1e-19), or ``None``."""
    if not unit:
        return None
    match = re.match(r"^\s*\$?\s*\\?\(?\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?", unit)
    return 10.0 ** int(match.group(1)) if match else None


def numbers_match(candidate: float, gold: float, tolerance: float = 0.05, abs_tolerance: float | None = None,
                  scale: float | None = None) -> bool:
    """Whether ``candidate`` equals ``gold`` within the relative ``tolerance`` or ``abs_tolerance``.

    With ``scale`` (the unit's power of ten), ``candidate / scale`` is accepted too.
    """
    allowed = max(tolerance * abs(gold), abs_tolerance or 0.0, 1e-12)
    values = [candidate] + ([candidate / scale] if scale else [])
    return any(abs(v - gold) <= allowed for v in values)


def readings(value: float, percent: bool, gold_percent: bool = False) -> list[float]:
    """The values one stated number may stand for: itself; as hundredths when written as a percent; as a percent
    when the gold answer is one and the number is written bare (module notes)."""
    out = [value]
    if percent:
        out.append(value / 100)
    elif gold_percent:
        out.append(value * 100)
    return out


def option_letters(text: Any, allowed: str = "ABCD") -> set[str] | None:
    """The option letters a short answer chooses (``B``, ``(b)``, ``Options A and C``, ``ACD``); ``None`` if none.

    A lone capital ``A`` followed by a lower-case word (other than ``or``, ``and``, ``is``...) is read as the
    article, not an option.
    """
    if text is None:
        return None
    body = boxed(str(text)).replace("$", " ").replace("\\text", " ")
    letters = "".join(allowed)
    stripped = re.sub(r"[\s(){}\[\],;:&+./-]", "", _OPTION_WORDS.sub(" ", body))
    if stripped and re.fullmatch(f"[{letters}{letters.lower()}]+", stripped):
        return set(stripped.upper())
    found = set(re.findall(rf"\(([{letters}{letters.lower()}])\)", body))
    if found:
        return {c.upper() for c in found}
    tokens = set()
    for match in re.finditer(rf"(?<![A-Za-z])([{letters}])(?![A-Za-z])", body):
        word = re.match(r"\s+([a-z]+)", body[match.end():])
        if match.group(1) == "A" and word and not _OPTION_WORDS.fullmatch(word.group(1)):
            continue  # "A sensible choice is C": the article; "A or C" keeps both letters
        tokens.add(match.group(1))
    return tokens or None


def normalize_answer(text: Any) -> str:
    """Lower case, without spaces, ``$``, ``\\boxed{}``, ``\\text{}``/``\\mathrm{}`` wrappers and a final period."""
    if text is None:
        return ""
    out = boxed(str(text))
    out = re.sub(r"\\(?:text|mathrm|textbf|mathbf)\s*\{([^{}]*)\}", r"\1", out)
    out = out.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    out = re.sub(r"[\s$~]|\\[,;:! ]", "", out).lower()
    return out.rstrip(".")
