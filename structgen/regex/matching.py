"""Whether a string matches a JSON Schema pattern as structgen reads patterns (ECMA-262
search semantics, ``\\p{...}`` property escapes included), for validating values against
patterns Python's ``re`` cannot compile: jsonschema searches with ``re``, which has no
``\\p``, so a tool call that structgen generated under such a pattern could not be checked."""
from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache
from typing import Callable

from .parser import search_expr
from .regular import _dfa


@lru_cache(maxsize=256)
def pattern_search(pattern: str) -> Callable[[str], bool]:
    """``text -> bool``: whether ``pattern`` matches somewhere in ``text`` (a code-point DFA
    of the search expression, built once per pattern).

    Raises:
        RegexError: structgen cannot read the pattern either.
    """
    trans, final = _dfa(search_expr(pattern))
    starts = [[lo for lo, _, _ in row] for row in trans]

    def search(text: str) -> bool:
        state = 0
        for ch in text:
            c = ord(ch)
            row = trans[state]
            k = bisect_right(starts[state], c) - 1
            if k < 0 or row[k][1] < c:
                return False  # no transition: no string with this prefix matches
            state = row[k][2]
        return final[state]

    return search
