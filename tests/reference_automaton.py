"""The reference automaton stages (test oracle), in pure Python: Thompson construction over the
serialized expression nodes (structgen/regex/expr_arrays.py), subset construction over Python sets
and Moore refinement in numpy rounds, the way structgen built rule DFAs before the native core.

tests/test_native_automaton.py swaps them in for the native ``_rule_dfa`` and
``_trim_and_minimise`` of structgen.index.automaton and checks that every rule DFA comes out equal,
array for array.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from structgen.index.automaton import UNREACHABLE, _calls_csr, _too_large
from structgen.index.counters import CounterRule
from structgen.grammar import Alt, CharSet, Dfa, Expr, Lit, Ref, Regex, Repeat, Seq
from structgen.regex.expr_arrays import ALT, CALL, EGRAPH, GRAPH, INLINE, LIT, REGEX, REP, SEQ, SET
from structgen.regex.utf8 import utf8_sequences


def _distinct_columns(trans: np.ndarray) -> list[int]:
    """The first byte of each distinct column of ``trans``, ascending (a DFA treats most bytes
    alike: typically tens of distinct columns). A dict of column bytes measured faster than
    ``np.unique(axis=1)`` and than random linear hashes in numpy (integer matmul)."""
    ids: dict[bytes, int] = {}
    return [b for b, col in enumerate(np.ascontiguousarray(trans.T)) if ids.setdefault(col.tobytes(), b) == b]


class _NFA:
    """Thompson NFA with byte-range, epsilon and call edges."""

    def __init__(self, max_states: int, used: int) -> None:
        self.eps: list[list[int]] = []
        self.bytes: list[list[tuple[int, int, int]]] = []
        self.calls: list[list[tuple[int, int]]] = []
        self.max_states = max_states
        self.used = used

    def new(self) -> int:
        if self.used + len(self.eps) >= self.max_states:
            raise _too_large("NFA", self.used + len(self.eps) + 1, self.max_states)
        self.eps.append([])
        self.bytes.append([])
        self.calls.append([])
        return len(self.eps) - 1


class _Builder:
    """Byte-level Thompson construction of serialized expression nodes."""

    def __init__(self, nodes: np.ndarray, data: np.ndarray, nfa: _NFA) -> None:
        self.nodes = nodes.tolist()
        self.data = data.tolist()
        self.nfa = nfa
        self.shared: dict[tuple[int, int], int] = {}

    def chain(self, a: int, b: int, ranges) -> None:
        cur = a
        for i, (lo, hi) in enumerate(ranges):
            nxt = b if i == len(ranges) - 1 else self.nfa.new()
            self.nfa.bytes[cur].append((lo, hi, nxt))
            cur = nxt

    def charset(self, a: int, b: int, ranges) -> None:
        for lo, hi in ranges:
            for seq in utf8_sequences(lo, hi):
                self.chain(a, b, seq)

    def build(self, i: int, a: int, b: int) -> None:
        nfa, data = self.nfa, self.data
        kind, x, y, z = self.nodes[i]
        if kind == LIT:
            raw = "".join(map(chr, data[x:x + y])).encode("utf-8")
            if raw:
                self.chain(a, b, [(c, c) for c in raw])
            else:
                nfa.eps[a].append(b)
        elif kind == SET:
            self.charset(a, b, [(data[x + 2 * k], data[x + 2 * k + 1]) for k in range(y)])
        elif kind == SEQ:
            items = data[x:x + y]
            cur = a
            for k, item in enumerate(items):
                nxt = b if k == len(items) - 1 else nfa.new()
                self.build(item, cur, nxt)
                cur = nxt
            if not items:
                nfa.eps[a].append(b)
        elif kind == ALT:
            for o in data[x:x + y]:
                s, t = nfa.new(), nfa.new()
                nfa.eps[a].append(s)
                nfa.eps[t].append(b)
                self.build(o, s, t)
        elif kind == REP:
            cur = a
            for _ in range(y):
                nxt = nfa.new()
                self.build(x, cur, nxt)
                cur = nxt
            if z < 0:
                s, t = nfa.new(), nfa.new()
                nfa.eps[cur] += [s, b]
                nfa.eps[t] += [s, b]
                self.build(x, s, t)
            else:
                for _ in range(z - y):
                    nfa.eps[cur].append(b)
                    nxt = nfa.new()
                    self.build(x, cur, nxt)
                    cur = nxt
                nfa.eps[cur].append(b)
        elif kind == REGEX:
            self.build(x, a, b)
        elif kind == CALL:
            nfa.calls[a].append((x, b))
        elif kind == INLINE:
            start = self.shared.get((x, b))
            if start is None:
                start = self.shared[(x, b)] = nfa.new()
                self.build(y, start, b)
            nfa.eps[a].append(start)
        elif kind in (GRAPH, EGRAPH):
            d = data[x:x + y]
            n = d[0]
            states = [nfa.new() for _ in range(n)]
            fin = d[1:1 + n]
            k = 1 + n
            nfa.eps[a].append(states[0])
            for src in range(n):
                if fin[src]:
                    nfa.eps[states[src]].append(b)
                cnt = d[k]
                k += 1
                for _ in range(cnt):
                    if kind == GRAPH:
                        lo, hi, dst = d[k:k + 3]
                        k += 3
                        if hi < 0x80:
                            nfa.bytes[states[src]].append((lo, hi, states[dst]))
                        else:
                            self.charset(states[src], states[dst], [(lo, hi)])
                    else:
                        sub, dst = d[k:k + 2]
                        k += 2
                        self.build(sub, states[src], states[dst])
        else:
            raise ValueError(f"unknown node kind {kind}")


def determinise(arrays, root: int, max_states: int, used: int = 0, nfa_used: int = 0):
    """Thompson NFA of node ``root`` and subset construction, in Python. Returns ``((trans
    (n, 256) int32, final, calls per state), NFA states)``."""
    nfa = _NFA(max_states, nfa_used)
    s, t = nfa.new(), nfa.new()
    _Builder(arrays[0], arrays[1], nfa).build(root, s, t)
    return _subsets(nfa, s, t, max_states, used), len(nfa.eps)


def _closure(nfa, states) -> frozenset[int]:
    seen = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _subsets(nfa: _NFA, start: int, end: int, max_states: int, used: int = 0):
    """Subset construction. Returns (trans (n,256) int32, final bool[n], calls per state).

    ``used`` states of other rules already count against ``max_states``."""
    memo: dict[frozenset[int], frozenset[int]] = {}

    def closure(targets: list[int]) -> frozenset[int]:
        # a DFA state is its closure's states with a byte edge or a call, and the end state
        # (the others, epsilon-only, do not change what the state does)
        key = frozenset(targets)
        got = memo.get(key)
        if got is None:
            got = memo[key] = frozenset(s for s in _closure(nfa, key)
                                        if nfa.bytes[s] or nfa.calls[s] or s == end)
        return got

    init = closure([start])
    ids = {init: 0}
    order = [init]
    runs: list[tuple[int, int, int]] = []  # (first flat index, length, target): filled in numpy at the end
    calls: list[tuple[tuple[int, int], ...]] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        base = (i - 1) * 256
        edges = [e for s in cur for e in nfa.bytes[s]]
        if edges:
            points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
            at = {p: k for k, p in enumerate(points)}
            per_interval: list[list[int]] = [[] for _ in range(len(points) - 1)]
            for lo, hi, t in edges:  # each edge covers a run of the elementary intervals
                for k in range(at[lo], at[hi + 1]):
                    per_interval[k].append(t)
            for p, q, targets in zip(points, points[1:], per_interval):
                if not targets:
                    continue
                tgt = closure(targets)
                if tgt not in ids:
                    if used + len(order) >= max_states:
                        raise _too_large("DFA", used + len(order) + 1, max_states)
                    ids[tgt] = len(order)
                    order.append(tgt)
                runs.append((base + p, q - p, ids[tgt]))
        by_callee: dict[int, list[int]] = {}
        for s in cur:
            for callee, t in nfa.calls[s]:
                by_callee.setdefault(callee, []).append(t)
        state_calls = []
        for callee in sorted(by_callee):
            tgt = closure(by_callee[callee])
            if tgt not in ids:
                ids[tgt] = len(order)
                order.append(tgt)
            state_calls.append((callee, ids[tgt]))
        calls.append(tuple(state_calls))
    final = np.array([end in st for st in order], dtype=bool)
    flat = np.full(len(order) * 256, -1, dtype=np.int32)
    if runs:
        first, length, target = np.array(runs, dtype=np.int64).T
        ends = np.cumsum(length)
        # index k of the concatenated runs lies in run r: first[r] + (k - start of run r)
        pos = np.arange(ends[-1]) + np.repeat(first - (ends - length), length)
        flat[pos] = np.repeat(target, length)
    return flat.reshape(len(order), 256), final, calls


_ROW_WEIGHTS = np.random.default_rng(20261130).integers(1, 2**63, size=(2, 260), dtype=np.uint64) | np.uint64(1)


def _row_classes(sig: np.ndarray) -> tuple[np.ndarray, int]:
    """Ids of equal rows of an int matrix (any numbering), and how many distinct rows.

    Two multiplicative hashes per row group the rows in numpy; the grouping is then checked
    against the rows themselves, and a dict of row bytes decides if any hash ever collided.
    (Hashing each row's bytes in a Python loop was most of the minimisation time.)"""
    if sig.shape[1] <= _ROW_WEIGHTS.shape[1]:
        u = sig.astype(np.uint64)
        w0, w1 = (w[: sig.shape[1]] for w in _ROW_WEIGHTS)
        # one 64-bit hash per row (two weightings folded): a 1-D unique is several times
        # faster than np.unique(axis=0) over pairs; a collision is caught just below
        h = (u * w0).sum(axis=1) ^ ((u * w1).sum(axis=1) >> np.uint64(17))
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if np.array_equal(sig, sig[first[inverse]]):
            return inverse.astype(np.int64), len(first)
    ids: dict[bytes, int] = {}
    rows = np.ascontiguousarray(sig)
    block = np.fromiter((ids.setdefault(r.tobytes(), len(ids)) for r in rows), np.int64, len(rows))
    return block, len(ids)


def minimal_blocks(trans: np.ndarray, final: np.ndarray, calls) -> tuple[np.ndarray, int]:
    """Moore refinement: signature = (final, block of each byte target, calls with target
    blocks), repeated until no block splits; blocks numbered by first appearance."""
    block = final.astype(np.int64)
    nblocks = len(np.unique(block))
    class_trans = trans[:, _distinct_columns(trans)]
    with_calls = [s for s, cs in enumerate(calls) if cs]
    call_col = np.zeros(len(calls), np.int64)
    while True:
        tb = np.where(class_trans >= 0, block[np.clip(class_trans, 0, None)], -1)
        call_ids: dict[tuple, int] = {(): 0}
        for s in with_calls:
            call_col[s] = call_ids.setdefault(tuple((c, int(block[t])) for c, t in calls[s]), len(call_ids))
        sig = np.concatenate([block[:, None], call_col[:, None], tb], axis=1)
        block, count = _row_classes(sig)
        if count == nblocks:
            break
        nblocks = count
    order = list(dict.fromkeys(block.tolist()))
    rank = np.empty(nblocks, dtype=np.int64)
    rank[order] = np.arange(nblocks)
    return rank[block], nblocks


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


def _trim_and_minimise_lists(trans, final, calls, keep: np.ndarray, productive: set[int]):
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
    block, nblocks = minimal_blocks(trans, final, calls)  # the start state's block is 0
    rep = np.zeros(nblocks, dtype=np.int64)
    rep[block[::-1]] = np.arange(len(block))[::-1]  # first state of each block
    m_trans = np.where(trans[rep] >= 0, block[np.clip(trans[rep], 0, None)], -1).astype(np.int32)
    m_final = final[rep]
    m_calls = tuple(tuple((c, int(block[t])) for c, t in calls[r]) for r in rep)
    return m_trans, m_final, m_calls


def rule_dfa(arrays, root: int, max_states: int, used: int, alphabet: np.ndarray, n_rules: int):
    """The contract of structgen.index.automaton._rule_dfa: :func:`determinise`, the bytes
    outside ``alphabet`` removed, then :func:`trim_and_minimise` with every callee productive;
    last, whether the start state reaches a final state by bytes alone."""
    (trans, final, calls), _ = determinise(arrays, root, max_states, used, 0)
    trans[:, ~alphabet] = -1
    m_trans, m_final, m_calls = trim_and_minimise(trans, final, _calls_csr(calls), np.ones(n_rules, bool))
    seen, stack = {0}, [0] if len(m_final) else []
    while stack:
        for t in set(m_trans[stack.pop()].tolist()) - {-1} - seen:
            seen.add(t)
            stack.append(t)
    alone = any(bool(m_final[s]) for s in seen) if len(m_final) else False
    return (m_trans, m_final, *_calls_csr(m_calls), alone, None, None)  # (no budget need: never cached; no path given)


def trim_and_minimise(trans, final, csr, productive: np.ndarray):
    """The contract of structgen.index.automaton._trim_and_minimise, in Python and numpy."""
    call_off, call_edge = csr
    pairs = [tuple(x) for x in call_edge.tolist()]
    calls = [tuple(pairs[call_off[s]:call_off[s + 1]]) for s in range(len(final))]
    prod = set(np.flatnonzero(productive).tolist())
    keep = _coaccessible(trans, final, calls, prod)
    return _trim_and_minimise_lists(trans, final, calls, keep, prod)


def completion_distances(pda):
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


# --------------------------------------------------------------------------- rule plan
# The grammar analyses that decide which rules are called (structgen.index.automaton.RulePlan
# over the native _core.plan_rules), on the expression trees, as structgen did them before.


def _dfa_size(e: Dfa) -> int:
    """An automaton's size for the rule plan: its states, and per edge one for its ASCII part
    and one per UTF-8 byte sequence of its code points from U+0080 up."""
    from structgen.regex.utf8 import utf8_sequences
    return len(e.trans) + sum((lo < 0x80) + (len(utf8_sequences(max(lo, 0x80), hi)) if hi >= 0x80 else 0)
                              for row in e.trans for lo, hi, _ in row)


def rule_plan(shape, inline_limit: int = 400, split_limit: int = 10_000) -> tuple[set[str], set[str]]:
    """(recursive rules, non-recursive rules to call) of ``shape`` (rule name → body)."""
    refs = _rule_refs(shape)
    recursive = _recursive_rules(refs)
    return recursive, _large_shared_rules(shape, refs, recursive, inline_limit, split_limit)


def _rule_refs(rules: Mapping[str, Expr]) -> dict[str, list[str]]:
    """The names each rule references, once per occurrence (as ``grammar.iter_refs``), with the
    references of a subtree shared between or within rules listed once per tree (by id: the
    rules keep their trees alive) and reused wherever it occurs."""
    memo: dict[int, tuple[str, ...]] = {}

    def refs(e: Expr) -> tuple[str, ...]:
        t = type(e)
        if t is Ref:
            return (e.name,)
        if t is Seq or t is Alt or t is Repeat:
            got = memo.get(id(e))
            if got is None:
                kids = e.items if t is Seq else e.options if t is Alt else (e.item,)
                got = memo[id(e)] = tuple(name for x in kids for name in refs(x))
            return got
        return ()

    return {name: list(refs(body)) for name, body in rules.items()}


def _recursive_rules(refs: Mapping[str, list[str]]) -> set[str]:
    """Rules on a reference cycle (Tarjan's SCC, iterative); ``refs``: the names each rule's
    body references (once per occurrence)."""
    graph = {n: sorted(set(r)) for n, r in refs.items()}
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




def _large_shared_rules(rules: Mapping[str, Expr], refs: Mapping[str, list[str]], recursive: set[str],
                        inline_limit: int, split_limit: int) -> set[str]:
    """Non-recursive rules to call rather than inline: those referenced from several places
    whose inlined size is large, and, inside a rule whose inlined NFA would pass split_limit
    states (estimated), its largest references until it would not (each called rule is
    determinised on its own, so no single NFA or subset construction holds a whole large
    schema; ``max_states`` is still checked exactly while they are built)."""
    uses: dict[str, int] = {}
    for names in refs.values():
        for name in names:
            uses[name] = uses.get(name, 0) + 1
    called = set(recursive)
    sizes: dict[str, int] = {}
    weighed = False  # False: expression nodes; True: estimated NFA states
    # sizes of subtrees without references, by node id (the rules keep their trees alive):
    # they depend on nothing but the weighing, and the converter shares them between rules
    memo: dict[int, int] = {}

    def esize(e: Expr) -> int:
        return _esize(e)[0]

    def _esize(e: Expr) -> tuple[int, bool]:  # (size, holds a reference)
        t = type(e)
        if t is Ref:
            return (1 if e.name in called else size_of(e.name)), True
        if t is Seq or t is Alt or t is Repeat:
            got = memo.get(id(e))
            if got is not None:
                return got, False
            if t is Repeat:
                n, refs = _esize(e.item)
                n = 1 + n * max(1, e.max or e.min)
            else:
                n, refs = (1 + 2 * weighed) if t is Alt else 1, False
                for x in (e.items if t is Seq else e.options):
                    k, r = _esize(x)
                    n += k
                    refs = refs or r
            if not refs:
                memo[id(e)] = n
            return n, refs
        if t is Dfa:  # states, and edges as the byte NFA has them (in both modes)
            return _dfa_size(e), False
        if not weighed:
            return 1, False
        if t is Lit:
            return len(e.text.encode("utf-8")), False
        if t is CharSet:
            return 1 + 2 * len(e.ranges), False
        if t is Regex:
            return 2 * len(e.pattern), False
        return 1, False

    def size_of(name: str) -> int:
        if name not in sizes:
            sizes[name] = 1  # non-recursive rules form a DAG: no real cycle here
            sizes[name] = esize(rules[name])
        return sizes[name]

    shared = {n for n, k in uses.items() if k > 1 and n not in recursive and size_of(n) > inline_limit}
    called |= shared
    sizes.clear()
    memo.clear()
    weighed = True
    split: set[str] = set()
    for name in rules:
        body = rules[name]
        while size_of(name) > split_limit:
            kids = {c for c in refs[name] if c not in called}
            # ties go to the first name in order: a set's order follows the string hash seed,
            # and the compiled automata must not differ from one process to the next
            largest = max(sorted(kids), key=size_of, default=None)
            if largest is None or size_of(largest) <= inline_limit:
                break
            called.add(largest)
            split.add(largest)
            sizes[name] = esize(body)
    return shared | split


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


def left_recursion_cycle(finals, calls) -> list[int] | None:
    """The left-recursion check as structgen did it in Python (``_core.left_recursion``'s
    reference): per rule its final flags and per state its ``(callee, return state)`` calls;
    a cycle of rules calling each other without reading a byte, or None."""
    n = len(finals)

    def reaches(r: int, nullable: set[int]) -> tuple[set[int], bool]:
        seen, stack, callees = {0}, [0], set()
        while stack:
            s = stack.pop()
            for c, t in calls[r][s]:
                callees.add(c)
                if c in nullable and t not in seen:
                    seen.add(t)
                    stack.append(t)
        return callees, any(finals[r][s] for s in seen)

    nullable: set[int] = set()
    changed = True
    while changed:  # rounds over every rule until none becomes nullable
        changed = False
        for r in range(n):
            if r not in nullable and reaches(r, nullable)[1]:
                nullable.add(r)
                changed = True
    left = [sorted(reaches(r, nullable)[0]) for r in range(n)]
    state = [0] * n
    for start in range(n):
        if state[start]:
            continue
        path, iters = [start], [iter(left[start])]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt):] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(left[nxt]))
    return None
