"""Prefix reuse in the embedded engine: routing to the context sharing the longest prefix, saved prompt states,
the counts of reused tokens, and (with the real model) answers that do not depend on what was reused."""

from typing import Literal

import dspy
import numpy as np
import pytest

from groundstate.lm import prefix
from groundstate.lm.contexts import ContextPool
from groundstate.lm.prefix import KEEP_BACK, PrefixStore, common_prefix, prompt_text, reused_tokens, trim
from groundstate.lm.specs import get_lm
from groundstate.metering import meter_context, new_meter
from tests.conftest import requires_embedded


class FakeCtx:
    def __init__(self, owner):
        self.owner, self.ctx = owner, owner

    def kv_cache_seq_rm(self, seq, p0, p1):
        self.owner.kv = self.owner.kv[:p0]
        return True

    def kv_cache_clear(self):
        self.owner.kv = []


class FakeLlama:
    """Tokens and a 'KV cache' (one entry per evaluated token) without a model."""

    def __init__(self, name="c"):
        self.name, self.input_ids, self.n_tokens, self.kv = name, np.zeros(64, dtype=np.intc), 0, []
        self._ctx, self._requires_eval = FakeCtx(self), False

    def hold(self, tokens):
        self.input_ids[: len(tokens)] = tokens
        self.n_tokens, self.kv = len(tokens), [f"kv{t}" for t in tokens]

    def reset(self):
        self.n_tokens, self._requires_eval = 0, True


def test_the_pool_lends_the_idle_context_sharing_the_longest_prefix():
    made = iter([FakeLlama("a"), FakeLlama("b")])
    pool = ContextPool(lambda: next(made), size=2)
    with pool.context("x") as a, pool.context("y") as b:  # both lent at once: two contexts exist
        pool.served(a, "system\nverify claims\nuser\nsources: one two three")
        pool.served(b, "system\nresolve\nuser\nfacts")
    with pool.context("system\nresolve\nuser\nother facts") as lent:
        assert lent is b
    with pool.context("system\nverify claims\nuser\nsources: one two four") as lent:
        assert lent is a
    with pool.context() as lent:  # no text: the most recently returned
        assert lent is a


def test_reused_tokens_is_the_common_prefix_and_never_the_whole_prompt():
    before = np.array([1, 2, 3, 4, 5])
    assert reused_tokens(before, np.array([1, 2, 3, 9, 9, 9]), 6) == 3
    assert reused_tokens(before, np.array([1, 2, 3, 4, 5]), 5) == 4  # llama.cpp evaluates at least one token
    assert reused_tokens(np.array([], dtype=int), np.array([1, 2]), 2) == 0
    assert reused_tokens(before, np.array([7, 2, 3]), 3) == 0


def test_after_a_call_a_context_keeps_its_prompt_minus_the_last_tokens_and_no_generated_token():
    llama = FakeLlama()
    llama.hold([10, 11, 12, 13, 14, 15, 16, 17])  # a 6-token prompt and 2 generated tokens
    trim(llama, prompt_tokens=6)
    assert llama.n_tokens == 6 - KEEP_BACK and llama.kv == ["kv10", "kv11", "kv12", "kv13"]
    assert llama._requires_eval
    trim(llama, prompt_tokens=1)  # nothing worth keeping
    assert llama.n_tokens == 0


def test_the_store_keeps_a_few_states_per_signature_within_its_bytes(monkeypatch):
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_size", lambda ctx, seq: 100 * ctx.n_tokens)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_data", lambda ctx, buf, size, seq: size)
    restored = []
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data",
                        lambda ctx, buf, size, seq: restored.append(size) or size)
    store = PrefixStore(per_signature=2, max_bytes=10_000)
    llama = FakeLlama()
    for i, text in enumerate(["sys\nA one", "sys\nA two", "sys\nA three"]):
        llama.hold([1, 2, 3, 4 + i])
        store.save("A", text, llama)
    state, shared = store.best("A", "sys\nA thr")
    assert state.text == "sys\nA three" and shared == len("sys\nA thr")
    assert {s.text for s in store._states["A"]} == {"sys\nA two", "sys\nA three"}  # the oldest dropped
    assert store.best("B", "sys\nA three") == (None, 0)
    target = FakeLlama("t")
    assert store.restore(target, state) and target.n_tokens == 4 and list(target.input_ids[:4]) == [1, 2, 3, 6]
    assert restored == [400] and target._requires_eval
    for i in range(40):  # other signatures push the least recently used out, under max_bytes
        llama.hold(list(range(20)))
        store.save(f"S{i}", f"sys\n{i}", llama)
    assert store.nbytes <= store.max_bytes and "A" not in store._states
    assert PrefixStore(max_bytes=0).save("A", "t", llama) is None and store.restored == 1


def test_a_second_call_of_a_new_signature_waits_for_the_first_ones_state_instead_of_evaluating_it_too():
    import threading

    store = PrefixStore()
    assert store.claim("A")  # the first call of A will save its state
    waited = []
    second = threading.Thread(target=lambda: waited.append(store.claim("A", wait_s=30)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first call's state
    store.settle("A")
    second.join(5)
    assert waited == [False] and store.claim("A")  # released; a later call with no state claims anew
    assert store.claim("B") and not store.claim("A", wait_s=0.01)  # claims are per signature; a wait is bounded


def test_prompt_text_follows_the_message_order_and_common_prefix_counts_characters():
    text = prompt_text([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert text == "system\nbe brief\nuser\nhi\n"
    assert common_prefix("abcd", "abxy") == 2 and prefix.signature_key([]) == prefix.signature_key(
        [{"role": "user", "content": "x"}])


class Verify(dspy.Signature):
    """You check one claim against the sources. Read every source, decide whether the claim is supported by them,
    contradicted by them, or not addressed, and say which source decides it. Sources may disagree; a source that
    states a number or a date exactly outweighs one that only hints at it. Keep the reason to one sentence."""

    sources: str = dspy.InputField(desc="numbered sources, one per line")
    claim: str = dspy.InputField()
    verdict: Literal["supported", "contradicted", "unaddressed"] = dspy.OutputField()
    reason: str = dspy.OutputField()


class Answer(dspy.Signature):
    """Answer the question from the facts alone, naming the option that the facts support best."""

    facts: str = dspy.InputField()
    question: str = dspy.InputField()
    choice: Literal["A", "B", "C", "D"] = dspy.OutputField()


SOURCES = "\n".join(f"[{i}] The shelter on {s} street holds {40 + 7 * i} people and opened at {6 + i} am."
                    for i, s in enumerate(["Elm", "Oak", "Pine", "Birch", "Cedar", "Maple"]))
CALLS = [(Verify, {"sources": SOURCES, "claim": "The Elm shelter opened at 6 am."}),
         (Answer, {"facts": "Oak holds 47 people.", "question": "Which is largest? A: Oak B: Elm C: Pine D: none"}),
         (Verify, {"sources": SOURCES, "claim": "The Pine shelter holds 90 people."}),
         (Answer, {"facts": "Pine holds 54 people.", "question": "Which is largest? A: Oak B: Elm C: Pine D: none"}),
         (Verify, {"sources": SOURCES, "claim": "The Cedar shelter opened at 10 am."}),
         (Verify, {"sources": SOURCES, "claim": "The Cedar shelter opened at 10 am."})]  # the same prompt again


@pytest.mark.embedded
@requires_embedded
def test_real_model_answers_do_not_depend_on_what_was_reused():
    """The same calls, one after another on one context, with prompts evaluated whole (``reuse='off'``) and with
    routed reuse and saved states: identical raw outputs, with most prompt tokens of the second run reused."""

    def run(reuse):
        lm = get_lm("embedded", threads=1, contexts=1, cache=False, max_tokens=80, reuse=reuse)
        meter = new_meter()
        outputs = []
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter_context(meter):
            for signature, inputs in CALLS:
                dspy.Predict(signature)(**inputs)
                outputs.append(lm.history[-1]["outputs"])
        entries = [e for v in meter.usage_data.values() for e in v]
        reused = sum(int((e.get("prompt_tokens_details") or {}).get("cached_tokens") or 0) for e in entries)
        return outputs, reused, sum(int(e["prompt_tokens"]) for e in entries), lm.engine.pool().store.restored

    whole, whole_reused, prompt_tokens, _ = run("off")
    routed, routed_reused, routed_prompt, restored = run("routed")
    assert routed == whole and routed_prompt == prompt_tokens
    assert whole_reused == 0 and routed_reused > prompt_tokens / 2 and restored >= 1
