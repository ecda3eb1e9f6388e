"""Intersection and difference of regular expressions, checked against Python's re."""
from __future__ import annotations

import random
import re

import pytest

from structgen.grammar import Alt, CharSet, Dfa, Lit, Repeat, iter_nodes
from structgen.regex import ANY_CHAR, parse_regex
from structgen.regex.regular import difference, intersect

from . import reference_regular
from .exprmatch import expr_fullmatch

PAIRS = [
    (r"[a-z]{3,16}", r".{0,5}", "abcXYZ"),
    (r"\d{3}-\d{4}", r".{8}", "0123-a"),
    (r"(ab|a)*c?", r"a*b*c", "abc"),
    (r"[^x]*", r"y.*", "xyz"),
    (r"[😀-😎]+ ok", r".{1,4}", "😀😎 ok"),
    (r"colou?r", r"color|colour|colr", "colur"),
    (r"", r"a*", "ab"),
]


def strings(alphabet: str, rng: random.Random, n: int = 400):
    yield ""
    for _ in range(n):
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))


@pytest.mark.parametrize("a,b,alphabet", PAIRS)
def test_intersect_and_difference_match_re(a, b, alphabet):
    ea, eb = parse_regex(a), parse_regex(b)
    inter, diff = intersect(ea, eb), difference(ea, eb)
    ra, rb = re.compile(a), re.compile(b, re.DOTALL if b.startswith(".") else 0)
    rng = random.Random(a)
    for s in strings(alphabet, rng):
        in_a, in_b = ra.fullmatch(s) is not None, (rb.fullmatch(s) is not None) and "\n" not in s
        assert expr_fullmatch(inter, s) == (in_a and in_b), (a, b, s)
        assert expr_fullmatch(diff, s) == (in_a and not in_b), (a, b, s)


def test_excluding_declared_names():
    names = Alt((Lit("id"), Lit("name"), Lit("")))
    keys = difference(Repeat(ANY_CHAR, 0, None), names)
    for s, ok in [("id", False), ("name", False), ("", False), ("i", True), ("ids", True), ("nam", True), ("x", True)]:
        assert expr_fullmatch(keys, s) == ok, s


def test_empty_intersection_is_nothing():
    from structgen.grammar import NOTHING

    assert intersect(Lit("a"), CharSet.of([(0x62, 0x62)])) == NOTHING


@pytest.mark.parametrize("seed", range(12))
def test_star_minus_literals_equals_the_product_construction(seed):
    # the direct trie construction must give the language of the general DFA difference
    from structgen.regex.regular import _dfa, _product, _to_expr

    rng = random.Random(seed)
    alphabet = "abé\"" if seed % 2 else "ab"
    chars = ANY_CHAR if seed % 3 else CharSet.of([(0x61, 0x62)])
    names = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 6))})
    lits = Alt(tuple(Lit(n) for n in names)) if len(names) > 1 else Lit(names[0])
    fast = difference(Repeat(chars, 0, None), lits)
    slow = _to_expr(*_product(_dfa(Repeat(chars, 0, None)), _dfa(lits), keep_b_final=False))
    samples = ["".join(rng.choice(alphabet + "c") for _ in range(rng.randint(0, 6))) for _ in range(300)] + names
    for s in samples:
        assert expr_fullmatch(fast, s) == expr_fullmatch(slow, s), (names, s)
    # over the JSON-string text: the texts of exactly the same names
    import json

    from structgen.regex.regular import star_minus_literals
    encoded = star_minus_literals(chars, names, json_text=True)
    for s in samples:
        assert expr_fullmatch(encoded, json.dumps(s, ensure_ascii=False)[1:-1]) == expr_fullmatch(slow, s), (names, s)


_NAME_ALPHABET = ["a", "b", "c", '"', "\\", "\n", "\t", "\x00", "\x08", "\x1f", "\x7f", "é", "\u2028", "😀", " ", "_", "u", "0"]
_NAME_CLASSES = [ANY_CHAR, CharSet.of([(0x20, 0x7E)]), CharSet.of([(0x61, 0x7A)]), CharSet.of([(0x00, 0x0A), (0x22, 0x22)]),
                 CharSet.of([(0x5C, 0x5C), (0x1F, 0x1F), (0xE9, 0xE9)]), CharSet.of([(0x61, 0x61)]), CharSet(())]


def test_names_automaton_equals_the_general_difference():
    """``star_minus_literals``'s automaton (``_core.names_except``) against the general
    construction of the reference: DFA of ``chars*`` (over the JSON-string text:
    ``json_text_expr`` of it) minus the DFA of the names' texts; on names with quotes,
    backslashes, short-escaped and ``\\u00XX`` controls, non-ASCII and astral characters, names
    outside the class, the empty name, and classes from empty to every character."""
    import json

    from structgen.grammar import NOTHING
    from structgen.regex.regular import star_minus_literals
    from structgen.regex.regular import json_text_expr

    rng = random.Random(11)
    checked = empty = 0
    for _ in range(300):
        names = ["".join(rng.choice(_NAME_ALPHABET) for _ in range(rng.randint(0, 5))) for _ in range(rng.randint(1, 7))]
        for chars in _NAME_CLASSES:
            inside = [n for n in names if all(ord(c) in chars for c in n)]
            for json_text in (False, True):
                got = star_minus_literals(chars, names, json_text=json_text)
                text = (lambda n: json.dumps(n, ensure_ascii=False)[1:-1]) if json_text else (lambda n: n)
                star = Repeat(chars, 0, None)
                words = Alt(tuple(Lit(text(n)) for n in inside))
                want_star = json_text_expr(star) if json_text else star
                if got == NOTHING:  # only chars* = {""} with "" a name
                    assert not chars.ranges and "" in names
                    empty += 1
                    continue
                assert isinstance(got, Dfa)
                want = reference_regular.product(reference_regular.dfa(want_star), reference_regular.dfa(words),
                                                 keep_b_final=False)
                got_dfa = reference_regular.dfa(got)
                assert not any(reference_regular.product(got_dfa, want, keep_b_final=False)[1]), (chars, names, json_text)
                assert not any(reference_regular.product(want, got_dfa, keep_b_final=False)[1]), (chars, names, json_text)
                # the expression a grammar prints for it (Lark) has the same language
                printed = reference_regular.dfa(got.source())
                assert not any(reference_regular.product(got_dfa, printed, keep_b_final=False)[1]), (chars, names)
                assert not any(reference_regular.product(printed, got_dfa, keep_b_final=False)[1]), (chars, names)
                checked += 1
    assert checked > 3000 and empty > 0


def test_names_automaton_is_trimmed_and_labelled():
    from structgen.regex.regular import star_minus_literals

    e = star_minus_literals(ANY_CHAR, ["ab", "a\"", "x"], json_text=True)
    n = len(e.trans)
    seen, todo = {0}, [0]
    while todo:
        for _, _, t in e.trans[todo.pop()]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    assert seen == set(range(n))
    ends = {s for s in range(n) if e.final[s]}
    changed = True
    while changed:
        changed = False
        for s in range(n):
            if s not in ends and any(t in ends for _, _, t in e.trans[s]):
                ends.add(s)
                changed = True
    assert ends == set(range(n))
    for row in e.trans:
        assert all(lo <= hi for lo, hi, _ in row) and all(a[1] < b[0] for a, b in zip(row, row[1:]))
    # equal arguments, equal nodes; the label tells the language apart
    assert e == star_minus_literals(ANY_CHAR, ("ab", "a\"", "x"), json_text=True)
    assert e != star_minus_literals(ANY_CHAR, ["ab", "a\"", "x"])
    assert e != star_minus_literals(ANY_CHAR, ["ab", "x"], json_text=True)
    assert "JSON text" in e.label and "'ab'" in e.label


def _tree_size(e) -> int:
    return sum(1 for _ in iter_nodes(e))


def test_products_are_minimised_before_elimination():
    # MaskBench Github_easy o10013: maxLength = minLength = 12 with pattern [0-9a-fA-F]+ gave a
    # 24,550-node expression (equivalent product states copied) and the schema was refused
    from structgen.regex import search_expr

    e = intersect(Repeat(ANY_CHAR, 12, 12), search_expr("[0-9a-fA-F]+"))
    assert _tree_size(e) < 1000
    for s, ok in [("zzzzzzzzzzzz", False), ("zzzzzzzzzzza", True), ("a" * 12, True), ("a" * 11, False), ("ézzzzzzzzzz0", True)]:
        assert expr_fullmatch(e, s) == ok, s


def test_many_declared_names_stay_small():
    # any name but 40 declared ones: one state per trie node and a few for the rest, where
    # anything may follow (Github_ultra o12343, Kubernetes kb_0 were refused)
    names = [f"property_name_{i}_with_a_long_suffix" for i in range(40)]
    e = difference(Repeat(ANY_CHAR, 0, None), Alt(tuple(Lit(n) for n in names)))
    trie_nodes = len({n[:k] for n in names for k in range(len(n) + 1)})
    assert isinstance(e, Dfa) and len(e.trans) <= trie_nodes + 1
    assert not expr_fullmatch(e, names[7]) and expr_fullmatch(e, names[7] + "é") and expr_fullmatch(e, "property_name_")


def test_difference_product_keeps_the_dead_side_apart_from_the_start():
    # a: one state looping on [a-z] (its start state is re-entered); b: "b" then anything.
    # After "a", b is dead: that pair must not be taken for the start pair, or "ab" would
    # count as starting with "b" and be refused.
    from structgen.regex.regular import _product

    a = ([[(0x61, 0x7A, 0)]], [True])
    b = ([[(0x62, 0x62, 1)], [(0x61, 0x7A, 1)]], [False, True])
    trans, final = _product(a, b, keep_b_final=False)

    def accepts(s: str) -> bool:
        q = 0
        for ch in s:
            q = next((t for lo, hi, t in trans[q] if lo <= ord(ch) <= hi), -1)
            if q < 0:
                return False
        return bool(final[q])

    for s in ["", "a", "ab", "abb", "ba", "b", "cb", "zzb"]:
        assert accepts(s) == (not s.startswith("b")), s
