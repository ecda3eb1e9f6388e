"""Grammars: takes Lark text or expression trees, gives a :class:`Grammar` (named rules over regular terminals)."""
from __future__ import annotations

from .builtin import grammar_text, load_grammar
from .expr import (
    EMPTY,
    MAX_CODEPOINT,
    NOTHING,
    Alt,
    CharSet,
    Dfa,
    Expr,
    Lit,
    Ref,
    Regex,
    Repeat,
    Seq,
    alt,
    expr_size,
    expr_to_lark,
    intersect_charsets,
    iter_nodes,
    iter_refs,
    normalize_ranges,
    opt,
    referenced_names,
    seq,
)
from .rules import Grammar

__all__ = [
    "EMPTY", "MAX_CODEPOINT", "NOTHING", "Alt", "CharSet", "Dfa", "Expr", "Grammar", "Lit", "Ref", "Regex",
    "Repeat", "Seq", "alt", "expr_size", "expr_to_lark", "grammar_text", "intersect_charsets", "iter_nodes",
    "iter_refs", "load_grammar", "normalize_ranges", "opt", "referenced_names", "seq",
]
