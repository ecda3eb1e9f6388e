"""Adversarial schemas: each is answered by a result or by a located limit error.

Every case pins *what* comes back (a compiled grammar that accepts and rejects the right
text, or a ``LimitError`` / ``AutomatonSizeError`` / ``UnsupportedSchemaError`` naming the
construct), never how long it took. A SIGALRM guard only turns a hang into a failure
instead of a stuck test run; its budget is generous and no assertion reads a clock.
"""
from __future__ import annotations

import gc
import json
import random
import signal
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from structgen import (AutomatonSizeError, GrammarCompiler, LimitError, MatcherError, SchemaError,
                       UnsupportedSchemaError)
from structgen.errors import StructgenTypeError
from structgen.schema.pointer import from_path
from structgen.schema.text import MAX_NUMBER_LENGTH, check_schema_depth
from tests.conftest import toy_info

GUARD_SECONDS = 120  # a safety net against hangs, not a speed assertion


@contextmanager
def guard(seconds: int = GUARD_SECONDS):
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def hung(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s (hang guard)")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(toy_info([b'"', b"bb", b"bbbb", b"ab", b"abab", b'":', b'{"']), cache_size=0)


def compile_(compiler, schema, **kw):
    with guard():
        return compiler.compile_json_schema(schema, **kw)


def accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    with guard():
        return m.accept_string(text) and m.is_completed()


# -- counted repeats at decode time ---------------------------------------------------------


def test_pattern_b5000_decodes_with_bounded_configurations(compiler):
    g = compile_(compiler, {"type": "string", "pattern": "b{5000}"})
    m = g.matcher()
    bm = np.zeros((1, g.index.words), np.int32)
    assert m.accept_string('"')
    with guard():
        for i in range(5000):
            if i % 500 == 0:
                m.fill_next_token_bitmask(bm)
            assert m.accept_token(compiler.tokenizer_info.token_bytes.index(b"b"))
            # the unbounded-counter runs collapse: one stack per item state, not one per b
            assert len(g.index.config_stacks(m.state)) <= 4
    assert not m.is_completed() or m.accept_string('"')
    assert m.accept_string('"') and m.is_completed()
    assert not accepts(g, '"' + "b" * 4999 + '"')
    assert accepts(g, '"x' + "b" * 5001 + 'y"')


def test_pattern_ab3000_decodes_with_bounded_configurations(compiler):
    g = compile_(compiler, {"type": "string", "pattern": "(ab){3000}"})
    assert accepts(g, '"' + "ab" * 3000 + '"')
    assert accepts(g, '"zz' + "ab" * 3001 + 'a"')
    assert not accepts(g, '"' + "ab" * 2999 + 'b"')
    m = g.matcher()
    with guard():
        assert m.accept_string('"' + "ab" * 3000)
    assert max(len(g.index.config_stacks(c)) for c in m._history) <= 4


def test_end_anchored_run_of_one_class_decodes_with_bounded_configurations(compiler):
    # .*b{5000}$ would start a run at every b, each still counting: read as .*b{5000,}$
    # (the same strings), the runs subsume one another and one is kept
    g = compile_(compiler, {"type": "string", "pattern": "b{5000}$"})
    m = g.matcher()
    with guard():
        assert m.accept_string('"x' + "b" * 5000)
    assert max(len(g.index.config_stacks(c)) for c in m._history) <= 4
    assert m.accept_string('"') and m.is_completed()
    assert not accepts(g, '"' + "b" * 4999 + '"') and not accepts(g, '"' + "b" * 5000 + 'x"')
    assert accepts(g, '"' + "b" * 5003 + '"') and accepts(g, '"bxb' + "b" * 5000 + '"')


def test_end_anchored_repeat_of_a_longer_item_decodes_with_bounded_configurations(compiler):
    g = compile_(compiler, {"type": "string", "pattern": "(ab){3000}$"})
    m = g.matcher()
    with guard():
        assert m.accept_string('"b' + "ab" * 3000)
    assert max(len(g.index.config_stacks(c)) for c in m._history) <= 4
    assert m.accept_string('"') and m.is_completed()
    assert not accepts(g, '"' + "ab" * 2999 + '"') and not accepts(g, '"' + "ab" * 3000 + 'a"')


def test_config_stack_limit_refuses_and_leaves_the_matcher_usable(compiler, monkeypatch):
    # no pattern left in this suite grows configurations without bound; a small limit shows
    # the refusal: a LimitError from the step that would cross it, the matcher unchanged
    import structgen.index.counters

    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 3)
    # after i a's the count may be anything from i/2 to i: one stack per count
    g = compile_(compiler, {"type": "string", "pattern": "^(a|aa){100}$"})
    m = g.matcher()
    assert m.accept_string('"')
    with pytest.raises(LimitError) as info:
        for _ in range(20):
            m.accept_string("a")
    assert info.value.limit_name == "MAX_CONFIG_STACKS" and info.value.limit == 3
    assert len(g.index.config_stacks(m.state)) <= 3
    before, steps = m.state, len(m._history)
    with pytest.raises(LimitError):
        m.accept_string("a")
    assert m.state == before and len(m._history) == steps
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 512)
    assert m.accept_string("a" * (150 - steps + 1) + '"') and m.is_completed()


@pytest.mark.parametrize("pattern", ["x{70}$", "[0-9]{70}[a-c]$", "x{70,80}y", "^ax{70}", "[^x]{70}$", "x{70}", ".{70}$"])
def test_rewritten_long_runs_agree_with_re(compiler, pattern):
    import random
    import re

    rng = random.Random(7)
    g = compile_(compiler, {"type": "string", "pattern": pattern})
    for _ in range(60):
        text = ("".join(rng.choice("xxxy0a") for _ in range(rng.randint(0, 5))) + rng.choice("x0ya") * rng.randint(60, 90)
                + "".join(rng.choice("xya0") for _ in range(rng.randint(0, 3))))
        assert accepts(g, json.dumps(text)) == bool(re.search(pattern, text)), text


def test_nested_counted_repeat_pattern_is_answered(compiler):
    from structgen import RegexError

    with pytest.raises(RegexError) as info:  # ECMA-262 has no quantifier of a quantifier
        compile_(compiler, {"type": "string", "pattern": "(a|b|c){1000}{1000}"})
    assert info.value.pointer == "/pattern" and info.value.position == 13
    g = compile_(compiler, {"type": "string", "pattern": "^((a|b|c){1000}){1000}$"})
    assert not accepts(g, '"abc"')
    m = g.matcher()
    with guard():
        assert m.accept_string('"' + "abc" * 20_000)  # a million items: counters, not states
    assert max(len(g.index.config_stacks(c)) for c in m._history) <= 4


# -- counts that must not unroll ---------------------------------------------------------------


@pytest.mark.parametrize("n", [10**6, 10**9, 10**18])
def test_max_properties_huge_is_not_unrolled(compiler, n):
    g = compile_(compiler, {"type": "object", "maxProperties": n})
    assert accepts(g, '{"a":1,"b":[2]}') and accepts(g, "{}")
    g = compile_(compiler, {"type": "object", "properties": {"a": {"type": "integer"}}, "maxProperties": n})
    assert accepts(g, '{"a":1,"b":2}') and not accepts(g, '{"a":"x"}')


@pytest.mark.parametrize("n", [10**6, 10**9, 10**18])
def test_min_properties_huge_is_not_unrolled(compiler, n):
    g = compile_(compiler, {"type": "object", "minProperties": n})
    m = g.matcher()
    assert m.accept_string('{"a":1,"b":2') and not m.is_completed()
    assert not m.accept_string("}")


def test_max_properties_with_many_declared_properties_is_bounded(compiler):
    props = {f"p{i}": {"type": "integer"} for i in range(400)}
    with pytest.raises(LimitError) as info:
        compile_(compiler, {"type": "object", "properties": props, "maxProperties": 300})
    assert info.value.limit_name == "MAX_GRAMMAR_RULES" and info.value.pointer == ""
    few = compile_(compiler, {"type": "object", "properties": dict(list(props.items())[:20]), "maxProperties": 2})
    assert accepts(few, '{"p0":1,"p5":2}') and not accepts(few, '{"p0":1,"p1":2,"p2":3}')


@pytest.mark.parametrize("keyword,base,good,bad", [
    ("minItems", {"type": "array"}, None, "[1]"),
    ("maxItems", {"type": "array"}, "[1,2]", None),
    ("minLength", {"type": "string"}, None, '"ab"'),
    ("maxLength", {"type": "string"}, '"ab"', None),
    ("minContains", {"type": "array", "contains": {"type": "integer"}}, None, "[1,2]"),
    ("maxContains", {"type": "array", "contains": {"type": "integer"}}, "[1,2]", None),
])
@pytest.mark.parametrize("n", [10**9, 10**18])
def test_huge_counts_are_answered(compiler, keyword, base, good, bad, n):
    g = compile_(compiler, {**base, keyword: n})
    if good is not None:
        assert accepts(g, good)
    if bad is not None:
        assert not accepts(g, bad)


# -- alternatives, negation, patterns -------------------------------------------------------------


def test_enum_of_20000_strings_is_answered(compiler):
    values = [f"value{i}" for i in range(20000)]
    with pytest.raises(AutomatonSizeError):
        compile_(compiler, {"enum": values})
    big = GrammarCompiler(compiler.tokenizer_info, cache_size=0, max_states=400_000)
    g = compile_(big, {"enum": values})
    assert accepts(g, '"value19999"') and not accepts(g, '"value20000"')


def test_pattern_of_20000_alternatives_is_answered(compiler):
    pattern = "^(" + "|".join(f"w{i}x" for i in range(20000)) + ")$"
    with pytest.raises(AutomatonSizeError):
        compile_(compiler, {"type": "string", "pattern": pattern})


@pytest.mark.parametrize("k", [10, 15, 40])
def test_not_anyof_consts_is_one_negated_enum(compiler, k):
    g = compile_(compiler, {"not": {"anyOf": [{"const": f"v{i}"} for i in range(k)]}})
    assert not accepts(g, '"v3"') and accepts(g, '"v"') and accepts(g, "7")


def test_exponential_allof_of_anyofs_is_refused_at_the_users_allof(compiler):
    parts = [{"anyOf": [{"minLength": i}, {"maxLength": 100 + i}, {"minItems": i}]} for i in range(14)]
    with pytest.raises(LimitError) as info:  # 3**14 alternatives
        compile_(compiler, {"properties": {"x": {"allOf": parts}}})
    assert info.value.limit_name == "MAX_MERGE_STEPS" and info.value.pointer == "/properties/x/allOf"
    few = compile_(compiler, {"allOf": parts[:3]})
    assert accepts(few, '"abc"') and accepts(few, "[1,2]") and accepts(few, "5")


def test_not_anyof_of_ranges_names_the_users_construct(compiler):
    schema = {"not": {"anyOf": [{"type": "integer", "minimum": 10 * i, "maximum": 10 * i + 5} for i in range(15)]}}
    try:
        g = compile_(compiler, schema)
    except SchemaError as exc:
        assert "/allOf" not in exc.pointer  # the rewrite's allOf is not in the user's schema
        return
    assert accepts(g, "7") and not accepts(g, "3")


def test_two_pattern_properties_are_fast_or_bounded(compiler):
    schema = {"type": "object", "patternProperties": {"^[a-z]{2,40}$": {"type": "integer"}, "^x.*y$": {"type": "string"}}}
    try:
        g = compile_(compiler, schema)
    except (UnsupportedSchemaError, AutomatonSizeError) as exc:
        assert exc.pointer == "/patternProperties"
        return
    assert accepts(g, '{"ab":1,"x-y":"s"}') and not accepts(g, '{"ab":"s"}')
    assert not accepts(g, '{"xzy":"s"}') and not accepts(g, '{"xzy":1}')  # matches both patterns


# -- deep and wide structures ----------------------------------------------------------------


def test_deep_nesting_10000_levels_is_answered(compiler):
    schema: object = {"type": "integer"}
    for _ in range(10_000):
        schema = {"type": "array", "items": schema}
    before = sys.getrecursionlimit()
    with pytest.raises(LimitError) as info:  # refused before any stage recurses into it
        compile_(compiler, schema)
    assert info.value.limit_name == "MAX_SCHEMA_DEPTH"
    assert info.value.pointer == "/items" * 4000  # the first value past 4,000 JSON levels
    assert sys.getrecursionlimit() == before
    text = '{"type": "array", "items": ' * 10_000 + '{"type": "integer"}' + "}" * 10_000
    with pytest.raises(LimitError) as info:  # the text form too
        compiler.compile_json_schema(text)
    assert info.value.pointer == "/items" * 4000
    text = '{"type": "array", "items": ' * 30_000 + '{"type": "integer"}' + "}" * 30_000
    with pytest.raises(LimitError) as info:  # too deep for the decoder: located by line and column
        compiler.compile_json_schema(text)
    assert info.value.limit_name == "MAX_SCHEMA_DEPTH" and f"line 1, column {4000 * 27 + 1}" in str(info.value)
    ok = '{"type": "array", "items": ' * 1000 + '{"type": "integer"}' + "}" * 1000
    assert accepts(compiler.compile_json_schema(ok), "[" * 1000 + "1" + "]" * 1000)


def _first_too_deep(value, limit):
    """The depth check's walk in Python (the reference of the native one): depth first, an
    explicit stack, items pushed in order; the path of the first container at ``limit``."""
    stack = [(value, 0, ())]
    while stack:
        node, depth, path = stack.pop()
        if not isinstance(node, (dict, list, tuple)):
            continue
        if depth >= limit:
            return from_path(path), depth + 1
        for key, item in (node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(item, (dict, list, tuple)):
                stack.append((item, depth + 1, path + (key,)))
    return None


def test_depth_check_locates_as_the_reference_walk():
    rng = random.Random(7)

    def value(depth):
        r = rng.random()
        if depth > 9 or r < 0.3:
            return rng.choice([1, "x", None, True, 2.5])
        if r < 0.6:
            return {rng.choice(["a", "b", "~", "/", "c"]): value(depth + 1) for _ in range(rng.randint(0, 3))}
        items = [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return items if r < 0.8 else tuple(items)

    refused = 0
    for _ in range(2000):
        v, limit = value(0), rng.randint(0, 8)
        want = _first_too_deep(v, limit)
        try:
            check_schema_depth(v, limit)
            got = None
        except LimitError as e:
            got = (e.pointer, e.reached)
            refused += 1
        assert got == want, (v, limit)
    assert 300 < refused < 1900  # both outcomes exercised


def test_deep_resource_is_refused_where_it_nests(compiler):
    """A document given in ``resources=`` is checked for depth once embedded, located in it."""
    deep: object = {"type": "integer"}
    for _ in range(5_000):
        deep = {"type": "array", "items": deep}
    with pytest.raises(LimitError) as info:
        compiler.compile_json_schema({"$ref": "https://example.com/deep.json"},
                                     resources={"https://example.com/deep.json": deep})
    assert info.value.limit_name == "MAX_SCHEMA_DEPTH"
    assert info.value.pointer.startswith("/$defs/") and info.value.pointer.endswith("/items" * 100)


def test_long_ref_chain_is_answered(compiler):
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(3000)}
    defs["d3000"] = {"type": "integer"}
    try:
        g = compile_(compiler, {"$ref": "#/$defs/d0", "$defs": defs})
    except SchemaError:
        return
    assert accepts(g, "12") and not accepts(g, '"x"')


def test_unique_items_on_large_enum_is_refused_located(compiler):
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_(compiler, {"type": "array", "uniqueItems": True, "items": {"enum": list(range(1000))}})
    assert info.value.pointer in ("", "/uniqueItems")


def test_dependent_schemas_chain_is_answered(compiler):
    schema = {"type": "object", "dependentSchemas": {f"k{i}": {"required": [f"k{i + 1}"]} for i in range(40)}}
    try:
        g = compile_(compiler, schema)
    except UnsupportedSchemaError as exc:
        assert exc.pointer in ("", "/dependentSchemas")
        return
    assert accepts(g, "{}")


# -- schema text -------------------------------------------------------------------------------


@pytest.mark.parametrize("text,where", [
    ('{"maximum": NaN}', "line 1, column 13"),
    ('{\n  "minimum": -Infinity}', "line 2, column 14"),
    ('{"const": Infinity}', "line 1, column 11"),
])
def test_nan_and_infinity_in_schema_text_are_located_schema_errors(compiler, text, where):
    for form in (text, text.encode()):
        with pytest.raises(SchemaError) as info:
            compiler.compile_json_schema(form)
        assert where in str(info.value) and "not a JSON number" in str(info.value)


def test_nan_inside_a_string_is_just_text(compiler):
    g = compiler.compile_json_schema('{"const": "NaN"}')
    assert accepts(g, '"NaN"')


def test_5000_digit_integer_in_schema_text_is_a_located_limit_error(compiler):
    text = '{"type": "integer",\n "maximum": ' + "9" * 5000 + "}"
    with pytest.raises(LimitError) as info:
        compiler.compile_json_schema(text)
    assert info.value.limit_name == "MAX_NUMBER_LENGTH" and "line 2, column 13" in str(info.value)
    ok = '{"type": "integer", "maximum": ' + "9" * (MAX_NUMBER_LENGTH - 1) + "}"
    assert accepts(compiler.compile_json_schema(ok), "5")


def test_cli_reads_schema_files_through_the_same_checks(tmp_path):
    from structgen.cli import read_json
    from structgen.errors import InputFileError

    p = tmp_path / "s.json"
    p.write_text('{"maximum": NaN}', encoding="utf-8")
    with pytest.raises(InputFileError, match="NaN is not a JSON number at line 1, column 13"):
        read_json(str(p))
    p.write_text('{"maximum": ' + "9" * 5000 + "}", encoding="utf-8")
    with pytest.raises(InputFileError, match="line 1, column 13"):
        read_json(str(p))


# -- API arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["90", True, False, 90.0, None, np.bool_(True)])
def test_non_int_token_id_raises_type_error(compiler, bad):
    m = compile_(compiler, {"type": "string"}).matcher()
    with pytest.raises(StructgenTypeError) as info:
        m.accept_token(bad)
    assert isinstance(info.value, TypeError) and type(bad).__name__ in str(info.value)
    assert m.state == m._history[0]


def test_numpy_integer_token_id_is_accepted(compiler):
    m = compile_(compiler, {"type": "string"}).matcher()
    tid = compiler.tokenizer_info.token_bytes.index(b'"')
    assert m.accept_token(np.int64(tid)) and m.accept_token(np.int32(tid))
    with pytest.raises(StructgenTypeError):
        m.rollback("1")


def test_int64_bitmask_is_refused_by_apply():
    torch = pytest.importorskip("torch")
    from structgen import apply_token_bitmask_inplace

    logits = torch.zeros(1, 64)
    bm = torch.zeros(1, 2, dtype=torch.int64)
    with pytest.raises(MatcherError, match="torch.int32, found torch.int64"):
        apply_token_bitmask_inplace(logits, bm)
    with pytest.raises(MatcherError, match="torch.Tensor, found ndarray"):
        apply_token_bitmask_inplace(logits, np.zeros((1, 2), np.int32))
    with pytest.raises(MatcherError, match="2-D"):
        apply_token_bitmask_inplace(logits, torch.zeros(1, 1, 2, dtype=torch.int32))
    with pytest.raises(MatcherError, match="row numbers"):
        apply_token_bitmask_inplace(logits, torch.zeros(1, 2, dtype=torch.int32), indices=[3])
    with pytest.raises(MatcherError, match="floating-point"):
        apply_token_bitmask_inplace(torch.zeros(1, 64, dtype=torch.int32), torch.zeros(1, 2, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.float32])
def test_fill_bitmask_refuses_wrong_dtype(compiler, dtype):
    m = compile_(compiler, {"type": "string"}).matcher()
    with pytest.raises(MatcherError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, m._index.words), dtype))


# -- concurrency -------------------------------------------------------------------------------


def _nested(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema, "minItems": 1}
    return schema


def test_concurrent_compiles_keep_recursion_limit_and_gc(compiler):
    # deep ones overlap long enough for one to finish while another is deep; shallow ones
    # finish first and used to restore the limit under the deep ones
    depths = [400, 30, 380, 5, 360, 200, 390, 10]
    schemas = [_nested(d) for d in depths]
    texts = ["[" * d + "1" + "]" * d for d in depths]
    serial = [accepts(GrammarCompiler(compiler.tokenizer_info, cache_size=0).compile_json_schema(s), t)
              for s, t in zip(schemas, texts)]
    assert all(serial)
    limit, gc_on = sys.getrecursionlimit(), gc.isenabled()
    for _ in range(3):
        results: list = [None] * len(schemas)

        def work(i: int) -> None:
            try:
                c = GrammarCompiler(compiler.tokenizer_info, cache_size=0)
                results[i] = accepts(c.compile_json_schema(schemas[i]), texts[i])
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                results[i] = exc

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(schemas))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(GUARD_SECONDS)
        assert results == serial
        assert sys.getrecursionlimit() == limit and gc.isenabled() == gc_on


def test_json_text_round_trip_unchanged(compiler):
    schema = {"type": "object", "properties": {"x": {"type": "number", "maximum": 1.5}}}
    a = compiler.compile_json_schema(schema)
    b = compiler.compile_json_schema(json.dumps(schema))
    assert str(a.grammar) == str(b.grammar)


def test_prefix_items_5000_is_a_located_limit_error(compiler):
    with pytest.raises(LimitError) as info:
        compile_(compiler, {"type": "array", "prefixItems": [{"type": "integer"}] * 5000})
    assert (info.value.limit_name, info.value.limit, info.value.reached) == ("MAX_TUPLE_ITEMS", 1000, 5000)
    assert info.value.pointer == "/prefixItems"
    g = compile_(compiler, {"type": "array", "prefixItems": [{"type": "integer"}] * 300, "items": False})
    assert accepts(g, "[" + ",".join(["1"] * 300) + "]") and not accepts(g, "[" + ",".join(["1"] * 301) + "]")


def test_huge_length_in_property_names_is_a_located_limit_error(compiler):
    with pytest.raises(LimitError) as info:
        compile_(compiler, {"type": "object", "properties": {"o": {"type": "object", "propertyNames": {"maxLength": 10**9}}}})
    assert info.value.limit_name == "MAX_DFA_STATES" and info.value.limit == 4000
    assert info.value.pointer.startswith("/properties/o")


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^[a-z]+$", "maxLength": 10**9},
    {"type": "string", "pattern": "^[a-z]+$", "minLength": 10**18},
    {"type": "string", "format": "date", "maxLength": 10**9},
    {"type": "string", "pattern": "^a{1000000}$"},
    {"type": "array", "uniqueItems": True, "maxItems": 10**9, "items": {"enum": [1, 2, 3]}},
])
def test_huge_bounds_with_patterns_compile(compiler, schema):
    g = compile_(compiler, schema)
    assert not accepts(g, "null")


# a pattern whose minimal DFA doubles with each repeat: 2**17 states, far past the limit below
EXPLODING = {"type": "string", "pattern": "^(a|b)*a(a|b){16}$"}


@pytest.mark.parametrize("schema, where", [
    (EXPLODING, ""),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": EXPLODING, "c": {"type": "integer"}}}}},
     "/properties/a/properties/b"),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"anyOf": [{"type": "null"}, EXPLODING]}]},
     "/prefixItems/1/anyOf/1"),
    ({"$defs": {"x": EXPLODING}, "type": "array", "items": {"$ref": "#/$defs/x"}}, "/$defs/x"),
])
def test_automaton_size_error_names_the_construct_that_grew(schema, where):
    small = GrammarCompiler(toy_info([b"ab", b"ba"]), cache_size=0, max_states=20_000)
    with guard(), pytest.raises(AutomatonSizeError) as info:
        small.compile_json_schema(schema)
    assert info.value.pointer == where
    assert f"schema location #{where}" in str(info.value)
    assert info.value.limit == 20_000 and info.value.reached is not None and info.value.reached > 20_000


def test_automaton_size_error_from_lark_names_the_rule():
    small = GrammarCompiler(toy_info([b"ab", b"ba"]), cache_size=0, max_states=20_000)
    with guard(), pytest.raises(AutomatonSizeError) as info:
        small.compile_grammar('start: "x" big\nbig: /(a|b)*a(a|b){16}/\n')
    assert info.value.pointer is None and info.value.rule == "start"
    assert "rule 'start'" in str(info.value)


def test_compiling_leaves_no_reference_cycles():
    # A compiled grammar and its converter are freed by reference counting as soon as they
    # are dropped: a recursive closure kept the converter in a reference cycle, garbage that
    # waited for (and fed) the next collection. Each schema here takes one of those paths:
    # array positions, uniqueItems, unevaluated*, a counted repeat.
    schemas = [
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 1, "maxItems": 4},
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
        {"allOf": [{"properties": {"a": {"type": "integer"}}}], "unevaluatedProperties": False},
        {"type": "string", "pattern": "^[a-z]{1,300}$"},
    ]
    compiler = GrammarCompiler(toy_info([b'"', b"{", b"}"]), cache_size=0)
    for schema in schemas:
        compiler.compile_json_schema(schema)  # first compiles fill process-wide caches
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for schema in schemas:
            compiled = compiler.compile_json_schema(schema)
            compiled.matcher().accept_string('"')
            del compiled
            assert gc.collect() == 0, schema
    finally:
        if was:
            gc.enable()


def test_compiled_grammar_nodes_stay_out_of_the_collector(monkeypatch):
    # A large compiled grammar's expressions and rule automata are untracked by the cycle
    # collector (tens of thousands of objects for a large schema, traversed again by every
    # collection of their generation); they are still freed by reference counting when dropped.
    from structgen.grammar import Alt, Grammar, Lit, Ref, Seq
    from structgen.grammar.expr import iter_nodes
    from structgen.runtime import compiler as compiler_module

    compiler = GrammarCompiler(toy_info([b'"', b"{", b"}", b"a", b":", b","]), cache_size=0)
    schema = {"type": "object", "required": ["a"],
              "properties": {"a": {"type": "string"}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
    calls = []
    untrack = compiler_module.untrack_nodes
    monkeypatch.setattr(compiler_module, "untrack_nodes", lambda *a: calls.append(1) or untrack(*a))
    small = compiler.compile_json_schema(schema)  # under the size where untracking pays: left alone
    assert small.stats.automaton_states < compiler_module.UNTRACK_MIN_STATES and not calls
    monkeypatch.setattr(compiler_module, "UNTRACK_MIN_STATES", 0)
    compiled = compiler.compile_json_schema(schema)
    nodes = [n for body in compiled.grammar.rules.values() for n in iter_nodes(body)]
    assert len(nodes) > 10 and calls
    assert not any(gc.is_tracked(n) for n in nodes)
    assert not any(gc.is_tracked(r) for r in compiled.automaton.rules)
    assert not any(gc.is_tracked(n.items) for n in nodes if isinstance(n, Seq))
    assert str(compiled.grammar)  # the grammar reads as before
    # a user's grammar: its nodes untracked too, and released when the compiled grammar goes
    name = Lit("name-" + "x" * 20)
    body = Seq((Lit("{"), Alt((name, Ref("tail"))), Lit("}")))
    before = sys.getrefcount(body)
    user = compiler.compile_grammar(Grammar({"start": body, "tail": Lit("a")}))
    assert not gc.is_tracked(body) and not gc.is_tracked(name) and not gc.is_tracked(body.items)
    assert sys.getrefcount(body) > before
    del user
    assert sys.getrefcount(body) == before
    # objects of other kinds inside a node stay tracked (only frozen nodes are taken out)
    keep = [1]
    odd = Seq((Lit("a"), keep))  # type: ignore[arg-type]
    from structgen.grammar.expr import untrack_nodes
    assert untrack_nodes([odd]) == 3  # the node, its tuple, the literal
    assert gc.is_tracked(keep)
