"""Berkeley Function Calling Leaderboard (BFCL) definitions → JSON Schema.

BFCL writes parameter schemas in a dialect of JSON Schema: Python type names (``dict``,
``float``, ``tuple``, ``any``) and, in its Java and JavaScript categories, those languages'
type names. :data:`BFCL_TYPES` maps every spelling seen in BFCL v4 (and the obvious
relatives) to JSON Schema:

| BFCL ``type`` | JSON Schema |
|---|---|
| ``dict``, ``HashMap``, ``Map``, ``object`` | ``object`` (a ``dict`` *with* ``properties`` also gets ``additionalProperties: false`` unless it says otherwise: BFCL's checker rejects unknown keys) |
| ``float``, ``double``, ``number`` | ``number`` |
| ``integer``, ``int``, ``long``, ``short``, ``byte`` | ``integer`` |
| ``string``, ``String``, ``str``, ``char`` | ``string`` |
| ``boolean``, ``Boolean``, ``bool`` | ``boolean`` |
| ``array``, ``Array``, ``ArrayList``, ``List``, ``list``, ``tuple`` | ``array`` |
| ``any``, ``Any``, ``""`` (empty) | no ``type``: any JSON value |
| ``null``, ``None`` | ``null`` |

An ``enum`` of scalars on an ``array`` (BFCL's way to list the allowed items) moves to
``items``. BFCL's non-standard ``"optional"`` keyword (``true``, ``"True"``, or a list of names on the
object) is dropped: a parameter is optional exactly when it is not in ``required``, as in
JSON Schema. Every mapping and drop is recorded as a note on the tool.
"""
from __future__ import annotations

from typing import Any

from ..errors import ToolSchemaError
from ..schema.pointer import child

__all__ = ["BFCL_TYPES", "bfcl_to_json_schema"]

BFCL_TYPES: dict[str, str | None] = {
    "dict": "object", "HashMap": "object", "Map": "object", "object": "object",
    "float": "number", "double": "number", "number": "number", "Float": "number", "Double": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer", "byte": "integer",
    "Integer": "integer", "Long": "integer",
    "string": "string", "String": "string", "str": "string", "char": "string",
    "boolean": "boolean", "Boolean": "boolean", "bool": "boolean",
    "array": "array", "Array": "array", "ArrayList": "array", "List": "array", "list": "array", "tuple": "array",
    "any": None, "Any": None, "": None,
    "null": "null", "None": "null",
}
"""BFCL type names → JSON Schema types (``None``: no type constraint)."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedItems", "unevaluatedProperties")


def bfcl_to_json_schema(schema: Any, *, tool: str, pointer: str = "") -> tuple[Any, list[str]]:
    """Translate one BFCL parameter schema; returns ``(json_schema, notes)``.

    Raises:
        ToolSchemaError: an unknown ``type`` name (with the tool and the pointer).
    """
    notes: list[str] = []
    return _convert(schema, tool, pointer, notes), notes


def _convert(s: Any, tool: str, ptr: str, notes: list[str]) -> Any:
    if not isinstance(s, dict):
        return s
    out: dict[str, Any] = {}
    for key, value in s.items():
        if key == "optional":
            notes.append(f"{child(ptr, 'optional') or '#'}: dropped BFCL's non-standard 'optional' keyword "
                         f"({value!r}); optional = not in 'required'")
            continue
        if key == "type":
            out["type"] = _map_type(value, tool, child(ptr, "type"), notes)
            if out["type"] is None:
                del out["type"]
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _convert(v, tool, child(ptr, key, k), notes) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_convert(v, tool, child(ptr, key, i), notes) for i, v in enumerate(value)]
        elif key == "items":
            out[key] = ([_convert(v, tool, child(ptr, key, i), notes) for i, v in enumerate(value)]
                        if isinstance(value, list) else _convert(value, tool, child(ptr, key), notes))
        elif key in _SCHEMA_ONE:
            out[key] = _convert(value, tool, child(ptr, key), notes)
        else:
            out[key] = value
    if s.get("type") == "dict" and isinstance(s.get("properties"), dict) and s["properties"] \
            and "additionalProperties" not in s:
        out["additionalProperties"] = False
    enum = out.get("enum")
    if out.get("type") == "array" and isinstance(enum, list) and enum and not any(isinstance(v, list) for v in enum):
        # BFCL puts the allowed *item* values of a list parameter on the array itself
        items = dict(out["items"]) if isinstance(out.get("items"), dict) else {}
        items["enum"] = out.pop("enum")
        out["items"] = items
        notes.append(f"{child(ptr, 'enum')}: enum of scalars on an array moved to its items")
    return out


def _map_type(t: Any, tool: str, ptr: str, notes: list[str]) -> Any:
    if isinstance(t, list):
        mapped = [_map_type(x, tool, child(ptr, i), notes) for i, x in enumerate(t)]
        return None if None in mapped else list(dict.fromkeys(mapped))
    if not isinstance(t, str) or t not in BFCL_TYPES:
        raise ToolSchemaError(f"unknown BFCL type {t!r}; known: {sorted(k for k in BFCL_TYPES if k)} and ''",
                              tool=tool, pointer=ptr, keyword="type")
    target = BFCL_TYPES[t]
    if target != t:
        notes.append(f"{ptr}: BFCL type {t!r} -> {'any value' if target is None else repr(target)}")
    return target
