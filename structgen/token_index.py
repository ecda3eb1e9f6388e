"""(automaton, tokenizer) → allowed-token bitsets, one per parser configuration.

Two pieces:

* :class:`TokenTrie` — per tokenizer, built once: the vocabulary as a byte trie in preorder
  (flat arrays per node: byte, token ending here, depth, end of subtree), built and walked by
  the native core (``structgen._core``): the walk of one configuration is a single pass that
  jumps over the subtree of every rejected byte, with the GIL released.
* :class:`TokenIndex` — per compiled grammar: the pushdown automaton's *configurations*
  (the set of possible parser stacks after the text so far) interned as small integers and
  determinised lazily. For each configuration we memoise its byte-transition row (256
  successor configurations) and, on first use, its allowed-token bitmask. A configuration
  is exactly what decides the mask, so after warm-up a decoding step is one dict lookup and
  one row copy. Grammars without recursion have finitely many configurations (the DFA
  states); they can be precomputed eagerly with :meth:`TokenIndex.precompute`.

The memo tables only grow and never change an answer once given, so sharing one index
between matchers of the same compiled grammar is safe, also across threads: every write to
them happens under one lock, and a lookup that finds an entry needs no lock (entries are
complete before they are published).

Shortest completions are known from compile time: :func:`~structgen.automaton.completion_distances`
gives every rule state its fewest bytes to the rule's end, so each interned stack and
configuration gets its distance in O(1) when it is first seen (:meth:`TokenIndex.completion_length`).
Budget-aware decoding builds on it (:meth:`TokenIndex.completion_tokens`,
:meth:`TokenIndex.tokens_exceeding`, and ``structgen.budget``).
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from . import _core
from .automaton import UNREACHABLE, PushdownAutomaton, completion_distances
from .counters import CounterRule, canonical_count, check_config_stacks, prune_subsumed
from .grammar import CharSet
from .mask_pool import share as share_mask
from .tokenizer import TokenizerInfo
from .utf8 import charset_to_byte_sequences

__all__ = ["DEAD", "UNREACHABLE", "TokenIndex", "TokenTrie"]

DEAD = 0
"""The configuration id of a rejected prefix (no stack can continue, not complete)."""


class _Never:
    """``[k] -> False`` for every state: a counter's virtual states read no byte."""

    def __getitem__(self, k: int) -> bool:
        return False


_NEVER = _Never()


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """The vocabulary's token bytes as a trie in preorder (node 0 is the root).

    Per node: ``byte`` (uint8, the last byte of its prefix), ``tok`` (int32, the token id
    ending there, or -1), ``depth`` (int32, its prefix length) and ``end`` (int32, one past
    the last node of its subtree: a rejected byte skips to ``end``). The children of a node
    follow it in byte order. ``dups`` pairs (canonical, duplicate) token ids with identical
    bytes; ``max_len`` is the longest token's length.
    """

    byte: np.ndarray
    tok: np.ndarray
    depth: np.ndarray
    end: np.ndarray
    dups: np.ndarray
    plain: PlainSplit | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.byte)

    @property
    def max_len(self) -> int:
        return int(self.depth.max()) if len(self.depth) else 0

    @classmethod
    def build(cls, info: TokenizerInfo, *, split_plain: bool = True) -> TokenTrie:
        """The trie of every token with bytes; with ``split_plain``, also the :class:`PlainSplit`."""
        toks = [(b, i) for i, b in enumerate(info.token_bytes) if b]
        plain = None
        if split_plain:
            words = (info.vocab_size + 31) // 32
            rest, only, other, text = [], [], [], []
            for b, i in toks:
                if not b.translate(None, _PLAIN_DELETE):  # nothing left once plain bytes are deleted
                    only.append((b, i))
                elif _is_text(b):
                    rest.append((b, i))
                    text.append((b, i))
                else:
                    rest.append((b, i))
                    other.append((b, i))
            ids = np.array([i for _, i in only], np.int64)
            lengths = np.array([len(b) for b, _ in only], np.int64)
            by_len = np.argsort(lengths, kind="stable")
            longest = int(lengths.max()) if len(only) else 0
            plain = PlainSplit(_packed(ids, words), cls._from_tokens(rest), cls._from_tokens(only), *_by_first_byte(only),
                               ids[by_len], np.searchsorted(lengths[by_len], np.arange(longest + 2)),
                               _packed(np.array([i for _, i in text], np.int64), words), cls._from_tokens(other),
                               cls._from_tokens(text), *_by_first_byte(text))
        return cls._from_tokens(toks, plain)

    @classmethod
    def _from_tokens(cls, toks: list[tuple[bytes, int]], plain: PlainSplit | None = None) -> TokenTrie:
        canonical: dict[bytes, int] = {}
        dups = []
        for b, i in toks:
            if b in canonical:
                dups.append((canonical[b], i))
            else:
                canonical[b] = i
        keys = sorted(canonical)
        lens = np.fromiter(map(len, keys), np.int64, len(keys))
        offsets = np.zeros(len(keys) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        byte, tok, depth, end = _core.build_trie(np.frombuffer(b"".join(keys), np.uint8), offsets,
                                                np.fromiter((canonical[k] for k in keys), np.int64, len(keys)))
        return cls(byte, tok, depth, end, np.array(dups, dtype=np.int64).reshape(-1, 2), plain)


def _packed(ids: np.ndarray, words: int) -> np.ndarray:
    """Token ids as a bitmask of ``words`` uint32 words."""
    mask = np.zeros(words, np.uint32)
    _core.set_bits(mask, ids)
    return mask


# every character from U+0080 up, as UTF-8 byte-range sequences (surrogates excluded)
_MULTIBYTE = charset_to_byte_sequences(CharSet(((0x80, 0xD7FF), (0xE000, 0x10FFFF))))


_NO_CHARS = -2  # _multibyte_target: no token holds a character from U+0080 up


def _by_first_byte(toks: list[tuple[bytes, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids sorted by first byte, and the offsets of each byte's run (257 entries)."""
    first = np.array([b[0] for b, _ in toks], np.int64)
    order = np.argsort(first, kind="stable")
    ids = np.array([i for _, i in toks], np.int64)[order]
    return ids, np.searchsorted(first[order], np.arange(257))


def _is_text(data: bytes) -> bool:
    """Whole UTF-8 characters, each plain (see PLAIN_BYTES) or from U+0080 up."""
    try:
        chars = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all((0x20 <= ord(c) < 0x7F and c not in '"\\') or ord(c) >= 0x80 for c in chars)


_TABLE_CELLS = 1 << 22  # entries of all frame tables of one index (16 MB): past it, rows group bytes in Python

_NO_MASK = np.zeros(0, np.uint32)  # _core.walk: no bits to set
_ALL_BYTES = np.zeros(0, np.uint8)  # _core.walk: every first byte
_ROOT = np.zeros(1, np.int64)  # _core.walk: start at the root node
_EMPTY = np.zeros(0, np.int64)
_MIN_LOOPING_FIRST_BYTES = 16  # fewer: the per-byte bookkeeping costs more than the walk saves

PLAIN_BYTES = np.array([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], np.uint8)
"""Printable ASCII but ``"`` and ``\\``: the bytes a JSON string body takes literally."""
_PLAIN_DELETE = bytes(PLAIN_BYTES.tolist())


@dataclass(frozen=True, eq=False)
class PlainSplit:
    """The vocabulary split at :data:`PLAIN_BYTES`, built once per tokenizer.

    Inside a JSON string body (and any state that loops on itself over every plain byte),
    every token made only of plain bytes is allowed and stays in that state, so its mask is
    ``tokens`` OR the walk of ``rest``, the trie of the other tokens (those with quotes,
    backslashes, control or non-ASCII bytes: 1,279 of SmolLM2's 49,152). Walking the whole
    trie for such a state was the costliest mask there is. A bounded string (``maxLength``,
    unrolled or counted) is a chain of states that every plain byte advances alike: there the
    plain tokens up to the length left are allowed (``by_len``). Where only some plain first bytes
    lead into such a loop (the first character of a property name, beside the declared
    names' own prefixes), the plain tokens are taken per first byte (``by_first``) and only
    the other first bytes' subtrees of ``only`` are walked. Where every character from U+0080
    up loops too (a JSON string body), the ``text`` tokens (28,608 of Llama-3's 128,256: the
    non-English words) are allowed in whole as well, and only ``other`` is walked.
    """

    tokens: np.ndarray  # uint32 bitmask of the tokens made only of plain bytes
    rest: TokenTrie
    only: TokenTrie  # the trie of the plain tokens, for the first bytes that need a walk
    by_first: np.ndarray  # plain token ids sorted by first byte; those of byte b are
    offsets: np.ndarray  # by_first[offsets[b]:offsets[b + 1]]
    by_len: np.ndarray  # plain token ids sorted by length; those of length <= n are
    len_offsets: np.ndarray  # by_len[:len_offsets[n + 1]] (n up to the longest plain token)
    text: np.ndarray  # uint32 bitmask: not plain, but whole UTF-8 characters, plain or from U+0080 up
    other: TokenTrie  # the trie of the tokens neither plain nor text
    text_trie: TokenTrie  # the trie of the text tokens, and their ids by first byte:
    text_by_first: np.ndarray  # text_by_first[text_offsets[b]:text_offsets[b + 1]]
    text_offsets: np.ndarray


class TokenIndex:
    """Lazily determinised configurations of a pushdown automaton, with memoised masks."""

    def __init__(self, pda: PushdownAutomaton, info: TokenizerInfo, trie: TokenTrie) -> None:
        self.info = info
        self.trie = trie
        self.words = (info.vocab_size + 31) // 32
        # reentrant: computing a mask computes rows, a budget bound computes completions
        self._lock = threading.RLock()
        self._pda = pda
        dists = completion_distances(pda)  # compile time: per rule state, fewest bytes to its end
        counted = [isinstance(r, CounterRule) for r in pda.rules]
        self._dist = [d if c else d.tolist() for d, c in zip(dists, counted)]
        # index -1 (no edge) -> UNREACHABLE; a counter reads no byte, so only that entry is read
        self._dist_np = [np.array([UNREACHABLE]) if c else np.append(d, UNREACHABLE) for d, c in zip(dists, counted)]
        self._stack_dist: list[int] = []
        self._config_dist: list[int] = []
        self._completions: dict[int, bytes | None] = {}
        self._completion_tokens: dict[int, tuple[int, ...] | None] = {}
        self._succ_bound: dict[int, int] = {}
        self._succ_costs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._trans = [r.trans for r in pda.rules]
        self._final = [r.final if c else r.final.tolist() for r, c in zip(pda.rules, counted)]
        self._calls = [r.calls for r in pda.rules]
        self._has_bytes = [_NEVER if c else (r.trans >= 0).any(axis=1).tolist() for r, c in zip(pda.rules, counted)]
        # masks are shared between configurations that differ only in counter values far
        # from the counters' bounds (see structgen.counters); None: no counter, no sharing
        self._counters = {i: r for i, r in enumerate(pda.rules) if isinstance(r, CounterRule)} or None
        self._canon_stack: dict[int, int] = {}
        self._mask_by_canon: dict[tuple, np.ndarray] = {}
        self._reach: dict[int, int] = {}
        self._single: dict[tuple[int, int], int] = {}
        self._plain_loop: dict[int, bool] = {}
        self._mb_targets: dict[int, int | None] = {}
        self._frame_tables: dict[tuple[int, int], np.ndarray] = {}
        self._mb_seqs: list[tuple[tuple[int, int, np.ndarray], ...]] | None = None
        self._table_cells = 0
        self._used: np.ndarray | None = None
        self._stack_ids: dict[tuple[int, int, int], int] = {}
        self._stacks: list[tuple[int, int, int]] = []
        self._config_ids: dict[tuple[tuple[int, ...], bool], int] = {}
        self._configs: list[tuple[tuple[int, ...], bool]] = []
        # byte rows live in a compact table; a configuration's slot is -1 until its row is
        # computed (most counter configurations never need one: see _step_one)
        self._rows = np.zeros((64, 256), np.int32)
        self._num_rows = 1  # row 0: all DEAD, the row of DEAD
        self._slot = np.full(64, -1, np.int32)
        self._accepting: list[bool] = []
        self._masks: dict[int, np.ndarray] = {}
        self._token_steps: dict[tuple[int, int], int] = {}
        self._closed: dict[tuple, int] = {}
        self._stop = np.array(info.stop_token_ids, dtype=np.int64)
        self._forced: dict[int, tuple[bytes, int]] = {}
        self._intern_config((), False)  # DEAD == 0
        self._slot[DEAD] = 0  # all-zero row: dead stays dead
        self.initial = self._close([(pda.root, 0, -1)])

    # -- configurations ---------------------------------------------------------------

    @property
    def num_configs(self) -> int:
        return len(self._configs)

    def _stack_id(self, frame: tuple[int, int, int]) -> int:
        sid = self._stack_ids.get(frame)
        if sid is None:
            r, s, p = frame
            # the parent frame is always interned first, so its distance is known
            self._stack_dist.append(self._dist[r][s] + (self._stack_dist[p] if p >= 0 else 0))
            sid = self._stack_ids[frame] = len(self._stacks)
            self._stacks.append(frame)
        return sid

    def _intern_config(self, stacks: tuple[int, ...], accepting: bool) -> int:
        key = (stacks, accepting)
        cid = self._config_ids.get(key)
        if cid is None:
            cid = len(self._configs)
            self._configs.append(key)
            self._accepting.append(accepting)
            self._config_dist.append(0 if accepting else min((self._stack_dist[i] for i in stacks), default=UNREACHABLE))
            if cid >= len(self._slot):
                self._slot = np.concatenate([self._slot, np.full(len(self._slot), -1, np.int32)])
            self._config_ids[key] = cid  # published last: a reader finding it sees a complete entry
        return cid

    def _close(self, raw: list[tuple[int, int, int]]) -> int:
        """Expand calls and returns until every stack top can read a byte (or has ended)."""
        seen: set[tuple[int, int, int]] = set()
        tops: set[int] = set()
        accepting = False
        work = list(raw)
        while work:
            frame = work.pop()
            if frame in seen:
                continue
            seen.add(frame)
            r, s, p = frame
            if self._has_bytes[r][s]:
                tops.add(self._stack_id(frame))
            if self._final[r][s]:
                if p < 0:
                    accepting = True
                else:
                    work.append(self._stacks[p])
            for callee, ret in self._calls[r][s]:
                work.append((callee, 0, self._stack_id((r, ret, p))))
        if self._counters is not None and len(tops) > 1:  # bounded stacks per configuration
            tops = prune_subsumed(tops, self._stacks, self._counters)
            check_config_stacks(len(tops))
        return self._intern_config(tuple(sorted(tops)), accepting)

    def _compute_row(self, cid: int) -> None:
        with self._lock:
            if self._slot[cid] < 0:  # another thread may have computed it meanwhile
                self._compute_row_locked(cid)

    def _compute_row_locked(self, cid: int) -> None:
        stacks = self._configs[cid][0]
        row = np.zeros(256, np.int32)
        if stacks:
            frames = [self._stacks[i] for i in stacks]
            if len(frames) == 1:
                r, s, p = frames[0]
                table = self._frame_table(r, p)
                if table is not None:
                    # the row is the DFA row mapped through "state t of this rule under this
                    # parent -> configuration", filled on demand (one gather; grouping the 256
                    # bytes in Python cost a third more per row)
                    targets = self._trans[r][s]
                    row = table[targets]
                    missing = row < 0
                    if missing.any():
                        for t in set(targets[missing].tolist()):
                            table[t] = self._close_memo((r, t, p),)
                        row = table[targets]
                else:  # past the tables' budget: group the bytes by target
                    groups: dict = {}
                    for b, t in enumerate(self._trans[r][s].tolist()):
                        if t >= 0:
                            groups.setdefault(t, []).append(b)
                    for t, bs in groups.items():
                        row[bs] = self._close_memo((r, t, p),)
            else:
                # group the 256 bytes by the tuple of per-frame targets (usually a handful of
                # groups, found natively), then close each group once
                gid, cols = _core.group_bytes(np.stack([self._trans[r][s] for r, s, _ in frames]))
                after = np.zeros(len(cols), np.int32)
                for g, targets in enumerate(cols.tolist()):
                    raw = tuple((r, t, p) for (r, _, p), t in zip(frames, targets) if t >= 0)
                    if raw:
                        after[g] = self._close_memo(*raw)
                row = after[gid]
        slot = self._num_rows  # after _close: the table may have been reallocated
        if slot >= len(self._rows):
            self._rows = np.concatenate([self._rows, np.zeros_like(self._rows)])
        self._rows[slot] = row
        self._num_rows += 1
        self._slot[cid] = slot  # published last: a reader finding it sees the row

    def _frame_table(self, r: int, p: int) -> np.ndarray | None:
        """Successor configuration per state of rule ``r`` under parent stack ``p`` (-1: not yet
        known; the last entry, read for a rejected byte, is DEAD); None past ``_TABLE_CELLS``."""
        table = self._frame_tables.get((r, p))
        if table is None and self._table_cells + len(self._trans[r]) < _TABLE_CELLS:
            table = self._frame_tables[(r, p)] = np.full(len(self._trans[r]) + 1, -1, np.int32)
            table[-1] = DEAD
            self._table_cells += len(table)
        return table

    def _row(self, cid: int) -> np.ndarray:
        """The byte row of ``cid`` (256 successor configurations), computed if needed."""
        if self._slot[cid] < 0:
            self._compute_row(cid)
        return self._rows[self._slot[cid]]

    def _close_memo(self, *raw: tuple[int, int, int]) -> int:
        # the same raw frames always close to the same configuration
        cid = self._closed.get(raw)
        if cid is None:
            cid = self._closed[raw] = self._close(list(raw))
        return cid

    def _ensure_rows(self, cids: np.ndarray) -> None:
        missing = cids[self._slot[cids] < 0]
        for cid in np.unique(missing).tolist():
            if self._slot[cid] < 0:
                self._compute_row(cid)

    # -- stepping ---------------------------------------------------------------------

    def is_accepting(self, cid: int) -> bool:
        return self._accepting[cid]

    def step_bytes(self, cid: int, data: bytes) -> int:
        """The configuration after ``data`` (``DEAD`` if rejected)."""
        for b in data:
            slot = self._slot[cid]
            if slot >= 0:
                cid = int(self._rows[slot, b])
            elif self._counters is not None:
                # each counter value is a configuration of its own: computing whole rows
                # would create every byte's successor (nine per character of a string)
                cid = self._step_one(cid, b)
            else:
                cid = int(self._row(cid)[b])
            if cid == DEAD:
                return DEAD
        return cid

    def _step_one(self, cid: int, b: int) -> int:
        """The configuration after byte ``b`` alone, without computing the whole row."""
        key = (cid, b)
        nxt = self._single.get(key)
        if nxt is None:
            with self._lock:
                raw = []
                for sid in self._configs[cid][0]:
                    r, s, p = self._stacks[sid]
                    t = int(self._trans[r][s][b])
                    if t >= 0:
                        raw.append((r, t, p))
                nxt = self._close_memo(*raw) if raw else DEAD
                self._single[key] = nxt
        return nxt

    def step_token(self, cid: int, token_id: int) -> int:
        """The configuration after a non-stop token (``DEAD`` if it is not allowed)."""
        key = (cid, token_id)
        nxt = self._token_steps.get(key)
        if nxt is None:
            tb = self.info.token_bytes
            data = tb[token_id] if 0 <= token_id < len(tb) else None
            nxt = DEAD if not data else self.step_bytes(cid, data)
            self._token_steps[key] = nxt
        return nxt

    # -- masks ------------------------------------------------------------------------

    def mask(self, cid: int) -> np.ndarray:
        """Packed allowed-token bitmask of a configuration: int32 ``(ceil(vocab_size/32),)``.

        Bit ``i % 32`` of word ``i // 32`` is set when token ``i`` may come next. Stop
        tokens are set exactly when the configuration is complete. Do not modify the result.
        """
        m = self._masks.get(cid)
        if m is None:
            with self._lock:
                m = self._masks.get(cid)
                if m is None:
                    if self._counters is None:
                        m = self._compute_mask(cid)
                        m.setflags(write=False)
                        m = share_mask(m)  # equal masks stored once (structgen.mask_pool)
                    else:
                        key = self._canonical_config(cid)
                        m = self._mask_by_canon.get(key)
                        if m is None:
                            m = self._compute_mask(cid)
                            m.setflags(write=False)
                            m = self._mask_by_canon[key] = share_mask(m)
                    self._masks[cid] = m
        return m

    def mask_if_ready(self, cid: int) -> np.ndarray | None:
        """The memoised mask of ``cid``, or ``None`` when it is not computed yet. Never
        computes and takes no lock: batch fills read their memo hits with it."""
        return self._masks.get(cid)

    def _canonical_config(self, cid: int) -> tuple:
        """The configuration with every counter replaced by its class representative: equal
        for configurations that allow the same tokens (see :func:`canonical_count`)."""
        stacks, accepting = self._configs[cid]
        return tuple(sorted({self._canonical_stack(sid) for sid in stacks})), accepting

    def _canonical_stack(self, sid: int) -> int:
        out = self._canon_stack.get(sid)
        if out is None:
            chain = []  # iterative: recursive grammars build deep stacks
            while sid >= 0 and sid not in self._canon_stack:
                chain.append(sid)
                sid = self._stacks[sid][2]
            below = self._canon_stack[sid] if sid >= 0 else -1
            for s in reversed(chain):
                r, k, _ = self._stacks[s]
                counter = self._counters.get(r)
                if counter is not None:
                    k = canonical_count(k, counter.lo, counter.hi, self._counter_reach(counter))
                below = self._canon_stack[s] = self._stack_id((r, k, below))
            out = below
        return out

    def _counter_reach(self, counter: CounterRule) -> int:
        """How many items one token can complete at most: its bytes over the item's shortest match."""
        reach = self._reach.get(counter.body)
        if reach is None:
            longest = self.trie.max_len
            shortest = max(1, self._dist[counter.body][0])
            reach = self._reach[counter.body] = longest // shortest + 1
        return reach

    def allowed_tokens(self, cid: int) -> np.ndarray:
        """Boolean ``(vocab_size,)`` array of allowed tokens (slow path: unpacks the mask)."""
        bits = np.unpackbits(self.mask(cid).view(np.uint8), bitorder="little")
        return bits[: self.info.vocab_size].astype(bool)

    def _compute_mask(self, cid: int) -> np.ndarray:
        mask = np.zeros(self.words, np.uint32)
        plain = self.trie.plain
        walks: list[tuple[TokenTrie, np.ndarray | None]] = [(self.trie, None)]
        if plain is not None and cid != DEAD:
            walks = self._split_walks(cid, plain, mask)
        for trie, first_bytes in walks:
            self._walk(cid, trie, first_bytes, mask)
        _core.copy_dups(mask, self.trie.dups)
        if self._accepting[cid]:
            _core.set_bits(mask, self._stop)
        return mask.view("<i4")

    def _split_walks(self, cid: int, plain: PlainSplit, mask: np.ndarray) -> list[tuple[TokenTrie, np.ndarray | None]]:
        """Set in ``mask`` the tokens a string body decides in whole (see
        :class:`PlainSplit`); return the ``(trie, first bytes)`` walks still needed."""
        into = self._row(cid)[PLAIN_BYTES]
        longest = len(plain.len_offsets) - 2
        room = self._plain_room(cid, into, longest)
        if room is not None:  # every plain byte acts alike, step after step
            if room < longest:  # a bounded string: the plain tokens that fit
                _core.set_bits(mask, plain.by_len[:plain.len_offsets[room + 1]])
                return [(plain.rest, None)]
            mask |= plain.tokens
            if self._text_loop(self._char_target(cid)):
                mask |= plain.text
                return [(plain.other, None)]
            return [(plain.rest, None)]
        good = np.fromiter((self._loops_plain(int(x)) for x in into.tolist()), bool, len(into))
        if good.sum() < _MIN_LOOPING_FIRST_BYTES:
            return [(self.trie, None)]
        # some first bytes lead into a string body (the first character of a property name
        # beside the declared names' own prefixes): take their tokens per first byte
        good_bytes = PLAIN_BYTES[good].tolist()
        flags = np.zeros(256, np.uint8)
        flags[good_bytes] = 1
        _core.set_runs(mask, plain.by_first, plain.offsets, flags)
        walk_plain = np.zeros(256, np.uint8)
        walk_plain[PLAIN_BYTES[~good & (into != DEAD)]] = 1
        walks = [(plain.only, walk_plain)]
        if all(self._text_loop(t) for t in set(into[good].tolist())):
            other_first = np.ones(256, np.uint8)
            whole = good_bytes
            multi = self._multibyte_target(cid)
            if multi == _NO_CHARS or self._text_loop(multi):  # non-ASCII first characters too
                whole = whole + list(range(0x80, 0x100))
            other_first[whole] = 0
            _core.set_runs(mask, plain.text_by_first, plain.text_offsets, 1 - other_first)
            walks += [(plain.other, None), (plain.text_trie, other_first)]
        else:
            walks.append((plain.rest, None))
        return walks

    def _text_loop(self, cid: int | None) -> bool:
        """Whether every plain byte and whole character from U+0080 up keeps ``cid`` in place."""
        return cid is not None and cid != DEAD and self._char_target(cid) == cid

    def _plain_room(self, cid: int, into: np.ndarray, longest: int) -> int | None:
        """How many plain bytes may follow ``cid`` when every plain byte acts alike at each
        step (a string body, bounded or not): plain-only tokens of at most that length are
        allowed, longer ones are not (``longest``: no plain token is longer). ``None`` when
        some step tells plain bytes apart."""
        cur, n = cid, 0
        while n < longest:
            nxt = int(into[0])
            if not (into == nxt).all():
                return None
            if nxt == DEAD:
                return n
            if nxt == cur:  # a loop: any length
                return longest
            cur, n = nxt, n + 1
            into = self._row(cur)[PLAIN_BYTES]
        return longest

    def _char_target(self, cid: int) -> int | None:
        """The one configuration that every plain byte and every whole UTF-8 character from
        U+0080 up leads to from ``cid``, or None."""
        into = self._row(cid)[PLAIN_BYTES]
        target = int(into[0])
        if target == DEAD or not (into == target).all():
            return None
        multi = self._multibyte_target(cid)
        return target if multi == target or multi == _NO_CHARS else None

    def _multibyte_target(self, cid: int) -> int | None:
        """The one configuration every whole character from U+0080 up (that some token can
        hold) leads to from ``cid``; ``None`` when they lead apart or to ``DEAD``;
        ``_NO_CHARS`` when no token holds any such character (memoised)."""
        if cid in self._mb_targets:
            return self._mb_targets[cid]
        if self._mb_seqs is None:
            used = self._bytes_used()
            # the byte-range sequences some token can hold (no token holds the others: they
            # cannot come next), with each range's usable bytes
            self._mb_seqs = [tuple((lo, hi + 1, used[lo:hi + 1]) for lo, hi in seq) for seq in _MULTIBYTE
                             if all(used[lo:hi + 1].any() for lo, hi in seq)]
        found: set[int] = set()
        for seq in self._mb_seqs:
            states = {cid}
            for lo, end, usable in seq:
                after: set[int] = set()
                for c in states:
                    targets = self._row(c)[lo:end][usable]
                    first = int(targets[0])
                    if (targets == first).all():  # the usual case: one target, no sort
                        after.add(first)
                    else:
                        after.update(np.unique(targets).tolist())
                states = after
            found |= states
            if len(found) > 1 or DEAD in found:
                break
        if not found:
            target: int | None = _NO_CHARS
        else:
            target = found.pop() if len(found) == 1 and DEAD not in found else None
        self._mb_targets[cid] = target
        return target

    def _bytes_used(self) -> np.ndarray:
        """Bool per byte value: some token contains it (bytes no token has cannot come next)."""
        if self._used is None:
            used = np.zeros(256, bool)
            used[self.trie.byte[1:]] = True
            self._used = used
        return self._used

    def _loops_plain(self, cid: int) -> bool:
        """Whether ``cid`` goes back to itself on every plain byte (memoised)."""
        hit = self._plain_loop.get(cid)
        if hit is None:
            hit = self._plain_loop[cid] = cid != DEAD and bool((self._row(cid)[PLAIN_BYTES] == cid).all())
        return hit

    def _walk(self, cid: int, trie: TokenTrie, first_bytes: np.ndarray | None = None,
              mask: np.ndarray | None = None, *, collect: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Walk ``trie`` from ``cid`` in the native core: set the bit of every allowed non-stop
        token in ``mask`` (canonical ids: duplicates are not included) and, with ``collect``,
        return ``(token ids, configurations after them)``. ``first_bytes`` (uint8 per byte)
        limits the walk to tokens starting with the flagged bytes. Call under the lock.

        The core stops below configurations whose byte row is not computed yet and reports
        them; their rows are computed here (closure and interning are Python's) and the walk
        resumes from those nodes, one round per depth at which new configurations appear."""
        toks: list[np.ndarray] = []
        cfgs: list[np.ndarray] = []
        out = _NO_MASK if mask is None else mask
        fb = _ALL_BYTES if first_bytes is None else first_bytes
        if cid != DEAD and trie.num_nodes > 1:
            self._row(cid)
            nodes, starts = _ROOT, np.array([cid], np.int64)
            while len(nodes):
                nodes, starts, t, c = _core.walk(trie.byte, trie.tok, trie.depth, trie.end, self._rows, self._slot,
                                                 nodes, starts, fb, out, collect)
                if collect and len(t):
                    toks.append(t)
                    cfgs.append(c)
                self._ensure_rows(starts)
        if not toks:
            return _EMPTY, _EMPTY
        return np.concatenate(toks), np.concatenate(cfgs)

    def precompute(self, *, limit: int = 100_000) -> int:
        """Eagerly explore configurations reachable by bytes and compute their masks.

        Finite for grammars without recursion; stops after ``limit`` configurations
        otherwise. Returns the number of configurations with a memoised mask.
        """
        todo = [self.initial]
        seen = {self.initial}
        while todo and len(seen) < limit:
            cid = todo.pop()
            self.mask(cid)
            for nxt in set(self._row(cid).tolist()) - seen - {DEAD}:
                seen.add(nxt)
                todo.append(nxt)
        return len(self._masks)

    # -- forced continuations ---------------------------------------------------------

    def forced_bytes(self, cid: int, *, limit: int = 4096) -> tuple[bytes, int]:
        """The bytes the grammar forces from ``cid`` on, and the configuration after them.

        A configuration forces a byte when exactly one byte can follow and it is not
        complete (a stop token is the other choice there). The run ends at the first
        configuration with a choice, or after ``limit`` bytes (a safety net: a grammar
        cannot force an infinite run, since it must be able to end). Memoised per
        configuration: fast-forward decoding asks once per decoding step.
        """
        hit = self._forced.get(cid)
        if hit is None:
            run = bytearray()
            cur = cid
            while cur != DEAD and not self._accepting[cur] and len(run) < limit:
                row = self._row(cur)
                live = np.flatnonzero(row)
                if len(live) != 1:
                    break
                run.append(int(live[0]))
                cur = int(row[live[0]])
            hit = self._forced[cid] = (bytes(run), cur)
        return hit

    def next_configs(self, cid: int) -> np.ndarray:
        """The 256 successor configurations of ``cid``, one per byte (``DEAD``: rejected).
        Read-only; used by searches that need more than the shortest completion."""
        row = self._row(cid).copy()
        row.setflags(write=False)
        return row

    def next_bytes(self, cid: int) -> np.ndarray:
        """Sorted byte values that may follow configuration ``cid`` (empty if none)."""
        return np.flatnonzero(self._row(cid))

    # -- shortest completions and token budgets ------------------------------------------

    def completion_length(self, cid: int) -> int | None:
        """Fewest bytes that complete the text from configuration ``cid`` (0 when it is
        complete already; ``None`` for ``DEAD``). Known in O(1): distances are computed at
        compile time and summed along each stack when the configuration is first seen."""
        d = self._config_dist[cid]
        return None if d >= UNREACHABLE else d

    def shortest_completion(self, cid: int) -> bytes | None:
        """A shortest text (bytes) that completes the output from ``cid``; ``None`` for ``DEAD``.

        The cheapest stack of the configuration is completed frame by frame along strictly
        decreasing distances, printable ASCII preferred among equally short choices.
        """
        if cid in self._completions:
            return self._completions[cid]
        with self._lock:
            out = self._build_completion(cid)
            self._completions[cid] = out
        return out

    def completion_tokens(self, cid: int) -> tuple[int, ...] | None:
        """Token ids spelling :meth:`shortest_completion` in the fewest tokens (a shortest
        segmentation of that text by the vocabulary): a completion within ``len(result)``
        tokens always exists, so this is an upper bound on the tokens needed. ``None`` when
        the vocabulary cannot spell the text (or ``cid`` is ``DEAD``)."""
        if cid in self._completion_tokens:
            return self._completion_tokens[cid]
        text = self.shortest_completion(cid)
        toks = None if text is None else _segment(text, _token_table(self.info))
        with self._lock:
            self._completion_tokens[cid] = toks
        return toks

    def tokens_exceeding(self, cid: int, limit: int) -> np.ndarray:
        """Allowed non-stop tokens after which the output cannot be completed within ``limit``
        more tokens (as far as :meth:`completion_tokens` can tell): sorted int64 token ids.

        Budget-aware decoding masks these. When every byte the grammar can use is also a
        one-byte token, a completion of ``n`` bytes needs at most ``n`` tokens, so a
        configuration whose successors all complete within ``limit`` bytes needs no token
        segmentation at all (the common case while the budget is not tight).
        """
        if limit < 0:
            raise ValueError("limit must be >= 0")
        bound = self._succ_bound.get(cid)
        if bound is None:
            with self._lock:
                succ = self._walk(cid, self.trie, collect=True)[1]
                dist = np.array(self._config_dist, dtype=np.int64)[succ] if len(succ) else np.zeros(1, np.int64)
                bound = int(dist.max()) if _singles_cover_alphabet(self.info) else UNREACHABLE
                self._succ_bound[cid] = bound
        if bound <= limit:
            return np.zeros(0, np.int64)
        costs = self._succ_costs.get(cid)
        if costs is None:
            with self._lock:
                toks, succ = self._walk(cid, self.trie, collect=True)
                uniq, inv = np.unique(succ, return_inverse=True)
                per = np.array([_length(self.completion_tokens(int(u))) for u in uniq.tolist()], dtype=np.int64)
                cost = per[inv.reshape(-1)]
                if len(self.trie.dups):  # tokens with the bytes of a canonical one share its cost
                    where = {t: k for k, t in enumerate(toks.tolist())}
                    extra = [(dup, where[c]) for c, dup in self.trie.dups.tolist() if c in where]
                    if extra:
                        toks = np.concatenate([toks, np.array([d for d, _ in extra], np.int64)])
                        cost = np.concatenate([cost, cost[[k for _, k in extra]]])
                order = np.argsort(toks)
                costs = self._succ_costs[cid] = (toks[order], cost[order])
        toks, cost = costs
        return toks[cost > limit]

    def _build_completion(self, cid: int) -> bytes | None:
        tops = self._configs[cid][0]
        if cid == DEAD or self._config_dist[cid] >= UNREACHABLE:
            return None
        if self._accepting[cid]:
            return b""
        sid = min(tops, key=self._stack_dist.__getitem__)
        out = bytearray()
        while sid != -1:  # the top frame, then each return state below it
            r, s, sid = self._stacks[sid]
            out += self._complete_rule(r, s)
        text = bytes(out)
        end = self.step_bytes(cid, text)
        if end == DEAD or not self._accepting[end]:  # pragma: no cover - distances are exact
            raise RuntimeError(f"internal: shortest completion {text!r} does not complete configuration {cid}")
        return text

    def _complete_rule(self, r: int, s: int) -> bytes:
        """Bytes along a shortest path from state ``s`` of rule ``r`` to the rule's end
        (iterative: calls are pushed, not recursed into)."""
        rules = self._pda.rules
        out = bytearray()
        work = [(r, s)]
        while work:
            r, s = work.pop()
            d = self._dist[r][s]
            while d > 0:
                row = rules[r].trans[s]
                ok = self._dist_np[r][row] == d - 1  # row == -1 reads the UNREACHABLE sentinel
                if ok.any():
                    b = int(np.flatnonzero(ok)[np.argmin(_BYTE_RANK[ok])])
                    out.append(b)
                    s, d = int(row[b]), d - 1
                    continue
                for callee, ret in rules[r].calls[s]:
                    if self._dist[callee][0] + self._dist[r][ret] == d:
                        work.append((r, ret))
                        work.append((callee, 0))
                        break
                else:  # pragma: no cover - distances are consistent by construction
                    raise RuntimeError("internal: inconsistent completion distances")
                break
        return bytes(out)


# printable ASCII first, then the rest: completions read naturally ("0", "a", "}")
_BYTE_RANK = np.array([b - 0x20 if 0x20 <= b < 0x7F else 0x100 + b for b in range(256)], dtype=np.int64)

_TABLES: "weakref.WeakKeyDictionary[TokenizerInfo, tuple[dict[bytes, int], int]]" = weakref.WeakKeyDictionary()
_SINGLES: "weakref.WeakKeyDictionary[TokenizerInfo, bool]" = weakref.WeakKeyDictionary()


def _token_table(info: TokenizerInfo) -> tuple[dict[bytes, int], int]:
    """Bytes -> a token id spelling them (lowest id), and the longest token length."""
    table = _TABLES.get(info)
    if table is None:
        spell: dict[bytes, int] = {}
        for i, b in enumerate(info.token_bytes):
            if b and b not in spell:
                spell[b] = i
        table = _TABLES[info] = (spell, max(map(len, spell), default=0))
    return table


def _singles_cover_alphabet(info: TokenizerInfo) -> bool:
    """Every byte some token contains is also a one-byte token (byte-level BPE, byte fallback)."""
    ok = _SINGLES.get(info)
    if ok is None:
        spell, _ = _token_table(info)
        used = set().union(*(set(b) for b in spell))
        ok = _SINGLES[info] = all(bytes([b]) in spell for b in used)
    return ok


def _segment(text: bytes, table: tuple[dict[bytes, int], int]) -> tuple[int, ...] | None:
    """A fewest-token spelling of ``text`` by the vocabulary (dynamic programming from the end)."""
    spell, longest = table
    n = len(text)
    # best[i]: (tokens needed for text[i:], first token id, its length), None if unspellable
    best: list[tuple[int, int, int] | None] = [None] * n + [(0, -1, 0)]
    for i in range(n - 1, -1, -1):
        for k in range(1, min(longest, n - i) + 1):
            tok = spell.get(text[i:i + k])
            rest = best[i + k]
            if tok is not None and rest is not None and (best[i] is None or rest[0] + 1 < best[i][0]):
                best[i] = (rest[0] + 1, tok, k)
    out: list[int] = []
    i = 0
    while i < n:
        step = best[i]
        if step is None:
            return None
        out.append(step[1])
        i += step[2]
    return tuple(out)


def _length(toks: tuple[int, ...] | None) -> int:
    return UNREACHABLE if toks is None else len(toks)
