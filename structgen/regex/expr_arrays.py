"""Expressions as flat integer arrays, the input of the native automaton construction.

Thompson construction, subset construction and minimisation run in the native core
(``structgen._core``, src/core/fa.cpp). An expression tree is handed over once, as nodes of
four int32 ``(kind, a, b, c)`` over a shared int32 data array; a subtree used in several
places (a rule body inlined twice, a shared literal) is serialized once. The layout is
described in src/core/fa.hpp.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import GrammarError
from ..grammar import Alt, CharSet, Dfa, Expr, Lit, Ref, Regex, Repeat, Seq
from .parser import parse_regex

__all__ = ["ExprArrays"]

LIT, SET, SEQ, ALT, REP, CALL, INLINE, GRAPH, EGRAPH = range(9)
_INT32_MAX = 2**31 - 1  # a larger repeat count cannot be built under any state limit


class ExprArrays:
    """Serializer of expression trees into the native node layout.

    ``ref(name)`` turns a rule reference into a node: ``(CALL, callee, 0, 0)`` or
    ``(INLINE, rule_id, body_node, 0)``; without it a reference is refused (the code-point
    algebra takes regular operands only).
    """

    __slots__ = ("nodes", "data", "_memo", "_keep", "_regex", "ref")

    def __init__(self, ref: Callable[["ExprArrays", str], tuple[int, int, int, int]] | None = None) -> None:
        self.nodes: list[int] = []
        self.data: list[int] = []
        self._memo: dict[int, int] = {}
        self._keep: list[Expr] = []  # the memo is keyed by id(): keep the trees alive
        self._regex: dict[tuple[str, str], int] = {}
        self.ref = ref

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array(self.nodes, np.int32).reshape(-1, 4), np.array(self.data, np.int32))

    def add(self, e: Expr) -> int:
        """The node id of ``e`` (serialized on first use)."""
        got = self._memo.get(id(e))
        if got is not None:
            return got
        t = type(e)
        nodes, data = self.nodes, self.data
        # (hot loop: one call per distinct node of every rule; attribute lookups kept local)
        if t is Seq or t is Alt:
            add = self.add
            kids = [add(x) for x in (e.items if t is Seq else e.options)]
            nodes += (SEQ if t is Seq else ALT, len(data), len(kids), 0)
            data += kids
        elif t is Lit:
            text = e.text
            nodes += (LIT, len(data), len(text), 0)
            data += map(ord, text)
        elif t is CharSet:
            nodes += (SET, len(data), len(e.ranges), 0)
            for r in e.ranges:
                data += r
        elif t is Repeat:
            item = self.add(e.item)
            hi = -1 if e.max is None else min(e.max, _INT32_MAX)
            nodes += (REP, item, min(e.min, _INT32_MAX), hi)
        elif t is Ref:
            if self.ref is None:
                raise GrammarError(f"intersection operands must be regular: found a reference to {e.name!r}")
            node = self.ref(self, e.name)
            nodes += node
        elif t is Regex:
            rkey = (e.pattern, e.flags)
            nid = self._regex.get(rkey)
            if nid is None:
                nid = self._regex[rkey] = self.add(parse_regex(e.pattern, e.flags))
            self._memo[id(e)] = nid
            self._keep.append(e)
            return nid
        elif t is Dfa:
            at = len(data)
            data.append(len(e.trans))
            data.extend(1 if f else 0 for f in e.final)
            for row in e.trans:
                data.append(len(row))
                for x in row:
                    data += x
            nodes += (GRAPH, at, len(data) - at, 0)
        else:
            raise TypeError(f"not a grammar expression: {e!r}")
        nid = len(nodes) // 4 - 1
        self._memo[id(e)] = nid
        self._keep.append(e)
        return nid

    def graph(self, final: list[bool], edges: list[list[tuple[int, int]]]) -> int:
        """An automaton whose edges are expression nodes: ``edges[s]`` lists ``(node, target)``."""
        data = self.data
        at = len(data)
        data.append(len(final))
        data.extend(1 if f else 0 for f in final)
        for row in edges:
            data.append(len(row))
            for x in row:
                data += x
        self.nodes += (EGRAPH, at, len(data) - at, 0)
        return len(self.nodes) // 4 - 1
