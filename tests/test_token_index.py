"""The plain-byte split of the vocabulary gives exactly the masks of the whole-trie walk;
the preorder trie the native walk reads equals the obvious construction."""
from __future__ import annotations

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher
from structgen.index.token_index import PLAIN_BYTES, TokenTrie

from .conftest import toy_info

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
     "required": ["name", "tags"]},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z ]+$"},
                                      "note": {"type": "string", "maxLength": 12}}, "required": ["code", "note"]},
    {"type": "array", "items": {"enum": ["a b", "c\"d", "é"]}},
    # additional names beside declared ones (first characters split by byte), a string
    # bounded below and above (a chain of states), and a counted one (counter frames)
    {"type": "object", "properties": {"driver": {"type": "string", "minLength": 3, "maxLength": 40},
                                      "text": {"type": "string", "maxLength": 150}}},
    # plain bytes loop, characters from U+0080 up do not: the text tokens must stay masked
    {"type": "object", "properties": {"ascii": {"type": "string", "pattern": "^[ -~]*$"}}},
]
TEXTS = ['{"name":"hello world, \\"quoted\\" caf\\u00e9 ok naïve 東京 straße 🙂 ñandú","tags":["x y","tab\\tz","日本語"]}',
         '{"code":"abc def","note":"twelve chars"}', '["a b","c\\"d","é"]',
         '{"driver":"example driver with a long name","text":"' + "lorem ipsum dolor " * 8 + '","dx":"d","other":1}',
         '{"ascii":"only ascii here, \\"quoted\\" too"}']


def _full_mask(index, full_trie: TokenTrie, cid: int) -> np.ndarray:
    # token_successors walks the index's whole trie (every token), with no plain/text split
    assert full_trie.num_nodes == index.trie.num_nodes
    allowed = np.zeros(index.words * 32, bool)
    toks, _ = index.token_successors(cid)
    allowed[toks] = True
    if len(full_trie.dups):
        allowed[full_trie.dups[:, 1]] |= allowed[full_trie.dups[:, 0]]
    if index.is_accepting(cid):
        allowed[list(index.info.stop_token_ids)] = True
    return np.packbits(allowed, bitorder="little").view("<i4")


def _check(compiler: GrammarCompiler, schema: dict, text: str) -> int:
    compiled = compiler.compile_json_schema(schema)
    index = compiled.index
    full = TokenTrie.build(compiler.tokenizer_info, split_plain=False)
    assert full.plain is None and compiler.trie.plain is not None
    m = GrammarMatcher(compiled)
    looping = entering = 0
    for ch in text:
        cid = m.state
        into = index.next_configs(cid)[PLAIN_BYTES]
        looping += bool((into == cid).all())
        # the first character of a string: every plain byte leads into the looping body
        entering += bool(into[0] != cid and (into == into[0]).all() and (index.next_configs(int(into[0]))[PLAIN_BYTES] == into[0]).all())
        assert np.array_equal(index.mask(cid), _full_mask(index, full, cid)), (schema, text, ch)
        assert m.accept_string(ch)
    assert np.array_equal(index.mask(m.state), _full_mask(index, full, m.state))
    return looping, entering


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_split_equals_whole_trie_smollm2(smollm2_compiler, case):
    looping, entering = _check(smollm2_compiler, SCHEMAS[case], TEXTS[case])
    if case == 0:
        assert looping > 10 and entering >= 2  # string bodies and their first characters took the split path


def test_split_equals_whole_trie_toy():
    info = toy_info([b"ab", b"a\"", b"\"}", b" x", b"\\n", b"\xc3\xa9", b"z\"]"])
    compiler = GrammarCompiler(info)
    for schema, text in zip(SCHEMAS, TEXTS):
        _check(compiler, schema, text)


def test_plain_tokens_are_only_plain_bytes(smollm2_info, smollm2_compiler):
    plain = smollm2_compiler.trie.plain
    is_plain = np.unpackbits(plain.tokens.view(np.uint8), bitorder="little").astype(bool)
    for tid in np.flatnonzero(is_plain)[:: 97]:
        data = smollm2_info.token_bytes[tid]
        assert data and all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in data)
    rest_ids = plain.rest.tok[plain.rest.tok >= 0]
    assert len(rest_ids) > 1000 and not is_plain[rest_ids].any()


def _reference_preorder(toks):
    """The trie the obvious way: every distinct prefix, sorted (a prefix sorts before its
    extensions, so this is preorder), with its subtree's end found by scanning."""
    canonical = {}
    for b, i in toks:
        canonical.setdefault(b, i)
    prefixes = [b""] + sorted({b[:d] for b in canonical for d in range(1, len(b) + 1)})
    ends = []
    for k, p in enumerate(prefixes):
        e = k + 1
        while e < len(prefixes) and prefixes[e].startswith(p):
            e += 1
        ends.append(e)
    return ([p[-1] if p else 0 for p in prefixes], [canonical.get(p, -1) if p else -1 for p in prefixes],
            [len(p) for p in prefixes], ends)


@pytest.mark.parametrize("seed", range(6))
def test_native_trie_equals_reference(seed):
    import random

    rng = random.Random(seed)
    alphabet = [0, 1, 0x22, 0x41, 0x42, 0xC3, 0xFF]  # zero bytes must not be confused with padding
    toks = [(bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6))), i) for i in range(300)]
    toks += [(toks[3][0], 300), (b"\x00", 301), (b"\x00\x00", 302)]  # duplicates and zero runs
    trie = TokenTrie._from_tokens(toks)
    byte, tok, depth, end = _reference_preorder(toks)
    assert trie.byte.tolist() == byte and trie.tok.tolist() == tok
    assert trie.depth.tolist() == depth and trie.end.tolist() == end
    assert trie.max_len == max(depth) and trie.num_nodes == len(byte)
    assert sorted(map(tuple, trie.dups.tolist())) == sorted({(min(i for b2, i in toks if b2 == b), j)
                                                              for b, j in toks if j != min(i for b2, i in toks if b2 == b)})


def test_native_trie_rejects_unsorted_keys():
    from structgen import _core

    flat = np.frombuffer(b"bab", np.uint8)
    with pytest.raises(ValueError, match="sorted and distinct"):
        _core.build_trie(flat, np.array([0, 1, 3], np.int64), np.array([0, 1], np.int64))


def test_row_classes_exact_even_when_hashes_collide(monkeypatch):
    # the Moore refinement of the reference automaton (the oracle of the native minimisation)
    from . import reference_automaton as automaton

    rng = np.random.default_rng(0)
    sig = rng.integers(-1, 3, size=(500, 7))
    expect = {}
    for r in map(tuple, sig.tolist()):
        expect.setdefault(r, len(expect))
    for weights in (automaton._ROW_WEIGHTS, np.ones_like(automaton._ROW_WEIGHTS)):  # all-ones: many collisions
        monkeypatch.setattr(automaton, "_ROW_WEIGHTS", weights)
        ids, count = automaton._row_classes(sig)
        assert count == len(expect)
        groups = {}
        for r, i in zip(map(tuple, sig.tolist()), ids.tolist()):
            assert groups.setdefault(i, r) == r  # one id, one row content
        assert len(set(ids.tolist())) == count


def _brute_mask(index, info, cid: int) -> np.ndarray:
    """The slow reference: every token's bytes stepped one by one from ``cid``."""
    allowed = np.zeros(index.words * 32, bool)
    for tid, data in enumerate(info.token_bytes):
        if data and index.step_bytes(cid, data) != 0:
            allowed[tid] = True
    if index.is_accepting(cid):
        allowed[list(info.stop_token_ids)] = True
    return np.packbits(allowed, bitorder="little").view("<i4")


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_masks_equal_token_by_token_reference(smollm2_info, case):
    """Every fast path at once (plain/text splits, per-first-byte and per-length bulk sets,
    the node-by-node tail of deep walks) against stepping each of the 49,152 tokens."""
    compiled = GrammarCompiler(smollm2_info).compile_json_schema(SCHEMAS[case])
    m = GrammarMatcher(compiled)
    text = TEXTS[case]
    cuts = sorted({0, 1, 2, len(text) // 3, len(text) // 2, len(text) - 1, len(text)})
    done = 0
    for cut in cuts:
        assert m.accept_string(text[done:cut])
        done = cut
        assert np.array_equal(compiled.index.mask(m.state), _brute_mask(compiled.index, smollm2_info, m.state)), cut


@pytest.mark.parametrize("case", [0, 3])
def test_rows_without_frame_tables_give_the_same_masks(smollm2_info, monkeypatch, case):
    """Single-frame rows read a per-(rule, parent) table; past its memory budget they group
    each distinct target once instead. Both must give the same masks (recursion and counters included)."""
    from structgen.index import token_index

    schema = {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "string", "maxLength": 100}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"} if case == 0 else SCHEMAS[case]
    text = ('{"v":"' + "ab " * 30 + '","kids":[{"v":"x","kids":[]},{"v":"z","kids":[{"v":"y"}]}]}' if case == 0
            else TEXTS[case])

    def masks() -> tuple[list[np.ndarray], int]:
        compiled = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(schema)
        m, out = GrammarMatcher(compiled), []
        for ch in text:
            out.append(compiled.index.mask(m.state).copy())
            assert m.accept_string(ch)
        out.append(compiled.index.mask(m.state).copy())
        return out, compiled.index.stats()["frame_tables"]

    expect, tables = masks()
    assert tables > (1 if case == 0 else 0)  # the table path ran (several parents when recursive)
    monkeypatch.setattr(token_index, "_TABLE_CELLS", 0)
    got, tables = masks()
    assert tables == 0
    assert len(got) == len(expect) and all(np.array_equal(a, b) for a, b in zip(expect, got))
