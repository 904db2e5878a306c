"""What ``groundstate optimize`` adds to a saved program's manifest, and ``groundstate evaluate`` reads back.

A program saved by ``optimize`` is an ordinary saved program (:mod:`groundstate.optimizers.artifacts`) whose
manifest also names the OffQuery task it was tuned for (``task``), the task's options (``task_options``, with
the ``condition``), the options the program and its scorer were built from (``build_args``) and the records it
was tuned on (``data``), the metric spec it was scored under (``metric_spec``: its T2 judge) and the LMs it was
tuned with (``lms``). :class:`OptimizedManifest` is that part of the manifest; ``evaluate`` validates it when
it reads the manifest, before any LM is built or any record loaded, so a field of the wrong type or a missing
one is one line naming the file and the field.

:class:`BuildArgs` mirrors today's options of ``run reground`` and the baselines (the choices are the ones the
command line offers, :data:`KEEP_RULES` ... :data:`ORACLE_ATTRIBUTIONS`). The first seven fields have been
written by every version of ``optimize`` and are required; the ones added later (``stop_early``,
``keep_rule``, ``mode``, ``oracle_attribution``, ``batch_facts``, ``statement_rule``, ``opinion_cap``,
``summarizer``, ``updater``) default to the behaviour of the programs saved before they existed
(``statement_rule``: ``refuted``, the rule before statement mode adjudicated, today's default being
``adjudicate``; ``opinion_cap``: on, today's default being off; ``summarizer``/``updater``: ``open``/``evidence``,
today's defaults being ``standard``; ``None`` means the program's own default). One difference cannot be
recovered: a Voting manifest from before Voting had an ``ordering`` recorded ``None``, which now reads as
Voting's new default (private-first) in the evaluation's run options, while the saved program itself is rebuilt
shared-first (its ``legacy_kwargs``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from groundstate.conditions import CONDITIONS
from groundstate.eval.metric_spec import MetricSpec, legacy_judge

KEEP_RULES = ("authors", "strict")
MODES = ("agent", "statement")
TOPOLOGIES = ("all-to-all", "chain", "tree")
ORDERINGS = ("shared-first", "private-first")
ORACLE_ATTRIBUTIONS = ("model", "gold")
STATEMENT_RULES = ("adjudicate", "refuted")
SUMMARIZERS = ("standard", "open")
UPDATERS = ("standard", "evidence")


class BuildArgs(BaseModel):
    """The program and scorer options a saved program was tuned with (``manifest.json``'s ``build_args``)."""

    model_config = ConfigDict(extra="forbid")

    max_candidates: StrictInt = Field(ge=1)
    multi_misleading: StrictBool
    oracle_t1: StrictBool
    rounds: StrictInt | None = Field(ge=1)
    topology: Literal[TOPOLOGIES]
    ordering: Literal[ORDERINGS] | None
    seed: StrictInt
    stop_early: StrictBool = False
    keep_rule: Literal[KEEP_RULES] = "authors"
    mode: Literal[MODES] = "agent"
    oracle_attribution: Literal[ORACLE_ATTRIBUTIONS] = "model"
    batch_facts: StrictBool = False
    statement_rule: Literal[STATEMENT_RULES] = "refuted"
    opinion_cap: StrictBool = True
    summarizer: Literal[SUMMARIZERS] | None = "open"
    updater: Literal[UPDATERS] | None = "evidence"


class TaskOptions(BaseModel):
    """``task_options``: the condition the program was tuned under, and the task's other options as recorded."""

    model_config = ConfigDict(extra="allow")

    condition: Literal[CONDITIONS] = "unreliable"


class SplitRecords(BaseModel):
    """One split of ``data``: the file, and the instance ids and source cases it held."""

    model_config = ConfigDict(extra="allow")

    file: StrictStr | None = None
    ids: list[StrictStr] = Field(default_factory=list)
    groups: list[StrictStr] = Field(default_factory=list)
    sha256: StrictStr | None = None


class TunedOn(BaseModel):
    """``data``: the train and (optional) validation records the program was tuned on."""

    model_config = ConfigDict(extra="allow")

    train: SplitRecords | None = None
    val: SplitRecords | None = None


class MetricRecord(BaseModel):
    """``metric``: the metric the program was tuned against, and its T2 judge's name."""

    model_config = ConfigDict(extra="allow")

    judge: StrictStr | None = None


class TunedWith(BaseModel):
    """``lms``: the LMs the program was tuned with: ``default`` (:func:`~groundstate.lm.specs.describe_lm`, no key)
    and the per-role LMs (``roles``, as :meth:`~groundstate.lm.config.LMConfig.describe` writes them)."""

    model_config = ConfigDict(extra="allow")

    default: dict[str, Any] | None = None
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict)


class OptimizedManifest(BaseModel):
    """The fields ``optimize`` writes into a saved program's manifest and ``evaluate`` reads (others allowed).

    ``metric_spec`` (the T2 judge) is absent from manifests written before it existed: they were scored by the
    judge their ``metric.judge`` names, ``lexical`` unless an LM judge was asked for (:meth:`judge`)."""

    model_config = ConfigDict(extra="allow")

    task: StrictStr
    task_options: TaskOptions = Field(default_factory=TaskOptions)
    build_args: BuildArgs
    data: TunedOn = Field(default_factory=TunedOn)
    metric: MetricRecord = Field(default_factory=MetricRecord)
    metric_spec: MetricSpec | None = None
    lms: TunedWith = Field(default_factory=TunedWith)

    def judge(self) -> str:
        """The T2 judge the program was tuned with: the metric spec's, else the one ``metric.judge`` names."""
        return self.metric_spec.judge if self.metric_spec is not None else legacy_judge(self.metric.judge)

    def split(self, name: str) -> SplitRecords | None:
        """The ``train`` or ``val`` split of ``data``."""
        return getattr(self.data, name)

    def build_values(self) -> dict[str, Any]:
        """Every build argument, with the defaults of the ones the manifest predates."""
        return self.build_args.model_dump()
