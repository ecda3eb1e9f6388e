"""uniqueItems over finitely many item values: every short array, against jsonschema."""
from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from structgen import GrammarCompiler, GrammarMatcher, UnsupportedSchemaError

from .conftest import toy_info

SCHEMAS = [
    {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 1},
    {"items": {"enum": [1, 1.0, 2, "x"]}, "uniqueItems": True, "maxItems": 2},
    {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 3},
    {"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": False},
]
VALUES = ["a", "b", "c", True, False, 1, 2, "x", None]


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(toy_info([]))


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:50] for s in SCHEMAS])
def test_unique_items_match_jsonschema(compiler, schema):
    from structgen import SchemaError

    validator = jsonschema.Draft202012Validator(schema)
    try:
        compiled = compiler.compile_json_schema(schema)
    except SchemaError:
        compiled = None
    for r in range(5):
        for combo in itertools.product(VALUES, repeat=r):
            instance = list(combo)
            if compiled is None:
                assert not validator.is_valid(instance)
                continue
            m = GrammarMatcher(compiled)
            got = m.accept_string(json.dumps(instance, separators=(",", ":"))) and m.is_completed()
            assert got == validator.is_valid(instance), (schema, instance)


@pytest.mark.parametrize("items", [{"type": "string"}, {"enum": list(range(9))}, {"$ref": "#/$defs/x"}])
def test_unique_items_refused_where_not_exact(compiler, items):
    schema = {"type": "array", "items": items, "uniqueItems": True, "$defs": {"x": {"type": "integer"}}}
    with pytest.raises(UnsupportedSchemaError) as err:
        compiler.compile_json_schema(schema)
    assert err.value.pointer == "/uniqueItems"
