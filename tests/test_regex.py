"""parse_regex / search_expr agree with Python's re on the common ECMA/Python subset.

Each pattern is checked on a few thousand strings: random strings over an alphabet relevant to
the pattern, strings sampled from the parsed expression itself (so long patterns get positive
examples too) and one-character mutations of those (near misses). Python's ``re`` is the
oracle; where ECMA and Python read a construct differently the case gives a Python pattern
with the ECMA meaning.
"""
from __future__ import annotations

import random
import re
import zlib

import pytest

from structgen.errors import RegexError
from structgen.grammar import EMPTY, NOTHING, Alt, CharSet, Expr, Lit, Repeat, Seq
from structgen.regex import ANY_CHAR, parse_regex, search_expr

from .exprmatch import expr_fullmatch

# --------------------------------------------------------------------------- reference matcher


def _nodes(e: Expr):
    yield e
    if isinstance(e, Seq):
        for x in e.items:
            yield from _nodes(x)
    elif isinstance(e, Alt):
        for x in e.options:
            yield from _nodes(x)
    elif isinstance(e, Repeat):
        yield from _nodes(e.item)


def _check_shape(e: Expr) -> None:
    """Only the five allowed node types, and no surrogate in any code-point set."""
    for n in _nodes(e):
        assert isinstance(n, (Lit, CharSet, Seq, Alt, Repeat)), n
        if isinstance(n, CharSet):
            assert all(not (b >= 0xD800 and a <= 0xDFFF) for a, b in n.ranges), n
        if isinstance(n, Lit):
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in n.text), n


def test_matcher_sanity() -> None:
    e = Seq((Repeat(Alt((Lit("ab"), Lit("a"))), 1, 3), Lit("c")))
    assert expr_fullmatch(e, "abac")
    assert expr_fullmatch(e, "aaac")
    assert not expr_fullmatch(e, "aaaac")
    assert not expr_fullmatch(e, "c")
    assert expr_fullmatch(EMPTY, "")
    assert not expr_fullmatch(NOTHING, "")
    assert expr_fullmatch(Repeat(Repeat(Lit("a"), 0, None), 0, 5), "aaaaaaaaa")


# --------------------------------------------------------------------------- sampling


def _sample(e: Expr, rng: random.Random, alphabet: str) -> str | None:
    """A random string of ``e``'s language (None if the branch taken is empty)."""
    if isinstance(e, Lit):
        return e.text
    if isinstance(e, CharSet):
        inside = [c for c in alphabet if ord(c) in e]
        if inside:  # stay in the alphabet: outside it ECMA and Python may disagree
            return rng.choice(inside)
        if not e.ranges:
            return None
        total = sum(b - a + 1 for a, b in e.ranges)
        k = rng.randrange(total)
        for a, b in e.ranges:
            if k <= b - a:
                return chr(a + k)
            k -= b - a + 1
    if isinstance(e, Seq):
        parts = [_sample(x, rng, alphabet) for x in e.items]
        return None if None in parts else "".join(parts)
    if isinstance(e, Alt):
        return _sample(rng.choice(e.options), rng, alphabet) if e.options else None
    if isinstance(e, Repeat):
        hi = e.min + 4 if e.max is None else min(e.max, e.min + 4)
        parts = [_sample(e.item, rng, alphabet) for _ in range(rng.randint(e.min, hi))]
        return None if None in parts else "".join(parts)
    raise TypeError(e)


def _mutate(s: str, rng: random.Random, alphabet: str) -> str:
    i = rng.randint(0, len(s))
    op = rng.randrange(3)
    if op == 0 or not s:
        return s[:i] + rng.choice(alphabet) + s[i:]
    i = min(i, len(s) - 1)
    if op == 1:
        return s[:i] + s[i + 1:]
    return s[:i] + rng.choice(alphabet) + s[i + 1:]


def _inputs(e: Expr, alphabet: str, seed: int, n: int = 1500) -> list[str]:
    rng = random.Random(seed)
    out = {""}
    for _ in range(n):
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
    for _ in range(n // 2):
        s = _sample(e, rng, alphabet)
        if s is not None:
            out.add(s)
            out.add(_mutate(s, rng, alphabet))
            out.add(_mutate(_mutate(s, rng, alphabet), rng, alphabet))
    return sorted(out)


# --------------------------------------------------------------------------- agreement with re

A = re.ASCII  # ECMA's \d \w are ASCII-only; on ASCII text re.ASCII's \s equals ECMA's too
NL = "\n\r\u2028\u2029"
NOT_NL = "[^\\n\\r\\u2028\\u2029]"
ECMA_SPACE = "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"

# (pattern, flags, alphabet, python pattern with the ECMA meaning or None, python flags)
CASES = [
    # realistic JSON Schema patterns
    (r"^[a-z0-9_-]{3,16}$", "", "az09_-A! ", None, A),
    (r"^\d{3}-\d{4}$", "", "0123456789-a ", None, A),
    (r"^[A-Z]{2}\d{2}[A-Z0-9]{1,30}$", "", "ABZ019a-", None, A),
    (r"^\S+@\S+\.\S+$", "", "ab@. \t\n", None, A),
    (r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$", "", "()0159-x", None, A),
    (r"colou?r", "", "colur", None, A),
    (r"^[^\s]+$", "", "ab \t\n\r\x0b\x0c", None, A),
    (r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$", "", "aZ9._%+-@x", None, A),
    (r"^#?([a-fA-F0-9]{6}|[a-fA-F0-9]{3})$", "", "#aF09g", None, A),
    (r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$", "", "0123-9", None, A),
    (r"^(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?$", "", "01235:9", None, A),
    (r"^[A-Z][a-z]+(?: [A-Z][a-z]+)*$", "", "Aaz Z-", None, A),
    (r"^https?://[^\s/$.?#].[^\s]*$", "", "htps:/.?#a $", r"^https?://[^\s/$.?#]" + NOT_NL + r"[^\s]*$", A),
    (r"^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$", "", "v01.-a", None, A),
    # unicode
    (r"^[\u00e0-\u00ff]+$", "", "àÿéaßÀ", None, 0),
    (r"^\u{1F600}+$", "", "😀😁a", "^\U0001F600+$", 0),
    (r"^[\u{1F600}-\u{1F64F}]{1,3}$", "", "😀😁🙏🚀a", "^[\U0001F600-\U0001F64F]{1,3}$", 0),
    (r"^\uD83D\uDE00$", "", "😀a", "^\U0001F600$", 0),
    (r"[\u4e00-\u9fff]{2,4}", "", "中文字符a", None, 0),
    (r"^[а-яё]+$", "", "абяёЁz", None, 0),
    (r"😀|🎉+", "", "😀🎉a", None, 0),
    (r"[^\u0000-\u00ff]+", "", "aÿĀ€😀", None, 0),
    (r"\s+", "", " \t\u00a0\u3000\ufeff\x1c\x85a", ECMA_SPACE + "+", 0),
    (r"\S\s", "", " \u00a0\ufeff\x1c\x85a", "[^" + ECMA_SPACE[1:-1] + "]" + ECMA_SPACE, 0),
    (r"\w+\W", "", "aZ_9é-٣", None, A),
    (r"\d\D", "", "09a٣-", None, A),
    # structure
    (r"a|b|", "", "abc", None, A),
    (r"(a|bc)*d", "", "abcd", None, A),
    (r"(?:ab|a)(?:bc|c)?", "", "abc", None, A),
    (r"x{2,}", "", "xy", None, A),
    (r"x{0}y", "", "xy", None, A),
    (r"(a?){3}", "", "ab", None, A),
    (r"(a*)*b", "", "ab", None, A),
    (r"(?<name>ab)+", "", "ab", r"(?P<name>ab)+", A),
    (r"(?P<n>a|b){2}", "", "abc", None, A),
    (r"a*?b+?c??d{1,2}?e{2,}?", "", "abcde", None, A),
    (r"", "", "a", None, A),
    (r"^$", "", "a", None, A),
    (r"()", "", "a", None, A),
    (r"^a$|^b$|c", "", "abc", None, A),
    # classes
    (r"[\w.-]+", "", "a_.-!", None, A),
    (r"[^a-c]x", "", "abdx\n", None, A),
    (r"[\d\s]+", "", "1 \tx", None, A),
    (r"[^\d\s]+", "", "1 \txy", None, A),
    (r"[\D]", "", "1a", None, A),
    (r"\W+", "", "a!_ ", None, A),
    (r"[\]\-\\]+", "", "]-\\a", None, A),
    (r"[a-]+", "", "a-b", None, A),
    (r"[-a]+", "", "a-b", None, A),
    (r"[a-c-e]+", "", "abcde-", None, A),
    (r"[\b]", "", "\bb", None, A),
    (r"[a^]+", "", "a^b", None, A),
    (r"[.*+?(){}|$]+", "", ".*+?(){}|$a", None, A),
    (r"[\x41-\x43\u0061]+", "", "ABCDab", None, A),
    # dot
    (r".+", "", "ab" + NL, NOT_NL + "+", 0),
    (r"a.c", "s", "abc" + NL, None, re.S),
    # escapes and literal punctuation
    (r"\x41\u0042\n\t\/\.\\", "", "AB\n\t/.\\x", r"\x41\u0042\n\t/\.\\", A),
    (r"\{\}\[\]\(\)\*\+\?\|\^\$", "", "{}[]()*+?|^$", None, A),
    (r"x{a}", "", "x{a}", None, A),
    (r"a}]", "", "a}]", None, A),
    (r"x{1,2", "", "x{12,", None, A),
    (r"\f\v\r\0", "", "\f\v\r\0a", r"\f\v\r\x00", A),
    (r"a\-b\@c\ d\#", "", "ab-@c d#", None, A),
    # case-insensitive
    (r"Hello[a-c]", "i", "hHeElLoOabcABCd", None, re.I | A),
    (r"[^a-z]+", "i", "aZ1_", None, re.I | A),
    (r"[^\d]x", "i", "1aX", None, re.I | A),
    (r"\x41b", "i", "aAbB", None, re.I | A),
    (r"strasse|k+", "i", "sStTrRaAeEkKKſ", None, re.I),
    (r"σ+", "i", "Σσςs", None, re.I),
    (r"\W[\W]", "i", "aK!_kſ ", None, re.I | A),
    (r"[^\Wk]+", "i", "aK!_kKſ ", None, re.I | A),
    (r"[k\d]+", "i", "aK!_kKſ1", None, re.I),
]


_CATEGORY = re.compile(r"\\[dDwWsS]")


def _python_too(pattern: str, py_flags: int):
    """Patterns with class escapes mean what *both* ECMA-262 and Python's re (jsonschema's engine)
    agree on: a string is generated only if both engines match it."""
    if not _CATEGORY.search(pattern):
        return None
    return re.compile(pattern, py_flags & ~re.ASCII)


def _search_py(pattern: str) -> str:
    # Python's "$" also matches before a final "\n"; ECMA's only at the end.
    return re.sub(r"(?<!\\)\$(?=\||\Z)", r"\\Z", pattern)


@pytest.mark.parametrize("pattern,flags,alphabet,py,py_flags", CASES, ids=[c[0] or "<empty>" for c in CASES])
def test_agrees_with_re(pattern: str, flags: str, alphabet: str, py: str | None, py_flags: int) -> None:
    expr = parse_regex(pattern, flags)
    _check_shape(expr)
    ref = re.compile(py if py is not None else pattern, py_flags)
    python = _python_too(pattern, py_flags)
    seen = set()
    for s in _inputs(expr, alphabet, seed=zlib.crc32(pattern.encode())):
        got, want = expr_fullmatch(expr, s), ref.fullmatch(s) is not None
        if python is not None:
            want = want and python.fullmatch(s) is not None
        assert got == want, (pattern, s)
        seen.add(want)
    if pattern not in ("",):
        assert seen == {True, False}, "the inputs should exercise both outcomes"


@pytest.mark.parametrize("pattern,flags,alphabet,py,py_flags", CASES, ids=[c[0] or "<empty>" for c in CASES])
def test_search_agrees_with_re(pattern: str, flags: str, alphabet: str, py: str | None, py_flags: int) -> None:
    expr = search_expr(pattern, flags)
    _check_shape(expr)
    ref = re.compile(_search_py(py if py is not None else pattern), py_flags)
    python = _python_too(pattern, py_flags)
    for s in _inputs(parse_regex(pattern, flags), alphabet, seed=7, n=600):
        got = expr_fullmatch(expr, s)
        if python is None:
            assert got == (ref.search(s) is not None), (pattern, s)
        else:  # sound under both engines (the search wrapper may pick other positions: no equality)
            assert not got or (ref.search(s) is not None and python.search(s) is not None), (pattern, s)


def test_search_anchoring_per_alternative() -> None:
    e = search_expr(r"^a|b$|^c$|d")
    for s, want in [("ax", True), ("xa", False), ("xb", True), ("bx", False), ("c", True),
                    ("xc", False), ("xdx", True), ("", False)]:
        assert expr_fullmatch(e, s) == want, s
    assert search_expr(r"^abc$") == parse_regex("abc")
    assert expr_fullmatch(search_expr("a*"), "zzz")
    assert expr_fullmatch(search_expr(""), "anything")


def test_literals_stay_literals() -> None:
    assert parse_regex("abc") == Lit("abc")
    assert parse_regex(r"^\d{3}-\d{4}$") == Seq((
        Repeat(CharSet(((48, 57),)), 3, 3), Lit("-"), Repeat(CharSet(((48, 57),)), 4, 4)))
    assert parse_regex(r"\uD83D\uDE00") == Lit("\U0001F600")
    assert parse_regex("\ud83d\ude00") == Lit("\U0001F600")  # raw surrogate pair in the text


def test_no_surrogates_anywhere() -> None:
    assert ANY_CHAR == CharSet(((0, 0xD7FF), (0xE000, 0x10FFFF)))
    for p, f in [(".", "s"), (".", ""), (r"\S", ""), (r"\W", "i"), ("[^a]", ""), ("[^a]", "i"),
                 (r"[\u0000-\u{10FFFF}]", ""), (r"[\ud000-\ue000]", "")]:
        _check_shape(parse_regex(p, f))
    assert parse_regex(r"[\ud800-\udfff]") == NOTHING
    assert parse_regex(r"\ud800") == NOTHING
    assert parse_regex(r"a\udc00|b") == Lit("b")


def test_flags() -> None:
    assert parse_regex("a", "u") == Lit("a")
    e = parse_regex("k", "i")
    assert all(expr_fullmatch(e, c) for c in "kK\u212a")
    for bad in ["g", "m", "x", "y", "is?"]:
        with pytest.raises(RegexError):
            parse_regex("a", bad)


# --------------------------------------------------------------------------- rejected syntax

ERRORS = [
    # lookaround
    ("(?=a)", 0), ("a(?!b)", 1), ("(?<=a)b", 0), ("x(?<!a)b", 1),
    # backreferences
    (r"(a)\1", 3), (r"(?<n>a)\k<n>", 7), (r"(?P<n>a)(?P=n)", 8), (r"[\1]", 1),
    # word boundaries
    (r"\bfoo", 0), (r"foo\B", 3), (r"[\B]", 1),
    # parentheses
    ("(ab", 0), ("a(b(c)", 1), ("ab)", 2), (")", 0), ("a|b)", 3), ("(?i)a", 0), ("(?#c)a", 0),
    ("(?<1>a)", 3), ("(?<ab", 0),
    # ranges
    ("[z-a]", 1), ("x[b-a]", 2), (r"[\d-z]", 1), (r"[a-\w]", 1), (r"[\u0062-\x61]", 1),
    # nothing to repeat / bad counts
    ("*a", 0), ("a|*", 2), ("(+)", 1), ("?", 0), ("a**", 2), ("a*+", 2), ("a??+", 3),
    ("a{2}{3}", 4), ("^*", 1), ("{2}", 0), ("a{3,2}", 1), ("a{,3}", 1),
    # anchors
    ("a^", 1), ("a$b", 1), ("a(^b)", 2), ("(a$)b", 2), ("a$*", 1), ("^^a", 1),
    # classes
    ("[abc", 0), ("x[", 1), ("[]a]", 1), ("[^]", 2), ("[^]a]", 2),
    # escapes
    (r"\a", 0), (r"x\z", 1), (r"\A", 0), (r"\Z", 0), (r"\cJ", 0),
    (r"\U0001F600", 0), (r"\N{DASH}", 0), (r"\e", 0), (r"\_", 0), (r"\01", 0),
    (r"\x4", 0), (r"\xg0", 0), (r"\u12", 0), (r"\u{110000}", 0), (r"\u{}", 0), (r"\u{12", 0),
    ("abc\\", 3), (r"[\q]", 1),
    # Unicode properties beyond General_Category, malformed ones, and under "i"
    (r"x\p{Script=Greek}", 1), (r"\p{sc=Latn}", 0), (r"ab\p{Alphabetic}", 2), (r"[a\P{Emoji}]", 2), (r"\p{Lx}", 0),
    (r"\pL", 0), (r"\p{L", 0),
]


@pytest.mark.parametrize("pattern,position", ERRORS, ids=[p for p, _ in ERRORS])
def test_error_positions(pattern: str, position: int) -> None:
    with pytest.raises(RegexError) as info:
        parse_regex(pattern)
    assert info.value.position == position, info.value.message
    assert info.value.pattern == pattern
    assert isinstance(info.value, ValueError)
    with pytest.raises(RegexError):
        search_expr(pattern)


def test_unicode_property_escapes() -> None:
    """``\\p{...}`` General_Category values (short and long names, ``gc=``), ``\\P`` and
    ``[^\\p..]`` complements, checked against ``unicodedata`` on a sample of code points."""
    import unicodedata

    sample = [chr(c) for c in range(0, 0x30000, 37) if not 0xD800 <= c <= 0xDFFF] + list("aZ9_ π١€\u2028")
    cases = {
        r"\p{L}": lambda c: unicodedata.category(c)[0] == "L",
        r"\p{Letter}": lambda c: unicodedata.category(c)[0] == "L",
        r"\p{Lu}": lambda c: unicodedata.category(c) == "Lu",
        r"\p{gc=Nd}": lambda c: unicodedata.category(c) == "Nd",
        r"\p{General_Category=Currency_Symbol}": lambda c: unicodedata.category(c) == "Sc",
        r"\p{LC}": lambda c: unicodedata.category(c) in ("Lu", "Ll", "Lt"),
        r"\P{L}": lambda c: unicodedata.category(c)[0] != "L",
        r"[^\p{N}\p{Zs}]": lambda c: unicodedata.category(c) not in ("Nd", "Nl", "No", "Zs"),
        r"[\p{Lu}0-9]": lambda c: unicodedata.category(c) == "Lu" or "0" <= c <= "9",
        r"\p{ASCII}": lambda c: ord(c) < 0x80,
        r"\p{Assigned}": lambda c: unicodedata.category(c) != "Cn",
    }
    for pattern, want in cases.items():
        e = parse_regex(pattern)
        _check_shape(e)
        for c in sample:
            assert expr_fullmatch(e, c) == want(c), (pattern, hex(ord(c)))
    assert expr_fullmatch(parse_regex(r"^\p{Letter}+$"), "Hélloπ")
    assert not expr_fullmatch(search_expr(r"^\p{Letter}+$"), "123")
    with pytest.raises(RegexError):
        parse_regex(r"\p{Lu}", flags="i")  # ECMA folds the set under i: not modelled


def test_python_class_escapes_equal_re_on_every_code_point() -> None:
    """The code points Python's ``re`` gives ``\\d``, ``\\w`` and ``\\s`` (the wide side of
    a class escape) are computed from runs of the complement: checked here against ``re``
    matching each code point on its own, the whole range."""
    from structgen.regex.parser import _python_categories

    cats = _python_categories()
    for key in "dws":
        one = re.compile(f"\\{key}")
        want = [c for c in range(0x110000) if one.match(chr(c))]
        got = [c for lo, hi in cats[key].ranges for c in range(lo, hi + 1)]
        assert got == want, key


# -- matching values as structgen reads a pattern (run-time validation) ----------------------


@pytest.mark.parametrize("pattern", ["^[a-z]+$", "b", "^a|b$", "[0-9]{2,3}", "^$", "x?y", "(ab)+c", "^\\w+@\\w+\\.com$"])
def test_pattern_search_agrees_with_re_where_re_compiles(pattern):
    from structgen.regex.matching import pattern_search

    search = pattern_search(pattern)
    for text in ["", "a", "abc", "b", "ab", "12", "1234", "y", "xy", "ababc", "abab", "me@x.com", "me@x.co", "A1"]:
        assert search(text) == (re.search(pattern, text) is not None), (pattern, text)


def test_pattern_search_reads_property_escapes_and_ecma_end():
    from structgen.regex.matching import pattern_search

    assert pattern_search("^\\p{Letter}+$")("Zoë") and not pattern_search("^\\p{Letter}+$")("Zoë1")
    assert pattern_search("\\p{Lu}")("abC") and not pattern_search("\\p{Lu}")("abc")
    assert not pattern_search("^a$")("a\n")  # ECMA's $ (Python's re.search accepts "a\n")
    with pytest.raises(RegexError):
        pattern_search("a{2,1}")


def test_enum_beside_a_property_escape_pattern_is_decided():
    """An enum's members are checked against their sibling pattern by jsonschema, which has no
    \\p: such a schema was refused with a RegexError; the members are now decided as structgen
    reads the pattern."""
    from structgen import GrammarCompiler, TokenizerInfo

    info = TokenizerInfo.from_token_bytes([bytes([b]) for b in range(256)] + [None], stop_token_ids=[256],
                                          vocab_size=257)
    g = GrammarCompiler(info).compile_json_schema({"type": "string", "enum": ["Zoë", "Zoë1"],
                                                   "pattern": "^\\p{Letter}+$"})
    m = g.matcher()
    assert m.accept_string('"Zoë"') and m.is_completed()
    assert not g.matcher().accept_string('"Zoë1"')
