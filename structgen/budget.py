"""Budget-aware decoding: keep one output completable within a fixed number of tokens.

With a token budget (``max_new_tokens``), an unconstrained choice can leave a value that
cannot be closed in the tokens left: ``{"name": "a very long str`` with two tokens to go.
:class:`TokenBudget` masks every token after which the output could no longer be completed
in time, so generation always ends on a complete value of the grammar.

The bound used: for a parser configuration, the fewest tokens that spell its *shortest
completion in bytes* (:meth:`~structgen.token_index.TokenIndex.completion_tokens`: the
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

from .bitmask import as_numpy_row
from .compiler import CompiledGrammar
from .errors import MatcherError

__all__ = ["TokenBudget"]


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

    __slots__ = ("_index", "remaining", "plan")

    def __init__(self, compiled: CompiledGrammar, max_new_tokens: int) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise MatcherError(f"max_new_tokens must be a positive integer, not {max_new_tokens!r}")
        self._index = compiled.index
        self.remaining = max_new_tokens
        plan = self._index.completion_tokens(self._index.initial)
        if plan is None:
            raise MatcherError("budget-aware decoding: the vocabulary cannot spell this grammar's shortest output")
        if len(plan) > max_new_tokens:
            text = self._index.shortest_completion(self._index.initial)
            raise MatcherError(
                f"max_new_tokens={max_new_tokens} cannot hold this grammar's shortest output "
                f"({text!r}, {len(plan)} tokens); raise max_new_tokens to at least {len(plan)}"
            )
        self.plan: tuple[int, ...] = plan

    def restrict(self, state: int, bitmask: Any, index: int = 0) -> None:
        """Clear, in row ``index`` of a filled CPU bitmask, the tokens after which the output
        at configuration ``state`` could not be completed within the remaining budget."""
        row = as_numpy_row(bitmask, index).view(np.uint32)
        if self.remaining <= 0:  # generate() was given a larger limit: only stop tokens now
            stops = np.array(self._index.info.stop_token_ids, dtype=np.int64)
            keep = row[stops >> 5] & (np.uint32(1) << (stops & 31).astype(np.uint32))
            row[:] = 0
            np.bitwise_or.at(row, stops >> 5, keep)
            return
        bad = self._index.tokens_exceeding(state, self.remaining - 1)
        if len(bad):
            np.bitwise_and.at(row, bad >> 5, ~(np.uint32(1) << (bad & 31).astype(np.uint32)))
            if self.plan:  # its rest fits, whatever the segmentation bound says about this token
                t = self.plan[0]
                row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)

    def advance(self, token_id: int, state: int, terminated: bool) -> None:
        """Account for one accepted token that led to configuration ``state``.

        Raises:
            MatcherError: the token leaves no completion within the budget (the mask from
                :meth:`restrict` was not applied).
        """
        self.remaining -= 1
        if terminated:
            self.plan = ()
            return
        fresh = self._index.completion_tokens(state)
        kept = self.plan[1:] if self.plan and self.plan[0] == token_id else None
        options = [p for p in (fresh, kept) if p is not None and len(p) <= self.remaining]
        if not options:
            raise MatcherError(
                f"token {token_id} leaves no completion within the {self.remaining} tokens left "
                f"(was the budget mask applied?)"
            )
        self.plan = min(options, key=len)
