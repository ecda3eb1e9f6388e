"""Grammar → byte-level pushdown automaton: one minimal DFA per recursive rule.

Every rule that is not part of a reference cycle is inlined into its callers, so a grammar
without recursion (most JSON Schemas) becomes a single DFA over bytes. Rules on a cycle
(``value`` in the JSON grammar, recursive ``$ref``s) stay separate and are reached through
*call edges*: a DFA state may, besides its byte transitions, call rule ``R`` and continue in
a return state once ``R`` has matched. The matcher runs the resulting pushdown automaton.

Pipeline per rule: expression → Thompson NFA over byte ranges (code points are expanded to
UTF-8 byte sequences) → subset construction → trimming of states that cannot reach an
accepting state (given which rules can match at all) → Hopcroft minimisation. Subset
construction and minimisation run in the native core (structgen._core).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from itertools import chain
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from . import _core
from .counters import CounterRule, lift_counters
from .errors import AutomatonSizeError, EmptyGrammarError, GrammarError
from .grammar import Alt, CharSet, Dfa, Expr, Grammar, Lit, Ref, Regex, Repeat, Seq, expr_size, iter_refs, referenced_names
from .regex import parse_regex
from .utf8 import charset_to_byte_sequences

__all__ = ["RuleDFA", "PushdownAutomaton", "build_automaton", "completion_distances", "DEFAULT_MAX_STATES", "UNREACHABLE"]

DEFAULT_MAX_STATES = 50_000
"""Default limit on NFA and DFA states of one grammar (raise with ``max_states=``)."""


@dataclass(frozen=True, slots=True)
class RuleDFA:
    """The minimal DFA of one rule; state 0 is the start state.

    Attributes:
        name: the rule name in the grammar.
        trans: ``(n, 256)`` int32, next state per byte, -1 where the byte is rejected.
        final: ``(n,)`` bool, the rule may end here.
        calls: per state, ``(callee_rule_index, return_state)`` pairs.
    """

    name: str
    trans: np.ndarray
    final: np.ndarray
    calls: tuple[tuple[tuple[int, int], ...], ...]

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])


@dataclass(frozen=True, slots=True)
class PushdownAutomaton:
    """The rules that remain after inlining; ``root`` is the index of the start rule."""

    rules: tuple[RuleDFA | CounterRule, ...]
    root: int

    @property
    def num_states(self) -> int:
        """DFA states; a counter counts as one (its states are virtual)."""
        return sum(1 if isinstance(r, CounterRule) else r.num_states for r in self.rules)


# --------------------------------------------------------------------------- NFA


class _NFA:
    """Thompson NFA with byte-range, epsilon and call edges (mutable, build-time only)."""

    def __init__(self, max_states: int) -> None:
        self.eps: list[list[int]] = []
        self.bytes: list[list[tuple[int, int, int]]] = []
        self.calls: list[list[tuple[int, int]]] = []
        self.max_states = max_states

    def new(self) -> int:
        if len(self.eps) >= self.max_states:
            raise _too_large("NFA", len(self.eps) + 1, self.max_states)
        self.eps.append([])
        self.bytes.append([])
        self.calls.append([])
        return len(self.eps) - 1


class _NFABuilder:
    def __init__(self, rules: Mapping[str, Expr], called: dict[str, int], max_states: int) -> None:
        self.rules = rules
        self.called = called
        self.nfa = _NFA(max_states)
        self._regex_cache: dict[tuple[str, str], Expr] = {}
        self._inlining: list[str] = []
        self._shared: dict[tuple[str, int], int] = {}

    def build(self, e: Expr, a: int, b: int) -> None:
        nfa = self.nfa
        if isinstance(e, Lit):
            data = e.text.encode("utf-8")
            cur = a
            for i, byte in enumerate(data):
                nxt = b if i == len(data) - 1 else nfa.new()
                nfa.bytes[cur].append((byte, byte, nxt))
                cur = nxt
            if not data:
                nfa.eps[a].append(b)
        elif isinstance(e, CharSet):
            for byte_seq in charset_to_byte_sequences(e):
                cur = a
                for i, (lo, hi) in enumerate(byte_seq):
                    nxt = b if i == len(byte_seq) - 1 else nfa.new()
                    nfa.bytes[cur].append((lo, hi, nxt))
                    cur = nxt
        elif isinstance(e, Regex):
            key = (e.pattern, e.flags)
            if key not in self._regex_cache:
                self._regex_cache[key] = parse_regex(e.pattern, e.flags)
            self.build(self._regex_cache[key], a, b)
        elif isinstance(e, Seq):
            cur = a
            for i, item in enumerate(e.items):
                nxt = b if i == len(e.items) - 1 else nfa.new()
                self.build(item, cur, nxt)
                cur = nxt
            if not e.items:
                nfa.eps[a].append(b)
        elif isinstance(e, Alt):
            for o in e.options:
                s, t = nfa.new(), nfa.new()
                nfa.eps[a].append(s)
                nfa.eps[t].append(b)
                self.build(o, s, t)
        elif isinstance(e, Repeat):
            cur = a
            for _ in range(e.min):
                nxt = nfa.new()
                self.build(e.item, cur, nxt)
                cur = nxt
            if e.max is None:
                s, t = nfa.new(), nfa.new()
                nfa.eps[cur].append(s)
                nfa.eps[cur].append(b)
                nfa.eps[t].append(s)
                nfa.eps[t].append(b)
                self.build(e.item, s, t)
            else:
                # Nested optionals: item (item (item)?)? — linear in max - min.
                for _ in range(e.max - e.min):
                    nfa.eps[cur].append(b)
                    nxt = nfa.new()
                    self.build(e.item, cur, nxt)
                    cur = nxt
                nfa.eps[cur].append(b)
        elif isinstance(e, Dfa):
            # one NFA state per automaton state; accepting states step to b without a byte
            states = [nfa.new() for _ in e.trans]
            nfa.eps[a].append(states[0])
            for src, row in enumerate(e.trans):
                if e.final[src]:
                    nfa.eps[states[src]].append(b)
                for lo, hi, dst in row:
                    if hi < 0x80:  # ASCII: one byte (the digits of a multiple-of-k automaton)
                        nfa.bytes[states[src]].append((lo, hi, states[dst]))
                    else:
                        self.build(CharSet(((lo, hi),)), states[src], states[dst])
        elif isinstance(e, Ref):
            if e.name in self.called:
                self.nfa.calls[a].append((self.called[e.name], b))
            else:
                # A rule fragment only exits through its end state, so every reference to
                # the same rule ending in the same state can share one copy (this keeps
                # "suffix" rules, as in objects with many optional members, linear).
                start = self._shared.get((e.name, b))
                if start is None:
                    if e.name in self._inlining:  # cannot happen: cycles are called, not inlined
                        raise GrammarError(f"internal: recursive inlining of {e.name!r}")
                    start = self._shared[(e.name, b)] = nfa.new()
                    self._inlining.append(e.name)
                    self.build(self.rules[e.name], start, b)
                    self._inlining.pop()
                nfa.eps[a].append(start)
        else:
            raise TypeError(f"not a grammar expression: {e!r}")


# --------------------------------------------------------------------------- DFA


def _too_large(kind: str, reached: int, limit: int) -> AutomatonSizeError:
    return AutomatonSizeError(
        f"the grammar's automaton needs more than {limit:,} {kind} states (construction stopped at "
        f"{reached:,}); simplify the schema (smaller maxLength/maxItems/bounded repeats, fewer enum "
        f"values) or raise the limit: GrammarCompiler(tokenizer_info, max_states=N) (default "
        f"{DEFAULT_MAX_STATES:,})",
        limit=limit, reached=reached,
    )


def _determinise(nfa: _NFA, start: int, end: int, max_states: int, used: int = 0):
    """Subset construction (native). Returns (trans (n,256) int32, final bool[n], calls per state).

    ``used`` states of other rules already count against ``max_states``. The rule's NFA is the
    slice of ``nfa`` from ``start`` on: every state its build creates comes after ``start``
    (shared fragments are keyed by an end state of the same build), so only that slice is
    handed to the core, as flat arrays."""
    eps, byts, calls = nfa.eps[start:], nfa.bytes[start:], nfa.calls[start:]
    n = len(eps)

    def offsets(lists) -> np.ndarray:
        out = np.zeros(n + 1, np.int64)
        np.cumsum(np.fromiter(map(len, lists), np.int64, n), out=out[1:])
        return out

    def edges(lists, width: int) -> np.ndarray:
        """(edges, width) int32 of tuples whose last entry is an NFA state, made slice-local."""
        arr = np.fromiter(chain.from_iterable(chain.from_iterable(lists)), np.int32).reshape(-1, width)
        arr[:, -1] -= start
        return arr

    eps_tgt = np.fromiter(chain.from_iterable(eps), np.int32) - np.int32(start)
    out = _core.determinise(offsets(eps), eps_tgt, offsets(byts), edges(byts, 3), offsets(calls), edges(calls, 2),
                            0, end - start, max_states, used)
    if len(out) == 1:
        raise _too_large("DFA", int(out[0]), max_states)
    trans, final, call_off, call_edge = out
    pairs = call_edge.tolist()
    bounds = call_off.tolist()
    return trans, final, [tuple(map(tuple, pairs[bounds[i]:bounds[i + 1]])) for i in range(len(final))]


def _distinct_columns(trans: np.ndarray) -> list[int]:
    """The first byte of each distinct column of ``trans``, ascending (a DFA treats most bytes
    alike: typically tens of distinct columns). A dict of column bytes measured faster than
    ``np.unique(axis=1)`` and than random linear hashes in numpy (integer matmul)."""
    ids: dict[bytes, int] = {}
    return [b for b, col in enumerate(np.ascontiguousarray(trans.T)) if ids.setdefault(col.tobytes(), b) == b]


def _byte_predecessors(trans: np.ndarray) -> tuple[list[int], list[int]]:
    """Predecessors by byte edges as CSR lists: the sources of state ``t`` are
    ``sources[starts[t]:starts[t + 1]]`` (each once), built in numpy from the distinct columns."""
    n = trans.shape[0]
    t = trans[:, _distinct_columns(trans)]
    src = np.repeat(np.arange(n, dtype=np.int64), t.shape[1])
    tgt = t.ravel().astype(np.int64)
    ok = tgt >= 0
    pairs = np.unique(tgt[ok] * n + src[ok])  # sorted by target, deduplicated
    starts = np.searchsorted(pairs // n, np.arange(n + 1))
    return starts.tolist(), (pairs % n).tolist()


def _coaccessible(trans, final, calls, productive: set[int], preds=None) -> np.ndarray:
    """States from which an accepting state is reachable (calls only into productive rules).

    ``preds``: ``_byte_predecessors(trans)`` when the caller already has it."""
    starts, sources = preds if preds is not None else _byte_predecessors(trans)
    call_preds: dict[int, list[int]] = {}
    for s, cs in enumerate(calls):
        for callee, t in cs:
            if callee in productive:
                call_preds.setdefault(t, []).append(s)
    ok = np.asarray(final, dtype=bool).copy()
    seen = ok.tolist()
    stack = np.flatnonzero(ok).tolist()
    while stack:
        t = stack.pop()
        for s in sources[starts[t]:starts[t + 1]]:
            if not seen[s]:
                seen[s] = True
                stack.append(s)
        for s in call_preds.get(t, ()):
            if not seen[s]:
                seen[s] = True
                stack.append(s)
    return np.array(seen, dtype=bool)


def _minimal_blocks(trans: np.ndarray, final: np.ndarray, calls) -> tuple[np.ndarray, int]:
    """Equivalent states of a trimmed DFA (native Hopcroft): a block id per state, numbered in
    order of first appearance from state 0, and the number of blocks. Calls count as letters
    (callee -> return state), as bytes do."""
    call_off = np.zeros(len(calls) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, calls), np.int64, len(calls)), out=call_off[1:])
    call_edge = np.fromiter(chain.from_iterable(chain.from_iterable(calls)), np.int32).reshape(-1, 2)
    return _core.minimise(np.ascontiguousarray(trans, np.int32), np.ascontiguousarray(final, bool), call_off, call_edge)


def _trim_and_minimise(trans, final, calls, keep: np.ndarray, productive: set[int]):
    """Drop dead states, then merge equivalent ones (Hopcroft, native); start stays 0."""
    n = trans.shape[0]
    trans = np.where((trans >= 0) & keep[np.clip(trans, 0, None)], trans, -1)
    dropped_call = any(c not in productive for s, cs in enumerate(calls) if keep[s] for c, _ in cs)
    calls = [
        tuple((c, t) for c, t in cs if c in productive and keep[t]) if keep[s] else ()
        for s, cs in enumerate(calls)
    ]
    if dropped_call:
        # a state reached only through a call into a rule that matches nothing is unreachable
        # now; without such calls every kept state still is reachable (a path from the start to
        # a state that can reach an end only passes states that can too), so no search
        succ = trans[:, _distinct_columns(trans)].tolist()
        reach = [False] * n
        reach[0] = True
        stack = [0]
        while stack:
            s = stack.pop()
            for t in succ[s]:
                if t >= 0 and not reach[t]:
                    reach[t] = True
                    stack.append(t)
            for _, t in calls[s]:
                if not reach[t]:
                    reach[t] = True
                    stack.append(t)
        live = np.flatnonzero(reach)
    else:
        live = np.flatnonzero(keep)
    remap = np.full(n + 1, -1, dtype=np.int64)
    remap[live] = np.arange(len(live))
    trans = remap[trans[live]]  # -1 maps through remap[-1] == -1
    final = final[live]
    calls = [tuple((c, int(remap[t])) for c, t in calls[s]) for s in live]
    block, nblocks = _minimal_blocks(trans, final, calls)  # the start state's block is 0
    rep = np.zeros(nblocks, dtype=np.int64)
    rep[block[::-1]] = np.arange(len(block))[::-1]  # first state of each block
    m_trans = np.where(trans[rep] >= 0, block[np.clip(trans[rep], 0, None)], -1).astype(np.int32)
    m_final = final[rep]
    m_calls = tuple(tuple((c, int(block[t])) for c, t in calls[r]) for r in rep)
    return m_trans, m_final, m_calls


# --------------------------------------------------------------------------- grammar analysis


def _recursive_rules(rules: Mapping[str, Expr]) -> set[str]:
    """Rules on a reference cycle (Tarjan's SCC, iterative)."""
    graph = {n: sorted(referenced_names(e)) for n, e in rules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: set[str] = set()
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            recurse = False
            for j in range(i, len(graph[v])):
                w = graph[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph[v]:
                    result.update(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return result


INLINE_LIMIT = 400
"""Rules used in several places are called, not copied, when larger than this (expression nodes)."""
SPLIT_LIMIT = 10_000
"""A rule whose inlined NFA would pass this many states (estimated) calls its largest parts instead."""


def _large_shared_rules(rules: Mapping[str, Expr], recursive: set[str]) -> set[str]:
    """Non-recursive rules to call rather than inline: those referenced from several places
    whose inlined size is large, and, inside a rule whose inlined NFA would pass SPLIT_LIMIT
    states (estimated), its largest references until it would not (each called rule is
    determinised on its own, so no single NFA or subset construction holds a whole large
    schema; ``max_states`` is still checked exactly while they are built)."""
    uses: dict[str, int] = {}
    for body in rules.values():
        for name in iter_refs(body):
            uses[name] = uses.get(name, 0) + 1
    called = set(recursive)
    sizes: dict[str, int] = {}
    weighed = False  # False: expression nodes; True: estimated NFA states

    def esize(e: Expr) -> int:
        if isinstance(e, Ref):
            return 1 if e.name in called else size_of(e.name)
        if isinstance(e, Seq):
            return 1 + sum(esize(x) for x in e.items)
        if isinstance(e, Alt):
            return (1 + 2 * weighed) + sum(esize(x) for x in e.options)
        if isinstance(e, Repeat):
            return 1 + esize(e.item) * max(1, e.max or e.min)
        if weighed and isinstance(e, Lit):
            return len(e.text.encode("utf-8"))
        if weighed and isinstance(e, CharSet):
            return 1 + 2 * len(e.ranges)
        if weighed and isinstance(e, Dfa):
            return len(e.trans)
        if weighed and isinstance(e, Regex):
            return 2 * len(e.pattern)
        return 1

    def size_of(name: str) -> int:
        if name not in sizes:
            sizes[name] = 1  # non-recursive rules form a DAG: no real cycle here
            sizes[name] = esize(rules[name])
        return sizes[name]

    shared = {n for n, k in uses.items() if k > 1 and n not in recursive and size_of(n) > INLINE_LIMIT}
    called |= shared
    sizes.clear()
    weighed = True
    split: set[str] = set()
    for name in rules:
        body = rules[name]
        while size_of(name) > SPLIT_LIMIT:
            kids = {c for c in iter_refs(body) if c not in called}
            largest = max(kids, key=size_of, default=None)
            if largest is None or size_of(largest) <= INLINE_LIMIT:
                break
            called.add(largest)
            split.add(largest)
            sizes[name] = esize(body)
    return shared | split


def _check_left_recursion(dfas: list[tuple], names: list[str]) -> None:
    """Reject left recursion: a rule that can call itself without consuming a byte."""
    n = len(dfas)
    nullable: set[int] = set()
    changed = True
    while changed:
        changed = False
        for r in range(n):
            if r not in nullable and _reaches_without_bytes(dfas[r], nullable)[1]:
                nullable.add(r)
                changed = True
    left_calls = {r: _reaches_without_bytes(dfas[r], nullable)[0] for r in range(n)}
    # cycle detection on the left-call graph
    state = [0] * n
    for start in range(n):
        if state[start]:
            continue
        path = [start]
        iters = [iter(sorted(left_calls[start]))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state[nxt] == 1:
                cyc = path[path.index(nxt):] + [nxt]
                raise GrammarError(
                    "left recursion is not supported: "
                    + " -> ".join(names[i] for i in cyc)
                    + " can recurse without consuming input; rewrite it with repetition (x*)"
                )
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(left_calls[nxt])))


def _reaches_without_bytes(dfa, nullable: set[int]) -> tuple[set[int], bool]:
    trans, final, calls = dfa
    seen = {0}
    stack = [0]
    callees: set[int] = set()
    while stack:
        s = stack.pop()
        for c, t in calls[s]:
            callees.add(c)
            if c in nullable and t not in seen:
                seen.add(t)
                stack.append(t)
    return callees, any(final[s] for s in seen)


# --------------------------------------------------------------------------- entry point


# Rule automata shared between compiles (and compilers) of one process. A rule's DFA
# depends only on its body, the bodies it inlines and the names of the rules it calls, so
# rules every schema has (any JSON value: most objects allow undeclared members) are built
# once: a plain object schema took 60 ms, nearly all in building that rule again.
_RAW_CACHE: OrderedDict = OrderedDict()
_MIN_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 256
_CACHE_LOCK = threading.Lock()
_KEY_LIMIT = 2000  # bodies larger than this are schema-specific: not worth hashing


def _remember(cache: OrderedDict, key, value) -> None:
    with _CACHE_LOCK:
        cache[key] = value
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)


def _rule_key(rules: Mapping[str, Expr], called: dict[str, int], name: str):
    """What the DFA of called rule ``name`` depends on, or None if too large to be worth it."""
    bodies: dict[str, Expr] = {}
    calls: set[str] = set()
    stack = [name]
    while stack:
        n = stack.pop()
        if n in bodies:
            continue
        bodies[n] = rules[n]
        for ref in iter_refs(rules[n]):
            if ref in called:
                calls.add(ref)
            elif ref not in bodies:
                stack.append(ref)
    if sum(expr_size(b, _KEY_LIMIT) for b in bodies.values()) >= _KEY_LIMIT:
        return None
    return name, tuple(sorted(bodies.items(), key=lambda kv: kv[0])), tuple(sorted(calls))


def build_automaton(
    grammar: Grammar, *, max_states: int = DEFAULT_MAX_STATES, byte_alphabet: np.ndarray | None = None
) -> PushdownAutomaton:
    """Compile a grammar into a pushdown automaton of minimal per-rule byte DFAs.

    Args:
        byte_alphabet: optional bool ``(256,)``: the bytes some token contains; others are removed.

    Raises:
        GrammarError: the language is empty, or a rule is left-recursive.
        AutomatonSizeError: more than ``max_states`` NFA or DFA states would be built.
    """
    rules, counters = lift_counters(grammar.rules)
    # for the analyses a counter is a rule that refers to its item
    shape = {**rules, **{c: Ref(item) for c, (item, _, _) in counters.items()}}
    recursive = _recursive_rules(shape)
    shared = _large_shared_rules(shape, recursive)
    lifted = set(counters) | {item for item, _, _ in counters.values()}
    called_names = [grammar.start] + sorted(n for n in recursive | shared | lifted if n != grammar.start)
    called = {n: i for i, n in enumerate(called_names)}
    builder = _NFABuilder(rules, called, max_states)
    raw = []
    keys = []
    total = 0
    for name in called_names:
        if name in counters:
            # a two-state stand-in with the counter's nullability, productivity and left
            # calls: "call the item once, then end" (lo == 0: may also end at once)
            item, lo, _ = counters[name]
            keys.append(None)
            raw.append((np.full((2, 256), -1, np.int32), np.array([lo == 0, True]), [((called[item], 1),), ()]))
            total += 2
            continue
        key = _rule_key(rules, called, name)
        keys.append(key)
        hit = _RAW_CACHE.get(key) if key is not None else None
        if hit is not None:
            if total + hit[0].shape[0] > max_states:
                raise _too_large("DFA", total + hit[0].shape[0], max_states)
            dfa = (hit[0].copy(), hit[1], tuple(tuple((called[c], t) for c, t in cs) for cs in hit[2]))
        else:
            # each rule's NFA is its own (fragments are shared within a build only), so
            # max_states bounds the NFA of one rule, the DFAs of all
            builder.nfa, builder._shared = _NFA(max_states), {}
            s, t = builder.nfa.new(), builder.nfa.new()
            builder.build(rules[name], s, t)
            dfa = _determinise(builder.nfa, s, t, max_states, total)
            # minimal before it is counted and kept (every callee taken as productive here:
            # exact, merging only states with the same future; trimming comes below)
            m_trans, m_final, m_calls = _trim_and_minimise(*dfa, np.ones(len(dfa[1]), bool), set(range(len(called))))
            dfa = (m_trans, m_final, list(m_calls))
            if key is not None:
                _remember(_RAW_CACHE, key, (dfa[0].copy(), dfa[1], tuple(
                    tuple((called_names[c], t) for c, t in cs) for cs in dfa[2])))
        if byte_alphabet is not None:
            # bytes no token contains can never be produced: drop them before trimming, so
            # no state is kept whose only way forward needs one (no dead ends in the masks)
            dfa[0][:, ~byte_alphabet] = -1
        total += dfa[0].shape[0]
        raw.append(dfa)
    _check_left_recursion(raw, called_names)
    # productive rules: fixpoint over "start state can reach a final state"
    productive: set[int] = set()
    preds: list = [None] * len(raw)  # per rule, built on first use: the fixpoint and trimming share them
    changed = True
    while changed:
        changed = False
        for r, (trans, final, calls) in enumerate(raw):
            if r in productive:
                continue
            if preds[r] is None:
                preds[r] = _byte_predecessors(trans)
            if _coaccessible(trans, final, calls, productive, preds[r])[0]:
                productive.add(r)
                changed = True
    if 0 not in productive:
        raise EmptyGrammarError(f"the grammar matches no string at all (rule {grammar.start!r} is empty)")
    out = []
    for r, (trans, final, calls) in enumerate(raw):
        if r not in productive:  # unreachable after trimming; keep a placeholder rejecting all
            out.append(RuleDFA(called_names[r], np.full((1, 256), -1, np.int32), np.zeros(1, bool), ((),)))
            continue
        if called_names[r] in counters:
            item, lo, hi = counters[called_names[r]]
            productive_item = called[item] in productive  # else lo == 0: only the empty match
            out.append(CounterRule(called_names[r], called[item], lo, hi if productive_item else 0))
            continue
        key = None
        if keys[r] is not None:
            callees = {called_names[c] for cs in calls for c, _ in cs}
            key = (keys[r], frozenset(n for n in callees if called[n] in productive),
                   None if byte_alphabet is None else byte_alphabet.tobytes())
        hit = _MIN_CACHE.get(key) if key is not None else None
        if hit is not None:
            m_trans, m_final = hit[0], hit[1]
            m_calls = tuple(tuple((called[c], t) for c, t in cs) for cs in hit[2])
        else:
            keep = _coaccessible(trans, final, calls, productive, preds[r])
            m_trans, m_final, m_calls = _trim_and_minimise(trans, final, calls, keep, productive)
            if key is not None:
                m_trans.setflags(write=False)
                m_final.setflags(write=False)
                _remember(_MIN_CACHE, key, (m_trans, m_final, tuple(
                    tuple((called_names[c], t) for c, t in cs) for cs in m_calls)))
        out.append(RuleDFA(called_names[r], m_trans, m_final, m_calls))
    return PushdownAutomaton(tuple(out), 0)


# --------------------------------------------------------------------------- shortest completions

UNREACHABLE = 1 << 60
"""Distance of a state from which a rule cannot end (never kept after trimming)."""


def completion_distances(pda: PushdownAutomaton) -> tuple[np.ndarray, ...]:
    """Per rule, per state: the fewest bytes from that state to the rule's end.

    A call costs its callee's shortest match. Computed at compile time as a fixed point over
    the rules (each round is one Dijkstra per rule, backwards from the final states; rounds
    stop when no rule's shortest match changes, at most ``len(rules) + 1``). Trimming keeps
    only states that can reach an end, so every entry is finite for a compiled grammar: no
    state of any rule is a trap, and a configuration's shortest completion is the cheapest
    of its stacks (each frame's distance plus those of the return states below it).

    Returns int64 arrays, ``UNREACHABLE`` where a rule cannot end.
    """
    import heapq

    rules = pda.rules
    preds = [None if isinstance(rule, CounterRule) else _byte_predecessors(rule.trans) for rule in rules]
    minlen = [UNREACHABLE] * len(rules)
    dist: list[list[int]] = []
    for _ in range(len(rules) + 1):
        dist = []
        for r, rule in enumerate(rules):
            if isinstance(rule, CounterRule):  # lo - k more items, each at least the item's shortest
                dist.append(CounterDistances(rule.lo, minlen[rule.body], rule.num_states))
                continue
            starts, sources = preds[r]
            d = [UNREACHABLE] * rule.num_states
            heap = [(0, s) for s in np.flatnonzero(rule.final).tolist()]
            for _, s in heap:
                d[s] = 0
            call_preds: dict[int, list[tuple[int, int]]] = {}
            for s, calls in enumerate(rule.calls):
                for callee, ret in calls:
                    if minlen[callee] < UNREACHABLE:
                        call_preds.setdefault(ret, []).append((s, minlen[callee]))
            while heap:
                ds, s = heapq.heappop(heap)
                if ds > d[s]:
                    continue
                for a in sources[starts[s]:starts[s + 1]]:
                    if ds + 1 < d[a]:
                        d[a] = ds + 1
                        heapq.heappush(heap, (ds + 1, a))
                for a, cost in call_preds.get(s, ()):
                    if ds + cost < d[a]:
                        d[a] = ds + cost
                        heapq.heappush(heap, (ds + cost, a))
            dist.append(d)
        new = [d[0] for d in dist]
        if new == minlen:
            break
        minlen = new
    return tuple(d if isinstance(d, CounterDistances) else np.array(d, dtype=np.int64) for d in dist)


class CounterDistances:
    """Completion distances of a counter's virtual states: ``max(lo - k, 0) * item_min``."""

    __slots__ = ("lo", "item_min", "n")

    def __init__(self, lo: int, item_min: int, n: int) -> None:
        self.lo, self.item_min, self.n = lo, item_min, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> int:
        left = self.lo - k
        if left <= 0:
            return 0
        return UNREACHABLE if self.item_min >= UNREACHABLE else min(left * self.item_min, UNREACHABLE)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CounterDistances) and (self.lo, self.item_min, self.n) == (other.lo, other.item_min, other.n)
