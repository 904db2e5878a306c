"""Reusing what a llama.cpp context already evaluated: prompts that share a prefix skip re-evaluating it.

llama-cpp-python keeps the tokens and KV cache of the last prompt in each context and, on the next call, evaluates
only what follows the longest common prefix. ReGround's calls share long prefixes (the same system message and
instructions per signature; the same sources across the argument calls of one episode), but calls of different
signatures alternate, so the last prompt of a context is often the wrong one to share with. Two things here make
more of it:

- :class:`groundstate.lm.contexts.ContextPool` lends the idle context whose last prompt shares the longest prefix
  with the new one (:func:`common_prefix`, on the prompt's text; llama.cpp then matches tokens exactly);
- :class:`PrefixStore` keeps the KV states of the last :data:`PER_SIGNATURE` prompts of each signature (keyed by
  the system message, which holds the signature's instructions), within a memory bound, and restores
  the best one into the context when it shares clearly more than the context holds (:data:`MIN_GAIN_CHARS`).

Exactness. Greedy outputs must not depend on which calls came before (run ids, resumes and DSPy's cache assume
they do not), so a reused prefix must give the same logits as evaluating the whole prompt. Measured on SmolLM2:
with flash attention a suffix-only evaluation differed from a full one (logits up to 0.66 apart; 2 of the 6
outputs of the embedded test changed), so contexts run without it
(:data:`groundstate.lm.contexts.FLASH_ATTENTION`). Two more guards, cheap and not seen to matter without flash
attention: generated tokens were evaluated one at a time, and a prompt's last token evaluated alone takes
another kernel path than inside a batch; so after each call the context keeps only its prompt minus its last
:data:`KEEP_BACK` tokens (:func:`trim`): a later call never reuses a generated token and always evaluates at
least two tokens of its own in one batch.

Saved states come from ``llama_state_seq_get_data``: only the sequence's KV cells (about 23 KB per token at f16),
not llama-cpp-python's ``save_state``, which also copies the whole logits array (about 100 MB; why its
``LlamaRAMCache`` is not used).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

KEEP_BACK = 2
"""Prompt tokens a context drops from its end after each call, so the next call evaluates at least this many."""


PER_SIGNATURE = 3
"""Saved prompt states kept per signature (system message)."""


MIN_GAIN_CHARS = 256
"""A saved state is restored only when it shares at least this many more characters with the new prompt than the
context's own last prompt does (about 60 tokens: restoring copies megabytes, evaluating 60 tokens takes ~0.3 s)."""


MAX_STORE_BYTES = 512 << 20
"""Upper bound of a store's saved states, whatever the memory (a pool's store takes an eighth of the available
memory at most: :func:`groundstate.lm.contexts.store_bytes`)."""


def prompt_text(messages: list[dict[str, str]]) -> str:
    """The messages as one string in the order the chat template renders them, for prefix comparisons."""
    return "".join(f"{m.get('role')}\n{m.get('content') or ''}\n" for m in messages)


def signature_key(messages: list[dict[str, str]]) -> str:
    """The key of a prompt's signature: a hash of its system message (empty when it has none)."""
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    return hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    return len(os.path.commonprefix([a, b]))


def trim(llama: Any, prompt_tokens: int) -> None:
    """Keep only the first ``prompt_tokens - KEEP_BACK`` tokens of the context (the module docstring: why)."""
    keep = max(0, min(int(llama.n_tokens), int(prompt_tokens) - KEEP_BACK))
    if keep < llama.n_tokens:
        if keep == 0 or not llama._ctx.kv_cache_seq_rm(-1, keep, -1):
            llama.reset()
            llama._ctx.kv_cache_clear()
            return
        llama.n_tokens = keep
        llama._requires_eval = True


def reused_tokens(before: Any, after: Any, prompt_tokens: int) -> int:
    """Prompt tokens llama-cpp-python did not evaluate: the common prefix of the context's tokens before the call
    (``before``) and the prompt (``after``), at most all but one of the prompt (it always evaluates one)."""
    n = min(len(before), int(prompt_tokens))
    if n == 0:
        return 0
    same = before[:n] == after[:n]
    first_diff = int(same.argmin()) if not same.all() else n
    return max(0, min(first_diff, int(prompt_tokens) - 1))


@dataclass(frozen=True)
class SavedPrompt:
    """The KV state of one evaluated prompt prefix: its text, its tokens and the sequence's saved cells."""

    text: str
    tokens: Any  # numpy array of token ids
    data: Any  # ctypes uint8 array from llama_state_seq_get_data

    @property
    def nbytes(self) -> int:
        return len(self.data) + int(self.tokens.nbytes)


class PrefixStore:
    """The saved prompt states of a pool's contexts, by signature, least recently used dropped first.

    Args:
        per_signature: states kept per signature (:data:`PER_SIGNATURE`).
        max_bytes: bound of all states (:data:`MAX_STORE_BYTES` if ``None``); 0 keeps none.
    """

    def __init__(self, per_signature: int = PER_SIGNATURE, max_bytes: int | None = None):
        self.per_signature = int(per_signature)
        self.max_bytes = MAX_STORE_BYTES if max_bytes is None else int(max_bytes)
        self._states: OrderedDict[str, list[SavedPrompt]] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.restored = 0  # states restored into a context
        self._pending: dict[str, threading.Event] = {}

    def claim(self, key: str, wait_s: float = 120.0) -> bool:
        """Before a call of signature ``key`` that found no saved state: ``True`` if this call is now the one that
        will save the first state of ``key`` (it must :meth:`settle` it); ``False`` after waiting (at most
        ``wait_s``) for another call that is already evaluating one, so the caller can restore it instead of
        evaluating the same instructions at the same time on another context."""
        with self._lock:
            pending = self._pending.get(key)
            if pending is None:
                self._pending[key] = threading.Event()
                return True
        pending.wait(wait_s)
        return False

    def settle(self, key: str) -> None:
        """The claimed first state of ``key`` is saved (or will not be): release the calls waiting for it."""
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            pending.set()

    def best(self, key: str, text: str) -> tuple[SavedPrompt | None, int]:
        """The saved state of signature ``key`` sharing the longest prefix with ``text``, and that length."""
        with self._lock:
            states = list(self._states.get(key, ()))
        scored = [(common_prefix(s.text, text), s) for s in states]
        if not scored:
            return None, 0
        shared, state = max(scored, key=lambda pair: pair[0])
        return state, shared

    def save(self, key: str, text: str, llama: Any, keep: int | None = None) -> None:
        """Save the context's current sequence as the latest state of ``key``: its first ``keep`` tokens (all it
        holds if ``None``; the cells after them are saved too and dropped on :meth:`restore`)."""
        import llama_cpp  # noqa: PLC0415 (optional extra: local)

        n = int(llama.n_tokens) if keep is None else max(0, min(int(keep), int(llama.n_tokens)))
        if n == 0 or self.max_bytes <= 0:
            return
        ctx = llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        if size <= 0 or size > self.max_bytes:
            return
        data = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(ctx, data, size, 0) != size:
            return
        state = SavedPrompt(text=text, tokens=llama.input_ids[:n].copy(), data=data)
        with self._lock:
            states = [s for s in self._states.pop(key, []) if s.text != text]
            states.append(state)
            while len(states) > self.per_signature:
                self.nbytes -= states.pop(0).nbytes
            self._states[key] = states  # most recently used last
            self.nbytes += state.nbytes
            while self.nbytes > self.max_bytes and self._states:
                oldest_key, oldest = next(iter(self._states.items()))
                self.nbytes -= oldest.pop(0).nbytes
                if not oldest:
                    del self._states[oldest_key]

    def restore(self, llama: Any, state: SavedPrompt) -> bool:
        """Replace the context's sequence with ``state``; ``False`` (and an empty context) if llama.cpp refuses."""
        import llama_cpp  # noqa: PLC0415 (optional extra: local)

        llama._ctx.kv_cache_clear()
        llama.reset()
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, state.data, len(state.data), 0) == 0:
            llama._ctx.kv_cache_clear()
            return False
        n = len(state.tokens)
        if not llama._ctx.kv_cache_seq_rm(-1, n, -1):  # cells saved after the kept tokens
            llama._ctx.kv_cache_clear()
            return False
        llama.input_ids[:n] = state.tokens
        llama.n_tokens = n
        with self._lock:
            self.restored += 1
        return True

    def clear(self) -> None:
        with self._lock:
            self._states.clear()
            self.nbytes = 0


class PromptReuse:
    """One call's prefix reuse on a lent context, by mode (``routed``, ``last``, ``off``: see
    :data:`groundstate.lm.embedded.REUSE_MODES`); the embedded engine's ``complete`` runs the call inside it.

    On entry: ``off`` empties the context; ``routed`` restores the pool store's best saved state of the signature
    when it shares clearly more than the context holds, and when the store has none yet and another call of the
    signature is evaluating its prompt right now (calls of one stage start together), waits for that call's state
    instead of evaluating the same instructions beside it (:meth:`PrefixStore.claim`). In ``routed`` mode the state
    is saved as soon as the prompt is evaluated (before generation), so waiting calls start early. :meth:`finish`
    counts the reused tokens and :func:`trim`-s the context; a failed call leaves it empty.
    """

    def __init__(self, pool: Any, llama: Any, messages: list[dict[str, str]], text: str, mode: str):
        self.pool, self.llama, self.text, self.mode = pool, llama, text, mode
        self.key = signature_key(messages)
        self.claimed = False
        self.before: Any = None

    def __enter__(self) -> PromptReuse:
        llama, pool = self.llama, self.pool
        held = common_prefix(pool.held(llama), self.text)
        pool.served(llama, "")  # until this call succeeds, what the context holds is unknown
        if self.mode == "off":
            llama.reset()
        elif self.mode == "routed":
            store = pool.store
            state, shared = store.best(self.key, self.text)
            if state is None and held < MIN_GAIN_CHARS:  # nothing of this signature here or saved
                self.claimed = store.claim(self.key)
                if not self.claimed:
                    state, shared = store.best(self.key, self.text)
            if state is not None and shared >= held + MIN_GAIN_CHARS:
                store.restore(llama, state)
            self._save_after_prompt(store)
        self.before = llama.input_ids[: llama.n_tokens].copy()
        return self

    def _save_after_prompt(self, store: PrefixStore) -> None:
        """Have llama-cpp-python's first ``eval`` of the call (the prompt) save its state right after it."""
        llama, evaluate = self.llama, self.llama.eval

        def eval_then_save(tokens):
            evaluate(tokens)
            if llama.__dict__.pop("eval", None) is not None:  # once: the next evals are generated tokens
                store.save(self.key, self.text, llama, keep=int(llama.n_tokens) - KEEP_BACK)
                self._settle()

        llama.eval = eval_then_save

    def _settle(self) -> None:
        if self.claimed:
            self.claimed = False
            self.pool.store.settle(self.key)

    def finish(self, prompt_tokens: int) -> int:
        """After a successful call: the prompt tokens reused; the context keeps its trimmed prompt."""
        reused = reused_tokens(self.before, self.llama.input_ids, prompt_tokens)
        trim(self.llama, prompt_tokens)
        self.pool.served(self.llama, self.text)
        return reused

    def __exit__(self, exc_type, exc, tb) -> None:
        self.llama.__dict__.pop("eval", None)
        self._settle()
        if exc_type is not None:  # the context may hold a partial generation: the next call starts afresh
            self.llama.reset()
