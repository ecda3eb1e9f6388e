"""Distinct member names: JSON forbids nothing, JSON Schema validators keep the last value.

A grammar can say "any member name" (``additionalProperties``, ``patternProperties``,
``propertyNames``, a plain ``{"type": "object"}``, any JSON value), but no context-free
grammar can say "each name once": ``{"a":1,"a":2}`` is in the language, parses as one
member, and then fails ``minProperties: 2``. Grammars compiled from JSON Schemas with such
objects are flagged (``Grammar.free_names``), and their matchers run a small JSON lexer
alongside the automaton (:class:`NameState`): it knows the object each byte is in, the
decoded names already written there, and the name being written. ``accept_token`` rejects a
token that closes a name a second time in one object, and the mask clears such tokens, and
the tokens that leave a name half written such that every way to end it repeats a name.

The lexer and the clears are native (src/core/names.cpp) and run without the GIL; this
module holds the glue: the per-tokenizer tables (built once per ``TokenizerInfo``) and the
per-grammar memos (one :class:`structgen._core.NameIndex` per ``TokenIndex``). ``\\u0061``
and ``a`` are the same name (names are compared decoded).
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import numpy as np

from .. import _core
from ..index.token_index import TokenIndex, _guarded
from ..index.tokenizer import TokenizerInfo

__all__ = ["NameState", "INITIAL", "OUTSIDE", "VALUE", "KEY", "decode_name", "name_tables", "name_index",
           "clear_names", "distinct_completion"]

OUTSIDE, VALUE, KEY = 0, 1, 2
"""Lexer modes (:attr:`NameState.mode`): between strings, inside a value string, inside a member name."""

NameState = _core.NameState
"""Where a JSON text stands as far as member names are concerned (immutable): ``stack`` (open
containers, innermost last: an object is the frozenset of the decoded names written in it, an
array ``None``), ``expect_key``, ``mode``, ``esc``, ``key`` (raw bytes of the name being
written), ``named`` (names in the open objects, all together); ``feed(data)`` is the state
after ``data``, ``None`` if ``data`` closes a name already written in its object."""

INITIAL: NameState = _core.NameState()
"""The state before any text."""

decode_name: Callable[[bytes], bytes | None] = _core.decode_name
"""The name a JSON string body spells, as UTF-8 bytes (lone surrogates kept, as
``surrogatepass`` encodes them); ``None`` when the body ends inside an escape."""

_TABLES: "weakref.WeakKeyDictionary[TokenizerInfo, _core.NameTables]" = weakref.WeakKeyDictionary()
_INDEXES: "weakref.WeakKeyDictionary[TokenIndex, _core.NameIndex]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def name_tables(info: TokenizerInfo) -> _core.NameTables:
    """The per-tokenizer tables of the name clears (which tokens hold quotes, and where),
    built once per ``TokenizerInfo`` and shared by every grammar of that vocabulary."""
    tables = _TABLES.get(info)
    if tables is None:
        with _lock:
            tables = _TABLES.get(info)
            if tables is None:
                tables = _TABLES[info] = _core.NameTables(info.token_bytes, (info.vocab_size + 31) // 32)
    return tables


def name_index(index: TokenIndex, *, traps: bool = True) -> _core.NameIndex:
    """The native name clears of one grammar's configurations, with their memos (made once
    per index; matchers make it when they start, so a fill does not). ``traps``:
    :attr:`Grammar.names_can_trap` of the index's grammar (``False``: only repeats are
    cleared; an index made with ``True`` first keeps all clears, which is never wrong)."""
    ni = _INDEXES.get(index)
    if ni is None:
        tables = name_tables(index.info)
        with _lock:
            ni = _INDEXES.get(index)
            if ni is None:
                ni = _INDEXES[index] = _core.NameIndex(index._native, tables, traps)
    return ni


def clear_names(names: _core.NameIndex, state: NameState, row: np.ndarray, index: TokenIndex, cid: int) -> None:
    """Clear, in a uint32 row holding configuration ``cid``'s mask, the tokens that would
    write a name twice in one object from ``state``, or leave a name that can only end as a
    repeat (``names``: :func:`name_index` of ``index``). Memoised per (configuration, name
    state); runs without the GIL."""
    if index._counted:  # the searches may create configurations
        index._sync_limit()
    _guarded(names.clear, state, cid, row)


def distinct_completion(index: TokenIndex, cid: int, state: NameState, *, max_nodes: int = 20_000) -> bytes | None:
    """A short text completing configuration ``cid`` of ``index`` without writing a name twice
    in an object, from lexer state ``state``; ``None`` if none is found.

    The grammar's own shortest completion when it keeps names distinct (the usual case).
    Else that completion is followed byte by byte (shortest-distance byte, printable ASCII
    first) until a name would repeat; there the name is rewritten from its opening quote
    by a breadth-first search for the shortest name the grammar allows here that this
    object does not have yet (``""`` taken: ``" "``, then ``"!"``...), then the walk goes
    on. ``max_nodes`` bounds each search."""
    index._sync_limit()
    return _guarded(name_index(index).distinct_completion, cid, state, max_nodes)
