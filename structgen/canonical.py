"""The canonical text of a JSON value under a schema: what structgen's grammar writes.

``canonical_json(value, schema)`` serialises a valid instance with compact separators,
``ensure_ascii=False`` strings, and object members in schema order (declared properties
first, in the order of ``properties`` then ``required``; other members after them, in the
value's own order). It is the form the compiled grammar accepts for every valid instance,
which the completeness tests rely on.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["canonical_json", "json_equal"]


def canonical_json(value: Any, schema: Any, *, root: Any = None) -> str:
    """Serialise ``value`` the way the grammar compiled from ``schema`` writes it."""
    return _Canon(schema if root is None else root).dump(value, schema)


class _Canon:
    def __init__(self, root: Any) -> None:
        import jsonschema

        self.root = root
        cls = jsonschema.validators.validator_for(root) if isinstance(root, dict) else jsonschema.Draft202012Validator
        self.validator = cls(root)

    def resolve(self, schema: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 100:
            node = self.root
            for raw in schema["$ref"][1:].split("/")[1:]:
                part = raw.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
            schema, seen = node, seen + 1
        return schema

    def dump(self, value: Any, schema: Any) -> str:
        schema = self.resolve(schema)
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
                    return json.dumps(lit, ensure_ascii=False, separators=(",", ":"))
        if isinstance(value, dict):
            props = schema.get("properties", {})
            order = list(dict.fromkeys([*props, *schema.get("required", [])]))
            keys = [k for k in order if k in value] + [k for k in value if k not in order]
            extra = schema.get("additionalProperties", True)
            parts = []
            for k in keys:
                sub = props.get(k, extra)
                parts.append(json.dumps(k, ensure_ascii=False) + ":" + self.dump(value[k], sub))
            return "{" + ",".join(parts) + "}"
        if isinstance(value, list):
            prefix = schema.get("prefixItems", [])
            items = schema.get("items", True)
            if isinstance(items, list):
                prefix, items = items, schema.get("additionalItems", True)
            return "[" + ",".join(
                self.dump(v, prefix[i] if i < len(prefix) else items) for i, v in enumerate(value)) + "]"
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_equal(a: Any, b: Any) -> bool:
    """JSON Schema equality: 1 == 1.0, but true != 1; objects by members, arrays in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) in (int, float) and type(b) in (int, float) and a == b or a == b
