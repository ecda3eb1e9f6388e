"""Counted repetition: large bounds are counters, exact, and cost what the unbounded form costs.

The reference for every mask is the same schema compiled with counting switched off (the
bounded repeat unrolled into states), which is exact by construction; the counted automaton
shares masks between counter values far from the bounds, and these tests are what shows the
sharing never changes an answer.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher
from structgen.index import counters
from structgen.index.automaton import build_automaton
from structgen.grammar import MAX_CODEPOINT, CharSet, Grammar, Repeat
from structgen.regex import parse_regex
from structgen.regex.regular import bound_length, intersect

from .conftest import toy_info
from .exprmatch import expr_fullmatch

# multi-byte tokens that cross item and string boundaries, so one token completes several
# items, ends the string or the array, or stops just short of a bound
_TOKENS = [b"ab", b"abcde", b"aaaa", b'"', b'",', b'a"', b'"]', b"1,", b",2", b"12", b'"a', b"\\n", b"\xc3\xa9",
           b'x",', b"]", b"[", b"3]", b'aaaa"', b'abcde",', b"12,12]", b'ababab"', b'aaaaaaa"]', b'aaaaaaaa"', b'1,2,3,4]']


def _compilers(info):
    return GrammarCompiler(info), GrammarCompiler(info)


def _unrolled(compiler: GrammarCompiler, schema: dict, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(counters, "COUNT_THRESHOLD", 10**9)
        compiled = compiler.compile_json_schema(schema)
    assert not any(isinstance(r, counters.CounterRule) for r in compiled.index._pda.rules)
    return compiled


def _walk_equal(counted, unrolled, text: str) -> bool:
    """Step both matchers through ``text`` char by char, comparing masks and completion at
    every position; returns whether the whole text was accepted (by both, identically)."""
    a, b = GrammarMatcher(counted), GrammarMatcher(unrolled)
    for i, ch in enumerate(text):
        assert np.array_equal(counted.index.mask(a.state), unrolled.index.mask(b.state)), (text, i)
        assert a.is_completed() == b.is_completed(), (text, i)
        ok_a, ok_b = a.accept_string(ch), b.accept_string(ch)
        assert ok_a == ok_b, (text, i)
        if not ok_a:
            return False
    assert np.array_equal(counted.index.mask(a.state), unrolled.index.mask(b.state)), text
    assert a.is_completed() == b.is_completed()
    return a.is_completed()


CASES = [
    # (schema, n -> an instance of about n items, the (lo, hi) its length must lie in)
    ({"type": "string", "maxLength": 90}, lambda n: "a" * n, (0, 90)),
    ({"type": "string", "minLength": 70, "maxLength": 100}, lambda n: "ab" * (n // 2) + "é" * (n % 2), (70, 100)),
    ({"type": "string", "minLength": 80}, lambda n: "x\n" * (n // 2) + "a" * (n % 2), (80, None)),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 75}, lambda n: [12] * n, (0, 75)),
    ({"type": "array", "items": {"type": "string", "maxLength": 70}, "minItems": 66, "maxItems": 68},
     lambda n: ["a" * 70] * n, (66, 68)),
    ({"type": "string", "pattern": "^[a-c]{65,99}$"}, lambda n: "abc" * (n // 3) + "a" * (n % 3), (65, 99)),
    ({"type": "string", "pattern": "^https?://\\S*$", "maxLength": 85}, lambda n: "http://" + "a" * max(n - 7, 0), (7, 85)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_counted_masks_equal_unrolled_at_every_position(case, monkeypatch):
    schema, make, (lo, hi) = CASES[case]
    info = toy_info(_TOKENS)
    c1, c2 = _compilers(info)
    counted = c1.compile_json_schema(schema)
    assert any(isinstance(r, counters.CounterRule) for r in counted.index._pda.rules), "not counted"
    unrolled = _unrolled(c2, schema, monkeypatch)
    top = hi if hi is not None else lo + 20
    for n in sorted({max(lo - 1, 0), lo, lo + 1, (lo + top) // 2, top - 1, top, top + 1}):
        value = make(n)
        accepted = _walk_equal(counted, unrolled, json.dumps(value, separators=(",", ":"), ensure_ascii=False))
        assert accepted == (lo <= len(value) and (hi is None or len(value) <= hi)), n


def test_counted_masks_equal_unrolled_on_smollm2(smollm2_info, monkeypatch):
    """The real vocabulary: 81-byte tokens, so sharing starts 82 items away from a bound."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 200}}, "required": ["s"]}
    c1, c2 = _compilers(smollm2_info)
    counted, unrolled = c1.compile_json_schema(schema), _unrolled(c2, schema, monkeypatch)
    text = '{"s":' + json.dumps("hello world, " * 15 + "abcde") + "}"
    assert _walk_equal(counted, unrolled, text)
    assert not _walk_equal(counted, unrolled, '{"s":' + json.dumps("x" * 201) + "}")


@pytest.mark.parametrize("schema", [
    {"type": "array", "maxItems": 10**12, "items": {"type": "integer"}},
    {"type": "array", "minItems": 10**12},
    {"type": "string", "maxLength": 10**12},
    {"type": "string", "minLength": 10**9},
    {"type": "string", "pattern": "^a{1000000000}$"},
    {"type": "string", "pattern": "^[a-z0-9_-]+$", "maxLength": 100000},
], ids=["maxItems", "minItems", "maxLength", "minLength", "pattern-repeat", "pattern-maxLength"])
def test_huge_bounds_compile_like_the_unbounded_form(schema):
    """Any bound compiles to about as many states as the unbounded form (the counter is one
    rule), and the bound is still enforced at the small end."""
    compiler = GrammarCompiler(toy_info([]))
    compiled = compiler.compile_json_schema(schema)
    unbounded = {k: v for k, v in schema.items() if k not in ("maxItems", "minItems", "maxLength", "minLength")}
    if "pattern" in schema and "{" in schema["pattern"]:
        unbounded["pattern"] = "^a+$"
    plain = compiler.compile_json_schema(unbounded)
    assert compiled.stats.automaton_states <= plain.stats.automaton_states + 40
    m = compiled.matcher()
    if schema.get("minItems") or schema.get("minLength") or "{" in schema.get("pattern", ""):
        first = "[1," if schema.get("type") == "array" else '"a'
        assert m.accept_string(first + ("1," if first == "[1," else "a") * 500)
        assert not m.accept_string("]" if first == "[1," else '"'), "ended below the minimum"
    else:
        text = json.dumps([1] * 500, separators=(",", ":")) if schema["type"] == "array" else json.dumps("a" * 500)
        assert m.accept_string(text) and m.is_completed()


def test_long_string_needs_few_masks_and_configurations(smollm2_info):
    """maxLength 100000: 5,000 characters in, masks are shared by counter class (at most
    about twice the reach of one token), and each character adds about one configuration."""
    compiled = GrammarCompiler(smollm2_info).compile_json_schema({"type": "string", "maxLength": 100000})
    index = compiled.index
    m = compiled.matcher()
    masks = set()
    text = '"' + "lorem ipsum " * 420
    for i, ch in enumerate(text):
        if i % 7 == 0:
            masks.add(id(index.mask(m.state)))
        assert m.accept_string(ch)
    assert len(masks) <= 4, len(masks)  # the far class, plus the first characters
    assert index.num_configs < 3 * len(text)
    assert m.accept_string('"') and m.is_completed()


def test_mask_classes_near_the_upper_bound_are_exact(smollm2_info):
    """The last characters before maxLength get masks of their own: a token that would
    overrun the bound is masked exactly when it does."""
    compiled = GrammarCompiler(smollm2_info).compile_json_schema({"type": "string", "maxLength": 1000})
    info, m = smollm2_info, compiled.matcher()
    assert m.accept_string('"' + "a" * 990)
    allowed = compiled.index.allowed_tokens(m.state)
    plain = [i for i, b in enumerate(info.token_bytes) if b and b.isalpha() and b.isascii()]
    for tok in plain:
        assert allowed[tok] == (len(info.token_bytes[tok]) <= 10), info.token_bytes[tok]


def test_nullable_items_stay_unrolled():
    """A repeat whose item can be empty is not counted (its count would not measure bytes)."""
    g = Grammar.from_lark('start: ("a"? "b"?)~100 "c"')
    rules, found = counters.lift_counters(g.rules)
    assert not found
    m = GrammarCompiler(toy_info([])).compile_grammar(g).matcher()
    assert m.accept_string("ab" * 100 + "c") and m.is_completed()


def _reference_nullables(rules):
    """The least fixed point over the expression trees, in Python (the oracle)."""
    null: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in null and counters.nullable(body, null):
                null.add(name)
                changed = True
    return null


_NULLABLE_GRAMMARS = [
    'start: a b\na: "x"? c\nb: c*\nc: "w"? | a "y"',  # nullable only through the fixed point
    'start: a\na: b "z" | c\nb: a\nc: /(q|)/',  # a regex that matches the empty string
    'start: a~3\na: b?\nb: "k"+',
    'start: "s" a\na: a "t" | "u"',  # never nullable
]


@pytest.mark.parametrize("text", _NULLABLE_GRAMMARS)
def test_native_nullables_equal_the_reference(text):
    g = Grammar.from_lark(text)
    native = counters.serializer({n: i for i, n in enumerate(g.rules)})
    native.add_rules(g.rules.values())
    got = {name for name, v in zip(g.rules, native.rule_nullables()) if v}
    assert got == _reference_nullables(g.rules)


def test_native_nullables_equal_the_reference_on_schemas():
    from structgen.schema.to_grammar import convert_schema
    from .conftest import DATA

    cases = json.loads((DATA / "maskbench_sample.json").read_text()) + json.loads((DATA / "core_schemas.json").read_text())
    some_nullable = 0
    for case in cases:
        try:
            g = convert_schema(case["schema"], strict=False, whitespace="flexible", max_whitespace=8)
        except Exception:  # (schemas refused for other reasons; the test is about nullability)
            continue
        ser = counters.serializer({n: i for i, n in enumerate(g.rules)})
        ser.add_rules(g.rules.values())
        got = {name for name, v in zip(g.rules, ser.rule_nullables()) if v}
        assert got == _reference_nullables(g.rules), case.get("id")
        some_nullable += bool(got)
    assert some_nullable > 0  # flexible whitespace makes ws rules nullable: the test compares real sets


def test_lark_counted_repeat_and_recursion():
    """A counted repeat of a recursive rule: the counter frame sits below the recursion."""
    g = Grammar.from_lark('start: item~100..200\nitem: "(" item? ")"')
    pda = build_automaton(g)
    assert any(isinstance(r, counters.CounterRule) for r in pda.rules)
    compiled = GrammarCompiler(toy_info([])).compile_grammar(g)
    for n, ok in [(99, False), (100, True), (150, True), (200, True), (201, False)]:
        m = compiled.matcher()
        text = "(())" + "()" * (n - 1)
        assert (m.accept_string(text) and m.is_completed()) == ok, n


@pytest.mark.parametrize("pattern", ["[a-z]+", "https?://\\S*", "ab|c[0-9]*", "[a-z]{2}-[0-9]+", "\\+?[0-9 -]*", "(ab)+", "x?y?z*", "(abc){2,}x?", "(ab|cd)*"])
@pytest.mark.parametrize("bounds", [(0, 5), (3, None), (2, 4), (6, 6), (5, 7)])
def test_bound_length_equals_intersection(pattern, bounds):
    lo, hi = bounds
    e = parse_regex(pattern)
    fast = bound_length(e, lo, hi)
    slow = intersect(e, Repeat(CharSet(((0, MAX_CODEPOINT),)), lo, hi))
    rng = random.Random(f"{pattern}{bounds}")
    alphabet = "abcdxyz019 -+:/htps"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(9))) for _ in range(400)]
    words += ["https://a", "http://", "ab", "c12", "xy-12", "+1 2", "abab", "xyzz", "ababab"]
    for w in words:
        assert expr_fullmatch(fast, w) == expr_fullmatch(slow, w) == (expr_fullmatch(e, w) and lo <= len(w) and (hi is None or len(w) <= hi)), w
