"""OffQuery scoring: T1 evidence verification, T2 state reconstruction, T3 task resolution.

Pure functions score one prediction against one instance's gold labels; :func:`offquery_scores` scores all
three at once (and :func:`make_scorer` wraps it as the runner's ``scorer`` hook); ``t1_metric``, ``t2_metric``
and ``t3_metric`` are DSPy metrics over ``OffQueryInstance.to_example()`` examples. This module sits below
programs, optimizers and evaluation so all of them can use it; :mod:`groundstate.eval.reground.agreement` re-exports it
and adds aggregation and judge-agreement tools.

The prediction contract (a ``dspy.Prediction``, a dict or any object with these attributes):

- ``misleading_agent``: the misleading agent as an index (``2``, ``"2"``), a name (``"Agent 2"``,
  ``"Agent 2 (laboratory)"``), a role (``"laboratory"``), a list of those (several misleading agents), or
  ``None`` / ``"none"`` / ``[]`` for "every agent is reliable". Indices are the 0-based agent indices of the
  instance, the same numbers as in ``AgentEvidence.name`` (``Agent 0``, ``Agent 1``, ...).
- ``state``: the reconstructed information state (a string; a list of strings is read as one fact per line).
- ``answer``: the option letter ``A``-``D``.

T2 (per instance): for each gold fact, the judge decides whether the predicted state supports it; the fact is
scored correct when that decision equals its label (1 = must be kept, 0 = must be excluded), and the
instance's T2 is the share of correct facts. At most ``T2_MAX_FACTS[domain]`` facts are scored (the first
ones). A missing, empty or failed state scores 0 (it is *not* read as "supports nothing", which would give
credit for every label-0 fact).

Two judges implement the :class:`Judge` protocol: :class:`LMJudge` (an LM reads the state and the numbered facts,
:class:`~groundstate.signatures.judging.JudgeSupportedFacts`) and :class:`LexicalJudge`, a deterministic
word-overlap approximation for tests and synthetic data. The lexical judge is *approximate*: it ignores
synonyms and cannot follow reasoning; use an LM judge for reported results.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from groundstate.records import LETTERS, OffQueryInstance, T2Fact

logger = logging.getLogger(__name__)

T2_MAX_FACTS: dict[str, int] = {"healthcare": 10, "disaster": 16}
"""The most T2 facts scored per instance, by domain (appendix B.5)."""

METRICS: tuple[str, ...] = ("t1", "t2", "t3")

_MISSING = object()


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` otherwise, ``default`` when absent."""
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    try:
        return getattr(obj, name)
    except (AttributeError, KeyError):
        return default


# ---------------------------------------------------------------------------------------------------------
# T1: evidence verification
# ---------------------------------------------------------------------------------------------------------

_NONE_WORDS = frozenset({
    "", "none", "null", "nil", "n/a", "na", "no", "nobody", "no one", "no agent", "no agents", "neither",
    "no misleading agent", "no misleading agents", "none of them", "none of the agents", "all reliable",
    "all agents are reliable", "all agents reliable", "-1",
})
_NONE_PATTERN = re.compile(r"^(?:no\s+(?:misleading\s+|unreliable\s+)?(?:agent|one|source)s?\b|all\b.*\breliable\b)")
_AGENT_ANCHORED = re.compile(r"^(?:agent\s*#?\s*)?(\d+)\s*(?:\(.*\))?\s*\.?$")
_AGENT_MENTION = re.compile(r"\bagent\s*#?\s*(\d+)\b")
_LIST_SEPARATORS = re.compile(r"\s*(?:,|;|&|/|\n|\band\b)\s*")


def _clean(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().replace("_", " ").split()).strip(" .'\"`*")


def is_no_agent(value: Any) -> bool:
    """Whether ``value`` says that no agent is misleading (``None``, ``"none"``, ``"no agent"``, ``[]``, ``-1``)."""
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == -1
    if isinstance(value, list | tuple | set | frozenset):
        return all(is_no_agent(v) for v in value)
    if isinstance(value, str):
        text = _clean(value)
        return text in _NONE_WORDS or bool(_NONE_PATTERN.match(text))
    return False


def _in_range(index: int, roles: Sequence[str | None] | None) -> int | None:
    if index < 0 or (roles is not None and index >= len(roles)):
        return None
    return index


def _role_index(text: str, roles: Sequence[str | None] | None, *, anywhere: bool = False) -> int | None:
    """The index whose role equals ``text`` (or, with ``anywhere``, is the one role named in it)."""
    if not roles:
        return None
    named = {i for i, role in enumerate(roles) if role and _clean(role) == text}
    if not named and anywhere:
        named = {i for i, role in enumerate(roles)
                 if role and re.search(rf"\b{re.escape(_clean(role))}\b", text)}
    return named.pop() if len(named) == 1 else None


def _resolve_one(value: Any, roles: Sequence[str | None] | None) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _in_range(value, roles)
    if isinstance(value, float):
        return _in_range(int(value), roles) if value.is_integer() else None
    if not isinstance(value, str):
        return None
    text = _clean(value)
    match = _AGENT_ANCHORED.match(text)
    if match:
        return _in_range(int(match.group(1)), roles)
    return _role_index(text, roles)


def resolve_agents(value: Any, roles: Sequence[str | None] | None = None) -> set[int] | None:
    """Read a predicted misleading-agent field as a set of agent indices.

    Args:
        value: an index, a numeric string, ``"Agent 2"``, ``"agent 2 (laboratory)"``, a role name, a list of
            those, a string listing several (``"Agent 1, Agent 3"``, ``"1 and 3"``), or a "no agent" value.
        roles: the instance's agent roles by index (``None`` entries for agents without one). When given,
            role names resolve (case-insensitively) and indices outside ``range(len(roles))`` are rejected.

    Returns:
        The set of indices (empty for "no agent"), or ``None`` when some part cannot be resolved.
    """
    if is_no_agent(value):
        return set()
    if isinstance(value, list | tuple | set | frozenset):
        found: set[int] = set()
        for item in value:
            if is_no_agent(item):
                continue
            index = _resolve_one(item, roles)
            if index is None:
                return None
            found.add(index)
        return found
    single = _resolve_one(value, roles)
    if single is not None:
        return {single}
    if not isinstance(value, str):
        return None
    text = _clean(value)
    parts = [p for p in _LIST_SEPARATORS.split(text) if p]
    if len(parts) > 1:
        indices = [_resolve_one(p, roles) for p in parts]
        if all(i is not None for i in indices):
            return set(indices)
    mentions = {int(m) for m in _AGENT_MENTION.findall(text)}
    if len(mentions) == 1:
        index = _in_range(mentions.pop(), roles)
        return None if index is None else {index}
    if not mentions:
        index = _role_index(text, roles, anywhere=True)
        if index is not None:
            return {index}
    return None


def resolve_agent(value: Any, roles: Sequence[str | None] | None = None) -> int | set[int] | None:
    """Read a predicted misleading agent as an index (or, for a list, a set of indices).

    ``resolve_agent(2)``, ``resolve_agent("Agent 2")``, ``resolve_agent("agent 2 (laboratory)")`` and, with
    ``roles=[..., ..., "Laboratory"]``, ``resolve_agent("laboratory")`` all give ``2``.

    Args:
        value: the predicted value (see :func:`resolve_agents` for the accepted forms).
        roles: the instance's agent roles by index, to resolve role names and reject out-of-range indices.

    Returns:
        For a list, tuple or set: the set of resolved indices, or ``None`` if an element is unresolvable. For a
        single value: the index (a set when a string names several agents, ``"Agent 1, Agent 3"``), or ``None``
        when it names no agent or cannot be resolved (use :func:`is_no_agent` to tell those apart).
    """
    if isinstance(value, list | tuple | set | frozenset):
        return resolve_agents(value, roles)
    if is_no_agent(value):
        return None
    found = resolve_agents(value, roles)
    if not found:
        return None
    return next(iter(found)) if len(found) == 1 else found


def t1_score(predicted: Any, misleading: Sequence[int], roles: Sequence[str | None] | None = None) -> float:
    """T1 evidence verification: exact match of the misleading agent(s).

    Args:
        predicted: the predicted ``misleading_agent`` (index, name, role, list, or a "no agent" value).
        misleading: the gold misleading indices; empty means every agent is reliable.
        roles: the instance's agent roles by index.

    Returns:
        1.0 when the resolved prediction equals the gold set (for an empty gold set: the prediction says "no
        agent"), else 0.0. An unresolvable prediction scores 0.0.
    """
    found = resolve_agents(predicted, roles)
    return float(found is not None and found == {int(i) for i in misleading})


# ---------------------------------------------------------------------------------------------------------
# T3: task resolution
# ---------------------------------------------------------------------------------------------------------

_LETTER = re.compile(
    r"^(?:(?:final\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*)?"
    r"(?:[(\[]\s*([a-d])\s*[)\]]|([a-d])(?=\s*$|\s*[:.)\-\u2013\u2014]|\s+[(\[]))",
    re.IGNORECASE,
)


def option_letter(value: Any) -> str | None:
    """The option letter in ``value`` (``"B"``, ``" b "``, ``"B: text"``, ``"(B)"``, ``"Answer: B"``), or ``None``.

    A letter followed directly by words (``"A patient..."``, ``"a fever"``) is not read as an option.
    """
    if value is None:
        return None
    text = unicodedata.normalize("NFKC", str(value)).strip().strip("*`'\"")
    match = _LETTER.match(text)
    if not match:
        return None
    return next(g for g in match.groups() if g).upper()


def t3_score(predicted: Any, answer: str) -> float:
    """T3 task resolution: exact match of the option letter.

    Args:
        predicted: the predicted answer (tolerant forms, see :func:`option_letter`); ``None`` scores 0.
        answer: the gold letter.

    Returns:
        1.0 or 0.0.
    """
    letter = option_letter(predicted)
    return float(letter is not None and letter in LETTERS and letter == str(answer).strip().upper())


# ---------------------------------------------------------------------------------------------------------
# T2 judges
# ---------------------------------------------------------------------------------------------------------


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
    ignored. An empty state supports nothing (no LM call). If the LM call fails, :meth:`supported` raises, so
    the caller can record the failure (the runner then marks the instance failed and retries it on resume).

    Args:
        lm: the judge's own LM (e.g. from ``get_lm(--judge-lm)``); ``None`` uses the configured DSPy LM.
        adapter: the adapter for the judge's calls; ``None`` uses ``groundstate.lm.default_adapter(lm)`` when
            ``lm`` is given (``JSONAdapter`` for the embedded LM), else the configured one.
    """

    def __init__(self, lm: Any = None, adapter: Any = None):
        import dspy

        from groundstate.signatures.judging import JudgeSupportedFacts

        self.lm = lm
        self.adapter = adapter
        self.predict = dspy.Predict(JudgeSupportedFacts)

    @property
    def name(self) -> str:
        """``lm:<model>``: a description for run configs and reports."""
        return f"lm:{getattr(self.lm, 'model', None) or 'configured'}"

    @staticmethod
    def numbered(facts: Sequence[str]) -> str:
        """``1. ...`` lines, one fact per line (line breaks inside a fact become spaces)."""
        return "\n".join(f"{i}. {' '.join(str(f).split())}" for i, f in enumerate(facts, start=1))

    def supported(self, state: str, facts: list[str]) -> list[bool]:
        """Whether ``state`` supports each fact, as the LM judges it.

        Raises:
            Exception: whatever the LM call or output parsing raised.
        """
        import dspy

        if not facts:
            return []
        if not state or not state.strip():
            return [False] * len(facts)
        overrides: dict[str, Any] = {}
        if self.lm is not None:
            from groundstate.lm import default_adapter

            overrides["lm"] = self.lm
            adapter = self.adapter if self.adapter is not None else default_adapter(self.lm)
            if adapter is not None:
                overrides["adapter"] = adapter
        elif self.adapter is not None:
            overrides["adapter"] = self.adapter
        with dspy.context(**overrides):
            out = self.predict(state=state, facts=self.numbered(facts))
        chosen: set[int] = set()
        for raw in _field(out, "supported_ids") or []:
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
    """A judge from a CLI spec: ``lexical`` (or ``None``) for :class:`LexicalJudge`, else an LM spec for
    :class:`LMJudge` (``embedded``, ``openai/gpt-4o-mini``, ...; ``lm_options`` go to ``get_lm``)."""
    if spec is None or spec == "lexical":
        return LexicalJudge()
    from groundstate.lm import get_lm

    return LMJudge(get_lm(spec, **lm_options))


# ---------------------------------------------------------------------------------------------------------
# T2: state reconstruction
# ---------------------------------------------------------------------------------------------------------


def _as_facts(facts: Sequence[T2Fact | Mapping[str, Any]]) -> list[T2Fact]:
    return [f if isinstance(f, T2Fact) else T2Fact.model_validate(dict(f)) for f in facts]


def _state_text(state: Any) -> str | None:
    if state is None:
        return None
    if isinstance(state, list | tuple):
        state = "\n".join(str(s) for s in state)
    text = str(state)
    return text if text.strip() else None


def t2_from_support(support: Sequence[bool], labels: Sequence[int]) -> float:
    """Share of facts whose judged support matches the label (1 = should be supported, 0 = should not).

    Raises:
        ValueError: the two sequences differ in length or are empty.
    """
    if len(support) != len(labels):
        raise ValueError(f"judge returned {len(support)} decisions for {len(labels)} facts")
    if not labels:
        raise ValueError("no facts to score")
    return sum(bool(s) == (int(y) == 1) for s, y in zip(support, labels, strict=True)) / len(labels)


def t2_score(state: str | None, facts: Sequence[T2Fact | Mapping[str, Any]], judge: Judge,
             max_facts: int | None = None) -> float | None:
    """T2 state reconstruction for one instance: accuracy of the judged "fact is supported" labels.

    Args:
        state: the predicted information state; ``None`` or blank means missing.
        facts: the gold facts (``T2Fact`` or ``{"text", "label"}`` dicts).
        judge: decides which facts the state supports.
        max_facts: score only the first ``max_facts`` facts (``T2_MAX_FACTS[domain]``).

    Returns:
        The share of facts judged correctly; 0.0 for a missing or empty state; ``None`` when there are no facts
        (T2 does not apply).

    Raises:
        Exception: whatever the judge raised (e.g. a failed LM call).
    """
    gold = _as_facts(facts)
    if max_facts is not None:
        gold = gold[:max_facts]
    if not gold:
        return None
    text = _state_text(state)
    if text is None:
        return 0.0
    support = judge.supported(text, [f.text for f in gold])
    return t2_from_support(support, [f.label for f in gold])


# ---------------------------------------------------------------------------------------------------------
# all three, and the runner's scorer hook
# ---------------------------------------------------------------------------------------------------------


def _roles(instance: OffQueryInstance) -> list[str | None]:
    return [a.role for a in instance.agents]


def offquery_scores(instance: OffQueryInstance | Mapping[str, Any], prediction: Any,
                    judge: Judge | None = None) -> dict[str, float]:
    """T1, T2 and T3 for one instance.

    Args:
        instance: the instance (or its dict form).
        prediction: the program's prediction (see the module docstring), or ``None`` for a failed record.
        judge: the T2 judge (default :class:`LexicalJudge`).

    Returns:
        ``{"t1", "t2", "t3"}``; ``t2`` is left out when the instance has no T2 facts. A failed record scores 0.0
        on every metric. A prediction without a ``misleading_agent`` field scores 0.0 on T1 (an explicit
        ``None`` means "no agent is misleading").

    Raises:
        Exception: whatever the judge raised.
    """
    if not isinstance(instance, OffQueryInstance):
        instance = OffQueryInstance.model_validate(dict(instance))
    has_t2 = bool(instance.t2_facts)
    if prediction is None:
        return {"t1": 0.0, "t2": 0.0, "t3": 0.0} if has_t2 else {"t1": 0.0, "t3": 0.0}
    agent = _field(prediction, "misleading_agent", _MISSING)
    scores = {"t1": 0.0 if agent is _MISSING else t1_score(agent, instance.misleading, _roles(instance))}
    if has_t2:
        t2 = t2_score(_field(prediction, "state"), instance.t2_facts, judge or LexicalJudge(),
                      max_facts=T2_MAX_FACTS.get(instance.domain))
        scores["t2"] = 0.0 if t2 is None else t2
    scores["t3"] = t3_score(_field(prediction, "answer"), instance.answer)
    return scores


def make_scorer(judge: Judge | None = None) -> Callable[[Any, Any], dict[str, float]]:
    """The runner's ``scorer`` hook: ``(instance, prediction_or_None) -> {"t1", "t2", "t3"}``.

    Args:
        judge: the T2 judge shared by every call (default :class:`LexicalJudge`).
    """
    judge = judge or LexicalJudge()

    def scorer(instance: Any, prediction: Any) -> dict[str, float]:
        return offquery_scores(instance, prediction, judge)

    scorer.judge = judge  # type: ignore[attr-defined]
    return scorer


# ---------------------------------------------------------------------------------------------------------
# DSPy metrics over OffQueryInstance.to_example() examples
# ---------------------------------------------------------------------------------------------------------


def _example_roles(example: Any) -> list[str | None] | None:
    agents = _field(example, "agents")
    if agents:
        return [_field(a, "role") for a in agents]
    misleading = list(_field(example, "misleading") or [])
    named = list(_field(example, "misleading_roles") or [])
    if not misleading or len(named) != len(misleading):
        return None
    roles: list[str | None] = [None] * (max(misleading) + 1)
    for index, role in zip(misleading, named, strict=True):
        roles[index] = role
    return roles


def t1_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """DSPy metric: T1 on an ``OffQueryInstance.to_example()`` example (0.0 for a missing prediction).

    Roles come from the example's ``agents`` when present, else from ``misleading_roles``.
    """
    if prediction is None:
        return 0.0
    agent = _field(prediction, "misleading_agent", _MISSING)
    if agent is _MISSING:
        return 0.0
    return t1_score(agent, list(_field(example, "misleading") or []), _example_roles(example))


def make_t2_metric(judge: Judge | None = None) -> Callable[..., float]:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` computing T2 with ``judge``.

    The fact limit comes from the example's ``domain``. An example without T2 facts scores 0.0 (so it does not
    favour any program); a judge failure raises.

    Args:
        judge: the T2 judge (default :class:`LexicalJudge`).
    """
    judge = judge or LexicalJudge()

    def t2_metric(example: Any, prediction: Any, trace: Any = None) -> float:
        """DSPy metric: T2 of the prediction's ``state`` against the example's ``t2_facts``."""
        if prediction is None:
            return 0.0
        facts = _field(example, "t2_facts") or []
        score = t2_score(_field(prediction, "state"), facts, judge,
                         max_facts=T2_MAX_FACTS.get(str(_field(example, "domain"))))
        return 0.0 if score is None else score

    t2_metric.judge = judge  # type: ignore[attr-defined]
    return t2_metric


t2_metric = make_t2_metric()
"""DSPy metric: T2 with the lexical judge (use :func:`make_t2_metric` for another judge)."""


def t3_metric(example: Any, prediction: Any, trace: Any = None) -> float:
    """DSPy metric: T3 (option letter exact match) on an ``OffQueryInstance.to_example()`` example."""
    if prediction is None:
        return 0.0
    return t3_score(_field(prediction, "answer"), str(_field(example, "answer")))
