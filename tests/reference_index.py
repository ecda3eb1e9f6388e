"""The reference for the token index (test oracle): the configuration engine in Python.

Configurations (sets of parser stacks) interned and determinised lazily, byte rows computed
by closure over calls and returns, counters' virtual states with masks shared by canonical
configuration, stack pruning, the plain-byte shortcuts of a string body, and the walk of the
vocabulary trie (``structgen._core.walk``) that stops below configurations without a row,
computes them here, and resumes. ``structgen.index.token_index.TokenIndex`` does all of this
natively; tests compare its masks and successor configurations with this one, bit for bit.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np

from structgen import _core
from structgen.index.automaton import UNREACHABLE, PushdownAutomaton
from structgen.index.counters import CounterRule, check_config_stacks
from structgen.index.token_index import _MULTIBYTE, DEAD, PLAIN_BYTES, PlainSplit, TokenTrie
from structgen.index.tokenizer import TokenizerInfo

from .reference_automaton import completion_distances

__all__ = ["ReferenceIndex", "canonical_count", "prune_subsumed"]


class _Never:
    """``[k] -> False`` for every state: a counter's virtual states read no byte."""

    def __getitem__(self, k: int) -> bool:
        return False


_NEVER = _Never()
_NO_CHARS = -2  # _multibyte_target: no token holds a character from U+0080 up
_TABLE_CELLS = 1 << 22  # entries of all frame tables of one index: past it, rows group bytes
_NO_MASK = np.zeros(0, np.uint32)  # _core.walk: no bits to set
_ALL_BYTES = np.zeros(0, np.uint8)  # _core.walk: every first byte
_ROOT = np.zeros(1, np.int64)  # _core.walk: start at the root node
_EMPTY = np.zeros(0, np.int64)
_MIN_LOOPING_FIRST_BYTES = 16


def canonical_count(k: int, lo: int, hi: int | None, reach: int) -> int:
    """A representative of counter value ``k``: the same for every value from which at most
    ``reach`` more items cannot tell ``lo`` or ``hi`` apart (exact near either bound)."""
    if hi is not None and hi - k <= reach:
        return k
    if k >= lo:
        return lo  # past lo and far from hi (or unbounded: saturated at lo already)
    if lo - k <= reach:
        return k
    return lo - reach - 1


_PRUNE_DEPTH = 8  # frames looked through above a counter: deeper stacks are left unpruned


def prune_subsumed(tops: set[int], stacks: list[tuple[int, int, int]], counters: Mapping[int, CounterRule]) -> set[int]:
    """``tops`` without the stacks another one of them subsumes (the same language, or less).

    Two stacks that differ only in the value of one *unbounded* counter frame (same frames
    above it, same parent below): from count ``k`` the rest is ``item{max(lo - k, 0),}``
    then the parent, which grows with ``k``; so the one with the larger count accepts every
    continuation the other does, and the other can go. Exact: the configuration accepts the
    same strings and allows the same tokens. Runs of ``b{5000,}`` started at each of 5,000
    positions collapse to one stack instead of 5,000.

    ``stacks`` maps a stack id to its frame ``(rule, state, parent stack id or -1)``.
    """
    best: dict[tuple, tuple[int, int]] = {}
    keep: set[int] = set()
    for sid in tops:
        above: list[tuple[int, int]] = []
        r, s, p = stacks[sid]
        while True:
            if p < 0 or len(above) >= _PRUNE_DEPTH:
                keep.add(sid)
                break
            pr, ps, pp = stacks[p]
            c = counters.get(pr)
            above.append((r, s))
            if c is not None and c.hi is None:
                key = (tuple(above), pr, pp)
                prev = best.get(key)
                if prev is None or ps > prev[0]:
                    if prev is not None:
                        keep.discard(prev[1])
                    best[key] = (ps, sid)
                    keep.add(sid)
                break
            r, s, p = pr, ps, pp
    return keep


class ReferenceIndex:
    """The pure-Python configuration engine (rows, closure, counters, plain splits, masks)."""

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
        # from the counters' bounds (see structgen.index.counters); None: no counter, no sharing
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
                    else:
                        key = self._canonical_config(cid)
                        m = self._mask_by_canon.get(key)
                        if m is None:
                            m = self._mask_by_canon[key] = self._compute_mask(cid)
                            m.setflags(write=False)
                    self._masks[cid] = m
        return m

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
