"""The DHD evaluator: is a final answer equivalent to the gold answer? Rules first, an LM judge only if needed.

:class:`AnswerEvaluator` sees two answers and nothing else (no reasoning, no messages). By answer kind:

- ``number``: the first number in the candidate (see :func:`extract_number`) is compared with the gold value:
  correct when ``|c - g| <= max(tolerance * |g|, abs_tolerance)``. When the unit carries a power of ten
  (``10^{-19} J``) the candidate may give the number in those units or written out in full. No number in the
  candidate is an operational failure (``correct=None``), never a wrong answer. The judge is never asked.
- ``option`` / ``options``: the option letters in the candidate (:func:`option_letters`) must equal the gold set.
  No letters is an operational failure.
- ``expression`` / ``text``: a normalized string match first (case, spacing, ``$``, ``\\boxed{}``, ``\\text{}``);
  a gold answer that is a plain number is compared numerically; only otherwise is the LM judge
  (:class:`~groundstate.signatures.deliberation.JudgeEquivalence`) asked. A judge that fails is an operational
  failure.

Every call returns ``Prediction(correct, method, value)``: ``correct`` is 1, 0 or ``None`` (operational failure),
``method`` says which rule decided (``numeric``, ``options``, ``exact``, ``judge``, or ``no-answer`` /
``judge-error`` / ``judge-off`` for failures) and ``value`` is what was parsed from the candidate.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import dspy

from groundstate.programs.common import as_data, saveable
from groundstate.records import Problem
from groundstate.signatures.deliberation import JudgeEquivalence

logger = logging.getLogger(__name__)

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
_OPTION_WORDS = re.compile(r"\b(options?|choices?|answers?|and|or|the|is|are|correct|both|final)\b", re.I)


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


def _boxed(text: str) -> str:
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


def _clean_math(text: str) -> str:
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^" + m.group().translate(_SUPERSCRIPTS), _boxed(str(text)))
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("$", " ")
    for token in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "~", "{,}"):
        text = text.replace(token, "" if token in ("\\left", "\\right", "{,}") else " ")
    text = re.sub(r"\\(?:times|cdot)|[×·*]", " x ", text)
    text = _FRAC.sub(lambda m: f" {m.group(1)}/{m.group(2)} ", text)
    text = re.sub(r"\^\s*\{\s*([+-]?\s*\d+)\s*\}", lambda m: "^" + m.group(1).replace(" ", ""), text)
    return text


def extract_number(text: Any) -> float | None:
    """The number a short final answer states, or ``None``.

    Handles signs, thousands separators, decimals, ``1.2e-3``, ``1.2 x 10^-3``, ``3.2 \\times 10^{-3}``,
    ``10^{5}``, Unicode superscripts, simple fractions (``3/2``, ``\\frac{3}{2}``) and ``\\boxed{}``. When the
    text has ``=`` (or ``\\approx``) only what follows the last one is read. The first number not glued to a word
    (the ``2`` of ``C2H6`` is skipped) is the answer.
    """
    if text is None:
        return None
    cleaned = _clean_math(text)
    parts = re.split(r"=|\\approx|≈", cleaned)
    return _first_number(parts[-1] if parts[-1].strip() else cleaned)


def _first_number(text: str) -> float | None:
    best: tuple[int, float] | None = None
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
            best = (match.start(), value)
        except (ValueError, OverflowError):
            best = None
    power = _POWER_ONLY.search(text)
    if power and (best is None or power.start() <= best[0]):
        try:
            best = (power.start(), (-1.0 if power.group("s") == "-" else 1.0) * 10.0 ** int(power.group("p")))
        except OverflowError:
            pass
    if best is None or not math.isfinite(best[1]):
        return None
    return best[1]


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


def option_letters(text: Any, allowed: str = "ABCD") -> set[str] | None:
    """The option letters a short answer chooses (``B``, ``(b)``, ``Options A and C``, ``ACD``); ``None`` if none.

    A lone capital ``A`` followed by a lower-case word is read as the article, not an option.
    """
    if text is None:
        return None
    body = _boxed(str(text)).replace("$", " ").replace("\\text", " ")
    letters = "".join(allowed)
    stripped = re.sub(r"[\s(){}\[\],;:&+./-]", "", _OPTION_WORDS.sub(" ", body))
    if stripped and re.fullmatch(f"[{letters}{letters.lower()}]+", stripped):
        return set(stripped.upper())
    found = set(re.findall(rf"\(([{letters}{letters.lower()}])\)", body))
    if found:
        return {c.upper() for c in found}
    tokens = set()
    for match in re.finditer(rf"(?<![A-Za-z])([{letters}])(?![A-Za-z])", body):
        following = body[match.end():match.end() + 3]
        if match.group(1) == "A" and re.match(r"\s[a-z]", following):
            continue
        tokens.add(match.group(1))
    return tokens or None


def normalize_answer(text: Any) -> str:
    """Lower case, without spaces, ``$``, ``\\boxed{}``, ``\\text{}``/``\\mathrm{}`` wrappers and a final period."""
    if text is None:
        return ""
    out = _boxed(str(text))
    out = re.sub(r"\\(?:text|mathrm|textbf|mathbf)\s*\{([^{}]*)\}", r"\1", out)
    out = out.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    out = re.sub(r"[\s$~]|\\[,;:! ]", "", out).lower()
    return out.rstrip(".")


@saveable
class AnswerEvaluator(dspy.Module):
    """Decides answer equivalence with the gold answer: tolerance and option sets first, an LM judge if needed.

    Args:
        use_judge: ask the LM judge for expression/text answers that the rules cannot settle; without it such
            answers are operational failures (``method="judge-off"``).

    ``forward(candidate, gold, kind="text", unit=None, tolerance=0.05, abs_tolerance=None)`` and
    ``evaluate(problem, candidate)`` return ``Prediction(correct, method, value)`` (see the module notes).
    """

    def __init__(self, use_judge: bool = True):
        super().__init__()
        self.use_judge = use_judge
        self.judge = dspy.Predict(JudgeEquivalence)

    def evaluate(self, problem: Problem, candidate: Any) -> dspy.Prediction:
        """Evaluate ``candidate`` against ``problem``'s gold answer with the problem's own tolerance rules."""
        abs_tol = (problem.metadata or {}).get("abs_tolerance")
        return self(candidate=candidate, gold=problem.answer, kind=problem.kind, unit=problem.unit,
                    tolerance=problem.tolerance, abs_tolerance=float(abs_tol) if abs_tol is not None else None)

    def forward(self, candidate: Any, gold: str, kind: str = "text", unit: str | None = None,
                tolerance: float = 0.05, abs_tolerance: float | None = None) -> dspy.Prediction:
        text = "" if candidate is None else str(candidate).strip()
        if kind == "number":
            gold_value = parse_plain_number(gold)
            if gold_value is None:
                gold_value = extract_number(gold)
            value = extract_number(text)
            if value is None or gold_value is None:
                return dspy.Prediction(correct=None, method="no-answer", value=None)
            ok = numbers_match(value, gold_value, tolerance, abs_tolerance, unit_scale(unit))
            return dspy.Prediction(correct=int(ok), method="numeric", value=value)
        if kind in ("option", "options"):
            chosen = option_letters(text)
            if not chosen:
                return dspy.Prediction(correct=None, method="no-answer", value=None)
            expected = option_letters(gold) or set()
            return dspy.Prediction(correct=int(chosen == expected), method="options", value="".join(sorted(chosen)))
        if not text:
            return dspy.Prediction(correct=None, method="no-answer", value=None)
        if normalize_answer(text) == normalize_answer(gold):
            return dspy.Prediction(correct=1, method="exact", value=text)
        gold_value = parse_plain_number(gold)
        if gold_value is not None:
            value = extract_number(text)
            if value is not None:
                ok = numbers_match(value, gold_value, tolerance, abs_tolerance, unit_scale(unit))
                return dspy.Prediction(correct=int(ok), method="numeric", value=value)
        if not self.use_judge:
            return dspy.Prediction(correct=None, method="judge-off", value=text)
        gold_text = f"{gold} {unit}" if unit else str(gold)
        try:
            verdict = self.judge(gold=as_data(gold_text), candidate=as_data(text)).equivalent
        except Exception as exc:  # a judge failure is an operational failure, never a wrong answer
            logger.debug("judge failed: %s", exc)
            return dspy.Prediction(correct=None, method="judge-error", value=text, error=f"{type(exc).__name__}: {exc}")
        if not isinstance(verdict, bool):
            return dspy.Prediction(correct=None, method="judge-error", value=text, error=f"verdict {verdict!r}")
        return dspy.Prediction(correct=int(verdict), method="judge", value=text)
