"""(automaton, tokenizer) → allowed-token bitsets, one per parser configuration.

Two pieces:

* :class:`TokenTrie` — per tokenizer, built once: the vocabulary as a byte trie stored level
  by level in numpy arrays (parent, byte, children range, token ending here). Walking it
  breadth-first lets numpy advance every token prefix of one length in a single gather.
* :class:`TokenIndex` — per compiled grammar: the pushdown automaton's *configurations*
  (the set of possible parser stacks after the text so far) interned as small integers and
  determinised lazily. For each configuration we memoise its byte-transition row (256
  successor configurations) and, on first use, its allowed-token bitmask. A configuration
  is exactly what decides the mask, so after warm-up a decoding step is one dict lookup and
  one row copy. Grammars without recursion have finitely many configurations (the DFA
  states); they can be precomputed eagerly with :meth:`TokenIndex.precompute`.

The memo tables only grow and never change an answer once given, so sharing one index
between matchers of the same compiled grammar is safe.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .automaton import PushdownAutomaton
from .tokenizer import TokenizerInfo

__all__ = ["TokenTrie", "TokenIndex", "DEAD"]

DEAD = 0
"""The configuration id of a rejected prefix (no stack can continue, not complete)."""


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """The vocabulary's token bytes as a level-ordered trie (level 0 is the root).

    For level ``d`` (1-based), arrays of the nodes at that depth, sorted so that the children
    of one parent are contiguous: ``byte[d]`` (uint8), ``tok_at[d]`` (a token id ending at
    the node, or -1); for level ``d`` (0-based) ``child_start[d]`` and ``child_count[d]`` give
    each node's children in level ``d + 1``. ``dups`` pairs (canonical, duplicate) token ids
    with identical bytes.
    """

    byte: tuple[np.ndarray, ...]
    tok_at: tuple[np.ndarray, ...]
    child_start: tuple[np.ndarray, ...]
    child_count: tuple[np.ndarray, ...]
    dups: np.ndarray
    num_nodes: int

    @classmethod
    def build(cls, info: TokenizerInfo) -> "TokenTrie":
        toks = [(b, i) for i, b in enumerate(info.token_bytes) if b]
        max_len = max((len(b) for b, _ in toks), default=0)
        canonical: dict[bytes, int] = {}
        dups = []
        for b, i in toks:
            if b in canonical:
                dups.append((canonical[b], i))
            else:
                canonical[b] = i
        byte_levels = [np.zeros(1, np.uint8)]
        tok_levels = [np.full(1, -1, np.int64)]
        starts, counts = [], []
        prev_index = {b"": 0}
        remaining = list(canonical.items())
        for d in range(1, max_len + 1):
            remaining = [(b, i) for b, i in remaining if len(b) >= d]
            prefixes = sorted({b[:d] for b, _ in remaining})
            index = {p: k for k, p in enumerate(prefixes)}
            parent = np.fromiter((prev_index[p[:-1]] for p in prefixes), np.int64, len(prefixes))
            byte_levels.append(np.fromiter((p[-1] for p in prefixes), np.uint8, len(prefixes)))
            tok_at = np.full(len(prefixes), -1, np.int64)
            for b, i in remaining:
                if len(b) == d:
                    tok_at[index[b]] = i
            tok_levels.append(tok_at)
            n_prev = len(prev_index)
            counts.append(np.bincount(parent, minlength=n_prev).astype(np.int64))
            starts.append(np.searchsorted(parent, np.arange(n_prev)).astype(np.int64))
            prev_index = index
        counts.append(np.zeros(len(prev_index), np.int64))
        starts.append(np.zeros(len(prev_index), np.int64))
        return cls(
            tuple(byte_levels),
            tuple(tok_levels),
            tuple(starts),
            tuple(counts),
            np.array(dups, dtype=np.int64).reshape(-1, 2),
            int(sum(len(x) for x in byte_levels)),
        )


class TokenIndex:
    """Lazily determinised configurations of a pushdown automaton, with memoised masks."""

    def __init__(self, pda: PushdownAutomaton, info: TokenizerInfo, trie: TokenTrie) -> None:
        self.info = info
        self.trie = trie
        self.words = (info.vocab_size + 31) // 32
        self._trans = [r.trans for r in pda.rules]
        self._final = [r.final.tolist() for r in pda.rules]
        self._calls = [r.calls for r in pda.rules]
        self._has_bytes = [(r.trans >= 0).any(axis=1).tolist() for r in pda.rules]
        self._stack_ids: dict[tuple[int, int, int], int] = {}
        self._stacks: list[tuple[int, int, int]] = []
        self._config_ids: dict[tuple[tuple[int, ...], bool], int] = {}
        self._configs: list[tuple[tuple[int, ...], bool]] = []
        self._rows = np.zeros((64, 256), np.int32)
        self._has_row = np.zeros(64, bool)
        self._accepting: list[bool] = []
        self._masks: dict[int, np.ndarray] = {}
        self._token_steps: dict[tuple[int, int], int] = {}
        self._stop = np.array(info.stop_token_ids, dtype=np.int64)
        self._forced: dict[int, tuple[bytes, int]] = {}
        self._intern_config((), False)  # DEAD == 0
        self._has_row[DEAD] = True  # all-zero row: dead stays dead
        self.initial = self._close([(pda.root, 0, -1)])

    # -- configurations ---------------------------------------------------------------

    @property
    def num_configs(self) -> int:
        return len(self._configs)

    def _stack_id(self, frame: tuple[int, int, int]) -> int:
        sid = self._stack_ids.get(frame)
        if sid is None:
            sid = self._stack_ids[frame] = len(self._stacks)
            self._stacks.append(frame)
        return sid

    def _intern_config(self, stacks: tuple[int, ...], accepting: bool) -> int:
        key = (stacks, accepting)
        cid = self._config_ids.get(key)
        if cid is None:
            cid = self._config_ids[key] = len(self._configs)
            self._configs.append(key)
            self._accepting.append(accepting)
            if cid >= len(self._has_row):
                grow = len(self._has_row)
                self._rows = np.concatenate([self._rows, np.zeros((grow, 256), np.int32)])
                self._has_row = np.concatenate([self._has_row, np.zeros(grow, bool)])
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
        return self._intern_config(tuple(sorted(tops)), accepting)

    def _compute_row(self, cid: int) -> None:
        stacks = self._configs[cid][0]
        if stacks:
            frames = [self._stacks[i] for i in stacks]
            cols = np.stack([self._trans[r][s] for r, s, _ in frames])  # (k, 256)
            uniq, inv = np.unique(cols.T, axis=0, return_inverse=True)
            vals = np.empty(len(uniq), np.int32)
            for j, targets in enumerate(uniq.tolist()):
                raw = [(r, t, p) for (r, _, p), t in zip(frames, targets) if t >= 0]
                vals[j] = self._close(raw) if raw else DEAD
            row = vals[inv.reshape(-1)]
        else:
            row = np.zeros(256, np.int32)
        self._rows[cid] = row  # after _close: the table may have been reallocated
        self._has_row[cid] = True

    def _ensure_rows(self, cids: np.ndarray) -> None:
        missing = cids[~self._has_row[cids]]
        for cid in np.unique(missing).tolist():
            if not self._has_row[cid]:
                self._compute_row(cid)

    # -- stepping ---------------------------------------------------------------------

    def is_accepting(self, cid: int) -> bool:
        return self._accepting[cid]

    def step_bytes(self, cid: int, data: bytes) -> int:
        """The configuration after ``data`` (``DEAD`` if rejected)."""
        for b in data:
            if not self._has_row[cid]:
                self._compute_row(cid)
            cid = int(self._rows[cid, b])
            if cid == DEAD:
                return DEAD
        return cid

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
            m = self._masks[cid] = self._compute_mask(cid)
            m.setflags(write=False)
        return m

    def allowed_tokens(self, cid: int) -> np.ndarray:
        """Boolean ``(vocab_size,)`` array of allowed tokens (slow path: unpacks the mask)."""
        bits = np.unpackbits(self.mask(cid).view(np.uint8), bitorder="little")
        return bits[: self.info.vocab_size].astype(bool)

    def _compute_mask(self, cid: int) -> np.ndarray:
        trie = self.trie
        allowed = np.zeros(self.words * 32, dtype=bool)
        alive = np.zeros(1, np.int64)
        cfgs = np.array([cid], np.int64)
        if cid != DEAD:
            for d in range(1, len(trie.byte)):
                cnt = trie.child_count[d - 1][alive]
                total = int(cnt.sum())
                if total == 0:
                    break
                first = trie.child_start[d - 1][alive]
                ends = np.cumsum(cnt)
                children = np.arange(total) + np.repeat(first - (ends - cnt), cnt)
                parents = np.repeat(cfgs, cnt)
                self._ensure_rows(parents)
                nxt = self._rows[parents, trie.byte[d][children]]
                keep = nxt != DEAD
                alive = children[keep]
                cfgs = nxt[keep].astype(np.int64)
                toks = trie.tok_at[d][alive]
                allowed[toks[toks >= 0]] = True
                if len(alive) == 0:
                    break
            if len(trie.dups):
                allowed[trie.dups[:, 1]] = allowed[trie.dups[:, 0]]
        if self._accepting[cid]:
            allowed[self._stop] = True
        return np.packbits(allowed, bitorder="little").view("<i4").copy()

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
            if not self._has_row[cid]:
                self._compute_row(cid)
            for nxt in set(self._rows[cid].tolist()) - seen - {DEAD}:
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
                if not self._has_row[cur]:
                    self._compute_row(cur)
                live = np.flatnonzero(self._rows[cur])
                if len(live) != 1:
                    break
                run.append(int(live[0]))
                cur = int(self._rows[cur, live[0]])
            hit = self._forced[cid] = (bytes(run), cur)
        return hit

    def next_bytes(self, cid: int) -> np.ndarray:
        """Sorted byte values that may follow configuration ``cid`` (empty if none)."""
        if not self._has_row[cid]:
            self._compute_row(cid)
        return np.flatnonzero(self._rows[cid])
