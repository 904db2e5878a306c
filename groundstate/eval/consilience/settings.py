"""The typed settings of the hidden-profile runs: the agents, the tasks, a reference protocol, a Consilience
configuration, and an evaluation of several programs.

- :class:`AgentSettings`: LM or seeded simulated agents (the preset and each parameter that overrides it) and
  where simulated agents get per-fact support.
- :class:`ProtocolSettings`: ``groundstate hidden run`` (one reference protocol over the tasks), with
  :class:`HiddenBenchSettings` (how HiddenBench's protocols depart from its script; by default they do not).
- :class:`ConfigurationSettings`: what a Consilience calibration is valid for (router, round limit, removed
  actions, the lower bound on the Vote round).
- :class:`ProgramSettings`: one program of an evaluation (a reference protocol, or a controller with its
  calibrator): the settings of the registered task ``consilience``.
- :class:`EvaluationSettings`: ``consilience evaluate`` and ``table``: the controllers and reference protocols
  compared on the same tasks and agents (:meth:`EvaluationSettings.programs` splits it into
  :class:`ProgramSettings`).
- :class:`FeatureAblationSettings`: one row of the state-feature ablation (Table 6), the task
  ``consilience-features``; :class:`RoutingSettings`: the speaker-routing ablation (Table 8), the task
  ``consilience-routing`` (:mod:`groundstate.eval.consilience.study_tasks`).

Each field's description is its ``--help`` text.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from groundstate.errors import ConfigError
from groundstate.eval.consilience.support import SUPPORT_MODES
from groundstate.eval.settings import Settings, TaskSettings
from groundstate.programs.consilience.consilience import SET_SAMPLING
from groundstate.programs.consilience.control import CONTROLLERS, ROUTERS
from groundstate.programs.consilience.hiddenbench import HiddenBenchOptions
from groundstate.programs.consilience.protocols import PROTOCOLS
from groundstate.programs.consilience.simulated import SIM_PRESETS, SimParams, sim_preset
from groundstate.programs.consilience.state import FEATURE_SETS
from groundstate.records import ACTIONS

_IDEAL, _LIMITED = SIM_PRESETS["ideal"], SIM_PRESETS["limited"]

#: The simulated agents' parameters (``sim_<field of SimParams>``, and the per-agent presets).
SIM_FIELDS = ("sim_preset", "sim_agent_presets", "sim_beta", "sim_noise", "sim_recall", "sim_shared_bias",
              "sim_facts_per_message", "sim_attention", "sim_salience", "sim_recency", "sim_weight_noise")


class AgentSettings(Settings):
    """Who discusses: LM agents (agent ``i`` uses the role ``agent.i`` of the LM configuration) or seeded simulated
    agents, and where simulated agents get per-fact support. Every ``sim_*`` parameter defaults to ``None``, the
    preset's value."""

    agents: Literal["lm", "sim"] = Field("sim", description="'lm' (agent i uses role agent.i of --lm-config) or "
                                         "'sim' (seeded simulated agents, offline and fast); default sim")
    sim_preset: Literal[tuple(SIM_PRESETS)] = Field(
        "ideal", description="named parameter set: 'ideal' (perfect integrators, the default) or 'limited' (bounded "
        f"attention, salience of spoken facts, imperfect weighting: attention {_LIMITED.attention}, salience "
        f"{_LIMITED.salience}, recency {_LIMITED.recency}, weight noise {_LIMITED.weight_noise})")
    sim_agent_presets: list[Literal[tuple(SIM_PRESETS)]] | None = Field(
        None, description="a heterogeneous team: agent i uses the i-th preset (agents past the list use "
        "--sim-preset); every --sim-* value given applies to all of them", json_schema_extra={"metavar": "PRESET"})
    sim_beta: float | None = Field(None, ge=0, description=f"belief sharpness on summed support (ideal: "
                                   f"{_IDEAL.beta})")
    sim_noise: float | None = Field(None, ge=0, description=f"std of the per-option noise on beliefs (ideal: "
                                    f"{_IDEAL.noise})")
    sim_recall: float | None = Field(None, ge=0, le=1, description="probability a fact comes to mind when speaking "
                                     f"(ideal: {_IDEAL.recall})")
    sim_shared_bias: float | None = Field(None, gt=0, description="weight of shared vs private facts on free turns "
                                          f"(ideal: {_IDEAL.shared_bias})")
    sim_facts_per_message: int | None = Field(None, ge=1, description="facts stated per message (ideal: "
                                              f"{_IDEAL.facts_per_message})")
    sim_attention: Annotated[int, Field(ge=1)] | Literal["all"] | None = Field(
        None, description="at most N informative facts enter a belief, recently spoken ones first; 'all' "
        "lifts the limit (ideal: all)", json_schema_extra={"metavar": "N|all"})
    sim_salience: float | None = Field(None, ge=0, description="extra weight of a fact on the transcript, fading "
                                       f"with --sim-recency (ideal: {_IDEAL.salience})")
    sim_recency: float | None = Field(None, ge=0, le=1, description="per-message fading of that extra weight, 0-1 "
                                      f"(ideal: {_IDEAL.recency})")
    sim_weight_noise: float | None = Field(None, ge=0, description="std of the log of each fact's fixed weighting "
                                           f"factor (ideal: {_IDEAL.weight_noise})")
    support: Literal[SUPPORT_MODES] = Field(
        "auto", description="per-fact support for simulated agents on tasks that carry none (HiddenBench): auto (the "
        "support file beside the task file if there is one, else the hidden-profile design default), file, design, "
        "or task (only the tasks' own)")
    support_file: str | None = Field(None, description="the support file (default: <data>.support.json beside the "
                                     "task file)", json_schema_extra={"metavar": "FILE"})

    def sim_params(self) -> SimParams:
        """The :class:`~groundstate.programs.consilience.simulated.SimParams` of these settings: the preset with
        every ``sim_<field>`` that is given replacing the preset's value (``sim_attention="all"`` lifts the
        preset's attention limit).

        Raises:
            ConfigError: a value :class:`SimParams` refuses (one line naming the ``--sim-`` option).
        """
        return self._preset(self.sim_preset or "ideal")

    def sim_agent_params(self) -> list[SimParams]:
        """The parameters of each agent named by ``sim_agent_presets`` (each preset with the same ``sim_<field>``
        overrides as :meth:`sim_params`); empty for a team whose agents all use :meth:`sim_params`."""
        return [self._preset(name) for name in self.sim_agent_presets or ()]

    def _preset(self, name: str) -> SimParams:
        overrides: dict[str, Any] = {}
        for field in fields(SimParams):
            value = getattr(self, f"sim_{field.name}", None)
            if value is not None:
                overrides[field.name] = None if value == "all" else value
        try:
            return sim_preset(name, **overrides)
        except ValueError as exc:
            raise ConfigError(str(exc).replace("SimParams.", "--sim-").replace("_", "-")) from None


class HiddenTasks(Settings):
    """The hidden-profile tasks a run is over."""

    data: str = Field(description="hidden-profile tasks (HiddenBench JSON or JSONL)",
                      json_schema_extra={"metavar": "FILE"})
    allow_empty: bool = Field(False, description="accept an input file with no records (by default that is an "
                                                 "error, exit 2)")


class HiddenBenchSettings(Settings):
    """How HiddenBench's protocols (``hiddenbench-pre``, ``hiddenbench``, ``hiddenbench-full``) depart from its
    simulation script (:class:`~groundstate.programs.consilience.hiddenbench.HiddenBenchOptions`): by default
    they do not, except that Full-Info does not discuss, as the Consilience paper's (§4.1)."""

    fixed_holders: bool = Field(False, description="HiddenBench's protocols: keep every agent on its own clue "
                                "(HiddenBench deals the clues afresh every discussion)")
    special_share: float = Field(0.0, ge=0, le=1, description="HiddenBench's protocols: the share of agents given "
                                 "--special-prompt, rounded up (default 0: none)")
    special_prompt: str | None = Field(None, min_length=1, validate_default=True, description="HiddenBench's "
                                       "protocols: the special agents' extra instruction",
                                       json_schema_extra={"metavar": "TEXT"})
    full_discussion: bool = Field(False, description="hiddenbench-full: discuss as HiddenBench's script does (the "
                                  "paper's Full-Info does not; its numbers are then the run's initial votes)")
    flat_transcript: bool = Field(False, description="HiddenBench's protocols: LM agents see one transcript, messages "
                                  "cut to 2 sentences / 300 characters, instead of holding a chat each")

    @field_validator("special_prompt")
    @classmethod
    def _prompt_with_special_agents(cls, value: str | None, info: ValidationInfo) -> str | None:
        if (info.data.get("special_share") or 0) > 0 and not (value or "").strip():
            raise ValueError("must be given with a special share above 0 (the special agents' extra instruction)")
        return value

    def hiddenbench_options(self):
        """The :class:`~groundstate.programs.consilience.hiddenbench.HiddenBenchOptions` of these settings.

        Raises:
            ConfigError: special agents without their instruction.
        """
        try:
            return HiddenBenchOptions(fixed_holders=self.fixed_holders, special_share=self.special_share,
                                      special_prompt=self.special_prompt, full_discussion=self.full_discussion,
                                      flat=self.flat_transcript)
        except ValueError as exc:
            raise ConfigError(str(exc).replace("special_prompt", "--special-prompt")
                              .replace("special_share", "--special-share")) from None


class ProtocolSettings(HiddenBenchSettings, AgentSettings, HiddenTasks, TaskSettings):
    """``groundstate hidden run``: one reference protocol over the tasks."""

    protocol: Literal[PROTOCOLS] = Field("hidden-post", description="the protocol (default hidden-post)")
    rounds: int | None = Field(None, ge=1, description="discussion rounds (default: 3 for hidden-post, 15 for "
                                                       "hiddenbench)")


class ConfigurationSettings(Settings):
    """What a calibration is valid for, besides the controller (:class:`~groundstate.optimizers.consilience.
    Configuration`)."""

    router: Literal[ROUTERS] = Field("action-conditional", description="how the next speaker is chosen (default "
                                                                       "action-conditional)")
    max_rounds: int = Field(10, ge=1, description="round limit K (default 10)")
    remove_action: list[Literal[ACTIONS]] = Field(default_factory=list, description="take actions out for the whole "
                                                  "discussion (ablation)", json_schema_extra={"metavar": "ACTION"})
    min_vote_round: int | None = Field(None, ge=1, description="an extra lower bound on the round at which Vote is "
                                       "admissible (default: only the controller's own termination rule)")

    def configuration(self, name: str, controller: Any, team: Any):
        """The :class:`~groundstate.optimizers.consilience.Configuration` of controller ``name`` with the agents of
        ``team`` (:meth:`~groundstate.optimizers.consilience.Configuration.for_team`: a calibration is valid only for
        the agents it was fitted on)."""
        from groundstate.optimizers.consilience import Configuration  # noqa: PLC0415 (heavy: scikit-learn)

        return Configuration.of(name, controller, router=self.router, max_rounds=self.max_rounds,
                                removed_actions=tuple(self.remove_action),
                                min_vote_round=self.min_vote_round).for_team(team)


class ProgramSettings(HiddenBenchSettings, ConfigurationSettings, AgentSettings, HiddenTasks, TaskSettings):
    """One program of a Consilience evaluation: a reference protocol (``program`` in
    :data:`~groundstate.programs.consilience.protocols.PROTOCOLS`, with ``rounds``) or a controller (``program`` in
    :data:`~groundstate.programs.consilience.control.CONTROLLERS`, with its MLP, calibrator and set sampling)."""

    program: Literal[(*PROTOCOLS, *CONTROLLERS)] = Field(description="the protocol or controller to run")
    rounds: int | None = Field(None, ge=1, description="discussion rounds of a reference protocol (default: 3 for "
                                                       "hidden-post, 15 for hiddenbench)")
    mlp: str | None = Field(None, description="a trained MLP controller (for the controller mlp)",
                            json_schema_extra={"metavar": "DIR"})
    calibrator: str | None = Field(None, description="the controller's calibrator (conformal acceptance); none: "
                                   "uncertified", json_schema_extra={"metavar": "DIR"})
    set_sampling: Literal[SET_SAMPLING] = Field("off", description="every-round: execute a uniform draw from the "
                                                "conformal set every round (the paper's ablation); on-reject: only "
                                                "to replace a rejected proposal")


class EvaluationSettings(HiddenBenchSettings, ConfigurationSettings, AgentSettings, HiddenTasks,
                         TaskSettings):
    """``consilience evaluate`` / ``table``: the controllers and the reference protocols on the same tasks."""

    controllers: list[Literal[CONTROLLERS]] = Field(default_factory=lambda: ["rules"],
                                                    description="the controllers to run (default rules)")
    mlp: str | None = Field(None, description="a trained MLP controller (for the controller mlp)",
                            json_schema_extra={"metavar": "DIR"})
    calibrator: list[str] = Field(default_factory=list, description="conformal acceptance per controller "
                                  "(controllers without one run uncertified)",
                                  json_schema_extra={"metavar": "CONTROLLER=DIR"})
    baselines: list[Literal[PROTOCOLS]] = Field(
        default_factory=lambda: ["hidden-pre", "hidden-post", "full-info"],
        description="reference protocols to run beside the controllers (default hidden-pre hidden-post full-info)")
    rounds: int | None = Field(None, ge=1, description="discussion rounds of the baselines (default: 3 for "
                                                       "hidden-post, 15 for hiddenbench)")
    set_sampling: Literal[SET_SAMPLING] = Field("off", description="every-round: execute a uniform draw from the "
                                                "conformal set every round (the paper's ablation); on-reject: only "
                                                "to replace a rejected proposal")
    sample_from_set: bool = Field(False, description="the same as --set-sampling every-round")

    def calibrators(self) -> dict[str, str]:
        """``controller -> calibrator directory`` of the ``CONTROLLER=DIR`` items.

        Raises:
            ConfigError: an item without ``=DIR``.
        """
        out = {}
        for item in self.calibrator:
            name, _, path = item.partition("=")
            if not path:
                raise ConfigError(f"--calibrator takes CONTROLLER=DIR, got '{item}'")
            out[name] = path
        return out

    def programs(self) -> list[ProgramSettings]:
        """One :class:`ProgramSettings` per reference protocol, then per controller, in the order given."""
        calibrators = self.calibrators()
        sampling = "every-round" if self.sample_from_set else self.set_sampling
        shared = self.model_dump(include=self.model_fields_set & set(ProgramSettings.model_fields),  # unset: unset
                                 exclude={"set_sampling", "mlp", "calibrator", "rounds"})
        return [*(ProgramSettings(**shared, program=name, rounds=self.rounds) for name in self.baselines),
                *(ProgramSettings(**shared, program=name, mlp=self.mlp, calibrator=calibrators.get(name),
                                  set_sampling=sampling) for name in self.controllers)]


class FeatureAblationSettings(AgentSettings, HiddenTasks, TaskSettings):
    """One row of the state-feature ablation (the paper's Table 6): the MLP controller trained on one feature set,
    calibrated for its configuration, and run on the held-out tasks of ``data``
    (:class:`~groundstate.eval.consilience.study_tasks.FeatureAblationTask`). ``seed`` seeds the simulated agents,
    the split, the exploration, the MLP and every episode, as ``consilience ablate features --seed`` does."""

    features: Literal[tuple(FEATURE_SETS)] = Field("all", description="the state features the MLP is trained on (a "
                                                   "row of Table 6; default all six)")
    explore: str | None = Field(None, description="exploration rows written by `consilience explore` (required with "
                                "calibration_data; none: the training split of data is explored in the run)",
                                json_schema_extra={"metavar": "FILE"})
    calibration_data: str | None = Field(None, description="calibration tasks, separate from data (none: data is "
                                         "split into train / calibration / test tasks, 0.4 / 0.3 / 0.3, seeded, and "
                                         "the test split is run)", json_schema_extra={"metavar": "FILE"})
    alpha: float = Field(0.1, gt=0, lt=1, description="miscoverage level of the row's calibrator (default 0.1)")
    max_rounds: int = Field(10, ge=1, description="round limit K (default 10)")


class RoutingSettings(ConfigurationSettings, AgentSettings, HiddenTasks, TaskSettings):
    """The speaker-routing ablation (the paper's Table 8): one controller's discussions, each communication round
    replayed once per speaker (:class:`~groundstate.eval.consilience.study_tasks.RoutingTask`), as
    ``consilience routing`` runs it."""

    controller: Literal[CONTROLLERS] = Field("rules", description="the controller whose discussions are replayed "
                                             "(default rules)")
    mlp: str | None = Field(None, description="a trained MLP controller (for the controller mlp)",
                            json_schema_extra={"metavar": "DIR"})
    calibrator: str | None = Field(None, description="the controller's calibrator (conformal acceptance); none: "
                                   "uncertified", json_schema_extra={"metavar": "DIR"})
