"""Expressions as flat integer arrays, the input of the native automaton construction.

Thompson construction, subset construction and minimisation run in the native core
(``structgen._core``, src/core/fa.cpp). An expression tree is handed over once, as nodes of
four int32 ``(kind, a, b, c)`` over a shared int32 data array; a subtree used in several
places (a rule body referenced twice, a shared literal) is serialized once. The layout is
described in src/core/fa.hpp; the serializer is native too (src/core/expr_plan.cpp): it
reads the expression objects directly, one visit per distinct node.
"""
from __future__ import annotations

from typing import Mapping, NoReturn

from .. import _core
from ..errors import GrammarError
from ..grammar import Alt, CharSet, Dfa, Lit, Ref, Regex, Repeat, Seq
from .parser import parse_regex

__all__ = ["serializer", "LIT", "SET", "SEQ", "ALT", "REP", "CALL", "INLINE", "GRAPH", "EGRAPH", "REF", "REGEX"]

LIT, SET, SEQ, ALT, REP, CALL, INLINE, GRAPH, EGRAPH, REF, REGEX = range(11)

_CLASSES = (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref, Dfa)  # the order the native serializer expects


def _regular_only(name: str) -> NoReturn:
    raise GrammarError(f"intersection operands must be regular: found a reference to {name!r}")


def _undefined(name: str) -> NoReturn:
    raise GrammarError(f"reference to an undefined rule {name!r}")


def serializer(names: Mapping[str, int] | None = None) -> _core.ExprSerializer:
    """A serializer of expression trees (``add(expr) -> node``, ``graph(final, edges) -> node``,
    ``arrays() -> (nodes, data)``, ``refs() -> REF node ids``).

    With ``names`` (rule name → index), a rule reference becomes a ``(REF, index, 0, 0)``
    placeholder, to be patched into a call or an inlined copy once the rules are planned;
    without, a reference is refused (the code-point algebra takes regular operands only).
    """
    return _core.ExprSerializer(_CLASSES, parse_regex, None if names is None else dict(names),
                                _regular_only if names is None else _undefined)
