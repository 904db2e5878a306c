"""Settings are typed data: every task's and run's settings are one pydantic model.

A settings model is the one description of what a task can be told: its fields carry their types, ranges
(``Field(ge=...)``), choices (``Literal``) and a description. The command line builds one from its options
(``groundstate.cli.settings`` derives every option, its choices, range check and help text from the model), a
Python user builds it directly (``ReGroundSettings(n=5, max_candidates=2)``), and a saved manifest or an
experiment spec is validated into it (:meth:`Settings.parse`: one :class:`~groundstate.errors.InputError` line
naming the file and the field). The run configuration, whose fingerprint names the run directory, is computed
from the settings' JSON form by the task (see :mod:`groundstate.eval.task`).

- :class:`Settings`: the base (unknown fields are refused; :meth:`Settings.parse` and :meth:`Settings.narrow`).
- :class:`TaskSettings`: a task's settings, with the ``seed`` of everything random the task does.
- :class:`LMSettings`: the LM options (the default LM, per-role LMs from an ``--lm-config`` file, decoding), which
  build the :class:`~groundstate.lm.config.LMConfig`.

Constructing a model directly raises pydantic's ``ValidationError`` for a bad value, as any pydantic model does;
:meth:`Settings.parse` (manifests, specs, dictionaries) and the command line turn it into one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from groundstate.lm.config import LMConfig
from groundstate.lm.quantize import QUANT_TYPES
from groundstate.schema import validate

S = TypeVar("S", bound="Settings")


class Settings(BaseModel):
    """The base of every settings model: plain typed data, unknown fields refused."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def parse(cls: type[S], value: Any, *, file: str | os.PathLike | None = None, record: str | int | None = None,
              loc: tuple[Any, ...] = ()) -> S:
        """``value`` as this model: an instance is returned as is, settings of another model are narrowed to this
        model's fields (:meth:`narrow`), a mapping (a manifest's or spec's table) is validated.

        Raises:
            InputError: a mapping that does not fit (one line naming ``file``, ``record`` and the field).
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, Settings):
            return value.narrow(cls)
        return validate(cls, dict(value) if isinstance(value, Mapping) else value, file=file, record=record, loc=loc)

    def narrow(self, model: type[S]) -> S:
        """These settings as ``model``: the fields both models have, the others at ``model``'s defaults (``compare``
        holds the options of every program; each program's run reads its own).

        Raises:
            InputError: a shared field whose value ``model`` does not accept.
        """
        shared = set(type(self).model_fields) & set(model.model_fields)
        return validate(model, {name: getattr(self, name) for name in shared})


class TaskSettings(Settings):
    """A task's settings: what it runs on and how, and the seed of everything random it does."""

    seed: int = Field(0, ge=0, description="seed for anything random (default 0)")


class LMSettings(Settings):
    """The LM options of a run (``--lm``, ``--api-base``, ``--temperature``, ``--max-tokens``, ``--lm-timeout``,
    ``--lm-config``, ``--lm-threads``, ``--lm-contexts``, ``--lm-quant``): the default LM and, from an
    ``--lm-config`` file, one LM per role. None of them names a key: keys come only from the environment."""

    lm: str | None = Field(None, description="LM spec: 'embedded' (default, offline SmolLM2) or a LiteLLM model "
                           "string such as openai/gpt-4o-mini, ollama_chat/qwen3:8b, hosted_vllm/<model>",
                           json_schema_extra={"metavar": "SPEC"})
    api_base: str | None = Field(None, description="server URL for --lm (vLLM, Ollama, any OpenAI-compatible)")
    temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature for --lm (default 0, the "
                                      "papers' decoding; OpenAI's reasoning models accept only 1). Recorded with the "
                                      "LM, so part of the run id")
    max_tokens: int | None = Field(None, ge=1, description="output token limit per call for --lm")
    lm_timeout: float | None = Field(None, gt=0, description="give up on an LM call after SECONDS (hosted LMs; default "
                                     "120; the failed call is recorded as that record's error). The embedded LM is "
                                     "local and ignores it", json_schema_extra={"metavar": "SECONDS"})
    lm_config: str | None = Field(None, description="TOML file of LM settings: [default] and [roles.<pattern>] (one "
                                  "LM per agent role)", json_schema_extra={"metavar": "FILE"})
    lm_threads: int | None = Field(None, ge=1, description="embedded LM: CPU threads per llama.cpp context ('threads' "
                                   "in --lm-config; default 1). Greedy outputs depend on it, so it is part of the run "
                                   "id", json_schema_extra={"metavar": "N"})
    lm_contexts: int | None = Field(None, ge=1, description="embedded LM: requests decoded at once, one llama.cpp "
                                    "context each ('contexts' in --lm-config; default: the idle cores divided by "
                                    "--lm-threads, bounded by memory). Outputs do not depend on it",
                                    json_schema_extra={"metavar": "N"})
    lm_quant: Literal[tuple(QUANT_TYPES)] | None = Field(  # the allow-list itself, not a copy of it
        None, description="embedded LM: tensor type ('quant' in --lm-config; default q8_0, made once from the shipped "
        "q4_1 file into ~/.cache/groundstate/models; 'shipped' runs the wheel's file as is). Outputs depend on it, so "
        "it is part of the run id")

    def config(self):
        """The :class:`~groundstate.lm.config.LMConfig` these options describe (``lm`` overrides the file's
        default; see :meth:`~groundstate.lm.config.LMConfig.from_options`)."""
        return LMConfig.from_options(lm_config=self.lm_config, lm=self.lm, api_base=self.api_base,
                                     temperature=self.temperature, max_tokens=self.max_tokens,
                                     timeout=self.lm_timeout, threads=self.lm_threads, contexts=self.lm_contexts,
                                     quant=self.lm_quant)

    def build(self) -> tuple[Any, Any]:
        """``(default LM, LMConfig)``, built (nothing is configured globally)."""
        config = self.config()
        return config.lm_for(None), config
