"""JSON Schema → :class:`~structgen.grammar.Grammar`, one module per keyword family.

This module composes the converter from the family mixins (literals, numbers, strings, arrays,
objects, combinators; shared core in ``base``) and keeps the dispatch by keyword, the keyword
rewrites, ``$ref``/``$id`` resolution and :func:`schema_to_grammar`.

The grammar generates *canonical* JSON: compact separators (or bounded whitespace in
``"flexible"`` mode), object properties in schema order, strings with the escapes
``json.dumps(..., ensure_ascii=False)`` writes. Every string it generates validates; a
valid instance serialised that way is accepted. Where the two cannot both hold, the
keyword is unsupported: strict mode (the default) raises ``UnsupportedSchemaError`` with
the keyword's JSON pointer, lenient mode records a warning. Nothing is dropped silently.

Departures kept on purpose (sound, documented in the README):
* integers are written without fraction or exponent (``1``, never ``1.0``);
* ``\\u`` escapes of surrogates are never generated (astral characters are written raw);
* additional property names are written without escapes.
"""
from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema

from ..errors import LimitError, SchemaError, UnsupportedSchemaError
from ..grammar import NOTHING, Expr, Grammar, Lit, Ref, Repeat, alt, seq
from ..guards import deep_recursion as _deep_recursion
from .arrays import MAX_UNIQUE_VALUES, ArraysMixin
from .base import (
    _MISSING,
    _NUMBER,
    _STRING_CHAR,
    ALL_TYPES,
    ANNOTATION_KEYWORDS,
    SUPPORTED_KEYWORDS,
    VALIDATION_KEYWORDS,
    ConverterBase,
    _child,
    _ptr,
    _Rules,
)
from .combinators import CombinatorsMixin, _negate
from .literals import LiteralsMixin
from .metaschema import fast_check
from .numbers import NumbersMixin
from .objects import ObjectsMixin
from .pointer import unescape
from .strings import StringsMixin
from .text import check_schema_depth

__all__ = ["schema_to_grammar", "SUPPORTED_KEYWORDS", "ANNOTATION_KEYWORDS"]
class _Converter(LiteralsMixin, NumbersMixin, StringsMixin, ArraysMixin, ObjectsMixin, CombinatorsMixin,
                 ConverterBase):
    """The whole converter: the keyword families (mixins) composed over the shared core, plus
    the dispatch (``node``), the keyword rewrites, and references and resources."""

    def any_value(self) -> Expr:
        self.free_names = True
        if "json_value" not in self.rules:
            ws = self.ws
            self.rules["json_value"] = NOTHING  # placeholder for recursion
            string = seq(Lit('"'), Repeat(_STRING_CHAR, 0, None), Lit('"'))
            self.rules["JSON_STRING"] = string
            self.rules["JSON_NUMBER"] = _NUMBER
            member = seq(Ref("JSON_STRING"), ws, Lit(":"), ws, Ref("json_value"))
            obj = alt(
                seq(Lit("{"), ws, Lit("}")),
                seq(Lit("{"), ws, member, Repeat(seq(ws, Lit(","), ws, member), 0, None), ws, Lit("}")),
            )
            arr = alt(
                seq(Lit("["), ws, Lit("]")),
                seq(Lit("["), ws, Ref("json_value"), Repeat(seq(ws, Lit(","), ws, Ref("json_value")), 0, None), ws, Lit("]")),
            )
            self.rules["json_value"] = alt(obj, arr, Ref("JSON_STRING"), Ref("JSON_NUMBER"), Lit("true"), Lit("false"), Lit("null"))
        return Ref("json_value")

    # -- entry --------------------------------------------------------------------

    def convert(self) -> Grammar:
        self.root = _normalise(self.root)
        self._check_metaschema()
        body = self.node(self.root, "")
        if body == NOTHING and self.empty_reasons:
            raise self.empty_reasons[0]
        rules = _Rules(start=seq(self.ws, body, self.ws))
        rules.owner = self
        rules.update(self.rules)
        self.rules = rules
        return Grammar(self.rules, "start", tuple(self.warnings) + tuple(dict.fromkeys(self.notes)),
                       free_names=self.free_names)

    def _check_metaschema(self, node: Any = None, ptr: str = "") -> None:
        """Validate ``node`` (default: the root) against the root's metaschema.

        ``$ref`` targets are checked again on their own: a location the metaschema does not
        look into (``$defs`` under draft-07, where it is no keyword) is still a schema once
        referenced, and unchecked it could reach the converter as ``{"enum": null}``.
        """
        node = self.root if node is None else node
        if not isinstance(node, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(node).__name__}", pointer=ptr)
        if isinstance(node, bool):
            return
        cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
        if fast_check(node, cls.META_SCHEMA):
            return
        err = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(node))
        if err is not None:
            path = list(err.absolute_path)
            keyword = next((p for p in reversed(path) if isinstance(p, str)), None)
            raise SchemaError(f"invalid schema: {err.message}", pointer=_ptr(ptr, *path), keyword=keyword)

    # -- nodes --------------------------------------------------------------------

    def node(self, schema: Any, ptr: str) -> Expr:
        outer, self.where = self.where, ptr
        try:
            return self._node(schema, ptr)
        except LimitError as exc:
            if exc.pointer is None:  # raised by a stage that does not know where: the innermost node
                raise exc.at(ptr) from None
            raise
        finally:
            self.where = outer

    def _node(self, schema: Any, ptr: str) -> Expr:
        if schema is True:
            return self.any_value()
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer=ptr)
        if ("enum" in schema or "const" in schema) and "$ref" not in schema:
            # a finite set of literals: jsonschema decides every other keyword on each value,
            # exactly, whatever the keyword (not, oneOf, multipleOf, uniqueItems...)
            return self.literals(schema, ptr)
        if "$dynamicRef" in schema:
            return self.node(self.dynamic_ref(schema, ptr), ptr)
        if "unevaluatedProperties" in schema or "unevaluatedItems" in schema:
            return self.node(self.unevaluated(schema, ptr), ptr)
        unknown = [kw for kw in schema if kw not in SUPPORTED_KEYWORDS and kw not in VALIDATION_KEYWORDS]
        for kw in schema:
            if kw in VALIDATION_KEYWORDS and kw not in SUPPORTED_KEYWORDS:
                self.unsupported(kw, _ptr(ptr, kw))
        if unknown:
            # not JSON Schema keywords (x-kubernetes-*, example, ...): validators ignore them,
            # and so does the grammar, on the record
            self.notes.extend(f"{_ptr(ptr, kw) or '#'}: unknown keyword {kw!r} treated as an annotation" for kw in unknown)
            schema = {k: v for k, v in schema.items() if k not in unknown}
        validation = {k for k in schema if k not in ANNOTATION_KEYWORDS}
        rewritten = self.rewrite(schema, ptr)
        if rewritten is not None:
            return self.node(rewritten, ptr)
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            parts = [self.rebased(p, _ptr(ptr, "allOf", i)) for i, p in enumerate(schema["allOf"])]
            return self.combined(self.rebased(rest, ptr), parts, ptr, "allOf")
        if "$ref" in schema:
            siblings = {k: schema[k] for k in validation - {"$ref"}}
            if siblings and not self.legacy_ref:
                return self.combined(self.rebased(siblings, ptr), [self.rebased({"$ref": schema["$ref"]}, ptr)], ptr, "$ref")
            # draft-07 and older: keywords beside $ref are ignored by the specification itself
            return self.ref(schema["$ref"], _ptr(ptr, "$ref"))
        if "anyOf" in schema:
            if validation - {"anyOf"}:
                rest = {k: v for k, v in schema.items() if k != "anyOf"}
                return self.combined(self.rebased(rest, ptr), [self.rebased({"anyOf": schema["anyOf"]}, ptr)], ptr, "anyOf")
            return alt(*(self.node(s, _ptr(ptr, "anyOf", i)) for i, s in enumerate(schema["anyOf"])))
        if "enum" in schema or "const" in schema:
            return self.literals(schema, ptr)
        types = schema.get("type", list(ALL_TYPES))
        types = [types] if isinstance(types, str) else list(types)
        if "number" in types and "integer" in types:
            types.remove("integer")
        options = []
        for t in types:
            if t == "null":
                options.append(Lit("null"))
            elif t == "boolean":
                options.append(alt(Lit("true"), Lit("false")))
            elif t == "integer":
                options.append(self.integer(schema, ptr))
            elif t == "number":
                options.append(self.number(schema, ptr))
            elif t == "string":
                options.append(self.string(schema, ptr))
            elif t == "array":
                options.append(self.array(schema, ptr))
            elif t == "object":
                options.append(self.object(schema, ptr))
        return alt(*options)

    def rewrite(self, schema: dict, ptr: str) -> Any:
        """Keywords expressible with the others: oneOf (disjoint branches), not (decidable
        cases), dependencies, uniqueItems (trivial cases). Returns None when nothing applies."""
        rest = dict(schema)
        parts: list[Any] = []
        if "oneOf" in rest:
            branches = rest.pop("oneOf")
            overlap = self.oneof_overlap(branches, ptr, rest)
            exact = self.oneof_exact(branches, ptr) if overlap is not None else None
            if exact is None and overlap is not None:
                exact = self.oneof_by_type(branches, ptr)
            if exact is not None:
                parts.append(exact)
            else:
                if overlap is not None:
                    self.unsupported("oneOf", _ptr(ptr, "oneOf"), f"branches {overlap[0]} and {overlap[1]} may both "
                                     "match (exact only when branches are provably disjoint or negatable); treated as anyOf")
                parts.append({"anyOf": branches})  # disjoint: exactly one matches iff at least one does
        if "not" in rest:
            inner = self.resolve_shallow(rest.pop("not"), ptr)
            if isinstance(inner, dict) and ("unevaluatedProperties" in inner or "unevaluatedItems" in inner):
                # its annotations are collected inside the not and then dropped: its plain form
                inner = self.unevaluated(inner, _ptr(ptr, "not"))
            negated = self.negation(inner, ptr)
            if negated is None:
                self.unsupported("not", _ptr(ptr, "not"), "only not-type, not-const/enum of scalars in typed "
                                 "schemas, not-required and boolean schemas are decidable here")
            else:
                parts.append(negated)
        if "if" in rest:
            cond = self.resolve_shallow(rest.pop("if"), ptr)
            then_, else_ = rest.pop("then", True), rest.pop("else", True)
            if then_ is not True or else_ is not True:  # without them "if" asserts nothing
                negated = _negate(cond)
                if negated is None:
                    self.unsupported("if", _ptr(ptr, "if"), "the condition's negation is not decidable here")
                else:
                    parts.append({"anyOf": [{"allOf": [cond, then_]}, {"allOf": [negated, else_]}]})
        else:
            rest.pop("then", None), rest.pop("else", None)  # no effect without "if"
        dep_parts = dependency_alternatives(rest)
        if len(dep_parts) > 6:
            self.unsupported("dependentRequired", ptr, "more than 6 dependencies (the grammar doubles with each)")
        parts.extend(dep_parts)
        if "uniqueItems" in rest:
            unique = rest.pop("uniqueItems")
            if unique is True and not (isinstance(rest.get("maxItems"), int) and rest["maxItems"] <= 1):
                if self.finite_items(rest, ptr) is not None:
                    rest["uniqueItems"] = True  # array() enforces it over the finite item values
                elif (arrays := self.finite_arrays({**rest, "uniqueItems": True}, ptr)) is not None:
                    # a tuple of finitely many values: the valid arrays, listed
                    others = [t for t in ALL_TYPES if t not in ("array", "integer")]
                    parts.append({"anyOf": [{"type": others}, {"enum": arrays}]} if arrays else {"type": others})
                else:
                    self.unsupported("uniqueItems", _ptr(ptr, "uniqueItems"),
                                     "uniqueItems: true is exact only for items with finitely many values "
                                     f"(at most {MAX_UNIQUE_VALUES}: enum, const, boolean, null) and no prefixItems")
        if not parts and rest == schema:
            return None
        # keep the schema's own allOf: {**rest, "allOf": parts} replaced it (a false accept:
        # allOf [minimum 10] beside oneOf [maximum 20] accepted 0..9)
        return {**rest, "allOf": [*rest.get("allOf", []), *parts]} if parts else rest

    def dynamic_ref(self, schema: dict, ptr: str) -> dict:
        """``$dynamicRef`` as the ``$ref`` it statically is, where that is exact: the fragment
        is a pointer, or names a plain ``$anchor``, or the only ``$dynamicAnchor`` of that
        name in the whole document (the dynamic scope can then only find that one)."""
        ref = schema["$dynamicRef"]
        at = _ptr(ptr, "$dynamicRef")
        target_ptr = self.to_pointer(ref, at)
        frag = urldefrag(ref)[1]
        target = self.resolve_pointer(target_ptr, at)
        if frag and not frag.startswith("/") and isinstance(target, dict) and target.get("$dynamicAnchor") == frag:
            holders = self._dynamic_anchors.get(frag, [])
            if len(holders) > 1:
                self.unsupported("$dynamicRef", at, f"{len(holders)} schemas declare $dynamicAnchor {frag!r}: which "
                                 "one applies depends on the dynamic scope of each evaluation")
        rest = {k: v for k, v in schema.items() if k != "$dynamicRef"}
        # written against the root's base URI: a bare "#/..." would be read in the resource at ptr
        return {**rest, "allOf": [*rest.get("allOf", []), {"$ref": f"{self._root_base}#{target_ptr}"}]}

    def _single_resource(self) -> bool:
        """Whether the document has no embedded resource (then a subschema found anywhere in
        it can be checked by jsonschema against the root's base URI)."""
        if not hasattr(self, "_resources"):
            self._index_resources()
        return len(self._resources) <= 1

    def resolve_shallow(self, sub: Any, ptr: str) -> Any:
        seen = 0
        # draft-07 and older ignore every keyword beside $ref: the schema is its target
        while isinstance(sub, dict) and (set(sub) - ANNOTATION_KEYWORDS == {"$ref"} or (
                self.legacy_ref and isinstance(sub.get("$ref"), str))) and seen < 32:
            try:
                target = self.to_pointer(sub["$ref"], ptr)
            except UnsupportedSchemaError:
                break
            sub, seen = self.resolve_pointer(target, ptr), seen + 1
        return sub

    # -- references: $id bases, $anchor, JSON pointers ------------------------------

    def rebased(self, schema: Any, at: str) -> Any:
        """:meth:`absolutised` when the document declares ``$id``s below its root (only then can
        copying a schema elsewhere change what its references mean)."""
        if not hasattr(self, "_resources"):
            self._index_resources()
        if len(self._resources) <= 1:
            return schema
        return self.absolutised(schema, at)

    def absolutised(self, schema: Any, at: str) -> Any:
        """``schema`` (found at pointer ``at``) with every ``$ref`` in it rewritten as a pointer
        into the whole document, so that it means the same wherever combining copies it (a
        ``$ref`` inside an embedded resource is relative to that resource's ``$id``)."""
        if not isinstance(schema, dict):
            return schema
        out = dict(schema)
        if isinstance(out.get("$dynamicRef"), str):
            # an absolute URI with the same fragment: an anchor name must stay one
            ref, base = out["$dynamicRef"], self._base_at(at)
            out["$dynamicRef"] = base + ref if ref.startswith("#") else urljoin(base, ref)
        if isinstance(out.get("$ref"), str):
            try:
                # against the root's base: a bare "#/..." is read in the resource where it is used
                out["$ref"] = f"{self._root_base}#" + self.to_pointer(out["$ref"], at)
            except (UnsupportedSchemaError, SchemaError):
                pass  # left as written: using it reports the error where it is used
        for key, value in schema.items():
            if key in _SCHEMA_MAPS or key == "dependencies":
                if isinstance(value, dict):
                    out[key] = {n: self.absolutised(v, _ptr(at, key, n)) for n, v in value.items()}
            elif key in _SCHEMA_VALUES and isinstance(value, dict):
                out[key] = self.absolutised(value, _ptr(at, key))
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.absolutised(v, _ptr(at, key, i)) for i, v in enumerate(value)]
        return out

    def _index_resources(self) -> None:
        """Every embedded resource ($id) and anchor of the document, by absolute URI.

        Only schema positions are visited (not enum/const data); in draft-07 and older a
        ``$ref`` hides its siblings, ``$id`` included."""
        self._resources: dict[str, str] = {}
        self._anchors: dict[tuple[str, str], str] = {}
        self._dynamic_anchors: dict[str, list[str]] = {}
        self._root_base = self._own_base(self.root, _DEFAULT_BASE) if isinstance(self.root, dict) else _DEFAULT_BASE
        self._resources[self._root_base] = ""

        def walk(node: Any, ptr: str, base: str) -> None:
            if not isinstance(node, dict):
                return
            base = self._own_base(node, base)
            if ptr:
                self._resources.setdefault(base, ptr) if self._declares_id(node) else None
            ident = node.get("$id") if "$id" in node else node.get("id")
            if isinstance(ident, str) and self._declares_id(node, fragments=True):
                frag = urldefrag(urljoin(base, ident))[1]
                if frag and not frag.startswith("/"):  # draft-07 plain-name fragment "$id": "#foo"
                    self._anchors.setdefault((base, frag), ptr)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self._anchors.setdefault((base, node[key]), ptr)
            if isinstance(node.get("$dynamicAnchor"), str):
                self._dynamic_anchors.setdefault(node["$dynamicAnchor"], []).append(ptr)
            for key, value in node.items():
                if key in _SCHEMA_MAPS or key == "dependencies":
                    if isinstance(value, dict):
                        for name, sub in value.items():
                            walk(sub, _ptr(ptr, key, name), base)
                elif key in _SCHEMA_VALUES and isinstance(value, dict):
                    walk(value, _ptr(ptr, key), base)
                elif key in _SCHEMA_LISTS and isinstance(value, list):
                    for i, sub in enumerate(value):
                        walk(sub, _ptr(ptr, key, i), base)

        walk(self.root, "", self._root_base)

    def _declares_id(self, node: dict, fragments: bool = False) -> bool:
        ident = node.get("$id") if "$id" in node else node.get("id")
        if not isinstance(ident, str) or (self.legacy_ref and "$ref" in node):
            return False
        return fragments or not ident.startswith("#")

    def _own_base(self, node: dict, base: str) -> str:
        if not self._declares_id(node):
            return base
        ident = node["$id"] if "$id" in node else node["id"]
        return urldefrag(urljoin(base, ident))[0] if ":" in ident.split("/")[0] or not base.startswith(("urn:", "tag:")) \
            else base  # a relative $id under a scheme urljoin cannot resolve: keep the base

    def _base_at(self, ptr: str) -> str:
        """The base URI in force at a pointer (the $id of every schema on the way down)."""
        node, base = self.root, self._root_base
        for raw in (ptr[1:].split("/") if ptr else []):
            node = _child(node, raw)
            if node is _MISSING:
                break  # a position made by combining schemas: the last real base holds
            if isinstance(node, dict):
                base = self._own_base(node, base)
        return base

    def to_pointer(self, ref: str, ptr: str) -> str:
        """The JSON pointer (in this document) a ``$ref`` written at ``ptr`` leads to."""
        if not isinstance(ref, str):
            raise SchemaError(f"$ref must be a string, not {type(ref).__name__}", pointer=ptr, keyword="$ref")
        if not hasattr(self, "_resources"):
            self._index_resources()
        base = self._base_at(ptr)
        # urljoin leaves a fragment alone under schemes it does not know (urn:, tag:)
        uri, frag = (base, ref[1:]) if ref.startswith("#") else urldefrag(urljoin(base, ref))
        resource = self._resources.get(uri)
        if resource is None:
            raise UnsupportedSchemaError(
                f"only references into this document are supported, not {ref!r} (it resolves to {uri!r}, which no "
                f"$id here declares; nothing is fetched)", pointer=ptr, keyword="$ref")
        if not frag:
            return resource
        if frag.startswith("/"):
            return resource + frag
        anchor = self._anchors.get((uri, frag))
        if anchor is None:
            raise SchemaError(f"unresolvable $ref {ref!r}: no anchor {frag!r} in {uri!r}", pointer=ptr, keyword="$ref")
        return anchor

    def ref(self, ref: str, ptr: str) -> Expr:
        target_ptr = self.to_pointer(ref, ptr)
        if target_ptr in self._resolving:
            cycle = self._resolving[self._resolving.index(target_ptr):] + [target_ptr]
            raise SchemaError(
                "$ref cycle with no base case: " + " -> ".join("#" + c for c in cycle), pointer=ptr, keyword="$ref")
        if target_ptr not in self.ref_rules:
            target = self.resolve_pointer(target_ptr, ptr)
            self._check_metaschema(target, target_ptr)
            base = re.sub(r"[^a-z0-9_]", "_", (target_ptr.rsplit("/", 1)[-1] or "root").lower()) or "def"
            name = f"def_{base}"
            k = 2
            while name in self.rules or name in self.ref_rules.values():
                name, k = f"def_{base}_{k}", k + 1
            self.ref_rules[target_ptr] = name
            self.rules[name] = NOTHING  # placeholder until the body is built (recursion)
            # a $ref that only leads to another $ref makes no progress: track the chain
            self._resolving.append(target_ptr)
            try:
                if isinstance(target, dict) and "$ref" in target:
                    body = self.node(target, target_ptr)
                else:
                    saved, self._resolving = self._resolving, []
                    try:
                        body = self.node(target, target_ptr)
                    finally:
                        self._resolving = saved
            finally:
                self._resolving.pop()
            self.rules[name] = body
        return Ref(self.ref_rules[target_ptr])

    def resolve_pointer(self, pointer: str, ptr: str) -> Any:
        node = self.root
        if pointer in ("", "/"):
            return node
        if not pointer.startswith("/"):
            raise UnsupportedSchemaError(f"anchors ({'#' + pointer!r}) are not supported yet", pointer=ptr, keyword="$ref")
        for raw in pointer[1:].split("/"):
            part = unquote(unescape(raw))
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"unresolvable $ref '#{pointer}': no {part!r}", pointer=ptr, keyword="$ref")
        return node


_SCALARS = {"null": type(None), "boolean": bool, "string": str}
_DEFAULT_BASE = "https://structgen.invalid/root.json"  # base URI of a document without $id


TYPE_ALIASES = {
    # written by the Berkeley Function Calling Leaderboard and other tool definitions
    "dict": "object", "float": "number", "tuple": "array", "any": None,
    "String": "string", "Boolean": "boolean", "Array": "array", "ArrayList": "array",
    "HashMap": "object", "long": "integer", "double": "number", "": None,
}
_COUNT_KEYWORDS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties",
                   "minContains", "maxContains")
def dependency_alternatives(schema: dict) -> list[dict]:
    """Pop ``dependentRequired``, ``dependentSchemas`` and draft-07 ``dependencies`` from
    ``schema``; return them as ``anyOf`` parts for its ``allOf``: per trigger name, "absent"
    or "present (required) with what it brings". The canonical serialiser uses the same
    rewrite, so both agree on where a required trigger name stands."""
    deps = dict(schema.pop("dependentRequired", {}))
    dep_schemas = dict(schema.pop("dependentSchemas", {}))
    for name, dep in schema.pop("dependencies", {}).items():  # draft-07: both forms in one keyword
        (deps if isinstance(dep, list) else dep_schemas)[name] = dep
    parts = [{"anyOf": [{"properties": {name: False}}, {"required": [name, *req]}]} for name, req in deps.items()]
    parts += [{"anyOf": [{"properties": {name: False}}, {"allOf": [{"required": [name]}, sub]}]}
              for name, sub in dep_schemas.items()]
    return parts


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_VALUES = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains",
                  "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _normalise(schema: Any) -> Any:
    """Copy of a schema with type aliases resolved and integral floats in count keywords.

    ``{"type": "dict"}`` → ``{"type": "object"}`` (see TYPE_ALIASES; ``"any"`` drops the type),
    ``{"maxItems": 2.0}`` → ``2``. Only schema positions are visited, never ``enum``/``const``
    values or property names.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    t = out.get("type")
    if isinstance(t, str) and t in TYPE_ALIASES:
        if TYPE_ALIASES[t] is None:
            del out["type"]
        else:
            out["type"] = TYPE_ALIASES[t]
    elif isinstance(t, list) and any(isinstance(x, str) and x in TYPE_ALIASES for x in t):
        mapped = [TYPE_ALIASES.get(x, x) if isinstance(x, str) else x for x in t]
        if None in mapped:
            del out["type"]
        else:
            out["type"] = list(dict.fromkeys(mapped))
    for kw in _COUNT_KEYWORDS:
        v = out.get(kw)
        if isinstance(v, float) and v.is_integer():
            out[kw] = int(v)
    for kw in _SCHEMA_MAPS:
        if isinstance(out.get(kw), dict):
            out[kw] = {k: _normalise(v) for k, v in out[kw].items()}
    for kw in _SCHEMA_VALUES:
        if isinstance(out.get(kw), dict):
            out[kw] = _normalise(out[kw])
    for kw in _SCHEMA_LISTS:
        if isinstance(out.get(kw), list):
            out[kw] = [_normalise(v) for v in out[kw]]
    return out


def schema_to_grammar(
    schema: Any,
    *,
    strict: bool = True,
    whitespace: Literal["compact", "flexible"] = "compact",
    max_whitespace: int = 8,
    refuse_empty_subschemas: bool = False,
) -> Grammar:
    """Translate a JSON Schema into a grammar of its canonical JSON instances.

    Raises:
        SchemaError: the schema is invalid (pointer to the fault) or unsatisfiable as a whole (a
            subschema no value satisfies just drops out, unless ``refuse_empty_subschemas``).
        UnsupportedSchemaError: strict mode and a keyword structgen cannot enforce.
        LimitError: a construct past one of the limits in ``docs/limits.md`` (located).
    """
    if whitespace not in ("compact", "flexible"):
        raise ValueError(f"whitespace must be 'compact' or 'flexible', not {whitespace!r}")
    if max_whitespace < 0:
        raise ValueError("max_whitespace must be >= 0")
    check_schema_depth(schema)
    # deeply nested schemas recurse in jsonschema and here; the limit is raised once for all
    # threads compiling at the same time (see structgen.guards.deep_recursion)
    with _deep_recursion():
        try:
            converter = _Converter(schema, strict=strict, whitespace=whitespace, max_whitespace=max_whitespace)
            converter.refuse_empty = refuse_empty_subschemas
            return converter.convert()
        except RecursionError:
            raise SchemaError("the schema nests too deeply to compile", pointer="") from None
