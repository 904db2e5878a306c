"""Deterministic, rule-based corruption of one atomic clinical fact.

:func:`corrupt_fact` turns a true statement into a plausible false one with one of four strategies:

``numeric``
    A measurement is moved out of its clinical band: an abnormal value becomes normal and a normal value
    becomes low or high (temperature 39.2 °C -> 36.4 °C, heart rate 120 -> 71, 75 -> 130; blood pressure,
    respiratory rate, oxygen saturation), another measured quantity (``3-mm``, ``1%``,
    ``16,500 per mm3``) is scaled by a factor of 0.3-0.4 or 2.5-3, or a duration gets a new number and unit
    (``10 days`` -> ``3 months``). Ages (``22-year-old``, ``38 years old``, ``3 days old``, ``aged 40``, ``in
    his 20s``) are never touched.
``negation``
    One polarity cue is flipped: ``denied fever`` -> ``reported fever``, ``reports`` -> ``denies``, ``no X`` /
    ``there are no X`` / ``does not`` -> affirmative, ``has no history`` -> ``has a history``, ``without`` ->
    ``with``, ``nontender`` <-> ``tender``, ``painless`` <-> ``painful``, ``negative`` <-> ``positive``,
    ``normal`` <-> ``abnormal``, ``absent`` <-> ``present``, ``non-X`` -> ``X``, ``lacks`` -> ``shows``.
``laterality``
    Every ``left`` <-> ``right`` (the side, not the verb or "right away"), ``bilateral`` <-> ``unilateral``.
``timing``
    One timing cue is swapped: ``acute`` <-> ``chronic``, ``sudden`` <-> ``gradual``, ``rapid`` <-> ``slow``,
    ``morning`` <-> ``evening``, ``intermittent`` <-> ``constant``, ``before`` <-> ``after``, or a duration's
    unit (``2 days`` <-> ``2 years``, ``weeks`` <-> ``months``, ``hours`` <-> ``months``), keeping its number.

The strategies that apply to a text are found without randomness (:func:`applicable_strategies`); the ``rng``
picks one of them and, inside it, the site and the new values, so the same ``rng`` state gives the same
result. The result always differs from the input; ``None`` means no strategy applies.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

STRATEGIES: tuple[str, ...] = ("numeric", "negation", "laterality", "timing")


@dataclass(frozen=True)
class Corruption:
    """One corrupted fact: the original text, the corrupted text and the strategy that made it."""

    original: str
    corrupted: str
    strategy: str

    def as_dict(self) -> dict[str, str]:
        return {"original": self.original, "corrupted": self.corrupted, "strategy": self.strategy}


# -- ages: spans that no strategy may change -------------------------------------------------------------
_AGE = re.compile(
    r"\b\d+(?:\.\d+)?[- ](?:year|month|week|day)s?[- ]old\b"
    r"|\b\d+\s+(?:years?|months?|weeks?|days?)\s+of\s+age\b"
    r"|\baged?\s+\d+\b"
    r"|\b(?:in|since)\s+(?:his|her|their)\s+(?:early\s+|mid-?\s*|late\s+)?\d0s\b",
    re.IGNORECASE,
)


def _age_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _AGE.finditer(text)]


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


@dataclass(frozen=True)
class _Site:
    """A replacement of ``text[start:end]``; ``make(rng)`` gives the new text for that span."""

    start: int
    end: int
    make: Callable[[random.Random], str]


def _article_for(word: str, article: str) -> str:
    vowel = bool(re.match(r"[aeio]|u(?!ni|s[eu]|re)", word, re.IGNORECASE))
    wanted = "an" if vowel else "a"
    return _match_case(article, wanted)


def _apply(text: str, site: _Site, rng: random.Random) -> str:
    new = site.make(rng)
    prefix = text[:site.start]
    article = re.search(r"\b(an?)\s+$", prefix, re.IGNORECASE)
    if article and new.strip():
        prefix = prefix[:article.start(1)] + _article_for(new.strip(), article.group(1)) + prefix[article.end(1):]
    out = prefix + new + text[site.end:]
    out = re.sub(r"\s{2,}", " ", out).strip()
    if site.start == 0 and out:
        out = out[0].upper() + out[1:]
    return out


def _match_case(old: str, new: str) -> str:
    if old[:1].isupper() and new:
        return new[0].upper() + new[1:]
    return new


def _non_overlapping(sites: list[_Site]) -> list[_Site]:
    """Keep the first-listed site among overlapping ones (specific patterns are listed first)."""
    kept: list[_Site] = []
    for site in sites:
        if not _overlaps((site.start, site.end), [(s.start, s.end) for s in kept]):
            kept.append(site)
    return sorted(kept, key=lambda s: (s.start, s.end))


# -- numeric ---------------------------------------------------------------------------------------------
_NUM = r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?"


@dataclass(frozen=True)
class _Measure:
    name: str
    pattern: re.Pattern
    bands: tuple[tuple[float, float], ...]
    decimals: int


_MEASURES: tuple[_Measure, ...] = (
    _Measure("temperature_c", re.compile(
        r"(?P<v>\d{2}(?:\.\d+)?)\s*(?:°\s*C\b|degrees?\s+(?:C\b|Celsius))"
        r"|temperature(?:\s+(?:of|was|is|was measured at))?:?\s+(?P<v2>(?:3\d|4[0-3])(?:\.\d+)?)\b(?!\s*°?\s*F)",
        re.IGNORECASE), ((34.5, 35.5), (36.1, 37.0), (38.6, 40.2)), 1),
    _Measure("temperature_f", re.compile(
        r"(?P<v>\d{2,3}(?:\.\d+)?)\s*(?:°\s*F\b|degrees?\s+(?:F\b|Fahrenheit))"
        r"|temperature(?:\s+(?:of|was|is|was measured at))?:?\s+(?P<v2>(?:9\d|10\d|110)(?:\.\d+)?)\b",
        re.IGNORECASE), ((93.0, 95.0), (97.2, 98.8), (101.5, 104.0)), 1),
    _Measure("heart_rate", re.compile(
        r"(?:heart rate|pulse(?: rate)?)(?:\s+(?:of|was|is))?:?\s+(?P<v>\d{2,3})\b"
        r"|(?P<v2>\d{2,3})\s*(?:beats per minute|beats/min|bpm)\b", re.IGNORECASE),
        ((38.0, 52.0), (64.0, 88.0), (112.0, 145.0)), 0),
    _Measure("respiratory_rate", re.compile(
        r"(?:respiratory rate|respirations)(?:\s+(?:of|was|is))?:?\s+(?P<v>\d{1,2})\b"
        r"|(?P<v2>\d{1,2})\s*breaths\b", re.IGNORECASE), ((6.0, 9.0), (12.0, 18.0), (26.0, 34.0)), 0),
    _Measure("oxygen_saturation", re.compile(
        r"(?:saturation|SpO2|O2 sat\w*|pulse oximetry)[^0-9%]{0,25}(?P<v>\d{2,3})\s*%", re.IGNORECASE),
        ((78.0, 87.0), (96.0, 99.0)), 0),
)
_BLOOD_PRESSURE = re.compile(r"(?P<s>\d{2,3})\s*/\s*(?P<d>\d{2,3})\s*mm\s*Hg", re.IGNORECASE)
_BP_BANDS = (((74, 86), (40, 52)), ((108, 124), (66, 80)), ((162, 190), (98, 116)))
_QUANTITY = re.compile(
    rf"(?P<v>{_NUM})(?P<sep>\s*|-)(?P<unit>%|mg/dL|g/dL|mmol/L|mEq/L|U/L|IU/L|ng/mL|pg/mL|µg/dL|ug/dL|"
    r"(?:cells\s*)?/\s*(?:mm3|µL|uL|mm\^3)|per\s+(?:mm3|µL|uL|microliter)|mg|g|kg|lb|lbs|mm|cm|mL|L)(?![\w/])",
)
_WORD_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_DURATION = re.compile(
    r"\b(?P<n>\d+(?:\.\d+)?|a few|several|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"(?P<sep>[- ])(?P<unit>hour|day|week|month|year)(?P<pl>s?)\b",
    re.IGNORECASE,
)
_UNITS = ("hour", "day", "week", "month", "year")


def _format_number(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}" if decimals else str(int(round(value)))


def _parse_number(text: str) -> float:
    return float(text.replace(",", ""))


def _band_of(value: float, bands: tuple[tuple[float, float], ...]) -> int:
    distances = [0.0 if lo <= value <= hi else min(abs(value - lo), abs(value - hi)) for lo, hi in bands]
    return distances.index(min(distances))


def _other_band(current: int, n_bands: int, rng: random.Random) -> int:
    """Band 1 is the normal range: an abnormal value becomes normal; a normal one becomes low or high."""
    if current != 1:
        return 1
    return rng.choice([i for i in range(n_bands) if i != 1])


def _measure_sites(text: str, ages: list[tuple[int, int]]) -> list[_Site]:
    sites: list[_Site] = []
    for measure in _MEASURES:
        for match in measure.pattern.finditer(text):
            group = "v" if match.group("v") is not None else "v2"
            start, end = match.span(group)
            if _overlaps((start, end), ages):
                continue
            old = match.group(group)

            def make(rng: random.Random, old: str = old, measure: _Measure = measure) -> str:
                value = _parse_number(old)
                band = _other_band(_band_of(value, measure.bands), len(measure.bands), rng)
                decimals = max(measure.decimals, len(old.split(".")[1]) if "." in old else 0)
                new = _format_number(rng.uniform(*measure.bands[band]), decimals)
                return new if new != old else _format_number(measure.bands[band][0], decimals)

            sites.append(_Site(start, end, make))
    for match in _BLOOD_PRESSURE.finditer(text):
        start, end = match.span("s")[0], match.span("d")[1]

        def make_bp(rng: random.Random, match: re.Match = match) -> str:
            systolic = int(match.group("s"))
            band = _other_band(_band_of(float(systolic), tuple(b[0] for b in _BP_BANDS)), len(_BP_BANDS), rng)
            (s_lo, s_hi), (d_lo, d_hi) = _BP_BANDS[band]
            return f"{rng.randint(s_lo, s_hi)}/{rng.randint(d_lo, d_hi)}"

        sites.append(_Site(start, end, make_bp))
    return sites


def _quantity_sites(text: str, ages: list[tuple[int, int]]) -> list[_Site]:
    sites: list[_Site] = []
    for match in _QUANTITY.finditer(text):
        start, end = match.span("v")
        if _overlaps((start, end), ages):
            continue
        old = match.group("v")

        def make(rng: random.Random, old: str = old) -> str:
            value = _parse_number(old)
            factor = rng.choice((0.3, 0.4, 2.5, 3.0))
            decimals = len(old.split(".")[1]) if "." in old else 0
            new_value = value * factor
            if decimals == 0 and new_value < 1:
                decimals = 1
            new = _format_number(new_value, decimals)
            if "," in old and decimals == 0:
                new = f"{int(round(new_value)):,}"
            return new if new != old else _format_number(value * 3.0 + 1, decimals)

        sites.append(_Site(start, end, make))
    return sites


def _duration_sites(text: str, ages: list[tuple[int, int]], keep_number: bool) -> list[_Site]:
    sites: list[_Site] = []
    for match in _DURATION.finditer(text):
        if _overlaps(match.span(), ages):
            continue
        number, sep, unit = match.group("n"), match.group("sep"), match.group("unit").lower()
        if keep_number:
            swap = {"day": "year", "year": "day", "week": "month", "month": "week", "hour": "month"}[unit]
            start, end = match.span("unit")[0], match.span("pl")[1]

            def make_swap(rng: random.Random, swap: str = swap, pl: str = match.group("pl")) -> str:
                return swap + pl

            sites.append(_Site(start, end, make_swap))
        elif number.lower() not in ("a", "an"):  # "once a week" is a frequency, not a duration

            def make_new(rng: random.Random, number: str = number, sep: str = sep, unit: str = unit,
                         whole: str = match.group(0)) -> str:
                new_unit = rng.choice([u for u in _UNITS if u not in (unit, "hour")])
                count = rng.randint(2, 11)
                text_unit = new_unit + ("s" if sep == " " else "")
                return _match_case(whole, f"{count}{sep}{text_unit}")

            sites.append(_Site(match.start(), match.end(), make_new))
    return sites


def _numeric_sites(text: str) -> list[_Site]:
    ages = _age_spans(text)
    sites = _measure_sites(text, ages) + _quantity_sites(text, ages) + _duration_sites(text, ages, keep_number=False)
    return _non_overlapping(sites)


# -- negation --------------------------------------------------------------------------------------------
def _fixed(replacement: str) -> Callable[[re.Match], Callable[[random.Random], str]]:
    return lambda match: (lambda rng: _match_case(match.group(0), replacement))


def _drop_negation(match: re.Match) -> Callable[[random.Random], str]:
    """Keep group 1 (and the words in group 2, if any); drop the negation and a following ``any``."""
    kept = match.group(1) + (match.groupdict().get("w") or "")
    return lambda rng: kept


_DENY = {"denies": "reports", "denied": "reported", "deny": "report", "denying": "reporting"}
_NEGATIONS: tuple[tuple[re.Pattern, Callable[[re.Match], Callable[[random.Random], str]]], ...] = (
    (re.compile(r"\b(denies|denied|deny|denying)\b(?:(?P<w>(?:\s+\w+){0,2}?)\s+any\b)?", re.IGNORECASE),
     lambda m: (lambda rng: _match_case(m.group(1), _DENY[m.group(1).lower()]) + (m.group("w") or ""))),
    (re.compile(r"\breports\b", re.IGNORECASE), _fixed("denies")),
    (re.compile(r"\breported\b", re.IGNORECASE), _fixed("denied")),
    (re.compile(r"\bcomplains of\b", re.IGNORECASE), _fixed("denies")),
    (re.compile(r"\bcomplained of\b", re.IGNORECASE), _fixed("denied")),
    (re.compile(r"\b(has|had|have)\s+no\s+(?=(?:history|significant|relevant|known|prior|previous|personal|family)\b)",
                re.IGNORECASE), lambda m: (lambda rng: f"{m.group(1)} a ")),
    (re.compile(r"\b(there\s+(?:is|are|was|were))\s+no\b", re.IGNORECASE), _drop_negation),
    (re.compile(r"\b(does|did|do|is|was|were|are|has|have|had|can|could|will|would)\s+not\b"
                r"(?:(?P<w>(?:\s+\w+){0,2}?)\s+any\b)?", re.IGNORECASE), _drop_negation),
    (re.compile(r"\b(does|did|do|is|was|were|are|has|have|had|could|would)n't\b(?:(?P<w>(?:\s+\w+){0,2}?)\s+any\b)?",
                re.IGNORECASE), _drop_negation),
    (re.compile(r"\bcannot\b", re.IGNORECASE), _fixed("can")),
    (re.compile(r"\bnon-?tender\b", re.IGNORECASE), _fixed("tender")),
    (re.compile(r"\btender\b", re.IGNORECASE), _fixed("nontender")),
    (re.compile(r"\bpainless\b", re.IGNORECASE), _fixed("painful")),
    (re.compile(r"\bpainful\b", re.IGNORECASE), _fixed("painless")),
    (re.compile(r"\basymptomatic\b", re.IGNORECASE), _fixed("symptomatic")),
    (re.compile(r"\bsymptomatic\b", re.IGNORECASE), _fixed("asymptomatic")),
    (re.compile(r"\bafebrile\b", re.IGNORECASE), _fixed("febrile")),
    (re.compile(r"\bfebrile\b", re.IGNORECASE), _fixed("afebrile")),
    (re.compile(r"\bnegative\b", re.IGNORECASE), _fixed("positive")),
    (re.compile(r"\bpositive\b", re.IGNORECASE), _fixed("negative")),
    (re.compile(r"\bwithin normal limits\b", re.IGNORECASE), _fixed("outside normal limits")),
    (re.compile(r"\bunremarkable\b", re.IGNORECASE), _fixed("abnormal")),
    (re.compile(r"\babnormal\b", re.IGNORECASE), _fixed("normal")),
    (re.compile(r"\bnormal\b", re.IGNORECASE), _fixed("abnormal")),
    (re.compile(r"\babsent\b", re.IGNORECASE), _fixed("present")),
    (re.compile(r"\bwithout\b", re.IGNORECASE), _fixed("with")),
    (re.compile(r"\black\b", re.IGNORECASE), _fixed("show")),
    (re.compile(r"\blacks\b", re.IGNORECASE), _fixed("shows")),
    (re.compile(r"\blacked\b", re.IGNORECASE), _fixed("showed")),
    (re.compile(r"\bnon-(?=[a-z])", re.IGNORECASE), _fixed("")),
    (re.compile(r"\bno\s+(?!longer\b|more than\b|less than\b|one\b)", re.IGNORECASE), _fixed("")),
)


def _negation_sites(text: str) -> list[_Site]:
    sites = [_Site(*match.span(), make(match)) for pattern, make in _NEGATIONS for match in pattern.finditer(text)]
    return _non_overlapping(sites)


# -- laterality ------------------------------------------------------------------------------------------
_SIDE = re.compile(r"\b(left|right|bilateral|unilateral|bilaterally|unilaterally)\b", re.IGNORECASE)
_SIDE_SWAP = {"left": "right", "right": "left", "bilateral": "unilateral", "unilateral": "bilateral",
              "bilaterally": "unilaterally", "unilaterally": "bilaterally"}
_NOT_A_SIDE_AFTER = re.compile(
    r"\s+(?:away|now|after|before|here|there|the|home|work|school|untreated|alone|behind|over|him|her|them|it)\b",
    re.IGNORECASE)
_NOT_A_SIDE_BEFORE = re.compile(r"\b(?:he|she|they|patient|was|were|is|are|been|had|has|have|all)\s+$", re.IGNORECASE)


def _side_matches(text: str) -> list[re.Match]:
    found = []
    for match in _SIDE.finditer(text):
        word = match.group(1).lower()
        if word in ("left", "right") and (_NOT_A_SIDE_AFTER.match(text, match.end())
                                          or _NOT_A_SIDE_BEFORE.search(text[:match.start()])):
            continue
        found.append(match)
    return found


def _laterality(text: str, rng: random.Random) -> str:
    out, last = [], 0
    for match in _side_matches(text):
        out.append(text[last:match.start()])
        out.append(_match_case(match.group(1), _SIDE_SWAP[match.group(1).lower()]))
        last = match.end()
    out.append(text[last:])
    return "".join(out)


# -- timing ----------------------------------------------------------------------------------------------
_TIMING_WORDS = {
    "acute": "chronic", "chronic": "acute", "acutely": "chronically", "chronically": "acutely",
    "sudden": "gradual", "gradual": "sudden", "suddenly": "gradually", "gradually": "suddenly",
    "rapid": "slow", "slow": "rapid", "rapidly": "slowly", "slowly": "rapidly",
    "morning": "evening", "evening": "morning", "mornings": "evenings", "evenings": "mornings",
    "intermittent": "constant", "constant": "intermittent", "intermittently": "constantly",
    "constantly": "intermittently", "before": "after", "after": "before",
}
_TIMING = re.compile(r"\b(" + "|".join(sorted(_TIMING_WORDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def _swap_word(match: re.Match) -> Callable[[random.Random], str]:
    return lambda rng: _match_case(match.group(1), _TIMING_WORDS[match.group(1).lower()])


def _timing_sites(text: str) -> list[_Site]:
    sites = [_Site(*m.span(), _swap_word(m)) for m in _TIMING.finditer(text)]
    sites += _duration_sites(text, _age_spans(text), keep_number=True)
    return _non_overlapping(sites)


# -- public ----------------------------------------------------------------------------------------------
def applicable_strategies(text: str) -> list[str]:
    """The strategies that can corrupt ``text`` (in :data:`STRATEGIES` order); no randomness involved."""
    found = []
    if _numeric_sites(text):
        found.append("numeric")
    if _negation_sites(text):
        found.append("negation")
    if _side_matches(text):
        found.append("laterality")
    if _timing_sites(text):
        found.append("timing")
    return found


def corrupt_with(text: str, strategy: str, rng: random.Random) -> str | None:
    """Corrupt ``text`` with one named strategy; ``None`` if it does not apply or changes nothing."""
    if strategy == "laterality":
        result = _laterality(text, rng) if _side_matches(text) else None
    else:
        sites = {"numeric": _numeric_sites, "negation": _negation_sites, "timing": _timing_sites}[strategy](text)
        result = _apply(text, rng.choice(sites), rng) if sites else None
    if result is None or result.strip() == text.strip() or not result.strip():
        return None
    return result


def corrupt_fact_detailed(text: str, rng: random.Random) -> Corruption | None:
    """Like :func:`corrupt_fact`, but also says which strategy made the corruption."""
    strategies = applicable_strategies(text)
    while strategies:
        strategy = rng.choice(strategies)
        result = corrupt_with(text, strategy, rng)
        if result is not None:
            return Corruption(original=text, corrupted=result, strategy=strategy)
        strategies.remove(strategy)
    return None


def corrupt_fact(text: str, rng: random.Random) -> str | None:
    """A false but plausible version of one atomic fact, or ``None`` when no strategy applies.

    Deterministic given the ``rng`` state; the result always differs from ``text``. See the module docstring for
    the strategies (numeric values moved out of their band, negations flipped, laterality swapped, timing
    swapped); ages are never changed.

    Args:
        text: one atomic fact, e.g. ``"The right inguinal lymph node was tender."``.
        rng: the random source (``random.Random``) that picks the strategy, the site and new values.

    Returns:
        The corrupted text, or ``None``.
    """
    corruption = corrupt_fact_detailed(text, rng)
    return corruption.corrupted if corruption else None
