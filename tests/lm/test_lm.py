import json
import sys
from typing import Literal

import dspy
import pytest

from groundstate.errors import LMSetupError
from groundstate.lm import contexts
from groundstate.lm.config import LMConfig
from groundstate.lm.embedded import EmbeddedEngine, bound_schema, find_embedded_model
from groundstate.lm.specs import describe_lm, get_lm
from tests.conftest import requires_embedded


def test_unknown_specs_and_options_are_refused_with_a_clear_message():
    with pytest.raises(LMSetupError, match="unknown LM spec 'gpt4'"):
        get_lm("gpt4")
    with pytest.raises(LMSetupError, match="unknown LM provider 'nosuch'"):
        get_lm("nosuch/model")
    with pytest.raises(LMSetupError, match="unknown LM option"):
        get_lm("openai/gpt-4o-mini", colour="blue")
    with pytest.raises(LMSetupError, match="apply only to the embedded LM"):
        get_lm("openai/gpt-4o-mini", n_ctx=10)


def test_litellm_specs_build_a_dspy_lm_with_options():
    lm = get_lm("hosted_vllm/my-model", api_base="http://localhost:8000/v1", temperature=0.2, max_tokens=100)
    assert isinstance(lm, dspy.LM) and lm.model == "hosted_vllm/my-model"
    assert lm.kwargs["temperature"] == 0.2 and lm.kwargs["api_base"] == "http://localhost:8000/v1"
    assert describe_lm(lm)["api_base"] == "http://localhost:8000/v1"


def test_missing_model_file_is_a_setup_error(monkeypatch):
    import importlib.util

    monkeypatch.delenv("GROUNDSTATE_GGUF", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(LMSetupError, match="groundstate\\[local\\]"):
        find_embedded_model()
    monkeypatch.setenv("GROUNDSTATE_GGUF", "/nonexistent/model.gguf")
    with pytest.raises(LMSetupError, match="not a file"):
        get_lm("embedded")


def test_bound_schema_bounds_free_strings_and_arrays_only():
    schema = {"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "enum": ["x", "y"]},
        "c": {"type": "array", "items": {"type": "string"}},
        "d": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2},
    }}
    out = bound_schema(schema, 50, 4)
    assert out["properties"]["a"]["maxLength"] == 50
    assert "maxLength" not in out["properties"]["b"]
    assert out["properties"]["c"]["maxItems"] == 4 and out["properties"]["c"]["items"]["maxLength"] == 50
    assert out["properties"]["d"] == schema["properties"]["d"]
    assert "maxLength" not in schema["properties"]["a"]  # the input is not modified


def test_engine_passes_the_schema_and_reports_usage(monkeypatch):
    """The engine turns a JSONAdapter request into a schema-constrained llama.cpp call (with a fake model)."""
    import groundstate.lm.contexts as lm_module

    seen = {}

    class FakeLlama:
        def create_chat_completion(self, messages, **kwargs):
            seen["messages"], seen["kwargs"] = messages, kwargs
            return {"choices": [{"message": {"content": json.dumps({"choice": "B", "facts": ["f"]})},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 123, "completion_tokens": 7}}

    monkeypatch.setattr(lm_module, "new_llama", lambda *a: FakeLlama())
    monkeypatch.setattr(lm_module, "_POOLS", {})
    engine = EmbeddedEngine(model_path="/fake-schema.gguf")
    lm = dspy.LM("embedded/smollm2-135m-instruct", engine=engine, cache=False)

    class Sig(dspy.Signature):
        """Pick."""
        question: str = dspy.InputField()
        choice: Literal["A", "B"] = dspy.OutputField()
        facts: list[str] = dspy.OutputField()

    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), dspy.track_usage() as usage:
        out = dspy.Predict(Sig)(question="q?")
    assert out.choice == "B" and out.facts == ["f"]
    (schema,) = (json.loads(key) for key in engine._grammars)  # one grammar, built from the bounded schema
    assert seen["kwargs"]["grammar"] is engine._grammars[json.dumps(schema)] and "response_format" not in seen["kwargs"]
    assert schema["properties"]["choice"]["enum"] == ["A", "B"]
    assert schema["properties"]["facts"]["maxItems"] == engine.max_items
    assert '"\\"A\\""' in seen["kwargs"]["grammar"]._grammar  # the enum is in the GBNF
    assert seen["messages"][0]["role"] == "system"
    assert usage.get_total_tokens()[lm.model]["prompt_tokens"] == 123


def test_embedded_lm_serves_acall_on_a_worker_thread(monkeypatch, tmp_path):
    """``get_lm("embedded")`` has an async engine: ``acall`` decodes off the event loop, with the sync result."""
    import asyncio
    import threading

    import groundstate.lm.contexts as lm_module

    threads = []

    class FakeLlama:
        def create_chat_completion(self, messages, **kwargs):
            threads.append(threading.current_thread())
            return {"choices": [{"message": {"content": json.dumps({"answer": "4"})}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 3}}

    monkeypatch.setattr(lm_module, "new_llama", lambda *a: FakeLlama())
    monkeypatch.setattr(lm_module, "_POOLS", {})
    (tmp_path / "model.gguf").write_bytes(b"")
    monkeypatch.setenv("GROUNDSTATE_GGUF", str(tmp_path / "model.gguf"))
    lm = get_lm("embedded", cache=False)
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        sync = predict(question="2+2?")

        async def both():
            return await asyncio.gather(predict.acall(question="2+2?"), predict.acall(question="3+1?"))

        async_ = asyncio.run(both())
    assert sync.answer == "4" and [p.answer for p in async_] == ["4", "4"]
    assert threads[0] is threading.main_thread() and all(t is not threading.main_thread() for t in threads[1:])
    assert len(threads) == lm.engine.calls == 3
    state = lm.dump_state()
    assert state["async_engine"]["state"] == lm.engine.dump_state()  # a saved program keeps its async path


def test_lm_config_file_roles(tmp_path):
    path = tmp_path / "lm.toml"
    path.write_text('[default]\nmodel = "openai/gpt-4o-mini"\n\n[roles."verify.*"]\nmodel = "hosted_vllm/m"\n'
                    'api_base = "http://x:1/v1"\n\n[roles."agent.2"]\nmodel = "ollama_chat/qwen3:8b"\n')
    config = LMConfig.load(path)
    assert config.lm_for("verify.adjudicate").model == "hosted_vllm/m"
    assert config.lm_for("agent.2").model == "ollama_chat/qwen3:8b"
    assert config.lm_for("resolve.choose").model == "openai/gpt-4o-mini"
    assert config.lm_for("verify.x") is config.lm_for("verify.y")  # one LM per distinct setting

    class Stage(dspy.Module):
        def __init__(self):
            super().__init__()
            self.adjudicate = dspy.Predict("a -> b")

    class Prog(dspy.Module):
        def __init__(self):
            super().__init__()
            self.verify = Stage()
            self.resolve = dspy.Predict("a -> b")

    prog = Prog()
    changed = config.apply(prog)
    assert changed == {"verify.adjudicate": "hosted_vllm/m"}
    assert prog.verify.adjudicate.lm.model == "hosted_vllm/m"
    assert prog.resolve.lm is None


@pytest.mark.parametrize("content,match", [
    ("not toml = = =", "not valid TOML"),
    ('[default]\ntemperature = 0.1\n', "needs a string field 'model'"),
    ('[default]\nmodel = "embedded"\nflavour = 1\n', "unknown field"),
    ('[defaults]\nmodel = "embedded"\n', "unknown section"),
])
def test_bad_lm_config_files(tmp_path, content, match):
    path = tmp_path / "lm.toml"
    path.write_text(content)
    with pytest.raises(LMSetupError, match=match):
        LMConfig.load(path)
    with pytest.raises(LMSetupError, match="not found"):
        LMConfig.load(tmp_path / "missing.toml")


def test_describe_lm_never_contains_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    lm = get_lm("openai/gpt-4o-mini", temperature=0.0)
    assert "sk-secret" not in json.dumps(describe_lm(lm))


def test_import_groundstate_is_light():
    import subprocess

    code = ("import sys, groundstate; import groundstate.cli; "
            "heavy=[m for m in sys.modules if m.split('.')[0] in ('llama_cpp','litellm','ray','matplotlib')]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.embedded
@requires_embedded
def test_embedded_model_answers_structured_fields_and_caches():
    """The real SmolLM2 answers a Literal and a list[str] field through JSONAdapter; a repeat hits the cache."""

    class Check(dspy.Signature):
        """Pick the option that answers the question and list short supporting facts."""
        question: str = dspy.InputField(desc="the question")
        choice: Literal["A", "B", "C", "D"] = dspy.OutputField(desc="the letter of the chosen option")
        facts: list[str] = dspy.OutputField(desc="short facts")

    lm = get_lm("embedded", cache=True)
    predict = dspy.Predict(Check)
    question = "Which is a fruit? A: apple B: chair C: stone D: car"
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), dspy.track_usage() as usage:
        first = predict(question=question)
    assert first.choice in {"A", "B", "C", "D"}
    assert isinstance(first.facts, list) and all(isinstance(f, str) for f in first.facts)
    tokens = usage.get_total_tokens()[lm.model]
    assert tokens["prompt_tokens"] > 0 and tokens["completion_tokens"] > 0
    calls = lm.engine.calls
    assert calls == 1
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        second = predict(question=question)
    assert lm.engine.calls == calls  # served from DSPy's cache: the model was not called again
    assert second.choice == first.choice and second.facts == first.facts


def test_embedded_context_is_smollm2s_and_a_too_long_prompt_fails_the_call_before_decoding(monkeypatch):
    import dspy

    from groundstate.lm.faults import lm_failure

    class FakeLlama:  # tokenizes 4 bytes per token; decoding must never be reached
        def tokenize(self, data, add_bos=True, special=False):
            return list(range(len(data) // 4))

        def create_chat_completion(self, **kwargs):
            raise AssertionError("decoded a prompt that does not fit")

    monkeypatch.setattr(contexts, "new_llama", lambda *args: FakeLlama())
    monkeypatch.setattr(contexts, "_POOLS", {})
    lm = get_lm("embedded")
    assert lm.engine.n_ctx == 8192
    with pytest.raises(dspy.ContextWindowExceededError, match="context window is 8192 tokens") as info:
        lm("word " * 8000)
    message = str(lm_failure(info.value, lm))
    assert "does not fit the model's context window" in message and "\n" not in message
