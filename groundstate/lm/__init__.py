"""LMs: specs to ``dspy.LM`` (``embedded`` or any LiteLLM model), the embedded engine, per-role LM configs.

- :mod:`~groundstate.lm.specs`: :func:`get_lm`, :func:`configure`, settings checks, :func:`describe_lm`.
- :mod:`~groundstate.lm.embedded`: the offline llama.cpp engine (SmolLM2-135M-Instruct) on DSPy's engine API.
- :mod:`~groundstate.lm.config`: :class:`LMConfig`, ``--lm-config`` files with one LM per agent role.
- :mod:`~groundstate.lm.cache`: the LM whose cache key includes where it is served.
- :mod:`~groundstate.lm.budget`: a call's timeout as the budget of all its attempts.
- :mod:`~groundstate.lm.faults`: what a failed LM call means, in one line.
- :mod:`~groundstate.lm.failed_calls`: a predictor call that failed leaves nothing in DSPy's response cache.

This package sits on the lowest floor: it imports only :mod:`groundstate.errors`, :mod:`groundstate.files`,
:mod:`groundstate.compat` (the one place that touches DSPy's internals) and :mod:`groundstate.metering` (and DSPy,
lazily). The names below are its public API, re-exported for ``from groundstate.lm import get_lm``.
"""

from groundstate.lm.config import LMConfig
from groundstate.lm.embedded import (
    EMBEDDED_MODEL_NAME,
    AsyncEmbeddedEngine,
    EmbeddedEngine,
    bound_schema,
    find_embedded_model,
)
from groundstate.lm.specs import (
    DEFAULT_TIMEOUT_S,
    EMBEDDED_SPEC,
    LM_OPTIONS,
    check_lm_options,
    configure,
    default_adapter,
    describe_lm,
    get_lm,
    is_embedded,
)

__all__ = ["DEFAULT_TIMEOUT_S", "EMBEDDED_MODEL_NAME", "EMBEDDED_SPEC", "LM_OPTIONS", "AsyncEmbeddedEngine",
           "EmbeddedEngine", "LMConfig", "bound_schema", "check_lm_options", "configure", "default_adapter",
           "describe_lm", "find_embedded_model", "get_lm", "is_embedded"]
