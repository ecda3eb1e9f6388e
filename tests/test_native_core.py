"""The native mask walk (structgen._core) against the token-by-token reference on real
vocabularies, bit for bit, along valid outputs and seeded random walks of allowed tokens.

SmolLM2 and Phi-3 always run; Llama-3, Qwen2, GPT-2 and DeepSeek-Coder when ../shared/data/tokenizers
is present.
"""
from __future__ import annotations

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo

from .conftest import tokenizer_folder
from .reference_masks import STRING_AND_RECURSION_SCHEMAS, reference_mask, walks_match_reference

NAMES = ["smollm2", "phi3", "llama3", "qwen2", "gpt2", "deepseek-coder"]

SCHEMAS = STRING_AND_RECURSION_SCHEMAS
TEXTS = ['{"name":"naïve 東京 \\"q\\" ok","age":-42,"tags":["a b","ñ"],"extra":[1,{"x":null}]}',
         '{"v":"ab é","kids":[{"v":"x","kids":[]},{"kids":[{"v":"zz"}]}]}']


@pytest.fixture(scope="module", params=NAMES)
def info(request, smollm2_info):
    if request.param == "smollm2":
        return smollm2_info
    folder = tokenizer_folder(request.param)
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{folder} not present")
    AutoTokenizer = pytest.importorskip("transformers", reason="real tokenizers need transformers (the hf extra)").AutoTokenizer

    return TokenizerInfo.from_huggingface(AutoTokenizer.from_pretrained(str(folder), local_files_only=True))


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_masks_equal_reference_along_valid_output(info, case):
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(SCHEMAS[case])
    m = GrammarMatcher(compiled)
    checked = 0
    for ch in TEXTS[case]:
        assert np.array_equal(compiled.index.mask(m.state), reference_mask(compiled.index, m.state)), (case, ch)
        checked += 1
        assert m.accept_string(ch)
    assert m.is_completed()
    assert np.array_equal(compiled.index.mask(m.state), reference_mask(compiled.index, m.state))
    assert checked == len(TEXTS[case])


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_masks_equal_reference_along_random_walks(info, case):
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(SCHEMAS[case])
    assert walks_match_reference(compiled, info, np.random.default_rng(case)) >= 4


def test_tokens_exceeding_collects_the_walk(smollm2_info):
    # the collecting walk (token, configuration after it) gives exactly the allowed non-stop
    # tokens with the configurations stepping their bytes leads to
    compiled = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(SCHEMAS[0])
    index = compiled.index
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"name":"x')
    toks, after = index.token_successors(m.state)
    canonical = set(range(len(smollm2_info.token_bytes))) - {int(d) for d in index.trie.dups[:, 1]}
    allowed = set(np.flatnonzero(index.allowed_tokens(m.state)).tolist()) & canonical
    assert sorted(toks.tolist()) == sorted(allowed)
    for t, c in list(zip(toks.tolist(), after.tolist()))[::50]:
        assert index.step_bytes(m.state, smollm2_info.token_bytes[t]) == c
