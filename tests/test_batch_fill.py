"""fill_next_token_bitmasks: one call for many matchers and rows, bit for bit what the
matchers fill one by one; several threads filling at once; background precompute.

Speed is not asserted here (bench/batch.py measures it)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, MatcherError, fill_next_token_bitmasks
from structgen.runtime import precompute as background
from structgen.runtime.bitmask import bitmask_words

from .conftest import toy_info
from .test_concurrency import TOKENS, _run_threads

SCHEMAS = [
    {"type": "integer", "minimum": -5, "maximum": 500},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 4}, "b": {"type": "boolean"}},
     "required": ["a"]},
    {"type": "array", "items": {"enum": ["x", "y", 3]}, "maxItems": 3},
    {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
    {"type": "string", "pattern": "^[a-c]{2,3}$"},
    {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"},
    {"type": "object", "additionalProperties": {"type": "integer"}},  # free names: tracked per matcher
    {"type": "array", "items": {"type": "number"}, "minItems": 1},
]


def _walk(m: GrammarMatcher, rng: np.random.Generator, steps: int, info, *, finish: bool) -> None:
    """Accept up to ``steps`` random allowed non-stop tokens; with ``finish``, then a stop token
    as soon as one is allowed (the matcher terminates)."""
    stops = set(info.stop_token_ids)
    for _ in range(steps):
        allowed = [t for t in m.allowed_token_ids().tolist() if t not in stops]
        if finish and m.is_completed():
            break
        if not allowed:
            break
        assert m.accept_token(int(rng.choice(allowed)))
    if finish:
        for _ in range(200):
            if m.is_completed():
                assert m.accept_token(info.stop_token_ids[0]) and m.is_terminated()
                return
            m.accept_string(m.compiled.index.shortest_completion(m.state)[:1])
        raise AssertionError("walk did not reach an end")


def _matchers(compiler: GrammarCompiler, info, seed: int) -> list[GrammarMatcher | None]:
    rng = np.random.default_rng(seed)
    out: list[GrammarMatcher | None] = []
    for k, schema in enumerate(SCHEMAS * 2):
        m = compiler.compile_json_schema(schema).matcher()
        _walk(m, rng, int(rng.integers(0, 8)), info, finish=k % 5 == 3)
        out.append(m)
    out.append(compiler.compile_builtin_json().matcher())  # free names, any JSON
    _walk(out[-1], rng, 6, info, finish=False)
    out.insert(4, None)  # an unconstrained row
    return out


def _one_by_one(matchers, batch: int, words: int, rows) -> np.ndarray:
    expect = np.full((batch, words), 0x5A5A5A5A, np.int32)
    for m, r in zip(matchers, rows):
        if m is not None:
            m.fill_next_token_bitmask(expect, r)
    return expect


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_batch_fill_equals_matcher_fill_bit_for_bit(threads):
    """Distinct grammars, terminated matchers (stop-token rows), an unconstrained row left
    untouched, rows in scattered order with rows skipped, fresh masks (pool) and memo hits."""
    info = toy_info(TOKENS)
    words = bitmask_words(info.vocab_size) + 2  # wider than the vocabulary: the tail is cleared
    ours = _matchers(GrammarCompiler(info), info, seed=threads)  # fresh grammars: masks missing
    theirs = _matchers(GrammarCompiler(info), info, seed=threads)  # the same walks, other grammars
    assert any(m is not None and m.is_terminated() for m in ours)
    batch = 2 * len(ours) + 3
    rows = np.random.default_rng(0).permutation(batch)[: len(ours)].tolist()  # scattered, some rows skipped
    for round_ in range(3):  # first visit, then memo hits, then after one more step each
        got = np.full((batch, words), 0x5A5A5A5A, np.int32)
        fill_next_token_bitmasks(ours, got, rows, threads=threads)
        expect = _one_by_one(theirs, batch, words, rows)
        assert np.array_equal(got, expect), f"round {round_}: rows differ: {np.flatnonzero((got != expect).any(axis=1))}"
        rng = np.random.default_rng(round_)
        for a, b in zip(ours, theirs):
            if a is not None and not a.is_terminated():
                seed = int(rng.integers(1 << 30))
                _walk(a, np.random.default_rng(seed), 1, info, finish=False)
                _walk(b, np.random.default_rng(seed), 1, info, finish=False)


@pytest.mark.parametrize("threads", [2, 4])
def test_memoised_rows_copied_by_several_threads(threads):
    """With no mask missing and rows of 64 KB or more in all, the threads copy the memoised
    rows in pieces (name clears and stop-token rows included)."""
    info = toy_info(TOKENS, vocab_size=1 << 15)
    words = bitmask_words(info.vocab_size)
    ours = _matchers(GrammarCompiler(info), info, seed=7)
    theirs = _matchers(GrammarCompiler(info), info, seed=7)
    batch = len(ours)
    assert sum(m is not None for m in ours) * words * 4 >= 64 << 10
    assert any(m is not None and m.is_terminated() for m in ours)
    fill_next_token_bitmasks(ours, np.zeros((batch, words), np.int32), threads=threads)  # the missing masks
    got = np.full((batch, words), 0x5A5A5A5A, np.int32)
    fill_next_token_bitmasks(ours, got, threads=threads)  # every mask memoised now
    expect = _one_by_one(theirs, batch, words, range(batch))
    assert np.array_equal(got, expect), f"rows differ: {np.flatnonzero((got != expect).any(axis=1))}"


@pytest.mark.parametrize(("threads", "lane"), [(2, 0), (2, 1), (4, 3), (8, 7)])
def test_rows_of_one_lane_are_shared_out(threads, lane):
    """The batch fill keeps each row's work in a lane (row % threads) that one thread takes
    first; here every row is in one lane (one that a helper owns, or, with more lanes than the
    pool has threads, one that nobody does): the others take its items, nothing is left."""
    info = toy_info(TOKENS)
    ours = _matchers(GrammarCompiler(info), info, seed=7)  # fresh grammars: masks missing
    theirs = _matchers(GrammarCompiler(info), info, seed=7)
    batch = threads * len(ours)
    rows = [lane + threads * k for k in range(len(ours))]
    words = bitmask_words(info.vocab_size)
    for round_ in range(2):  # first visit, then memo hits
        got = np.full((batch, words), 0x5A5A5A5A, np.int32)
        # in a thread of its own: an item nobody takes would hang the call, not the suite
        t = threading.Thread(target=fill_next_token_bitmasks, args=(ours, got, rows), kwargs={"threads": threads},
                             daemon=True)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive(), "the batch fill did not return"
        expect = _one_by_one(theirs, batch, words, rows)
        assert np.array_equal(got, expect), f"round {round_}: rows {np.flatnonzero((got != expect).any(axis=1))} differ"


class _Sub(GrammarMatcher):
    """Inherits the slots: read from them."""

    __slots__ = ()


class _Unconstrained(GrammarMatcher):
    """Overrides a slot with a property: its rows come from the property (getattr)."""

    __slots__ = ()

    @property
    def _terminated(self) -> bool:  # a finished row allows the stop tokens only
        return True

    @_terminated.setter
    def _terminated(self, value: bool) -> None:  # the slot below keeps reset's False
        GrammarMatcher._terminated.__set__(self, value)


def test_batch_fill_reads_matchers_as_getattr_would():
    """The batch fill reads a matcher's fields from its slots where the class resolves them
    to slots, and through getattr otherwise: a subclass, a property over a slot, rows of
    several classes in turn, and a matcher whose slots were never set (an error, not a crash)."""
    info = toy_info(TOKENS)
    compiler = GrammarCompiler(info)
    grammars = [compiler.compile_json_schema(s) for s in SCHEMAS]
    kinds = [GrammarMatcher, _Sub, _Unconstrained]
    matchers = [kinds[k % 3](g) for k, g in enumerate(grammars * 2)]
    rng = np.random.default_rng(5)
    for m in matchers:
        if not isinstance(m, _Unconstrained):  # (it takes no token: terminated)
            _walk(m, rng, 3, info, finish=False)
    words = bitmask_words(info.vocab_size)
    got = np.full((len(matchers), words), 0x5A5A5A5A, np.int32)
    fill_next_token_bitmasks(matchers, got)
    expect = np.zeros_like(got)
    stop = np.zeros(words, np.int32)
    for t in info.stop_token_ids:
        stop.view(np.uint32)[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    for k, m in enumerate(matchers):
        if isinstance(m, _Unconstrained):
            expect[k] = stop  # what its _terminated says, though its own slot says otherwise
        else:
            m.fill_next_token_bitmask(expect, k)
    assert np.array_equal(got, expect)
    assert any(not np.array_equal(got[k], stop) for k in range(len(matchers)))
    unset = GrammarMatcher.__new__(GrammarMatcher)  # no __init__: every slot empty
    with pytest.raises(AttributeError):
        fill_next_token_bitmasks([matchers[0], unset], np.zeros((2, words), np.int32))


def test_batch_fill_torch_bitmask_default_rows():
    torch = pytest.importorskip("torch")
    info = toy_info(TOKENS)
    compiler = GrammarCompiler(info)
    matchers = [compiler.compile_json_schema(s).matcher() for s in SCHEMAS]
    got = torch.full((len(matchers), bitmask_words(info.vocab_size)), -1, dtype=torch.int32)
    fill_next_token_bitmasks(matchers, got)
    expect = _one_by_one(matchers, len(matchers), got.shape[1], range(len(matchers)))
    assert np.array_equal(got.numpy(), expect)


@pytest.mark.parametrize("layout", ["c", "strided", "1-D", "torch"])
def test_fills_of_any_bitmask_layout_agree(layout):
    """The matcher's one-call warm path takes plain int32 rows; other layouts go through the
    checked path, and the batch fill through a contiguous copy: the same bits either way."""
    info = toy_info(TOKENS)
    compiler = GrammarCompiler(info)
    words = bitmask_words(info.vocab_size) + 1
    for schema in SCHEMAS:
        m = compiler.compile_json_schema(schema).matcher()
        _walk(m, np.random.default_rng(5), 3, info, finish=False)
        expect = np.zeros(words * 32, bool)
        expect[m.allowed_token_ids()] = True
        expect = np.packbits(expect, bitorder="little").view("<i4")
        for fill in ("matcher", "matcher", "batch"):  # the second matcher fill is a memo hit
            if layout == "1-D":
                got = np.full(words, 0x5A5A5A5A, np.int32)
                view = got
            else:
                got = np.full((3, 2 * words), 0x5A5A5A5A, np.int32)
                view = got[:, ::2] if layout == "strided" else got[:, :words]
                if layout == "c":
                    got = np.full((3, words), 0x5A5A5A5A, np.int32)
                    view = got
            if layout == "torch":
                torch = pytest.importorskip("torch")
                view = torch.from_numpy(np.ascontiguousarray(view))
            row = 0 if layout == "1-D" else 1
            if fill == "matcher":
                m.fill_next_token_bitmask(view, row)
            else:
                fill_next_token_bitmasks([m], view, [row])
            filled = (view.numpy() if layout == "torch" else view).reshape(-1, words)[row]
            assert np.array_equal(filled, expect), (schema, layout, fill)
            untouched = (view.numpy() if layout == "torch" else view).reshape(-1, words)
            assert (np.delete(untouched, row, axis=0) == 0x5A5A5A5A).all()


def test_matcher_fill_rejects_what_the_fast_path_declines():
    info = toy_info(TOKENS)
    m = GrammarCompiler(info).compile_json_schema(SCHEMAS[0]).matcher()
    words = bitmask_words(info.vocab_size)
    m.fill_next_token_bitmask(np.zeros((1, words), np.int32), 0)  # the mask is memoised now
    with pytest.raises(MatcherError, match="outside the bitmask's batch"):
        m.fill_next_token_bitmask(np.zeros((1, words), np.int32), 1)
    with pytest.raises(MatcherError, match="words but the vocabulary needs"):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), np.int32), 0)
    with pytest.raises(MatcherError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), np.int64), 0)
    readonly = np.zeros((1, words), np.int32)
    readonly.setflags(write=False)
    with pytest.raises(MatcherError, match="read-only"):
        m.fill_next_token_bitmask(readonly, 0)
    with pytest.raises(MatcherError, match="read-only"):
        fill_next_token_bitmasks([m], readonly)
    got = np.zeros((2, words), np.int32)
    m.fill_next_token_bitmask(got, np.int64(1))  # numpy integers name rows too
    assert got[1].any() and not got[0].any()


def test_batch_fill_rejects_bad_arguments():
    info = toy_info(TOKENS)
    m = GrammarCompiler(info).compile_json_schema(SCHEMAS[0]).matcher()
    words = bitmask_words(info.vocab_size)
    with pytest.raises(MatcherError, match="named twice"):
        fill_next_token_bitmasks([m, m], np.zeros((2, words), np.int32), [1, 1])
    with pytest.raises(MatcherError, match="indices for"):
        fill_next_token_bitmasks([m], np.zeros((2, words), np.int32), [0, 1])
    with pytest.raises(MatcherError, match="outside the bitmask's batch"):
        fill_next_token_bitmasks([m], np.zeros((2, words), np.int32), [2])
    with pytest.raises(MatcherError, match="words but the vocabulary needs"):
        fill_next_token_bitmasks([m], np.zeros((1, words - 1), np.int32))
    with pytest.raises(MatcherError, match="int32"):
        fill_next_token_bitmasks([m], np.zeros((1, words), np.int64))
    with pytest.raises(MatcherError, match="threads"):
        fill_next_token_bitmasks([m], np.zeros((1, words), np.int32), threads=0)


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_rows_sharing_a_missing_mask(threads):
    """Many rows of one fresh grammar at a few configurations (a serving batch of one schema):
    each configuration's mask is computed once, every row equals the one-by-one fill."""
    info = toy_info(TOKENS)
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    ours = GrammarCompiler(info, cache_size=0).compile_json_schema(schema)
    theirs = GrammarCompiler(info, cache_size=0).compile_json_schema(schema)
    prefixes = ["", "", '{"a', "", '{"a', '{"b":', "", '{"a', '{"b":', '{"b":1'] * 3
    matchers = [ours.matcher() for _ in prefixes]
    refs = [theirs.matcher() for _ in prefixes]
    for m, r, p in zip(matchers, refs, prefixes):
        assert m.accept_string(p) and r.accept_string(p)
    words = bitmask_words(info.vocab_size)
    for round_ in range(2):  # first visit, then memo hits
        got = np.full((len(matchers), words), 0x5A5A5A5A, np.int32)
        fill_next_token_bitmasks(matchers, got, threads=threads)
        expect = _one_by_one(refs, len(refs), words, range(len(refs)))
        assert np.array_equal(got, expect), f"round {round_}: rows {np.flatnonzero((got != expect).any(axis=1))} differ"


@pytest.mark.parametrize("threads", [1, 2])
def test_bad_row_after_missing_masks_leaves_the_pool_usable(threads):
    """A row outside the batch, found after rows whose masks the pool is already computing:
    the call raises once the pool is done, and the next call fills every row."""
    info = toy_info(TOKENS)
    compiler = GrammarCompiler(info, cache_size=0)
    matchers = [compiler.compile_json_schema(s).matcher() for s in SCHEMAS]
    words = bitmask_words(info.vocab_size)
    bitmask = np.zeros((len(matchers), words), np.int32)
    with pytest.raises(MatcherError, match="outside the bitmask's batch"):
        fill_next_token_bitmasks(matchers, bitmask, [*range(len(matchers) - 1), len(matchers)], threads=threads)
    fill_next_token_bitmasks(matchers, bitmask, threads=threads)
    expect = _one_by_one(matchers, len(matchers), words, range(len(matchers)))
    assert np.array_equal(bitmask, expect)


def test_threads_filling_batches_concurrently_match_sequential():
    """Several threads fill batches of shared fresh grammars at once (each batch through the
    pool too): every row equals what the same tokens give on unshared grammars, one by one."""
    info = toy_info(TOKENS)
    shared = GrammarCompiler(info)
    words = bitmask_words(info.vocab_size)
    stops = set(info.stop_token_ids)
    results: dict[int, list[tuple[list[list[int]], np.ndarray]]] = {}

    def grammars(compiler):
        return [compiler.compile_json_schema(s) for s in SCHEMAS] + [compiler.compile_builtin_json()]

    def work(i: int) -> None:
        rng = np.random.default_rng(100 + i)
        matchers = [g.matcher() for g in grammars(shared)]
        tokens: list[list[int]] = [[] for _ in matchers]
        log = results[i] = []
        for _ in range(12):
            got = np.zeros((len(matchers), words), np.int32)
            fill_next_token_bitmasks(matchers, got, threads=2)
            log.append(([list(t) for t in tokens], got))
            for m, toks in zip(matchers, tokens):
                allowed = [t for t in m.allowed_token_ids().tolist() if t not in stops]
                if allowed:
                    tok = int(rng.choice(allowed))
                    assert m.accept_token(tok)
                    toks.append(tok)

    assert _run_threads(work, 6) == []
    alone = grammars(GrammarCompiler(info))
    for i, log in results.items():
        for tokens, got in log:
            expect = np.zeros((len(alone), words), np.int32)
            for r, (g, toks) in enumerate(zip(alone, tokens)):
                ref = g.matcher()
                assert all(ref.accept_token(t) for t in toks)
                ref.fill_next_token_bitmask(expect, r)
            assert np.array_equal(got, expect), f"thread {i}: rows {np.flatnonzero((got != expect).any(axis=1))} differ"
    assert sum(len(t[0][0]) for log in results.values() for t in log) > 0


# -- background precompute ------------------------------------------------------------------


def test_background_first_mask_does_not_wait_for_the_whole_precompute(monkeypatch):
    """The workers are held after their first mask: decoding still gets every mask it asks
    for (computed on demand, equal to a lazily compiled grammar's), then the precompute
    resumes and finishes with every reachable mask computed."""
    info = toy_info(TOKENS)
    gate = threading.Event()
    first_done = threading.Event()
    turns = []
    real_turn = background.BackgroundPrecompute._turn

    def held_turn(self, masks):
        if self.limit != 777:  # another test's task: not held
            return real_turn(self, masks)
        if turns:  # after the first turn: wait for the test to let the workers go on
            first_done.set()
            gate.wait()
        turns.append(self.computed)
        return real_turn(self, 1)

    monkeypatch.setattr(background.BackgroundPrecompute, "_turn", held_turn)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                               "n": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "n"], "additionalProperties": False}
    try:
        _held_run(info, schema, gate, first_done)
    finally:
        gate.set()  # never leave the shared worker held


def _held_run(info, schema, gate: threading.Event, first_done: threading.Event) -> None:
    compiled = GrammarCompiler(info, precompute="background", precompute_limit=777).compile_json_schema(schema)
    lazy = GrammarCompiler(info).compile_json_schema(schema)
    task = compiled.background
    assert task is not None
    assert first_done.wait(30)  # the worker is held after one mask
    assert not task.finished.is_set() and task.computed == 1
    ours, ref = compiled.matcher(), lazy.matcher()
    words = bitmask_words(info.vocab_size)
    for text in ['{"', 'name', '":"', 'ab', '","n":', '4', '2}']:
        a, b = np.zeros((1, words), np.int32), np.zeros((1, words), np.int32)
        # a batch fill first: its missing mask is handed back to the demand protocol
        two = np.full((2, words), 7, np.int32)
        fill_next_token_bitmasks([None, ours], two)
        fill_next_token_bitmasks([ours], a)
        ref.fill_next_token_bitmask(b, 0)
        assert np.array_equal(a, b), f"mask differs before {text!r}"
        assert np.array_equal(two[1], b[0]) and (two[0] == 7).all(), f"batch row differs before {text!r}"
        assert ours.accept_string(text) and ref.accept_string(text)
    assert not task.finished.is_set() and task.computed == 1  # all of that while the workers were held
    gate.set()
    assert task.wait(60)
    assert task.computed > 10
    lazy.index.precompute()
    # every reachable configuration's mask is there, and equal to the lazy one's
    assert len(compiled.index._masks) == len(lazy.index._masks) < 777
    assert sorted(m.tobytes() for m in compiled.index._masks.values()) == sorted(
        m.tobytes() for m in lazy.index._masks.values())


def test_background_precompute_is_cancelled_with_its_grammar():
    info = toy_info(TOKENS)
    compiler = GrammarCompiler(info, precompute="background", cache_size=0, precompute_limit=10_000)
    # a recursive grammar: configurations without end, so only the limit or a cancel stop it
    compiled = compiler.compile_json_schema(SCHEMAS[5])
    task = compiled.background
    del compiled
    import gc

    gc.collect()
    assert task.wait(60)
    assert task.computed < 10_000


def test_background_limit_and_explicit_cancel():
    info = toy_info(TOKENS)
    compiled = GrammarCompiler(info, precompute="background", precompute_limit=5).compile_json_schema(SCHEMAS[5])
    assert compiled.background.wait(60)
    assert compiled.background.computed == 5
    other = GrammarCompiler(info, precompute="background", precompute_limit=10_000).compile_builtin_json()
    other.background.cancel()
    assert other.background.wait(60)
    m = other.matcher()  # decoding still works: masks on demand
    assert m.accept_string('{"a": [1, 2]}') and m.is_completed()
    with pytest.raises(ValueError, match="precompute"):
        GrammarCompiler(info, precompute="sometimes")


def test_single_fill_limit_error_with_the_gil_released_part_way(monkeypatch):
    """A limit crossed in a first visit after the fill released the GIL (lazily, at its
    first byte row) is the call's LimitError, raised with the GIL held again: the next
    calls work, and the fill succeeds once the limit allows it."""
    import structgen.index.counters
    from structgen import LimitError, _core

    info = toy_info([b'"', b"a", b"aa", b"aaaa", b"aaaaaaaa"])
    words = bitmask_words(info.vocab_size)
    matcher = GrammarCompiler(info).compile_json_schema({"type": "string", "pattern": "^(a|aa){100}$"}).matcher()
    assert matcher.accept_string('"a')
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 3)
    before = _core.gil_releases()
    with pytest.raises(LimitError) as err:
        matcher.fill_next_token_bitmask(np.zeros((1, words), np.int32))
    assert err.value.limit_name == "MAX_CONFIG_STACKS"
    assert _core.gil_releases() > before  # (the GIL was released before the limit was met)
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 512)
    got = np.zeros((1, words), np.int32)
    matcher.fill_next_token_bitmask(got)
    assert got[0, 0] != 0


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_fill_limit_error_from_any_thread(monkeypatch, threads):
    """A limit crossed while a pool thread computes a missing mask is the call's LimitError;
    the rows fill once the limit allows it, as the matchers fill them one by one."""
    import structgen.index.counters
    from structgen import LimitError

    info = toy_info([b'"', b"a", b"aa", b"aaaa", b"aaaaaaaa"])
    words = bitmask_words(info.vocab_size)
    compiler = GrammarCompiler(info)
    matchers = []
    for k in range(6):  # distinct grammars: one missing mask each, shared between the threads
        m = compiler.compile_json_schema({"type": "string", "pattern": f"^(a|aa){{{100 + k}}}$"}).matcher()
        assert m.accept_string('"a')
        matchers.append(m)
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 3)
    with pytest.raises(LimitError) as err:
        fill_next_token_bitmasks(matchers, np.zeros((6, words), np.int32), threads=threads)
    assert err.value.limit_name == "MAX_CONFIG_STACKS"
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 512)
    got = np.zeros((6, words), np.int32)
    fill_next_token_bitmasks(matchers, got, threads=threads)
    np.testing.assert_array_equal(got, _one_by_one(matchers, 6, words, range(6)))
    assert (got[:, 0] != 0).all()


BIG_WALK = {"type": "string", "maxLength": 14, "pattern": "abcdefghij"}
"""The first character of this string walks most of the vocabulary trie: every token's
characters are counted and searched for the unanchored pattern (too many tokens fit or may
not to take them by their lengths, ConfigIndex::level_walk)."""


def _at_big_walk(info) -> GrammarMatcher:
    m = GrammarCompiler(info, cache_size=0).compile_json_schema(BIG_WALK).matcher()  # a fresh grammar
    assert m.accept_string('"')
    return m


def test_a_large_walk_shared_with_a_waiting_thread_keeps_the_bits(smollm2_info):
    """A first visit whose walk covers most of the trie, computed while another thread waits
    to help (as the threads of a batch fill do once out of items): the helper takes units of
    the walk into a mask of its own, merged by the owner; the mask is bit for bit the one
    computed alone. The helper is already spinning when the walk starts, but a loaded machine
    may still not run it before a walk ends, so walks of fresh grammars are tried until it
    has joined one."""
    from structgen import _core

    words = bitmask_words(smollm2_info.vocab_size)
    joined = 0
    for _ in range(10):
        ms = [_at_big_walk(smollm2_info) for _ in range(8)]
        got, n = _core._masks_with_a_waiting_helper([m._index._view for m in ms], [m._history[-1] for m in ms])
        joined += n
        alone = np.zeros((1, words), np.int32)
        _at_big_walk(smollm2_info).fill_next_token_bitmask(alone)
        for row in got:
            np.testing.assert_array_equal(row.view(np.int32), alone[0])
        if joined:
            break
    assert joined, "the waiting thread never joined a walk in 80 tries"
    assert np.unpackbits(alone.view(np.uint8)).sum() > 1000  # (the walk allows most short tokens)


def test_a_batch_with_a_large_walk_on_two_threads_keeps_the_bits(smollm2_info):
    """The same walk in a batch fill on two threads, beside cheap rows: the thread that runs
    out of items joins it when the machine runs both threads meanwhile; the rows are bit for
    bit what the matchers fill one by one either way."""
    words = bitmask_words(smollm2_info.vocab_size)
    small = [{"type": "integer"}, {"enum": ["ab", "cd"]}, {"type": "boolean"}]

    def batch() -> list[GrammarMatcher]:
        compiler = GrammarCompiler(smollm2_info, cache_size=0)  # fresh grammars: first visits
        return [_at_big_walk(smollm2_info)] + [compiler.compile_json_schema(s).matcher() for s in small]

    for _ in range(3):
        got = np.zeros((4, words), np.int32)
        fill_next_token_bitmasks(batch(), got, threads=2)
        np.testing.assert_array_equal(got, _one_by_one(batch(), 4, words, range(4)))


# A toy vocabulary whose leading-space subtree (19K nodes) is cut at its children into units
# of a shared walk, as SmolLM2's is: " " then one to three lowercase letters, and digits.
_LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
SPACE_WORDS = [b" " + (a + b + c).encode() for a in _LETTERS for b in [""] + _LETTERS for c in [""] + _LETTERS
               if b or not c] + [d.encode() * n for d in "0123456789" for n in (2, 3)]


def _at_string_start(info, pattern: str) -> GrammarMatcher:
    m = GrammarCompiler(info, cache_size=0).compile_json_schema({"type": "string", "pattern": pattern}).matcher()
    assert m.accept_string('"')
    return m


def test_a_shared_walk_passing_a_cut_subtree_whole_keeps_the_bits():
    """Below the leading space every token is a lowercase word the string goes on with, so the
    walk takes that subtree in whole at its root node, which every thread taking one of its
    units visits first: the units below are then passed, by the owner and by the helper (which
    takes the first unit: helper_first). The mask equals the one computed alone and the
    token-by-token reference."""
    from structgen import _core

    from .reference_masks import reference_mask

    info = toy_info(SPACE_WORDS)
    words = bitmask_words(info.vocab_size)
    pattern = "^( [a-z]*|[0-9]{12})$"
    alone = np.zeros((1, words), np.int32)
    reference = _at_string_start(info, pattern)
    reference.fill_next_token_bitmask(alone)
    np.testing.assert_array_equal(alone[0], reference_mask(reference._index, reference._history[-1]))
    allowed = {i for i in range(info.vocab_size) if alone[0][i >> 5] >> (i & 31) & 1}
    assert set(range(len(SPACE_WORDS))) <= allowed  # (every space word and digit run: ids first)
    ms = [_at_string_start(info, pattern) for _ in range(4)]
    got, joined = _core._masks_with_a_waiting_helper([m._index._view for m in ms], [m._history[-1] for m in ms],
                                                     helper_first=True)
    assert joined == 4  # (the helper took the first unit of every walk)
    for row in got:
        np.testing.assert_array_equal(row.view(np.int32), alone[0])


@pytest.mark.parametrize("pattern", [
    # every unit: the helper's (the first) raises, then the owner's, whose exception leaves
    "^( ([a-z]|[a-z]{2}){100}|[0-9]{12})$",
    # the first unit only: the helper raises, the owner walks the others and raises its error
    "^( ([ab]|[ab]{2}){100}| [c-z][a-z]{0,2}|[0-9]{12})$",
], ids=["every-unit", "helper-only"])
def test_a_shared_walk_whose_units_raise_leaves_no_mask_and_recovers(monkeypatch, pattern):
    """Units below the leading space pass the stack limit (three letters of a counted choice
    make four stacks); the helper takes the first unit (helper_first). Whichever thread
    raises, the limit error reaches the caller, no mask is kept, and the same configuration
    then gives the mask computed alone and the token-by-token reference. (The test hook raises
    the core's own exception; the fills translate it into LimitError.)"""
    import structgen.index.counters

    from structgen import _core

    from .reference_masks import reference_mask

    info = toy_info(SPACE_WORDS)
    words = bitmask_words(info.vocab_size)
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 3)
    for _ in range(3):
        m = _at_string_start(info, pattern)
        before = _core.walks_shared()
        with pytest.raises(_core.StackLimitExceeded):
            _core._masks_with_a_waiting_helper([m._index._view], [m._history[-1]], helper_first=True)
        assert _core.walks_shared() == before + 1  # (the helper joined the walk)
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 512)
    m._index._native.set_stack_limit(512)  # (what a fill does with the module's limit)
    got, joined = _core._masks_with_a_waiting_helper([m._index._view], [m._history[-1]], helper_first=True)
    assert joined == 1
    alone = np.zeros((1, words), np.int32)
    _at_string_start(info, pattern).fill_next_token_bitmask(alone)
    np.testing.assert_array_equal(got[0].view(np.int32), alone[0])
    np.testing.assert_array_equal(alone[0], reference_mask(m._index, m._history[-1]))
    bits = np.unpackbits(alone.view(np.uint8), bitorder="little")
    assert bits[SPACE_WORDS.index(b" ab")] and bits[SPACE_WORDS.index(b"00")]
