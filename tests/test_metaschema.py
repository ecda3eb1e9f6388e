"""The fast metaschema predicates never call a schema valid that jsonschema rejects.

``structgen.schema.metaschema.fast_check`` may only answer True where jsonschema finds no error
(False just means jsonschema is asked). Checked on every schema of the copied
JSON-Schema-Test-Suite (2020-12 and draft-07) and of the core real-world corpus, as they are
and after mutations that give asserted keywords values of the wrong type or range.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from structgen.schema.metaschema import fast_check

DATA = Path(__file__).parent / "data"
SUITE = DATA / "json-schema-test-suite" / "tests"
VALIDATORS = {"draft2020-12": jsonschema.Draft202012Validator, "draft7": jsonschema.Draft7Validator}

# values of the wrong type or range for keywords the metaschemas constrain
BAD_VALUES = [None, -1, 1.5, "x", [], [1, 1], {}, {"a": 1}, True, ["string", "string"], [{"type": 1}]]
MUTATED_KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "minLength", "maxLength", "minimum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "enum", "allOf", "anyOf", "oneOf",
    "not", "additionalProperties", "patternProperties", "dependentRequired", "dependencies", "$defs",
    "definitions", "minItems", "maxItems", "uniqueItems", "$ref", "$id", "$anchor", "const", "format",
    "contains", "minContains", "propertyNames", "if", "then", "else", "unevaluatedProperties", "$comment",
]


def _schemas() -> list[tuple[str, object, type]]:
    out = []
    for draft, cls in VALIDATORS.items():
        for f in sorted((SUITE / draft).glob("*.json")):
            for i, group in enumerate(json.loads(f.read_text(encoding="utf-8"))):
                out.append((f"{draft}/{f.stem}/{i}", group["schema"], cls))
    for case in json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8")):
        out.append((f"core/{case['name']}", case["schema"], jsonschema.validators.validator_for(
            case["schema"], default=jsonschema.Draft202012Validator)))
    return out


SCHEMAS = _schemas()


def _jsonschema_valid(node, cls) -> bool:
    return jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(node)) is None


def _dict_nodes(node, path=()):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _dict_nodes(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _dict_nodes(v, path + (i,))


def _mutations(schema, limit: int = 40):
    """Copies of ``schema`` with one asserted keyword (at any depth) given a bad value."""
    n = 0
    for path, node in list(_dict_nodes(schema)):
        for kw in MUTATED_KEYWORDS:
            if kw not in node:
                continue
            for bad in BAD_VALUES:
                if n >= limit:
                    return
                mutated = copy.deepcopy(schema)
                target = mutated
                for p in path:
                    target = target[p]
                target[kw] = copy.deepcopy(bad)
                n += 1
                yield mutated


def test_corpus_schemas_agree_with_jsonschema():
    disagree = []
    for name, schema, cls in SCHEMAS:
        if not isinstance(schema, dict):
            continue
        fast, slow = fast_check(schema, cls.META_SCHEMA), _jsonschema_valid(schema, cls)
        if fast != slow:
            disagree.append((name, fast, slow))
    # the fast path is exact on the corpus: it must not be wrong (fast True) and should not
    # fall back needlessly (fast False on a valid schema)
    assert not disagree, disagree[:10]


@pytest.mark.parametrize("draft", sorted(VALIDATORS))
def test_mutated_schemas_never_pass_wrongly(draft):
    checked = wrongly_valid = fallbacks = 0
    rejected = 0
    for name, schema, cls in SCHEMAS:
        if not name.startswith(draft) or not isinstance(schema, dict):
            continue
        for mutated in _mutations(schema, limit=12):
            slow = _jsonschema_valid(mutated, cls)
            fast = fast_check(mutated, cls.META_SCHEMA)
            checked += 1
            rejected += not slow
            if fast and not slow:
                wrongly_valid += 1
                pytest.fail(f"{name}: fast check accepts {json.dumps(mutated)[:300]} which jsonschema rejects")
            fallbacks += slow and not fast
    assert checked > 1000 and rejected > 300  # the mutations do produce invalid schemas
    assert fallbacks <= checked // 20, (fallbacks, checked)  # and valid ones mostly take the fast path


@pytest.mark.parametrize("cls", [jsonschema.Draft202012Validator, jsonschema.Draft201909Validator,
                                 jsonschema.Draft7Validator, jsonschema.Draft6Validator, jsonschema.Draft4Validator])
@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 1.0}, {"minLength": 1.0}, {"minLength": 2.5}, {"enum": [1, True]},
    {"type": ["string", "string"]}, {"required": ["a", "a"]}, {"required": []}, {"items": [{"type": "string"}]},
    {"exclusiveMinimum": True, "minimum": 0}, {"exclusiveMaximum": 3}, {"multipleOf": 0}, {"$id": "a#b"},
    {"$anchor": "1x"}, {"enum": []}, {"dependencies": {"a": ["b", "b"]}}, {"dependentRequired": {"a": [1]}},
    {"properties": {"a": 1}}, {"allOf": []}, {"type": "any"}, {"$vocabulary": {"x": 1}}, {"format": 3},
    {"prefixItems": []}, {"properties": {"a": {"type": "intege"}}}, {"$defs": {"a": {"minItems": -1}}},
    {"definitions": {"a": {"minItems": -1}}}, {"not": 1}, {"contains": []}, {"maxContains": -1},
])
def test_edge_values_agree(schema, cls):
    assert fast_check(schema, cls.META_SCHEMA) <= _jsonschema_valid(schema, cls)


def test_a_compiler_prepares_the_default_dialects_check(monkeypatch):
    """GrammarCompiler() compiles the 2020-12 check, so the first schema does not pay for it."""
    from structgen import GrammarCompiler
    from structgen.schema import metaschema

    from .conftest import toy_info

    uri = "https://json-schema.org/draft/2020-12/schema"
    monkeypatch.setattr(metaschema, "_CACHE", {})
    GrammarCompiler(toy_info([]))
    assert metaschema._CACHE.get(uri) is not None
