"""A slow reference matcher for regular expression trees (test helper)."""
from __future__ import annotations

from structgen.grammar import Alt, CharSet, Dfa, Expr, Lit, Repeat, Seq


def _ends(e: Expr, s: str, starts: frozenset[int]) -> frozenset[int]:
    """Positions where a match of ``e`` starting at one of ``starts`` can end."""
    if not starts:
        return starts
    if isinstance(e, Lit):
        return frozenset(i + len(e.text) for i in starts if s.startswith(e.text, i))
    if isinstance(e, CharSet):
        return frozenset(i + 1 for i in starts if i < len(s) and ord(s[i]) in e)
    if isinstance(e, Seq):
        for item in e.items:
            starts = _ends(item, s, starts)
        return starts
    if isinstance(e, Alt):
        return frozenset().union(*(_ends(o, s, starts) for o in e.options))
    if isinstance(e, Repeat):
        cur = starts
        for _ in range(e.min):
            cur = _ends(e.item, s, cur)
            if not cur:
                return cur
        result = set(cur)
        if e.max is None:  # reachability: _ends distributes over unions of start sets
            frontier = cur
            while frontier:
                frontier = _ends(e.item, s, frontier) - result
                result |= frontier
            return frozenset(result)
        seen = {cur}
        for _ in range(e.max - e.min):
            cur = _ends(e.item, s, cur)
            if not cur or cur in seen:  # deterministic: a repeated frontier cycles forever
                break
            seen.add(cur)
            result |= cur
        return frozenset(result)
    if isinstance(e, Dfa):  # run the automaton (as an NFA: rows may overlap) from each start
        ends = set()
        for i in starts:
            states, j = {0}, i
            while True:
                if any(e.final[q] for q in states):
                    ends.add(j)
                if j == len(s) or not states:
                    break
                cp = ord(s[j])
                states = {t for q in states for lo, hi, t in e.trans[q] if lo <= cp <= hi}
                j += 1
        return frozenset(ends)
    raise TypeError(f"not a regular expression node: {e!r}")


def expr_fullmatch(expr: Expr, s: str) -> bool:
    """Whether ``expr`` matches all of ``s`` (position-set NFA simulation over code points)."""
    return len(s) in _ends(expr, s, frozenset([0]))
