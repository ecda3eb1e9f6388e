"""Lark grammar text → :class:`~structgen.grammar.Grammar`, through lark's own grammar parser.

Supported: rules and terminals, alternatives, grouping, ``? * + [..]``, ``~ n`` and
``~ n..m`` repetition, string literals (with the ``i`` flag), regex literals, ranges
``"a".."z"``, aliases and priorities (they shape parse trees, not the language), rule
modifiers (``?``, ``!``, ``_``), ``%import common.NAME`` (and other lark standard grammars).
Rejected with a located error: ``%ignore`` (structgen grammars are scannerless: write
whitespace into the rules, bounded), templates, ``%declare``, ``%override``/``%extend``.
"""
from __future__ import annotations

import os
from typing import Any

import lark
from lark import Token, Tree
from lark.exceptions import UnexpectedInput
from lark.load_grammar import _get_parser, _literal_to_pattern

from ..errors import GrammarError, GrammarSyntaxError
from .expr import CharSet, Expr, Lit, Ref, Regex, Repeat, alt, opt, referenced_names, seq

__all__ = ["read_lark_rules"]


def _syntax_error(message: str, token: Any, text: str) -> GrammarSyntaxError:
    line = getattr(token, "line", None) or 1
    column = getattr(token, "column", None) or 1
    return GrammarSyntaxError(message, line=line, column=column, text=text)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.rules: dict[str, Expr] = {}

    def read(self) -> dict[str, Expr]:
        try:
            tree = _get_parser().parse(self.text + "\n")  # lark needs a final newline
        except UnexpectedInput as exc:
            expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or [])
            hint = f"; expected one of {', '.join(expected[:8])}" if expected else ""
            raise GrammarSyntaxError(
                f"invalid Lark grammar{hint}", line=exc.line, column=exc.column, text=self.text
            ) from None
        for stmt in tree.children:
            if not isinstance(stmt, Tree):
                continue
            if stmt.data == "rule":
                name_tok = stmt.children[1]
                params = stmt.children[2]
                if isinstance(params, Tree) and params.children:
                    raise _syntax_error("template rules are not supported", name_tok, self.text)
                self._define(name_tok, stmt.children[-1])
            elif stmt.data == "term":
                self._define(stmt.children[0], stmt.children[-1])
            elif stmt.data == "import":
                self._import(stmt)
            elif stmt.data == "ignore":
                tok = next(stmt.scan_values(lambda v: isinstance(v, Token)), None)
                raise _syntax_error(
                    "%ignore is not supported: structgen grammars are scannerless, so write the "
                    "whitespace into the rules (bounded, e.g. WS?)", tok, self.text)
            else:
                tok = next(stmt.scan_values(lambda v: isinstance(v, Token)), None)
                raise _syntax_error(f"%{stmt.data} is not supported", tok, self.text)
        return self.rules

    def _define(self, name_tok: Any, body: Any) -> None:
        name = str(name_tok)
        if name in self.rules:
            raise _syntax_error(f"{name!r} is defined twice", name_tok, self.text)
        self.rules[name] = self._expr(body)

    def _import(self, stmt: Any) -> None:
        lib = stmt.children[0]
        parts = [str(t) for t in lib.children]
        first = next(lib.scan_values(lambda v: isinstance(v, Token)), None)
        alias = None
        if len(stmt.children) > 1 and getattr(stmt.children[1], "data", None) == "name_list":
            path, names = parts, [str(t) for t in stmt.children[1].children]
        else:
            path, names = parts[:-1], [parts[-1]]
            if len(stmt.children) > 1:
                alias = str(stmt.children[1])
        if len(path) != 1:
            raise _syntax_error("only lark's standard grammars can be imported (e.g. %import common.WS)", first, self.text)
        file = os.path.join(os.path.dirname(lark.__file__), "grammars", path[0] + ".lark")
        if not os.path.exists(file):
            raise _syntax_error(f"no standard grammar named {path[0]!r}", first, self.text)
        with open(file, encoding="utf-8") as fh:
            lib_rules = _Reader(fh.read()).read()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n in self.rules:
                continue
            if n not in lib_rules:
                raise _syntax_error(f"{path[0]}.lark has no {n!r}", first, self.text)
            self.rules[alias if alias and n == names[0] else n] = lib_rules[n]
            todo.extend(referenced_names(lib_rules[n]))

    def _expr(self, node: Any) -> Expr:
        if isinstance(node, Token):
            if node.type in ("RULE", "TERMINAL"):
                return Ref(str(node))
            raise _syntax_error(f"unexpected {node.type}", node, self.text)
        d = node.data
        kids = node.children
        if d == "expansions":
            return alt(*(self._expr(k) for k in kids))
        if d == "alias":
            return self._expr(kids[0])
        if d == "expansion":
            return seq(*(self._expr(k) for k in kids))
        if d == "maybe":
            return opt(self._expr(kids[0]))
        if d == "value":
            return self._expr(kids[0])
        if d in ("nonterminal", "terminal"):
            return Ref(str(kids[0]))
        if d == "literal":
            tok = kids[0]
            try:
                pat = _literal_to_pattern(tok)
            except Exception as exc:  # lark's GrammarError for empty or multi-line literals
                raise _syntax_error(str(exc), tok, self.text) from None
            flags = "".join(sorted(pat.flags))
            if pat.type == "str":
                if flags == "i":
                    return Regex("".join(_ci(c) for c in pat.value))
                if flags:
                    raise _syntax_error(f"unsupported flags {flags!r} on a string literal", tok, self.text)
                return Lit(pat.value)
            return Regex(pat.value, flags)
        if d == "range":
            a, b = (_literal_to_pattern(t).value for t in kids)
            if len(a) != 1 or len(b) != 1 or a > b:
                raise _syntax_error("a range needs two single characters in order", kids[0], self.text)
            return CharSet.of([(ord(a), ord(b))])
        if d == "expr":
            item = self._expr(kids[0])
            op = kids[1]
            if str(op) == "~":
                lo = int(kids[2])
                hi = int(kids[3]) if len(kids) > 3 else lo
                if hi < lo:
                    raise _syntax_error(f"repetition range {lo}..{hi} is empty", kids[2], self.text)
                return Repeat(item, lo, hi)
            return {"?": Repeat(item, 0, 1), "*": Repeat(item, 0, None), "+": Repeat(item, 1, None)}[str(op)]
        if d == "template_usage":
            raise _syntax_error("templates are not supported", next(node.scan_values(lambda v: True)), self.text)
        raise GrammarError(f"unsupported Lark construct {d!r}")


def _ci(c: str) -> str:
    lo, up = c.lower(), c.upper()
    if lo != up and len(lo) == 1 and len(up) == 1:
        return f"[{lo}{up}]"
    return "\\" + c if c in "\\^$.|?*+()[]{}/" else c


def read_lark_rules(text: str, *, start: str = "start") -> dict[str, Expr]:
    """The rules of Lark grammar text; errors carry line, column and a caret excerpt."""
    rules = _Reader(text).read()
    if start not in rules:
        raise GrammarError(f"the grammar has no start rule {start!r} (define `{start}: ...`)")
    return rules
