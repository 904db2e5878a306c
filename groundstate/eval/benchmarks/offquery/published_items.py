"""One published OffQuery item as an instance: the field table, its checks and the assumptions behind it.

The published data is one JSON list per file (``mediQ_easy.json``, ``mediQ_hard.json``, ``CrisisFact.json``).
Each item becomes one :class:`~groundstate.records.OffQueryInstance`:

============================================  =====================================================
published field                               instance field
============================================  =====================================================
``shuffled_private_information`` (in order)   ``agents`` (``agent`` = position, ``role`` inferred)
``misleading_idx``                            ``misleading = [misleading_idx]``
``shared_information``                        ``shared_context``
``unreliable_context``                        ``corrupted_context`` (``None`` if absent or empty)
``question``                                  ``question`` (``None`` when null or empty: disaster)
``options`` (``A``-``D``)                     ``options``
``golden_answer_idx``                         ``answer``
``golden_wrong_answer_idx``                   ``wrong_answer`` (``None`` if absent)
``id`` (optional)                             ``id`` (else ``"<file stem>-<position>"``)
``golden_answer``, ``golden_wrong_answer``,   ``provenance`` (with ``source``, ``file``, ``position``)
``malicious_information``,
``malicious_information_reason``,
``original_context``
``private_information[<misleading role>]``    ``provenance.misleading_reliable_evidence`` (``None``
                                              when the misleading agent has no inferred role)
============================================  =====================================================

T2 truth comes in a separate JSON list aligned by position, ``{"sampled_facts": [str], "golden_truth": [0|1]}``
per item; it becomes ``t2_facts``.

Assumptions (the published files do not state these; they are what a careful reader infers):

- **Roles.** An agent's role is the ``private_information`` category whose text equals the agent's text
  (exact match after stripping). The misleading agent's text is a corrupted version of one category's text,
  so it matches none; when the misleading agent is the only unmatched agent and exactly one category's text
  is absent from the shuffled list, that category is taken as the misleading agent's role. A category named
  ``shared`` is never a candidate. Otherwise the role is ``None``.
- **Domain.** ``original_ditributed_information`` (sic) is a role -> text dict for disaster response and a list
  of ``[text, category]`` pairs for healthcare; the domain is inferred from that unless ``domain`` is given.
- **Split.** The paper splits healthcare into HEALTHCARE-S and HEALTHCARE-I by shared-information sufficiency
  (whether GPT-4o answers correctly from the shared information alone). We take the split from the file name:
  ``*easy*`` -> ``healthcare-s``, ``*hard*`` -> ``healthcare-i``, ``*crisis*``/``*disaster*`` (or any
  disaster-domain item) -> ``disaster``; other names give ``None`` unless ``split`` is given.

Every problem with an item is an :class:`~groundstate.errors.InputError` whose one line names the file, the
record and the field (the published field, so the user can find it in the file). Reading the file, telling it
apart from other formats and aligning the T2 truth file is :mod:`~groundstate.eval.benchmarks.offquery.published`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundstate.conditions import CORRUPTED_CONDITIONS
from groundstate.errors import InputError
from groundstate.eval.benchmarks.offquery.validation import from_validation
from groundstate.records import LETTERS, AgentEvidence, OffQueryInstance, T2Fact

__all__ = ["DOMAINS", "ItemContext", "clean_dict", "infer_roles", "instance_from_item", "record_label",
           "split_from_name"]


DOMAINS: tuple[str, ...] = ("healthcare", "disaster")


# instance field -> published field, so validation errors name the field the user can find in the file
_SOURCE_FIELD = {
    "agents": "shuffled_private_information",
    "shared_context": "shared_information",
    "corrupted_context": "unreliable_context",
    "answer": "golden_answer_idx",
    "wrong_answer": "golden_wrong_answer_idx",
    "misleading": "misleading_idx",
    "t2_facts": "t2_truth",
}


@dataclass(frozen=True)
class ItemContext:
    """What every item of one published file is converted with."""

    path: Path
    t2_path: Path | None
    condition: str | None
    domain: str | None
    split: str | None

    @property
    def file(self) -> str:
        return str(self.path)


def record_label(item: dict, position: int) -> str | int:
    """``3``, or ``3 (id 'case-9')`` when the item carries its own id."""
    given = item.get("id")
    return position if given is None else f"{position} (id '{given}')"


def instance_from_item(item: dict, position: int, t2_entry: Any, ctx: ItemContext) -> OffQueryInstance:
    """Convert one published item; every problem is an :class:`InputError` naming this record."""
    record = record_label(item, position)

    def fail(message: str, field: str | None) -> InputError:
        return InputError(message, file=ctx.file, record=record, field=field)

    def text(key: str, required: bool = True, non_empty: bool = True) -> str | None:
        value = item.get(key)
        if value is None:
            if required:
                raise fail("is missing or null", key)
            return None
        if not isinstance(value, str):
            raise fail(f"must be a string (got {type(value).__name__})", key)
        if non_empty and not value.strip():
            if required:
                raise fail("must not be empty", key)
            return None
        return value

    domain = ctx.domain or _infer_domain(item, fail)

    agents_raw = item.get("shuffled_private_information")
    if agents_raw is None:
        raise fail("is missing or null", "shuffled_private_information")
    if not isinstance(agents_raw, list) or not agents_raw:
        raise fail("must be a non-empty list of the agents' private texts", "shuffled_private_information")
    for j, agent_text in enumerate(agents_raw):
        if not isinstance(agent_text, str) or not agent_text.strip():
            raise fail("must be a non-empty string", f"shuffled_private_information[{j}]")

    misleading = item.get("misleading_idx")
    if misleading is None:
        raise fail("is missing or null", "misleading_idx")
    if isinstance(misleading, bool) or not isinstance(misleading, int):
        raise fail(f"must be an integer index into shuffled_private_information (got {misleading!r})",
                   "misleading_idx")
    if not 0 <= misleading < len(agents_raw):
        raise fail(f"{misleading} is out of range for {len(agents_raw)} agents in shuffled_private_information",
                   "misleading_idx")

    private = clean_dict(item.get("private_information"))
    if private is None:
        raise fail("is missing or null", "private_information")
    if not isinstance(private, dict):
        raise fail("must be a category -> text object", "private_information")
    for category, value in private.items():
        if not isinstance(value, str):
            raise fail(f"must be a string (got {type(value).__name__})", f"private_information.{category}")

    options = clean_dict(item.get("options"))
    if options is None:
        raise fail("is missing or null", "options")
    if not isinstance(options, dict):
        raise fail("must be an object with the options A, B, C and D", "options")
    if sorted(options) != list(LETTERS):
        raise fail(f"must have exactly the letters A, B, C and D (got {', '.join(sorted(map(str, options)))})",
                   "options")
    for letter in LETTERS:
        if not isinstance(options[letter], str) or not options[letter].strip():
            raise fail("must be a non-empty string", f"options.{letter}")

    answer = item.get("golden_answer_idx")
    if answer is None:
        raise fail("is missing or null", "golden_answer_idx")
    if answer not in LETTERS:
        raise fail(f"must be one of A, B, C, D (got {answer!r})", "golden_answer_idx")
    wrong = item.get("golden_wrong_answer_idx")
    if wrong is not None and wrong not in LETTERS:
        raise fail(f"must be one of A, B, C, D (got {wrong!r})", "golden_wrong_answer_idx")
    if wrong is not None and wrong == answer:
        raise fail(f"must differ from golden_answer_idx (both are '{answer}')", "golden_wrong_answer_idx")

    shared = text("shared_information")
    corrupted = text("unreliable_context", required=False)
    if ctx.condition in CORRUPTED_CONDITIONS and corrupted is None:
        raise fail(f"is missing or empty, but condition '{ctx.condition}' needs the corrupted shared context "
                   "(use condition 'reliable')", "unreliable_context")
    question = text("question", required=False)

    given_id = item.get("id")
    if given_id is not None and (isinstance(given_id, bool) or not isinstance(given_id, str | int)):
        raise fail(f"must be a string or an integer (got {type(given_id).__name__})", "id")
    instance_id = str(given_id) if given_id is not None else f"{ctx.path.stem}-{position}"

    t2_facts = _t2_facts(t2_entry, position, ctx) if t2_entry is not None else []
    roles = infer_roles(agents_raw, private, misleading)
    provenance = {
        "source": "offquery",
        "file": ctx.path.name,
        "position": position,
        "golden_answer": item.get("golden_answer"),
        "golden_wrong_answer": item.get("golden_wrong_answer"),
        "malicious_information": item.get("malicious_information"),
        "malicious_information_reason": item.get("malicious_information_reason"),
        "original_context": item.get("original_context"),
    }
    # the text of the category the corruption took the place of (None for an extra misleading agent): the
    # misleading agent's reliable evidence under the reliable-private conditions (groundstate.conditions.under)
    replaced = private.get(roles[misleading]) if roles[misleading] is not None else None
    provenance["misleading_reliable_evidence"] = replaced if str(replaced or "").strip() else None
    try:
        return OffQueryInstance(
            id=instance_id,
            domain=domain,
            split=ctx.split if ctx.split is not None else split_from_name(ctx.path.name, domain),
            agents=[AgentEvidence(agent=j, role=roles[j], evidence=t) for j, t in enumerate(agents_raw)],
            shared_context=shared,
            corrupted_context=corrupted,
            question=question,
            options={letter: options[letter] for letter in LETTERS},
            answer=answer,
            wrong_answer=wrong,
            misleading=[misleading],
            t2_facts=t2_facts,
            variant="main",
            provenance=provenance,
        )
    except ValidationError as exc:
        raise from_validation(exc, ctx.file, record, rename=_SOURCE_FIELD) from None


def _infer_domain(item: dict, fail: Any) -> str:
    distributed = item.get("original_ditributed_information")
    if isinstance(distributed, dict):
        return "disaster"
    if isinstance(distributed, list):
        return "healthcare"
    if distributed is None:
        raise fail("is missing or null, so the domain cannot be inferred (pass domain=)",
                   "original_ditributed_information")
    raise fail("must be a role -> text object (disaster) or a list of [text, category] pairs (healthcare)",
               "original_ditributed_information")


def infer_roles(agent_texts: list[str], private_information: dict[str, str],
                misleading: int | None) -> list[str | None]:
    """The role of each agent, from the ``private_information`` categories.

    An agent whose text equals a category's text (after stripping) gets that category (each category is used
    once). When the misleading agent is the only unmatched agent and exactly one category (other than
    ``shared``) has no matching agent, that category is the misleading agent's role: its text is the one the
    corruption replaced. Every other unmatched agent gets ``None``.

    Args:
        agent_texts: the agents' private texts (``shuffled_private_information``), in order.
        private_information: category -> original text.
        misleading: the index of the misleading agent, if known.

    Returns:
        One role (or ``None``) per agent.
    """
    by_text: dict[str, list[str]] = {}
    for category, value in private_information.items():
        by_text.setdefault(value.strip(), []).append(category)
    roles: list[str | None] = []
    used: set[str] = set()
    for agent_text in agent_texts:
        free = [c for c in by_text.get(agent_text.strip(), []) if c not in used]
        roles.append(free[0] if free else None)
        if free:
            used.add(free[0])
    unmatched = [j for j, role in enumerate(roles) if role is None]
    unused = [c for c in private_information if c not in used and c.strip().lower() != "shared"]
    if misleading is not None and unmatched == [misleading] and len(unused) == 1:
        roles[misleading] = unused[0]
    return roles


def split_from_name(name: str, domain: str | None = None) -> str | None:
    """The split tag a published file name implies (see the module notes); ``None`` when it implies none."""
    lowered = Path(name).stem.lower()
    if "easy" in lowered:
        return "healthcare-s"
    if "hard" in lowered:
        return "healthcare-i"
    if "crisis" in lowered or "disaster" in lowered or domain == "disaster":
        return "disaster"
    return None


def _t2_facts(entry: Any, position: int, ctx: ItemContext) -> list[T2Fact]:
    """Validate one T2 truth entry; errors name the T2 file."""
    file = str(ctx.t2_path)

    def fail(message: str, field: str | None) -> InputError:
        return InputError(message, file=file, record=position, field=field)

    if not isinstance(entry, dict):
        raise fail("not a JSON object", None)
    facts, labels = entry.get("sampled_facts"), entry.get("golden_truth")
    if not isinstance(facts, list):
        raise fail("is missing or not a list of strings", "sampled_facts")
    if not isinstance(labels, list):
        raise fail("is missing or not a list of 0/1 labels", "golden_truth")
    if len(facts) != len(labels):
        raise fail(f"has {len(labels)} labels for {len(facts)} sampled_facts; they must be aligned", "golden_truth")
    for j, (fact, label) in enumerate(zip(facts, labels, strict=True)):
        if not isinstance(fact, str) or not fact.strip():
            raise fail("must be a non-empty string", f"sampled_facts[{j}]")
        if isinstance(label, bool) or label not in (0, 1):
            raise fail(f"must be 0 or 1 (got {label!r})", f"golden_truth[{j}]")
    return [T2Fact(text=fact, label=int(label)) for fact, label in zip(facts, labels, strict=True)]


def clean_dict(value: Any) -> Any:
    """Drop ``None`` values: an Arrow schema merges dict keys across rows and fills the missing ones with None."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value
