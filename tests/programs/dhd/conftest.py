"""What the DHD program tests share: a fresh DSPy memory cache per test and a runner under a scripted LM."""

from __future__ import annotations

import dspy
import pytest


@pytest.fixture(autouse=True)
def _fresh_dspy_cache():
    dspy.cache.reset_memory_cache()
    yield
    dspy.cache.reset_memory_cache()


def run(lm, fn):
    """``fn()`` with ``lm`` as DSPy's LM and the JSON adapter."""
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return fn()
