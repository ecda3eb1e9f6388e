"""The reference automaton stages (test oracle): subset construction over Python sets and Moore
refinement in numpy rounds, the way structgen built rule DFAs before the native core.

tests/test_native_automaton.py swaps them in for the native ``_determinise`` and
``_minimal_blocks`` of structgen.index.automaton and checks that every rule DFA comes out equal,
array for array.
"""
from __future__ import annotations

import numpy as np

from structgen.index.automaton import _NFA, _distinct_columns, _too_large


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


def determinise(nfa: _NFA, start: int, end: int, max_states: int, used: int = 0):
    """Subset construction. Returns (trans (n,256) int32, final bool[n], calls per state).

    ``used`` states of other rules already count against ``max_states``."""
    memo: dict[frozenset[int], frozenset[int]] = {}

    def closure(targets: list[int]) -> frozenset[int]:
        key = frozenset(targets)
        got = memo.get(key)
        if got is None:
            got = memo[key] = _closure(nfa, key)
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
