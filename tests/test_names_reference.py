"""The name clears of structgen/runtime/names.py equal the pure-Python reference bit for bit.

tests/reference_names.py keeps the straightforward implementation (every candidate token fed
to the lexer, per-tokenizer tables as dicts of arrays). The package's version precomputes per
tokenizer and per configuration; here the masks a matcher fills with name tracking are
compared with the reference's clears of the same configuration's mask, at every step of valid
instances and of seeded random walks, on the core corpus, a toy vocabulary with name-closing
tokens, and real vocabularies.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo
from structgen.schema.canonical import canonical_json

from . import reference_names as ref
from .conftest import DATA, tokenizer_folder, toy_info
from .walks import random_walk, structural_tokens

CORE = json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))
EXTRA = [
    ("object_min_properties_3", {"type": "object", "minProperties": 3},
     [{"alpha": 1, "beta": [1, 2], "gamma": {"x": 1, "y": "z"}}]),
    ("pattern_properties", {"type": "object", "patternProperties": {"^x_": {"type": "integer"}},
                            "additionalProperties": {"type": "string"}}, [{"x_a": 1, "x_b": 2, "name": "n"}]),
    ("short_names", {"type": "object", "propertyNames": {"maxLength": 1}, "minProperties": 2},
     [{"a": 1, "b": 2}]),
    ("any_json", {}, [{"a": {"a": [1, {"b": "\"", "a": 2}]}, "b": "x"}]),
]
SPECIAL = [b'"a"', b'a"', b'b"', b'":', b',"', b'"a":1,"a"', b'"a":1,"b"', b'u0061"', b'\\u0061"',
           b'{"a":1,"a":', b'":1,"', b'":"a","', b'\\"', b'a":', b'"}', b'ab"', b'","',
           b'":1,"a', b'","a', b'":2,"', b'\\":1,"a',
           # names of two objects in one token: the inner object's "a" is no duplicate of the
           # outer one's, the outer object's second "a" is
           b'{"a":{"a":1},"a"', b'"a":{"a"', b'"},"a":', b'a":[{"b":1,"b"']


def _reference_row(matcher) -> np.ndarray:
    """The matcher's configuration mask cleared by the reference implementation."""
    index, cid = matcher._index, matcher._history[-1]  # noqa: SLF001 - the oracle needs the configuration
    row = index.mask(cid).view(np.uint32).copy()
    state = matcher.name_state
    ref.clear_duplicate_closers(state, row, matcher.compiled.tokenizer_info, index, cid)
    ref.clear_dead_names(state, row, matcher.compiled.tokenizer_info, index, cid)
    return row


def _check(matcher, bm) -> None:
    if matcher.is_terminated():
        return
    matcher.fill_next_token_bitmask(bm)
    got = bm[0].view(np.uint32)
    want = _reference_row(matcher)
    n = len(want)
    assert np.array_equal(got[:n], want), (
        f"name clears differ from the reference after {matcher.name_state!r}: "
        f"{np.flatnonzero(np.unpackbits((got[:n] ^ want).view(np.uint8), bitorder='little'))[:10]}")


def _run(info: TokenizerInfo, cases, encode, *, walks: int, max_steps: int, seed: int = 0) -> int:
    compiler = GrammarCompiler(info)
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    rng = np.random.default_rng(seed)
    pref = structural_tokens(info)
    checked = 0
    for name, schema, valid in cases:
        compiled = compiler.compile_json_schema(schema)
        if not compiled.free_names:
            continue
        for v in valid:
            m = GrammarMatcher(compiled)
            for t in encode(canonical_json(v, schema)):
                _check(m, bm)
                checked += 1
                assert m.accept_token(t), name
        for _ in range(walks):
            m = GrammarMatcher(compiled)
            random_walk(m, info, rng, max_steps=max_steps, preferred=pref, stop_p=0.05,
                        on_step=lambda m=m: _check(m, bm))
            checked += 1
    return checked


def _cases():
    return [(c["name"], c["schema"], c["valid"]) for c in CORE] + EXTRA


def test_toy_vocabulary_equals_reference():
    info = toy_info(SPECIAL)
    table = {b: i for i, b in enumerate(info.token_bytes) if b is not None and len(b) == 1}

    def encode(text: str) -> list[int]:
        return [table[bytes([b])] for b in text.encode("utf-8")]

    assert _run(info, _cases(), encode, walks=6, max_steps=60, seed=1) > 0


def test_smollm2_equals_reference(smollm2_tokenizer, smollm2_info):
    assert _run(smollm2_info, _cases(), lambda s: smollm2_tokenizer.encode(s, add_special_tokens=False),
                walks=2, max_steps=40, seed=2) > 0


@pytest.mark.parametrize("name", ["llama3"])
def test_real_vocabulary_equals_reference(name):
    folder = tokenizer_folder(name)
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{folder} not present")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    info = TokenizerInfo.from_huggingface(tok)
    assert _run(info, _cases(), lambda s: tok.encode(s, add_special_tokens=False), walks=1, max_steps=30, seed=3) > 0


TEXTS = [
    b'{"a":1,"b":{"a":[1,{"c":"\\"x","a":2}],"c":3},"\\u0061b":"v","d":{}}',
    b'{"x_a":1,"x_b":"s","name":"n","other":{"name":1,"x_a":[]},"q\\"":2}',
    b'[{"a":1},{"a":2,"b":{"a":{"a":{"b":"\\ud83d\\ude00"}}}},{"\\u00e9":1,"\\u00c3":2}]',
    b'{"a":1,"b":2,"c":{"a":"x","b":1},"d":[{"a":1,"b":"a"}]}',
]


@pytest.mark.parametrize("vocab", ["toy", "smollm2"])
def test_every_byte_of_texts_equals_reference(vocab, request):
    """Byte by byte through nested objects, escaped and repeated names: every lexer state
    (inside names, values, escapes, between members, nested objects) is compared."""
    info = toy_info(SPECIAL) if vocab == "toy" else request.getfixturevalue("smollm2_info")
    compiler = GrammarCompiler(info)
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    for schema in ({}, {"type": "object", "minProperties": 2}, {"type": "array"},
                   {"type": "object", "propertyNames": {"maxLength": 1}}):
        compiled = compiler.compile_json_schema(schema)
        assert compiled.free_names
        for text in TEXTS:
            m = GrammarMatcher(compiled)
            for i in range(len(text)):
                _check(m, bm)
                if not m.accept_string(text[i:i + 1]):
                    break


def test_threads_sharing_a_fresh_grammar_clear_what_the_reference_clears():
    """Matchers in several threads over one fresh grammar (the name memos and the index fill
    while they race), batch fills through the pool as well: every row equals the reference's
    clears, computed afterwards."""
    from structgen import fill_next_token_bitmasks

    from .test_concurrency import _run_threads

    info = toy_info(SPECIAL)
    words = (info.vocab_size + 31) // 32
    compiled = GrammarCompiler(info).compile_json_schema({"type": "object", "propertyNames": {"maxLength": 1}})
    seen: list[tuple[GrammarMatcher, np.ndarray]] = []

    def work(i: int) -> None:
        for text in TEXTS[i % len(TEXTS):] + TEXTS[:i % len(TEXTS)]:
            ms = [GrammarMatcher(compiled) for _ in range(3)]
            for k in range(len(text)):
                bm = np.zeros((len(ms), words), np.int32)
                fill_next_token_bitmasks(ms, bm, threads=2)
                seen.extend((m.fork(), bm[r].copy()) for r, m in enumerate(ms) if not m.is_terminated())
                if not all(m.accept_string(text[k:k + 1]) for m in ms):
                    break

    assert _run_threads(work, 4) == []
    assert len(seen) > 100
    for m, got in seen:
        want = _reference_row(m)
        assert np.array_equal(got.view(np.uint32)[:len(want)], want), m.name_state
