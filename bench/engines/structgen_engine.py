"""structgen: lazy masks memoised per parser configuration."""
from __future__ import annotations

from typing import Any

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask
from structgen import __version__

from .base import Engine


class Adapter(Engine):
    name = "structgen"
    version = __version__

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        super().__init__(hf_tokenizer, vocab_size)
        self.compiler = GrammarCompiler(TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=vocab_size),
                                        cache_size=0)
        # the per-vocabulary work (trie, byte alphabet), so that it is not charged to the first schema
        _ = self.compiler.trie, self.compiler.byte_alphabet

    def compile(self, schema: dict) -> Any:
        return self.compiler.compile_json_schema(schema)

    def matcher(self, compiled: Any) -> Any:
        return GrammarMatcher(compiled)

    def new_bitmask(self) -> Any:
        # the library's default, as its README allocates it: a CPU torch tensor (a numpy
        # bitmask, backend="numpy", saves about 0.2 us a fill)
        return allocate_token_bitmask(1, self.vocab_size)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.fill_next_token_bitmask(bitmask)

    def accept(self, matcher: Any, token: int) -> bool:
        return matcher.accept_token(token)
