"""One metric spec shared by ``run``, ``compare``, ``optimize``, ``evaluate`` and experiment specs: who judges.

A :class:`MetricSpec` names the judge of the metrics that need one (OffQuery's T2: which facts does a state
support?). Its ``judge`` is one of:

- ``"lexical"`` (the default everywhere): the deterministic, offline word-overlap judge. It is approximate, and
  reports say so: "lexical (approximate; the paper uses GPT-4o)".
- ``"same-as-lm"``: the model under test judges its own outputs (the run's default LM, with its server and
  decoding). Reports then say "the model under test judges itself (<model>)", since such a judge differs for
  every LM.
- an LM spec (``openai/gpt-4o``, ``hosted_vllm/<model>``, ``embedded``): that model judges every run, as the
  paper fixes GPT-4o. Its server and decoding come from the ``[roles.judge]`` section of an ``--lm-config``
  file when there is one (its ``model`` must then be this spec); otherwise it is built from the spec alone
  (keys from the environment; a hosted judge decodes at temperature 0, :func:`groundstate.lm.specs.get_lm`).

``auto`` (the model under test when it is a real model, else lexical) is refused with a one-line hint: it made
every LM its own judge without saying so. The command line's ``--judge-lm`` takes the same three choices, with the
same meaning and default (:data:`JUDGE_HELP`) in ``run``, ``compare`` and ``optimize``; ``evaluate`` defaults to
the judge the program was optimized with.

**API** (what the experiment layer and the commands use):

- ``MetricSpec(judge="lexical")``: the constructor (pydantic; a bad judge is a ``ValidationError``);
  ``MetricSpec.parse({"judge": ...}, file=..., loc=...)`` (a spec file's table: one ``InputError`` line naming
  the file and field) and :meth:`MetricSpec.from_cli` (a ``--judge-lm`` value: one ``ConfigError`` line).
- :data:`JudgeSpec`: the judge as a field of another pydantic model (a task's ``judge_lm``, a spec's ``judge``).
- ``spec.judge`` (the choice as a string), ``spec.is_lexical``, ``spec.is_same_as_lm``.
- :meth:`MetricSpec.describe`: the judge in words, as reports print it (before a run; :func:`judge_label` names
  a stored run's judge with its decoding).
- :meth:`MetricSpec.judge_lm`: the judge's LM for a run (``None`` for the lexical judge).
- :meth:`MetricSpec.record`: what it adds to a run config's ``options`` (below); :meth:`MetricSpec.of_config` reads
  the spec back from a stored config (configs written before the metric spec included).
- :func:`scoring_description` and :func:`header_lines`: the LM, its decoding and the judge of a stored run config,
  in words, for every report.

**How it goes into a run config.** A task's settings carry the judge: for OffQuery tasks the ``judge_lm`` field
(a :data:`JudgeSpec`; an experiment cell sets ``settings["judge_lm"] = spec.judge``), and the assembly path does
the rest. The task builds the judge and records, in every OffQuery run config (so in its run id, and two runs of
different judges never share one):

- ``config["lm"]``: the model under test and its decoding (:func:`~groundstate.lm.specs.describe_lm`: ``model``,
  ``temperature``, ``max_tokens``, ``api_base`` without credentials, ...); ``config["lm_config"]`` the per-role
  LMs, if any.
- ``config["options"]["judge"]``: the judge's name, ``lexical(threshold=0.75)`` or ``lm:<model>`` (the field
  every earlier version wrote). For the lexical judge that is the whole record, so a lexical run's id is what it
  was (unless its LM's description changed: a hosted LM without a temperature is now described at 0).
- ``config["options"]["metric_spec"]``, for LM judges only: ``{"judge": <the spec as given: a model or
  "same-as-lm">, "judge_lm": <describe_lm of the judge's LM, its decoding included>}``.

An optimized program's manifest records ``metric_spec`` (``{"judge": ...}``) beside ``lms`` (the LMs it was
optimized with); see :mod:`groundstate.eval.reground.saved`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from groundstate.errors import ConfigError
from groundstate.eval.settings import Settings

LEXICAL = "lexical"
SAME_AS_LM = "same-as-lm"
JUDGE_ROLE = "judge"
"""The ``--lm-config`` role (``[roles.judge]``) that configures an LM judge's server and decoding."""

LEXICAL_LABEL = "lexical (approximate; the paper uses GPT-4o)"
SELF_LABEL = "the model under test judges itself"
CHOICES = "a model (provider/model, e.g. openai/gpt-4o, or 'embedded'), 'lexical' or 'same-as-lm'"
JUDGE_MEANING = ("T2 judge: 'lexical' (deterministic, offline, approximate: the paper uses GPT-4o), 'same-as-lm' (the "
                 "model under test judges itself) or a model such as openai/gpt-4o (its server and decoding: the "
                 "--lm-config role 'judge', if any)")
"""What ``--judge-lm`` means, in every command that has it."""
JUDGE_HELP = JUDGE_MEANING + "; default 'lexical'"
"""The help text of ``--judge-lm`` in ``run``, ``compare`` and ``optimize`` (``evaluate`` has its own default)."""


def check_judge(value: str) -> str:
    """``value`` (stripped) if it is a judge choice (:data:`LEXICAL`, :data:`SAME_AS_LM`, ``embedded`` or
    ``provider/model`` of printable characters without spaces); a ``ValueError`` with one line naming the three
    choices otherwise (``auto`` included, with a hint)."""
    text = value.strip() if isinstance(value, str) else value
    if text in (LEXICAL, SAME_AS_LM, "embedded"):
        return text
    if (isinstance(text, str) and "/" in text and not text.startswith("/") and not text.endswith("/")
            and text.isprintable() and not any(c.isspace() for c in text)):
        return text  # provider/model (get_lm checks the provider when the judge is built)
    if text == "auto":
        raise ValueError(f"must be {CHOICES}; 'auto' is gone: give 'same-as-lm' for the model under test as its own "
                         "judge, or name the judge")
    raise ValueError(f"must be {CHOICES}")


JudgeSpec = Annotated[str, AfterValidator(check_judge)]
"""A judge choice as a settings field (``--judge-lm``, a spec's ``judge``): checked by :func:`check_judge`."""


class MetricSpec(Settings):
    """Who judges the metrics that need a judge (see the module docstring)."""

    judge: JudgeSpec = Field(LEXICAL, description=JUDGE_HELP)

    @classmethod
    def from_cli(cls, value: str, *, option: str = "--judge-lm") -> MetricSpec:
        """The spec of a command-line value (``lexical``, ``same-as-lm`` or a model).

        Raises:
            ConfigError: any other value (``auto`` included), one line naming ``option`` and the three choices.
        """
        try:
            return cls(judge=check_judge(value))
        except ValueError as exc:
            raise ConfigError(f"{option} {exc}") from None

    @classmethod
    def of_config(cls, config: Mapping[str, Any]) -> MetricSpec | None:
        """The spec a stored run config records (``None`` for a run without a judge); a config written before the
        metric spec is read from its judge's name (``lm:<model>`` -> that model, else lexical)."""
        choice = judge_of(config)["judge"]
        return None if choice is None else cls(judge=choice)

    def describe(self, model_under_test: str | None = None) -> str:
        """The judge in words, as reports name it: :data:`LEXICAL_LABEL`, ``the model under test judges itself
        (<model>)`` (for ``same-as-lm``, or a named judge that is ``model_under_test``), or ``<model> (LM judge)``."""
        if self.is_lexical:
            return LEXICAL_LABEL
        if self.is_same_as_lm or (model_under_test and self.judge == model_under_test):
            return SELF_LABEL + (f" ({model_under_test})" if model_under_test else "")
        return f"{self.judge} (LM judge)"

    @property
    def is_lexical(self) -> bool:
        """Whether the judge is the lexical one."""
        return self.judge == LEXICAL

    @property
    def is_same_as_lm(self) -> bool:
        """Whether the model under test judges itself."""
        return self.judge == SAME_AS_LM

    def judge_lm(self, lm: Any = None, lm_config: Any = None, *, timeout: float | None = None,
                 tell: Callable[[str], None] | None = None, api_base: str | None = None) -> Any:
        """The judge's LM (``None`` for the lexical judge).

        Args:
            lm: the model under test (the run's default LM): the judge of ``same-as-lm``.
            lm_config: the run's :class:`~groundstate.lm.config.LMConfig`; its role ``judge``, if any, is the LM
                judge's server and decoding.
            timeout: seconds per call for a judge built here (``--lm-timeout``).
            tell: where a note goes when the ``judge`` role or ``api_base`` is given but not used (lexical or
                same-as-lm).
            api_base: the judge's server (``--judge-api-base``). Without it and without a ``judge`` role, a judge of
                the default LM's provider is served where the default LM is (``--api-base``; see
                :meth:`~groundstate.lm.config.LMConfig.server_for`), and one of another provider by its provider.

        Raises:
            ConfigError: the ``judge`` role names another model than the spec, or is given with ``api_base``.
            LMSetupError: the judge's spec cannot be built (unknown provider, bad option).
        """
        role = (getattr(lm_config, "roles", None) or {}).get(JUDGE_ROLE)
        if self.is_lexical or self.is_same_as_lm:
            if role is not None and tell is not None:
                tell(f"note: the --lm-config role '{JUDGE_ROLE}' is not used: the judge is '{self.judge}' (give "
                     f"--judge-lm {role.get('model')} to judge with it)")
            if api_base and tell is not None:
                tell(f"note: --judge-api-base is not used: the judge is '{self.judge}'")
            return lm if self.is_same_as_lm else None
        if role is not None:
            if role.get("model") != self.judge:
                raise ConfigError(f"the judge is '{self.judge}' but the --lm-config role '{JUDGE_ROLE}' names "
                                  f"'{role.get('model')}': give one model")
            if api_base:
                raise ConfigError(f"the judge is set twice (--judge-api-base and the --lm-config role "
                                  f"'{JUDGE_ROLE}'): give its server in one place")
            return lm_config.lm_for(JUDGE_ROLE)
        from groundstate.lm.specs import get_lm  # noqa: PLC0415 (--help stays light)

        server = (lm_config.server_for(self.judge, api_base) if lm_config is not None
                  else ({"api_base": api_base} if api_base and self.judge != "embedded" else {}))
        return get_lm(self.judge, **server, **({"timeout": timeout} if timeout is not None and self.judge != "embedded"
                                               else {}))

    def record(self, judge_lm: Any) -> dict[str, Any]:
        """What a run config's ``options`` add for this spec besides the judge's name: nothing for the lexical
        judge (so lexical run ids stay what they were), ``{"metric_spec": {"judge", "judge_lm"}}`` for an LM
        judge (the spec as given, and the judge LM's description with its decoding)."""
        if self.is_lexical:
            return {}
        from groundstate.lm.specs import describe_lm  # noqa: PLC0415 (--help stays light)

        return {"metric_spec": {"judge": self.judge, "judge_lm": describe_lm(judge_lm)}}


def legacy_judge(name: Any) -> str:
    """The judge choice a judge *name* stands for (``lexical(threshold=0.75)`` -> ``lexical``, ``lm:openai/gpt-4o``
    -> ``openai/gpt-4o``): how configs and manifests written before the metric spec are read."""
    text = str(name or "")
    if text.startswith("lm:") and text[3:] not in ("", "configured", "None"):
        model = text[3:]
        return "embedded" if model.startswith("embedded/") else model
    return LEXICAL


# -- reading a run's LM, decoding and judge back, for reports ----------------------------------------------------


def lm_label(lm: Mapping[str, Any] | None) -> str:
    """The model of an LM description (:func:`~groundstate.lm.specs.describe_lm`), or ``?`` when none is recorded."""
    model = (lm or {}).get("model") if isinstance(lm, Mapping) else None
    return str(model) if model else "?"


def decoding_label(lm: Mapping[str, Any] | None) -> str:
    """An LM description's decoding in words: ``temperature 0, max tokens 512``; a temperature that is not recorded
    (runs of earlier versions) is ``temperature: provider default``."""
    lm = lm if isinstance(lm, Mapping) else {}
    temperature = lm.get("temperature")
    parts = [f"temperature {temperature:g}" if isinstance(temperature, int | float) else
             "temperature: provider default"]
    if lm.get("max_tokens") is not None:
        parts.append(f"max tokens {lm['max_tokens']}")
    if lm.get("top_p") is not None:
        parts.append(f"top_p {lm['top_p']:g}")
    return ", ".join(parts)


def judge_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The judge of a stored run config: ``{"judge": <choice>, "name": <recorded name>, "lm": <judge LM
    description or None>, "self": <whether it is the model under test>}``; ``None`` values when the run has no
    judge (not an OffQuery run). Configs written before the metric spec are read from their judge's name."""
    options = config.get("options") if isinstance(config.get("options"), Mapping) else {}
    name = options.get("judge")
    if name is None:
        return {"judge": None, "name": None, "lm": None, "self": False}
    spec = options.get("metric_spec") if isinstance(options.get("metric_spec"), Mapping) else {}
    choice = spec.get("judge") or legacy_judge(name)
    judge_lm = spec.get("judge_lm") if isinstance(spec.get("judge_lm"), Mapping) else None
    model = lm_label(config.get("lm"))
    judged_by = (judge_lm or {}).get("model") or (str(name)[3:] if str(name).startswith("lm:") else None)
    same = choice == SAME_AS_LM or (choice != LEXICAL and judged_by is not None and judged_by == model)
    return {"judge": choice, "name": name, "lm": judge_lm, "self": same}


def judge_label(config: Mapping[str, Any]) -> str | None:
    """How reports name a run's judge: :data:`LEXICAL_LABEL`, ``the model under test judges itself (<model>)`` when
    the model under test judged itself (``same-as-lm``, or a named judge that is the model under test), or
    ``<model> (LM judge, <decoding>)``; ``None`` for a run without a judge."""
    judge = judge_of(config)
    if judge["judge"] is None:
        return None
    if judge["judge"] == LEXICAL:
        return LEXICAL_LABEL
    if judge["self"]:
        return f"{SELF_LABEL} ({lm_label(config.get('lm'))})"
    model = lm_label(judge["lm"]) if judge["lm"] else str(judge["judge"])
    return f"{model} (LM judge, {decoding_label(judge['lm'])})" if judge["lm"] else f"{model} (LM judge)"


def scoring_description(config: Mapping[str, Any]) -> dict[str, Any]:
    """``{"lm", "decoding", "judge", "judge_spec"}`` of a stored run config: the first three in words
    (:func:`lm_label`, :func:`decoding_label`, :func:`judge_label`; ``judge`` is ``None`` for a run without one),
    ``judge_spec`` the judge choice (``lexical``, ``same-as-lm`` or a model; :func:`judge_of`), plus ``roles``
    (``role -> model``) when the run had per-role LMs. What every report states beside the numbers."""
    lm = config.get("lm") if isinstance(config.get("lm"), Mapping) else None
    out: dict[str, Any] = {"lm": lm_label(lm), "decoding": decoding_label(lm), "judge": judge_label(config),
                           "judge_spec": judge_of(config)["judge"]}
    roles = ((config.get("lm_config") or {}).get("roles") if isinstance(config.get("lm_config"), Mapping) else None)
    if roles:
        out["roles"] = {str(k): str((v or {}).get("model")) for k, v in roles.items() if isinstance(v, Mapping)}
    return out


def header_lines(description: Mapping[str, Any]) -> list[str]:
    """A report's header lines from :func:`scoring_description`: ``LM = ... (per-role: ...)``, ``decoding = ...``
    and, when the run had a judge, ``judge = ...``."""
    roles = description.get("roles") or {}
    lines = [f"LM = {description.get('lm')}" + (" (per-role: " + ", ".join(f"{k} = {v}" for k, v in roles.items())
                                                  + ")" if roles else ""),
             f"decoding = {description.get('decoding')}"]
    if description.get("judge"):
        lines.append(f"judge = {description['judge']}")
    return lines
