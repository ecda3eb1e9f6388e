"""Reference code-point automata (test oracle), in pure Python: Thompson construction over
expression trees, subset construction over frozensets, products and Moore refinement, the way
structgen.regex.regular built them before the native core. tests/test_native_regular.py checks that
the native stages give the same automata, row for row.
"""
from __future__ import annotations

from structgen.errors import GrammarError, LimitError
from structgen.grammar import CharSet, Dfa, Expr, Lit, Ref, Regex, Repeat, Seq, Alt
from structgen.regex.regular import MAX_DFA_STATES


def _too_large(name: str, limit: int, reached: int, what: str) -> LimitError:
    return LimitError(what, limit_name=name, limit=limit, reached=reached, pointer=None)


class _CharNFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []  # (lo, hi, target), code points

    def new(self) -> int:
        if len(self.eps) > 20 * MAX_DFA_STATES:
            raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, len(self.eps),
                             f"a regular expression of more than {20 * MAX_DFA_STATES} NFA states to intersect")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, e: Expr, a: int, b: int) -> None:
        if isinstance(e, Lit):
            cur = a
            for i, ch in enumerate(e.text):
                nxt = b if i == len(e.text) - 1 else self.new()
                self.edges[cur].append((ord(ch), ord(ch), nxt))
                cur = nxt
            if not e.text:
                self.eps[a].append(b)
        elif isinstance(e, CharSet):
            for lo, hi in e.ranges:
                self.edges[a].append((lo, hi, b))
        elif isinstance(e, Regex):
            from .regex import parse_regex

            self.build(parse_regex(e.pattern, e.flags), a, b)
        elif isinstance(e, Seq):
            cur = a
            for i, item in enumerate(e.items):
                nxt = b if i == len(e.items) - 1 else self.new()
                self.build(item, cur, nxt)
                cur = nxt
            if not e.items:
                self.eps[a].append(b)
        elif isinstance(e, Alt):
            for o in e.options:
                self.build(o, a, b)
        elif isinstance(e, Dfa):
            states = [self.new() for _ in e.trans]
            self.eps[a].append(states[0])
            for src, row in enumerate(e.trans):
                if e.final[src]:
                    self.eps[states[src]].append(b)
                self.edges[states[src]].extend((lo, hi, states[dst]) for lo, hi, dst in row)
        elif isinstance(e, Repeat):
            cur = a
            for _ in range(e.min):
                nxt = self.new()
                self.build(e.item, cur, nxt)
                cur = nxt
            if e.max is None:
                loop = self.new()
                self.eps[cur].append(loop)
                self.build(e.item, loop, loop)
                self.eps[loop].append(b)
            else:
                for _ in range(e.max - e.min):
                    self.eps[cur].append(b)
                    nxt = self.new()
                    self.build(e.item, cur, nxt)
                    cur = nxt
                self.eps[cur].append(b)
        elif isinstance(e, Ref):
            raise GrammarError(f"intersection operands must be regular: found a reference to {e.name!r}")
        else:
            raise TypeError(f"not a grammar expression: {e!r}")

    def closure(self, states) -> frozenset[int]:
        seen, stack = set(states), list(states)
        while stack:
            for t in self.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)


def dfa(e: Expr) -> tuple[list[list[tuple[int, int, int]]], list[bool]]:
    """DFA of ``e``: per state, disjoint sorted (lo, hi, target) intervals; and finality."""
    nfa = _CharNFA()
    s, t = nfa.new(), nfa.new()
    nfa.build(e, s, t)
    return subsets(nfa, s, t)


def subsets(nfa: _CharNFA, s: int, t: int) -> tuple[list[list[tuple[int, int, int]]], list[bool]]:
    """Subset construction of ``nfa`` from ``s``, accepting where ``t`` is reached."""
    def closure(states) -> frozenset[int]:
        # a DFA state is its closure's states with an edge, and the end state
        return frozenset(x for x in nfa.closure(states) if nfa.edges[x] or x == t)

    start = closure([s])
    ids, order, trans = {start: 0}, [start], []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        edges = [x for st in cur for x in nfa.edges[st]]
        points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
        row: list[tuple[int, int, int]] = []
        for p, q in zip(points, points[1:]):
            targets = [tg for lo, hi, tg in edges if lo <= p and q - 1 <= hi]
            if not targets:
                continue
            nxt = closure(targets)
            if nxt not in ids:
                if len(order) >= MAX_DFA_STATES:
                    raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, len(order),
                                     f"an intersection of more than {MAX_DFA_STATES} DFA states")
                ids[nxt] = len(order)
                order.append(nxt)
            tid = ids[nxt]
            if row and row[-1][2] == tid and row[-1][1] == p - 1:
                row[-1] = (row[-1][0], q - 1, tid)
            else:
                row.append((p, q - 1, tid))
        trans.append(row)
    return trans, [t in st for st in order]


def product(a, b, *, keep_b_final: bool):
    """Product automaton: accept where a accepts and b accepts (intersect) or does not (difference)."""
    ta, fa = a
    tb, fb = b
    ids = {(0, 0): 0}
    order = [(0, 0)]
    trans: list[list[tuple[int, int, int]]] = []
    i = 0
    while i < len(order):
        sa, sb = order[i]
        i += 1
        row = []
        b_row = tb[sb] if sb >= 0 else []
        for lo, hi, na in ta[sa]:
            # split [lo, hi] by b's intervals; uncovered parts send b to the dead state -1
            pos = lo
            pieces = []
            for blo, bhi, nb in b_row:
                if bhi < pos or blo > hi:
                    continue
                if blo > pos:
                    pieces.append((pos, blo - 1, -1))
                pieces.append((max(blo, pos), min(bhi, hi), nb))
                pos = min(bhi, hi) + 1
                if pos > hi:
                    break
            if pos <= hi:
                pieces.append((pos, hi, -1))
            for plo, phi, nb in pieces:
                if nb < 0 and keep_b_final:  # intersection: b must keep up
                    continue
                key = (na, nb)
                if key not in ids:
                    if len(order) >= MAX_DFA_STATES:
                        raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, len(order),
                                     f"an intersection of more than {MAX_DFA_STATES} DFA states")
                    ids[key] = len(order)
                    order.append(key)
                row.append((plo, phi, ids[key]))
        trans.append(row)
    final = [fa[x] and ((y >= 0 and fb[y]) if keep_b_final else not (y >= 0 and fb[y])) for x, y in order]
    return trans, final


def minimise(trans, final):
    """The minimal DFA (Moore's partition refinement over interval rows), start state 0.

    Products carry equivalent states (a pattern automaton's "just matched" and "matched
    earlier" both mean "accept from now on"); state elimination copies the expression of each
    copy separately, which made a 36-state "length 12 and contains a hex digit" product a
    16,000-node expression instead of a few hundred.
    """
    n = len(trans)
    cls = [int(f) for f in final]
    while True:
        sigs: dict[tuple, int] = {}
        new = []
        for s in range(n):
            row: list[tuple[int, int, int]] = []
            for lo, hi, t in trans[s]:
                c = cls[t]
                if row and row[-1][2] == c and row[-1][1] == lo - 1:
                    row[-1] = (row[-1][0], hi, c)
                else:
                    row.append((lo, hi, c))
            new.append(sigs.setdefault((cls[s], tuple(row)), len(sigs)))
        if len(sigs) == len(set(cls)):
            break
        cls = new
    # renumber so that the start state's class is 0
    order = {cls[0]: 0}
    for c in cls:
        order.setdefault(c, len(order))
    out_trans: list[list[tuple[int, int, int]]] = [[] for _ in order]
    out_final = [False] * len(order)
    done = set()
    for s in range(n):
        c = order[cls[s]]
        if c in done:
            continue
        done.add(c)
        out_final[c] = final[s]
        for lo, hi, t in trans[s]:
            tc = order[cls[t]]
            row = out_trans[c]
            if row and row[-1][2] == tc and row[-1][1] == lo - 1:
                row[-1] = (row[-1][0], hi, tc)
            else:
                row.append((lo, hi, tc))
    return out_trans, out_final
