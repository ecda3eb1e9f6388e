"""Keywords of one draft in a schema of another: validators of the schema's draft ignore them,
and so must the grammar (else it refuses instances jsonschema accepts), on the record.

Each case is a schema whose keyword under test would reject the instance. Under every draft
the schema is valid in, the grammar must accept the instance exactly when jsonschema's
validator of that draft does; where the keyword is not the draft's, a note says so.
"""
from __future__ import annotations

import json

import jsonschema
import pytest

from structgen import GrammarCompiler, GrammarMatcher, SchemaError, TokenizerInfo
from structgen.schema.document import foreign_keywords

DRAFTS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
    "no $schema": None,
}

# (keyword under test, schema, an instance only that keyword rejects)
CASES = [
    ("unevaluatedProperties", {"type": "object", "properties": {"a": {"type": "integer"}},
                               "unevaluatedProperties": False}, '{"b":1}'),
    ("unevaluatedItems", {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False}, "[1,2]"),
    ("prefixItems", {"type": "array", "prefixItems": [{"type": "integer"}]}, '["x"]'),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}, '{"a":1}'),
    ("dependentSchemas", {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}, '{"a":1}'),
    ("dependencies", {"type": "object", "dependencies": {"a": ["b"]}}, '{"a":1}'),
    ("additionalItems", {"type": "array", "items": [{"type": "integer"}], "additionalItems": False}, "[1,2]"),
    ("minContains", {"type": "array", "contains": {"type": "integer"}, "minContains": 2}, "[1]"),
    ("maxContains", {"type": "array", "contains": {"type": "integer"}, "maxContains": 1}, "[1,2]"),
    ("contains", {"type": "array", "contains": {"type": "integer"}}, '["x"]'),
    ("const", {"const": 1}, "2"),
    ("if", {"type": "integer", "if": {"minimum": 5}, "then": {"maximum": 3}}, "7"),
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 1}}, '{"ab":1}'),
]


@pytest.fixture(scope="module")
def compiler():
    toks: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
    return GrammarCompiler(TokenizerInfo.from_token_bytes(toks, stop_token_ids=[256]))


def _cases():
    for keyword, base, instance in CASES:
        for draft, uri in DRAFTS.items():
            schema = dict(base) if uri is None else {"$schema": uri, **base}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            try:
                cls.check_schema(schema)
            except jsonschema.SchemaError:
                continue  # (items as an array in 2020-12, say)
            yield pytest.param(keyword, schema, instance, id=f"{keyword}-{draft}")


@pytest.mark.parametrize("keyword,schema,instance", list(_cases()))
def test_grammar_reads_the_keywords_of_the_schemas_draft(compiler, keyword, schema, instance):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    valid = cls(schema).is_valid(json.loads(instance))
    compiled = compiler.compile_json_schema(schema)
    m = GrammarMatcher(compiled)
    assert (m.accept_string(instance) and m.is_completed()) == valid
    noted = [w for w in compiled.warnings if f"{keyword!r} is not a keyword of" in w]
    # the draft ignores the keyword (the instance is valid) exactly where it is left out, noted
    assert bool(noted) == (keyword in foreign_keywords(schema)) == valid


def test_every_draft_enforces_its_own_keywords():
    # each case's keyword is checked by at least one draft (the matrix above is not vacuous)
    for keyword, _, _ in CASES:
        assert any(keyword not in foreign_keywords({} if uri is None else {"$schema": uri}) for uri in DRAFTS.values())
        assert any(keyword in foreign_keywords({} if uri is None else {"$schema": uri}) for uri in DRAFTS.values())


@pytest.mark.parametrize("uri", ["http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
                                 "https://json-schema.org/draft-07/schema", "https://example.com/custom-metaschema"])
def test_the_draft_is_the_one_jsonschema_validates_with(compiler, uri):
    # keywords beside $ref hold from 2019-09 on and are ignored before; the draft is read from
    # $schema as jsonschema reads it: a URI it does not know (draft-07's spelled with https)
    # means 2020-12, where the maxLength beside the $ref holds (the grammar had ignored it,
    # reading "draft-07" in the URI, and wrote "abc", which jsonschema refuses)
    schema = {"$schema": uri, "$ref": "#/definitions/a", "maxLength": 2, "definitions": {"a": {"type": "string"}}}
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)
    compiled = compiler.compile_json_schema(schema)
    for text in ('"ab"', '"abc"', "1"):
        m = GrammarMatcher(compiled)
        assert (m.accept_string(text) and m.is_completed()) == validator.is_valid(json.loads(text)), text


# -- a schema applied to the same value again through a reference, without end -------------

_D2019 = "https://json-schema.org/draft/2019-09/schema"


@pytest.mark.parametrize("schema,pointer", [
    # found by the property soak: checking the const with jsonschema recursed until the C stack
    # ran out under the compile's raised recursion limit, and the process died (SIGSEGV)
    ({"anyOf": [{"$ref": "#"}], "const": 1}, "/anyOf/0/$ref"),
    ({"items": {"anyOf": [{"$ref": "#/items"}], "enum": [1, 2]}}, "/items/anyOf/0/$ref"),
    ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}},
      "$ref": "#/$defs/a", "const": 1}, "/$defs/b/not/$ref"),
    ({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, "/anyOf/1/$ref"),
    ({"$schema": _D2019, "$recursiveAnchor": True, "anyOf": [{"$recursiveRef": "#"}], "const": 1},
     "/anyOf/0/$recursiveRef"),
    ({"$defs": {"n": {"$dynamicAnchor": "n", "anyOf": [{"$dynamicRef": "#n"}]}}, "$ref": "#/$defs/n", "enum": [1]},
     "/$defs/n/anyOf/0/$dynamicRef"),
])
def test_a_reference_cycle_in_place_is_refused_where_it_closes(compiler, schema, pointer):
    for strict in (True, False):
        with pytest.raises(SchemaError) as info:
            compiler.compile_json_schema(schema, strict=strict)
        assert info.value.pointer == pointer and "without end" in str(info.value)


@pytest.mark.parametrize("schema,text", [
    ({"properties": {"a": {"$ref": "#"}}, "enum": [{"a": {}}, {}, 1]}, '{"a":{}}'),  # a member: moves on
    ({"items": {"$ref": "#"}, "maxItems": 1}, "[[[]]]"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/a", "anyOf": [{"$ref": "#"}],
      "definitions": {"a": {"const": 1}}}, "1"),  # (draft-07: the anyOf beside the $ref is not applied)
])
def test_references_that_move_into_the_value_are_not_cycles(compiler, schema, text):
    m = GrammarMatcher(compiler.compile_json_schema(schema))
    assert m.accept_string(text) and m.is_completed()
