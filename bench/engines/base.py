"""The interface every engine adapter of bench/masks.py implements."""
from __future__ import annotations

from typing import Any

import numpy as np


class Engine:
    """Compile a JSON Schema (compact separators, no free whitespace) and walk token paths.

    ``__init__`` prepares the tokenizer (timed as the per-vocabulary one-time cost);
    ``compile`` must leave the grammar ready to fill masks; ``fill`` writes the next-token
    bitmask (int32, one row) of a matcher; ``accept`` advances by one token.
    """

    name = "engine"
    version = ""

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def compile(self, schema: dict) -> Any:
        raise NotImplementedError

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def new_bitmask(self) -> Any:
        return np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        raise NotImplementedError

    def accept(self, matcher: Any, token: int) -> bool:
        raise NotImplementedError
