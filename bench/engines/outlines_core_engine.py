"""outlines-core: the schema as one regex, one DFA, a full state x token index (Rust)."""
from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

from structgen import TokenizerInfo

from .base import Engine


class Adapter(Engine):
    name = "outlines_core"

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        import outlines_core
        from outlines_core.json_schema import build_regex_from_schema

        super().__init__(hf_tokenizer, vocab_size)
        self.oc = outlines_core
        self.build_regex = build_regex_from_schema
        self.version = version("outlines-core")
        # Vocabulary.from_pretrained would download; build it from the token bytes structgen
        # decodes (the same bytes every engine here matches against)
        info = TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=vocab_size)
        eos = min(info.stop_token_ids)
        special = set(info.special_token_ids) | set(info.stop_token_ids)
        tokens: dict[bytes, list[int]] = {}
        for tid, raw in enumerate(info.token_bytes):
            if tid not in special and raw is not None and raw:
                tokens.setdefault(bytes(raw), []).append(tid)
        self.vocabulary = outlines_core.Vocabulary(eos, tokens)

    def compile(self, schema: dict) -> Any:
        return self.oc.Index(self.build_regex(json.dumps(schema), r""), self.vocabulary)

    def matcher(self, compiled: Any) -> Any:
        return self.oc.Guide(compiled)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.write_mask_into(bitmask.ctypes.data, bitmask.size, 4)

    def accept(self, matcher: Any, token: int) -> bool:
        try:
            matcher.advance(token, return_tokens=False)
            return True
        except ValueError:
            return False
