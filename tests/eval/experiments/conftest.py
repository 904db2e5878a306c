"""Fixtures of the experiment tests."""

import pytest

from tests.eval.experiments.scripted import ScriptedLMs


@pytest.fixture
def scripted():
    return ScriptedLMs()
