"""OffQuery healthcare instances from MediQ cases (OffQuery §3.2, appendix B.1-B.3, D.1).

A MediQ case is a patient description, a question, four options and the gold answer, with the description
split into numbered atomic facts. This module turns cases into :class:`~groundstate.records.OffQueryInstance`
records in which the facts are distributed over department agents, one agent holds misleading evidence and the
shared context comes in a reliable and a corrupted version.

* :func:`load_mediq` reads MediQ JSON Lines into :class:`MediQCase` records (bad input raises
  :class:`~groundstate.errors.InputError` naming the file, the record and the field).
* :func:`classify_fact` / :func:`partition_case` assign facts to departments with keyword rules.
* :func:`build_rule` is the deterministic, LM-free builder: it corrupts facts with
  :func:`~groundstate.eval.benchmarks.offquery.corruption.corrupt_fact`.
* :func:`build_lm` is the LM builder of appendix B.2, run by
  :class:`~groundstate.programs.reground.builder.OffQueryLMBuilder`.
* :func:`tag_sufficiency` tags the HEALTHCARE-S / HEALTHCARE-I split of appendix D.1.

Both builders give the same records: ``domain="healthcare"``, ``variant="main"``, exactly one misleading agent,
balanced T2 facts (reliable facts labelled 1, false statements labelled 0; at most ``max_t2_facts``), and a
``provenance`` dict saying how the instance was made.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from groundstate.errors import ConfigError, InputError
from groundstate.eval.benchmarks.offquery.corruption import (
    Corruption,
    applicable_strategies,
    corrupt_fact,
    corrupt_fact_detailed,
)
from groundstate.eval.io import read_jsonl, require_records
from groundstate.records import LETTERS, AgentEvidence, OffQueryInstance, OptionLetter, T2Fact, options_text

__all__ = [
    "DEPARTMENTS",
    "BuildReport",
    "CasePartition",
    "MediQCase",
    "build_lm",
    "build_rule",
    "classify_fact",
    "corrupt_fact",
    "is_demographic",
    "load_mediq",
    "partition_case",
    "split_sentences",
    "tag_sufficiency",
]

logger = logging.getLogger(__name__)

DEPARTMENTS: tuple[str, ...] = (
    "symptoms", "history", "medication", "vital signs", "physical exam", "laboratory", "imaging", "other",
)
"""The department agents, in the order agents appear in an instance."""

DEMOGRAPHICS = "demographics"
"""What :func:`classify_fact` returns for a demographic fact (it goes to the shared context)."""

SPLIT_SUFFICIENT = "healthcare-s"
SPLIT_INSUFFICIENT = "healthcare-i"


# =========================================================================================================
# Loading
# =========================================================================================================
class MediQCase(BaseModel):
    """One MediQ case.

    Attributes:
        id: the case id (numbers are turned into text).
        question: the question asked about the patient.
        context: the patient description, one sentence per item.
        options: the options ``A``-``D``.
        answer: the gold answer's text (informative only; :attr:`answer_idx` is authoritative).
        answer_idx: the gold option letter.
        facts: the atomic facts, with their ``"N. "`` numbering removed.
        patient: ``{"age": ..., "gender": ...}`` when given.
    """

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    context: list[str]
    options: dict[str, str]
    answer: str = ""
    answer_idx: str
    facts: list[str] = Field(min_length=1)
    patient: dict[str, Any] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("context", mode="before")
    @classmethod
    def _context_as_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("options")
    @classmethod
    def _four_options(cls, value: dict[str, str]) -> dict[str, str]:
        if sorted(value) != list(LETTERS):
            raise ValueError(f"option letters must be exactly A, B, C and D (got {', '.join(sorted(value)) or 'none'})")
        if any(not str(text).strip() for text in value.values()):
            raise ValueError("options must not be empty")
        return value

    @field_validator("answer_idx")
    @classmethod
    def _letter(cls, value: str) -> str:
        if value not in LETTERS:
            raise ValueError(f"answer_idx must be one of A, B, C, D (got '{value}')")
        return value

    @field_validator("facts")
    @classmethod
    def _strip_numbering(cls, value: list[str]) -> list[str]:
        facts = [re.sub(r"^\s*\d+\s*[.)]\s*", "", fact).strip() for fact in value]
        if any(not fact for fact in facts):
            raise ValueError("facts must not be empty")
        return facts

    @property
    def context_text(self) -> str:
        """The patient description as one paragraph (each sentence ends with a period)."""
        return " ".join(s.strip() if s.strip().endswith((".", "!", "?")) else s.strip() + "." for s in self.context
                        if s.strip())

    @property
    def gold(self) -> OptionLetter:
        return self.answer_idx  # type: ignore[return-value]


def _field_of(error: dict) -> str:
    return ".".join(str(part) for part in error.get("loc", ()) if part != "[key]") or "?"


def load_mediq(path: str | Path, skip_invalid: bool = False, problems: list[str] | None = None, *,
               allow_empty: bool = False) -> list[MediQCase]:
    """Read MediQ cases from a JSON Lines file.

    Args:
        path: the ``.jsonl`` file (one case per line: ``id``, ``question``, ``context``, ``options``, ``answer``,
            ``answer_idx``, ``facts``, ``patient``).
        skip_invalid: skip bad lines and bad records instead of raising; each is described in ``problems``.
        problems: a list that receives one line per skipped line or record.
        allow_empty: accept a file with no valid cases (otherwise that is an error).

    Returns:
        The valid cases, in file order.

    Raises:
        InputError: a line is not a JSON object, a field is missing or malformed, an option letter is not A-D
            or ``answer_idx`` is not A-D (unless ``skip_invalid``). The message names the file, the record (its
            ``id`` when it has one, else its position, counting from 1) and the field.
    """
    reported: list[str] = []
    rows = read_jsonl(path, skip_invalid=skip_invalid, problems=reported)
    cases: list[MediQCase] = []
    for position, row in enumerate(rows, start=1):
        record = row.get("id", f"#{position}")
        try:
            cases.append(MediQCase.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            message = "missing" if first.get("type") == "missing" else first.get("msg", "invalid").removeprefix(
                "Value error, ")
            error = InputError(message, file=str(path), record=record, field=_field_of(first))
            if not skip_invalid:
                raise error from None
            reported.append(f"{error} (record skipped)")
    if problems is not None:
        problems.extend(reported)
    return require_records(cases, path, allow_empty, "MediQ cases", len(reported))


# =========================================================================================================
# Partition: keyword rules
# =========================================================================================================
_I = re.IGNORECASE
_AGE = re.compile(r"\b\d+(?:\.\d+)?[- ](?:year|month|week|day)s?[- ]old\b|\b\d+\s+years?\s+of\s+age\b|"
                  r"\baged\s+\d+\b", _I)
_IDENTITY = re.compile(
    r"^(?:the patient|the (?:man|woman|boy|girl|child|infant)|he|she|this patient)\s+is\s+(?:an?\s+)?"
    r"(?:[\w-]+\s+){0,3}?(?:man|woman|male|female|boy|girl|infant|baby|child|toddler|adolescent|teenager|"
    r"neonate|newborn|gentleman|lady|hispanic|latino|latina|asian|white|black|caucasian|african american|"
    r"native american)\.?$", _I)

_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("imaging", re.compile(r"\b(?:CT|MRI|PET)\b")),
    ("imaging", re.compile(
        r"\b(?:x-?rays?|radiograph\w*|computed tomography|magnetic resonance|ultrasound\w*|ultrasonograph\w*|"
        r"sonograph\w*|echocardiogra\w*|imaging|scans?|mammogra\w*|angiogra\w*|fluoroscop\w*|dermoscop\w*|"
        r"dermatoscop\w*|doppler)\b", _I)),
    ("vital signs", re.compile(
        r"\b(?:temperature|afebrile|febrile|overweight|obese|heart rate|pulse|blood pressure|mm\s*hg|"
        r"respiratory rate|respirations|breaths|oxygen saturation|o2 sat\w*|spo2|pulse oximetry|bmi|"
        r"body mass index|vital signs?|beats per minute|bpm|weighs|height)\b|\d\s*°\s*[CF]\b|"
        r"\bweight (?:of|is|was) \d", _I)),
    ("medication", re.compile(
        r"\b(?:medications?|medicines?|drugs?|creams?|ointments?|lotions?|gels?|topical|topically|oral|orally|"
        r"tablets?|capsules?|pills?|doses?|dosage|prescri\w*|treated|treatments?|therap(?:y|ies)|antibiotics?|"
        r"antifungals?|antivirals?|antihistamines?|steroids?|corticosteroids?|hydrocortisone|isotretinoin|"
        r"retinoids?|methotrexate|insulin|vaccin\w*|immuniz\w*|injections?|over-the-counter|takes|taking|took|"
        r"using|used(?! to)|applied|applying|started on)\b|\b\d+\s*mg\b(?!/)|"
        r"\b\w+(?:cillin|mycin|micin|cycline|azole|floxacin|statin|pril|sartan|olol|dipine|prazole|mab|nib|"
        r"tretinoin|solone|sone)\b", _I)),
    ("laboratory", re.compile(
        r"\b(?:biops\w*|histopatholog\w*|patholog\w*|histolog\w*|cultures?|cultured|serolog\w*|blood work|"
        r"blood tests?|blood counts?|laborator\w*|labs?|tests?|testing|tested|assays?|panel|titers?|antibod\w*|"
        r"antigens?|pcr|koh|potassium hydroxide|smears?|stain\w*|immunofluorescen\w*|immunohistochem\w*|"
        r"microscop\w*|cytolog\w*|scrapings?|aspirat\w*|urinalysis|hemoglobin|hematocrit|platelets?|"
        r"leukocyt\w*|white (?:blood )?cells?|glucose|creatinine|esr|crp|c-reactive|sedimentation|ana|rpr|vdrl|"
        r"levels?|results?|immunoglobulin\w*|gammopathy|anemia|leukopenia|deposits?)\b|\bIg[ADEGM]\b", _I)),
    ("history", re.compile(
        r"\b(?:history|histories|past medical|previously|previous|prior|diagnosed|family|mother|father|sister|"
        r"brother|son|daughter|siblings?|parents?|grandmother|grandfather|relatives?|surgery|surgical|"
        r"hospitali[sz]\w*|admitted|pregnan\w*|premature|prematurity|birth\w*|born|otherwise healthy|"
        r"medical (?:problems|conditions)|comorbid\w*|diabetes|hypertension|asthma|cancer|hospital|"
        r"emergency room|injur\w*|accident|recovery|breastfed|pediatrician|evaluated|referral|referred|healthy|"
        r"childhood|episodes?)\b", _I)),
    ("other", re.compile(
        r"\b(?:occupation|works?|worker|working|job|employ\w*|student|farmer|teacher|travel\w*|trip|hik\w*|"
        r"camping|swim\w*|garden\w*|yardwork|pets?|dogs?|cats?|animals?|smok\w*|tobacco|alcohol|drinks?|"
        r"sexual\w*|partners?|lives|living|exposure|exposed|outdoors?|outdoor\w*|wears?)\b", _I)),
    ("physical exam", re.compile(
        r"\b(?:exam\w*|physical|palpat\w*|auscultat\w*|inspection|reveals?|revealed|shows?|showed|identified|"
        r"observed|appreciated|visible|palpable|on inspection|noted|found)\b|^there (?:is|are|was|were)\b", _I)),
    ("symptoms", re.compile(
        r"\b(?:pain\w*|aches?|aching|itch\w*|prurit\w*|fevers?|chills|sweats?|nausea|vomit\w*|diarrh\w*|cough\w*|"
        r"fatigue|tired\w*|malaise|weight loss|headaches?|dizz\w*|burning|stinging|sensations?|numb\w*|"
        r"tingl\w*|bleed\w*|discharge|dysuria|symptom\w*|complain\w*|reports?|reported|denie[sd]|deny|"
        r"notice[sd]?|felt|feels?|started|began|begins|appeared|worse\w*|improv\w*|recur\w*|presents?|"
        r"presented|concern\w*|develop\w*|occur\w*|experienc\w*|gets|review of systems|lost weight)\b", _I)),
    ("physical exam", re.compile(
        r"\b(?:lesions?|papul\w*|macul\w*|plaques?|patch(?:es)?|nodul\w*|nodes?|vesic\w*|pustul\w*|bullae?|"
        r"bullous|blisters?|erythem\w*|scal(?:e|es|y|ing)|crust\w*|ulcer\w*|erosions?|located|distribution|"
        r"border\w*|demarcated|annular|hyperpigment\w*|hypopigment\w*|lymphadenopathy|tender\w*|nontender|"
        r"firm|induration|atroph\w*|scar\w*|colou?r\w*|swollen|swelling|spots?|bumps?|discolou?r\w*|growths?|"
        r"boils?|redness|thicken\w*|dystroph\w*|tumou?rs?|mass|masses|affected areas?|measures?|size|"
        r"pigment\w*|normal|red|warm|erythematous)\b", _I)),
    ("symptoms", re.compile(r"\b(?:rash\w*|eruption|outbreaks?)\b", _I)),
)
_PRESENTING = re.compile(r"\b(?:present(?:s|ed|ing)?\b|complain\w*|concern\w*|comes? to|came to|brought|seeks?|"
                         r"sought|referred|evaluation)", _I)


def is_demographic(text: str) -> bool:
    """Whether a fact is about who the patient is: an age (``22-year-old``, ``38 years old``, ``aged 40``) or a
    bare statement of sex, kind of person or ethnicity (``The patient is a woman.``, ``She is Hispanic.``)."""
    text = text.strip()
    return bool(_AGE.search(text) or _IDENTITY.match(text))


def classify_fact(text: str) -> str:
    """The department a fact belongs to, by ordered keyword rules (the first rule that matches wins).

    1. ``demographics`` (:data:`DEMOGRAPHICS`; shared, see :func:`is_demographic`): an age or a bare identity
       statement.
    2. ``imaging``: x-ray, radiograph, CT, MRI, PET, ultrasound, echocardiogram, scan, angiography, dermoscopy.
    3. ``vital signs``: temperature, (a)febrile, overweight/obese, heart rate, pulse, blood pressure, mm Hg,
       respiratory rate, oxygen saturation, BMI, weight/height values, ``39 °C``.
    4. ``medication``: medication, drug, cream, ointment, topical, oral, dose, prescribed, treatment, therapy,
       antibiotic, steroid, takes/taking/used/applied, ``N mg``, and drug-name suffixes (-cillin, -mycin,
       -cycline, -azole, -statin, -pril, -olol, -mab, -sone, ...).
    5. ``laboratory``: biopsy, pathology, histology, culture, serology, blood work/test/count, lab, test, assay,
       titer, antibody, PCR, KOH, smear, stain, immunofluorescence, microscopy, common analytes, levels, results,
       immunoglobulins (IgA, ...), gammopathy, anemia, leukopenia, deposits.
    6. ``history``: history, past medical, previous/prior, diagnosed, family and relatives, surgery,
       hospitalization, emergency room, injury, accident, pregnancy, birth and prematurity, breastfeeding,
       pediatrician, evaluated/referred, "healthy", childhood, (previous) episodes, chronic conditions.
    7. ``other`` (social and exposure facts): occupation and work, student, travel, hiking, swimming,
       gardening, animals, smoking, alcohol, sexual history, partners, living situation, exposure, clothing.
    8. ``physical exam`` (explicit): exam/examination, physical, palpation, auscultation, reveals, shows,
       identified, observed, visible, palpable, noted, found, and sentences starting "There is/are".
    9. ``symptoms``: pain, itch, pruritus, fever, chills, sweats, nausea, cough, fatigue, burning, bleeding,
       discharge, symptom, complains, reports, denies, noticed, felt, started, began, appeared, worse, recurrent,
       presents, concern, developed, occurs, experienced, review of systems, lost weight.
    10. ``physical exam`` (findings): lesion, papule, macule, plaque, patch, nodule, vesicle, pustule, bulla,
        erythema, scale, crust, ulcer, located, distribution, border, hyper-/hypopigmented, lymph node,
        tender/nontender, firm, induration, atrophy, scar, colour, swelling, spot, bump, discoloration, growth,
        boil, redness, thickening, dystrophy, tumour, mass, affected area, measures, size, pigment, normal, red,
        warm.
    11. ``symptoms``: rash, eruption, outbreak.
    12. ``other``: anything else.

    The chief complaint is positional, not a keyword class: :func:`partition_case` puts it in the shared context.

    Args:
        text: one atomic fact.

    Returns:
        ``"demographics"`` or one of :data:`DEPARTMENTS`.
    """
    if is_demographic(text):
        return DEMOGRAPHICS
    for department, pattern in _RULES:
        if pattern.search(text):
            return department
    return "other"


@dataclass(frozen=True)
class CasePartition:
    """How a case's facts are distributed.

    Attributes:
        shared: the facts in the shared context (demographics and the chief complaint), in case order.
        agents: ``(department, facts)`` per agent, in :data:`DEPARTMENTS` order.
    """

    shared: tuple[str, ...]
    agents: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def shared_context(self) -> str:
        return " ".join(self.shared)

    @property
    def roles(self) -> list[str]:
        return [role for role, _ in self.agents]


def chief_complaint_index(facts: Sequence[str]) -> int | None:
    """The position of the chief complaint: the first of the first three facts that states the presentation
    (``presents``, ``complains``, ``concern``, ``comes to``, ``brought``, ``referred``, ...), else the first
    non-demographic fact (``None`` if every fact is demographic)."""
    for index, fact in enumerate(facts[:3]):
        if _PRESENTING.search(fact):
            return index
    return next((i for i, fact in enumerate(facts) if not is_demographic(fact)), None)


def partition_case(facts: Sequence[str], min_agents: int = 3, max_agents: int = len(DEPARTMENTS),
                   min_agent_facts: int = 1) -> CasePartition | str:
    """Distribute a case's facts over department agents and the shared context.

    Demographic facts and the chief complaint (:func:`chief_complaint_index`) go to the shared context; every
    other fact goes to the department :func:`classify_fact` names. Each department with facts becomes an agent.
    Departments with fewer than ``min_agent_facts`` facts are merged into ``other`` (smallest first, later
    departments first on ties) as long as at least ``min_agents`` agents remain; then, while there are more
    than ``max_agents`` agents, the smallest is merged into ``other``.

    Args:
        facts: the case's atomic facts.
        min_agents: the fewest agents an instance may have.
        max_agents: the most agents an instance may have (at least ``min_agents``).
        min_agent_facts: departments smaller than this are merged into ``other`` when the count allows it.

    Returns:
        The partition, or a string saying why the case cannot be partitioned (too few departments).
    """
    if min_agents < 1 or max_agents < min_agents:
        raise ConfigError(f"need 1 <= min_agents <= max_agents (got {min_agents}, {max_agents})")
    complaint = chief_complaint_index(facts)
    shared: list[str] = []
    groups: dict[str, list[str]] = {}
    for index, fact in enumerate(facts):
        department = classify_fact(fact)
        if department == DEMOGRAPHICS or index == complaint:
            shared.append(fact)
        else:
            groups.setdefault(department, []).append(fact)
    order = {department: i for i, department in enumerate(DEPARTMENTS)}

    def merge_smallest(allowed: Iterable[str]) -> bool:
        candidates = sorted(allowed, key=lambda d: (len(groups[d]), -order[d]))
        if not candidates:
            return False
        victim = candidates[0]
        groups.setdefault("other", []).extend(groups.pop(victim))
        return True

    while len(groups) > min_agents:
        small = [d for d in groups if d != "other" and len(groups[d]) < min_agent_facts]
        if not small:
            break
        if "other" not in groups and len(small) < 2:
            break  # merging one department into a new "other" gains nothing
        merge_smallest(small)
    while len(groups) > max_agents and merge_smallest(d for d in groups if d != "other"):
        pass
    if len(groups) < min_agents:
        found = ", ".join(f"{d} ({len(groups[d])})" for d in sorted(groups, key=order.__getitem__)) or "none"
        return f"only {len(groups)} department(s) with facts ({found}); need at least {min_agents} agents"
    # facts merged into "other" keep their case order
    position = {fact: i for i, fact in enumerate(facts)}
    agents = tuple((d, tuple(sorted(groups[d], key=position.__getitem__))) for d in sorted(groups, key=order.get))
    return CasePartition(shared=tuple(shared), agents=agents)


# =========================================================================================================
# Shared helpers for both builders
# =========================================================================================================
@dataclass
class BuildReport:
    """What a builder did beyond the instances it returned.

    Attributes:
        built: the number of instances built.
        skipped: ``{"case_id", "reason"}`` per skipped case.
        rejections: ``{"case_id", "attempt", "reason"}`` per rejected LM attempt (LM builder only).
        failures: ``{"case_id", "error"}`` per case whose LM calls raised (LM builder only; also in ``skipped``).
    """

    built: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences (at ``.``, ``!`` or ``?`` followed by a capital letter or a digit)."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", text.strip())
    return [p.strip() for p in parts if len(p.strip()) > 3]


def _balanced_t2(rng: random.Random, false: list[str], reliable: list[str], max_t2_facts: int,
                 preferred: Sequence[str] = (), originals: dict[str, str] | None = None) -> list[T2Fact]:
    """``n`` false statements (label 0) and ``n`` reliable facts (label 1), shuffled, with
    ``n = min(#false, #reliable, max_t2_facts // 2)``.

    The reliable facts are, in order of preference: the originals of the sampled false statements
    (``originals`` maps a false statement to the fact it corrupts), the ``preferred`` facts, then a random sample
    of the rest of ``reliable``.
    """
    originals = originals or {}
    false = list(dict.fromkeys(false))
    excluded = {t.lower() for t in false}
    pool = [t for t in dict.fromkeys([*preferred, *reliable]) if t.lower() not in excluded]
    n = min(len(false), len(pool), max_t2_facts // 2)
    zeros = rng.sample(false, n)
    first = list(dict.fromkeys([originals[z] for z in zeros if originals.get(z) in pool]
                               + [t for t in preferred if t in pool]))[:n]
    rest = [t for t in pool if t not in first]
    ones = first + rng.sample(rest, n - len(first))
    facts = [T2Fact(text=t, label=1) for t in ones] + [T2Fact(text=t, label=0) for t in zeros]
    rng.shuffle(facts)
    return facts


def _check_t2_budget(max_t2_facts: int) -> None:
    if max_t2_facts < 2:
        raise ConfigError(f"max_t2_facts must be at least 2 (one fact per label), got {max_t2_facts}")


def _agents(partition: CasePartition, replace: dict[int, str] | None = None) -> list[AgentEvidence]:
    replace = replace or {}
    return [AgentEvidence(agent=i, role=role, evidence=replace.get(i, " ".join(facts)))
            for i, (role, facts) in enumerate(partition.agents)]


# =========================================================================================================
# Rule builder
# =========================================================================================================
def _corrupt_new(text: str, rng: random.Random, forbidden: set[str]) -> Corruption | None:
    """A corruption of ``text`` whose result is not one of the case's facts (compared case-insensitively)."""
    corruption = corrupt_fact_detailed(text, rng)
    if corruption is None or corruption.corrupted.lower() in forbidden:
        return None
    return corruption


def _build_rule_case(case: MediQCase, seed: int, min_agents: int, max_agents: int, min_agent_facts: int,
                     max_t2_facts: int) -> OffQueryInstance | str:
    partition = partition_case(case.facts, min_agents, max_agents, min_agent_facts)
    if isinstance(partition, str):
        return partition
    rng = random.Random(f"{seed}:{case.id}")
    corruptible = [[j for j, fact in enumerate(facts) if applicable_strategies(fact)]
                   for _, facts in partition.agents]
    candidates = [i for i, found in enumerate(corruptible) if found]
    if not candidates:
        return "no agent has a fact the corruption rules can change"
    misleading = rng.choice(candidates)
    role, facts = partition.agents[misleading]
    forbidden = {fact.lower() for fact in case.facts}

    # 1-3 of the misleading agent's facts are replaced by corrupted versions; when no other agent has a
    # corruptible fact, one of the misleading agent's is kept back for the shared context
    others = [(i, j) for i, found in enumerate(corruptible) if i != misleading for j in found]
    available = len(corruptible[misleading]) - (0 if others else 1)
    if available < 1:
        return "only one fact can be corrupted, but the agent and the shared context each need one"
    wanted = rng.randint(1, min(3, available))
    order = rng.sample(corruptible[misleading], len(corruptible[misleading]))
    in_agent: dict[int, Corruption] = {}
    for j in order:
        if len(in_agent) == wanted:
            break
        corruption = _corrupt_new(facts[j], rng, forbidden)
        if corruption is not None:
            in_agent[j] = corruption
            forbidden.add(corruption.corrupted.lower())
    if not in_agent:
        return f"no corruption of the {role} agent's facts differs from every fact of the case"
    evidence = " ".join(in_agent[j].corrupted if j in in_agent else fact for j, fact in enumerate(facts))

    # 1-2 corrupted facts from other agents' domains join the shared context (the misleading agent's own
    # uncorrupted facts are the fallback when no other agent has a corruptible fact)
    pool = others or [(misleading, j) for j in corruptible[misleading] if j not in in_agent]
    wanted_shared = rng.randint(1, 2)
    in_shared: list[tuple[int, Corruption]] = []
    for i, j in rng.sample(pool, len(pool)):
        if len(in_shared) == wanted_shared:
            break
        corruption = _corrupt_new(partition.agents[i][1][j], rng, forbidden)
        if corruption is not None:
            in_shared.append((i, corruption))
            forbidden.add(corruption.corrupted.lower())
    if not in_shared:
        return "no fact outside the misleading agent's corrupted ones can be corrupted for the shared context"
    corrupted_context = " ".join([partition.shared_context, *(c.corrupted for _, c in in_shared)]).strip()

    agent_corruptions = [in_agent[j] for j in sorted(in_agent)]
    false = [c.corrupted for c in agent_corruptions] + [c.corrupted for _, c in in_shared]
    originals = {c.corrupted: c.original for c in [*agent_corruptions, *(c for _, c in in_shared)]}
    t2 = _balanced_t2(rng, false, list(case.facts), max_t2_facts, originals=originals)
    corrupted = ([{**c.as_dict(), "target": "agent", "agent": misleading, "role": role} for c in agent_corruptions]
                 + [{**c.as_dict(), "target": "shared", "agent": i, "role": partition.agents[i][0]}
                    for i, c in in_shared])
    return OffQueryInstance(
        id=f"mediq-{case.id}-rule-s{seed}",
        domain="healthcare",
        agents=_agents(partition, {misleading: evidence}),
        shared_context=partition.shared_context,
        corrupted_context=corrupted_context,
        question=case.question,
        options=dict(case.options),
        answer=case.gold,
        wrong_answer=None,
        misleading=[misleading],
        t2_facts=t2,
        variant="main",
        provenance={"source": "mediq", "case_id": case.id, "builder": "rule", "seed": seed, "corrupted": corrupted},
    )


def build_rule(cases: Iterable[MediQCase], seed: int = 0, min_agents: int = 3, max_agents: int = len(DEPARTMENTS),
               max_t2_facts: int = 10, min_agent_facts: int = 1,
               report: BuildReport | None = None) -> list[OffQueryInstance]:
    """Build OffQuery instances from MediQ cases with deterministic rules (no LM).

    Per case: the facts are partitioned with :func:`partition_case` (one agent per department with facts; the
    shared context is the demographics and the chief complaint). The misleading agent is chosen with
    ``random.Random(f"{seed}:{case.id}")`` among the agents that hold at least one fact
    :func:`~groundstate.eval.benchmarks.offquery.corruption.corrupt_fact` can change; 1-3 of its facts are replaced by
    corrupted versions in its evidence. The corrupted shared context is the reliable shared context followed by
    1-2 corrupted versions of facts from *other* agents' domains, stated as if known: this makes the shared
    context conflict with the reliable global state (and with a reliable agent), as the paper's corrupted
    shared context does, while the misleading agent stays the only misleading private source. T2 facts are the
    corrupted statements (label 0) and reliable facts (label 1, the originals of the sampled corruptions first),
    in equal numbers, at most ``max_t2_facts`` in all, sampled and shuffled with the same random source.

    The rule builder corrupts facts, not the decision: it does **not** target a particular wrong option, so
    ``wrong_answer`` is ``None`` (use :func:`build_lm` for instances that push a chosen wrong option).

    Cases that cannot be built (too few departments, nothing corruptible) are skipped; each is logged and, when
    ``report`` is given, recorded in ``report.skipped``.

    Args:
        cases: MediQ cases (:func:`load_mediq`).
        seed: the seed; the same seed gives identical instances.
        min_agents: the fewest agents per instance.
        max_agents: the most agents per instance.
        max_t2_facts: the most T2 facts per instance (at least 2).
        min_agent_facts: see :func:`partition_case`.
        report: receives the number built and the skipped cases with reasons.

    Returns:
        One instance per buildable case, in case order, with ids ``mediq-<case id>-rule-s<seed>``.
    """
    _check_t2_budget(max_t2_facts)
    report = report if report is not None else BuildReport()
    instances = []
    for case in cases:
        result = _build_rule_case(case, seed, min_agents, max_agents, min_agent_facts, max_t2_facts)
        if isinstance(result, str):
            logger.info("mediq rule builder: case %s skipped: %s", case.id, result)
            report.skipped.append({"case_id": case.id, "reason": result})
            continue
        instances.append(result)
    report.built += len(instances)
    return instances


# =========================================================================================================
# LM builder
# =========================================================================================================
def _validate_lm_output(prediction: Any, case: MediQCase, shared_context: str) -> str | None:
    """Why an LM builder output is unusable, or ``None`` if it is usable."""
    wrong = getattr(prediction, "wrong_answer", None)
    if wrong not in LETTERS:
        return f"wrong_answer {wrong!r} is not an option letter"
    if wrong == case.gold:
        return f"the 'incorrect' decision {wrong} is the correct answer"
    misleading = (getattr(prediction, "misleading_text", None) or "").strip()
    if not misleading:
        return "the misleading evidence is empty"
    if not getattr(prediction, "conflicts", False):
        return "the conflict check found no conflict between the misleading evidence and the reliable context"
    corrupted = (getattr(prediction, "corrupted_context", None) or "").strip()
    if not corrupted:
        return "the corrupted shared context is empty"
    if corrupted == shared_context.strip():
        return "the corrupted shared context is the reliable one"
    if case.options[wrong].strip().lower() in corrupted.lower():
        return f"the corrupted shared context names the incorrect option ({case.options[wrong]})"
    return None


def _attempt_context(attempt: int):
    """Later attempts use a fresh rollout at temperature 1 so a retry is not served from the cache."""
    import dspy

    lm = dspy.settings.lm
    if attempt == 0 or lm is None or not hasattr(lm, "copy"):
        return contextlib.nullcontext()
    return dspy.context(lm=lm.copy(rollout_id=attempt, temperature=1.0))


def _build_lm_case(case: MediQCase, builder: Any, seed: int, max_retries: int, min_agents: int, max_agents: int,
                   min_agent_facts: int, max_t2_facts: int, rejections: list[dict]) -> OffQueryInstance | str:
    partition = partition_case(case.facts, min_agents, max_agents, min_agent_facts)
    if isinstance(partition, str):
        return partition
    rng = random.Random(f"{seed}:{case.id}:lm")
    misleading = rng.randrange(len(partition.agents))
    role, facts = partition.agents[misleading]
    shared = partition.shared_context
    prediction, attempts = None, 0
    for attempt in range(max_retries + 1):
        attempts = attempt + 1
        with _attempt_context(attempt):
            candidate = builder(case_context=case.context_text, question=case.question, options=dict(case.options),
                                correct_answer=case.gold, department=role, department_facts=" ".join(facts),
                                shared_context=shared)
        reason = _validate_lm_output(candidate, case, shared)
        if reason is None:
            prediction = candidate
            break
        logger.info("mediq LM builder: case %s attempt %d rejected: %s", case.id, attempts, reason)
        rejections.append({"case_id": case.id, "attempt": attempts, "reason": reason})
    if prediction is None:
        return f"every LM attempt was rejected ({attempts} attempt(s))"
    misleading_text = prediction.misleading_text.strip()
    reliable = {f.lower() for f in case.facts}
    false = [s for s in split_sentences(misleading_text) if s.lower() not in reliable] or [misleading_text]
    t2 = _balanced_t2(rng, false, list(case.facts), max_t2_facts, preferred=facts)
    case_rejections = [r for r in rejections if r["case_id"] == case.id]
    return OffQueryInstance(
        id=f"mediq-{case.id}-lm-s{seed}",
        domain="healthcare",
        agents=_agents(partition, {misleading: misleading_text}),
        shared_context=shared,
        corrupted_context=prediction.corrupted_context.strip(),
        question=case.question,
        options=dict(case.options),
        answer=case.gold,
        wrong_answer=prediction.wrong_answer,
        misleading=[misleading],
        t2_facts=t2,
        variant="main",
        provenance={
            "source": "mediq", "case_id": case.id, "builder": "lm", "seed": seed, "department": role,
            "replaced_facts": list(facts), "reason": getattr(prediction, "reason", None),
            "conflicting_points": list(getattr(prediction, "conflicting_points", None) or []),
            "attempts": attempts, "rejections": [{k: r[k] for k in ("attempt", "reason")} for r in case_rejections],
        },
    )


def build_lm(cases: Iterable[MediQCase], seed: int = 0, builder: Any = None, max_retries: int = 1,
             skip_failed: bool = True, min_agents: int = 3, max_agents: int = len(DEPARTMENTS),
             max_t2_facts: int = 10, min_agent_facts: int = 1, threads: int = 4,
             report: BuildReport | None = None) -> list[OffQueryInstance]:
    """Build OffQuery instances from MediQ cases with an LM (appendix B.2), using the LM in ``dspy.settings``.

    The agents are the rule builder's partition (:func:`partition_case`); the misleading agent is chosen with
    ``random.Random(f"{seed}:{case.id}:lm")`` among all agents. The builder program
    (:class:`~groundstate.programs.reground.builder.OffQueryLMBuilder`) fabricates an incorrect decision and
    misleading evidence for that agent's department, writes a corrupted shared context that supports the
    incorrect decision without naming it, and checks that the misleading evidence conflicts with the reliable
    case. An attempt is rejected when the "incorrect" decision is the gold answer, the check finds no conflict,
    the misleading evidence or the corrupted context is empty, the corrupted context equals the reliable one or
    names the incorrect option; a rejected case is retried up to ``max_retries`` times (each retry at a fresh
    rollout, temperature 1) and skipped when every attempt is rejected.

    The misleading agent's evidence is the LM's text; ``corrupted_context`` and ``wrong_answer`` come from the LM.
    T2 facts: reliable facts (label 1; the replaced department facts first) and the sentences of the misleading
    evidence (label 0), balanced, at most ``max_t2_facts``. Rejected attempts are listed in each instance's
    ``provenance["rejections"]`` and, with every skipped or failed case, in ``report``.

    Args:
        cases: MediQ cases.
        seed: the seed (choice of misleading agent, T2 sampling).
        builder: the program; default a fresh ``OffQueryLMBuilder()``.
        max_retries: extra attempts after a rejected one.
        skip_failed: when the LM raises on a case, log it and skip the case (``False`` re-raises).
        min_agents, max_agents, min_agent_facts: see :func:`partition_case`.
        max_t2_facts: the most T2 facts per instance (at least 2).
        threads: cases processed concurrently.
        report: receives the number built, skipped cases, rejected attempts and failures.

    Returns:
        One instance per case that was built, in case order, with ids ``mediq-<case id>-lm-s<seed>``.
    """
    from groundstate.concurrency import thread_map
    from groundstate.programs.reground.builder import OffQueryLMBuilder

    _check_t2_budget(max_t2_facts)
    if max_retries < 0:
        raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
    builder = builder if builder is not None else OffQueryLMBuilder()
    report = report if report is not None else BuildReport()
    cases = list(cases)

    def one(case: MediQCase) -> tuple[OffQueryInstance | str, list[dict], str | None]:
        rejections: list[dict] = []
        try:
            result = _build_lm_case(case, builder, seed, max_retries, min_agents, max_agents, min_agent_facts,
                                    max_t2_facts, rejections)
            return result, rejections, None
        except Exception as exc:  # an LM failure on one case never aborts the build
            if not skip_failed:
                raise
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("mediq LM builder: case %s failed and was skipped: %s", case.id, error)
            return f"LM failure: {error}", rejections, error

    instances = []
    for case, (result, rejections, error) in zip(cases, thread_map(one, cases, max_workers=threads), strict=True):
        report.rejections.extend(rejections)
        if error is not None:
            report.failures.append({"case_id": case.id, "error": error})
        if isinstance(result, str):
            if error is None:
                logger.info("mediq LM builder: case %s skipped: %s", case.id, result)
            report.skipped.append({"case_id": case.id, "reason": result})
            continue
        instances.append(result)
    report.built += len(instances)
    return instances


# =========================================================================================================
# HEALTHCARE-S / HEALTHCARE-I
# =========================================================================================================
def tag_sufficiency(instances: Iterable[OffQueryInstance], lm: Any = None, threads: int = 4) -> list[OffQueryInstance]:
    """Tag each instance HEALTHCARE-S or HEALTHCARE-I (appendix D.1).

    An LM answers the question (``ChooseOption``) from the *reliable shared context only*; the instance's
    ``split`` becomes ``"healthcare-s"`` when the answer is correct (the shared information suffices) and
    ``"healthcare-i"`` otherwise. The chosen letter is kept in ``provenance["sufficiency"]``. When the LM fails
    on an instance, its ``split`` is ``None``, the error is in ``provenance["split_error"]`` and a warning is
    logged; the other instances are still tagged.

    Args:
        instances: the instances (not modified; tagged copies are returned).
        lm: the LM to ask; default the LM in ``dspy.settings``. The paper uses GPT-4o at temperature 0.
        threads: instances asked concurrently.

    Returns:
        Tagged copies, in the same order.

    Raises:
        ConfigError: no LM is given or configured.
    """
    import dspy

    from groundstate.concurrency import thread_map
    from groundstate.records import default_question
    from groundstate.signatures.resolution import ChooseOption

    if lm is None and dspy.settings.lm is None:
        raise ConfigError("tag_sufficiency needs an LM: pass lm= or configure one with dspy.configure/dspy.context")
    predictor = dspy.Predict(ChooseOption)

    def ask(instance: OffQueryInstance) -> OffQueryInstance:
        provenance = {k: v for k, v in instance.provenance.items() if k not in ("split_error", "sufficiency")}
        try:
            answer = predictor(information=instance.shared_context,
                               question=instance.question or default_question(instance.domain),
                               options=options_text(instance.options)).answer
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("tag_sufficiency: instance %s left untagged: %s", instance.id, error)
            return instance.model_copy(update={"split": None, "provenance": {**provenance, "split_error": error}})
        correct = answer == instance.answer
        provenance["sufficiency"] = {"answer": answer, "correct": correct}
        return instance.model_copy(update={"split": SPLIT_SUFFICIENT if correct else SPLIT_INSUFFICIENT,
                                           "provenance": provenance})

    with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
        tagged = thread_map(ask, list(instances), max_workers=threads)
    failures = sum(1 for t in tagged if t.split is None)
    if failures:
        logger.warning("tag_sufficiency: %d of %d instances could not be tagged", failures, len(tagged))
    return tagged
