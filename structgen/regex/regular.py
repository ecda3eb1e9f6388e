"""Boolean operations on regular expressions at the code-point level: intersection, difference.

A context-free grammar has no intersection, but JSON Schema needs one wherever two keywords
constrain the same string (``pattern`` with ``maxLength``, property names that match a
``patternProperties`` regex but are not declared...). For *regular* operands we compute it:
expression → code-point NFA → DFA over code-point intervals → product DFA → minimal DFA
(all native, structgen._core: the implementation the byte-level rule automata use) → back
to an expression by state elimination. The result is an ordinary expression (Lark-printable).
"""
from __future__ import annotations

import hashlib
from functools import lru_cache, partial
from json.encoder import encode_basestring
from typing import Iterable

import numpy as np

from .. import _core
from ..errors import LimitError
from .expr_arrays import serializer
from ..grammar import (
    EMPTY,
    MAX_CODEPOINT,
    NOTHING,
    Alt,
    CharSet,
    Dfa,
    Expr,
    Lit,
    Repeat,
    Seq,
    alt,
    seq,
)

__all__ = ["intersect", "intersect_automaton", "automaton_tables", "difference", "star_minus_literals", "bound_length",
           "json_text_charset", "json_text_expr"]

MAX_DFA_STATES = 4000


def _too_large(name: str, limit: int, reached: int, what: str) -> LimitError:
    # no pointer here: the schema converter locates it at the node being converted
    return LimitError(what, limit_name=name, limit=limit, reached=reached, pointer=None)


# The automata are built natively (structgen._core, the same implementation as the byte-level
# rule DFAs, over code-point intervals). Here a DFA is either the native row form
# ``(row_off, rows, final)`` (numpy: state s owns rows[row_off[s]:row_off[s + 1]], each a
# sorted disjoint (lo, hi, target) interval) or, for state elimination and callers, lists:
# ``trans[s]`` = [(lo, hi, target), ...] and ``final[s]``.

_NFA_LIMIT = 20  # NFA states allowed per DFA state of the limit


def _native(root: int, ser: _core.ExprSerializer):
    """The DFA (row form) of node ``root`` of ``ser``; the size limits are checked as it grows."""
    nodes, data = ser.arrays()
    out = _core.build_dfa(nodes, data, root, False, _NFA_LIMIT * MAX_DFA_STATES + 1, 0, MAX_DFA_STATES, 0)
    if len(out) == 2:
        kind, reached = out
        if kind == 0:
            raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, int(reached) - 1,
                             f"a regular expression of more than {_NFA_LIMIT * MAX_DFA_STATES} NFA states to intersect")
        raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, int(reached),
                         f"an intersection of more than {MAX_DFA_STATES} DFA states")
    return out[0], out[1], out[2]


def _ndfa(e: Expr):
    """DFA of ``e`` in row form."""
    ser = serializer()
    return _native(ser.add(e), ser)


def _nproduct(a, b, keep_b_final: bool):
    out = _core.product(*a, *b, keep_b_final, MAX_DFA_STATES)
    if len(out) == 1:
        raise _too_large("MAX_DFA_STATES", MAX_DFA_STATES, int(out[0]),
                         f"an intersection of more than {MAX_DFA_STATES} DFA states")
    return out


def _to_lists(d) -> tuple[list[list[tuple[int, int, int]]], list[bool]]:
    row_off, rows, final = d
    flat = list(map(tuple, rows.tolist()))
    off = row_off.tolist()
    return [flat[off[s]:off[s + 1]] for s in range(len(off) - 1)], final.tolist()


def _from_lists(trans, final):
    off = np.zeros(len(trans) + 1, np.int64)
    np.cumsum([len(r) for r in trans], out=off[1:])
    rows = np.array([x for r in trans for x in r], np.int32).reshape(-1, 3)
    return off, rows, np.array(final, bool)


def _dfa(e: Expr) -> tuple[list[list[tuple[int, int, int]]], list[bool]]:
    """DFA of ``e``: per state, disjoint sorted (lo, hi, target) intervals; and finality."""
    return _to_lists(_ndfa(e))


def _product(a, b, *, keep_b_final: bool):
    """Product automaton: accept where a accepts and b accepts (intersect) or does not (difference)."""
    return _to_lists(_nproduct(_from_lists(*a), _from_lists(*b), keep_b_final))


def _minimise(trans, final):
    """The minimal DFA (Hopcroft over the interval rows, native), start state 0.

    Products carry equivalent states (a pattern automaton's "just matched" and "matched
    earlier" both mean "accept from now on"); state elimination copies the expression of each
    copy separately, which made a 36-state "length 12 and contains a hex digit" product a
    16,000-node expression instead of a few hundred. Classes are numbered by first appearance
    over the states; a missing transition and one into a dead state stay apart (trimming is
    the caller's).
    """
    return _to_lists(_core.minimise_rows(*_from_lists(trans, final)))


def _live_states(trans, final) -> set[int]:
    """The states that can reach a final state (of a DFA whose states are all reachable)."""
    preds: list[set[int]] = [set() for _ in trans]
    for s, row in enumerate(trans):
        for _, _, t in row:
            preds[t].add(s)
    live = {s for s in range(len(trans)) if final[s]}
    stack = list(live)
    while stack:
        for p in preds[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    return live


class _EliminationTooLarge(Exception):
    """State elimination passed ``ELIMINATION_NODES``: the result stays an automaton."""


def _to_expr(trans, final) -> Expr:
    """State elimination (Brzozowski–McCluskey) over trimmed states of the minimal DFA."""
    return _eliminate(_from_lists(trans, final))


def _eliminate(d) -> Expr:
    """:func:`_to_expr` of a DFA in row form."""
    trans, final = _to_lists(_core.minimise_rows(*d))
    n = len(trans)
    live = _live_states(trans, final)
    if 0 not in live:
        return NOTHING
    if len(live) > ELIMINATION_STATES:
        return _automaton(trans, final, live)
    # edges as CharSets between live states; S = n (new start), F = n + 1 (new final)
    S, F = n, n + 1
    R: dict[tuple[int, int], Expr] = {}
    # adjacency kept beside R so that picking and unlinking a state costs its degree, not |R|
    # (scanning R for every elimination made this quadratic in the edges: seconds per schema)
    succ: dict[int, set[int]] = {}
    pred: dict[int, set[int]] = {}
    order_of: dict[tuple[int, int], int] = {}

    size: dict[tuple[int, int], int] = {}  # tree size of each edge's expression

    def add(i: int, j: int, e: Expr, n: int = 1) -> None:
        # state elimination can grow the expression exponentially in the states: stop while
        # it grows, and keep the (linear) automaton instead
        n += size.get((i, j), 0)
        if n > ELIMINATION_NODES:
            raise _EliminationTooLarge
        size[(i, j)] = n
        if (i, j) in R:
            R[(i, j)] = alt(R[(i, j)], e)
        else:
            R[(i, j)] = e
            order_of[(i, j)] = len(order_of)
            succ.setdefault(i, set()).add(j)
            pred.setdefault(j, set()).add(i)

    def unlink(i: int, j: int) -> Expr:
        succ[i].discard(j)
        pred[j].discard(i)
        size.pop((i, j), None)
        return R.pop((i, j))

    def cost(q: int) -> tuple[int, int]:
        # eliminating q adds an edge per (predecessor, successor) pair, each carrying copies
        # of q's expressions: fewest new pairs first keeps the expression small (fewest
        # connections first blew a 36-state "length 12, contains a hex digit" DFA up to 24,550
        # nodes); then fewest connections, the former rule
        out, into = succ.get(q, set()) - {q}, pred.get(q, set()) - {q}
        return len(out) * len(into), -depth.get(q, 0), len(out) + len(into)

    add(S, 0, EMPTY)
    for s in live:
        by_target: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in trans[s]:
            if t in live:
                by_target.setdefault(t, []).append((lo, hi))
        for t, ranges in by_target.items():
            add(s, t, _charset_expr(CharSet.of(ranges)))
        if final[s]:
            add(s, F, EMPTY)
    depth = {0: 0}  # breadth-first distance from the start
    frontier = [0]
    while frontier:
        nxt_frontier = []
        for s in frontier:
            for _, _, t in trans[s]:
                if t in live and t not in depth:
                    depth[t] = depth[s] + 1
                    nxt_frontier.append(t)
        frontier = nxt_frontier
    try:
        remaining = set(live)
        while remaining:
            # eliminate the state with the fewest connections first (keeps expressions small)
            k = min(remaining, key=cost)
            remaining.discard(k)
            star_size = size.get((k, k), 0) + 1
            loop = unlink(k, k) if (k, k) in R else None
            star = Repeat(loop, 0, None) if loop is not None else EMPTY
            # the same order as iterating R (insertion order), so the expression is deterministic
            ins = sorted(((i, R[(i, k)], size[(i, k)]) for i in pred.get(k, ())), key=lambda x: order_of[(x[0], k)])
            outs = sorted(((j, R[(k, j)], size[(k, j)]) for j in succ.get(k, ())), key=lambda x: order_of[(k, x[0])])
            for i, _, _ in ins:
                unlink(i, k)
            for j, _, _ in outs:
                unlink(k, j)
            for i, ei, ni in ins:
                for j, ej, nj in outs:
                    add(i, j, seq(ei, star, ej), ni + star_size + nj)
    except _EliminationTooLarge:
        return _automaton(trans, final, live)
    return R.get((S, F), NOTHING)


ELIMINATION_STATES = 48
ELIMINATION_NODES = 4000
"""Above these (trimmed minimal DFA states, nodes of the eliminated expression) a boolean
operation's result stays an automaton (:class:`~structgen.grammar.Dfa`): state elimination
can be exponential (``format: uri`` with ``minLength: 7`` took minutes), the automaton is
linear."""


def _automaton(trans, final, live) -> Expr:
    """The live states of a DFA (start state 0 among them) as a Dfa node, labelled by a hash
    of its table: equal labels mean equal tables, hence equal languages."""

    keep = [0] + sorted(live - {0})
    new = {q: i for i, q in enumerate(keep)}
    table = tuple(tuple((lo, hi, new[t]) for lo, hi, t in trans[q] if t in new) for q in keep)
    fin = tuple(bool(final[q]) for q in keep)
    digest = hashlib.sha256(repr((table, fin)).encode()).hexdigest()[:24]
    return Dfa(f"automaton {len(keep)} states {digest}", table, fin)


def map_automaton(e: Dfa, encode) -> Expr:
    """The automaton whose strings are those of ``e`` with each character ``c`` replaced by
    any string of ``encode(CharSet of c)`` (JSON escapes of a decoded-string automaton)."""
    ser = serializer()
    edges: list[list[tuple[int, int]]] = []
    for row in e.trans:
        by_target: dict[int, list[tuple[int, int]]] = {}
        for lo, hi, t in row:
            by_target.setdefault(t, []).append((lo, hi))
        edges.append([(ser.add(encode(CharSet.of(ranges))), t) for t, ranges in by_target.items()])
    return _eliminate(_native(ser.graph(list(e.final), edges), ser))


def automaton_lengths(e: Dfa) -> tuple[int, float]:
    """Fewest and most characters of a string of ``e`` (``inf`` when unbounded); ``e`` trimmed."""
    n = len(e.trans)
    dist = {0: 0}
    frontier = [0]
    while frontier:  # breadth first: the shortest distance to each state
        nxt = []
        for q in frontier:
            for _, _, t in e.trans[q]:
                if t not in dist:
                    dist[t] = dist[q] + 1
                    nxt.append(t)
        frontier = nxt
    lo = min((d for q, d in dist.items() if e.final[q]), default=0)
    # longest: a cycle among live states makes it unbounded; else the longest path (DAG)
    longest: dict[int, float] = {}
    on_path: set[int] = set()

    def walk(q: int) -> float:
        if q in longest:
            return longest[q]
        if q in on_path:
            return float("inf")
        on_path.add(q)
        best = 0.0 if e.final[q] else float("-inf")
        for _, _, t in e.trans[q]:
            best = max(best, 1 + walk(t))
        on_path.discard(q)
        longest[q] = best
        return best

    hi = walk(0) if n < 800 else float("inf")  # deep recursion: the bound is only a hint
    del walk  # (a recursive closure is a reference cycle, left to the collector)
    return lo, hi


def _charset_expr(cs: CharSet) -> Expr:
    if len(cs.ranges) == 1 and cs.ranges[0][0] == cs.ranges[0][1]:
        return Lit(chr(cs.ranges[0][0]))
    return cs


def intersect(a: Expr, b: Expr) -> Expr:
    """An expression matching exactly the strings both ``a`` and ``b`` match (regular operands)."""
    return _eliminate(_nproduct(_ndfa(a), _ndfa(b), True))


def intersect_automaton(a: Expr, b: Expr, label: str) -> Expr:
    """:func:`intersect` as a :class:`~structgen.grammar.Dfa` node (minimal, trimmed), for
    products whose expression would be much larger than the automaton (a counted repeat
    against a numeric range). ``label`` must name the language; NOTHING when empty."""
    tables = _minimal_tables(_nproduct(_ndfa(a), _ndfa(b), True))
    return NOTHING if tables is None else Dfa(label, *tables)


def automaton_tables(e: Expr) -> tuple[tuple[tuple[tuple[int, int, int], ...], ...], tuple[bool, ...]] | None:
    """The minimal DFA of ``e`` without its dead states, as the tables of a
    :class:`~structgen.grammar.Dfa` (start state 0); None when ``e`` matches nothing."""
    return _minimal_tables(_ndfa(e))


def _minimal_tables(d) -> tuple[tuple[tuple[tuple[int, int, int], ...], ...], tuple[bool, ...]] | None:
    """The minimal DFA of ``d`` (row form) without its dead states, as the tables of a
    :class:`~structgen.grammar.Dfa` (start state 0); None when it accepts nothing."""
    trans, final = _to_lists(_core.minimise_rows(*d))
    live = _live_states(trans, final)
    if 0 not in live:
        return None
    keep = sorted(live)  # 0 stays first
    new = {s: i for i, s in enumerate(keep)}
    return (tuple(tuple((lo, hi, new[t]) for lo, hi, t in trans[s] if t in new) for s in keep),
            tuple(bool(final[s]) for s in keep))


def bound_length(e: Expr, lo: int, hi: int | None) -> Expr:
    """``e`` restricted to strings of ``lo`` to ``hi`` code points (``hi=None``: no maximum).

    Where the length is decided by a single repeat of fixed-length items (``[a-z]+``,
    ``https?://\\S*``, ``(ab)+``), the bounds are pushed into that repeat, so a large ``maxLength``
    stays one counted repeat instead of a product automaton with a state per length;
    otherwise (several variable parts) the regular intersection is computed.
    """
    pushed = _push_length(e, lo, hi)
    return pushed if pushed is not None else intersect(e, Repeat(CharSet(((0, MAX_CODEPOINT),)), lo, hi))


def _push_length(e: Expr, lo: int, hi: int | None) -> Expr | None:
    if isinstance(e, Alt):  # length bounds distribute over alternatives
        parts = [_push_length(o, lo, hi) for o in e.options]
        return None if any(p is None for p in parts) else alt(*parts)
    fixed = _fixed_length(e)
    if fixed is not None:
        return e if fixed >= lo and (hi is None or fixed <= hi) else NOTHING
    items = e.items if isinstance(e, Seq) else (e,)
    lengths = [_fixed_length(x) for x in items]
    variable = [i for i, n in enumerate(lengths) if n is None]
    if len(variable) > 1:  # split a small optional part ("s?") into its fixed-length cases
        for i in variable:
            cases = _fixed_cases(items[i])
            if cases is not None:
                parts = [_push_length(seq(*items[:i], c, *items[i + 1:]), lo, hi) for c in cases]
                return None if any(p is None for p in parts) else alt(*parts)
    if len(variable) != 1:
        return None
    i = variable[0]
    rep = items[i]
    width = _fixed_length(rep.item) if isinstance(rep, Repeat) else None
    if not width:  # not a repeat of one fixed, non-zero length: the count does not give the length
        return None
    rest = sum(n for n in lengths if n is not None)
    new_lo = max(rep.min, -(-(lo - rest) // width))  # ceil
    cap = None if hi is None else (hi - rest) // width
    new_hi = rep.max if cap is None else (cap if rep.max is None else min(rep.max, cap))
    if new_hi is not None and new_hi < new_lo:
        return NOTHING
    return seq(*items[:i], Repeat(rep.item, new_lo, new_hi), *items[i + 1:])


def _fixed_cases(e: Expr, limit: int = 4) -> list[Expr] | None:
    """``e`` as a few alternatives of one length each (``x?``, ``x{1,3}``, ``a|bc``), or None."""
    if isinstance(e, Repeat) and e.max is not None and e.max - e.min < limit and _fixed_length(e.item) is not None:
        return [Repeat(e.item, k, k) for k in range(e.min, e.max + 1)]
    if isinstance(e, Alt) and len(e.options) <= limit and all(_fixed_length(o) is not None for o in e.options):
        return list(e.options)
    return None


def _fixed_length(e: Expr) -> int | None:
    """The one length (in code points) every string of ``e`` has, or None."""
    if isinstance(e, Lit):
        return len(e.text)
    if isinstance(e, CharSet):
        return 1
    if isinstance(e, Seq):
        total = 0
        for x in e.items:
            n = _fixed_length(x)
            if n is None:
                return None
            total += n
        return total
    if isinstance(e, Alt):
        ns = {_fixed_length(o) for o in e.options}
        return ns.pop() if len(ns) == 1 else None
    if isinstance(e, Repeat) and e.min == e.max:
        n = _fixed_length(e.item)
        return None if n is None else n * e.min
    return None


def difference(a: Expr, b: Expr) -> Expr:
    """An expression matching the strings ``a`` matches and ``b`` does not (regular operands)."""
    if isinstance(a, Repeat) and isinstance(a.item, CharSet) and a.min == 0 and a.max is None:
        names = _literals(b)
        if names is not None:
            return star_minus_literals(a.item, names)
    return _eliminate(_nproduct(_ndfa(a), _ndfa(b), False))


def _literals(e: Expr) -> list[str] | None:
    """The strings of ``e`` when it is a literal or an alternation of literals, else None."""
    if isinstance(e, Lit):
        return [e.text]
    if isinstance(e, Alt) and all(isinstance(o, Lit) for o in e.options):
        return [o.text for o in e.options]
    return None


# JSON-string text (json.dumps(s, ensure_ascii=False)[1:-1]): raw characters, these short
# escapes, and \u00XX (lowercase hex) for the other controls
_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


@lru_cache(maxsize=4096)  # the same few classes (any string character, \\w, ...) recur in every schema
def json_text_charset(cs: CharSet) -> Expr:
    """Characters of a decoded string → their JSON-string encodings (raw or escaped), compactly:
    control characters without a short escape share one ``\\u00XX`` branch per high digit."""
    if all(a > 0x5C or (a > 0x22 and b < 0x5C) or (a > 0x1F and b < 0x22) for a, b in cs.ranges):
        # nothing to escape (printable ASCII classes mostly): the set is its own encoding,
        # where the loop below visited each code point up to 0x5C
        return cs
    raw = cs.minus(CharSet.of([(0x22, 0x22), (0x5C, 0x5C), (0x00, 0x1F)]))
    options: list[Expr] = [raw] if raw.ranges else []
    by_high: dict[int, list[int]] = {}
    for a, b in cs.ranges:
        for cp in range(a, min(b, 0x5C) + 1):
            if cp in _SHORT_ESCAPES:
                options.append(Lit(_SHORT_ESCAPES[cp]))
            elif cp < 0x20:
                by_high.setdefault(cp >> 4, []).append(cp & 0xF)
    if by_high:
        hex_digit = lambda d: ord(f"{d:x}")  # noqa: E731 - json.dumps writes lowercase hex
        options.append(seq(Lit("\\u00"), alt(*(
            seq(Lit(str(hi)), CharSet.of([(hex_digit(d), hex_digit(d)) for d in lows]))
            for hi, lows in sorted(by_high.items())))))
    return alt(*options)


@lru_cache(maxsize=1024)  # schemas repeat their patterns (and so their encoded forms) across properties
def json_text_expr(e: Expr) -> Expr:
    """Map a regex over decoded characters to one over the JSON-encoded text."""
    return _json_text(e)


def _json_text(e: Expr) -> Expr:
    if isinstance(e, CharSet):
        return json_text_charset(e)
    if isinstance(e, Lit):
        # (json.dumps(text, ensure_ascii=False) without the encoder json.dumps builds per call)
        return Lit(encode_basestring(e.text)[1:-1])
    if isinstance(e, Seq):
        return seq(*(_json_text(x) for x in e.items))
    if isinstance(e, Alt):
        return alt(*(_json_text(x) for x in e.options))
    if isinstance(e, Repeat):
        return Repeat(_json_text(e.item), e.min, e.max)
    if isinstance(e, Dfa):
        return map_automaton(e, json_text_charset)
    raise TypeError(f"unexpected regex node {e!r}")


def star_minus_literals(chars: CharSet, names: Iterable[str], *, json_text: bool = False) -> Expr:
    """``chars*`` minus a finite set of strings, as an automaton built from their trie.

    The common case is an object's undeclared member names: any string but the declared keys.
    The trie's nodes are the states; a character no name continues with leads out of the trie
    to a copy of ``chars*``, where anything may follow (``_core.names_except``, linear in the
    total length of the names). The general route (two DFAs, their product, then an
    expression of the result) took tens of ms per object; an expression of the trie, built
    and then taken apart again by the rule's subset construction, was still an eighth of
    compiling a median schema.

    ``json_text``: the strings are the JSON-string texts of those strings
    (``json.dumps(s, ensure_ascii=False)[1:-1]``: raw characters, short escapes, ``\\u00XX``
    for the other controls), as a member name is written between its quotes.

    Results are cached: large schemas repeat the same declared names in many objects
    (o15627 of MaskBench: 119 objects, 28 distinct name lists), and a service compiles
    related schemas again and again.
    """
    return _star_minus_literals(chars, tuple(names), json_text)


@lru_cache(maxsize=128)
def _star_minus_literals(chars: CharSet, names: tuple[str, ...], json_text: bool) -> Expr:
    built = _core.names_except(chars.ranges, names, json_text)
    if built is None:
        return NOTHING
    trans, final = built
    # the label names the language (equality and hashing use it alone)
    label = f"{'JSON text of ' if json_text else ''}{chars.ranges!r}* but {names!r}"
    return Dfa(label, trans, final, partial(_names_expression, chars, names, json_text))


def _names_expression(chars: CharSet, names: tuple[str, ...], json_text: bool) -> Expr:
    """:func:`star_minus_literals`'s language as an expression, for printing a grammar as Lark:
    per trie node, the empty string unless a name ends there, each child's character and
    then the child's expression, and a character no name goes on with and then anything."""
    trie: dict = {}
    for name in names:
        if all(ord(c) in chars for c in name):
            node = trie
            for c in name:
                node = node.setdefault(c, {})
            node[""] = {}
    tail = Repeat(chars, 0, None)

    def walk(node: dict) -> Expr:
        kids = sorted(k for k in node if k)
        options = [] if "" in node else [EMPTY]
        options += [seq(Lit(c), walk(node[c])) for c in kids]
        leave = chars.minus(CharSet.of([(ord(c), ord(c)) for c in kids]))
        if leave.ranges:
            options.append(seq(leave, tail))
        return alt(*options)

    e = walk(trie)
    del walk  # (a recursive closure is a reference cycle, left to the collector)
    return json_text_expr(e) if json_text else e


