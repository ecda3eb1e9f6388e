"""The grammar compiler of a Hugging Face tokenizer, made once per tokenizer object."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from ..index.tokenizer import TokenizerInfo
from ..runtime.compiler import GrammarCompiler

__all__ = ["compiler_for"]

_COMPILERS: dict[int, tuple[Any, GrammarCompiler]] = {}


def compiler_for(tokenizer: Any, *, vocab_size: int | None = None) -> GrammarCompiler:
    """The (cached) :class:`GrammarCompiler` for a Hugging Face tokenizer."""
    key = id(tokenizer) ^ hash(vocab_size)
    hit = _COMPILERS.get(key)
    if hit is not None and hit[0]() is tokenizer:
        return hit[1]
    compiler = GrammarCompiler(TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size))
    ref: Callable[[], Any]
    try:
        ref = weakref.ref(tokenizer)
    except TypeError:  # not weak-referenceable: keep it alive with the entry instead
        ref = (lambda t: (lambda: t))(tokenizer)
    _COMPILERS[key] = (ref, compiler)
    return compiler
