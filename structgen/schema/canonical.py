"""The canonical text of a JSON value under a schema: what structgen's grammar writes.

``canonical_json(value, schema)`` serialises a valid instance with compact separators,
``ensure_ascii=False`` strings, and object members in schema order (declared properties
first, in the order of ``properties`` then ``required``; other members after them, in the
value's own order). It is the form the compiled grammar accepts for every valid instance,
which the completeness tests rely on.
"""
from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import jsonschema

from .json_values import dumps_compact, json_equal
from .document import SchemaDocument, dialect_of, foreign_keywords
from .merge import MergeConflict, merge
from .to_grammar import _normalise, dependency_alternatives
from .unevaluated import expand_unevaluated

__all__ = ["canonical_json", "json_equal", "dumps_compact"]

def canonical_json(value: Any, schema: Any, *, root: Any = None) -> str:
    """Serialise ``value`` the way the grammar compiled from ``schema`` writes it (``root``: the
    document ``schema`` is part of, taken as it is; by default ``schema`` is the document, read
    as the compiler reads it: keywords of other drafts left out, type aliases resolved)."""
    if root is None:
        root = schema = _normalise(schema, foreign_keywords(schema))
    return _Canon(root).dump(value, schema)


class _Canon:
    def __init__(self, root: Any) -> None:
        self.root = root
        cls = jsonschema.validators.validator_for(root) if isinstance(root, dict) else jsonschema.Draft202012Validator
        self.validator = cls(root)
        # references and the dialect's $ref rule, as the compiler reads them
        self.doc = SchemaDocument(root)
        self.legacy_ref = self.doc.legacy_ref
        # draft-04 and older: 1.0 is not an integer, so it keeps its fraction
        self.float_integers = dialect_of(root)[1] not in ("draft-04", "draft-03")

    def combine(self, schema: Any) -> Any:
        """allOf, and $ref or anyOf with siblings, as the one merged schema the grammar is built from."""
        if not isinstance(schema, dict):
            return schema
        notes = {"title", "description", "examples", "default", "$comment", "$schema", "$id", "$defs", "definitions"}
        siblings = {k: v for k, v in schema.items() if k not in notes}
        resolve = lambda ref: self._pointer(ref)  # noqa: E731
        if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
            return self.combine(self._plain(schema))
        if any(k in schema for k in ("dependentRequired", "dependentSchemas", "dependencies")):
            rest = dict(schema)
            parts = dependency_alternatives(rest)  # as the compiler expands them
            return self.combine({**rest, "allOf": [*rest.get("allOf", []), *parts]})
        if isinstance(schema.get("oneOf"), list):
            # the compiler writes a oneOf it can enforce as an anyOf of its branches (exactly
            # one matches), merged with the keywords beside it
            rest = {k: v for k, v in schema.items() if k != "oneOf"}
            return self.combine({**rest, "allOf": [*rest.get("allOf", []), {"anyOf": schema["oneOf"]}]})
        try:
            if "allOf" in schema:
                merged = {k: v for k, v in schema.items() if k != "allOf"}
                for part in schema["allOf"]:
                    if isinstance(part, dict) and "unevaluated" in json.dumps(part):
                        part = self._plain(part)
                    merged = merge(merged, part, resolve)
                return self.combine(merged)
            if "$ref" in schema and len(siblings) > 1 and not self.legacy_ref:
                rest = {k: v for k, v in siblings.items() if k != "$ref"}
                return self.combine(merge(rest, {"$ref": schema["$ref"]}, resolve))
            if "anyOf" in schema and len(siblings) > 1:
                rest = {k: v for k, v in schema.items() if k != "anyOf"}
                return merge(rest, {"anyOf": schema["anyOf"]}, resolve)
        except MergeConflict:
            return schema
        return schema

    def _plain(self, schema: dict) -> Any:
        """unevaluated* made plain keywords, as the compiler does (:mod:`structgen.unevaluated`)."""
        return expand_unevaluated(schema, "", resolve_ref=lambda ref, at: (self._pointer(ref), ref[1:]),
                                  oneof_overlap=lambda branches, at: None, unsupported=lambda *args: None,
                                  rebase=lambda s, at: s, legacy_items=self.legacy_ref)

    def _merge(self, a: Any, b: Any) -> Any:
        try:
            return merge(a, b, self._pointer)
        except MergeConflict:
            return a

    def _pointer(self, ref: str) -> Any:
        return self.doc.resolve(ref, "")

    def resolve(self, schema: Any) -> Any:
        schema, _ = self.doc.follow(schema, "")
        if isinstance(schema, dict) and "$ref" in schema:  # a $ref with siblings: one merged schema
            return self.combine(schema)
        return schema

    def dump(self, value: Any, schema: Any) -> str:
        schema = self.combine(self.resolve(schema))
        if isinstance(schema, dict) and "anyOf" in schema:
            for branch in schema["anyOf"]:
                if self.validator.evolve(schema=branch).is_valid(value):
                    return self.dump(value, branch)
        if not isinstance(schema, dict):
            schema = {}
        literals = [schema["const"]] if "const" in schema else schema.get("enum")
        if literals is not None:  # the grammar writes the schema's own literal (its key order)
            for lit in literals:
                if json_equal(lit, value):
                    return dumps_compact(lit)
        if isinstance(value, dict):
            props = schema.get("properties", {})
            order = list(dict.fromkeys([*props, *schema.get("required", [])]))
            keys = [k for k in order if k in value] + [k for k in value if k not in order]
            extra = schema.get("additionalProperties", True)
            parts = []
            patterns = schema.get("patternProperties", {})
            for k in keys:
                # the member's schema as the compiler builds it: properties, then every matching
                # patternProperties merged in; additionalProperties only when neither applies
                matching = [p for p in patterns if re.search(p, k)]
                sub = props.get(k, True if matching else extra)
                for p in matching:
                    sub = self._merge(sub, patterns[p])
                parts.append(dumps_compact(k) + ":" + self.dump(value[k], sub))
            return "{" + ",".join(parts) + "}"
        if isinstance(value, list):
            prefix = schema.get("prefixItems", [])
            items = schema.get("items", True)
            if isinstance(items, list):
                prefix, items = items, schema.get("additionalItems", True)
            return "[" + ",".join(
                self.dump(v, prefix[i] if i < len(prefix) else items) for i, v in enumerate(value)) + "]"
        if isinstance(value, float) and math.isfinite(value):
            return _number_text(value, self.float_integers)
        return dumps_compact(value)


def _number_text(value: float, float_integers: bool) -> str:
    """A float as the grammar writes numbers: integral ones as integers (``1.0`` is an
    integer to JSON Schema from draft 6 on, and integer grammars have no fraction), others
    without exponent (bounded number grammars have none), never ``-0``."""
    if value.is_integer():
        return str(int(value)) if float_integers else dumps_compact(value)
    return format(Decimal(repr(value)), "f")
