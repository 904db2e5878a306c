"""Every entry of ``groundstate.compat`` against the installed DSPy: each test fails when DSPy changes the private
name or the behaviour the entry relies on (so an upgrade shows exactly which entry to revisit), and groundstate's
work leaves nothing of itself in a host program's own DSPy calls."""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
import warnings
from pathlib import Path

import dspy
import pytest
from dspy.adapters.json_adapter import JSONAdapter
from dspy.clients.base_lm import BaseLM
from dspy.clients.cache import Cache
from dspy.utils.exceptions import LMServerError

import groundstate
from groundstate import compat
from groundstate.eval.runner import Runner
from groundstate.lm.cache import IDENTITY_ROLLOUT_PREFIX, keyed_lm_class
from groundstate.lm.failed_calls import failed_call_eviction
from groundstate.metering import meter_context
from groundstate.testing import AsyncScriptedEngine, ScriptedEngine, scripted_lm

DSPY_DIR = Path(dspy.__file__).resolve().parent
GROUNDSTATE_DIR = Path(groundstate.__file__).resolve().parent
PATCHED = [(BaseLM, "__call__"), (BaseLM, "acall"), (dspy.Predict, "forward"), (dspy.Predict, "aforward"),
           (Cache, "get"), (Cache, "put")]


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def is_dspys_own(owner: type, name: str) -> bool:
    """Whether ``owner.<name>`` is DSPy's own function (its code lives in DSPy's package), not anyone's wrapper."""
    return DSPY_DIR in Path(vars(owner)[name].__code__.co_filename).resolve().parents


# -- entry 1 -----------------------------------------------------------------------------------------------------
class Lib:
    def hello(self):
        return "lib"


def test_a_scoped_patch_is_in_place_only_while_a_block_is_open_on_any_thread():
    original = vars(Lib)["hello"]
    patch = compat.ScopedPatch(Lib, {"hello": lambda f: lambda self: "patched " + f(self)})
    inside, release = threading.Event(), threading.Event()

    def worker():
        with patch.active():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait(5)
    with patch.active():  # overlapping blocks on two threads
        assert Lib().hello() == "patched lib"
    assert Lib().hello() == "patched lib" and patch.is_installed  # the other block is still open
    release.set()
    thread.join(5)
    assert vars(Lib)["hello"] is original and not patch.is_installed


def test_a_scoped_patch_never_removes_a_wrapper_installed_on_top_of_it():
    original = vars(Lib)["hello"]
    patch = compat.ScopedPatch(Lib, {"hello": lambda f: lambda self: "ours " + f(self)})
    try:
        with patch.active():
            theirs = vars(Lib)["hello"]
            Lib.hello = lambda self: "theirs " + theirs(self)
        assert Lib().hello() == "theirs ours lib"  # theirs kept, ours beneath it
        with patch.active():
            assert Lib().hello() == "theirs ours lib"  # not installed twice
    finally:
        Lib.hello = original
    with pytest.raises(TypeError, match="no longer defines"):
        compat.ScopedPatch(Lib, {"goodbye": lambda f: f})


# -- entry 2 -----------------------------------------------------------------------------------------------------
def test_every_lm_call_goes_through_base_lm_call_and_acall():
    assert params(BaseLM.__call__) == ["self", "prompt", "messages", "kwargs"]
    assert params(BaseLM.acall) == ["self", "prompt", "messages", "kwargs"]
    seen = []

    def spy(kind):
        def wrap(original):
            if kind == "sync":
                def call(self, *args, **kwargs):
                    seen.append((kind, self.model))
                    return original(self, *args, **kwargs)
            else:
                async def call(self, *args, **kwargs):
                    seen.append((kind, self.model))
                    return await original(self, *args, **kwargs)
            return call
        return wrap

    lm = scripted_lm(model="scripted/spied")
    dummy = dspy.utils.DummyLM([{"answer": "x"}])
    predict = dspy.Predict("question -> answer")
    with compat.lm_call_patch(spy("sync"), spy("async")).active():
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            predict(question="q")
            asyncio.run(predict.acall(question="q"))
        with dspy.context(lm=dummy):
            predict(question="q")
    assert seen == [("sync", "scripted/spied"), ("async", "scripted/spied"), ("sync", dummy.model)]
    assert is_dspys_own(BaseLM, "__call__") and is_dspys_own(BaseLM, "acall")


# -- entry 3 -----------------------------------------------------------------------------------------------------
def test_predictor_calls_and_cache_reads_and_writes_go_through_the_patched_methods():
    assert params(dspy.Predict.forward) == ["self", "kwargs"] and params(dspy.Predict.aforward) == ["self", "kwargs"]
    assert params(Cache.get)[:3] == ["self", "request", "ignored_args_for_cache_key"]
    assert params(Cache.put)[:4] == ["self", "request", "value", "ignored_args_for_cache_key"]
    seen = []

    def spy(name, is_async=False):
        def wrap(original):
            if is_async:
                async def call(self, *args, **kwargs):
                    seen.append(name)
                    return await original(self, *args, **kwargs)
            else:
                def call(self, *args, **kwargs):
                    seen.append(name)
                    return original(self, *args, **kwargs)
            return call
        return wrap

    lm = scripted_lm(lambda r: {"answer": "x"}, cache=True, model=f"scripted-{uuid.uuid4().hex[:8]}")
    predict = dspy.Predict("question -> answer")
    patches = compat.predictor_cache_patch(spy("forward"), spy("aforward", True), spy("get"), spy("put"))
    with patches[0].active(), patches[1].active(), dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        predict(question="q")
        predict(question="q")
        asyncio.run(predict.acall(question="q2"))
    assert seen[:3] == ["forward", "get", "put"] and seen[3:5] == ["forward", "get"] and "put" not in seen[5:6]
    assert seen[5] == "aforward" and lm.engine.calls == 2  # the second call was DSPy's cache hit
    assert all(is_dspys_own(owner, name) for owner, name in PATCHED)


def test_one_cache_entry_can_be_forgotten_from_both_tiers(tmp_path):
    cache = Cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(tmp_path),
                  disk_size_limit_bytes=10**7, memory_max_entries=100)
    request, other = {"model": "m", "messages": "a", "api_key": "k1"}, {"model": "m", "messages": "b"}
    cache.put(request, "reply", ["api_key"])
    cache.put(other, "kept")
    key = compat.cache_key(cache, {**request, "api_key": "k2"}, ["api_key"])  # the ignored argument is left out
    assert key in cache.memory_cache and key in cache.disk_cache and cache.get(request, ["api_key"]) == "reply"
    compat.forget_cache_entry(cache, key)
    assert key not in cache.memory_cache and key not in cache.disk_cache and cache.get(request, ["api_key"]) is None
    assert cache.get(other) == "kept"
    assert isinstance(cache._lock, type(threading.RLock()))


# -- entry 4 -----------------------------------------------------------------------------------------------------
def test_json_adapter_prepares_the_response_format_once_per_call_from_what_the_key_names():
    assert params(JSONAdapter._prepare_response_format) == ["self", "lm", "lm_kwargs", "signature"]
    calls = []

    class Spy(JSONAdapter):
        def _prepare_response_format(self, lm, lm_kwargs, signature):
            calls.append(signature)
            super()._prepare_response_format(lm, lm_kwargs, signature)

    lm = scripted_lm()
    with dspy.context(lm=lm, adapter=Spy()):
        dspy.Predict("question -> answer: int")(question="q")
        asyncio.run(dspy.Predict("question -> answer: int").acall(question="q"))
    assert len(calls) == 2 and lm.engine.requests[0].schema["properties"]["answer"]["type"] == "integer"

    def prepared(adapter, lm, signature):
        kwargs = {}
        JSONAdapter._prepare_response_format(adapter, lm, kwargs, signature)
        return kwargs.get("response_format")

    signature = dspy.Signature("question -> answer: int, reason")
    first, second = scripted_lm(model="scripted/a"), scripted_lm(model="scripted/b")
    key = compat.response_format_inputs(JSONAdapter(), first, signature)
    assert key == compat.response_format_inputs(JSONAdapter(), second, signature)
    assert prepared(JSONAdapter(), first, signature).model_json_schema() == \
        prepared(JSONAdapter(), second, signature).model_json_schema()
    assert key != compat.response_format_inputs(JSONAdapter(), first, signature.with_updated_fields(
        "answer", type_=float))

    class NoFormats:
        supported_params: set = set()
        supports_response_schema = True

    class JSONMode:
        supported_params = {"response_format"}
        supports_response_schema = False

    assert prepared(JSONAdapter(), NoFormats(), signature) is None
    assert prepared(JSONAdapter(), JSONMode(), signature) == {"type": "json_object"}
    assert len({compat.response_format_inputs(JSONAdapter(), x, signature) for x in (NoFormats(), JSONMode(),
                                                                                   first)}) == 3


def test_the_memoised_adapter_sends_what_dspys_adapter_sends_and_builds_each_format_once():
    built = []

    class Formats:
        entries: dict = {}

        def get(self, key, build):
            if key not in self.entries:
                built.append(key)
                self.entries[key] = build()
            return self.entries[key]

    adapter = compat.memoized_json_adapter_class(Formats(), lambda value: value)()
    requests = {}
    for name, chosen in (("dspy", JSONAdapter()), ("memo", adapter)):
        lm = scripted_lm()
        with dspy.context(lm=lm, adapter=chosen):
            for question in ("a", "b"):
                dspy.Predict("question -> answer: int")(question=question)
        requests[name] = [(r.messages, r.schema) for r in lm.engine.requests]
    assert requests["memo"] == requests["dspy"] and len(built) == 1


# -- entry 5 -----------------------------------------------------------------------------------------------------
def test_dspy_asks_the_lm_about_its_rollout_id_before_every_call_and_warns_once():
    assert params(dspy.LM._warn_zero_temp_rollout) == ["self", "temperature", "rollout_id"]
    asked = []

    class Spy(dspy.LM):
        def _warn_zero_temp_rollout(self, temperature, rollout_id):
            asked.append((temperature, rollout_id))

    engine = ScriptedEngine()
    lm = Spy("scripted/x", engine=engine, async_engine=AsyncScriptedEngine(engine), temperature=0.0, cache=False)
    lm("hello", rollout_id=7)
    assert asked == [(0.0, None), (0.0, 7)]  # once when built, once before the call
    with pytest.warns(UserWarning, match="rollout_id has no effect when temperature=0"):
        lm = dspy.LM("scripted/y", engine=engine, temperature=0.0, cache=False, rollout_id=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lm("hello")  # once per LM: not again
    keyed = keyed_lm_class()
    assert vars(keyed)["_warn_zero_temp_rollout"].__module__ == compat.__name__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keyed("openai/x", temperature=0.0)._warn_zero_temp_rollout(0.0, f"{IDENTITY_ROLLOUT_PREFIX}abc")
    with pytest.warns(UserWarning, match="rollout_id has no effect"):
        keyed("openai/x", temperature=0.0)._warn_zero_temp_rollout(0.0, 5)  # the caller's own id still warns


# -- entry 6 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("inside_attempt", [False, True])
def test_dspy_reads_num_retries_on_every_call(inside_attempt):
    class Retrying(dspy.LM):
        num_retries = compat.retries_property(lambda configured: 0 if inside_attempt else configured)

    engine = ScriptedEngine(lambda request: LMServerError("boom", retry_after=0))
    lm = Retrying("scripted/x", engine=engine, async_engine=AsyncScriptedEngine(engine), cache=False, num_retries=2)
    assert compat.configured_retries(lm) == 2  # BaseLM.__init__ assigned it through the property
    with pytest.raises(LMServerError, match="boom"):
        lm("hello")
    assert engine.calls == (1 if inside_attempt else 3)


# -- entry 7 -----------------------------------------------------------------------------------------------------
def test_a_compiled_sub_module_is_hidden_from_named_predictors():
    class Inner(dspy.Module):
        def __init__(self):
            super().__init__()
            self.step = dspy.Predict("a -> b")

    class Outer(dspy.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.own = Inner(), dspy.Predict("c -> d")

    program = Outer()
    assert [n for n, _ in program.named_predictors()] == ["inner.step", "own"]
    compat.set_compiled(program.inner, True)
    assert compat.is_compiled(program.inner) and program.inner._compiled is True
    assert [n for n, _ in program.named_predictors()] == ["own"]
    compat.set_compiled(program.inner, False)
    assert [n for n, _ in program.named_predictors()] == ["inner.step", "own"]


# -- entry 8 -----------------------------------------------------------------------------------------------------
def test_an_instance_forward_is_what_dspy_calls_and_dspys_cache_still_answers():
    passed = []

    def wrap(forward):
        def bounded(*args, **kwargs):
            passed.append(1)
            return forward(*args, **kwargs)
        return bounded

    lm = compat.wrap_lm_forward(scripted_lm(cache=True, model=f"scripted-{uuid.uuid4().hex[:8]}"), wrap)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # DSPy 3.4 calls this a legacy LM
        assert lm("hello") == lm("hello")
    assert len(passed) == 2 and lm.engine.calls == 1


# -- nothing of groundstate in the host's own calls ------------------------------------------------------------------
def test_after_groundstate_work_a_host_programs_dspy_calls_run_no_groundstate_code(tmp_path):
    def frames_of_groundstate(request):
        stack = [Path(f.filename).resolve() for f in inspect.stack()]
        outside_engine = [p for p in stack if GROUNDSTATE_DIR in p.parents and p.name != "testing.py"]
        seen.append(outside_engine)
        return {"answer": "x"}

    seen: list[list[Path]] = []
    lm = scripted_lm(frames_of_groundstate, cache=True, model=f"scripted-{uuid.uuid4().hex[:8]}")
    program = dspy.Predict("question -> answer")
    Runner(program, {"program": "host"}, out=tmp_path, threads=2, lm=lm, adapter=dspy.JSONAdapter(),
           progress=False).run([{"id": "a", "question": "q1"}, {"id": "b", "question": "q2"}])
    with meter_context(), failed_call_eviction(), dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        program(question="q3")
    assert all(seen) and len(seen) == 3  # inside the run, the meter and the eviction wrappers were on the stack
    assert all(is_dspys_own(owner, name) for owner, name in PATCHED)
    seen.clear()
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):  # the host's own call, after groundstate's work
        assert program(question="q4").answer == "x"
        assert asyncio.run(program.acall(question="q5")).answer == "x"
    assert seen == [[], []]
