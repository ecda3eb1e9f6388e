"""Exact decimal bounds on numbers and string formats, checked against jsonschema."""
from __future__ import annotations

import json
from decimal import Decimal

import jsonschema
import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher
from structgen.regex.formats import FORMAT_PATTERNS

from .conftest import toy_info
from .walks import random_walk

COMPILER = GrammarCompiler(toy_info([]))
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


NUMBER_SCHEMAS = [
    {"type": "number", "minimum": 0, "maximum": 1},
    {"type": "number", "exclusiveMinimum": -0.5, "exclusiveMaximum": 2.25},
    {"type": "number", "minimum": -90, "maximum": 90},
    {"type": "number", "minimum": 0.1},
    {"type": "number", "exclusiveMaximum": 0},
    {"type": "number", "minimum": 1.05, "maximum": 1.15},
    {"type": ["number", "null"], "minimum": 3.5, "exclusiveMaximum": 4},
    {"type": "number", "minimum": 2, "exclusiveMinimum": 2},  # draft 2020-12: both apply
]
PROBES = ["0", "1", "0.5", "1.0", "1.0001", "-0.5", "-0.4999", "2.25", "2.2499", "-90", "-90.5", "90", "90.00",
          "0.1", "0.09999", "-0.1", "0.0", "1.05", "1.049", "1.15", "1.1500001", "3.5", "3.9999", "4", "2", "2.000001",
          "null", "1e2", "-0", "00.5"]


@pytest.mark.parametrize("schema", NUMBER_SCHEMAS, ids=[json.dumps(s) for s in NUMBER_SCHEMAS])
def test_number_bounds_are_exact(schema):
    compiled = COMPILER.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in PROBES:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            assert not accepts(compiled, text), text
            continue
        canonical_form = text not in ("-0", "1e2") and not text.startswith("00")
        if canonical_form:
            assert accepts(compiled, text) == validator.is_valid(value), text
        elif accepts(compiled, text):
            assert validator.is_valid(value), text


@pytest.mark.parametrize("schema", NUMBER_SCHEMAS, ids=[json.dumps(s) for s in NUMBER_SCHEMAS])
def test_number_walks_validate(schema):
    info = toy_info([])
    compiled = GrammarCompiler(info).compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rng = np.random.default_rng(3)
    done = 0
    for _ in range(40):
        out, finished, _ = random_walk(GrammarMatcher(compiled), info, rng, max_steps=40)
        if finished:
            done += 1
            value = json.loads(out)
            assert validator.is_valid(value), out
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            # decimal exactness: compare with Decimal, not float
            assert Decimal(out.decode()) == Decimal(out.decode())
    assert done >= 10


FORMAT_SAMPLES = {
    "date": (["2024-01-31", "1999-12-01", "2023-02-28"], ["2024-13-01", "2024-02-30", "24-01-01", "2024-1-01", "0000-01-01"]),
    "time": (["12:30:00Z", "23:59:59.123+02:00", "00:00:00-05:30"], ["24:00:00Z", "12:30Z", "12:30:00"]),
    "date-time": (["2024-01-31T12:30:00Z", "2024-06-30t00:00:00.5+01:00"], ["2024-01-31 12:30:00Z", "2024-01-31T12:30:00"]),
    "duration": (["P3D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W"], ["P", "PT", "3D", "P1H"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "g23e4567-e89b-12d3-a456-426614174000"]),
    "ipv4": (["192.168.0.1", "0.0.0.0", "255.255.255.255"], ["256.1.1.1", "01.2.3.4", "1.2.3"]),
    "ipv6": (["2001:db8:0:0:0:0:0:1", "::1", "fe80::"], ["2001:db8::g", ":::1"]),
    "hostname": (["example.com", "a-b.c.d"], ["-bad.com", "a..b", "x" * 64 + ".com"]),
    "email": (["a.b+c@example.com", "x@y.io"], ["a@b", "@example.com", "a b@example.com"]),
    "uri": (["https://example.com/a?b=c#d", "urn:isbn:0451450523"], ["example.com", "http://exa mple.com"]),
    "uri-reference": (["/a/b?c", "../x", ""], ["a b"]),
    "iri": (["https://example.com/a?b=c#d"], ["example.com"]),
    "iri-reference": (["/a/b?c", ""], ["a b"]),
    "idn-email": (["a.b+c@example.com"], ["a@b", "@example.com"]),
    "idn-hostname": (["example.com", "a-b.c.d"], ["-bad.com", "ab--cd.com", "a..b"]),
    "json-pointer": (["", "/a/b", "/a~0b/~1c", "/"], ["a/b", "/~2", "/a~"]),
    "relative-json-pointer": (["0", "1/a", "2#", "10"], ["-1", "/a", "01", "100"]),
    "uri-template": (["http://example.com/{id}", "/search{?q,lang}", "x"], ["{", "a b", "{}"]),
    "regex": (["abc", "a b_1", ""], ["(", "a[", "\\"]),
    "byte": (["", "QQ==", "QUI=", "QUJD", "aGVsbG8gd29ybGQ="], ["Q", "QQ=", "QR==", "QUJD=", "a b=", "-----BEGIN"]),
    "password": (["", "hunter2", "a b\tc\n"], []),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_PATTERNS))
def test_formats(fmt):
    schema = {"type": "string", "format": fmt}
    info = toy_info([])
    compiled = GrammarCompiler(info).compile_json_schema(schema)
    good, bad = FORMAT_SAMPLES[fmt]
    for s in good:
        assert accepts(compiled, json.dumps(s)), s
    for s in bad:
        assert not accepts(compiled, json.dumps(s)), s
    rng = np.random.default_rng(5)
    for _ in range(30):
        out, finished, _ = random_walk(GrammarMatcher(compiled), info, rng, max_steps=120)
        if finished:
            value = json.loads(out)
            if fmt in CHECKER.checkers:
                assert CHECKER.conforms(value, fmt), (fmt, value)


def test_bfcl_type_aliases():
    schema = {"type": "dict", "properties": {"x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "long"}},
                                              "a": {"type": "any"}}, "required": ["x"]}
    compiled = COMPILER.compile_json_schema(schema)
    assert accepts(compiled, '{"x":1.5,"t":[1,2],"a":{"k":[null]}}')
    assert not accepts(compiled, '{"x":"1.5"}')


def test_decimal_count_keywords():
    compiled = COMPILER.compile_json_schema({"type": "array", "maxItems": 2.0})
    assert accepts(compiled, "[1,2]") and not accepts(compiled, "[1,2,3]")


COMBINED = [
    # additionalProperties only covers names its own schema does not declare
    ({"allOf": [{"properties": {"foo": {}}}, {"additionalProperties": False}]}, ['{}'], ['{"foo":1}', '{"x":1}']),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     ['{"a":1,"b":"x"}', '{"a":1,"b":"x","c":null}'], ['{"a":1}', '{"b":"x"}', '{"a":"1","b":"x"}']),
    ({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 9}, {"type": ["integer", "string"]}]},
     ["0", "9"], ["10", "-1", '"a"']),
    ({"$defs": {"pos": {"type": "number", "minimum": 0}}, "$ref": "#/$defs/pos", "maximum": 1},
     ["0", "0.5", "1"], ["2", "-1"]),
    ({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}},
      "anyOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
                {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}]},
     ['{"kind":"a","x":1}', '{"kind":"b"}'], ['{"kind":"a"}', '{"kind":"c"}', '{"kind":"a","x":"1"}']),
    ({"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}, {"not_a_keyword_but_annotation": 1} if False else {}]},
     ["2", "3"], ["1", "4"]),
]


@pytest.mark.parametrize("schema,good,bad", COMBINED, ids=[str(i) for i in range(len(COMBINED))])
def test_combined_schemas_are_exact(schema, good, bad):
    compiled = COMPILER.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in good:
        assert validator.is_valid(json.loads(text)), text  # the table itself is right
        assert accepts(compiled, text), text
    for text in bad:
        assert not validator.is_valid(json.loads(text)), text
        assert not accepts(compiled, text), text


def test_draft7_ignores_keywords_beside_ref():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"s": {"type": "string"}},
              "$ref": "#/definitions/s", "maxLength": 1}
    compiled = COMPILER.compile_json_schema(schema)
    assert accepts(compiled, '"long string"')  # as jsonschema's Draft7Validator says
    assert jsonschema.Draft7Validator(schema).is_valid("long string")


REWRITTEN = [
    # oneOf with provably disjoint branches (a tagged union and a type split)
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"], "additionalProperties": False}]},
     ['{"kind":"a","x":1}', '{"kind":"b"}'], ['{"kind":"a"}', '{"kind":"b","x":1}']),
    ({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}, ['"s"', "3"], ["-1", "null"]),
    ({"not": {"type": ["string", "null"]}}, ["1", "[]", "{}", "true"], ['"s"', "null"]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "not": {"required": ["a"]}},
     ['{}', '{"b":1}'], ['{"a":1}']),
    ({"type": "object", "properties": {"card": {"type": "string"}, "address": {"type": "string"}},
      "dependentRequired": {"card": ["address"]}, "additionalProperties": False},
     ['{}', '{"address":"x"}', '{"card":"1","address":"x"}'], ['{"card":"1"}']),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
      "dependencies": {"a": {"properties": {"b": {"maxLength": 1}}, "required": ["b"]}}},
     ['{}', '{"a":1,"b":"x"}', '{"b":"long"}'], ['{"a":1}', '{"a":1,"b":"xy"}']),
    ({"type": "object", "properties": {"id": {"type": "integer"}},
      "patternProperties": {"^x-": {"type": "string"}, "[0-9]$": {"type": "string", "maxLength": 2}},
      "additionalProperties": {"type": "boolean"}},
     ['{"id":1,"x-a":"long text","x9":"ab","k":true}', '{"x-9":"ab"}'],
     ['{"x-a":1}', '{"k":"s"}', '{"x-9":"abc"}', '{"id":"1"}', '{"a1":true}']),
    ({"type": "object", "properties": {"name": {"type": "string"}, "Bad": {"type": "string"}},
      "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 4}},
     ['{"name":"x"}', '{"abc":1}'], ['{"Bad":"x"}', '{"abcde":1}', '{"a1":1}']),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"'], ['"a"', '"abcd"', '"A"']),
    ({"type": "object", "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}, "s": {"type": "string"}},
      "if": {"properties": {"kind": {"type": "string"}}, "required": ["kind"]}, "then": {"required": ["s"]},
      "else": {"required": ["n"]}},
     ['{"kind":"a","s":"x"}', '{"n":1}'], ['{"kind":"a"}', '{}', '{"s":"x"}']),
    ({"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "integer"}},
     ['"ab"', "3"], ['"abc"', "1.5", "null"]),
    ({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}}, ["[5]", "[1,7,2]", "[9,9]"], ["[]", "[1,2]", '[1,"7"]']),
    ({"type": "array", "contains": {"const": "x"}, "minContains": 2}, ['["x",1,"x"]', '["x","x"]'], ['["x"]', "[1,2]"]),
    ({"type": "object", "x-kubernetes-patch-strategy": "merge", "properties": {"a": {"type": "string", "example": "z"}}},
     ['{"a":"q"}'], ['{"a":1}']),
]


@pytest.mark.parametrize("schema,good,bad", REWRITTEN, ids=[str(i) for i in range(len(REWRITTEN))])
def test_rewritten_keywords_are_exact(schema, good, bad):
    compiled = COMPILER.compile_json_schema(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    for text in good:
        assert validator.is_valid(json.loads(text)), text
        assert accepts(compiled, text), text
    for text in bad:
        assert not validator.is_valid(json.loads(text)), text
        assert not accepts(compiled, text), text


def test_unknown_keywords_are_recorded_not_enforced():
    compiled = COMPILER.compile_json_schema({"type": "string", "x-unit": "cm", "exmaple": 3})
    assert any("'x-unit'" in w for w in compiled.warnings) and any("'exmaple'" in w for w in compiled.warnings)


MULTIPLE_OF = [{"type": "integer", "multipleOf": 7}, {"type": "integer", "multipleOf": 6, "minimum": -20, "maximum": 50},
               {"type": "number", "multipleOf": 3, "exclusiveMinimum": 2.5},
               {"allOf": [{"multipleOf": 4}, {"multipleOf": 6}], "type": "integer"},
               {"type": "integer", "multipleOf": 2.0}]


@pytest.mark.parametrize("schema", MULTIPLE_OF, ids=[str(s) for s in MULTIPLE_OF])
def test_integer_multiple_of_is_exact(schema):
    import jsonschema

    from structgen import GrammarCompiler, GrammarMatcher

    from .conftest import toy_info

    compiled = GrammarCompiler(toy_info([])).compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    def accepts(text: str) -> bool:
        m = GrammarMatcher(compiled)
        return m.accept_string(text) and m.is_completed()

    for n in [*range(-60, 120), 7 * 10**15, 12 * 10**30]:
        assert accepts(str(n)) == validator.is_valid(n), n
    for text in ["1.5", "07", "-0", "1e2", "6.0"]:  # integers are written as integers
        assert not accepts(text), text


def test_decimal_multiple_of_is_refused_with_its_pointer():
    from structgen import GrammarCompiler, UnsupportedSchemaError

    from .conftest import toy_info

    with pytest.raises(UnsupportedSchemaError) as err:
        GrammarCompiler(toy_info([])).compile_json_schema({"properties": {"price": {"type": "number", "multipleOf": 0.01}}})
    assert err.value.pointer == "/properties/price/multipleOf"


DECIMAL_MULTIPLES = [
    ({"type": "number", "multipleOf": 1.5}, 1.5), ({"type": "number", "multipleOf": 0.25, "minimum": -3}, 0.25),
    ({"type": "number", "multipleOf": 0.125, "exclusiveMaximum": 2}, 0.125), ({"multipleOf": 2.5}, 2.5),
    ({"type": "integer", "multipleOf": 1e-08}, 1e-08), ({"type": "integer", "multipleOf": 0.0001}, 0.0001),
    ({"type": "integer", "multipleOf": 1.5, "maximum": 40}, 1.5), ({"type": "integer", "multipleOf": 0.3}, 0.3),
]


@pytest.mark.parametrize("schema,d", DECIMAL_MULTIPLES, ids=[str(s) for s, _ in DECIMAL_MULTIPLES])
def test_decimal_multiple_of_agrees_with_decimals_and_jsonschema(schema, d):
    """A decimal divisor: every accepted text is a decimal multiple *and* valid for jsonschema
    (which divides floats); every decimal multiple written canonically (no exponent, no
    trailing zero, integers without fraction) within float-exact magnitudes is accepted."""
    import random
    from fractions import Fraction

    compiled = COMPILER.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    exact = Fraction(Decimal(repr(d)))
    integer = schema.get("type") == "integer"
    rng = random.Random(7)
    texts = set()
    for k in [*range(-40, 41), *(rng.randrange(-10**12, 10**12) for _ in range(300))]:
        v = k * exact
        texts.add(str(v.numerator) if v.denominator == 1 else format(Decimal(v.numerator) / Decimal(v.denominator), "f"))
    for _ in range(400):  # non-multiples and near misses
        texts.add(f"{rng.randrange(-10**6, 10**6) / 10**rng.randrange(0, 5):f}".rstrip("0").rstrip("."))
    texts.update(["0.0075", "0.00751", "4.50", "-0", "1e2", "4.5e0", "12391239123", str(2**53 + 5)])
    for text in texts:
        value = json.loads(text)
        multiple = (Fraction(Decimal(text)) / exact).denominator == 1 and (not integer or float(value).is_integer())
        within = validator.is_valid(value) and multiple
        got = accepts(compiled, text)
        if got:  # sound under both readings
            assert within, text
        elif within and "e" not in text and not text.startswith("-0") and not (text.endswith("0") and "." in text):
            assert abs(Fraction(Decimal(text))) > 2 ** 40, f"valid {text} refused"  # only float-inexact sizes


def test_decimal_multiple_of_refused_where_jsonschema_divides_inexactly():
    from structgen import UnsupportedSchemaError

    for schema in ({"type": "number", "multipleOf": 0.01}, {"type": "number", "multipleOf": 0.0001},
                   {"type": "integer", "multipleOf": 0.7}, {"type": "integer", "multipleOf": 0.123456789}):
        with pytest.raises(UnsupportedSchemaError, match="multipleOf"):
            COMPILER.compile_json_schema(schema)


@pytest.mark.parametrize("draft,text", [("https://json-schema.org/draft/2020-12/schema", "2"),
                                        ("http://json-schema.org/draft-07/schema#", "2"),
                                        ("http://json-schema.org/draft-04/schema#", "2.0")])
def test_canonical_integral_float_as_its_draft_reads_it(draft, text):
    """2.0 is an integer from draft 6 on (written 2, which integer grammars accept), not in
    draft-04 (kept 2.0, which they refuse): the text means the same to the validator."""
    from structgen.schema.canonical import canonical_json

    schema = {"$schema": draft, "type": "integer"}
    assert canonical_json(2.0, schema) == text
    valid = jsonschema.validators.validator_for(schema)(schema).is_valid(2.0)
    assert accepts(COMPILER.compile_json_schema(schema), text) == valid == (text == "2")
    assert canonical_json(1e-7, schema) == "0.0000001"
