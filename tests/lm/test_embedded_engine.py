"""The embedded engine's parallelism settings, its pool of llama.cpp contexts and its per-schema grammars."""

import asyncio
import json
import threading
from typing import Literal

import dspy
import pytest

import groundstate.lm.embedded as embedded
from groundstate.cli.options import Parser, add_lm_options, lm_config_from_args
from groundstate.concurrency import thread_map
from groundstate.errors import LMSetupError
from groundstate.eval.runner import fingerprint, run_config
from groundstate.lm import contexts
from groundstate.lm.config import LMConfig
from groundstate.lm.contexts import DEFAULT_THREADS, choose_contexts, idle_cores, kv_cache_bytes, memory_contexts
from groundstate.lm.embedded import EmbeddedEngine
from groundstate.lm.specs import describe_lm, get_lm
from tests.conftest import requires_embedded

GIB = 1 << 30


def test_default_contexts_follow_the_idle_cores_and_the_memory():
    assert DEFAULT_THREADS == 1  # fixed: greedy outputs depend on the thread count
    assert choose_contexts(1, 8192, idle=2, memory=16 * GIB) == 2  # one context per idle core
    assert choose_contexts(2, 8192, idle=5, memory=16 * GIB) == 2
    assert choose_contexts(4, 8192, idle=2, memory=16 * GIB) == 1  # never below one
    assert choose_contexts(1, 8192, idle=64, memory=GIB) == memory_contexts(8192, GIB) == 1
    assert memory_contexts(8192, GIB) == int(0.25 * GIB // (kv_cache_bytes(8192) + (64 << 20)))
    assert kv_cache_bytes(8192) == 188_743_680  # 180 MiB: 30 layers x 192 KV dims x 2 (K, V) x f16


def test_idle_cores_subtract_this_processes_share_of_the_load(monkeypatch):
    import os

    assert 1 <= idle_cores() <= len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert idle_cores(cores=2, load=0.1) == 2
    assert idle_cores(cores=2, load=2.0) == 1  # half the machine's load falls on our two of its four cores
    assert idle_cores(cores=4, load=1.4) == 3
    assert idle_cores(cores=1, load=50.0) == 1  # never below one


class GateLlama:
    """A stand-in llama.cpp context: its answer depends only on the messages; every call waits at ``gate`` so
    calls that could not run at the same time fail (a barrier with a timeout, never a timed assertion)."""

    created = 0
    lock = threading.Lock()

    def __init__(self, gate: threading.Barrier | None = None):
        self.gate = gate
        with GateLlama.lock:
            GateLlama.created += 1

    def create_chat_completion(self, messages, **kwargs):
        if self.gate is not None:
            self.gate.wait(timeout=20)
        text = messages[-1]["content"]
        return {"choices": [{"message": {"content": json.dumps({"answer": str(len(text))})},
                             "finish_reason": "stop"}], "usage": {"prompt_tokens": len(text), "completion_tokens": 3}}


@pytest.fixture
def fake_contexts(monkeypatch, tmp_path):
    """Engines over a stand-in model file whose contexts are :class:`GateLlama` (``gate`` set per test)."""
    state = {"gate": None}
    monkeypatch.setattr(contexts, "_POOLS", {})
    monkeypatch.setattr(contexts, "new_llama", lambda *a: GateLlama(state["gate"]))
    GateLlama.created = 0
    (tmp_path / "model.gguf").write_bytes(b"")
    monkeypatch.setenv("GROUNDSTATE_GGUF", str(tmp_path / "model.gguf"))
    return state


def _answers(lm, questions, workers):
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return [p.answer for p in thread_map(lambda q: predict(question=q), questions, max_workers=workers)]


def test_a_pool_of_contexts_decodes_requests_at_once_with_the_single_contexts_outputs(fake_contexts):
    questions = [f"question {'x' * i}?" for i in range(6)]
    single = _answers(get_lm("embedded", contexts=1, threads=1, cache=False), questions, workers=1)
    created_by_single = GateLlama.created
    fake_contexts["gate"] = threading.Barrier(2)  # each call returns only once two decode at the same time
    lm = get_lm("embedded", contexts=2, threads=2, cache=False)
    pooled = _answers(lm, questions, workers=4)
    assert pooled == single and created_by_single == 1
    assert lm.engine.pool().created == 2 and lm.engine.calls == 6


def test_the_async_engine_uses_the_pool(fake_contexts):
    expected = _answers(get_lm("embedded", contexts=1, cache=False), ["ab?", "abcd?"], workers=1)
    fake_contexts["gate"] = threading.Barrier(2)  # both calls must decode at the same time
    lm = get_lm("embedded", contexts=2, threads=2, cache=False)
    predict = dspy.Predict("question -> answer")

    async def both():
        return await asyncio.gather(predict.acall(question="ab?"), predict.acall(question="abcd?"))

    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = asyncio.run(both())
    assert [p.answer for p in out] == expected and lm.engine.pool().created == 2


def test_contexts_are_recorded_but_not_fingerprinted_and_threads_are_both(fake_contexts):
    one, three = get_lm("embedded", contexts=1), get_lm("embedded", contexts=3)
    described = describe_lm(three)
    assert described["engine"]["runtime"] == {"contexts": 3, "reuse": "routed"}
    assert described["engine"]["n_threads"] == 1
    assert fingerprint(run_config("qa", lm=describe_lm(one))) == fingerprint(run_config("qa", lm=described))
    two_threads = describe_lm(get_lm("embedded", threads=2, contexts=3))
    assert fingerprint(run_config("qa", lm=two_threads)) != fingerprint(run_config("qa", lm=described))
    state = three.engine.dump_state()
    assert state["runtime"] == {"contexts": 3} and state["n_threads"] == 1
    again = EmbeddedEngine.load_state(state)
    assert (again.threads, again.contexts, again.n_ctx) == (1, 3, 8192)
    chosen = get_lm("embedded").engine
    assert "runtime" not in chosen.dump_state() and chosen.describe()["runtime"]["contexts"] >= 1
    old = EmbeddedEngine.load_state({"model_path": None, "n_ctx": 8192, "n_threads": 2, "max_string_length": 300,
                                     "max_items": 8, "seed": 0})  # a program saved before threads was a setting
    assert old.threads == 2
    earlier = {"model": "embedded/smollm2-135m-instruct", "temperature": 0.0, "max_tokens": 512,  # 2 threads always
               "engine": {"n_ctx": 8192, "n_threads": 2, "max_string_length": 300, "max_items": 8, "seed": 0}}
    # engine revision 2 (no flash attention, exact prefix reuse) gives other outputs than earlier releases, so the
    # same settings (the shipped file, 2 threads) no longer find their runs: they are other results to resume
    assert fingerprint(run_config("qa", lm=describe_lm(get_lm("embedded", threads=2, quant="shipped")))) != \
        fingerprint(run_config("qa", lm=earlier))
    assert describe_lm(get_lm("embedded"))["engine"]["revision"] == 2


def test_lm_threads_and_contexts_on_the_command_line_and_in_lm_configs(tmp_path, fake_contexts):
    parser = Parser(prog="t")
    add_lm_options(parser)
    config = lm_config_from_args(parser.parse_args(["--lm-threads", "1", "--lm-contexts", "3"]))
    engine = config.lm_for(None).engine
    assert (engine.threads, engine.contexts) == (1, 3)
    path = tmp_path / "lm.toml"
    path.write_text('[default]\nmodel = "embedded"\nthreads = 2\n\n[roles."agent.1"]\nmodel = "embedded"\n'
                    'contexts = 1\n\n[roles."agent.2"]\nmodel = "openai/m"\n')
    config = lm_config_from_args(parser.parse_args(["--lm-config", str(path), "--lm-threads", "1"]))
    assert config.lm_for(None).engine.threads == 2  # the file's own setting wins
    assert (config.lm_for("agent.1").engine.threads, config.lm_for("agent.1").engine.contexts) == (1, 1)
    assert "threads" not in config.spec_for("agent.2")
    described = config.describe()
    assert described["roles"]["agent.1"] == {"model": "embedded", "threads": 1, "quant": "q8_0", "revision": 2,
                                             "runtime": {"contexts": 1}}
    rebuilt = LMConfig(default=described["default"], roles=described["roles"])  # as a Ray worker does
    assert rebuilt.lm_for("agent.1").engine.contexts == 1
    with pytest.raises(LMSetupError, match="only to the embedded LM"):
        lm_config_from_args(parser.parse_args(["--lm", "openai/m", "--lm-threads", "2"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--lm-contexts", "0"])
    path.write_text('[default]\nmodel = "embedded"\ncontexts = 0\n')
    with pytest.raises(LMSetupError, match="field 'contexts' must be a positive integer"):
        LMConfig.load(path)
    with pytest.raises(LMSetupError, match="not both"):
        get_lm("embedded", threads=1, n_threads=2)
    assert get_lm("embedded", n_threads=3).engine.threads == 3  # the earlier name still works


def test_the_grammar_of_a_schema_is_built_once_and_is_llama_cpps_own():
    pytest.importorskip("llama_cpp")
    from llama_cpp import llama_chat_format

    engine = EmbeddedEngine(threads=1, contexts=1)
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}
    grammar = engine.grammar(schema)
    assert engine.grammar(json.loads(json.dumps(schema))) is grammar
    library = llama_chat_format._grammar_for_response_format({"type": "json_object", "schema": schema})
    assert grammar._grammar == library._grammar
    assert engine.grammar(None)._grammar == llama_chat_format._grammar_for_json()._grammar


@pytest.mark.embedded
@requires_embedded
def test_real_model_pool_threads_and_cached_grammar_keep_greedy_outputs():
    """SmolLM2 at temperature 0: two contexts answering at once give the single context's answers (threads are
    not compared: greedy outputs depend on the thread count); and the engine's grammar path (built once per
    schema) gives llama-cpp-python's own ``response_format`` output."""

    class Pick(dspy.Signature):
        """Pick the option that answers the question."""
        question: str = dspy.InputField()
        choice: Literal["A", "B", "C", "D"] = dspy.OutputField()
        reason: str = dspy.OutputField()

    questions = ["Which is a fruit? A: apple B: chair C: stone D: car",
                 "Which planet is closest to the Sun? A: Mercury B: Venus C: Earth D: Mars"]
    single = get_lm("embedded", threads=1, contexts=1, cache=False, max_tokens=60)
    pooled = get_lm("embedded", threads=1, contexts=2, cache=False, max_tokens=60, temperature=0.0)
    predict = dspy.Predict(Pick)

    def answers(lm, workers):
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            return [(p.choice, p.reason) for p in thread_map(lambda q: predict(question=q), questions, workers)]

    assert answers(pooled, 2) == answers(single, 1)
    with single.engine.pool().context() as llama:
        messages = [{"role": "user", "content": "Answer in JSON: which is a fruit, apple or chair?"}]
        schema = embedded.bound_schema({"type": "object", "properties": {"answer": {"type": "string"}},
                                        "required": ["answer"]}, 40, 4)
        ours = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=40,
                                            grammar=single.engine.grammar(schema))
        theirs = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=40,
                                              response_format={"type": "json_object", "schema": schema})
    assert ours["choices"][0]["message"]["content"] == theirs["choices"][0]["message"]["content"]
