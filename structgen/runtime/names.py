"""Distinct member names: JSON forbids nothing, JSON Schema validators keep the last value.

A grammar can say "any member name" (``additionalProperties``, ``patternProperties``,
``propertyNames``, a plain ``{"type": "object"}``, any JSON value), but no context-free
grammar can say "each name once": ``{"a":1,"a":2}`` is in the language, parses as one
member, and then fails ``minProperties: 2``. Grammars compiled from JSON Schemas with such
objects are flagged (``Grammar.free_names``), and their matchers run a small JSON lexer
alongside the automaton (:class:`NameState`): it knows the object each byte is in, the
decoded names already written there, and the name being written. ``accept_token`` rejects a
token that closes a name a second time in one object, and the mask clears such tokens.

Only tokens that contain a ``"`` byte can close a name, so the per-tokenizer tables here
(:func:`quote_tables`) list them once; a mask needs extra work only where a name could be
closed, and ``\\u0061`` and ``a`` are the same name (names are compared decoded).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..index.tokenizer import TokenizerInfo

__all__ = ["NameState", "PlainTokens", "prepare_names", "QuoteTables", "quote_tables", "decode_name", "INITIAL", "clear_duplicate_closers", "clear_dead_names", "clear_names",
           "distinct_completion"]

OUTSIDE, VALUE, KEY = 0, 1, 2
"""Lexer modes: between strings, inside a value string, inside a member name."""

_STRUCTURE = frozenset(b'{}[]",:')
_ESCAPES = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f",
            ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}


def decode_name(raw: bytes) -> bytes | None:
    """The name a JSON string body spells, as UTF-8 bytes (lone surrogates kept, as
    ``surrogatepass`` encodes them); ``None`` when ``raw`` ends inside an escape.

    Bytes outside escapes are kept as they are, so a body cut inside a UTF-8 character
    decodes to a prefix of the full name's bytes (what the mask compares)."""
    if b"\\" not in raw:
        return raw
    out = bytearray()
    i, n = 0, len(raw)
    pending_high = -1  # a \uD800-\uDBFF escape waiting for its low half
    while i < n:
        b = raw[i]
        if b != 0x5C:
            if pending_high >= 0:
                out += chr(pending_high).encode("utf-8", "surrogatepass")
                pending_high = -1
            out.append(b)
            i += 1
            continue
        if i + 1 >= n:
            return None
        c = raw[i + 1]
        if c == 0x75:  # \uXXXX
            if i + 6 > n:
                return None
            cp = int(raw[i + 2:i + 6], 16)
            i += 6
            if pending_high >= 0:
                if 0xDC00 <= cp <= 0xDFFF:
                    out += chr(0x10000 + ((pending_high - 0xD800) << 10) + (cp - 0xDC00)).encode("utf-8")
                    pending_high = -1
                    continue
                out += chr(pending_high).encode("utf-8", "surrogatepass")
                pending_high = -1
            if 0xD800 <= cp <= 0xDBFF:
                pending_high = cp
            else:
                out += chr(cp).encode("utf-8", "surrogatepass")
            continue
        if pending_high >= 0:
            out += chr(pending_high).encode("utf-8", "surrogatepass")
            pending_high = -1
        out += _ESCAPES.get(c, bytes([c]))
        i += 2
    if pending_high >= 0:
        # a high surrogate at the end: its low half may still come (the next escape)
        return None
    return bytes(out)


class NameState:
    """Where a JSON text stands, as far as member names are concerned (immutable).

    Attributes:
        stack: open containers, innermost last: an object is the frozenset of the decoded
            names written in it, an array is ``None``.
        expect_key: in the innermost object, the next string is a member name.
        mode: ``OUTSIDE``, ``VALUE`` (inside a value string) or ``KEY`` (inside a name).
        esc: the previous byte inside a string was an unpaired backslash.
        key: raw bytes of the name being written (``mode == KEY``).
        named: names written in the open objects, all together (0: nothing to collide with).
    """

    __slots__ = ("stack", "expect_key", "mode", "esc", "key", "named")

    def __init__(self, stack: tuple, expect_key: bool, mode: int, esc: bool, key: bytes, named: int) -> None:
        self.stack = stack
        self.expect_key = expect_key
        self.mode = mode
        self.esc = esc
        self.key = key
        self.named = named

    def feed(self, data: bytes) -> "NameState | None":
        """The state after ``data``; ``None`` if ``data`` closes a name already written in
        its object. Text that cannot change names (inside a value string without quote or
        backslash, numbers, literals, whitespace) returns ``self``."""
        mode = self.mode
        if not self.esc:
            if mode == VALUE:
                if b'"' not in data and b"\\" not in data:
                    return self
            elif mode == KEY:
                if b'"' not in data and b"\\" not in data:
                    return NameState(self.stack, self.expect_key, KEY, False, self.key + data, self.named)
            elif _STRUCTURE.isdisjoint(data):
                return self
        stack = list(self.stack)
        expect_key, esc, key, named = self.expect_key, self.esc, self.key, self.named
        i, n = 0, len(data)
        while i < n:
            b = data[i]
            if mode == OUTSIDE:
                if b == 0x22:  # "
                    if stack and stack[-1] is not None and expect_key:
                        mode, key = KEY, b""
                    else:
                        mode = VALUE
                elif b == 0x7B:  # {
                    stack.append(frozenset())
                    expect_key = True
                elif b == 0x5B:  # [
                    stack.append(None)
                elif b == 0x7D or b == 0x5D:  # } ]
                    if stack:
                        top = stack.pop()
                        if top:
                            named -= len(top)
                    expect_key = False
                elif b == 0x3A:  # :
                    expect_key = False
                elif b == 0x2C:  # ,
                    expect_key = bool(stack) and stack[-1] is not None
                i += 1
                continue
            # inside a string: jump to the next quote or backslash
            if esc:
                esc = False
                if mode == KEY:
                    key += data[i:i + 1]
                i += 1
                continue
            j = i
            while j < n and data[j] != 0x22 and data[j] != 0x5C:
                j += 1
            if mode == KEY:
                key += data[i:j]
            if j == n:
                break
            if data[j] == 0x5C:
                esc = True
                if mode == KEY:
                    key += b"\\"
                i = j + 1
                continue
            # closing quote
            if mode == KEY:
                name = decode_name(key)
                top = stack[-1]
                if name in top:
                    return None
                stack[-1] = top | {name}
                named += 1
                key = b""
                expect_key = False
            mode = OUTSIDE
            i = j + 1
        return NameState(tuple(stack), expect_key, mode, esc, key, named)

    def key_prefix(self) -> bytes | None:
        """Decoded bytes of the name being written (``None``: inside an escape)."""
        if self.esc:
            return None
        return decode_name(self.key)

    def top_names(self) -> frozenset:
        return self.stack[-1] if self.stack and self.stack[-1] is not None else frozenset()

    def __repr__(self) -> str:
        return (f"NameState(stack={self.stack!r}, expect_key={self.expect_key}, mode={self.mode}, "
                f"esc={self.esc}, key={self.key!r})")


INITIAL = NameState((), False, OUTSIDE, False, b"", 0)


class PlainTokens:
    """Bytes -> ids of the tokens spelling them, for tokens without quote or backslash
    (:attr:`QuoteTables.plain`). One dict of the whole vocabulary built at C speed, plus
    the few byte strings that several ids spell; arrays are made per lookup."""

    __slots__ = ("_first", "_more")

    def __init__(self, token_bytes: tuple) -> None:
        self._first = dict(zip(token_bytes, range(len(token_bytes))))
        more: dict[bytes, list[int]] = {}
        if len(self._first) < len(token_bytes):  # some bytes are spelt by several ids
            first = self._first
            for i, b in enumerate(token_bytes):
                if b and first[b] != i:
                    more.setdefault(b, []).append(i)
        self._more = more

    def get(self, piece: bytes) -> np.ndarray | None:
        if not piece or b'"' in piece or b"\\" in piece:
            return None
        i = self._first.get(piece)
        if i is None:
            return None
        more = self._more.get(piece)
        return np.array([i] if more is None else [i, *more], np.int64)


@dataclass(frozen=True, eq=False)
class QuoteTables:
    """Per tokenizer: the tokens that can close a name, by how many ``"`` bytes they hold.

    Attributes:
        at_least: ``at_least[k]`` (k = 1..3): packed uint32 bitmask of the tokens with at
            least ``k`` quote bytes.
        by_prefix: bytes before the first quote -> token ids, for quote tokens without a
            backslash before it (the name they close is the name so far plus that prefix).
        escaped: packed bitmask of the quote tokens with a backslash before the first quote.
        plain: bytes -> token ids, for tokens without quote or backslash (they extend a name).
        by_tail: bytes after the last quote -> token ids (what a token that opens a name
            writes into it).
        between: token id -> decoded bytes between its two quotes (``None``: they end
            inside an escape), for the tokens with exactly two quotes. From between strings
            such a token closes at most that one name, so it can repeat a name only if
            one of the open objects has it.
        reopen: packed bitmask of the tokens with an even number (two or more) of quotes
            or a backslash: from inside a name, only these can end inside the next one
            (without a backslash each quote toggles between strings and structure).
    """

    at_least: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    by_prefix: dict[bytes, np.ndarray]
    escaped: np.ndarray
    plain: PlainTokens
    by_tail: dict[bytes, np.ndarray]
    between: dict[int, bytes | None]
    reopen: np.ndarray


_TABLES: "weakref.WeakKeyDictionary[TokenizerInfo, QuoteTables]" = weakref.WeakKeyDictionary()


def _pack(ids: list[int], words: int) -> np.ndarray:
    bits = np.zeros(words * 32, bool)
    bits[ids] = True
    return np.packbits(bits, bitorder="little").view(np.uint32)


def quote_tables(info: TokenizerInfo) -> QuoteTables:
    """The :class:`QuoteTables` of a vocabulary (built once per ``TokenizerInfo``; the
    matcher of a grammar with free names asks for them when it is made, so a request's
    first mask does not pay for them). Only the few tokens with a quote are visited one
    by one in Python."""
    tables = _TABLES.get(info)
    if tables is None:
        tb = info.token_bytes
        words = (info.vocab_size + 31) // 32
        levels: list[list[int]] = [[], [], [], []]
        prefixes: dict[bytes, list[int]] = {}
        tails: dict[bytes, list[int]] = {}
        escaped = []
        between: dict[int, bytes | None] = {}
        reopen = []
        for i in [i for i, b in enumerate(tb) if b and b'"' in b]:
            b = tb[i]
            tails.setdefault(b[b.rindex(b'"') + 1:], []).append(i)
            count = b.count(b'"')
            if count == 2:
                first = b.index(b'"')
                between[i] = decode_name(b[first + 1:b.index(b'"', first + 1)])
            if count % 2 == 0 or b"\\" in b:
                reopen.append(i)
            k = min(count, 3)
            for level in range(1, k + 1):
                levels[level].append(i)
            pre = b[: b.index(b'"')]
            if b"\\" in pre:
                escaped.append(i)
            else:
                prefixes.setdefault(pre, []).append(i)
        at_least = (np.zeros(words, np.uint32),) + tuple(_pack(ids, words) for ids in levels[1:])
        tables = _TABLES[info] = QuoteTables(
            at_least, {p: np.array(ids, np.int64) for p, ids in prefixes.items()}, _pack(escaped, words),
            PlainTokens(tb), {p: np.array(ids, np.int64) for p, ids in tails.items()}, between,
            at_least[2] & _pack(reopen, words))
    return tables


def prepare_names(info: TokenizerInfo) -> None:
    """Build the per-tokenizer tables of the name clears now (once per ``TokenizerInfo``)."""
    quote_tables(info)


# per TokenIndex: (configuration, token class) -> the tokens of that class its mask allows
_CLASS_HITS: "weakref.WeakKeyDictionary[object, dict[tuple[int, int], np.ndarray]]" = weakref.WeakKeyDictionary()


def _allowed_of_class(index, cid: int, cls: int, bits: np.ndarray) -> np.ndarray:
    """Token ids in the packed class ``bits`` that configuration ``cid``'s mask allows
    (memoised: a mask never changes, and most allow few tokens with quotes)."""
    memo = _CLASS_HITS.get(index)
    if memo is None:
        memo = _CLASS_HITS.setdefault(index, {})
    ids = memo.get((cid, cls))
    if ids is None:
        mask = index.mask(cid).view(np.uint32)
        n = min(len(mask), len(bits))
        hits = mask[:n] & bits[:n]
        words = np.flatnonzero(hits)
        if len(words):
            unpacked = np.unpackbits(hits[words].view(np.uint8), bitorder="little").reshape(len(words), 32)
            w, b = np.nonzero(unpacked)
            ids = words[w].astype(np.int64) * 32 + b
        else:
            ids = np.zeros(0, np.int64)
        memo[(cid, cls)] = ids
    return ids


def clear_duplicate_closers(state: NameState, row: np.ndarray, info: TokenizerInfo,
                            index=None, cid: int | None = None) -> None:
    """Clear, in a filled uint32 mask row, every allowed token that would write a name twice
    in one object from ``state``.

    A token closes a name when it holds a quote ending a name; from a name, its first
    unescaped quote does (compared via :attr:`QuoteTables.by_prefix`, no per-token work).
    Any other way needs more quotes (open and close a name: 2, from a value string 3), and
    a second name of the same object within one token needs 3: those few tokens are fed to
    the lexer one by one. Nothing written yet in any open object: only the latter."""
    tables = quote_tables(info)
    words = min(len(row), len(tables.escaped))
    cls = 3
    if state.named == 0:
        simulate = tables.at_least[3]
    elif state.mode == KEY:
        prefix = state.key_prefix()
        if prefix is None:
            simulate, cls = tables.at_least[1], 1
        else:
            for name in state.top_names():
                if name.startswith(prefix):
                    ids = tables.by_prefix.get(name[len(prefix):])
                    if ids is not None:
                        np.bitwise_and.at(row, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
            simulate, cls = tables.at_least[3] | tables.escaped, 4
    elif state.mode == OUTSIDE:
        simulate, cls = tables.at_least[2], 2
    else:
        simulate = tables.at_least[3]
    tb = info.token_bytes
    if index is not None:
        # the row still holds the configuration's mask, less what the names cleared above
        between = tables.between if cls == 2 else {}
        if between:
            written = frozenset().union(*[top for top in state.stack if top])
        for t in _allowed_of_class(index, cid, cls, simulate).tolist():
            if t in between and between[t] not in written:
                continue  # the one name it can close is in no open object
            w, low = t >> 5, 1 << (t & 31)
            if int(row[w]) & low and state.feed(tb[t]) is None:
                row[w] &= np.uint32(~low & 0xFFFFFFFF)
        return
    hits = row[:words] & simulate[:words]
    nz = np.flatnonzero(hits)
    if not len(nz):
        return
    for w in nz.tolist():
        bits = int(hits[w])
        while bits:
            low = bits & -bits
            t = (w << 5) + low.bit_length() - 1
            bits ^= low
            if state.feed(tb[t]) is None:
                row[w] &= np.uint32(~low & 0xFFFFFFFF)


def clear_dead_names(state: NameState, row: np.ndarray, info: TokenizerInfo, index, cid: int) -> None:
    """Clear, in a filled uint32 mask row, the allowed tokens that leave a name half written
    such that every way to end it repeats a name of its object (a dead end: with
    ``propertyNames: {"maxLength": 1}`` and ``":"`` written, the token ``,":`` ).

    Only a name so far that is a prefix of a name already written can be in that trap, so
    the candidates are looked up from the written names (:attr:`QuoteTables.plain` inside a
    name, :attr:`QuoteTables.by_tail` before one), and each is checked by a bounded search."""
    if state.mode == KEY and state.esc:
        return
    names = state.top_names()
    if not names and state.mode != KEY:
        return  # (inside a name, a token that ends it and starts the next can trap the next)
    tables = quote_tables(info)
    prefix = state.key_prefix() if state.mode == KEY else None
    if state.mode == KEY and prefix is None:
        return
    memo_key = (id(tables), names, prefix, state.mode)
    ids = _CANDIDATES.get(memo_key)
    if ids is None:
        cands: list[np.ndarray] = []
        if prefix is not None:
            pieces = {name[len(prefix):len(prefix) + k] for name in names if name.startswith(prefix)
                      for k in range(1, len(name) - len(prefix) + 1)}
            lookup = tables.plain
        else:
            pieces = {name[:k] for name in names for k in range(len(name) + 1)}
            lookup = tables.by_tail
        for piece in pieces:
            got = lookup.get(piece)
            if got is not None:
                cands.append(got)
        ids = np.unique(np.concatenate(cands)) if cands else np.zeros(0, np.int64)
        if state.mode == VALUE:  # to reach a name, a token ends this string first: two quotes
            two = tables.at_least[2]
            ids = ids[((two[ids >> 5] >> (ids & 31).astype(np.uint32)) & np.uint32(1)).astype(bool)]
        if len(_CANDIDATES) > 4096:  # the same objects recur in one output; bound the memo
            _CANDIDATES.clear()
        _CANDIDATES[memo_key] = ids
    if state.mode == KEY:
        # a token may also end this name and start the next one (`":1,"a`: an even number of
        # quotes, or escapes)
        ids = np.union1d(ids, _allowed_of_class(index, cid, 5, tables.reopen))
    if not len(ids):
        return
    ids = ids[ids < len(row) * 32]
    live = ids[((row[ids >> 5] >> (ids & 31).astype(np.uint32)) & np.uint32(1)).astype(bool)]
    tb = info.token_bytes
    ends = _ENDS.get(index)
    if ends is None or len(ends) >= _CLEARED_CAP:
        ends = _ENDS[index] = {}
    for t in live.tolist():
        after = state.feed(tb[t])
        if after is None or after.mode != KEY:
            continue
        succ = index.step_token(cid, t)
        if succ == 0:
            continue
        key = (succ, after.stack, after.expect_key, after.esc, after.key)
        fresh = ends.get(key)
        if fresh is None:
            fresh = ends[key] = _can_end_fresh(index, succ, after)
        if not fresh:
            row[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)


# per TokenIndex: (configuration, lexer state inside a name) -> _can_end_fresh (a function of
# both alone; tokens of different fills that reach the same pair share one bounded search)
_ENDS: "weakref.WeakKeyDictionary[object, dict[tuple, bool]]" = weakref.WeakKeyDictionary()

# (tables, names of an object, name so far or None) -> candidate token ids of clear_dead_names
_CANDIDATES: dict[tuple, np.ndarray] = {}


def _can_end_fresh(index, cid: int, state: NameState) -> bool:
    """From inside a name: some way to end it gives a name its object does not have (or
    the bounded search could not tell)."""
    # a short search first: it usually ends at once (the name can close here, or one more
    # character makes it new) and needs no shortest completion of the whole output, which
    # costs hundreds of µs for a configuration seen for the first time
    near = _fresh_name(index, cid, state, 64)
    if near is not None:
        return near is not False
    text = index.shortest_completion(cid)
    if text is not None and state.feed(text) is not None:
        return True
    return _fresh_name(index, cid, state, 2_000) is not False


def distinct_completion(index, cid: int, state: NameState, *, max_nodes: int = 20_000) -> bytes | None:
    """A short text completing configuration ``cid`` of ``index`` (a ``TokenIndex``) without
    writing a name twice in an object, from lexer state ``state``; ``None`` if none is found.

    The grammar's own shortest completion when it keeps names distinct (the usual case).
    Else that completion is followed byte by byte (shortest-distance byte, printable ASCII
    first) until a name would repeat; there the name is rewritten from its opening quote
    by a breadth-first search for the shortest name the grammar allows here that this
    object does not have yet (``""`` taken: ``" "``, then ``"!"``...), then the walk goes
    on. ``max_nodes`` bounds each search."""
    text = index.shortest_completion(cid)
    if text is None:
        return None
    if state.feed(text) is not None:
        return text
    out = bytearray()
    key_start: tuple[int, NameState, int] | None = None  # (config, state, len(out)) at a name's quote
    if state.mode == KEY:
        # already inside a name: its written part is fixed, search from here
        key_start = (cid, state, 0)
    c, st = cid, state
    for _ in range(1 << 20):
        if index.is_accepting(c):
            return bytes(out)
        d = index.completion_length(c)
        row = index.next_configs(c)
        best = None
        for b in sorted(np.flatnonzero(row).tolist(), key=_RANK.__getitem__):
            if index.completion_length(int(row[b])) == d - 1:
                best = b
                break
        if best is None:  # pragma: no cover - distances are exact
            return None
        st2 = st.feed(bytes((best,)))
        if st2 is None:
            if key_start is None:  # pragma: no cover - a name's opening quote was seen
                return None
            found = _fresh_name(index, *key_start[:2], max_nodes)
            if not found:
                return None
            del out[key_start[2]:]
            name, c, st = found
            out += name
            key_start = None
            continue
        if st.mode != KEY and st2.mode == KEY:
            key_start = (int(row[best]), st2, len(out) + 1)
        elif st2.mode != KEY:
            key_start = None
        out.append(best)
        c, st = int(row[best]), st2
    return None  # pragma: no cover


def _fresh_name(index, cid: int, state: NameState, max_nodes: int):
    """From inside a name (configuration ``cid``, lexer ``state``): the shortest bytes that
    end it (closing quote included) with a name its object does not have, and the
    configuration and lexer state after them (breadth first, printable ASCII first).
    ``False`` when there is none, ``None`` when ``max_nodes`` names were tried."""

    def close(c: int, st: NameState, written: bytes):
        after = index.step_bytes(c, b'"')
        if after == 0 or st.esc:
            return None
        st2 = st.feed(b'"')
        if st2 is None or st2.mode == KEY or index.completion_length(after) is None:
            return None
        return written + b'"', after, st2

    found = close(cid, state, b"")
    if found is not None:
        return found
    level = [(cid, state, b"")]
    nodes = 0
    while level:
        nxt_level = []
        for c, st, written in level:
            row = index.next_configs(c)
            for b in sorted(np.flatnonzero(row).tolist(), key=_RANK.__getitem__):
                if b == 0x22 and not st.esc:
                    continue
                nodes += 1
                if nodes > max_nodes:
                    return None  # unknown
                child = (int(row[b]), st.feed(bytes((b,))), written + bytes((b,)))
                found = close(*child)
                if found is not None:
                    return found
                nxt_level.append(child)
        level = nxt_level
    return False  # every name this position can end with is taken


# printable ASCII first among equal choices, as the grammar's own completions
_RANK = [b - 0x20 if 0x20 <= b < 0x7F else 0x100 + b for b in range(256)]


# per TokenIndex: (configuration, name state) -> (words, their values) after both clears
_CLEARED: "weakref.WeakKeyDictionary[object, dict[tuple, tuple[np.ndarray, np.ndarray]]]" = weakref.WeakKeyDictionary()
_CLEARED_CAP = 1 << 16


def clear_names(state: NameState, row: np.ndarray, info: TokenizerInfo, index, cid: int) -> None:
    """:func:`clear_duplicate_closers` and :func:`clear_dead_names` on a uint32 row that
    holds configuration ``cid``'s mask, memoised per (configuration, name state).

    What they clear depends on nothing else, and outputs of one schema revisit the same
    pairs (the declared names recur): a repeat costs a dict lookup and, where tokens are
    cleared, one masked assignment, instead of the per-token lexer work (about 15 µs a step
    on SmolLM2 without the memo). Past ``_CLEARED_CAP`` entries per index the memo restarts."""
    memo = _CLEARED.get(index)
    if memo is None:
        memo = _CLEARED.setdefault(index, {})
    key = (cid, state.stack, state.expect_key, state.mode, state.esc, state.key, state.named)
    hit = memo.get(key)
    if hit is None:
        mask = index.mask(cid).view(np.uint32)
        cleared = mask.copy()
        clear_duplicate_closers(state, cleared, info, index, cid)
        clear_dead_names(state, cleared, info, index, cid)
        words = np.flatnonzero(cleared != mask)
        hit = (words, cleared[words])
        if len(memo) >= _CLEARED_CAP:
            memo.clear()
        memo[key] = hit
    words, values = hit
    if len(words):
        row[words] &= values
