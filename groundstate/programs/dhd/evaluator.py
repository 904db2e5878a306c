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

**Rules.** A text with ``\\boxed{...}`` is read from its last boxed span only (the authors' extraction). How a
final answer is read is :mod:`groundstate.programs.dhd.answers`.

- ``number``: the **final stated value** is compared with the gold value (``2 moles, i.e. 0.123`` is read as
  0.123: what follows the last *i.e.*, *that is*, *which is*, *namely*, *equivalently*, *therefore*, *thus*,
  *hence* or *so*, and in each alternative what follows the last ``=``): correct when
  ``|c - g| <= max(tolerance * |g|, abs_tolerance)`` (both bounds inclusive). When the unit carries a power of
  ten (``10^{-19} J``) the value may be given in those units or written out in full. **Percents compare with
  fractions**: ``12.5%`` against a gold 0.125 is correct, and so is ``0.125`` against a gold 12.5 %.
- ``option`` / ``options``: the chosen letters (:func:`option_letters`) must equal the gold set.
- ``expression`` / ``text``: a normalized string match (case, spacing, ``$``, ``\\boxed{}``, ``\\text{}``); a
  gold answer that is a plain number is compared as a number. Anything else is wrong: rules cannot recognise
  a rewritten expression, so use ``judge`` for such answers.

**No answer is a wrong answer** (``correct=0``, ``method="no-answer"``): an empty response, a number answer with
no number in it, an option answer with no letter. **A hedged answer is wrong** (``correct=0``,
``method="hedged"``), never scored by its first value: a **range** (``approximately 0.12-0.13``, ``0.12 to
0.13``, ``between 0.12 and 0.13``), whatever its width; or alternatives (the final statement split at ``or``,
``and``, ``either``, ``vs``, ``;`` and a comma followed by a space) whose values differ by more than the problem's
tolerance (``0.123 or 0.246``, ``x = 2 or x = 3``). ``42 or 42.0``, ``0.125 or 12.5%``, ``3.2 \\times 10^{-3}
mol``, ``9.8 m/s^2``, ``1,250 m``, ``2.5 ± 0.1``, ``12 m/s (about 43 km/h)`` (one alternative: its first number)
and precision notes (``0.123, to 3 significant figures``) are not hedges. A value restated in another unit reads
as the restated number (``0.123 m, i.e. 12.3 cm`` is 12.3) or as two values (``3.2 kJ or 3200 J``): the rules
cannot convert units (the judge can). For letters, ``B or C`` (letters with *or*, *either*, *maybe*, *perhaps* or
*possibly*, and any two letters where one is expected) is hedged; ``A and C`` is the set ``{A, C}`` where several
may be correct. Before issue 25 a restatement after *i.e.* was skipped (``2 moles, i.e. 0.123`` read 2), a
narrow range was read by its first number, and ``12.5%`` was compared as 12.5.

Every call returns ``Prediction(correct, method, value)``: ``correct`` is 1, 0, or ``None`` only for an
operational failure, which here is only ``judge-error`` (the judge call failed or its verdict could not be
parsed; ``error`` says why). ``method`` names what decided: ``numeric``, ``options``, ``exact``, ``judge``,
``no-answer``, ``hedged`` or ``judge-error``; ``value`` is what was read from the response (for ``judge``, the
judge's reading of the final answer).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import dspy

from groundstate.programs.common import ThreadedAsync, as_data, saveable
from groundstate.programs.dhd.answers import boxed as _boxed
from groundstate.programs.dhd.answers import extract_number as extract_number
from groundstate.programs.dhd.answers import is_percent, read_number, readings
from groundstate.programs.dhd.answers import normalize_answer as normalize_answer
from groundstate.programs.dhd.answers import number_candidates as number_candidates
from groundstate.programs.dhd.answers import numbers_match as numbers_match
from groundstate.programs.dhd.answers import option_letters as option_letters
from groundstate.programs.dhd.answers import parse_plain_number as parse_plain_number
from groundstate.programs.dhd.answers import unit_scale as unit_scale
from groundstate.records import Problem
from groundstate.signatures.deliberation import JudgeFinalAnswer

logger = logging.getLogger(__name__)

EVALUATOR_MODES: tuple[str, ...] = ("judge", "rules")
DEFAULT_JUDGE_TEMPERATURE = 0.0
"""The judge's temperature in the authors' public configuration."""

_LETTER_HEDGE = re.compile(r"\b(or|either|maybe|perhaps|possibly)\b", re.I)


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
                 unit: str | None = None, gold_percent: bool = False) -> dspy.Prediction:
    """The ``number`` rule on the final stated value (:func:`~groundstate.programs.dhd.answers.read_number`): no
    value -> ``no-answer``; a range, or alternatives whose values differ -> ``hedged``; else the tolerance test,
    percents compared with fractions (``gold_percent``: the gold answer is a percentage)."""
    scale = unit_scale(unit)
    reading = read_number(text)
    if not reading.values:
        return _verdict(0, "no-answer")
    stated = [readings(value, percent, gold_percent) for value, percent in reading.values]
    if reading.hedge is not None:
        return _verdict(0, "hedged", [value for value, _ in reading.values])

    def same(a: list[float], b: list[float]) -> bool:
        return any(numbers_match(x, y, tolerance, abs_tolerance, scale) or numbers_match(y, x, tolerance,
                                                                                           abs_tolerance, scale)
                   for x in a for y in b)

    if any(not same(stated[0], other) for other in stated[1:]):
        return _verdict(0, "hedged", [value for value, _ in reading.values])
    correct = any(numbers_match(v, gold, tolerance, abs_tolerance, scale) for v in stated[0])
    return _verdict(int(correct), "numeric", reading.values[0][0])


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
    gold_percent = is_percent(gold) or is_percent(unit)
    if kind == "number":
        gold_value = parse_plain_number(gold)
        gold_value = extract_number(gold) if gold_value is None else gold_value
        if gold_value is None:
            raise ValueError(f"the gold answer {gold!r} of a number problem has no number")
        return check_number(text, gold_value, tolerance, abs_tolerance, unit, gold_percent)
    if kind in ("option", "options"):
        return check_options(text, gold, kind)
    if not text.strip():
        return _verdict(0, "no-answer")
    if normalize_answer(text) == normalize_answer(gold):
        return _verdict(1, "exact", text)
    gold_value = parse_plain_number(gold)
    if gold_value is not None:
        return check_number(text, gold_value, tolerance, abs_tolerance, unit, gold_percent)
    return _verdict(0, "exact", text)


@saveable
class AnswerEvaluator(ThreadedAsync, dspy.Module):
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
