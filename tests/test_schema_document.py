"""SchemaDocument: base URIs, anchors, relative and remote references, dynamic anchors, and
errors that name the pointer of the reference at fault."""
from __future__ import annotations

import pytest

from structgen.errors import SchemaError, UnsupportedSchemaError
from structgen.schema.document import DEFAULT_BASE, SchemaDocument
from structgen.schema.resources import embed_resources

SCHEMA = {
    "$id": "https://example.com/root.json",
    "$defs": {
        "a": {"$anchor": "here", "type": "string"},
        "inner": {
            "$id": "folder/inner.json",
            "$defs": {"b": {"$anchor": "b", "type": "integer"}, "c~/d": {"type": "null"}},
            "properties": {"x": {"$ref": "#b"}, "y": {"$ref": "../root.json#here"}, "z": {"$ref": "#/$defs/c~0~1d"}},
        },
        "dyn": {"$id": "dyn", "$dynamicAnchor": "node", "properties": {"kid": {"$dynamicRef": "#node"}}},
    },
    "$dynamicAnchor": "node",
}


def test_base_uris_and_resources():
    doc = SchemaDocument(SCHEMA)
    assert doc.root_base == "https://example.com/root.json"
    assert doc.resources["https://example.com/folder/inner.json"] == "/$defs/inner"
    assert doc.base_at("/$defs/inner/properties/x") == "https://example.com/folder/inner.json"
    assert doc.resource_at("/$defs/inner/properties/x") == "/$defs/inner"
    assert doc.base_at("/$defs/a") == "https://example.com/root.json"


def test_refs_resolve_against_the_base_where_they_are_written():
    doc = SchemaDocument(SCHEMA)
    at = "/$defs/inner/properties"
    assert doc.to_pointer("#b", at + "/x/$ref") == "/$defs/inner/$defs/b"
    assert doc.to_pointer("../root.json#here", at + "/y/$ref") == "/$defs/a"
    assert doc.resolve("#/$defs/c~0~1d", at + "/z/$ref") == {"type": "null"}
    assert doc.locate("https://example.com/folder/inner.json#/$defs/b", "") == ("/$defs/inner", "/$defs/inner/$defs/b")
    # an absolute form means the same from anywhere
    assert doc.absolute_ref("#b", at + "/x/$ref") == "https://example.com/folder/inner.json#b"


def test_entered_resources_and_dynamic_anchors():
    doc = SchemaDocument(SCHEMA)
    assert doc.entered("", "/$defs/inner/$defs/b") == ["", "/$defs/inner"]
    assert doc.resource_dynamic == {"": {"node": ""}, "/$defs/dyn": {"node": "/$defs/dyn"}}
    assert doc.dynamic_names == {"node"}
    assert doc.dynamic_target("#node", "/$defs/dyn/properties/kid/$dynamicRef") == ("node", "/$defs/dyn")
    assert doc.dynamic_target("#/$defs/a", "") is None


def test_document_without_id_and_legacy_dialect():
    doc = SchemaDocument({"definitions": {"a": {"$id": "x.json", "$ref": "#/definitions/b"}, "b": {}},
                          "$schema": "http://json-schema.org/draft-07/schema#"})
    assert doc.root_base == DEFAULT_BASE and doc.legacy_ref
    assert doc.single_resource  # beside $ref, draft-07 ignores $id


def test_remote_resources_are_found_once_embedded():
    schema = embed_resources({"$ref": "https://remote.example/s.json#/$defs/n"},
                             {"https://remote.example/s.json": {"$defs": {"n": {"type": "number"}}}})
    doc = SchemaDocument(schema)
    assert doc.resolve(schema["$ref"], "/$ref") == {"type": "number"}


def test_errors_carry_the_pointer_of_the_reference():
    doc = SchemaDocument(SCHEMA)
    with pytest.raises(SchemaError) as err:
        doc.to_pointer("#nowhere", "/$defs/inner/properties/x/$ref")
    assert err.value.pointer == "/$defs/inner/properties/x/$ref" and err.value.keyword == "$ref"
    with pytest.raises(UnsupportedSchemaError) as unsupported:
        doc.to_pointer("https://elsewhere.example/s.json", "/properties/p/$ref")
    assert unsupported.value.pointer == "/properties/p/$ref"
    with pytest.raises(SchemaError) as missing:
        doc.resolve("#/$defs/none", "/allOf/0/$ref")
    assert missing.value.pointer == "/allOf/0/$ref"
    with pytest.raises(SchemaError) as typed:
        doc.to_pointer(3, "/x/$ref")
    assert typed.value.pointer == "/x/$ref"
