"""Greedy grammar-constrained sampling that asks the grammar about one token first.

llama-cpp-python's sampler chain for ``temperature=0`` with a grammar is *penalties -> grammar -> greedy*: the
grammar sampler checks every token of the vocabulary (49,152 for SmolLM2) against the grammar at every step,
which costs far more than the decode of a 135M model. :class:`GreedyGrammarSampler` computes the same token
with the check llama.cpp's own ``common_sampler`` uses: take the greedy token of the penalised logits, ask the
grammar about that one token, and only when the grammar rejects it apply the grammar to the whole vocabulary
and take the greedy token again. A grammar only masks tokens (it sets their logit to -inf) and greedy takes
the first maximum, so the result is the token the full chain picks, with ties broken the same way.

:func:`llama_class` is llama-cpp-python's ``Llama`` with this sampler for greedy grammar calls; every other
call (temperature > 0, logits processors, mirostat, no grammar) uses the library's own chain.
"""

from __future__ import annotations

import ctypes
from typing import Any

NEG_INF = float("-inf")


class GreedyGrammarSampler:
    """Penalties, then greedy, then the grammar on that one token (all of it only on a rejection).

    Args:
        llama: the ``Llama`` whose model and vocabulary it samples from.
        grammar: a ``LlamaGrammar``.
        penalties: ``(penalty_repeat, penalty_freq, penalty_present)``, as the library's chain gets them.
    """

    def __init__(self, llama: Any, grammar: Any, penalties: tuple[float, float, float]):
        from llama_cpp import _internals, llama_cpp

        self._lib = llama_cpp
        self.n_vocab = llama._n_vocab
        self.penalties = _internals.LlamaSampler()
        self.penalties.add_penalties(n_vocab=self.n_vocab, penalty_last_n=llama.last_n_tokens_size,
                                     penalty_repeat=penalties[0], penalty_freq=penalties[1],
                                     penalty_present=penalties[2])
        self.grammar = _internals.LlamaSampler()
        self.grammar.add_grammar(llama._model, grammar)
        self.full = _internals.LlamaTokenDataArray(n_vocab=self.n_vocab)
        self._one_data = (llama_cpp.llama_token_data * 1)()
        self._one = llama_cpp.llama_token_data_array(data=self._one_data, size=1, selected=-1, sorted=False)
        self.rejections = 0  # steps on which the grammar rejected the greedy token
        self.steps = 0

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The token llama.cpp's *penalties -> grammar -> greedy* chain picks at ``idx``; accepts it."""
        import numpy as np

        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        self.full.copy_logits(logits)
        self.full.candidates.selected = -1
        self._lib.llama_sampler_apply(self.penalties.sampler, ctypes.byref(self.full.candidates))
        data = self.full.candidates_data
        best = int(np.argmax(data.logit))
        token = int(data.id[best])
        if not self._allowed(token, float(data.logit[best])):
            self.rejections += 1
            self._lib.llama_sampler_apply(self.grammar.sampler, ctypes.byref(self.full.candidates))
            token = int(data.id[int(np.argmax(data.logit))])
        self.steps += 1
        self.penalties.accept(token)
        self.grammar.accept(token)
        return token

    def _allowed(self, token: int, logit: float) -> bool:
        self._one_data[0].id, self._one_data[0].logit, self._one_data[0].p = token, logit, 0.0
        self._one.size, self._one.selected, self._one.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self.grammar.sampler, ctypes.byref(self._one))
        return self._one_data[0].logit != NEG_INF

    def close(self) -> None:
        self.penalties.close()
        self.grammar.close()


_LLAMA_CLASS: Any = None


def llama_class() -> Any:
    """``llama_cpp.Llama`` whose greedy grammar calls use :class:`GreedyGrammarSampler` (built once)."""
    global _LLAMA_CLASS
    if _LLAMA_CLASS is None:
        from llama_cpp import Llama

        class GroundstateLlama(Llama):
            """``Llama`` with :class:`GreedyGrammarSampler` for ``temperature=0`` calls with a grammar."""

            fast_grammar = True
            last_sampler: GreedyGrammarSampler | None = None

            def _init_sampler(self, *args: Any, **kwargs: Any):
                if self.fast_grammar and not args and _fast_path_applies(kwargs):
                    self.last_sampler = GreedyGrammarSampler(
                        self, kwargs["grammar"], (kwargs.get("repeat_penalty", 1.0),
                                                  kwargs.get("frequency_penalty", 0.0),
                                                  kwargs.get("presence_penalty", 0.0)))
                    return self.last_sampler
                return super()._init_sampler(*args, **kwargs)

        _LLAMA_CLASS = GroundstateLlama
    return _LLAMA_CLASS


def _fast_path_applies(kwargs: dict[str, Any]) -> bool:
    return (kwargs.get("grammar") is not None and kwargs.get("temp", 0.8) == 0.0
            and kwargs.get("logits_processor") is None and not kwargs.get("mirostat_mode", 0))
