"""Budget-aware decoding: keep one output completable within a fixed number of tokens.

With a token budget (``max_new_tokens``), an unconstrained choice can leave a value that
cannot be closed in the tokens left: ``{"name": "a very long str`` with two tokens to go.
:class:`TokenBudget` masks every token after which the output could no longer be completed
in time, so generation always ends on a complete value of the grammar.

The bound used: for a parser configuration, the fewest tokens that spell its *shortest
completion in bytes* (:meth:`~structgen.index.token_index.TokenIndex.completion_tokens`: the
shortest text from compile-time distances, then a fewest-token segmentation of that text
by the vocabulary). That is an upper bound on the tokens really needed (some longer text
might need fewer tokens), so the mask is on the safe side: it may forbid a token that could
still have fitted, never allow one that cannot.

Such a bound need not decrease by one along its own plan (the next configuration's shortest
text may segment worse than the rest of the current one), so each row also keeps the plan
itself: the tokens of a completion that fits. Its first token is always allowed, and after
it the rest of the plan still fits. Invariant, checked at every step: ``len(plan) <=
remaining``; hence the mask is never empty and the output is complete when the budget ends.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ..errors import MatcherError
from ..index.token_index import _segment, _token_table
from ..index.tokenizer import TokenizerInfo
from .bitmask import as_numpy_row
from .compiler import CompiledGrammar
from .names import INITIAL, KEY, NameState, distinct_completion

__all__ = ["TokenBudget"]

_UNSPELLABLE = 1 << 40
"""The measure of a token after which no completion with distinct names was found."""

_MISSING = object()

_MEMO_LIMIT = 4096
"""Most (configuration, name state) measures one budget keeps (the memo is dropped when full)."""

_LEXICAL: "weakref.WeakKeyDictionary[TokenizerInfo, np.ndarray]" = weakref.WeakKeyDictionary()


def _lexical(info: TokenizerInfo) -> np.ndarray:
    """Boolean ``(len(token_bytes),)``: the tokens holding a byte the name lexer reacts to
    outside a name (quotes, backslashes, JSON punctuation)."""
    table = _LEXICAL.get(info)
    if table is None:
        special = set(b'"\\{}[],:')
        table = np.array([bool(b) and not special.isdisjoint(b) for b in info.token_bytes], dtype=bool)
        _LEXICAL[info] = table
    return table


class TokenBudget:
    """The token budget of one output under one compiled grammar.

    Args:
        compiled: the grammar the output follows.
        max_new_tokens: tokens the output may still take (stop token included).

    Raises:
        MatcherError: the budget cannot hold even the grammar's shortest output.

    Attributes:
        remaining: tokens left.
        plan: token ids of a completion that fits in ``remaining`` (empty once complete).
    """

    __slots__ = ("_index", "_free_names", "_repeats", "_segments", "remaining", "plan")

    def __init__(self, compiled: CompiledGrammar, max_new_tokens: int) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise MatcherError(f"max_new_tokens must be a positive integer, not {max_new_tokens!r}")
        self._index = compiled.index
        # with free member names a completion must not repeat a name (structgen.runtime.names): the
        # grammar's shortest text ({"":0,"":0} under minProperties 2) may not do
        self._free_names = compiled.free_names
        self._repeats: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._segments: dict[bytes, tuple[int, ...] | None] = {}
        self.remaining = max_new_tokens
        plan = self._completion_tokens(self._index.initial, INITIAL if self._free_names else None)
        if plan is None:
            raise MatcherError("budget-aware decoding: the vocabulary cannot spell this grammar's shortest output")
        if len(plan) > max_new_tokens:
            text = self._index.shortest_completion(self._index.initial)
            raise MatcherError(
                f"max_new_tokens={max_new_tokens} cannot hold this grammar's shortest output "
                f"({text!r}, {len(plan)} tokens); raise max_new_tokens to at least {len(plan)}"
            )
        self.plan: tuple[int, ...] = plan

    def _completion_tokens(self, cid: int, names: NameState | None) -> tuple[int, ...] | None:
        """Tokens of a completion of ``cid`` (with distinct names from ``names`` when given)."""
        if names is None:
            return self._index.completion_tokens(cid)
        text = distinct_completion(self._index, cid, names)
        if text is None:
            return None
        if text == self._index.shortest_completion(cid):
            return self._index.completion_tokens(cid)  # memoised
        toks = self._segments.get(text, _MISSING)
        if toks is _MISSING:  # the tokens of one position often share their completion's text
            toks = _segment(text, _token_table(self._index.info))
            if len(self._segments) >= _MEMO_LIMIT:
                self._segments.clear()
            self._segments[text] = toks
        return toks

    def restrict(self, state: int, bitmask: Any, index: int = 0, *, names: NameState | None = None) -> None:
        """Clear, in row ``index`` of a filled CPU bitmask, the tokens after which the output
        at configuration ``state`` could not be completed within the remaining budget.

        ``names``: the matcher's :attr:`~structgen.runtime.matcher.GrammarMatcher.name_state`, for
        grammars with free member names (completions then keep names distinct)."""
        row = as_numpy_row(bitmask, index).view(np.uint32)
        if self.remaining <= 0:  # generate() was given a larger limit: only stop tokens now
            stops = np.array(self._index.info.stop_token_ids, dtype=np.int64)
            keep = row[stops >> 5] & (np.uint32(1) << (stops & 31).astype(np.uint32))
            row[:] = 0
            np.bitwise_or.at(row, stops >> 5, keep)
            return
        bad = self._index.tokens_exceeding(state, self.remaining - 1)
        if names is not None and self._free_names:
            bad = self._distinct_exceeding(state, names, row, bad)
        if len(bad):
            np.bitwise_and.at(row, bad >> 5, ~(np.uint32(1) << (bad & 31).astype(np.uint32)))
            if self.plan:  # its rest fits, whatever the segmentation bound says about this token
                t = self.plan[0]
                row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)

    def _distinct_exceeding(self, state: int, names: NameState, row: np.ndarray, bad: np.ndarray) -> np.ndarray:
        """``bad`` plus the allowed tokens whose grammar completion repeats a name and whose
        completion with distinct names needs more than ``remaining - 1`` tokens.

        A token whose grammar completion keeps names distinct needs what
        :meth:`~structgen.index.token_index.TokenIndex.tokens_exceeding` says. One whose
        grammar completion repeats a name needs its distinct completion's tokens, and no fixed
        slack bounds the difference (``minProperties: 8`` over free names renames seven
        ``""``, a token or more each), so every such token is measured. The measures are
        memoised per (configuration, name state): they do not depend on the budget."""
        toks, cost = self._repeat_costs(state, names, row)
        if not len(toks):
            return bad
        over = toks[cost > self.remaining - 1]
        return np.union1d(bad, over) if len(over) else bad

    def _repeat_costs(self, state: int, names: NameState, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, tokens their distinct completion needs) for the allowed tokens from
        ``state`` whose grammar completion repeats a name (``_UNSPELLABLE``: none found)."""
        key = (state, names.stack, names.expect_key, names.mode, names.esc, names.key)
        hit = self._repeats.get(key)
        if hit is not None:
            return hit
        index = self._index
        toks, succ = index.token_successors(state)
        live = ((row[toks >> 5] >> (toks & 31).astype(np.uint32)) & np.uint32(1)).astype(bool)
        toks, succ = toks[live], succ[live]
        found_t: list[int] = []
        found_c: list[int] = []
        by_succ_t = np.zeros(0, np.int64)
        by_succ_c = np.zeros(0, np.int64)
        # outside a name, a token without quotes, backslashes or JSON punctuation leaves the
        # name state as it is: its measure depends on its successor only (one measure per
        # distinct successor, spread over the tokens by array indexing: string bodies allow
        # most of the vocabulary)
        if names.mode != KEY and not names.esc:
            plain = ~_lexical(index.info)[toks]
            uniq, inverse = np.unique(succ[plain], return_inverse=True)
            measured = np.array([-1 if c is None else c for c in (self._repeat_cost(s, names) for s in uniq.tolist())],
                                np.int64)
            cost = measured[inverse]
            keep = cost >= 0
            by_succ_t, by_succ_c = toks[plain][keep].astype(np.int64), cost[keep]
            toks, succ = toks[~plain], succ[~plain]
        tb = index.info.token_bytes
        for t, s in zip(toks.tolist(), succ.tolist()):
            after = names.feed(tb[t])
            if after is None:  # repeats a name itself: the name clears have it
                continue
            c = self._repeat_cost(s, after)
            if c is not None:
                found_t.append(t)
                found_c.append(c)
        all_t = np.concatenate([by_succ_t, np.array(found_t, np.int64)])
        all_c = np.concatenate([by_succ_c, np.array(found_c, np.int64)])
        dups = np.asarray(index.trie.dups, np.int64).reshape(-1, 2)
        if len(all_t) and len(dups):  # tokens with a measured token's bytes measure the same
            order = np.argsort(all_t)
            st, sc = all_t[order], all_c[order]
            pos = np.minimum(np.searchsorted(st, dups[:, 0]), len(st) - 1)
            dup = dups[:, 1]
            live = ((row[dup >> 5] >> (dup & 31).astype(np.uint32)) & np.uint32(1)).astype(bool)
            sel = (st[pos] == dups[:, 0]) & live
            all_t = np.concatenate([all_t, dup[sel]])
            all_c = np.concatenate([all_c, sc[pos[sel]]])
        order = np.argsort(all_t)
        hit = (all_t[order], all_c[order])
        if len(self._repeats) >= _MEMO_LIMIT:
            self._repeats.clear()
        self._repeats[key] = hit
        return hit

    def _repeat_cost(self, succ: int, after: NameState) -> int | None:
        """Tokens completing configuration ``succ`` with distinct names from ``after``;
        ``None`` when the grammar's own shortest completion keeps them distinct."""
        text = self._index.shortest_completion(succ)
        if text is None or after.feed(text) is not None:
            return None
        toks = self._completion_tokens(succ, after)
        return _UNSPELLABLE if toks is None else len(toks)

    def advance(self, token_id: int, state: int, terminated: bool, *, names: NameState | None = None) -> None:
        """Account for one accepted token that led to configuration ``state`` (``names``:
        the matcher's name state after it, as for :meth:`restrict`).

        Raises:
            MatcherError: the token leaves no completion within the budget (the mask from
                :meth:`restrict` was not applied).
        """
        self.remaining -= 1
        if terminated:
            self.plan = ()
            return
        fresh = self._completion_tokens(state, names if self._free_names else None)
        kept = self.plan[1:] if self.plan and self.plan[0] == token_id else None
        options = [p for p in (fresh, kept) if p is not None and len(p) <= self.remaining]
        if not options:
            raise MatcherError(
                f"token {token_id} leaves no completion within the {self.remaining} tokens left "
                f"(was the budget mask applied?)"
            )
        self.plan = min(options, key=len)
