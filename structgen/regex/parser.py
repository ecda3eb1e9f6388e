"""Regular expressions (the common subset of ECMA-262 and Python ``re``) as grammar expressions.

:func:`parse_regex` turns a pattern into an :data:`~structgen.grammar.Expr` built only from
``Lit``, ``CharSet``, ``Seq``, ``Alt`` and ``Repeat`` that matches exactly the strings the
pattern *fully* matches (``re.fullmatch``). :func:`search_expr` gives the JSON Schema meaning
of ``pattern`` instead: an unanchored search, so unanchored sides accept anything.

The dialect is deliberately the intersection of the two engines a JSON Schema pattern may be
written for, read with ECMA-262 unicode-mode semantics where they differ (``.``, ``\\s``,
``\\u{...}``, surrogate pairs). Constructs whose meaning differs between the engines, or that
are not regular (lookaround, backreferences, word boundaries), raise :class:`RegexError`
pointing at the offending position rather than being guessed at. ``\\p{...}`` General_Category
escapes, which Python's ``re`` lacks, are read as ECMA-262 unicode mode defines them.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from ..disk_cache import cache_dir, cache_enabled, through_cache
from ..errors import RegexError
from ..grammar import (
    EMPTY,
    MAX_CODEPOINT,
    NOTHING,
    Alt,
    CharSet,
    Expr,
    Lit,
    Repeat,
    Seq,
    alt,
    intersect_charsets,
    seq,
)

__all__ = ["parse_regex", "search_expr", "ANY_CHAR", "agreeing_chars"]

SURROGATES = CharSet(((0xD800, 0xDFFF),))

ANY_CHAR: CharSet = CharSet(((0, 0xD7FF), (0xE000, MAX_CODEPOINT)))
"""Every Unicode code point except the surrogates (which no valid UTF-8 text contains)."""

_DIGIT = CharSet.of([(0x30, 0x39)])
_WORD = CharSet.of([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
# ECMA-262 WhiteSpace + LineTerminator; differs from Python's str.isspace() on purpose.
_SPACE = CharSet.of(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
_LINE_TERMINATORS = CharSet.of([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
_DOT = ANY_CHAR.minus(_LINE_TERMINATORS)

def _all_code_points() -> str:
    """The string of every code point in order, surrogates included (an index is its code point).

    Decoded from one UTF-32 buffer: ``"".join(map(chr, ...))`` made 1.1M one-character
    objects first, a peak of about 80 MB and half a second at the first class escape."""
    return np.arange(MAX_CODEPOINT + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


TABLES_FORMAT = 1
"""The layout of the Unicode tables on disk (part of their cache key)."""


def _through_disk(kind: str, build: Callable[[], dict[str, CharSet]]) -> dict[str, CharSet]:
    """``build()``, kept in the on-disk cache (:mod:`structgen.disk_cache`) for later processes.

    The tables are properties of the running interpreter (its ``re`` and ``unicodedata``), so
    the key is its version and Unicode version. Building them scans all 1.1M code points
    (40-200 ms, which the first request with such a pattern would wait for); a cached entry
    loads in a few milliseconds."""
    key = {"format": TABLES_FORMAT, "kind": kind, "python": sys.version, "unicode": unicodedata.unidata_version}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    entry = cache_dir() / "unicode" / f"{kind}-{digest}" if cache_enabled(None) else None
    return through_cache(entry, key, _load_tables, build, _save_tables)


def _save_tables(tables: dict[str, CharSet], folder: str) -> None:
    np.savez(Path(folder) / "tables.npz",
             **{name: np.array(cs.ranges, np.int64).reshape(-1, 2) for name, cs in tables.items()})
    (Path(folder) / "names.json").write_text(json.dumps(sorted(tables)), encoding="utf-8")


def _load_tables(folder: str) -> dict[str, CharSet]:
    names = json.loads((Path(folder) / "names.json").read_text(encoding="utf-8"))
    with np.load(Path(folder) / "tables.npz", allow_pickle=False) as z:
        if sorted(z.files) != names:
            raise ValueError("the tables' names do not match their file")
        out = {}
        for name in names:
            r = z[name]
            if r.ndim != 2 or r.shape[1] != 2 or (r.size and (r.min() < 0 or r.max() > MAX_CODEPOINT)):
                raise ValueError(f"table {name!r} holds no code-point ranges")
            out[name] = CharSet.of(r.tolist())
    return out


@lru_cache(maxsize=1)
def _python_categories() -> dict[str, CharSet]:
    """What Python's ``re`` (which ``jsonschema`` uses) means by \\d, \\w, \\s on str patterns
    (through the disk cache: :func:`_through_disk`)."""
    return _through_disk("python-classes", _scan_python_categories)


def _scan_python_categories() -> dict[str, CharSet]:
    """:func:`_python_categories`, asked of ``re`` itself, on the string of all code points:
    the characters between two runs of the complement (``\\D+``) are the class's ranges. The
    complement's runs are few and long, which ``re`` scans in a tight loop; searching for the
    class itself fails at each of the 1.1M positions instead (twice the time)."""
    everything = _all_code_points()
    out: dict[str, CharSet] = {}
    for key in "dws":
        ranges, start = [], 0
        for m in re.finditer(f"\\{key.upper()}+", everything):
            if m.start() > start:
                ranges.append((start, m.start() - 1))
            start = m.end()
        if start <= MAX_CODEPOINT:
            ranges.append((start, MAX_CODEPOINT))
        out[key] = CharSet.of(ranges)
    return out


# General_Category values by long name and alias (Unicode's PropertyValueAliases.txt), as
# ECMA-262 accepts them in \p{...}; the one-letter groups are unions of their two-letter values
_CATEGORY_NAMES = {
    "Other": "C", "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Unassigned": "Cn", "Private_Use": "Co",
    "Surrogate": "Cs", "Letter": "L", "Cased_Letter": "LC", "Lowercase_Letter": "Ll", "Modifier_Letter": "Lm",
    "Other_Letter": "Lo", "Titlecase_Letter": "Lt", "Uppercase_Letter": "Lu", "Mark": "M", "Combining_Mark": "M",
    "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Nonspacing_Mark": "Mn", "Number": "N", "Decimal_Number": "Nd",
    "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Close_Punctuation": "Pe", "Final_Punctuation": "Pf",
    "Initial_Punctuation": "Pi", "Other_Punctuation": "Po", "Open_Punctuation": "Ps", "Symbol": "S",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Math_Symbol": "Sm", "Other_Symbol": "So", "Separator": "Z",
    "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Space_Separator": "Zs",
}


@lru_cache(maxsize=1)
def _general_categories() -> dict[str, CharSet]:
    """Two-letter General_Category value -> its code points, from ``unicodedata`` (the Unicode
    version of this Python). Built lazily, on the first pattern with a ``\\p`` escape, and
    kept on disk for later processes (:func:`_through_disk`)."""
    return _through_disk("general-categories", _scan_general_categories)


def _scan_general_categories() -> dict[str, CharSet]:
    """:func:`_general_categories` from one pass over all code points (~0.2 s)."""
    names: list[str] = []  # the values met, numbered in order of first code point

    class Numbering(dict):
        def __missing__(self, cat: str) -> int:
            names.append(cat)
            self[cat] = len(names) - 1
            return self[cat]

    # each code point's category number, in C-level loops (map over one string, fromiter):
    # a Python loop per code point costs twice as much, a list of the categories 9 MB more
    codes = np.fromiter(map(Numbering().__getitem__, map(unicodedata.category, _all_code_points())),
                        dtype=np.uint8, count=MAX_CODEPOINT + 1)
    starts = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1))
    ends = np.append(starts[1:] - 1, MAX_CODEPOINT)
    ranges: dict[str, list[tuple[int, int]]] = {}
    for lo, hi, code in zip(starts.tolist(), ends.tolist(), codes[starts].tolist()):
        ranges.setdefault(names[code], []).append((lo, hi))
    return {cat: CharSet.of(r) for cat, r in ranges.items()}


@lru_cache(maxsize=None)
def unicode_property(name: str) -> CharSet | None:
    """The code points of a ``\\p{name}`` General_Category value (``Lu``, ``Letter``, ``L``,
    ``LC``) or of ``Any``/``ASCII``/``Assigned``; None for any other property."""
    if name == "Any":
        return CharSet(((0, MAX_CODEPOINT),))
    if name == "ASCII":
        return CharSet(((0, 0x7F),))
    cats = _general_categories()
    if name == "Assigned":
        return CharSet.of([r for cat, cs in cats.items() if cat != "Cn" for r in cs.ranges])
    short = _CATEGORY_NAMES.get(name, name)
    if short == "LC":
        members = ["Lu", "Ll", "Lt"]
    elif len(short) == 1 and short in "CLMNPSZ":
        members = [cat for cat in cats if cat[0] == short]
    elif short in cats:
        members = [short]
    else:
        return None
    return CharSet.of([r for cat in members if cat in cats for r in cats[cat].ranges])


@lru_cache(maxsize=None)
def class_escape(letter: str) -> tuple[CharSet, CharSet]:
    """(narrow, wide) meaning of a class escape: narrow matches in *both* ECMA-262 and Python
    ``re``, wide in *either*. Generating from narrow is sound under both engines; a negated
    class must subtract wide (``[^\\w]`` must avoid Python's Unicode word characters too)."""
    ecma = {"d": _DIGIT, "w": _WORD, "s": _SPACE}[letter.lower()]
    py = _python_categories()[letter.lower()]
    both, either = intersect_charsets(ecma, py), CharSet.of(list(ecma.ranges) + list(py.ranges))
    if letter.islower():
        return _clean(both), _clean(either)
    return _clean(either.negate()), _clean(both.negate())


_CLASS_ESCAPES = "dDwWsS"
_CONTROL_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
# What ECMA calls SyntaxCharacter, plus "/" (escaped in regex literals): the only identity
# escapes unicode mode allows, and the ones every engine reads as the literal character.
_SYNTAX_CHARS = set("^$\\.*+?()[]{}|/")
_HEX = set("0123456789abcdefABCDEF")
_SUPPORTED_FLAGS = set("isu")


def _clean(cs: CharSet) -> CharSet:
    """``cs`` without surrogates: they cannot occur in valid UTF-8 text."""
    return intersect_charsets(cs, ANY_CHAR)


@lru_cache(maxsize=1)
def _case_classes() -> dict[int, tuple[int, ...]]:
    """Code point -> all code points equal to it up to simple (one-character) case mapping.

    Built once, lazily (only ``i`` patterns need it), as the closure of ``lower``/``upper``
    so that e.g. ``k``, ``K`` and KELVIN SIGN end up in one class, as in both engines.
    """
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    # Every cased character lies below U+20000 (the last ones are in Adlam, U+1E900).
    for cp in range(0x20000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        for other in (ch.lower(), ch.upper()):
            if len(other) == 1 and other != ch:
                a, b = find(cp), find(ord(other))
                if a != b:
                    parent[a] = b
    groups: dict[int, set[int]] = {}
    for cp in parent:
        root = find(cp)
        groups.setdefault(root, {root}).add(cp)
    return {cp: tuple(sorted(members)) for members in groups.values() for cp in members}


def _case_close(cs: CharSet) -> CharSet:
    """``cs`` plus every case variant of its members (the ``i`` flag)."""
    table = _case_classes()
    extra = [(v, v) for cp, variants in table.items() if cp in cs for v in variants]
    return CharSet.of(list(cs.ranges) + extra) if extra else cs


def _charset_expr(cs: CharSet) -> Expr:
    """A code-point set as an expression; the empty set is ``NOTHING`` so sequences collapse."""
    cs = _clean(cs)
    if not cs.ranges:
        return NOTHING
    if len(cs.ranges) == 1 and cs.ranges[0][0] == cs.ranges[0][1]:
        return Lit(chr(cs.ranges[0][0]))
    return cs


def _repeat(item: Expr, lo: int, hi: int | None) -> Expr:
    """``Repeat`` with the trivial cases folded, so printed grammars stay small."""
    if hi == 0 or item == EMPTY:
        return EMPTY
    if item == NOTHING:
        return EMPTY if lo == 0 else NOTHING
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


class _Parser:
    """Recursive-descent parser over the pattern's code points; ``pos`` indexes ``pattern``."""

    def __init__(self, pattern: str, flags: str) -> None:
        self.pattern = pattern
        self.pos = 0
        for f in flags:
            if f not in _SUPPORTED_FLAGS:
                raise RegexError(f"unsupported regex flag {f!r} (supported: i, s, u)",
                                 pattern=pattern, position=0)
        self.icase = "i" in flags
        self.dotall = "s" in flags

    # ------------------------------------------------------------------ helpers

    def error(self, message: str, position: int | None = None) -> RegexError:
        return RegexError(message, pattern=self.pattern,
                          position=self.pos if position is None else position)

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.pattern[i] if i < len(self.pattern) else ""

    def at_end(self) -> bool:
        return self.pos >= len(self.pattern)

    def startswith(self, s: str) -> bool:
        return self.pattern.startswith(s, self.pos)

    # ------------------------------------------------------------------ structure

    def parse_top(self) -> list[tuple[bool, Expr, bool]]:
        """Top-level alternatives as ``(anchored_start, expr, anchored_end)``."""
        branches = [self.parse_branch(top=True)]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.parse_branch(top=True))
        if not self.at_end():  # only a stray ")" can stop a top-level branch early
            raise self.error("unbalanced parenthesis: ')' without matching '('")
        return branches

    def parse_alternation(self) -> Expr:
        """Alternatives inside a group (anchors are not allowed there)."""
        options = [self.parse_branch(top=False)[1]]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.parse_branch(top=False)[1])
        return alt(*options)

    def parse_branch(self, top: bool) -> tuple[bool, Expr, bool]:
        start_pos = self.pos
        anchored_start = anchored_end = False
        items: list[Expr] = []
        while not self.at_end() and self.peek() not in "|)":
            c = self.peek()
            if c == "^":
                if not (top and self.pos == start_pos):
                    raise self.error("'^' is only supported at the start of the pattern")
                anchored_start = True
                self.pos += 1
                self.reject_quantifier()
                continue
            if c == "$":
                nxt = self.peek(1)
                if not (top and nxt in ("", "|")):
                    raise self.error("'$' is only supported at the end of the pattern")
                anchored_end = True
                self.pos += 1
                continue
            atom_pos = self.pos
            atom = self.parse_atom()
            items.append(self.parse_quantifiers(atom, atom_pos))
        return anchored_start, seq(*items) if items else EMPTY, anchored_end

    def reject_quantifier(self) -> None:
        if self.peek() in ("*", "+", "?") or self.quantifier_ahead():
            raise self.error("nothing to repeat")

    # ------------------------------------------------------------------ quantifiers

    def quantifier_ahead(self) -> tuple[int, int | None, int] | None:
        """If a ``{n}``, ``{n,}`` or ``{n,m}`` starts here: ``(n, m, length)``, else None.

        ``{,m}`` is a quantifier in Python but a literal in ECMA, so it is rejected; any other
        ``{`` that does not form a quantifier is a literal brace in both engines.
        """
        p, i = self.pattern, self.pos
        if i >= len(p) or p[i] != "{":
            return None
        j = i + 1
        while j < len(p) and p[j].isascii() and p[j].isdigit():
            j += 1
        if j == i + 1:
            if j < len(p) and p[j] == ",":
                k = j + 1
                while k < len(p) and p[k].isascii() and p[k].isdigit():
                    k += 1
                if k > j + 1 and k < len(p) and p[k] == "}":
                    raise self.error("'{,m}' means different things in Python and ECMA; "
                                     "write '{0,m}'")
            return None
        lo = int(p[i + 1:j])
        if j < len(p) and p[j] == "}":
            return lo, lo, j + 1 - i
        if j >= len(p) or p[j] != ",":
            return None
        k = j + 1
        while k < len(p) and p[k].isascii() and p[k].isdigit():
            k += 1
        if k >= len(p) or p[k] != "}":
            return None
        hi = int(p[j + 1:k]) if k > j + 1 else None
        return lo, hi, k + 1 - i

    def parse_quantifiers(self, atom: Expr, atom_pos: int) -> Expr:
        c = self.peek()
        q_pos = self.pos
        if c == "*":
            lo, hi, length = 0, None, 1
        elif c == "+":
            lo, hi, length = 1, None, 1
        elif c == "?":
            lo, hi, length = 0, 1, 1
        else:
            q = self.quantifier_ahead()
            if q is None:
                return atom
            lo, hi, length = q
            if hi is not None and lo > hi:
                raise self.error(f"numbers out of order in {{{lo},{hi}}} quantifier", q_pos)
        self.pos += length
        if self.peek() == "?":  # lazy: same language, only match preference differs
            self.pos += 1
        # A second quantifier is an error in ECMA and possessive ("a*+") in Python.
        self.reject_quantifier()
        return _repeat(atom, lo, hi)

    # ------------------------------------------------------------------ atoms

    def parse_atom(self) -> Expr:
        c = self.peek()
        if c == "(":
            return self.parse_group()
        if c == "[":
            return self.parse_class()
        if c in ("*", "+", "?"):
            raise self.error("nothing to repeat")
        if c == "{" and self.quantifier_ahead() is not None:
            raise self.error("nothing to repeat")
        if c == ".":
            self.pos += 1
            return _charset_expr(ANY_CHAR if self.dotall else _DOT)
        if c == "\\":
            kind, value = self.parse_escape(in_class=False)
            if kind == "set":  # \d \w \s are categories: "i" does not fold them (\W ∌ k)
                return _charset_expr(value)
            return self.char_expr(value)
        return self.char_expr(self.next_code_point())

    def char_expr(self, cp: int) -> Expr:
        if self.icase:
            return _charset_expr(_case_close(CharSet(((cp, cp),))))
        if 0xD800 <= cp <= 0xDFFF:  # a lone surrogate matches no valid text
            return NOTHING
        return Lit(chr(cp))

    def next_code_point(self) -> int:
        """The literal code point at ``pos``; a raw surrogate pair counts as one."""
        cp = ord(self.pattern[self.pos])
        self.pos += 1
        if 0xD800 <= cp <= 0xDBFF and 0xDC00 <= ord(self.peek() or "\0") <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.peek()) - 0xDC00)
            self.pos += 1
        return cp

    def parse_group(self) -> Expr:
        open_pos = self.pos
        self.pos += 1
        if self.peek() == "?":
            if self.startswith("?:"):
                self.pos += 2
            elif self.startswith("?=") or self.startswith("?!") \
                    or self.startswith("?<=") or self.startswith("?<!"):
                raise self.error("lookaround assertions are not supported", open_pos)
            elif self.startswith("?P<") or self.startswith("?<"):
                self.pos += 3 if self.startswith("?P<") else 2
                self.parse_group_name(open_pos)
            elif self.startswith("?P="):
                raise self.error("backreferences are not supported", open_pos)
            else:
                raise self.error("unsupported group syntax '(?' (inline flags, comments and "
                                 "conditionals are not supported)", open_pos)
        body = self.parse_alternation()
        if self.peek() != ")":
            raise self.error("missing ')': unterminated group", open_pos)
        self.pos += 1
        return body

    def parse_group_name(self, open_pos: int) -> None:
        start = self.pos
        while not self.at_end() and self.peek() != ">":
            self.pos += 1
        name = self.pattern[start:self.pos]
        if self.at_end():
            raise self.error("missing '>' after group name", open_pos)
        if not name.isidentifier():
            raise self.error(f"bad group name {name!r}", start)
        self.pos += 1

    # ------------------------------------------------------------------ classes

    def parse_class(self) -> Expr:
        open_pos = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        if self.peek() == "]":
            # Python reads a leading "]" as a literal, ECMA as the end of an empty class.
            raise self.error("']' at the start of a class is ambiguous; escape it as '\\]'")
        ranges: list[tuple[int, int]] = []  # literal members: case-folded under "i"
        categories: list[tuple[int, int]] = []  # \d \w \s members: never case-folded
        while True:
            if self.at_end():
                raise self.error("missing ']': unterminated character class", open_pos)
            if self.peek() == "]":
                self.pos += 1
                break
            start_pos = self.pos
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                second = self.class_atom()
                if isinstance(first, CharSet) or isinstance(second, CharSet):
                    raise self.error("a class escape like \\d cannot bound a range", start_pos)
                if first > second:
                    raise self.error(f"bad character range {chr(first)}-{chr(second)}", start_pos)
                ranges.append((first, second))
            elif isinstance(first, CharSet):
                categories.extend((self.last_wide if negated else first).ranges)
            else:
                ranges.append((first, first))
        cs = CharSet.of(ranges)
        if self.icase:  # close under case before negating, as both engines do
            cs = _case_close(cs)
        cs = CharSet.of(list(cs.ranges) + categories)
        return _charset_expr(cs.negate() if negated else cs)

    def class_atom(self) -> "int | CharSet":
        if self.peek() == "\\":
            kind, value = self.parse_escape(in_class=True)
            return value
        return self.next_code_point()

    # ------------------------------------------------------------------ escapes

    def parse_escape(self, in_class: bool) -> tuple[str, "int | CharSet"]:
        """An escape at ``pos`` (the backslash): ``("char", cp)`` or ``("set", charset)``."""
        esc_pos = self.pos
        self.pos += 1
        if self.at_end():
            raise self.error("pattern ends with a lone backslash", esc_pos)
        c = self.peek()
        self.pos += 1
        if c in _CLASS_ESCAPES:
            narrow, self.last_wide = class_escape(c)
            return "set", narrow
        if c in "pP":
            cs = self.parse_property(esc_pos)
            cs = _clean(cs.negate() if c == "P" else cs)
            self.last_wide = cs  # one meaning: Python's re has none (it refuses \p)
            return "set", cs
        if c in _CONTROL_ESCAPES:
            return "char", _CONTROL_ESCAPES[c]
        if c == "b":
            if in_class:
                return "char", 0x08  # backspace inside a class, in both engines
            raise self.error("word boundaries (\\b) are not supported", esc_pos)
        if c == "B":
            raise self.error("word boundaries (\\B) are not supported", esc_pos)
        if c == "0":
            if self.peek().isascii() and self.peek().isdigit():
                raise self.error("octal escapes are not supported", esc_pos)
            return "char", 0
        if c.isascii() and c.isdigit():
            raise self.error("backreferences are not supported", esc_pos)
        if c == "k":
            raise self.error("backreferences are not supported", esc_pos)
        if c == "x":
            return "char", self.parse_hex(2, esc_pos)
        if c == "u":
            return "char", self.parse_unicode_escape(esc_pos)
        if c in _SYNTAX_CHARS or (in_class and c == "-"):
            return "char", ord(c)
        if c.isascii() and c.isprintable() and not c.isalnum() and c != "_":
            # Escaped ASCII punctuation ("\-", "\@", "\ ") is the literal in every engine
            # except ECMA unicode mode, which rejects it; JSON Schema patterns use it a lot.
            return "char", ord(c)
        raise self.error(f"unsupported escape '\\{c}'", esc_pos)

    def parse_property(self, esc_pos: int) -> CharSet:
        """The set a ``\\p{...}`` escape names (the ``{`` at ``pos``): a General_Category value,
        by its short or long name (``L``, ``Letter``, ``gc=Lu``, ``General_Category=Lu``), or
        ``Any``, ``ASCII``, ``Assigned``. Scripts and other properties raise ``RegexError``."""
        if self.peek() != "{":
            raise self.error("expected '{' after \\p (a Unicode property escape)", esc_pos)
        end = self.pattern.find("}", self.pos)
        if end < 0:
            raise self.error("missing '}' in Unicode property escape", esc_pos)
        text = self.pattern[self.pos + 1:end]
        self.pos = end + 1
        if self.icase:
            # ECMA case-folds a property set under "i" (\p{Lu} matches "a"): not modelled
            raise self.error("Unicode property escapes are not supported with the 'i' flag", esc_pos)
        name, _, value = text.partition("=")
        if value and name in ("General_Category", "gc"):
            name = value
        elif value:
            raise self.error(f"unsupported Unicode property '{name}' in '\\p{{{text}}}' (only General_Category "
                             "values, Any, ASCII and Assigned are supported)", esc_pos)
        cs = unicode_property(name)
        if cs is None:
            raise self.error(f"unsupported Unicode property '\\p{{{text}}}' (only General_Category values, Any, "
                             "ASCII and Assigned are supported; scripts and binary properties are not)", esc_pos)
        return cs

    def parse_hex(self, n: int, esc_pos: int) -> int:
        digits = self.pattern[self.pos:self.pos + n]
        if len(digits) != n or not set(digits) <= _HEX:
            raise self.error(f"expected {n} hex digits in escape", esc_pos)
        self.pos += n
        return int(digits, 16)

    def parse_unicode_escape(self, esc_pos: int) -> int:
        if self.peek() == "{":  # \u{H...}: ECMA unicode mode
            end = self.pattern.find("}", self.pos)
            digits = self.pattern[self.pos + 1:end] if end >= 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > MAX_CODEPOINT:
                raise self.error("bad \\u{...} escape", esc_pos)
            self.pos = end + 1
            return int(digits, 16)
        cp = self.parse_hex(4, esc_pos)
        # ECMA unicode mode joins an escaped surrogate pair into one code point.
        if 0xD800 <= cp <= 0xDBFF and self.startswith("\\u"):
            tail = self.pattern[self.pos + 2:self.pos + 6]
            if len(tail) == 4 and set(tail) <= _HEX and 0xDC00 <= int(tail, 16) <= 0xDFFF:
                self.pos += 6
                return 0x10000 + ((cp - 0xD800) << 10) + (int(tail, 16) - 0xDC00)
        return cp


@lru_cache(maxsize=256)
def _parse_branches(pattern: str, flags: str) -> tuple[tuple[bool, Expr, bool], ...]:
    # cached (expressions are immutable): the number syntax and format patterns are parsed
    # for most schemas, about half a millisecond each, and schemas repeat their patterns
    return tuple(_Parser(_hoist_group_anchors(pattern), flags).parse_top())


def _top_level_split(text: str) -> list[tuple[int, int]] | None:
    """Spans of the top-level alternatives of ``text`` (escapes, classes, groups respected),
    or None when the parentheses do not balance."""
    spans, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
        elif c == "|" and depth == 0:
            spans.append((start, i))
            start = i + 1
        i += 1
    if depth or in_class:
        return None
    return spans + [(start, len(text))]


def _hoist_group_anchors(pattern: str) -> str:
    """``(^x$)`` → ``^(x)$`` and ``^(x$)`` → ``^(x)$``: a group spanning a whole top-level
    alternative whose body is one alternative that starts with ``^`` / ends with an unescaped
    ``$`` means the same with the anchors outside (where the parser accepts them). Common in
    real schemas (``^$|(^...$)``); anything else is left for the parser to judge."""
    spans = _top_level_split(pattern)
    if spans is None:
        return pattern
    out = []
    for a, b in spans:
        branch = pattern[a:b]
        lead = "^" if branch.startswith("^") else ""
        tail = "$" if branch.endswith("$") and not _escaped(branch, len(branch) - 1) else ""
        core = branch[len(lead):len(branch) - len(tail)]
        opener = "(?:" if core.startswith("(?:") else "(" if core.startswith("(") and not core.startswith("(?") else None
        inner = core[len(opener):-1] if opener and core.endswith(")") else None
        if inner is None or _top_level_split(core[1:-1]) != [(0, len(core) - 2)] \
                or len(_top_level_split(inner) or ()) != 1:
            out.append(branch)  # not one group spanning the branch, or alternatives inside
            continue
        if inner.startswith("^"):
            inner, lead = inner[1:], "^"
        if inner.endswith("$") and not _escaped(inner, len(inner) - 1):
            inner, tail = inner[:-1], "$"
        out.append(f"{lead}{opener}{inner}){tail}")
    return "|".join(out)


def _escaped(text: str, i: int) -> bool:
    """Whether ``text[i]`` is preceded by an odd number of backslashes."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def parse_regex(pattern: str, flags: str = "") -> Expr:
    """The strings ``pattern`` fully matches, as an expression over Lit/CharSet/Seq/Alt/Repeat.

    ``flags``: ``i`` (case-insensitive), ``s`` (``.`` matches line terminators too) and ``u``
    (a no-op: unicode semantics are always used). ``^``/``$`` are accepted only where they
    add nothing to a full match (start/end of a top-level alternative).

    Raises:
        RegexError: unsupported or malformed syntax, with the position in ``pattern``.
    """
    return alt(*(e for _, e, _ in _parse_branches(pattern, flags)))


def _open_ended(e: Expr) -> Expr:
    """``e`` with a bounded repeat at its end made unbounded, for use before ``.*``.

    Exact there: ``X{n,m}.*`` and ``X{n,}.*`` match the same strings (more items are part of
    the ``.*``). It matters for cost: an unbounded counter's runs started at different
    positions subsume one another (the one furthest along wins, see
    :mod:`structgen.index.counters`), so ``b{5000}`` unanchored keeps one run alive
    instead of one per ``b`` read."""
    if isinstance(e, Repeat) and e.max is not None and e.min >= 1:
        return Repeat(e.item, e.min, None)
    if isinstance(e, Seq) and e.items:
        return Seq(e.items[:-1] + (_open_ended(e.items[-1]),))
    if isinstance(e, Alt):
        return Alt(tuple(_open_ended(o) for o in e.options))
    return e


def _open_started(e: Expr) -> Expr:
    """``e`` with a bounded repeat at its start made unbounded, for use after ``.*``.

    Exact there: the items of a longer run beyond the last ``n`` can be read by the ``.*``
    in front, so ``.*X{n,m}R``, ``.*X{n}R`` and ``.*X{n,}R`` match the same strings. It matters for cost: ``.*b{5000}$``
    starts a run of the counter at every ``b``, each still counting when the next starts;
    unbounded, the runs subsume one another and one is kept."""
    if isinstance(e, Repeat) and e.max is not None and e.min >= 1:
        return Repeat(e.item, e.min, None)
    if isinstance(e, Seq) and e.items:
        return Seq((_open_started(e.items[0]),) + e.items[1:])
    if isinstance(e, Alt):
        return Alt(tuple(_open_started(o) for o in e.options))
    return e


_PRINTABLE_ASCII = CharSet(((0x20, 0x7E),))
_CLASS_ESCAPE_USE = re.compile(r"\\[dDwWsS]")


def agreeing_chars(patterns: "list[str]") -> CharSet:
    """Code points on which ECMA-262 (unicode mode) and Python's ``re`` read ``patterns`` alike.

    On these, :func:`search_expr` is exact under both engines in *both* directions (a string
    it refuses matches in neither), which splitting names by ``patternProperties`` needs.
    Printable ASCII always agrees; beyond it the engines differ only on the characters where
    a class escape's narrow and wide meanings part (Python's Unicode ``\\d \\w \\s``) and on
    U+2028/U+2029, which ``.`` matches in Python only. ASCII controls stay out (``$`` before a
    final newline, ``\\s`` on U+001C..U+001F). The text check for class escapes may see one
    that is not there (``\\\\d``): that only removes more characters.
    """
    wide = CharSet(((0x80, 0xD7FF), (0xE000, MAX_CODEPOINT))).minus(CharSet(((0x2028, 0x2029),)))
    for letter in sorted({m.group()[1].lower() for p in patterns for m in _CLASS_ESCAPE_USE.finditer(p)}):
        narrow, either = class_escape(letter)
        wide = wide.minus(either.minus(narrow))
    return CharSet.of(list(_PRINTABLE_ASCII.ranges) + list(wide.ranges))


def search_expr(pattern: str, flags: str = "") -> Expr:
    """The JSON Schema meaning of ``pattern``: strings containing a match anywhere.

    Each top-level alternative not anchored with ``^`` gets any-code-point* in front, and
    one not anchored with ``$`` gets it behind.
    """
    anything = Repeat(ANY_CHAR, 0, None)

    def wrap(start: bool, body: Expr, end: bool) -> Expr:
        body = body if end else _open_ended(body)
        body = body if start else _open_started(body)
        return seq(EMPTY if start else anything, body, EMPTY if end else anything)

    branches = _parse_branches(pattern, flags)
    anchoring = {(s, e) for s, _, e in branches}
    if len(anchoring) == 1:  # same anchoring everywhere: wrap the alternation once
        (s, e), = anchoring
        return wrap(s, alt(*(b for _, b, _ in branches)), e)
    return alt(*(wrap(s, b, e) for s, b, e in branches))

