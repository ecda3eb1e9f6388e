"""XGrammar: byte-level pushdown automaton, masks precomputed at compile (C++)."""
from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from .base import Engine


class Adapter(Engine):
    name = "xgrammar"

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        super().__init__(hf_tokenizer, vocab_size)
        self.xgr = xgr
        self.version = version("xgrammar")
        info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=vocab_size)
        # one thread and no cache: the same footing as the others on this 2-core machine
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema: dict) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def new_bitmask(self) -> Any:
        return self.xgr.allocate_token_bitmask(1, self.vocab_size)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.fill_next_token_bitmask(bitmask)

    def accept(self, matcher: Any, token: int) -> bool:
        return matcher.accept_token(token)
