"""The native code-point automata (structgen._core via structgen.regex.regular) equal the pure-Python
reference (tests/reference_regular.py) state for state: DFAs of expressions, products and
minimal DFAs, on fixed patterns and on random expression trees; the DFAs accept exactly the
strings the slow expression matcher accepts; and random expressions compiled to byte-level
rule DFAs equal the reference Thompson + subset construction (tests/reference_automaton.py).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from structgen.index import automaton
from structgen.regex import regular
from structgen.errors import LimitError
from structgen.grammar import Alt, CharSet, Dfa, Grammar, Lit, Repeat, Seq
from structgen.regex import parse_regex

from . import reference_automaton, reference_regular
from .exprmatch import expr_fullmatch

PATTERNS = [
    r"[a-z]{3,16}", r".{0,5}", r"\d{3}-\d{4}", r".{8}", r"(ab|a)*c?", r"a*b*c", r"[^x]*", r"y.*",
    r"[😀-😎]+ ok", r".{1,4}", r"colou?r", r"color|colour|colr", r"", r"a*", r"(a|b)*a(a|b){3}",
    r"[\u0100-\uffff]{2}|é+", r"(x(y|z)*)+w?", r"[0-9a-fA-F]+",
]

ALPHABET = "abcxyzé😀0-"


def _random_expr(rng: random.Random, depth: int):
    kind = rng.randrange(6 if depth > 0 else 2)
    if kind == 0:
        return Lit("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3))))
    if kind == 1:
        lo = rng.choice([0x30, 0x61, 0xE9, 0x1F600, 0x78])
        return CharSet.of([(lo, lo + rng.randint(0, 3)), (0x2D, 0x2D)] if rng.random() < 0.3 else [(lo, lo + rng.randint(0, 3))])
    if kind == 2:
        return Seq(tuple(_random_expr(rng, depth - 1) for _ in range(rng.randint(0, 3))))
    if kind == 3:
        return Alt(tuple(_random_expr(rng, depth - 1) for _ in range(rng.randint(0, 3))))
    lo = rng.randint(0, 2)
    return Repeat(_random_expr(rng, depth - 1), lo, None if kind == 4 else lo + rng.randint(0, 2))


def _strings(rng: random.Random, n: int = 150):
    yield ""
    for _ in range(n):
        yield "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7)))


def _accepts(dfa, s: str) -> bool:
    trans, final = dfa
    q = 0
    for ch in s:
        c = ord(ch)
        nxt = [t for lo, hi, t in trans[q] if lo <= c <= hi]
        if not nxt:
            return False
        q = nxt[0]
    return bool(final[q])


def _exprs():
    rng = random.Random(20261201)
    return [parse_regex(p) for p in PATTERNS] + [_random_expr(rng, 4) for _ in range(60)]


EXPRS = _exprs()


@pytest.mark.parametrize("i", range(len(EXPRS)))
def test_dfa_equals_reference_and_language(i):
    e = EXPRS[i]
    native = regular._dfa(e)
    assert native == reference_regular.dfa(e)
    assert regular._minimise(*native) == reference_regular.minimise(*native)
    rng = random.Random(i)
    for s in _strings(rng):
        assert _accepts(native, s) == expr_fullmatch(e, s), (e, s)


@pytest.mark.parametrize("i", range(0, len(EXPRS) - 1, 3))
@pytest.mark.parametrize("keep", [True, False])
def test_products_equal_reference(i, keep):
    a, b = regular._dfa(EXPRS[i]), regular._dfa(EXPRS[i + 1])
    assert regular._product(a, b, keep_b_final=keep) == reference_regular.product(a, b, keep_b_final=keep)
    # minimal operands re-enter their start states (x* is one state): the product must still
    # tell its start pair from "a's start, b dead"
    a, b = regular._minimise(*a), regular._minimise(*b)
    assert regular._product(a, b, keep_b_final=keep) == reference_regular.product(a, b, keep_b_final=keep)


def test_automaton_nodes_and_limits():
    # a Dfa node inside an expression, and the DFA limit reported as the reference does
    d = regular.intersect_automaton(parse_regex(r"[0-9]+"), parse_regex(r".{2,3}"), "two or three digits")
    assert isinstance(d, Dfa)
    e = Seq((Lit("x"), d, Lit("é")))
    assert regular._dfa(e) == reference_regular.dfa(e)
    big = parse_regex(r"[ab]*a[ab]{12}")
    errors = []
    for build in (regular._dfa, reference_regular.dfa):
        with pytest.raises(LimitError) as info:
            build(big)
        errors.append((str(info.value), info.value.reached))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("i", range(len(EXPRS)))
def test_byte_rule_dfa_equals_reference(i, monkeypatch):
    grammar = Grammar({"start": EXPRS[i]})
    built = []
    for ref in (False, True):
        with monkeypatch.context() as m:
            m.setattr(automaton, "_RULES", automaton._RuleDFAs())  # each side builds its rule
            if ref:
                m.setattr(automaton, "_rule_dfa", reference_automaton.rule_dfa)
                m.setattr(automaton, "_trim_and_minimise", reference_automaton.trim_and_minimise)
            try:
                built.append(automaton.build_automaton(grammar).rules[0])
            except Exception as exc:  # noqa: BLE001 - an empty language: both must refuse
                built.append(type(exc))
    native, ref = built
    if isinstance(native, type):
        assert native is ref
        return
    assert np.array_equal(native.trans, ref.trans) and np.array_equal(native.final, ref.final)
