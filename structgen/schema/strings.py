"""JSON Schema → grammar: ``type: string`` with ``minLength``, ``maxLength``, ``pattern`` and
``format``, and the encoding of a decoded-string language as JSON string text."""
from __future__ import annotations

from typing import Any

from ..errors import AutomatonSizeError, RegexError
from ..grammar import EMPTY, NOTHING, Alt, CharSet, Dfa, Expr, Lit, Repeat, Seq, alt, seq
from ..regex.format_automata import format_expressions, format_language
from ..regex.formats import FORMAT_PATTERNS
from ..regex.parser import ANY_CHAR, search_expr
from ..regex.regular import automaton_lengths, bound_length, difference, intersect, json_text_expr
from .base import _RAW_CHAR, _STRING_CHAR, NOT_PATTERNS, NOT_STRINGS, ConverterBase, _ptr


def _length_range(e: Expr) -> tuple[int, float]:
    """Minimum and maximum number of characters an expression matches."""
    if isinstance(e, Lit):
        return len(e.text), len(e.text)
    if isinstance(e, CharSet):
        return 1, 1
    if isinstance(e, Seq):
        lo, hi = 0, 0.0
        for x in e.items:
            a, b = _length_range(x)
            lo, hi = lo + a, hi + b
        return lo, hi
    if isinstance(e, Alt):
        rs = [_length_range(x) for x in e.options] or [(0, 0)]
        return min(r[0] for r in rs), max(r[1] for r in rs)
    if isinstance(e, Repeat):
        a, b = _length_range(e.item)
        return a * e.min, (float("inf") if e.max is None and b > 0 else b * (e.max or 0))
    if isinstance(e, Dfa):
        return automaton_lengths(e)
    raise TypeError(e)


def _not_in_set(words: list[str]) -> Expr:
    """Strings of raw JSON-string characters (no escapes) that are not in ``words``."""
    words = [w for w in words if all(cp in _RAW_CHAR for cp in map(ord, w))]
    if not words:
        return Repeat(_RAW_CHAR, 0, None)
    options: list[Expr] = []
    if "" not in words:
        options.append(EMPTY)
    firsts = sorted({w[0] for w in words if w})
    for c in firsts:
        options.append(seq(Lit(c), _not_in_set([w[1:] for w in words if w and w[0] == c])))
    other = _RAW_CHAR.minus(CharSet.of([(ord(c), ord(c)) for c in firsts]))
    options.append(seq(other, Repeat(_RAW_CHAR, 0, None)))
    return alt(*options)


def _universal(e: Expr) -> bool:
    """Whether ``e`` matches every string (decided exactly when its complement is small)."""
    if e == Repeat(ANY_CHAR, 0, None):
        return True
    try:
        return difference(Repeat(ANY_CHAR, 0, None), e) == NOTHING
    except AutomatonSizeError:
        return False


class StringsMixin(ConverterBase):
    """The converter's strings and regular-expression patterns."""

    def string(self, schema: dict, ptr: str) -> Expr:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        if hi is not None and lo > hi:
            return self.empty(f"minLength {lo} > maxLength {hi}", _ptr(ptr, "minLength"), "minLength")
        pexpr: Expr | None = None
        encoded: Expr | None = None  # pexpr as JSON-string text, when known already
        if "format" in schema:
            fmt = schema["format"]
            if fmt not in FORMAT_PATTERNS:
                self.unsupported("format", _ptr(ptr, "format"), f"format {fmt!r} is not enforced")
            elif "pattern" in schema:
                # both hold: the regular intersection of the two languages (exact)
                try:
                    pexpr = intersect(format_language(fmt)[0],
                                      self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern")))
                except AutomatonSizeError as exc:
                    self.unsupported("format", _ptr(ptr, "format"), f"format together with this pattern: {exc}")
            elif lo > 0 or hi is not None:  # (see format_expressions)
                pexpr, encoded = format_expressions(fmt)
            else:
                pexpr, encoded = format_language(fmt)
        if pexpr is None and "pattern" in schema:
            pexpr = self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern"))
        if NOT_STRINGS in schema:  # from a negated const/enum: the other strings
            excluded = alt(*(Lit(w) for w in schema[NOT_STRINGS]))
            pexpr = difference(Repeat(ANY_CHAR, 0, None) if pexpr is None else pexpr, excluded)
            encoded = None
        if NOT_PATTERNS in schema:  # from a negated pattern: strings none of them matches
            try:
                excluded = alt(*(self.pattern_expr(p, _ptr(ptr, "not", "pattern")) for p in schema[NOT_PATTERNS]))
                pexpr = difference(Repeat(ANY_CHAR, 0, None) if pexpr is None else pexpr, excluded)
                encoded = None
            except AutomatonSizeError as exc:
                self.unsupported("not", _ptr(ptr, "not"), f"the complement of this pattern is too large: {exc}")
        if pexpr is not None:
            return self._string_pattern(pexpr, lo, hi, ptr, encoded)
        return seq(Lit('"'), Repeat(_STRING_CHAR, lo, hi), Lit('"'))

    def _string_pattern(self, pexpr: Expr, lo: int, hi: int | None, ptr: str, encoded: Expr | None = None) -> Expr:
        """``encoded``: ``pexpr`` as JSON-string text when already known (a format's)."""
        # (no bounds, nothing to compare: a format's language is thousands of nodes to walk)
        plo, phi = _length_range(pexpr) if lo > 0 or hi is not None else (0, 0.0)
        if lo > plo or (hi is not None and hi < phi):  # the lengths constrain the pattern further
            if _universal(pexpr):  # a pattern every string matches ("(x+)?" unanchored): counted
                return seq(Lit('"'), Repeat(_STRING_CHAR, lo, hi), Lit('"'))
            try:
                pexpr = bound_length(pexpr, lo, hi)
                encoded = None
            except AutomatonSizeError as exc:
                kw = "minLength" if lo > plo else "maxLength"
                self.unsupported(kw, _ptr(ptr, kw), f"length bounds with this pattern: {exc}")
        if encoded is None:
            encoded = json_text_expr(pexpr)
        return seq(Lit('"'), encoded, Lit('"'))

    def pattern_expr(self, pattern: Any, ptr: str) -> Expr:
        """A schema pattern as a search expression; a pattern structgen cannot compile raises
        ``RegexError`` carrying ``ptr``."""
        try:
            return search_expr(pattern)
        except RegexError as exc:
            raise RegexError(exc.message, pattern=exc.pattern, position=exc.position, pointer=ptr) from None
