"""Keyword holes found by a soundness review: each test is named after the hole it pins.

Every check compares the compiled grammar with ``jsonschema`` on the same texts: a text the
grammar accepts must be valid, and the canonical text of a valid value must be accepted.
"""
from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest

from structgen import GrammarCompiler, SchemaError, UnsupportedSchemaError
from structgen.schema.canonical import canonical_json
from structgen.schema.base import _FRACTION_TEXT
from structgen.schema.to_grammar import schema_to_grammar

from .conftest import toy_info


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(toy_info([]), cache_size=0)


def _accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and m.is_completed()


def _disagreements(compiled, schema, texts, *, canonical_only=True):
    """Texts where grammar and jsonschema disagree: false accepts always; rejections of valid
    texts only for canonical ones (``canonical_json`` of the parsed value: integers without
    fraction), which the grammar promises."""
    v = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    out = []
    for t in texts:
        acc, ok = _accepts(compiled, t), v.is_valid(json.loads(t))
        if acc and not ok:
            out.append(("false accept", t))
        elif ok and not acc and (not canonical_only or canonical_json(json.loads(t), schema) == t):
            out.append(("valid rejected", t))
    return out


# -- propertyNames with a subschema that cannot match a string ---------------------------

_OBJECTS = ['{}', '{"a":1}', '{"ab":1}', '{"abc":1}', '{"1":1}', '{"a":1,"b":2}', '{"x-y":1}', '{"b":true}']


@pytest.mark.parametrize("names", [
    {"type": "object"},  # the reported hole: accepted {"a": 1}
    {"type": ["number", "null"]},
    False,
    {"enum": [1, 2, None]},
    {"const": 3},
    {"not": {}},
    {"type": ["string", "null"], "maxLength": 2, "minimum": 3},  # minimum holds for every string
    {"not": {"const": "a"}},
    {"anyOf": [{"const": "a"}, {"pattern": "^x"}]},
    {"oneOf": [{"maxLength": 1}, {"pattern": "b"}]},
    {"allOf": [{"maxLength": 2}, {"not": {"type": "object"}}]},
])
@pytest.mark.parametrize("declared", [False, True])
def test_property_names_non_string_type_means_no_property(compiler, names, declared):
    schema = {"type": "object", "propertyNames": names}
    if declared:
        schema["properties"] = {"a": {"type": "integer"}}
    assert _disagreements(compiler.compile_json_schema(schema), schema, _OBJECTS) == []


def test_property_names_non_string_type_means_no_property_only_empty_object(compiler):
    g = compiler.compile_json_schema({"type": "object", "propertyNames": {"type": "object"}})
    assert _accepts(g, "{}") and not _accepts(g, '{"a":1}')


def test_property_names_unknown_keyword_refused_not_dropped():
    with pytest.raises(UnsupportedSchemaError) as exc:
        schema_to_grammar({"type": "object", "propertyNames": {"if": {"maxLength": 1}, "then": {"pattern": "a"}}})
    assert exc.value.pointer == "/propertyNames/if"


# -- number minus integer: no decimal that jsonschema reads as a whole number --------------

_NEAR_INTEGERS = ["1.0", "-3.0", "1.5", "0.5", "-0.25", "2.00000000000001", "1.0000000000000001",
                  "1.00000000000000001", "88771463883354200082601449733587420.2", "9007199254740993.5",
                  "4503599627370495.5", "123456789012345.5", "12345678901234.5", "0.999999999999999",
                  "0.9999999999999999", "0.99999999999999999", "0." + "0" * 400 + "1", "7", "-7", "1e3", "1.5e2"]


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"type": "number", "not": {"type": "integer"}},
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": -5, "maximum": 10 ** 20}]},
    {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
])
def test_number_minus_integer_excludes_whole_floats(compiler, schema):
    g = compiler.compile_json_schema(schema)
    assert [d for d in _disagreements(g, schema, _NEAR_INTEGERS) if d[0] == "false accept"] == []
    assert _accepts(g, "2.5") and not _accepts(g, "2.0000000000000001")


def test_number_minus_integer_fraction_text_is_never_float_integral():
    rx = re.compile(_FRACTION_TEXT)
    rng = random.Random(4)
    seen = 0
    for _ in range(50_000):
        whole = rng.choice(["0", str(rng.randint(1, 10 ** rng.randint(1, 17)))])
        text = whole + "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
        if rx.fullmatch(text):
            seen += 1
            assert not float(text).is_integer(), text
    assert seen > 1000  # the language is not trivially small
    # up to 15 significant digits are written
    for text in ("0.1", "1.00000000000001", "12345678901234.5", "0.000000000000000000000000000001"):
        assert rx.fullmatch(text), text


# -- an unsatisfiable branch drops out; only an unsatisfiable whole is refused ------------

@pytest.mark.parametrize("schema,valid,invalid", [
    ({"anyOf": [{"allOf": [{"type": "integer", "minimum": 10}, {"type": "integer", "maximum": 5}]}, {"type": "string"}]},
     ['"x"'], ["7", "12", "3"]),
    ({"anyOf": [{"type": "string", "minLength": 3, "maxLength": 1}, {"type": "null"}]}, ["null"], ['"abcd"']),
    ({"anyOf": [{"enum": []}, {"const": 1}]}, ["1"], ["2"]),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3, "maximum": 1}}}, ["{}"], ['{"a":2}']),
])
def test_unsatisfiable_branch_does_not_refuse_the_schema(compiler, schema, valid, invalid):
    g = compiler.compile_json_schema(schema)
    assert all(_accepts(g, t) for t in valid) and not any(_accepts(g, t) for t in invalid)


def test_unsatisfiable_whole_schema_refused_with_located_reason():
    schema = {"anyOf": [{"allOf": [{"type": "integer", "minimum": 10}, {"maximum": 5}]},
                        {"type": "string", "minLength": 3, "maxLength": 1}]}
    with pytest.raises(SchemaError, match="no integer lies between") as exc:
        schema_to_grammar({"type": ["integer", "string"], **schema})
    assert exc.value.pointer.startswith("/anyOf/0")  # the first branch found empty


# -- excluded single integers, bounds that are themselves excluded -------------------------

@pytest.mark.parametrize("schema", [
    {"oneOf": [{"enum": [1, "hello", 2]}, {"type": "integer"}]},
    {"type": "integer", "not": {"enum": [3, 4]}},
    {"type": "integer", "minimum": -3, "maximum": 6, "not": {"enum": [-3]}},
    {"type": "integer", "minimum": -3, "maximum": 6, "not": {"enum": [6, 0, 1]}},
    {"type": "integer", "minimum": 2, "maximum": 2, "not": {"const": 2}, "$comment": "empty"},
])
def test_integer_exclusions_no_integer_between_bounds_error(compiler, schema):
    texts = [str(i) for i in range(-12, 13)] + ['"hello"', '"x"', "1.5", "null"]
    try:
        g = compiler.compile_json_schema(schema)
    except SchemaError:
        # refused only when nothing is valid
        v = jsonschema.Draft202012Validator(schema)
        assert not any(v.is_valid(json.loads(t)) for t in texts)
        return
    assert _disagreements(g, schema, texts) == []


# -- multipleOf: every integer divisor up to MAX_MODULUS, built as an automaton ----------

@pytest.mark.parametrize("k", [3, 9, 11, 13, 16, 64, 97, 997, 1024, 9999])
@pytest.mark.parametrize("bounds", [{}, {"minimum": -500, "maximum": 20_000}, {"exclusiveMinimum": 0}])
def test_multiple_of_integer_divisors_up_to_limit(compiler, k, bounds):
    schema = {"type": "integer", "multipleOf": k, **bounds}
    g = compiler.compile_json_schema(schema)
    rng = random.Random(k)
    values = [rng.randint(-30_000, 30_000) for _ in range(150)] + [k * rng.randint(-30, 30) for _ in range(150)]
    texts = [str(v) for v in values] + ["0", "-0", f"{k + 1}.0", f"{k}.5"]
    assert _disagreements(g, schema, texts) == []


@pytest.mark.parametrize("schema,pointer", [
    ({"type": "integer", "multipleOf": 10_001}, "/multipleOf"),
    ({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 123456789}}}, "/properties/n/multipleOf"),
])
def test_multiple_of_above_limit_refused_with_pointer(schema, pointer):
    with pytest.raises(UnsupportedSchemaError) as exc:
        schema_to_grammar(schema)
    assert exc.value.pointer == pointer


# -- formats: exactly the RFC grammars (uri, uri-reference, iri, iri-reference, ipv6) -----

from .rfc_abnf import full_match  # noqa: E402

_URI_SEEDS = [
    # RFC 3986 section 1.1.2 and the section 5.4 reference-resolution examples
    "ftp://ftp.is.co.za/rfc/rfc1808.txt", "http://www.ietf.org/rfc/rfc2396.txt",
    "ldap://[2001:db8::7]/c=GB?objectClass?one", "mailto:John.Doe@example.com",
    "news:comp.infosystems.www.servers.unix", "tel:+1-816-555-1212", "telnet://192.0.2.16:80/",
    "urn:oasis:names:specification:docbook:dtd:xml:4.1.2", "http://a/b/c/d;p?q", "g:h", "g", "./g", "g/", "/g",
    "//g", "?y", "g?y", "#s", "g#s", "g?y#s", ";x", "g;x", "g;x?y#s", "", ".", "./", "..", "../", "../g", "../..",
    "../../g", "g.", ".g", "g..", "..g", "./../g", "g;x=1/./y", "g?y/./x", "g#s/../x", "http:g",
    # the reported false accepts and their neighbours
    "http://example.com:abc/", "http://[:::]/", "http://user@@example.com/", ":", "http://example.com:80/",
    "http://[::1]/", "http://[v7.abc:d]/x", "http://[V7.]/", "http://user:pw@host:8080/p/a/t/h?query=1#frag",
    "http://1.2.3.256/", "http://01.2.3.4/", "http://[1:2:3:4:5:6:7:8:9]/", "http://[1::2::3]/", "s://h/%zz",
    "s://h/%4a%4A", "a+b-c.d:x", "1a:x", "-a:x", "a:", "a:/", "a://", "a:///", "a:b:c", "a b:c", "http://h/ a",
    "http://h/\\", "http://h/{}", "http://h/^", "http://h/|", "http://h/`", "http://h/\"", "http://h/<>", "http://h/%",
    "//[::ffff:1.2.3.4]", "//[::ffff:1.2.3]", "//h:", "//@h", "//h?#", "a:#", "//h/p//q", "/a:b", "a:b/c:d", "x/a:b",
    "http://ex.com/ü", "http://ex.com/?q=\ue000", "http://ex.com/#\ue000", "http://ü.example/", "ü:x", "x:\U00010000",
]
_URI_ALPHABET = "a:/?#[]@!$&'()*+,;=%0F.-_~1v ü\ue000\\{}\"<>^`|"


def _mutations(seeds, alphabet, n, seed):
    rng = random.Random(seed)
    out = set(seeds)
    while len(out) < n:
        s = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            op, pos = rng.random(), rng.randint(0, len(s))
            if op < 0.4:
                s.insert(pos, rng.choice(alphabet))
            elif op < 0.7 and s:
                del s[min(pos, len(s) - 1)]
            elif s:
                s[min(pos, len(s) - 1)] = rng.choice(alphabet)
        out.add("".join(s))
    return sorted(out)


@pytest.mark.parametrize("fmt,rule,iri", [
    ("uri", "uri", False), ("uri-reference", "uri-reference", False),
    ("iri", "uri", True), ("iri-reference", "uri-reference", True),
])
def test_format_uri_follows_rfc3986_grammar(compiler, fmt, rule, iri):
    g = compiler.compile_json_schema({"type": "string", "format": fmt})
    wrong = []
    for text in _mutations(_URI_SEEDS, _URI_ALPHABET, 1500, seed=len(fmt)):
        expected = full_match(rule, text, iri=iri)
        if _accepts(g, json.dumps(text, ensure_ascii=False)) != expected:
            wrong.append((text, expected))
    assert wrong == []
    for text in ("http://example.com:abc/", "http://[:::]/", "http://user@@example.com/"):
        assert not _accepts(g, json.dumps(text))
    assert _accepts(g, json.dumps("http://[1111::2222:2222]:8080/a?b#c"))


def _ipv6_candidates(n, seed):
    import ipaddress

    rng = random.Random(seed)
    seeds = ["::", "::1", "1111::2222:2222", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "1::1.2.3.4", "fe80::1%eth0",
             "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", ":::", "1::2::3",
             "12345::", "::1.2.3", "::1.2.3.04", "::256.1.1.1", "1:2:3:4:5:6:7:1.2.3.4", "0000:0:0:0:0:0:0:0"]
    for _ in range(300):  # random addresses, compressed at random, mixed case, IPv4 tails
        addr = ipaddress.IPv6Address(rng.getrandbits(128) & ~((1 << rng.randint(0, 112)) - 1))
        text = rng.choice([addr.compressed, addr.exploded, str(addr).upper()])
        if rng.random() < 0.2:
            text = text.rsplit(":", 2)[0] + ":" + str(ipaddress.IPv4Address(rng.getrandbits(32))) \
                if text.count(":") >= 3 and not text.endswith("::") else text
        seeds.append(text)
    return _mutations(seeds, "0123456789abcdefABCDEF:.%g", n, seed)


def test_format_ipv6_rfc4291_text_forms(compiler):
    import ipaddress

    g = compiler.compile_json_schema({"type": "string", "format": "ipv6"})
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    wrong = []
    for text in _ipv6_candidates(3000, 6):
        expected = full_match("ipv6", text)
        if _accepts(g, json.dumps(text)) != expected:
            wrong.append((text, expected))
        if expected:  # the RFC grammar and Python's parser (jsonschema's checker) agree
            assert checker.conforms(text, "ipv6"), text
            ipaddress.IPv6Address(text)
    assert wrong == []
    for text in ("1111::2222:2222", "::", "::ffff:192.168.0.1", "2001:DB8::8:800:200C:417A"):
        assert _accepts(g, json.dumps(text)), text


def test_format_date_exact_including_leap_days(compiler):
    g = compiler.compile_json_schema({"type": "string", "format": "date"})
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    years = ["0000", "0001", "0004", "0100", "0400", "1900", "1996", "1999", "2000", "2023", "2024", "2100", "9996", "9999"]
    wrong = [t for t in (f"{y}-{m:02d}-{d:02d}" for y in years for m in range(0, 14) for d in range(0, 33))
             if _accepts(g, json.dumps(t)) != checker.conforms(t, "date")]
    assert wrong == []


def test_format_duration_follows_rfc3339_appendix_a(compiler):
    g = compiler.compile_json_schema({"type": "string", "format": "duration"})
    valid = ["P1Y", "P1Y2M", "P1Y2M3D", "P2M3D", "P3D", "PT1H", "PT1H2M", "PT1H2M3S", "PT2M3S", "PT3S", "P1W",
             "P1Y2M3DT4H5M6S", "P1DT1S"]
    invalid = ["P", "PT", "P1Y2D", "PT1H2S", "P1W2D", "P1D2M", "1Y", "P1.5Y", "P1YT", "PT1S2M"]
    assert [t for t in valid if not _accepts(g, json.dumps(t))] == []
    assert [t for t in invalid if _accepts(g, json.dumps(t))] == []


@pytest.mark.parametrize("fmt", ["date", "time", "date-time", "ipv4", "ipv6", "uuid", "email", "idn-email",
                                 "idn-hostname", "hostname", "json-pointer", "relative-json-pointer", "regex"])
def test_format_generated_strings_pass_the_checker(compiler, fmt):
    """Random walks through each format's grammar: every string written passes jsonschema's
    checker (where one is installed) and, for host names, RFC 1123's length rules."""
    import numpy as np

    from .walks import random_walk

    g = compiler.compile_json_schema({"type": "string", "format": fmt})
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    rng = np.random.default_rng(7)
    written = 0
    for _ in range(60):
        out, done, _ = random_walk(g.matcher(), g.tokenizer_info, rng, max_steps=400, stop_p=0.3)
        if not done:
            continue
        text = json.loads(out.decode("utf-8"))
        written += 1
        assert checker.conforms(text, fmt), (fmt, text)
        if fmt in ("hostname", "idn-hostname"):
            assert len(text) <= 253 and all(0 < len(label) <= 63 for label in text.split(".")), text
    assert written > 10


# -- oneOf split by type ------------------------------------------------------------------

_ANY_TEXTS = ['null', 'true', '1', '2', '1.5', '"a"', '"abc"', '"Normal - x"', '[]', '[1]', '["a"]', '{}',
              '{"a":1}', '{"a":2}', '{"a":"x"}', '{"length":1,"width":2}', '{"base":1,"height":2}',
              '{"length":1,"width":2,"base":1,"height":2}']


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"properties": {"a": {"type": "integer"}}}, {"type": "null"}]},
    {"oneOf": [{"properties": {"a": {"type": "integer"}}}, {"type": "array", "items": {"type": "integer"}}]},
    {"oneOf": [{"required": ["a"]}, {"type": "string", "maxLength": 2}, {"type": "string", "minLength": 2}]},
    # a tagged union without "type": "object": every non-object matches both branches
    {"oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]}, {"properties": {"a": {"const": 2}}, "required": ["a"]}]},
    # object keywords prove nothing about strings: "abc" matches both branches
    {"oneOf": [{"required": ["a"], "properties": {"a": {"const": 1}}, "minLength": 2},
               {"required": ["a"], "properties": {"a": {"const": 2}}, "maxLength": 5}]},
    {"oneOf": [{"pattern": "^Normal -"}, {"pattern": "^Primary -"}, {"pattern": "^Cell -"}, {"pattern": "^M -"},
               {"pattern": "^R -"}]},
    {"type": "object", "oneOf": [{"not": {"required": ["base", "height"]}, "required": ["length", "width"]},
                                 {"not": {"required": ["length", "width"]}, "required": ["base", "height"]}]},
])
def test_oneof_overlapping_branches_split_by_type(compiler, schema):
    try:
        g = compiler.compile_json_schema(schema)
    except UnsupportedSchemaError:
        return  # refusing is sound; accepting a text two branches match is not
    assert _disagreements(g, schema, _ANY_TEXTS) == []


# -- oneOf branches proven disjoint through $ref, allOf, literals, patterns, parent keywords --

_MODULE = {"type": "object", "additionalProperties": False, "required": ["type"],
           "properties": {"type": {"type": "string", "pattern": "^{}$"}, "x": {"type": "integer"}}}
_DISJOINT_ONEOFS = [
    # tagged union whose tags are patterns, behind $refs
    ({"definitions": {n: json.loads(json.dumps(_MODULE).replace("{}", n)) for n in ("Abs", "Add", "Addx")},
      "oneOf": [{"$ref": f"#/definitions/{n}"} for n in ("Abs", "Add", "Addx")]},
     ['{"type":"Abs"}', '{"type":"Add","x":1}', '{"type":"Addx"}'], ['{"type":"Ab"}', '{}', '"Abs"']),
    # the tag is required by the parent, not by the branches
    ({"type": "object", "required": ["kind"],
      "oneOf": [{"properties": {"kind": {"enum": ["a"]}, "v": {"type": "integer"}}},
                {"properties": {"kind": {"enum": ["b"]}, "v": {"type": "string"}}}]},
     ['{"kind":"a","v":1}', '{"kind":"b","v":"x"}'], ['{"kind":"a","v":"x"}', '{"v":1}', '{}', '{"kind":"c"}']),
    # literals of one branch that the other refuses (jsonschema decides each)
    ({"oneOf": [{"type": "string", "enum": ["text", "html"]}, {"type": "string", "pattern": "^(text|image)/.+"}]},
     ['"text"', '"html"', '"text/plain"'], ['"image"', '"text/"', '1']),
    # an allOf member disjoint from the other branch
    ({"oneOf": [{"allOf": [{"type": "string"}, {"minLength": 2}]}, {"type": "integer"}]},
     ['"ab"', '3'], ['"a"', '1.5', 'null']),
]


@pytest.mark.parametrize("schema,valid,invalid", _DISJOINT_ONEOFS)
def test_oneof_disjoint_branches_proven(compiler, schema, valid, invalid):
    g = compiler.compile_json_schema(schema)  # exact: must not be refused any more
    assert _disagreements(g, schema, valid + invalid + _ANY_TEXTS) == []
    assert all(_accepts(g, t) for t in valid)


@pytest.mark.parametrize("schema", [
    # the tag is not required: {} and {"v": 1} match both branches
    {"type": "object", "oneOf": [{"properties": {"kind": {"enum": ["a"]}}}, {"properties": {"kind": {"enum": ["b"]}}}]},
    # draft-07 ignores keywords beside $ref: the first branch is any string, as is the second
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
     "oneOf": [{"$ref": "#/definitions/s", "type": "integer"}, {"type": "string", "maxLength": 1}]},
    # a pattern overlap: "Addx" matches both
    {"oneOf": [{"type": "string", "pattern": "^Add"}, {"type": "string", "pattern": "x$"}]},
    # a tagged union whose tag sets share "a": {"kind":"a"} matches both
    {"oneOf": [{"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a", "b"]}}},
               {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["c", "a"]}}}]},
])
def test_oneof_overlapping_branches_still_refused_or_exact(compiler, schema):
    texts = _ANY_TEXTS + ['{"kind":"a"}', '{"v":1}', '"Addx"', '"Add"', '"x"', '"s"']
    try:
        g = compiler.compile_json_schema(schema)
    except UnsupportedSchemaError as exc:
        assert exc.pointer.endswith("oneOf")
        return
    assert _disagreements(g, schema, texts) == []


def test_tagged_union_pairs_told_apart_by_their_tags(compiler, monkeypatch):
    # 40 branches, 780 pairs: each pair is proven disjoint by the required tag's values, with
    # no walk of the two schemas (CombinatorsMixin.disjoint is not called)
    from structgen.schema.combinators import CombinatorsMixin

    calls = []
    real = CombinatorsMixin.disjoint
    monkeypatch.setattr(CombinatorsMixin, "disjoint", lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    branches = [{"type": "object", "required": ["kind", "v"], "additionalProperties": False,
                 "properties": {"kind": {"const": f"k{i}"} if i % 2 else {"type": "string", "enum": [f"k{i}", f"K{i}"]},
                                "v": {"type": "integer" if i % 3 else "string"}}} for i in range(40)]
    schema = {"oneOf": branches}
    g = compiler.compile_json_schema(schema)
    assert calls == []
    texts = ['{"kind":"k1","v":1}', '{"kind":"k0","v":"x"}', '{"kind":"K0","v":"x"}', '{"kind":"K1","v":1}',
             '{"kind":"k3","v":"x"}', '{"kind":"k3","v":3}', '{"kind":"k40","v":1}', '{"v":1}']
    assert _disagreements(g, schema, texts + _ANY_TEXTS) == []
    assert _accepts(g, '{"kind":"k1","v":1}') and not _accepts(g, '{"kind":"K1","v":1}')


def test_format_with_pattern_is_their_intersection(compiler):
    schema = {"type": "string", "format": "date", "pattern": "^20[0-9]{2}-0"}
    g = compiler.compile_json_schema(schema)
    texts = ['"2020-01-31"', '"2020-02-29"', '"2021-02-29"', '"2020-10-01"', '"1999-01-01"', '"2020-01-32"', '"2020-01"']
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert [t for t in texts if _accepts(g, t) != v.is_valid(json.loads(t))] == []
    assert _accepts(g, '"2020-01-31"') and not _accepts(g, '"2020-10-01"') and not _accepts(g, '"2021-02-29"')


# -- patternProperties: many patterns, split into the classes of names that occur ---------

@pytest.mark.parametrize("schema", [
    {"type": "object", "additionalProperties": {"type": "boolean"},
     "patternProperties": {f"^{w}$": {"type": "integer", "minimum": i} for i, w in
                           enumerate(["a", "b", "(cdn|Cdn)", "(pwa|PWA)", "x[0-9]", "y", "zz", "q:[0-3]:n"])}},
    # overlapping patterns: a name matching two gets both schemas
    {"type": "object", "additionalProperties": False,
     "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 2}, "^ab": {"maximum": 5}, "c": {"type": "integer"},
                           "^x": {"type": "string"}}},
])
def test_pattern_properties_many_patterns_exact(compiler, schema):
    g = compiler.compile_json_schema(schema)
    texts = ['{}', '{"a":1}', '{"a":true}', '{"b":0}', '{"b":1}', '{"cdn":2}', '{"Cdn":1}', '{"PWA":3}', '{"x1":4}',
             '{"x1":"s"}', '{"y":5}', '{"zz":6}', '{"zz":5}', '{"q:2:n":7}', '{"q:4:n":7}', '{"q:4:n":true}',
             '{"other":true}', '{"other":1}', '{"ab":3}', '{"ab":6}', '{"ab":1}', '{"acb":2}', '{"xc":"s"}',
             '{"xc":1}', '{"abc":3}', '{"c":1.5}', '{"a":1,"b":1}', '{"a":1,"cdn":2}']
    assert _disagreements(g, schema, texts) == []


def test_length_bounds_with_a_pattern_every_string_matches_are_counted(compiler):
    # unanchored "(x+)?" matches every string: maxLength 4096 is then a plain counted bound
    schema = {"type": "string", "maxLength": 4096, "pattern": "([0-9a-zA-Z]+)?"}
    g = compiler.compile_json_schema(schema)
    texts = ['""', '"a b"', '"-"', json.dumps("x" * 4096), json.dumps("x" * 4097), json.dumps("é" * 4096)]
    assert _disagreements(g, schema, texts) == []
    assert not _accepts(g, json.dumps("x" * 4097)) and _accepts(g, json.dumps("-" * 4096))


@pytest.mark.parametrize("fmt", ["byte", "password"])
def test_openapi_formats(compiler, fmt):
    import base64
    import binascii

    g = compiler.compile_json_schema({"type": "string", "format": fmt})
    samples = [base64.b64encode(bytes(range(n))).decode() for n in range(0, 9)] + ["", "QQ==", "QUI=", "QUJD"]
    for text in samples:
        assert _accepts(g, json.dumps(text)), text
    if fmt == "password":
        assert _accepts(g, json.dumps("any thing\n\u00e9\U0001F600", ensure_ascii=False))
        return
    for text in ["Q", "QQ", "QQ=", "QR==", "QUJ=", "Q===", "QUJD=", "QU JD", "QUJD\n", "====", "QQ==QUJD"]:
        assert not _accepts(g, json.dumps(text)), text
    # every accepted text decodes strictly (validate=True), and re-encodes to itself (canonical)
    from .walks import random_walk
    import numpy as np

    rng = np.random.default_rng(3)
    for _ in range(40):
        out, done, _ = random_walk(g.matcher(), g.tokenizer_info, rng, max_steps=200, stop_p=0.2)
        if done:
            text = json.loads(out.decode("utf-8"))
            assert base64.b64encode(base64.b64decode(text, validate=True)).decode() == text
    with pytest.raises(binascii.Error):
        base64.b64decode("QR=", validate=True)


# -- enum and const values beside a type (checked by the type alone, per dialect) ----------

_LITERALS = [1.0, 2.5, -3, "1", "a", True, False, None, [], [1], {}, {"a": 1}, 10**20]  # (draft-04: unique)


@pytest.mark.parametrize("keyword,dialect", [
    ("enum", "https://json-schema.org/draft/2020-12/schema"), ("enum", "http://json-schema.org/draft-04/schema#"),
    # const is no draft-04 keyword (tests/test_dialect_keywords.py): draft-06, its first draft
    ("const", "https://json-schema.org/draft/2020-12/schema"), ("const", "http://json-schema.org/draft-06/schema#"),
])
@pytest.mark.parametrize("siblings", [
    {"type": "integer"}, {"type": "number"}, {"type": ["string", "null"]}, {"type": "boolean"},
    {"type": ["array", "object"], "title": "t", "x-vendor": {"type": "string"}},
    {"title": "annotations only", "description": "d", "x-weight": 3},
    {"type": "integer", "minimum": 0},
])
def test_literals_beside_a_type_keep_exactly_the_valid_values(compiler, dialect, siblings, keyword):
    # every literal is offered; the grammar must accept exactly those jsonschema accepts under
    # the dialect (draft-04 reads 1.0 as no integer, 2020-12 as one)
    for value in [1, *_LITERALS] if keyword == "const" else [None]:
        schema = {"$schema": dialect, **siblings}
        schema.update({"const": value} if keyword == "const" else {"enum": _LITERALS})
        v = jsonschema.validators.validator_for(schema)(schema)
        expect = [x for x in ([value] if keyword == "const" else _LITERALS) if v.is_valid(x)]
        if not expect:
            with pytest.raises(SchemaError):
                compiler.compile_json_schema(schema)
            continue
        compiled = compiler.compile_json_schema(schema)
        texts = {json.dumps(x, separators=(",", ":")) for x in [1, *_LITERALS]}
        accepted = {t for t in texts if _accepts(compiled, t)}
        assert accepted == {json.dumps(x, separators=(",", ":")) for x in expect}, (schema, accepted)


# Literals kept by a jsonschema check beside a `format` (an enum's members, the declared names
# under propertyNames) were checked without the format: "key" stayed a member of a date enum
# and a declared name under propertyNames {"format": "uuid"}, outputs that fail validation
# where formats are asserted.
@pytest.mark.parametrize("schema,texts", [
    ({"enum": ["key", "2020-01-01"], "format": "date"}, ['"key"', '"2020-01-01"']),
    ({"type": "object", "properties": {"key": {"type": "integer"}, "123e4567-e89b-12d3-a456-426614174000": {}},
      "propertyNames": {"format": "uuid"}},
     ['{"key":1}', '{"123e4567-e89b-12d3-a456-426614174000":1}', '{}']),
])
def test_literals_beside_a_format_are_checked_with_it(compiler, schema, texts):
    compiled = compiler.compile_json_schema(schema)
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert [_accepts(compiled, t) for t in texts] == [v.is_valid(json.loads(t)) for t in texts]
    assert not _accepts(compiled, texts[0]) and _accepts(compiled, texts[1])
