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

from typing import Any

import numpy as np

from ..errors import MatcherError
from ..index.token_index import _segment, _token_table
from .bitmask import as_numpy_row
from .compiler import CompiledGrammar
from .names import INITIAL, KEY, NameState, decode_name, distinct_completion

__all__ = ["TokenBudget", "DISTINCT_SLACK"]

DISTINCT_SLACK = 3
"""Tokens within this many of the budget are checked one by one for a completion with
distinct member names (grammars with free names only)."""


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

    __slots__ = ("_index", "_free_names", "remaining", "plan")

    def __init__(self, compiled: CompiledGrammar, max_new_tokens: int) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise MatcherError(f"max_new_tokens must be a positive integer, not {max_new_tokens!r}")
        self._index = compiled.index
        # with free member names a completion must not repeat a name (structgen.runtime.names): the
        # grammar's shortest text ({"":0,"":0} under minProperties 2) may not do
        self._free_names = compiled.free_names
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
        return _segment(text, _token_table(self._index.info))

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
        """``bad`` plus the allowed tokens whose grammar completion needs more than
        ``remaining - 1 - DISTINCT_SLACK`` tokens and repeats a name.

        Such a token may still have a completion with distinct names that fits, but finding
        it per token costs a search; clearing it is safe (the plan's first token stays
        allowed, and its rest fits). Further from the limit, renaming is taken to fit in
        the slack (a fresh name costs a byte or two)."""
        limit = self.remaining - 1
        near = self._index.tokens_exceeding(state, max(limit - DISTINCT_SLACK, 0))
        if len(near) == len(bad):
            return bad
        near = np.setdiff1d(near, bad, assume_unique=True)
        live = (row[near >> 5] >> (near & 31).astype(np.uint32)) & np.uint32(1)
        near = near[live.astype(bool)]
        if self.plan:
            near = near[near != self.plan[0]]
        tb = self._index.info.token_bytes
        index = self._index
        extra = []
        top = names.top_names()
        in_name = names.mode == KEY and not names.esc
        same: dict[int, bool] = {}  # per successor: its completion repeats a name (tokens that leave `names` as is)
        for t in near.tolist():
            tok = tb[t]
            succ = index.step_token(state, t)
            text = index.shortest_completion(succ)
            if text is None:
                extra.append(t)
                continue
            if b'"' not in tok and b"\\" not in tok:
                if in_name:
                    # the completion ends this name, then (usually) writes no other: only
                    # the name it ends can repeat
                    q = text.find(b'"')
                    if q >= 0 and b'"' not in text[q + 1:] and b"\\" not in text[:q]:
                        name = decode_name(names.key + tok + text[:q])
                        if name is not None:
                            if name in top:
                                extra.append(t)
                            continue
                elif names.feed(tok) is names:  # a number, a literal, a string's inside
                    hit = same.get(succ)
                    if hit is None:
                        hit = same[succ] = names.feed(text) is None
                    if hit:
                        extra.append(t)
                    continue
            after = names.feed(tok)
            if after is not None and after.feed(text) is None:
                extra.append(t)
        if not extra:
            return bad
        return np.union1d(bad, np.array(extra, np.int64))

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
