"""One compiled grammar shared by matchers in many threads; the compiler cache under threads.

The memo tables of a compiled grammar fill lazily, so the first visits of configurations race
when threads share a fresh grammar. Races need a thread switch at the wrong bytecode, which a
short run rarely hits by chance; so the tests widen the windows: ``len()`` inside
``structgen.index.token_index`` (used while interning configurations and growing the row table)
and the compiler cache's dict methods first yield the GIL (``time.sleep(0)``). Unlocked,
both tests fail; with the locks, yielding changes nothing.
"""
from __future__ import annotations

import builtins
import gc
import json
import sys
import threading
import time
from collections import OrderedDict

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher
from structgen.schema.canonical import canonical_json

from .conftest import toy_info

TOKENS = [b'{"', b'":', b'"}', b'},', b"true", b"[1", b", ", b"\\u00", b'"a', b"]]", b"[[", b'{"a":', b"null}"]


@pytest.fixture
def fast_switching(monkeypatch):
    import structgen.index.token_index as token_index

    def yielding_len(obj):
        time.sleep(0)  # let another thread run here: between reading a size and using it
        return builtins.len(obj)

    monkeypatch.setattr(token_index, "len", yielding_len, raising=False)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


class YieldingCache(OrderedDict):
    """An LRU dict that lets other threads run before each operation (widens race windows)."""

    def get(self, *a):
        time.sleep(0)
        return super().get(*a)

    def move_to_end(self, *a, **k):
        time.sleep(0)
        return super().move_to_end(*a, **k)

    def popitem(self, *a, **k):
        time.sleep(0)
        return super().popitem(*a, **k)


def _run_threads(target, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_shared_grammar_in_threads_gives_sequential_masks(fast_switching):
    """16 threads walk one fresh compiled grammar (recursive JSON: new configurations at
    every depth), recording each step's mask; replayed one at a time on a grammar of their
    own, the same tokens give the same masks."""
    info = toy_info(TOKENS)
    shared = GrammarCompiler(info).compile_builtin_json()  # fresh memo tables, filled by the threads
    stops = set(info.stop_token_ids)
    runs: dict[int, list[tuple[int, np.ndarray]]] = {}

    def walk(i: int) -> None:
        rng = np.random.default_rng(i)
        m = GrammarMatcher(shared)
        steps = runs[i] = []
        for _ in range(120):
            allowed = m.allowed_token_ids()
            choices = [t for t in allowed.tolist() if t not in stops]
            if not choices:
                break
            tok = int(rng.choice(choices))
            steps.append((tok, allowed))
            assert m.accept_token(tok), f"thread {i}: allowed token {tok} rejected"
            text = shared.index.shortest_completion(m.state)  # the completion memo races too
            assert text is not None and shared.index.is_accepting(shared.index.step_bytes(m.state, text))

    assert _run_threads(walk, 16) == []
    # each configuration interned exactly once (a racing intern gives one id to two
    # configurations, or two ids to one; the row table can also outgrow its allocation)
    stats = shared.index.stats()
    assert stats["config_keys"] == stats["configs"] == shared.index.num_configs
    alone = GrammarCompiler(info).compile_builtin_json()
    assert alone is not shared
    for i, steps in runs.items():
        m = GrammarMatcher(alone)
        for k, (tok, mask) in enumerate(steps):
            assert np.array_equal(m.allowed_token_ids(), mask), f"thread {i} step {k}: mask differs"
            assert m.accept_token(tok)
    assert sum(len(s) for s in runs.values()) > 300


SCHEMAS = [
    {"type": "integer", "minimum": -5, "maximum": 500},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 4}}, "required": ["a"]},
    {"type": "array", "items": {"enum": ["x", "y", 3]}, "maxItems": 3},
    {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
    {"type": "string", "pattern": "^[a-c]{2,3}$"},
    {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"},
]
VALUES = [42, {"a": "hi"}, ["x", 3], None, "abc", [[], [[]]]]


def test_compiler_cache_is_thread_safe(fast_switching):
    """Threads compiling through one compiler with a tiny cache (constant evictions): no
    error, and every grammar accepts its schema's value."""
    compiler = GrammarCompiler(toy_info(TOKENS), cache_size=2)
    compiler._cache = YieldingCache()

    def work(i: int) -> None:
        for k in range(24):
            j = (i + k) % len(SCHEMAS)
            compiled = compiler.compile_json_schema(SCHEMAS[j])
            m = GrammarMatcher(compiled)
            assert m.accept_string(canonical_json(VALUES[j], SCHEMAS[j])) and m.is_completed()

    assert _run_threads(work, 8) == []
    assert len(compiler._cache) <= 2


THREAD_SCHEMAS = SCHEMAS + [
    {"type": "integer", "multipleOf": 3, "maximum": 10},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False},
]
THREAD_VALUES = VALUES + [9, {"x1": 3, "xy": -2}]


def _masks_along_value(compiler: GrammarCompiler, j: int) -> list[tuple[int, ...]]:
    """Compile schema ``j`` and record the allowed tokens before each byte of its value's
    canonical text (fed as single-byte tokens) and at the end."""
    compiled = compiler.compile_json_schema(THREAD_SCHEMAS[j])
    m = GrammarMatcher(compiled)
    masks = []
    for byte in canonical_json(THREAD_VALUES[j], THREAD_SCHEMAS[j]).encode():
        masks.append(tuple(m.allowed_token_ids().tolist()))
        assert m.accept_token(len(TOKENS) + byte)  # toy_info puts the single bytes after TOKENS
    masks.append(tuple(m.allowed_token_ids().tolist()))
    assert m.is_completed()
    return masks


def test_threads_compiling_different_schemas_match_one_thread_and_restore_interpreter_state(fast_switching):
    """8 threads, each compiling its own schema with its own compiler at the same time, see the
    masks one thread sees; afterwards the recursion limit and the garbage collector (enabled
    flag, thresholds) are as they were, whether the collector was on or off before."""
    info = toy_info(TOKENS)
    expected = [_masks_along_value(GrammarCompiler(info), j) for j in range(len(THREAD_SCHEMAS))]
    assert len(THREAD_SCHEMAS) == 8 and len({json.dumps(s) for s in THREAD_SCHEMAS}) == 8
    old_limit, old_gc, old_thresholds = sys.getrecursionlimit(), gc.isenabled(), gc.get_threshold()
    try:
        sys.setrecursionlimit(old_limit + 123)  # a caller's own value, not the default, must come back
        gc.set_threshold(650, 11, 12)
        for gc_on in (True, False):
            gc.enable() if gc_on else gc.disable()
            got: dict[int, list[tuple[int, ...]]] = {}

            def work(i: int) -> None:
                got[i] = _masks_along_value(GrammarCompiler(info), i)

            assert _run_threads(work, 8) == []
            assert [got[i] for i in range(8)] == expected
            assert sys.getrecursionlimit() == old_limit + 123
            assert gc.isenabled() is gc_on
            assert gc.get_threshold() == (650, 11, 12)
    finally:
        sys.setrecursionlimit(old_limit)
        gc.set_threshold(*old_thresholds)
        gc.enable() if old_gc else gc.disable()
