"""Automaton and matcher edge cases on toy vocabularies (unit level)."""
from __future__ import annotations

import numpy as np
import pytest

from structgen import (
    GrammarCompiler,
    GrammarMatcher,
    MatcherError,
    TokenizerInfo,
    allocate_token_bitmask,
)
from structgen.index.token_index import DEAD

from .conftest import toy_info


def compile_lark(text: str, tokens: list[bytes], **kw):
    info = toy_info(tokens, **kw)
    return info, GrammarCompiler(info).compile_grammar(text)


def tid(info: TokenizerInfo, b: bytes) -> int:
    return info.token_bytes.index(b)


def test_token_spanning_several_terminals():
    info, g = compile_lark('start: "{" KEY ":" NUM "}"\nKEY: /"[a-z]+"/\nNUM: /[0-9]+/', [b'{"', b'":', b'1}', b'a"'])
    m = GrammarMatcher(g)
    for t in [b'{"', b'a"', b":", b"1}"]:
        assert m.accept_token(tid(info, t)), t
    assert m.is_completed()
    assert m.accept_token(info.stop_token_ids[0]) and m.is_terminated()


def test_rejected_token_leaves_matcher_usable():
    info, g = compile_lark('start: "ab" "c"', [b"ab", b"abc", b"x"])
    m = GrammarMatcher(g)
    assert not m.accept_token(tid(info, b"x"))
    assert not m.accept_token(info.stop_token_ids[0])  # EOS only when complete
    assert m.accept_token(tid(info, b"ab"))
    assert not m.is_completed()
    assert not m.accept_token(tid(info, b"ab"))
    assert m.accept_token(tid(info, b"c"))
    assert m.is_completed() and not m.is_terminated()


def test_multibyte_utf8_split_across_byte_tokens():
    # "é" is C3 A9: byte-fallback style vocabularies emit it as two one-byte tokens
    info, g = compile_lark('start: "\\"" /[é]+/ "\\""', [])
    m = GrammarMatcher(g)
    assert m.accept_token(tid(info, b'"'))
    assert m.accept_token(tid(info, b"\xc3"))
    assert not m.is_completed()
    allowed = set(m.allowed_token_ids().tolist())
    assert allowed == {tid(info, b"\xa9")}, "only the continuation byte may follow C3"
    assert m.accept_token(tid(info, b"\xa9"))
    assert m.accept_token(tid(info, b'"')) and m.is_completed()


def test_invalid_utf8_never_allowed_in_json_strings():
    info = toy_info([])
    g = GrammarCompiler(info).compile_builtin_json()
    m = GrammarMatcher(g)
    assert m.accept_string('"')
    allowed = set(m.allowed_token_ids().tolist())
    for b in [0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF, 0x00, 0x1F]:  # stray continuation, overlong, out of range, control
        assert tid(info, bytes([b])) not in allowed, hex(b)
    for b in [0x41, 0xC3, 0xE2, 0xF0, 0x5C]:
        assert tid(info, bytes([b])) in allowed, hex(b)


def test_rollback_and_reset():
    info, g = compile_lark('start: "a" "b" "c"', [])
    m = GrammarMatcher(g)
    s0 = m.state
    for ch in b"abc":
        assert m.accept_token(tid(info, bytes([ch])))
    assert m.accept_token(info.stop_token_ids[0]) and m.is_terminated()
    m.rollback(2)
    assert not m.is_terminated() and not m.is_completed()
    assert m.accept_token(tid(info, b"c"))
    with pytest.raises(MatcherError):
        m.rollback(10)
    m.reset()
    assert m.state == s0


def test_rollback_window_is_bounded():
    info, g = compile_lark('start: "abcd"', [])
    m = GrammarMatcher(g, max_rollback_tokens=2)
    for ch in b"abcd":
        m.accept_token(tid(info, bytes([ch])))
    m.rollback(2)
    with pytest.raises(MatcherError):
        m.rollback(1)


def test_fork_is_independent():
    info, g = compile_lark('start: "a" ("b" | "c")', [])
    m = GrammarMatcher(g)
    m.accept_token(tid(info, b"a"))
    f = m.fork()
    assert f.accept_token(tid(info, b"b"))
    assert m.accept_token(tid(info, b"c"))
    assert f.is_completed() and m.is_completed()


def test_bitmask_contract_and_padded_vocabulary():
    info, g = compile_lark('start: "ab"', [b"ab"], vocab_size=300)  # 258 tokens, logits 300 wide
    m = GrammarMatcher(g)
    bm = allocate_token_bitmask(2, 300, backend="numpy")
    m.fill_next_token_bitmask(bm, 1)
    bits = np.unpackbits(bm[1].view(np.uint8), bitorder="little")[:300]
    assert set(np.flatnonzero(bits).tolist()) == {tid(info, b"ab"), tid(info, b"a")}
    assert (bm[0] == -1).all(), "other rows untouched"
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(bm, 2)


def test_completion_with_continuation_allows_eos_and_digits():
    info, g = compile_lark('start: /[0-9]+/', [b"12"])
    m = GrammarMatcher(g)
    assert m.accept_token(tid(info, b"12"))
    allowed = set(m.allowed_token_ids().tolist())
    assert info.stop_token_ids[0] in allowed and tid(info, b"3") in allowed


def test_recursive_grammar_deep_nesting_matches():
    info, g = compile_lark('start: value\nvalue: "[" value? "]"', [b"[[", b"]]"])
    m = GrammarMatcher(g)
    depth = 300
    for _ in range(depth // 2):
        assert m.accept_token(tid(info, b"[["))
    assert not m.is_completed()
    assert info.stop_token_ids[0] not in m.allowed_token_ids()
    for _ in range(depth // 2):
        assert m.accept_token(tid(info, b"]]"))
    assert m.is_completed()
    assert not m.accept_token(tid(info, b"]"))


def test_ambiguous_grammar_keeps_all_parses():
    # both alternatives start alike and are recursive: needs several stacks at once
    info, g = compile_lark('start: a | b\na: "x" a? "1"\nb: "x" b? "2"', [])
    for text, ok in [("xx11", True), ("xx22", True), ("xx12", False), ("x1", True)]:
        m = GrammarMatcher(g)
        assert (m.accept_string(text) and m.is_completed()) is ok, text


def test_mask_matches_per_token_reference_on_toy_json():
    info = toy_info([b'{"', b'":', b'"}', b'},', b"true", b'[1', b', ', b'\\u00'])
    g = GrammarCompiler(info).compile_builtin_json()
    m = GrammarMatcher(g)
    index = g.index
    for prefix in ['', '{', '{"', '{"a', '{"a":', '{"a": [1', '{"a": [1, "\\u00', '{"a": true}']:
        m.reset()
        assert m.accept_string(prefix), prefix
        fast = index.allowed_tokens(m.state)
        for t in range(len(info.token_bytes)):
            if t in info.stop_token_ids:
                assert fast[t] == index.is_accepting(m.state)
            else:
                assert fast[t] == (index.step_token(m.state, t) != DEAD), (prefix, info.token_bytes[t])


def test_left_recursion_is_refused_with_a_clear_message():
    from structgen import GrammarError

    info = toy_info([])
    with pytest.raises(GrammarError, match="left recursion"):
        GrammarCompiler(info).compile_grammar('start: start "a" | "a"')


def test_empty_language_is_refused():
    from structgen import GrammarError

    info = toy_info([])
    with pytest.raises(GrammarError, match="no string"):
        GrammarCompiler(info).compile_grammar('start: "a" start')


def test_special_tokens_never_allowed():
    info = TokenizerInfo.from_token_bytes([b"a", b"<tool>", b"b", None], stop_token_ids=[3], special_token_ids=[1])
    g = GrammarCompiler(info).compile_grammar('start: /.*/')
    m = GrammarMatcher(g)
    assert 1 not in m.allowed_token_ids()
    assert not m.accept_token(1)


def test_compile_cache_hits():
    info = toy_info([])
    c = GrammarCompiler(info)
    assert c.compile_json_schema({"type": "integer"}) is c.compile_json_schema('{"type": "integer"}')
    assert c.compile_json_schema({"type": "integer"}) is not c.compile_json_schema({"type": "integer"}, whitespace="flexible")


def test_eager_precompute_equals_lazy_masks():
    info = toy_info([b'{"', b'":', b'"}', b"12"])
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "b": {"enum": ["x", "yz"]}}, "required": ["a"], "additionalProperties": False}
    eager = GrammarCompiler(info, precompute="eager").compile_json_schema(schema)
    lazy = GrammarCompiler(info).compile_json_schema(schema)
    assert eager.stats.precomputed_masks > 10
    for text in ['{"a":', '{"a":1', '{"a":12,"b":"y', '{"a":12,"b":"yz"}']:
        m1, m2 = GrammarMatcher(eager), GrammarMatcher(lazy)
        assert m1.accept_string(text) and m2.accept_string(text)
        assert np.array_equal(m1.allowed_token_ids(), m2.allowed_token_ids()), text


@pytest.mark.parametrize("schema, rollback", [
    ({"type": "object", "properties": {"ab": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, None),
    ({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}}, 4),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 40}, 2),
])
def test_native_accept_equals_the_python_path(schema, rollback, monkeypatch):
    """accept_token's and fill_next_token_bitmask's one native calls (structgen._core's
    accept_token and fill_matcher) and the Python paths they hand stop tokens, unusual ids
    and counters to give the same masks and answers and leave the same state:
    configurations, name states, termination, the rollback window. Tokens are drawn from
    the mask and outside it (rejections, duplicate member names, special tokens without
    bytes, the stop token, ids past the vocabulary)."""
    import structgen.runtime.matcher as matcher_module

    info = toy_info([b'"ab"', b'"a"', b'":', b',"', b'"ab":1,"ab"', b'"a":', b'{"ab":', b'true', b'],', b'":[', b'12',
                     None])
    compiled = GrammarCompiler(info).compile_json_schema(schema)
    native = GrammarMatcher(compiled, max_rollback_tokens=rollback)
    python = GrammarMatcher(compiled, max_rollback_tokens=rollback)
    rng = np.random.default_rng(5)
    bitmask = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)  # (a torch tensor takes the Python path)
    handled = []
    real = matcher_module._accept_token
    real_fill = matcher_module._fill_matcher
    filled: list[bool] = []
    # tokens that end strings and members, so that the walk gets past its values
    closing = [t for t, data in enumerate(info.token_bytes) if data and data[:1] in (b'"', b",", b"}", b"]")]

    def counted(*args):
        handled.append(real(*args))
        return handled[-1]

    python_bitmask = np.zeros_like(bitmask)
    again = np.zeros_like(bitmask)
    for step in range(400):
        native.fill_next_token_bitmask(bitmask)  # (its usual case native, without a Python frame)
        filled.append(real_fill(native, again, 0))  # the one native call the method makes
        if filled[-1]:
            assert np.array_equal(again, bitmask), step
        monkeypatch.setattr(matcher_module, "_fill_matcher", lambda *args: False)
        python._fill_next_token_bitmask(python_bitmask)  # the Python path
        assert np.array_equal(bitmask, python_bitmask), step
        allowed = np.flatnonzero(np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:info.vocab_size])
        draw = rng.random()
        if draw < 0.5 and len(allowed):
            ending = np.intersect1d(allowed, closing)
            token = int(rng.choice(ending if len(ending) and rng.random() < 0.5 else allowed))
        elif draw < 0.75:  # names, written once or again
            token = info.token_bytes.index(bytes(rng.choice([b'"ab"', b'"a"', b'"ab":1,"ab"', b'"a":', b'{"ab":', b',"'])))
        elif draw < 0.95:
            token = int(rng.integers(0, info.vocab_size))
        else:
            token = int(rng.choice([info.vocab_size + 3, info.token_bytes.index(None)]))
        monkeypatch.setattr(matcher_module, "_accept_token", counted)
        got = native.accept_token(token)
        monkeypatch.setattr(matcher_module, "_accept_token", lambda *args: -1)  # the Python path
        want = python.accept_token(token)
        assert got == want, (step, token)
        assert native._history == python._history and native.is_terminated() == python.is_terminated()
        if native._names is not None:
            assert [(s.stack, s.mode, s.key) for s in native._names] == [(s.stack, s.mode, s.key) for s in python._names]
        if native.is_terminated():
            native.reset()
            python.reset()
    assert len(handled) == 400 and handled.count(-1) < 40  # the native call decided nearly every token
    assert filled.count(True) == (0 if native._counted else 400)  # (counters: the Python path fills)


def test_torch_bitmask_rows_are_read_again_when_the_tensor_changes(monkeypatch):
    """A CPU torch bitmask is remembered natively after its first fill (its numpy view's rows,
    skipping Tensor.numpy() on later fills): every fill writes what a fresh numpy view of the
    tensor as it is now would get, after in-place changes of its shape, its memory (``.data``,
    ``resize_`` past its storage) or its dtype, and for a new tensor where a dead one was."""
    torch = pytest.importorskip("torch")
    import structgen.runtime.matcher as matcher_module

    views = []
    real_view = matcher_module._cpu_array
    monkeypatch.setattr(matcher_module, "_cpu_array", lambda b: views.append(1) or real_view(b))
    info, g = compile_lark('start: "ab" "c"', [b"ab", b"abc", b"x", b"c"])
    m = GrammarMatcher(g)
    words = (info.vocab_size + 31) // 32
    want = np.zeros(words, np.int32)
    m.fill_next_token_bitmask(want)  # numpy: the reference row
    other = np.full(words, -1, np.int32)
    m2 = GrammarMatcher(g)
    assert m2.accept_token(tid(info, b"ab"))
    m2.fill_next_token_bitmask(other)
    assert not np.array_equal(want, other)

    t = torch.full((2, words), -1, dtype=torch.int32)
    for _ in range(3):  # remembered after the first: the same rows each time
        t.fill_(-1)
        m.fill_next_token_bitmask(t, 1)
        assert np.array_equal(t[1].numpy(), want) and (t[0] == -1).all()
    assert len(views) == 1  # one numpy view made: the later fills found the rows natively
    m2.fill_next_token_bitmask(t, 0)
    assert np.array_equal(t[0].numpy(), other)

    t.resize_(1, words)  # in place, the same memory: row 1 is gone
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(t, 1)
    m.fill_next_token_bitmask(t, 0)
    assert np.array_equal(t[0].numpy(), want)

    t.t_()  # (words, 1): rows of one word, too narrow
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(t, 0)
    t.t_()
    m.fill_next_token_bitmask(t, 0)
    assert np.array_equal(t[0].numpy(), want)

    old = t.data_ptr()
    t.data = torch.full((3, words), -1, dtype=torch.int32)  # new memory, no version bump
    assert t.data_ptr() != old
    m.fill_next_token_bitmask(t, 2)
    assert np.array_equal(t[2].numpy(), want) and (t[:2] == -1).all()

    t.data = t.data.view(torch.float32)  # same memory, another dtype: refused as a fresh one is
    with pytest.raises(MatcherError):
        m.fill_next_token_bitmask(t, 0)

    del t  # a new tensor, maybe at the dead one's address
    u = torch.zeros((1, words), dtype=torch.int32)
    m2.fill_next_token_bitmask(u)
    assert np.array_equal(u[0].numpy(), other)
    v = torch.zeros((1, words + 3), dtype=torch.int32)  # wider rows: zero tail
    v.fill_(-1)
    m2.fill_next_token_bitmask(v)
    assert np.array_equal(v[0, :words].numpy(), other) and (v[0, words:] == 0).all()
