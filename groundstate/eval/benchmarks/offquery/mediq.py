"""OffQuery healthcare instances from MediQ cases (OffQuery §3.2, appendix B.1-B.3, D.1).

A MediQ case is a patient description, a question, four options and the gold answer, with the description
split into numbered atomic facts. This module turns cases into :class:`~groundstate.records.OffQueryInstance`
records in which the facts are distributed over department agents, one agent holds misleading evidence and the
shared context comes in a reliable and a corrupted version.

* :func:`load_mediq` reads MediQ JSON Lines into :class:`MediQCase` records (bad input raises
  :class:`~groundstate.errors.InputError` naming the file, the record and the field).
* :func:`classify_fact` / :func:`partition_case` assign facts to departments with keyword rules.
* :func:`~groundstate.eval.benchmarks.offquery.mediq_rule.build_rule` is the deterministic, LM-free builder: it
  corrupts facts with :func:`~groundstate.eval.benchmarks.offquery.corruption.corrupt_fact`.
* :func:`~groundstate.eval.benchmarks.offquery.mediq_lm.build_lm` is the LM builder of appendix B.2, and
  :func:`~groundstate.eval.benchmarks.offquery.mediq_lm.tag_sufficiency` tags the HEALTHCARE-S / HEALTHCARE-I
  split of appendix D.1.

Both builders give the same records: ``domain="healthcare"``, ``variant="main"``, exactly one misleading agent,
balanced T2 facts (reliable facts labelled 1, false statements labelled 0; at most ``max_t2_facts``), and a
``provenance`` dict saying how the instance was made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from groundstate.errors import ConfigError, InputError
from groundstate.eval.io import read_jsonl, require_records
from groundstate.records import LETTERS, OptionLetter

DEPARTMENTS: tuple[str, ...] = (
    "symptoms", "history", "medication", "vital signs", "physical exam", "laboratory", "imaging", "other",
)
"""The department agents, in the order agents appear in an instance."""


DEMOGRAPHICS = "demographics"
"""What :func:`classify_fact` returns for a demographic fact (it goes to the shared context)."""


SPLIT_SUFFICIENT = "healthcare-s"


SPLIT_INSUFFICIENT = "healthcare-i"


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
