"""The DHD evaluator: does a response's final answer agree with the gold answer? Two modes.

:class:`AnswerEvaluator` grades one response against a problem's gold answer in one of two modes:

- ``judge`` (the paper's evaluator, the default whenever a judge LM is given): an LM judge
  (:class:`~groundstate.signatures.deliberation.JudgeFinalAnswer`, temperature 0 by default) sees the problem,
  the gold answer with its unit, the equivalence rule of the problem's kind (:func:`equivalence_rule`) and the
  response: in a replay the integrator's whole response (reasoning and final answer), for a proposal the
  proposed answer alone, never its reasoning. It decides equivalence of the final answer (numbers, expressions,
  sets, conditions) and returns ``correct`` or ``incorrect``. Every other non-empty response is judged; an empty
  one is wrong without a call, and so is a number or option answer field that the hedging rule below finds
  hedged (the judge is told that hedging is wrong, but a small judge may miss it; the rule makes hedging wrong in
  both modes whatever the judge's quality). This follows the authors' public code (an LM judge with the problem,
  the full final submission and the ground truth, a PASS/FAIL verdict, an unparseable verdict counted as a
  failure).
- ``rules`` (no LM at all): the deterministic checks below, on the final answer text (the integrator's answer
  field, or the last ``\\boxed{...}`` span of the full response when that field has no usable value).

**Rules.** A text with ``\\boxed{...}`` is read from its last boxed span only (the authors' extraction).

- ``number``: the stated value is compared with the gold value: correct when
  ``|c - g| <= max(tolerance * |g|, abs_tolerance)`` (both bounds inclusive). When the unit carries a power of
  ten (``10^{-19} J``) the value may be given in those units or written out in full.
- ``option`` / ``options``: the chosen letters (:func:`option_letters`) must equal the gold set.
- ``expression`` / ``text``: a normalized string match (case, spacing, ``$``, ``\\boxed{}``, ``\\text{}``); a
  gold answer that is a plain number is compared as a number. Anything else is wrong: rules cannot recognise
  a rewritten expression, so use ``judge`` for such answers.

**No answer is a wrong answer** (``correct=0``, ``method="no-answer"``): an empty response, a number answer with
no number in it, an option answer with no letter. **A hedged answer is wrong** (``correct=0``,
``method="hedged"``), never scored by its first value (:func:`number_candidates`): the final answer is split
into alternatives at ``or``, ``and``, ``either``, ``vs``, ``;``, and a comma followed by a space;
each alternative contributes its value (the first number after its last ``=`` or ``\\approx``); the answer is
hedged when two of these values differ by more than the problem's tolerance. So ``0.123 or 0.246`` and
``x = 2 or x = 3`` are hedged, while ``42 or 42.0``, ``3.2 \\times 10^{-3} mol``, ``9.8 m/s^2``, ``1,250 m``,
``12 m/s (about 43 km/h)`` (one alternative: its first number), ``12 m/s, i.e. 43 km/h`` (a restatement that
starts with *i.e.*, *that is*, *which is*, *namely* or *equivalently* is skipped) and precision notes
(``0.123, to 3 significant figures``) are not. For letters, ``B or C`` (letters with *or*, *either*, *maybe*,
*perhaps* or *possibly*, and any two letters where one is expected) is hedged; ``A and C`` is the set ``{A, C}``
where several may be correct. A value restated in another
unit with another number (``3.2 kJ or 3200 J``) reads as two values: the rules cannot convert units.

Every call returns ``Prediction(correct, method, value)``: ``correct`` is 1, 0, or ``None`` only for an
operational failure, which here is only ``judge-error`` (the judge call failed or its verdict could not be
parsed; ``error`` says why). ``method`` names what decided: ``numeric``, ``options``, ``exact``, ``judge``,
``no-answer``, ``hedged`` or ``judge-error``; ``value`` is what was read from the response (for ``judge``, the
judge's reading of the final answer).
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

import dspy

from groundstate.programs.common import as_data, saveable
from groundstate.records import Problem
from groundstate.signatures.deliberation import JudgeFinalAnswer

logger = logging.getLogger(__name__)

EVALUATOR_MODES: tuple[str, ...] = ("judge", "rules")
DEFAULT_JUDGE_TEMPERATURE = 0.0
"""The judge's temperature in the authors' public configuration."""

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
_LETTER_HEDGE = re.compile(r"\b(or|either|maybe|perhaps|possibly)\b", re.I)
_ALTERNATIVE = re.compile(r"\b(?:or|and|either|versus|vs)\b\.?|;|,\s+", re.I)
_RESTATEMENT = re.compile(r"\s*[(\[]?\s*(?:i\.\s*e\.|that is\b|which is\b|namely\b|(?:or )?equivalently\b)", re.I)
_PRECISION = re.compile(r"[(\[]?\s*(?:(?:correct|rounded|accurate)\s+)?(?:to\s+|with\s+)?\d+\s*"
                        r"(?:significant\s+(?:figures?|digits?)|sig\.?\s*figs?\.?|s\.\s*f\.|d\.\s*p\.|"
                        r"decimal\s+places?)\s*[)\]]?", re.I)


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
    """The number a short final answer states first, or ``None`` (see :func:`number_candidates` for all of them).

    Handles signs, thousands separators, decimals, ``1.2e-3``, ``1.2 x 10^-3``, ``3.2 \\times 10^{-3}``,
    ``10^{5}``, Unicode superscripts, simple fractions (``3/2``, ``\\frac{3}{2}``) and ``\\boxed{}``. When the
    text has ``=`` (or ``\\approx``) only what follows the last one is read. The first number not glued to a word
    (the ``2`` of ``C2H6`` is skipped) is the answer.
    """
    if text is None:
        return None
    return _value_of(_clean_math(text))


def _value_of(cleaned: str) -> float | None:
    parts = re.split(r"=|\\approx|≈", cleaned)
    return _first_number(parts[-1] if parts[-1].strip() else cleaned)


def number_candidates(text: Any) -> list[float]:
    """Every value a final answer states, one per alternative (see the module notes on hedging).

    ``"0.123 or 0.246"`` -> ``[0.123, 0.246]``; ``"x = 2 or x = 3"`` -> ``[2, 3]``; ``"4.2 m/s^2"`` -> ``[4.2]``;
    ``"12 m/s, i.e. 43 km/h"`` -> ``[12]``; no number -> ``[]``.
    """
    if text is None:
        return []
    cleaned = _PRECISION.sub(" ", _clean_math(text))
    values = []
    for alternative in _ALTERNATIVE.split(cleaned):
        if _RESTATEMENT.match(alternative):
            continue
        value = _value_of(alternative) if alternative.strip() else None
        if value is not None:
            values.append(value)
    return values


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

    A lone capital ``A`` followed by a lower-case word (other than ``or``, ``and``, ``is``...) is read as the
    article, not an option.
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
        word = re.match(r"\s+([a-z]+)", body[match.end():])
        if match.group(1) == "A" and word and not _OPTION_WORDS.fullmatch(word.group(1)):
            continue  # "A sensible choice is C": the article; "A or C" keeps both letters
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


def equivalence_rule(kind: str, unit: str | None = None, tolerance: float = 0.05,
                     abs_tolerance: float | None = None) -> str:
    """The judge's ``equivalence_rule`` for an answer kind (what counts as agreeing with the reference)."""
    if kind == "number":
        rule = f"the same number as the reference within a relative tolerance of {100 * tolerance:g}%"
        if abs_tolerance:
            rule += f" or an absolute difference of at most {abs_tolerance:g}"
        if unit:
            rule += (f"; the reference is in the unit {unit}, and a value given in another unit or with the power "
                     "of ten written out agrees if it converts to the reference")
        return rule
    if kind == "option":
        return "the same single option letter as the reference"
    if kind == "options":
        return "exactly the same set of option letters as the reference, in any order"
    if kind == "expression":
        return "a mathematically equivalent expression, equation, set or condition"
    return "the same answer in substance: mathematically or semantically equivalent"


def _verdict(correct: int | None, method: str, value: Any = None, **extra: Any) -> dspy.Prediction:
    return dspy.Prediction(correct=correct, method=method, value=value, **extra)


def check_number(text: str, gold: float, tolerance: float = 0.05, abs_tolerance: float | None = None,
                 unit: str | None = None) -> dspy.Prediction:
    """The ``number`` rule: no value -> ``no-answer``; values that differ -> ``hedged``; else the tolerance test."""
    scale = unit_scale(unit)
    values = number_candidates(text)
    if not values:
        return _verdict(0, "no-answer")
    first = values[0]
    if any(not (numbers_match(v, first, tolerance, abs_tolerance, scale)
                or numbers_match(first, v, tolerance, abs_tolerance, scale)) for v in values[1:]):
        return _verdict(0, "hedged", values)
    return _verdict(int(numbers_match(first, gold, tolerance, abs_tolerance, scale)), "numeric", first)


def check_options(text: str, gold: str, kind: str = "options") -> dspy.Prediction:
    """The ``option``/``options`` rule: no letter -> ``no-answer``; two letters where one is expected, or letters
    joined by ``or``/``either``/``maybe`` -> ``hedged``; else the chosen set must equal the gold set."""
    span = _boxed(text)
    chosen = option_letters(span)
    if not chosen:
        return _verdict(0, "no-answer")
    value = "".join(sorted(chosen))
    if len(chosen) > 1 and (kind == "option" or _LETTER_HEDGE.search(span)):
        return _verdict(0, "hedged", value)
    return _verdict(int(chosen == (option_letters(gold) or set())), "options", value)


def check_rules(text: str, gold: str, kind: str = "text", unit: str | None = None, tolerance: float = 0.05,
                abs_tolerance: float | None = None) -> dspy.Prediction:
    """Rules mode on one final-answer text (see the module notes)."""
    if kind == "number":
        gold_value = parse_plain_number(gold)
        gold_value = extract_number(gold) if gold_value is None else gold_value
        if gold_value is None:
            raise ValueError(f"the gold answer {gold!r} of a number problem has no number")
        return check_number(text, gold_value, tolerance, abs_tolerance, unit)
    if kind in ("option", "options"):
        return check_options(text, gold, kind)
    if not text.strip():
        return _verdict(0, "no-answer")
    if normalize_answer(text) == normalize_answer(gold):
        return _verdict(1, "exact", text)
    gold_value = parse_plain_number(gold)
    if gold_value is not None:
        return check_number(text, gold_value, tolerance, abs_tolerance, unit)
    return _verdict(0, "exact", text)


@saveable
class AnswerEvaluator(dspy.Module):
    """Grades a response against the gold answer, by an LM judge or by rules (see the module notes).

    Args:
        mode: ``"judge"``, ``"rules"``, or ``None``: ``judge`` when a judge LM is given (an LM set on the
            ``judge`` predictor: ``evaluator.judge.lm = lm``, ``--judge-lm`` or the ``--lm-config`` role ``judge``),
            else ``rules``. A ``judge`` evaluator without an LM of its own uses DSPy's configured LM.
        temperature: the judge's sampling temperature (default 0, as the authors run it); ``None`` keeps the
            judge LM's own setting.

    ``evaluate(problem, answer, response=None)`` and ``forward(candidate, gold, kind, unit, tolerance,
    abs_tolerance, question=None, response=None)`` return ``Prediction(correct, method, value)``: ``answer`` is
    the final answer field, ``response`` the whole response the judge sees (default: the answer alone).
    """

    def __init__(self, mode: str | None = None, temperature: float | None = DEFAULT_JUDGE_TEMPERATURE):
        super().__init__()
        if mode is not None and mode not in EVALUATOR_MODES:
            raise ValueError(f"unknown evaluator mode '{mode}' (choose from {', '.join(EVALUATOR_MODES)})")
        self.mode, self.temperature = mode, temperature
        self.judge = dspy.Predict(JudgeFinalAnswer)

    @property
    def resolved_mode(self) -> str:
        """The mode calls use: ``mode``, or for ``None`` ``judge`` exactly when the judge has its own LM."""
        if self.mode is not None:
            return self.mode
        return "judge" if getattr(self.judge, "lm", None) is not None else "rules"

    def evaluate(self, problem: Problem, answer: Any, response: Any = None) -> dspy.Prediction:
        """Grade ``answer`` (and the full ``response``, if any) against ``problem``'s gold answer and rules."""
        abs_tol = (problem.metadata or {}).get("abs_tolerance")
        return self(candidate=answer, gold=problem.answer, kind=problem.kind, unit=problem.unit,
                    tolerance=problem.tolerance, abs_tolerance=float(abs_tol) if abs_tol is not None else None,
                    question=problem.question, response=response)

    def forward(self, candidate: Any, gold: str, kind: str = "text", unit: str | None = None,
                tolerance: float = 0.05, abs_tolerance: float | None = None, question: str | None = None,
                response: Any = None) -> dspy.Prediction:
        answer = "" if candidate is None else str(candidate).strip()
        full = answer if response is None else str(response).strip()
        if self.resolved_mode == "judge":
            if answer and kind in ("number", "option", "options"):
                ruled = check_rules(answer, gold, kind, unit, tolerance, abs_tolerance)
                if ruled.method == "hedged":  # wrong whatever the judge would say (see the module notes)
                    return ruled
            return self.ask_judge(full, gold, kind, unit, tolerance, abs_tolerance, question)
        verdict = check_rules(answer, gold, kind, unit, tolerance, abs_tolerance)
        if verdict.method == "no-answer" and "\\boxed" in full and full != answer:
            verdict = check_rules(_boxed(full), gold, kind, unit, tolerance, abs_tolerance)
        return verdict

    def ask_judge(self, response: str, gold: str, kind: str = "text", unit: str | None = None,
                  tolerance: float = 0.05, abs_tolerance: float | None = None,
                  question: str | None = None) -> dspy.Prediction:
        """Judge mode on one response: empty -> ``no-answer``; a failed or unparseable verdict -> ``judge-error``."""
        if not response:
            return _verdict(0, "no-answer")
        config = {} if self.temperature is None else {"temperature": float(self.temperature)}
        try:
            out = self.judge(problem=as_data(question or "(not given)"),
                             reference_answer=as_data(f"{gold} {unit}" if unit else str(gold)),
                             equivalence_rule=equivalence_rule(kind, unit, tolerance, abs_tolerance),
                             response=as_data(response), config=config)
        except Exception as exc:  # a failed or unparseable judge call is an operational failure, never a verdict
            logger.debug("judge failed: %s", exc)
            return _verdict(None, "judge-error", error=f"{type(exc).__name__}: {exc}"[:500])
        verdict = str(getattr(out, "verdict", "") or "").strip().lower()
        if verdict not in ("correct", "incorrect"):
            return _verdict(None, "judge-error", error=f"verdict {out.get('verdict')!r}")
        return _verdict(int(verdict == "correct"), "judge", str(out.get("final_answer") or "")[:200])
