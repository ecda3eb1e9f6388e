"""Bad schemas: each error names the JSON pointer and what was expected; nothing is silent."""
from __future__ import annotations

import warnings

import pytest

from structgen import GrammarCompiler, SchemaError, StructgenWarning, UnsupportedSchemaError
from structgen.schema_to_grammar import schema_to_grammar

from .conftest import toy_info


@pytest.mark.parametrize("schema,pointer,keyword,match", [
    ([1, 2], "", None, "must be an object or a boolean"),
    ({"type": "object", "properties": {"a": {"type": "strin"}}}, "/properties/a/type", "type", "invalid schema"),
    ({"type": "object", "required": "a"}, "/required", "required", "invalid schema"),
    ({"type": "array", "minItems": -1}, "/minItems", "minItems", "invalid schema"),
    ({"$ref": "#/$defs/missing"}, "/$ref", "$ref", "unresolvable"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, None, "$ref", "cycle"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "", "minimum", "no integer"),
    ({"enum": []}, None, None, "invalid schema|enum is empty"),
    ({"type": "string", "minLength": 3, "maxLength": 2}, "/minLength", "minLength", "minLength 3 > maxLength 2"),
    ({"type": "array", "minItems": 3, "maxItems": 2}, "/minItems", "minItems", "minItems 3 > maxItems 2"),
    ({"const": 3, "type": "string"}, "/const", "const", "no const value"),
])
def test_invalid_schemas(schema, pointer, keyword, match):
    with pytest.raises(SchemaError, match=match) as exc:
        schema_to_grammar(schema)
    if pointer is not None:
        assert exc.value.pointer == pointer
    if keyword is not None:
        assert exc.value.keyword == keyword


@pytest.mark.parametrize("schema", [False, {"not": {}}, {"type": "object", "properties": {"a": False}, "required": ["a"]}])
def test_unsatisfiable_schemas_refused_at_compile(schema):
    c = GrammarCompiler(toy_info([]))
    with pytest.raises(SchemaError, match="unsatisfiable|not supported"):
        c.compile_json_schema(schema)


@pytest.mark.parametrize("schema,pointer,keyword", [
    ({"type": "string", "format": "iri"}, "/format", "format"),
    ({"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}, "/properties/x/uniqueItems", "uniqueItems"),
    ({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}, "/oneOf", "oneOf"),
    ({"not": {"type": "string", "maxLength": 3}}, "/not", "not"),
    ({"type": "number", "multipleOf": 0.5}, "/multipleOf", "multipleOf"),
    ({"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$"}]}, "/allOf", "pattern"),
])
def test_unsupported_keywords_strict_and_lenient(schema, pointer, keyword):
    with pytest.raises(UnsupportedSchemaError) as exc:
        schema_to_grammar(schema)
    assert exc.value.pointer == pointer and exc.value.keyword == keyword
    assert pointer in str(exc.value)
    with pytest.warns(StructgenWarning):
        g = schema_to_grammar(schema, strict=False)
    assert any(pointer in w for w in g.warnings)
    c = GrammarCompiler(toy_info([]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StructgenWarning)
        compiled = c.compile_json_schema(schema, strict=False)
    assert compiled.warnings, "lenient mode must record what it did not enforce"


def test_annotations_are_accepted():
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://x/y", "title": "t",
              "description": "d", "examples": [1], "default": 1, "$comment": "c", "type": "integer"}
    assert not schema_to_grammar(schema).warnings


def test_deep_nesting_does_not_recurse_out():
    schema = {"type": "array", "items": {"$ref": "#"}}
    c = GrammarCompiler(toy_info([]))
    m = c.compile_json_schema(schema).matcher()
    assert m.accept_string("[" * 1000 + "]" * 1000) and m.is_completed()


@pytest.mark.parametrize("keyword", ["oneOf", "not", "if", "dependentRequired"])
def test_own_allof_survives_rewritten_siblings(keyword):
    # regression: rewriting oneOf/not/if/dependencies into allOf parts replaced the schema's
    # own allOf, so allOf [minimum 10] beside oneOf [maximum 20] accepted 0..9
    from structgen import GrammarCompiler, GrammarMatcher

    from .conftest import toy_info

    sibling = {"oneOf": {"oneOf": [{"maximum": 20}]}, "not": {"not": {"type": "string"}},
               "if": {"if": {"type": "string"}, "then": {"maxLength": 3}}, "dependentRequired": {"dependentRequired": {"a": ["b"]}}}
    schema = {"type": "integer", "allOf": [{"minimum": 10}], **sibling[keyword]}
    compiled = GrammarCompiler(toy_info([])).compile_json_schema(schema)
    for n in range(10):
        m = GrammarMatcher(compiled)
        assert not (m.accept_string(str(n)) and m.is_completed()), n
    m = GrammarMatcher(compiled)
    assert m.accept_string("12") and m.is_completed()


def test_anchor_and_embedded_id_references():
    from structgen import GrammarCompiler, GrammarMatcher

    from .conftest import toy_info

    schema = {"$id": "https://example.com/root.json", "type": "object",
              "properties": {"n": {"$ref": "#count"}, "s": {"$ref": "other.json#/$defs/name"}, "t": {"$ref": "other.json"}},
              "required": ["n", "s", "t"], "additionalProperties": False,
              "$defs": {"c": {"$anchor": "count", "type": "integer", "minimum": 5},
                        "o": {"$id": "other.json", "type": "string", "$defs": {"name": {"enum": ["ann", "bob"]}}}}}
    compiled = GrammarCompiler(toy_info([])).compile_json_schema(schema)

    def ok(text: str) -> bool:
        m = GrammarMatcher(compiled)
        return m.accept_string(text) and m.is_completed()

    assert ok('{"n":7,"s":"bob","t":"x"}')
    assert not ok('{"n":4,"s":"bob","t":"x"}') and not ok('{"n":7,"s":"eve","t":"x"}') and not ok('{"n":7,"s":"bob","t":1}')


@pytest.mark.parametrize("ref,error,fragment", [
    ("https://elsewhere.example/s.json", "UnsupportedSchemaError", "nothing is fetched"),
    ("#nowhere", "SchemaError", "no anchor 'nowhere'"),
])
def test_unresolvable_references_are_located(ref, error, fragment):
    import structgen
    from structgen import GrammarCompiler

    from .conftest import toy_info

    with pytest.raises(getattr(structgen, error)) as err:
        GrammarCompiler(toy_info([])).compile_json_schema({"properties": {"a": {"$ref": ref}}})
    assert err.value.pointer == "/properties/a/$ref" and fragment in str(err.value)


def test_draft_given_decides_ref_siblings():
    # draft-07 ignores keywords beside $ref; 2020-12 applies them
    from structgen import GrammarCompiler, GrammarMatcher, SchemaError

    from .conftest import toy_info

    schema = {"$defs": {"n": {"type": "integer"}}, "definitions": {"n": {"type": "integer"}},
              "properties": {"a": {"$ref": "#/definitions/n", "minimum": 5}}, "required": ["a"], "additionalProperties": False}
    compiler = GrammarCompiler(toy_info([]))
    for draft, small_ok in [("draft-07", True), ("2020-12", False), (None, False)]:
        m = GrammarMatcher(compiler.compile_json_schema(schema, draft=draft))
        assert (m.accept_string('{"a":1}') and m.is_completed()) == small_ok, draft
    with pytest.raises(SchemaError, match="unknown draft"):
        compiler.compile_json_schema(schema, draft="draft-99")
