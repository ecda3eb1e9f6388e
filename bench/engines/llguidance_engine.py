"""llguidance: Earley parser over lazily built lexer DFAs, token trie walked per step (Rust)."""
from __future__ import annotations

from importlib.metadata import version
from typing import Any

from .base import Engine


class Adapter(Engine):
    name = "llguidance"

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        super().__init__(hf_tokenizer, vocab_size)
        self.ll = llguidance
        self.fill_mask = llguidance.numpy.fill_next_token_bitmask
        self.version = version("llguidance")
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=vocab_size)

    def compile(self, schema: dict) -> Any:
        grammar = self.ll.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        probe = self.ll.LLMatcher(self.tokenizer, grammar)
        if probe.is_error():  # llguidance reports schema errors on the matcher, not by raising
            raise ValueError(probe.get_error())
        return grammar

    def matcher(self, compiled: Any) -> Any:
        return self.ll.LLMatcher(self.tokenizer, compiled)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        self.fill_mask(matcher, bitmask, 0)

    def accept(self, matcher: Any, token: int) -> bool:
        return matcher.consume_token(token) and not matcher.is_error()
