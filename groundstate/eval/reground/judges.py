"""The T2 judges: which facts does an information state support?

Two judges implement the :class:`Judge` protocol: :class:`LMJudge` (an LM reads the state and the numbered facts,
:class:`~groundstate.signatures.judging.JudgeSupportedFacts`), the paper's judge, and :class:`LexicalJudge`, a
deterministic word-overlap approximation for tests and synthetic data. The lexical judge is *approximate*: it
ignores synonyms and cannot follow reasoning; use an LM judge for reported results.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from groundstate.eval.reground.contract import field_of
from groundstate.lm.failed_calls import failed_call_eviction
from groundstate.lm.faults import is_connection_error, lm_failure
from groundstate.lm.specs import default_adapter, get_lm

logger = logging.getLogger(__name__)


@runtime_checkable
class Judge(Protocol):
    """Decides which facts an information state supports."""

    def supported(self, state: str, facts: list[str]) -> list[bool]:
        """One decision per fact, in order: ``True`` when ``state`` supports the fact."""
        ...


_PRE_CUES = frozenset({
    "no", "not", "deny", "denies", "denied", "denying", "without", "never", "none", "nor", "neither", "cannot",
})


_CLAUSE_CUES = frozenset({"absent", "negative"})


NEGATION_CUES: frozenset[str] = _PRE_CUES | _CLAUSE_CUES
"""Words that negate: the ones in ``_CLAUSE_CUES`` negate their whole clause, the others what follows them."""


_STOPWORDS = frozenset("""
a an the and or of in on at to for from by with as is are was were be been being am has have had having do does
did this that these those it its there their they them he she his her him we our you your i me my which who whom
whose what when where why how than then so such also any all some both each either more most other into onto
over under about after before during since until upon within via per while if but because only just very can
could would should may might must will shall up out off again further here same own too s t
""".split())


_NUMBER_WORDS = {w: float(i) for i, w in enumerate(
    "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty".split()) if w != "_"}


_SENTENCE_BREAK = re.compile(r"[\n\r]+|[!?]+|(?<!\d)\.|\.(?!\d)")


_CLAUSE_BREAK = re.compile(r"[,;()\[\]]|\b(?:but|however|whereas|although|though|while|yet)\b")


_TOKEN = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")


_DOUBLE_KEEP = frozenset("lsz")


def _fold(text: str) -> str:
    """Lowercase, unicode-normalized ASCII-ish text: accents dropped, ``n't`` spelled ``not``, ``1,200`` -> ``1200``."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"n't\b", " not", text)
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)


def stem(word: str) -> str:
    """A light suffix stripper: ``ies``/``ied``, ``ing``, ``ed``, ``ion``, ``ly``, plural ``s``, then a final ``e``.

    ``reports``/``reported``/``reporting`` -> ``report``; ``increase``/``increased``/``increases`` -> ``increas``;
    ``evacuated``/``evacuation`` -> ``evacuat``.
    """
    if len(word) <= 3:
        return word
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "ion", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= (3 if suffix in ("ing", "ed") else 4):
            word = word[: -len(suffix)]
            if (suffix in ("ing", "ed") and len(word) >= 4 and word[-1] == word[-2] and word[-1] not in _DOUBLE_KEEP
                    and word[-1].isalpha()):
                word = word[:-1]
            break
    else:
        if word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


@dataclass(frozen=True)
class _Terms:
    """The terms of a clause, sentence or fact, split by whether a negation cue covers them."""

    stems: frozenset[str]
    numbers: frozenset[float]
    neg_stems: frozenset[str]
    neg_numbers: frozenset[float]
    negated: bool

    @property
    def all_stems(self) -> frozenset[str]:
        return self.stems | self.neg_stems

    @property
    def all_numbers(self) -> frozenset[float]:
        return self.numbers | self.neg_numbers


def _terms(clause: str) -> _Terms:
    """Content stems and numbers of one clause; a pre-cue negates what follows it, a clause cue the whole clause."""
    tokens = _TOKEN.findall(clause)
    in_scope = any(t in _CLAUSE_CUES for t in tokens)
    negated = in_scope
    plain: tuple[set, set] = (set(), set())
    negative: tuple[set, set] = (set(), set())
    for token in tokens:
        if token in _PRE_CUES:
            in_scope = negated = True
            continue
        if token in _CLAUSE_CUES:
            continue
        stems, numbers = negative if in_scope else plain
        if token[0].isdigit():
            numbers.add(float(token))
        elif token in _NUMBER_WORDS:
            numbers.add(_NUMBER_WORDS[token])
        elif len(token) > 1 and token not in _STOPWORDS:
            stems.add(stem(token))
    return _Terms(frozenset(plain[0]), frozenset(plain[1]), frozenset(negative[0]), frozenset(negative[1]), negated)


def _merge(parts: Sequence[_Terms]) -> _Terms:
    return _Terms(frozenset().union(*(p.stems for p in parts)), frozenset().union(*(p.numbers for p in parts)),
                  frozenset().union(*(p.neg_stems for p in parts)), frozenset().union(*(p.neg_numbers for p in parts)),
                  any(p.negated for p in parts))


def _sentences(state: str) -> list[_Terms]:
    """The state's sentences, each with its terms (negation scopes computed clause by clause)."""
    out = []
    for sentence in _SENTENCE_BREAK.split(_fold(state)):
        terms = _merge([_terms(c) for c in _CLAUSE_BREAK.split(sentence)])
        if terms.all_stems or terms.all_numbers:
            out.append(terms)
    return out


def _fact_terms(fact: str) -> _Terms:
    return _merge([_terms(c) for c in _CLAUSE_BREAK.split(_fold(fact))])


class LexicalJudge:
    """A deterministic, approximate T2 judge based on word overlap within one sentence of the state.

    Text is unicode-normalized, lowercased and stripped of punctuation; stopwords are dropped and words are
    lightly stemmed (:func:`stem`); number words up to twenty count as numbers. Sentences end at ``.``, ``!``,
    ``?`` or a line break, and are split into clauses at ``, ; ( )`` and words such as *but*. Within a clause a
    negation cue (*no, not, denies, denied, without, never, ...*) covers the words after it, and *absent* or
    *negative* covers the whole clause. A fact is supported when some single sentence of the state satisfies:

    (a) numbers: every number in the fact occurs in the sentence, compared as numbers (``39.0`` == ``39``);
    (b) negation agreement: a fact without a cue is matched only against the sentence's words *outside* any
        negation scope; a fact with a cue needs one of its words or numbers *inside* a negation scope of the
        sentence (and is then matched against all the sentence's words);
    (c) coverage: at least ``threshold`` of the fact's content words occur among those words. A fact with no
        content words needs at least one number.

    So ``"No fever. Cough present."`` does not support ``"fever present"`` and ``"Temperature 37.0 C"`` does not
    support ``"temperature 39.1 C"``. This is an approximation for tests and synthetic data: it misses
    synonyms and inferences, and reads negation scope only roughly.

    Args:
        threshold: the share of a fact's content words that must be covered (default 0.75).
    """

    def __init__(self, threshold: float = 0.75):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold

    @property
    def name(self) -> str:
        """``lexical(threshold=0.75)``: a description for run configs and reports."""
        return f"lexical(threshold={self.threshold:g})"

    def supported(self, state: str, facts: list[str]) -> list[bool]:
        """Whether ``state`` supports each fact (see the class docstring for the rule)."""
        sentences = _sentences(state or "")
        return [self._supports(sentences, _fact_terms(fact)) for fact in facts]

    def _supports(self, sentences: list[_Terms], fact: _Terms) -> bool:
        fact_stems, fact_numbers = fact.all_stems, fact.all_numbers
        if not fact_stems and not fact_numbers:
            return False
        for sentence in sentences:
            if fact.negated:
                if not (fact_stems & sentence.neg_stems or fact_numbers & sentence.neg_numbers):
                    continue
                stems, numbers = sentence.all_stems, sentence.all_numbers
            else:
                stems, numbers = sentence.stems, sentence.numbers
            if not fact_numbers <= numbers:
                continue
            if not fact_stems or len(fact_stems & stems) / len(fact_stems) >= self.threshold - 1e-9:
                return True
        return False


class LMJudge:
    """A T2 judge that asks an LM which numbered facts the state supports (``JudgeSupportedFacts``).

    Facts are shown numbered from 1; the LM returns those numbers, and numbers outside ``1..len(facts)`` are
    ignored. The state and the facts are evidence, passed through :func:`~groundstate.programs.common.as_data`
    like every other prompt's evidence, so neither can forge an adapter marker (``[[ ## supported_ids ## ]]``).
    An empty state supports nothing (no LM call). If the LM call fails or its reply cannot be parsed,
    :meth:`supported` raises, so the caller can record the failure (the runner records T2 as not measured and
    re-scores the instance on resume), and the failed reply is not left in DSPy's response cache
    (:mod:`groundstate.lm.failed_calls`): the retry asks the judge again.

    Args:
        lm: the judge's own LM (e.g. from ``get_lm(--judge-lm)``); ``None`` uses the configured DSPy LM.
        adapter: the adapter for the judge's calls; ``None`` uses ``groundstate.lm.default_adapter(lm)`` when
            ``lm`` is given (``JSONAdapter`` for the embedded LM), else the configured one.
    """

    def __init__(self, lm: Any = None, adapter: Any = None):
        import dspy  # noqa: PLC0415 (heavy: dspy)

        from groundstate.signatures.judging import JudgeSupportedFacts  # noqa: PLC0415 (heavy: dspy)

        self.lm = lm
        self.adapter = adapter
        self.predict = dspy.Predict(JudgeSupportedFacts)

    @property
    def name(self) -> str:
        """``lm:<model>``: a description for run configs and reports."""
        return f"lm:{getattr(self.lm, 'model', None) or 'configured'}"

    @staticmethod
    def numbered(facts: Sequence[str]) -> str:
        """``1. ...`` lines, one fact per line (line breaks inside a fact become spaces), each fact as data
        (:func:`~groundstate.programs.common.as_data`: it cannot open or close an adapter field)."""
        from groundstate.programs.common import as_data  # noqa: PLC0415 (heavy: dspy)

        return "\n".join(f"{i}. {' '.join(as_data(f).split())}" for i, f in enumerate(facts, start=1))

    def supported(self, state: str, facts: list[str]) -> list[bool]:
        """Whether ``state`` supports each fact, as the LM judges it.

        Raises:
            Exception: whatever the LM call or output parsing raised.
        """
        import dspy  # noqa: PLC0415 (heavy: dspy)

        from groundstate.programs.common import as_data  # noqa: PLC0415 (heavy: dspy)

        if not facts:
            return []
        if not state or not state.strip():
            return [False] * len(facts)
        overrides: dict[str, Any] = {}
        if self.lm is not None:
            overrides["lm"] = self.lm
            adapter = self.adapter if self.adapter is not None else default_adapter(self.lm)
            if adapter is not None:
                overrides["adapter"] = adapter
        elif self.adapter is not None:
            overrides["adapter"] = self.adapter
        with dspy.context(**overrides), failed_call_eviction():
            try:
                out = self.predict(state=as_data(state), facts=self.numbered(facts))  # both are evidence: data
            except Exception as exc:  # its own server unreachable: say which option sets it
                if self.lm is not None and is_connection_error(exc):
                    raise lm_failure(exc, self.lm, "T2 judge call", "--judge-api-base") from exc
                raise
        chosen: set[int] = set()
        for raw in field_of(out, "supported_ids") or []:
            try:
                number = int(raw)
            except (TypeError, ValueError):
                logger.debug("judge returned a non-integer fact id %r; ignored", raw)
                continue
            if 1 <= number <= len(facts):
                chosen.add(number)
            else:
                logger.debug("judge returned fact id %d outside 1..%d; ignored", number, len(facts))
        return [i in chosen for i in range(1, len(facts) + 1)]


def make_judge(spec: str | None = "lexical", **lm_options: Any) -> Judge:
    """A judge from a model spec: ``lexical`` (or ``None``) for :class:`LexicalJudge`, else an LM spec for
    :class:`LMJudge` (``embedded``, ``openai/gpt-4o-mini``, ...; ``lm_options`` go to ``get_lm``). Runs choose their
    judge through their :class:`~groundstate.eval.metric_spec.MetricSpec` (``same-as-lm`` included)."""
    if spec is None or spec == "lexical":
        return LexicalJudge()

    return LMJudge(get_lm(spec, **lm_options))
