"""minProperties / maxProperties: every subset of a few names, against jsonschema."""
from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from structgen import GrammarCompiler, GrammarMatcher

from .conftest import toy_info

INT = {"type": "integer"}
SCHEMAS = [
    {"type": "object", "properties": {"a": INT, "b": INT, "c": INT}, "minProperties": 2, "additionalProperties": False},
    {"type": "object", "properties": {"a": INT, "b": INT, "c": INT}, "maxProperties": 1, "additionalProperties": False},
    {"type": "object", "properties": {"a": INT}, "required": ["a"], "minProperties": 2, "maxProperties": 3},
    {"type": "object", "minProperties": 1, "maxProperties": 2},
    {"type": "object", "properties": {"a": INT, "b": INT}, "minProperties": 1},
    {"type": "object", "properties": {"a": INT, "b": INT, "c": INT, "d": INT}, "maxProperties": 2},
    {"type": "object", "maxProperties": 0},
    {"type": "object", "properties": {"a": INT}, "required": ["a"], "maxProperties": 0},
]


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(toy_info([]))


@pytest.mark.parametrize("schema", SCHEMAS, ids=[json.dumps(s)[:60] for s in SCHEMAS])
def test_counts_match_jsonschema(compiler, schema):
    from structgen import SchemaError

    validator = jsonschema.Draft202012Validator(schema)
    try:
        compiled = compiler.compile_json_schema(schema)
    except SchemaError:  # unsatisfiable: then no instance may be valid
        compiled = None
    for r in range(6):
        for names in itertools.combinations("abcdxy", r):
            instance = {k: 1 for k in names}
            ok = validator.is_valid(instance)
            if compiled is None:
                assert not ok, instance
                continue
            m = GrammarMatcher(compiled)
            got = m.accept_string(json.dumps(instance, separators=(",", ":"))) and m.is_completed()
            assert got == ok, (schema, instance)
