"""Masks on the Mistral-v3 vocabulary (SentencePiece with byte fallback, 32,768 pieces), read
from its ``tokenizer.model`` by tests/sentencepiece_model.py: the native walk against the
token-by-token reference bit for bit, and a valid output spelled in Mistral tokens walked
through the mask. Skipped when ../shared/data/tokenizers/mistral-v3 is absent."""
from __future__ import annotations

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, fill_next_token_bitmasks
from structgen.runtime.bitmask import bitmask_words

from .conftest import tokenizer_folder
from .reference_masks import reference_mask, walks_match_reference
from .sentencepiece_model import tokenizer_info
from .test_native_core import SCHEMAS, TEXTS


@pytest.fixture(scope="module")
def info():
    path = tokenizer_folder("mistral-v3") / "tokenizer.model"
    if not path.exists():
        pytest.skip(f"{path} not present")
    return tokenizer_info(path)


def test_pieces_read(info):
    assert len(info.token_bytes) == 32768
    singles = {b for b in info.token_bytes if b is not None and len(b) == 1}
    assert len(singles) == 256  # byte fallback: every byte is a token
    assert info.token_bytes[info.stop_token_ids[0]] is None


def _spell(info, text: bytes) -> list[int]:
    """Greedy longest-match token ids spelling ``text`` (a valid, not the tokenizer's, split)."""
    table: dict[bytes, int] = {}
    for i, b in enumerate(info.token_bytes):
        if b and b not in table:
            table[b] = i
    longest = max(map(len, table))
    out, i = [], 0
    while i < len(text):
        for k in range(min(longest, len(text) - i), 0, -1):
            tok = table.get(text[i:i + k])
            if tok is not None:
                out.append(tok)
                i += k
                break
    return out


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_masks_equal_reference_along_valid_output(info, case):
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(SCHEMAS[case])
    m = GrammarMatcher(compiled)
    words = bitmask_words(info.vocab_size)
    toks = _spell(info, TEXTS[case].encode())
    assert len(toks) > 5
    for tok in toks:
        assert np.array_equal(compiled.index.mask(m.state), reference_mask(compiled.index, m.state))
        row = np.zeros((1, words), np.int32)
        fill_next_token_bitmasks([m], row)
        assert row[0, tok >> 5] >> (tok & 31) & 1, f"token {tok} {info.token_bytes[tok]!r} masked"
        assert m.accept_token(tok)
    assert m.is_completed() and m.accept_token(info.stop_token_ids[0])


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_masks_equal_reference_along_random_walks(info, case):
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(SCHEMAS[case])
    assert walks_match_reference(compiled, info, np.random.default_rng(case)) >= 4
