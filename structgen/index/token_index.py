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

The configuration engine is native (``structgen._core.ConfigIndex``, src/core/config_index.cpp):
stacks, configurations, closure, rows, counters, the string-body shortcuts, the trie walk
(which computes the rows it meets) and the mask memo. A first-visit mask is one native call
with the GIL released. The memo tables only grow and never change an answer once given, so
sharing one index between matchers of the same compiled grammar is safe, also across
threads, and threads fill masks of one index at once: the engine interns under one lock and
publishes rows and masks so that a lookup that finds one needs no lock.

Shortest completions: the engine gives every rule state its fewest bytes to the rule's end
(a fixed point of one Dijkstra per rule), and every interned stack and configuration the
cheapest sum along it (:meth:`TokenIndex.completion_length`). It computes them when first
asked: masks never read them, so a grammar used only for masking never pays for them.
Budget-aware decoding builds on them (:meth:`TokenIndex.completion_tokens`,
:meth:`TokenIndex.tokens_exceeding`, and ``structgen.budget``).
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from .. import _core
from . import counters
from .automaton import UNREACHABLE, PushdownAutomaton, calls_csr
from .counters import CounterRule, check_config_stacks
from ..grammar import CharSet
from .tokenizer import TokenizerInfo
from ..regex.utf8 import charset_to_byte_sequences

__all__ = ["DEAD", "UNREACHABLE", "TokenIndex", "TokenTrie", "vocab_tables"]

DEAD = 0
"""The configuration id of a rejected prefix (no stack can continue, not complete)."""


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
                               cls._from_tokens(text), *_by_first_byte(text), *cls._split_other(other))
        return cls._from_tokens(toks, plain)

    @classmethod
    def _split_other(cls, other: list[tuple[bytes, int]]) -> tuple[TokenTrie, TokenTrie, np.ndarray, np.ndarray]:
        """The ``other`` tokens as :class:`PlainSplit`'s ``other_head``, ``other_tail``,
        ``tail_ids`` and ``tail_offsets``."""
        head, groups = [], {}
        for b, i in other:
            n = _text_prefix(b)
            if n:
                groups.setdefault(b[n:], []).append(i)
            else:
                head.append((b, i))
        tails = list(groups)
        ids = np.array([i for t in tails for i in groups[t]], np.int64)
        offsets = np.zeros(len(tails) + 1, np.int64)
        np.cumsum([len(groups[t]) for t in tails], out=offsets[1:])
        return cls._from_tokens(head), cls._from_tokens([(t, g) for g, t in enumerate(tails)]), ids, offsets

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


# the same as (lo, hi) byte ranges, for the native index
_MULTIBYTE_RANGES = [[(int(lo), int(hi)) for lo, hi in seq] for seq in _MULTIBYTE]


_VOCABS: "weakref.WeakKeyDictionary[TokenTrie, _core.VocabTables]" = weakref.WeakKeyDictionary()


def vocab_tables(trie: TokenTrie) -> _core.VocabTables:
    """The native per-vocabulary tables of ``trie`` (built once, shared by every grammar's index)."""
    tables = _VOCABS.get(trie)
    if tables is None:
        tables = _VOCABS[trie] = _core.VocabTables(trie, _MULTIBYTE_RANGES)
    return tables


def _guarded(fn, *args):
    """``fn(*args)``, with the native index's stack-limit refusal raised as :class:`LimitError`."""
    try:
        return fn(*args)
    except _core.StackLimitExceeded as e:
        check_config_stacks(int(e.args[0]))  # raises LimitError
        raise  # pragma: no cover - the limit was raised meanwhile


def _by_first_byte(toks: list[tuple[bytes, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids sorted by first byte, and the offsets of each byte's run (257 entries)."""
    first = np.array([b[0] for b, _ in toks], np.int64)
    order = np.argsort(first, kind="stable")
    ids = np.array([i for _, i in toks], np.int64)[order]
    return ids, np.searchsorted(first[order], np.arange(257))


def _text_prefix(data: bytes) -> int:
    """The length of the longest prefix of ``data`` that is :func:`_is_text`."""
    i = 0
    while i < len(data):
        b = data[i]
        if b < 0x80:
            if b not in _PLAIN_SET:
                return i
            i += 1
            continue
        n = 2 if 0xC2 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4 if 0xF0 <= b < 0xF5 else 0
        try:  # strict: no overlong forms, no surrogates, nothing past U+10FFFF
            if n == 0 or len(data[i:i + n].decode("utf-8")) != 1:
                return i
        except UnicodeDecodeError:
            return i
        i += n
    return i


def _is_text(data: bytes) -> bool:
    """Whole UTF-8 characters, each plain (see PLAIN_BYTES) or from U+0080 up."""
    return _text_prefix(data) == len(data)


_TABLE_CELLS = 1 << 22  # entries of all frame tables of one index (16 MB): past it, rows close each target once

PLAIN_BYTES = np.array([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], np.uint8)
"""Printable ASCII but ``"`` and ``\\``: the bytes a JSON string body takes literally."""
_PLAIN_DELETE = bytes(PLAIN_BYTES.tolist())
_PLAIN_SET = frozenset(PLAIN_BYTES.tolist())


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
    the other first bytes' subtrees of ``only`` are walked, each down to the nodes whose
    configuration loops on every plain byte: below those the whole subtree is taken (the
    native index lists ``only``'s tokens in preorder). Where every character from U+0080
    up loops too (a JSON string body), the ``text`` tokens (28,608 of Llama-3's 128,256: the
    non-English words) are allowed in whole as well, and only ``other`` is walked; in a
    string body, as ``other_head`` from the state and ``other_tail`` from where a character
    leads it.
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
    # ``other`` again, split for string bodies: a text prefix of whole characters leads a
    # looping state back to itself, so only the bytes after it decide. ``other_head``: the
    # tokens with none; ``other_tail``: the distinct rests of the others (``"``, ``\n``,
    # ``",``: 764 rests for Llama-3's 3,256 such tokens), its ``tok`` a group whose ids are
    # tail_ids[tail_offsets[g]:tail_offsets[g + 1]].
    other_head: TokenTrie
    other_tail: TokenTrie
    tail_ids: np.ndarray
    tail_offsets: np.ndarray


class TokenIndex:
    """Lazily determinised configurations of a pushdown automaton, with memoised masks.

    A thin wrapper over the native :class:`structgen._core.ConfigIndex`, which owns the rule
    tables, stacks, configurations, byte rows, masks and shortest completions; token
    budgets are computed here on top of its accessors.
    """

    def __init__(self, pda: PushdownAutomaton, info: TokenizerInfo, trie: TokenTrie) -> None:
        self.info = info
        self.trie = trie
        self.words = (info.vocab_size + 31) // 32
        # reentrant: a budget bound computes completions
        self._lock = threading.RLock()
        self._pda = pda
        rules: list[tuple] = []
        for rule in pda.rules:
            if isinstance(rule, CounterRule):
                rules.append(("counter", rule.body, rule.lo, -1 if rule.hi is None else rule.hi))
            else:
                rules.append(("dfa", rule.trans, rule.final, *calls_csr(rule)))
        self._counted = any(isinstance(r, CounterRule) for r in pda.rules)
        self._native = _guarded(_core.ConfigIndex, rules, pda.root, vocab_tables(trie), list(info.stop_token_ids),
                                self.words, _TABLE_CELLS, counters.MAX_CONFIG_STACKS, pda.trimmed)
        self.initial: int = self._native.initial
        self._view: int = self._native.view  # for _core.fill_row; valid while self._native lives
        self.stop_mask: np.ndarray = self._native.stop_mask
        """Read-only int32 words allowing only the stop tokens (a terminated matcher's mask)."""
        # the warm path: one dict lookup per decoding step (the arrays are views of native memory)
        self._masks: dict[int, np.ndarray] = {}
        self._mask_views: dict[int, np.ndarray] = {}  # by address of the native mask
        self._token_steps: dict[tuple[int, int], int] = {}
        self._completions: dict[int, bytes | None] = {}
        self._completion_tokens: dict[int, tuple[int, ...] | None] = {}
        self._succ_bound: dict[int, int] = {}
        self._succ_costs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._forced: dict[int, tuple[bytes, int]] = {}

    def _sync_limit(self) -> None:
        # MAX_CONFIG_STACKS is read at each call that may create configurations (a module
        # attribute users may change); only counters make configurations grow past one stack
        if self._counted:
            self._native.set_stack_limit(counters.MAX_CONFIG_STACKS)

    # -- configurations ---------------------------------------------------------------

    @property
    def num_configs(self) -> int:
        return self._native.num_configs

    def config_stacks(self, cid: int) -> tuple[int, ...]:
        """The stack ids of configuration ``cid`` (sorted), one per possible parser stack."""
        return self._native.config_stacks(cid)

    def stack_frames(self, sid: int) -> tuple[tuple[int, int], ...]:
        """The frames of stack ``sid`` from its top down: ``(rule index, state)`` each."""
        out = []
        while sid >= 0:
            r, s, sid = self._native.stack(sid)
            out.append((r, s))
        return tuple(out)

    def describe(self, cid: int) -> tuple[tuple[tuple[tuple[int, int], ...], ...], bool]:
        """Configuration ``cid`` by content, independent of interning order: its stacks'
        frames (sorted) and whether it is complete. Equal descriptions, equal configurations."""
        return tuple(sorted(self.stack_frames(s) for s in self.config_stacks(cid))), self.is_accepting(cid)

    def stats(self) -> dict[str, int]:
        """Sizes of the native tables: configs, config_keys, stacks, rows, frame_tables,
        table_cells (entries of all frame tables, bounded by ``_TABLE_CELLS``), masks
        (distinct masks kept), mask_bytes (their memory: a mask with set bits in a few 64-byte
        chunks keeps those alone, until :meth:`mask` asks for all of it), run_masks (memoised
        token groups of name starts, as large as a mask each), mask_configs."""
        return self._native.stats()

    def _row(self, cid: int) -> np.ndarray:
        """The byte row of ``cid`` (256 successor configurations, a copy), computed if needed."""
        self._sync_limit()
        return _guarded(self._native.row, cid)

    # -- stepping ---------------------------------------------------------------------

    def is_accepting(self, cid: int) -> bool:
        return self._native.is_accepting(cid)

    def step_bytes(self, cid: int, data: bytes) -> int:
        """The configuration after ``data`` (``DEAD`` if rejected)."""
        self._sync_limit()
        return _guarded(self._native.step_bytes, cid, bytes(data))

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
        tokens are set exactly when the configuration is complete. Read-only. The first call
        for a configuration computes it natively with the GIL released (other threads may
        compute masks of the same index meanwhile).
        """
        m = self._masks.get(cid)
        if m is None:
            self._sync_limit()
            address, view = _guarded(self._native.mask, cid)
            # configurations sharing a mask (counters far from their bounds) share one array
            m = self._masks[cid] = self._mask_views.setdefault(address, view)
        return m

    def mask_if_ready(self, cid: int) -> np.ndarray | None:
        """The memoised mask of ``cid``, or ``None`` when it is not computed yet. Never
        computes and takes no lock: batch fills read their memo hits with it."""
        return self._masks.get(cid)

    def allowed_tokens(self, cid: int) -> np.ndarray:
        """Boolean ``(vocab_size,)`` array of allowed tokens (slow path: unpacks the mask)."""
        bits = np.unpackbits(self.mask(cid).view(np.uint8), bitorder="little")
        return bits[: self.info.vocab_size].astype(bool)

    def token_successors(self, cid: int) -> tuple[np.ndarray, np.ndarray]:
        """``(token ids, configurations after them)`` for every allowed non-stop token with
        canonical bytes (duplicates of a token's bytes are left out), int64 each."""
        self._sync_limit()
        return _guarded(self._native.successors, cid)

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
            while cur != DEAD and not self.is_accepting(cur) and len(run) < limit:
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
        row = self._row(cid)
        row.setflags(write=False)
        return row

    def next_bytes(self, cid: int) -> np.ndarray:
        """Sorted byte values that may follow configuration ``cid`` (empty if none)."""
        return np.flatnonzero(self._row(cid))

    # -- shortest completions and token budgets ------------------------------------------

    def completion_length(self, cid: int) -> int | None:
        """Fewest bytes that complete the text from configuration ``cid`` (0 when it is
        complete already; ``None`` for ``DEAD``). O(1) once the grammar's distances are known (the
        first call computes them; see the module's docstring)."""
        d = self._native.config_dist(cid)
        return None if d >= UNREACHABLE else d

    def rule_distances(self) -> tuple:
        """Per rule of the automaton its completion distances: for a DFA rule an int64 array
        (per state the fewest bytes to the rule's end, ``UNREACHABLE`` where it cannot end),
        for a counter ``(lo, item_min)`` (state ``k`` needs ``max(lo - k, 0)`` items of at
        least ``item_min`` bytes each)."""
        return tuple(self._native.rule_distances())

    def shortest_completion(self, cid: int) -> bytes | None:
        """A shortest text (bytes) that completes the output from ``cid``; ``None`` for ``DEAD``.

        The cheapest stack of the configuration is completed frame by frame along strictly
        decreasing distances, printable ASCII preferred among equally short choices.
        """
        if cid in self._completions:
            return self._completions[cid]
        self._sync_limit()
        out = _guarded(self._native.shortest_completion, cid)  # native, without the GIL
        with self._lock:
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
                succ = self.token_successors(cid)[1]
                dist = self._native.config_dists(succ) if len(succ) else np.zeros(1, np.int64)
                bound = int(dist.max()) if _singles_cover_alphabet(self.info) else UNREACHABLE
                self._succ_bound[cid] = bound
        if bound <= limit:
            return np.zeros(0, np.int64)
        costs = self._succ_costs.get(cid)
        if costs is None:
            with self._lock:
                toks, succ = self.token_successors(cid)
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
