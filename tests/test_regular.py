"""Intersection and difference of regular expressions, checked against Python's re."""
from __future__ import annotations

import random
import re

import pytest

from structgen.grammar import Alt, CharSet, Lit, Repeat, iter_nodes
from structgen.regex import ANY_CHAR, parse_regex
from structgen.regex.regular import difference, intersect

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
    # built JSON-encoded in the same walk: the encoded text of exactly the same names
    import json

    from structgen.regex.regular import star_minus_literals
    from structgen.schema.strings import json_encode_leaf
    encoded = star_minus_literals(chars, names, json_encode_leaf)
    for s in samples:
        assert expr_fullmatch(encoded, json.dumps(s, ensure_ascii=False)[1:-1]) == expr_fullmatch(slow, s), (names, s)


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
    # any name but 40 declared ones: leaving the trie by a non-ASCII or escaped character is
    # written once, not under every trie node (Github_ultra o12343, Kubernetes kb_0 were refused)
    names = [f"property_name_{i}_with_a_long_suffix" for i in range(40)]
    e = difference(Repeat(ANY_CHAR, 0, None), Alt(tuple(Lit(n) for n in names)))
    special_sets = [x for x in iter_nodes(e) if isinstance(x, CharSet) and any(hi > 0x7F for _, hi in x.ranges)]
    assert len(special_sets) <= 3
    assert not expr_fullmatch(e, names[7]) and expr_fullmatch(e, names[7] + "é") and expr_fullmatch(e, "property_name_")


def test_native_names_walk_equals_reference(monkeypatch):
    """The names trie walk builds, natively, the very expression trees of the Python walk
    with the general seq/alt (tests/reference_regular.py), on names with quotes, backslashes,
    control and non-ASCII characters, decoded and JSON-encoded; the nodes it makes hash,
    compare and print like any others."""
    from structgen import _core
    from structgen.regex.regular import star_minus_literals
    from structgen.schema.strings import json_encode_leaf

    from . import reference_regular

    rng = random.Random(11)
    alphabet = ["a", "b", "c", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", " ", "_"]
    native = _core.names_trie_walk
    for _ in range(400):
        names = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 8))]
        for chars in (ANY_CHAR, CharSet.of([(0x20, 0x7E)]), CharSet.of([(0x61, 0x7A)])):
            for leaf in (None, json_encode_leaf):
                got = star_minus_literals(chars, names, leaf)
                with monkeypatch.context() as m:
                    m.setattr(_core, "names_trie_walk", reference_regular.names_trie_walk)
                    want = star_minus_literals(chars, names, leaf)
                assert got == want and hash(got) == hash(want) and repr(got) == repr(want), names
    assert _core.names_trie_walk is native



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
