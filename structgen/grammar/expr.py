"""Grammar expressions: the right-hand sides of rules, printable as Lark text.

A :class:`~structgen.grammar.Grammar` maps rule names to expressions (:data:`Expr`). Expressions are frozen
trees: literals, regexes, code-point sets, sequences, alternatives, bounded or unbounded
repetitions and references to other rules. ``str(grammar)`` prints Lark syntax and
:meth:`Grammar.from_lark` reads it back with lark's own grammar parser.

The language of a grammar is *scannerless*: a terminal is just a regular set of strings
inside the context-free language, with no separate lexer and no longest-match rule. That is
the semantics constrained decoding needs (every byte the model emits is checked against the
whole grammar), and the one Lark's Earley parser with ``lexer="dynamic"`` implements.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Union

from .. import _core

__all__ = [
    "Expr",
    "Lit",
    "Regex",
    "CharSet",
    "Seq",
    "Alt",
    "Repeat",
    "Ref",
    "EMPTY",
    "NOTHING",
    "seq",
    "alt",
    "opt",
]

MAX_CODEPOINT = 0x10FFFF


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal string (encoded as UTF-8 bytes)."""

    text: str


@dataclass(frozen=True, slots=True)
class Regex:
    """A regular expression terminal (ECMA-262/Python common subset, see ``structgen.regex``)."""

    pattern: str
    flags: str = ""


@dataclass(frozen=True, slots=True)
class CharSet:
    """A set of Unicode code points, as sorted, disjoint, inclusive ``(lo, hi)`` ranges."""

    ranges: tuple[tuple[int, int], ...]

    @staticmethod
    def of(ranges: "list[tuple[int, int]] | tuple[tuple[int, int], ...]") -> "CharSet":
        return CharSet(normalize_ranges(ranges))

    def negate(self) -> "CharSet":
        out, lo = [], 0
        for a, b in self.ranges:
            if a > lo:
                out.append((lo, a - 1))
            lo = b + 1
        if lo <= MAX_CODEPOINT:
            out.append((lo, MAX_CODEPOINT))
        return CharSet(tuple(out))

    def minus(self, other: "CharSet") -> "CharSet":
        return intersect_charsets(self, other.negate())

    def __contains__(self, cp: int) -> bool:
        # a plain loop: any() over a generator cost twice as much, and every character of
        # every declared property name is looked up here when an object's other names are built
        for a, b in self.ranges:
            if a <= cp <= b:
                return True
        return False


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple["Expr", ...]


@dataclass(frozen=True, slots=True)
class Alt:
    options: tuple["Expr", ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item`` repeated between ``min`` and ``max`` times (``max=None``: unbounded)."""

    item: "Expr"
    min: int = 0
    max: int | None = None


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to another rule of the grammar (or a named terminal)."""

    name: str


@dataclass(frozen=True, slots=True)
class Dfa:
    """A deterministic automaton over code points, for regular languages whose expressions
    are exponentially larger than their automata (the decimal multiples of 997: 997 states,
    no small regular expression), or cost more to build than the automaton (any member name
    but the declared ones).

    ``trans[s]`` lists state ``s``'s transitions as sorted, disjoint ``(lo, hi, target)``
    code-point ranges; state 0 starts; ``final[s]`` says whether ``s`` accepts. ``label``
    names the language and must identify it: equality and hashing use it alone. ``source``,
    when given, returns an expression of the same language, for printing as Lark (only
    asked for there); without it the automaton prints as a placeholder.
    """

    label: str
    trans: tuple[tuple[tuple[int, int, int], ...], ...] = field(compare=False, repr=False)
    final: tuple[bool, ...] = field(compare=False, repr=False)
    source: Callable[[], Expr] | None = field(default=None, compare=False, repr=False)


Expr = Union[Lit, Regex, CharSet, Seq, Alt, Repeat, Ref, Dfa]


def _native_init(cls: type) -> None:
    """Give a node class the native ``__init__`` of ``_core.install_slots_init``: the same
    arguments, defaults and errors as the generated one, which set each field of a frozen
    dataclass through ``object.__setattr__`` (0.6 µs a node, 1.2 µs a Repeat: a tenth of
    converting a schema, which builds hundreds of nodes)."""
    fs = fields(cls)
    _core.install_slots_init(cls, tuple(f.name for f in fs),
                             tuple(() if f.default is MISSING else (f.default,) for f in fs))


for _cls in (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref):
    _native_init(_cls)
del _cls

EMPTY: Expr = Seq(())
"""The empty string."""
NOTHING: Expr = Alt(())
"""The empty language (matches nothing)."""


def normalize_ranges(ranges) -> tuple[tuple[int, int], ...]:
    rs = sorted((int(a), int(b)) for a, b in ranges if a <= b)
    out: list[tuple[int, int]] = []
    for a, b in rs:
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return tuple(out)


def intersect_charsets(x: CharSet, y: CharSet) -> CharSet:
    out, i, j = [], 0, 0
    while i < len(x.ranges) and j < len(y.ranges):
        a = max(x.ranges[i][0], y.ranges[j][0])
        b = min(x.ranges[i][1], y.ranges[j][1])
        if a <= b:
            out.append((a, b))
        if x.ranges[i][1] < y.ranges[j][1]:
            i += 1
        else:
            j += 1
    return CharSet(tuple(out))


if TYPE_CHECKING:
    def seq(*items: Expr) -> Expr:
        """A sequence, flattened; ``NOTHING`` anywhere makes the whole sequence ``NOTHING``."""

    def alt(*options: Expr) -> Expr:
        """An alternative, flattened, duplicates and ``NOTHING`` removed."""
else:
    # Native (src/core/node_init.cpp): the converter calls these for nearly every node it
    # builds, about fifty times for a median schema, 1.5 to 4 µs each in Python (alt's
    # duplicate scan went through the dataclasses' __eq__). tests/reference_expr.py holds
    # the Python definitions they are compared with.
    seq, alt = _core.expr_joins(Lit, Seq, Alt, NOTHING, (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref, Dfa))


def opt(item: Expr) -> Expr:
    return Repeat(item, 0, 1)


# --------------------------------------------------------------------------- printing


def _lit_text(s: str) -> str:
    # Lark string literals accept Python-style escapes; json.dumps gives a safe subset.
    return json.dumps(s, ensure_ascii=False)


def _charset_regex(cs: CharSet) -> str:
    def esc(cp: int) -> str:
        ch = chr(cp)
        if ch in "\\]^-[/":
            return "\\" + ch
        if cp > 0xFFFF:  # raw: Python re has no \u{...}, ECMA has no \U
            return ch
        if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF or not ch.isprintable():
            return f"\\u{cp:04x}"
        return ch

    if not cs.ranges:
        return "[^\\u0000-\\U0010ffff]"
    parts = []
    for a, b in cs.ranges:
        parts.append(esc(a) if a == b else f"{esc(a)}-{esc(b)}")
    return "[" + "".join(parts) + "]"


def _regex_body(pattern: str) -> str:
    """A regex as the body of a Lark ``/.../`` literal: unescaped ``/`` and control characters escaped."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\" + (nxt if ord(nxt) >= 0x20 else f"x{ord(nxt):02x}"))
            i += 2
            continue
        if ch == "/":
            out.append("\\/")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def expr_to_lark(e: Expr, prec: int = 0) -> str:
    """Lark text of an expression. ``prec``: 0 = alternatives allowed, 1 = in sequence, 2 = atom."""
    if isinstance(e, Lit):
        return _lit_text(e.text) if e.text else "\"\""
    if isinstance(e, Regex):
        return "/" + _regex_body(e.pattern) + "/" + e.flags
    if isinstance(e, CharSet):
        return "/" + _charset_regex(e) + "/"
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Seq):
        if not e.items:
            return "()"
        s = " ".join(expr_to_lark(x, 2) for x in e.items)
        return f"({s})" if prec >= 2 and len(e.items) > 1 else s
    if isinstance(e, Alt):
        if not e.options:
            return "/[^\\x00-\\uffff" + chr(0x10000) + "-" + chr(MAX_CODEPOINT) + "]/"  # matches nothing
        rest = [x for x in e.options if x != EMPTY]
        if len(rest) < len(e.options):  # Lark has no empty literal: (a | b)? instead of (a | b | "")
            return expr_to_lark(Repeat(rest[0] if len(rest) == 1 else Alt(tuple(rest)), 0, 1), prec)
        s = " | ".join(expr_to_lark(x, 1) for x in e.options)
        return f"({s})" if prec >= 1 else s
    if isinstance(e, Repeat):
        inner = expr_to_lark(e.item, 2)
        if (e.min, e.max) == (0, 1):
            return f"{inner}?"
        if (e.min, e.max) == (0, None):
            return f"{inner}*"
        if (e.min, e.max) == (1, None):
            return f"{inner}+"
        if e.max is None:
            return f"({inner} ~ {e.min} {inner}*)" if prec >= 2 else f"{inner} ~ {e.min} {inner}*"
        rep = f"{inner} ~ {e.min}" if e.min == e.max else f"{inner} ~ {e.min}..{e.max}"
        return f"({rep})" if prec >= 2 else rep
    if isinstance(e, Dfa):
        if e.source is not None:
            return expr_to_lark(e.source(), prec)
        # Lark has no notation for an automaton; the placeholder is not readable back
        return f"%dfa<{e.label}>"
    raise TypeError(f"not a grammar expression: {e!r}")


def iter_nodes(e: Expr):
    """Every node of an expression tree (depth first; rule references are not followed)."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, Seq):
            stack.extend(x.items)
        elif isinstance(x, Alt):
            stack.extend(x.options)
        elif isinstance(x, Repeat):
            stack.append(x.item)


def iter_refs(e: Expr):
    """Every rule name referenced in ``e``, once per occurrence."""
    return (x.name for x in iter_nodes(e) if isinstance(x, Ref))


def expr_size(e: Expr, cap: int | None = None) -> int:
    """Nodes of an expression tree, a bounded repeat counted once per copy it will be
    unrolled into; stops counting at ``cap`` (to test "is it small?" cheaply).

    Native (the converter asks for every large expression it may share: as a generator walk
    in Python this was a fifteenth of converting a schema)."""
    return _core.expr_size(e, -1 if cap is None else cap, (Seq, Alt, Repeat, Dfa))


NODE_CLASSES: tuple[type, ...] = (Lit, Regex, CharSet, Seq, Alt, Repeat, Ref, Dfa)
"""The expression node classes (all frozen)."""


def untrack_nodes(roots: Iterable[object], classes: tuple[type, ...] = NODE_CLASSES) -> int:
    """Take the nodes reachable from ``roots`` (instances of ``classes``, and the tuples holding
    them) out of the cycle collector's lists (native; returns how many). A compiled grammar
    keeps its expressions, tens of thousands of objects for a large schema, and every
    collection of their generation traversed them again (1-2.5 ms for one large grammar's
    first pass, 8 ms for a generation-1 pass over a few grammars). Frozen nodes of strings,
    numbers and nodes cannot be part of a reference cycle; reference counting frees them as
    before. ``classes`` may add other frozen node classes (the rule automata's)."""
    return _core.untrack_tree(roots, classes)


def referenced_names(e: Expr) -> set[str]:
    """The rule names referenced in ``e``, each subtree visited once however often the tree
    shares it (the schema converter shares subtrees between and within rules)."""
    names: set[str] = set()
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Ref):
            names.add(x.name)
        elif isinstance(x, (Seq, Alt, Repeat)):
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Seq):
                stack.extend(x.items)
            elif isinstance(x, Alt):
                stack.extend(x.options)
            else:
                stack.append(x.item)
    return names


# re-exported for error construction by readers
__all__ += ["referenced_names", "iter_refs", "expr_to_lark", "expr_size", "iter_nodes", "untrack_nodes", "NODE_CLASSES"]
