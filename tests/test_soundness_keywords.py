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
from structgen.canonical import canonical_json
from structgen.schema_to_grammar import _FRACTION_TEXT, schema_to_grammar

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
