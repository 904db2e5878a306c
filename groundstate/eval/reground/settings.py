"""The typed settings of the OffQuery tasks (``groundstate run reground|standard|oracle|...``, ``compare``,
``evaluate``, ``optimize``).

- :class:`OffQueryData`: the data every OffQuery task reads (a file, or ``synthetic`` with its generator
  settings), the ``condition`` (which shared context programs see) and the T2 judge (``judge_lm``, the
  :class:`~groundstate.eval.metric_spec.MetricSpec`'s judge: ``lexical`` by default, ``same-as-lm`` or a model).
- :class:`ReGroundOptions` and :class:`BaselineOptions`: the options of ReGround and of the collaboration
  baselines; :class:`ReGroundSettings` and :class:`BaselineSettings` are a run's whole settings.
- :class:`CompareSettings`: every program's options at once (``compare``; each program reads its own).
- :class:`EvaluationData`: what ``evaluate`` takes besides the saved program (its condition defaults to the one
  the program was optimized under).

Each field's description is its ``--help`` text. The run's ``options`` (part of its fingerprint) are computed
from these fields by :meth:`ReGroundOptions.reground_options` and :meth:`BaselineOptions.baseline_options`:
options added after the first release appear only when they differ from their default, so the run ids of earlier
configurations stay what they were.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic import Field

from groundstate.eval.metric_spec import JUDGE_HELP, JUDGE_MEANING, JudgeSpec, MetricSpec
from groundstate.eval.reground.saved import (
    CONDITIONS,
    KEEP_RULES,
    MODES,
    ORACLE_ATTRIBUTIONS,
    ORDERINGS,
    STATEMENT_RULES,
    SUMMARIZERS,
    TOPOLOGIES,
    UPDATERS,
)
from groundstate.eval.settings import Settings, TaskSettings

CONDITION_HELP = ("what programs see: the reliable or the unreliable (corrupted) shared context, with the private "
                  "evidence as given; or, with reliable-private and reliable-private-unreliable-shared, with every "
                  "misleading agent's evidence made reliable (replaced by its reliable version, or left out)")

#: The synthetic generator's variants (:data:`groundstate.eval.benchmarks.offquery.synthetic.VARIANTS`) and ``all``.
SYNTHETIC_VARIANTS = ("main", "misleading-shared", "multi-misleading", "distributed")


class SyntheticChoice(Settings):
    """Which generated instances ``--data synthetic`` stands for (the generator's seed is each command's own field:
    its meaning beside ``--seed`` differs between ``run`` and ``optimize``)."""

    domain: Literal["healthcare", "disaster", "both"] = Field("healthcare", description="with --data synthetic: "
                                                                                         "which domain(s)")
    variant: Literal[(*SYNTHETIC_VARIANTS, "all")] = Field(
        "main", description="with --data synthetic: main, misleading-shared, multi-misleading, distributed or all")
    n: int = Field(20, ge=1, description="with --data synthetic: instances per domain and variant")


class OffQueryData(SyntheticChoice):
    """The instances an OffQuery task runs on, the shared context its programs see, and the T2 judge."""

    data: str = Field("synthetic", description="an OffQuery data file, or 'synthetic' (default)",
                      json_schema_extra={"metavar": "FILE"})
    condition: Literal[CONDITIONS] = Field("unreliable", description=CONDITION_HELP + " (default unreliable)")
    t2_truth: str | None = Field(None, description="the published T2 truth file of --data "
                                                   "(task2_evaluation/truth/<name>.json)")
    t2_facts: str | None = Field(None, description="the published T2 facts file (task2_evaluation/facts/<name>.json; "
                                                   "found beside the truth file when not given)")
    synthetic_seed: int = Field(0, ge=0, description="with --data synthetic: the generator's seed (default 0; --seed "
                                                     "seeds the run)")
    allow_empty: bool = Field(False, description="accept an input file with no records (by default that is an "
                                                 "error, exit 2)")
    judge_lm: JudgeSpec = Field("lexical", description=JUDGE_HELP, json_schema_extra={"metavar": "JUDGE"})
    judge_api_base: str | None = Field(None, description="server URL of an LM --judge-lm (default: --api-base when "
                                       "the judge has --lm's provider, else the provider's own endpoint)",
                                       json_schema_extra={"metavar": "URL"})

    def metric_spec(self) -> MetricSpec:
        """The :class:`~groundstate.eval.metric_spec.MetricSpec` these settings name."""
        return MetricSpec(judge=self.judge_lm)


class ReGroundOptions(Settings):
    """ReGround's options (:class:`~groundstate.programs.reground.reground.ReGround`)."""

    max_candidates: int = Field(3, ge=1, description="M, the conflict rounds (default 3)")
    multi_misleading: bool = Field(False, description="remove every flagged agent")
    oracle_t1: bool = Field(False, description="skip attribution: trust the gold misleading agent")
    stop_early: bool = Field(False, description="let the conflict search stop when it finds no contradiction "
                                                "(default: always M rounds)")
    keep_rule: Literal[KEEP_RULES] = Field("authors", description="reconstruction: keep facts that are supported or "
                                           "of low importance (authors, default) or only supported / "
                                           "unverifiable-and-low ones (strict)")
    mode: Literal[MODES] = Field("agent", description="find the misleading agent (default) or misleading statements "
                                 "spread over agents (§E.4; scores statement precision/recall on instances that "
                                 "plant them)")
    batch_facts: bool = Field(False, description="reconstruction: check all shared-context facts in one call (same "
                                                 "rule and evidence; fewer tokens) instead of one call per fact as "
                                                 "the authors do")
    statement_rule: Literal[STATEMENT_RULES] = Field(
        "adjudicate", description="statement mode: settle each contradiction between statements and remove only "
                                  "the side judged misleading (adjudicate, default) or remove every statement the "
                                  "others refute (refuted, the rule before adjudication)")

    def reground_options(self) -> dict[str, Any]:
        """ReGround's part of the run's ``options``: the first three always, the later ones when not default
        (``statement_rule`` only in statement mode, the only mode it changes)."""
        return {"max_candidates": self.max_candidates, "multi_misleading": self.multi_misleading,
                "oracle_t1": self.oracle_t1,
                **({"stop_early": True} if self.stop_early else {}),
                **({"keep_rule": self.keep_rule} if self.keep_rule != "authors" else {}),
                **({"mode": self.mode} if self.mode != "agent" else {}),
                **({"batch_facts": True} if self.batch_facts else {}),
                **({"statement_rule": self.statement_rule}
                   if self.mode == "statement" and self.statement_rule != "adjudicate" else {})}

    def reground_program(self):
        """The :class:`~groundstate.programs.reground.reground.ReGround` these options describe."""
        from groundstate.programs.reground.reground import ReGround  # noqa: PLC0415 (heavy: dspy)

        return ReGround(max_candidates=self.max_candidates, multi_misleading=self.multi_misleading,
                        oracle_t1=self.oracle_t1, stop_early=self.stop_early, keep_rule=self.keep_rule, mode=self.mode,
                        batch_facts=self.batch_facts, statement_rule=self.statement_rule)


class BaselineOptions(Settings):
    """The collaboration baselines' options; each baseline takes the ones its constructor has."""

    rounds: int | None = Field(None, ge=1, description="discussion rounds, where the baseline has rounds (default: "
                               "the program's own; standard and confidence: 3, as the authors run them)")
    topology: Literal[TOPOLOGIES] = Field("all-to-all", description="standard collaboration: who hears whom "
                                                                    "(default all-to-all)")
    ordering: Literal[ORDERINGS] | None = Field(None, description="shared context before discussion, or private "
                                                "evidence first (default: the program's own; standard, confidence, "
                                                "voting, robin and self-reflect: private-first, as the authors run "
                                                "standard)")
    oracle_attribution: Literal[ORACLE_ATTRIBUTIONS] = Field(
        "model", description="oracle: T1 from a model reading all private evidence (the authors' oracle, default) "
                             "or from ground truth (the upper bound)")
    opinion_cap: bool = Field(False, description="standard and confidence: cap every opinion at 600 characters (the "
                                                 "earlier release; by default opinions are uncapped, as the authors "
                                                 "run them)")

    summarizer: Literal[SUMMARIZERS] | None = Field(
        None, description="voting, robin, manager, instructor, self-reflect: standard (default: name one agent of "
                          "the team from the final messages, as standard does) or open (the earlier release: read "
                          "the whole transcript, may answer no one)")
    updater: Literal[UPDATERS] | None = Field(
        None, description="voting, robin, instructor, self-reflect: standard (default: the shared context and the "
                          "final messages of every agent but the one named, as standard does) or evidence (the "
                          "earlier release: every agent's raw evidence too, at most 1,500 characters)")

    def baseline_arguments(self, name: str, seed: int = 0) -> dict[str, Any]:
        """The constructor arguments of the baseline ``name``: the options it takes, each unset one at the
        program's own default."""
        from groundstate.programs.reground.baselines import BASELINES  # noqa: PLC0415 (heavy: dspy)

        parameters = inspect.signature(BASELINES[name].__init__).parameters
        given = {"rounds": self.rounds, "topology": self.topology, "ordering": self.ordering, "seed": seed,
                 "oracle_t1": self.oracle_attribution, "opinion_cap": self.opinion_cap, "summarizer": self.summarizer,
                 "updater": self.updater}
        return {k: (v if v is not None else parameters[k].default) for k, v in given.items() if k in parameters}

    def baseline_options(self, name: str, seed: int = 0) -> dict[str, Any]:
        """The baseline's part of the run's ``options`` (the seed is the run's own field): the options its first
        release recorded (:data:`FIRST_OPTIONS`), always, as earlier versions wrote them; any option it gained
        later only when it differs from the program's default, so the run ids of earlier configurations stay
        what they were."""
        from groundstate.programs.reground.baselines import BASELINES  # noqa: PLC0415 (--help stays light)

        parameters = inspect.signature(BASELINES[name].__init__).parameters
        first = FIRST_OPTIONS.get(name, ())
        return {k: v for k, v in self.baseline_arguments(name, seed).items()
                if k in first or (k in LATER_OPTIONS and v != parameters[k].default)}


#: The options each baseline's run config has recorded since its first release (always written).
FIRST_OPTIONS: dict[str, tuple[str, ...]] = {
    "oracle": ("oracle_t1",), "standard": ("rounds", "topology", "ordering"), "voting": (),
    "robin": ("rounds", "ordering"), "manager": ("rounds",), "instructor": (), "self-reflect": ("rounds", "ordering"),
    "confidence": ("rounds", "ordering")}

#: Every option a baseline's run config may record; those not in its :data:`FIRST_OPTIONS` (Voting's ordering, the
#: opinion cap, the summarizer and updater contracts) only when they differ from the program's default.
LATER_OPTIONS: tuple[str, ...] = ("rounds", "topology", "ordering", "oracle_t1", "opinion_cap", "summarizer",
                                  "updater")


class ReGroundSettings(ReGroundOptions, OffQueryData, TaskSettings):
    """Everything ``groundstate run reground`` takes besides the LMs and the run settings."""


class BaselineSettings(BaselineOptions, OffQueryData, TaskSettings):
    """Everything ``groundstate run standard|oracle|voting|...`` takes besides the LMs and the run settings."""


class CompareSettings(BaselineOptions, ReGroundOptions, OffQueryData, TaskSettings):
    """``compare``'s settings: the data and every program's options; each program's run reads its own."""


class EvaluationData(OffQueryData):
    """What ``evaluate`` takes besides the saved program: the data (``condition``: ``None`` for the one the
    program was optimized under), the T2 judge (``None`` for the one the program was optimized with), and whether
    data that overlaps the training data is allowed."""

    judge_lm: JudgeSpec | None = Field(None, description=JUDGE_MEANING + "; default: the judge the program was "
                                       "optimized with (its manifest's; 'lexical' for manifests that name none)",
                                       json_schema_extra={"metavar": "JUDGE"})
    condition: Literal[CONDITIONS] | None = Field(None, description=CONDITION_HELP + " (default: the condition "
                                                  "the program was optimized under)")
    allow_overlap: bool = Field(False, description="evaluate even on data that shares instance ids or source cases "
                                                   "with the train/val data")
