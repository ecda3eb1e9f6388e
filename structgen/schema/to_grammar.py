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

import functools
import re
from typing import Any, Literal

import jsonschema

from ..errors import LimitError, SchemaError, UnsupportedSchemaError
from ..grammar import NOTHING, Expr, Grammar, Lit, Ref, Repeat, alt, seq
from ..guards import deep_recursion as _deep_recursion
from .arrays import MAX_UNIQUE_VALUES, ArraysMixin
from .base import (
    _NUMBER,
    _STRING_CHAR,
    ALL_TYPES,
    ANNOTATION_KEYWORDS,
    SUPPORTED_KEYWORDS,
    VALIDATION_KEYWORDS,
    ConverterBase,
    _ptr,
)
from .combinators import CombinatorsMixin, _negate
from .document import SCHEMA_LISTS as _SCHEMA_LISTS
from .document import dialect_of, foreign_keywords
from .document import SCHEMA_MAPS as _SCHEMA_MAPS
from .document import SCHEMA_VALUES as _SCHEMA_VALUES
from .literals import LiteralsMixin
from .merge import MergeConflict
from .metaschema import fast_check
from .numbers import NumbersMixin
from .objects import ObjectsMixin
from .strings import StringsMixin
from .text import check_schema_depth

__all__ = ["schema_to_grammar", "convert_schema", "prepare_default_check", "SUPPORTED_KEYWORDS", "ANNOTATION_KEYWORDS"]

_PINNED = "x-structgen-pinned:"  # a reference pinned to a dynamic scope (see _Converter.pinned)

MAX_DYNAMIC_SCOPES = 256
"""References built again because a ``$dynamicRef`` under them means another schema in
another dynamic scope (each is one more copy of the referenced schema's rules)."""


@functools.lru_cache(maxsize=16)
def _any_value_rules(ws: Expr) -> tuple[Expr, Expr]:
    """The ``JSON_STRING`` and ``json_value`` rules of any JSON value between ``ws`` runs:
    immutable, so built once per whitespace (most schemas have an object with free members,
    and building them was a few percent of a median schema's conversion)."""
    string = seq(Lit('"'), Repeat(_STRING_CHAR, 0, None), Lit('"'))
    member = seq(Ref("JSON_STRING"), ws, Lit(":"), ws, Ref("json_value"))
    obj = alt(
        seq(Lit("{"), ws, Lit("}")),
        seq(Lit("{"), ws, member, Repeat(seq(ws, Lit(","), ws, member), 0, None), ws, Lit("}")),
    )
    arr = alt(
        seq(Lit("["), ws, Lit("]")),
        seq(Lit("["), ws, Ref("json_value"), Repeat(seq(ws, Lit(","), ws, Ref("json_value")), 0, None), ws, Lit("]")),
    )
    return string, alt(obj, arr, Ref("JSON_STRING"), Ref("JSON_NUMBER"), Lit("true"), Lit("false"), Lit("null"))


class _Converter(LiteralsMixin, NumbersMixin, StringsMixin, ArraysMixin, ObjectsMixin, CombinatorsMixin,
                 ConverterBase):
    """The whole converter: the keyword families (mixins) composed over the shared core, plus
    the dispatch (``node``), the keyword rewrites, and references and resources."""

    def any_value(self) -> Expr:
        self.free_names = True
        if "json_value" not in self.rules:
            self.rules["json_value"] = NOTHING  # placeholder for recursion
            string, value = _any_value_rules(self.ws)
            self.rules["JSON_STRING"] = string
            self.rules["JSON_NUMBER"] = _NUMBER
            self.rules["json_value"] = value
        return Ref("json_value")

    # -- entry --------------------------------------------------------------------

    def convert(self) -> Grammar:
        # keywords of other drafts: validators of the schema's own draft ignore them, and so
        # does the grammar (on the record), before anything reads them
        dropped: list[tuple[str, str]] = []
        foreign = foreign_keywords(self.root)
        root = _normalise(self.root, foreign, dropped)
        if dropped:  # (rare: the walk again, its pointers followed)
            dropped.clear()
            _normalise(self.root, foreign, dropped, _ROOT_PATH)
            draft = dialect_of(self.root)[1]
            origin = "its $schema" if isinstance(self.root, dict) and "$schema" in self.root else \
                "no $schema; pass draft= for another"
            self.notes.extend(f"{p}: {kw!r} is not a keyword of {draft} ({origin}); treated as an annotation, "
                              "as validators of that draft do" for p, kw in dropped)
        self.root = root
        self._check_metaschema()
        cycle = self.doc.in_place_cycle() if self.doc.refs else None
        if cycle is not None:  # before jsonschema meets it (checking literals, names)
            raise SchemaError("a reference cycle: the schema applies itself to the same value again through this "
                              "reference, without end (validators recurse forever)", pointer=cycle,
                              keyword=cycle.rsplit("/", 1)[-1])
        self.scope = self.enter((), "")
        body = self.node(self.root, "")
        if body == NOTHING and self.empty_reasons:
            raise self.empty_reasons[0]
        # the grammar gets a plain dict, and the converter's rules let go of the converter:
        # that cycle kept every expression of a grammar alive after its last use, until a
        # collection of the oldest generation traversed them all
        rules = {"start": seq(self.ws, body, self.ws), **self.rules}
        self.rules.owner = None
        self.rules = rules
        self.origins["start"] = ""
        return Grammar(self.rules, "start", tuple(self.warnings) + tuple(dict.fromkeys(self.notes)),
                       free_names=self.free_names, names_can_trap=self.names_can_trap, origins=self.origins,
                       constructs=self.constructs)

    def _check_metaschema(self, node: Any = None, ptr: str = "") -> None:
        """Validate ``node`` (default: the root) against the root's metaschema.

        ``$ref`` targets are checked again on their own: a location the metaschema does not
        look into (``$defs`` under draft-07, where it is no keyword) is still a schema once
        referenced, and unchecked it could reach the converter as ``{"enum": null}``. A
        target the root's check covered (a value of ``definitions``, or ``$defs`` from
        2019-09, see :func:`_checked_maps`) is not checked again.
        """
        node = self.root if node is None else node
        if not isinstance(node, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(node).__name__}", pointer=ptr)
        if isinstance(node, bool):
            return
        cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
        if ptr.count("/") == 2 and ptr.rpartition("/")[0] in _checked_maps(cls):
            return  # a definition: checked with the root (a third of converting a Kubernetes schema's checks)
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
        scope = self.scope
        if isinstance(schema, dict) and ptr in self.doc.resource_uris and self.doc.declares_id(schema):
            self.scope = self.enter(scope, ptr)  # an embedded resource, entered by descending into it
        try:
            e = self._node(schema, ptr)
            self.constructs.setdefault(ptr, e)
            return e
        except LimitError as exc:
            if exc.pointer is None:  # raised by a stage that does not know where: the innermost node
                raise exc.at(ptr) from None
            raise
        finally:
            self.where, self.scope = outer, scope

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
        if not SUPPORTED_KEYWORDS.issuperset(schema):  # (one test where every keyword is known)
            unknown = [kw for kw in schema if kw not in SUPPORTED_KEYWORDS and kw not in VALIDATION_KEYWORDS]
            for kw in schema:
                if kw in VALIDATION_KEYWORDS and kw not in SUPPORTED_KEYWORDS:
                    self.unsupported(kw, _ptr(ptr, kw))
            if unknown:
                # not JSON Schema keywords (x-kubernetes-*, example, ...): validators ignore
                # them, and so does the grammar, on the record
                self.notes.extend(f"{_ptr(ptr, kw) or '#'}: unknown keyword {kw!r} treated as an annotation"
                                  for kw in unknown)
                schema = {k: v for k, v in schema.items() if k not in unknown}
        rewritten = self.rewrite(schema, ptr)
        if rewritten is not None:
            return self.node(rewritten, ptr)
        if "allOf" in schema:
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            parts = [self.rebased(p, _ptr(ptr, "allOf", i)) for i, p in enumerate(schema["allOf"])]
            return self.combined(self.rebased(rest, ptr), parts, ptr, "allOf")
        if "$ref" in schema:
            validation = {k for k in schema if k not in ANNOTATION_KEYWORDS}
            siblings = {k: schema[k] for k in validation - {"$ref"}}
            if siblings and not self.legacy_ref:
                return self.combined(self.rebased(siblings, ptr), [self.rebased({"$ref": schema["$ref"]}, ptr)], ptr, "$ref")
            # draft-07 and older: keywords beside $ref are ignored by the specification itself
            return self.ref(schema["$ref"], _ptr(ptr, "$ref"))
        if "anyOf" in schema:
            if any(k not in ANNOTATION_KEYWORDS and k != "anyOf" for k in schema):
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
        if _REWRITTEN.isdisjoint(schema):  # (most subschemas: no copy, no compare)
            return None
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
            if isinstance(cond, dict) and not set(cond) - ANNOTATION_KEYWORDS - {"$anchor", "$dynamicAnchor"}:
                cond = True  # asserts nothing (an embedded resource of $defs only, say): always holds
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
        """``$dynamicRef`` as the ``$ref`` it means in the current dynamic scope.

        It starts from the schema its URI names; when that is a ``$dynamicAnchor`` of the
        fragment's name, the anchor of that name in the outermost resource of the dynamic
        scope replaces it (:meth:`enter` keeps that anchor per name). Otherwise it is a plain
        ``$ref``. The reference is written absolute, to the resource holding the anchor, so
        that :meth:`ref` enters that resource as validators do."""
        ref = schema["$dynamicRef"]
        at = _ptr(ptr, "$dynamicRef")
        resource, target = self.doc.locate(ref, at)
        dynamic = self.doc.dynamic_target(ref, at)
        if dynamic is not None:
            target = self.dynamic_resolution(dynamic[0], target, at)
            resource = self.doc.resource_at(target)
        uri = self.doc.resource_uris[resource]
        rest = {k: v for k, v in schema.items() if k != "$dynamicRef"}
        ref = f"{uri}#{target[len(resource):]}"
        if not set(rest) - ANNOTATION_KEYWORDS:
            # alone: a reference, built once per scope (combined, it would be copied in, and a
            # recursive one without end)
            return {**rest, "$ref": ref}
        return {**rest, "allOf": [*rest.get("allOf", []), {"$ref": ref}]}

    def enter(self, scope: tuple[tuple[str, str], ...], resource: str) -> tuple[tuple[str, str], ...]:
        """The dynamic scope after entering ``resource`` (a pointer): each dynamic anchor name
        it declares that no resource entered before declares is bound to its anchor there
        (the outermost declaration wins). Only names declared by several resources are kept:
        the others resolve the same in every scope, and leaving them out keeps one rule per
        reference wherever the scope cannot matter."""
        names = self.doc.resource_dynamic.get(resource)
        if not names or (resource == "" and not self.doc.root_declares_id):
            # jsonschema does not count a root without $id in the dynamic scope (see
            # dynamic_resolution, which refuses where that decides)
            return scope
        bound = dict(scope)
        for name, anchor in names.items():
            if name not in bound and self.doc.is_dynamic(name):
                bound[name] = anchor
        return scope if len(bound) == len(scope) else tuple(sorted(bound.items()))

    def dynamic_resolution(self, name: str, target: str, at: str, keyword: str = "$dynamicRef") -> str:
        """The anchor a dynamic reference to ``name`` (statically ``target``) means in the
        current scope: the outermost resource's, else the target itself."""
        found = dict(self.scope).get(name, target)
        root_anchor = self.doc.resource_dynamic.get("", {}).get(name)
        if root_anchor is not None and not self.doc.root_declares_id and root_anchor != found \
                and self.doc.is_dynamic(name):
            self.unsupported(keyword, at, f"the root declares $dynamicAnchor {name!r} but no $id: whether the root "
                             "is part of the dynamic scope differs between the specification and jsonschema")
        return found

    def scope_after(self, resource: str, target: str) -> tuple[tuple[str, str], ...]:
        """The dynamic scope once a reference into ``resource`` has led to ``target``."""
        scope = self.scope
        for entered in self.doc.entered(resource, target):
            scope = self.enter(scope, entered)
        return scope

    def _single_resource(self) -> bool:
        """Whether the document has no embedded resource (then a subschema found anywhere in
        it can be checked by jsonschema against the root's base URI)."""
        return self.doc.single_resource

    def resolve_shallow(self, sub: Any, ptr: str) -> Any:
        # draft-07 and older ignore every keyword beside $ref: the schema is its target
        return self.doc.follow(sub, ptr, to_pointer=self.to_pointer)[0]

    # -- references: $id bases, $anchor, JSON pointers ------------------------------

    def rebased(self, schema: Any, at: str) -> Any:
        return self.doc.rebased(schema, at)

    def absolutised(self, schema: Any, at: str) -> Any:
        return self.doc.absolutised(schema, at)

    def _base_at(self, ptr: str) -> str:
        return self.doc.base_at(ptr)

    def to_pointer(self, ref: str, ptr: str) -> str:
        """The JSON pointer (in this document) a ``$ref`` written at ``ptr`` leads to."""
        if isinstance(ref, str) and ref.startswith(_PINNED):
            return self._pins[int(ref[len(_PINNED):])][2]
        return self.doc.to_pointer(ref, ptr)

    def inlined(self, ref: str, at: str) -> Any:
        """The target of a reference written at ``at``, to be copied into a combined schema."""
        try:
            scope, resource, target = self.located(ref, at)
            schema = self.resolve_pointer(target, at)
        except UnsupportedSchemaError as exc:
            raise MergeConflict("$ref", str(exc)) from exc
        if not self.doc.dynamic_names:
            return self.absolutised(schema, target)
        outer, self.scope = self.scope, scope
        try:
            entered = self.scope_after(resource, target)
        finally:
            self.scope = outer
        return self.pinned(schema, target, entered, self.doc.base_at(target.rpartition("/")[0]))

    def located(self, ref: str, at: str) -> tuple[tuple[tuple[str, str], ...], str, str]:
        """``(scope, resource, target)`` of a reference: a pinned one's own scope, else the
        current scope, with the resource and schema it leads to (see ``SchemaDocument.locate``)."""
        if isinstance(ref, str) and ref.startswith(_PINNED):
            return self._pins[int(ref[len(_PINNED):])]
        resource, target = self.doc.locate(ref, at)
        if self.doc.dynamic_names:
            self.check_static_ref(ref, target, at)
        return self.scope, resource, target

    def check_static_ref(self, ref: str, target: str, at: str) -> None:
        """Refuse a ``$ref`` to a ``$dynamicAnchor`` that the dynamic scope would move: the
        specification makes a ``$ref`` static, jsonschema resolves it like ``$dynamicRef``."""
        dynamic = self.doc.dynamic_target(ref, at)
        if dynamic is not None and self.dynamic_resolution(dynamic[0], target, at, "$ref") != target:
            self.unsupported("$ref", at, f"a $ref to $dynamicAnchor {dynamic[0]!r} where another resource of the "
                             "dynamic scope declares it too (validators disagree on which applies)")

    def pin(self, scope: tuple[tuple[str, str], ...], resource: str, target: str) -> str:
        """A reference that means ``target`` (in ``resource``) entered from ``scope``, wherever
        it is copied: an internal URI that :meth:`located` reads back."""
        key = (scope, resource, target)
        if key not in self._pin_index:
            self._pin_index[key] = len(self._pins)
            self._pins.append(key)
        return f"{_PINNED}{self._pin_index[key]}"

    def pinned(self, schema: Any, at: str, scope: tuple[tuple[str, str], ...], base: str) -> Any:
        """``schema`` (at pointer ``at``, inside base URI ``base``, evaluated in ``scope``) with
        every reference in it pinned to the dynamic scope where it applies: copied into a
        combined schema, it is no longer reached through the resources it would enter.
        ``$dynamicRef`` is resolved here, in its scope; ``$defs`` (not evaluated in place)
        are left as they are."""
        if not isinstance(schema, dict):
            return schema
        base = self.doc.own_base(schema, base)
        if self.doc.declares_id(schema) and base in self.doc.resources:
            scope = self.enter(scope, self.doc.resources[base])
        out = dict(schema)
        for key, value in schema.items():
            if key in _SCHEMA_MAPS or key == "dependencies":
                if isinstance(value, dict) and key not in ("$defs", "definitions"):
                    out[key] = {n: self.pinned(v, _ptr(at, key, n), scope, base) for n, v in value.items()}
            elif key in _SCHEMA_VALUES and isinstance(value, dict):
                out[key] = self.pinned(value, _ptr(at, key), scope, base)
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.pinned(v, _ptr(at, key, i), scope, base) for i, v in enumerate(value)]
        outer, self.scope = self.scope, scope
        try:
            if isinstance(schema.get("$ref"), str) and not schema["$ref"].startswith(_PINNED):
                ref = schema["$ref"]
                try:
                    resource, target = self.doc.locate_from(ref, base, _ptr(at, "$ref"))
                except SchemaError:
                    pass  # left as written: using it reports the error where it is used
                else:
                    self.check_static_ref(ref, target, _ptr(at, "$ref"))
                    out["$ref"] = self.pin(scope, resource, target)
            if isinstance(schema.get("$dynamicRef"), str):
                ref, where = schema["$dynamicRef"], _ptr(at, "$dynamicRef")
                resource, target = self.doc.locate_from(ref, base, where)
                dynamic = self.doc.dynamic_target_from(ref, base, where)
                if dynamic is not None:
                    target = self.dynamic_resolution(dynamic[0], target, where)
                    resource = self.doc.resource_at(target)
                del out["$dynamicRef"]
                if "$ref" in out:
                    out["allOf"] = [*out.get("allOf", []), {"$ref": self.pin(scope, resource, target)}]
                else:  # alone, it stays a reference, built once (see dynamic_ref)
                    out["$ref"] = self.pin(scope, resource, target)
        finally:
            self.scope = outer
        return out

    def ref(self, ref: str, ptr: str) -> Expr:
        scope0, resource, target_ptr = self.located(ref, ptr)
        outer, self.scope = self.scope, scope0
        try:
            return self._ref(resource, target_ptr, ptr)
        finally:
            self.scope = outer

    def _ref(self, resource: str, target_ptr: str, ptr: str) -> Expr:
        if target_ptr in self._resolving:
            cycle = self._resolving[self._resolving.index(target_ptr):] + [target_ptr]
            raise SchemaError(
                "$ref cycle with no base case: " + " -> ".join("#" + c for c in cycle), pointer=ptr, keyword="$ref")
        scope = self.scope_after(resource, target_ptr)
        key = (target_ptr, scope)
        if key not in self.ref_rules:
            if scope and any(k[0] == target_ptr for k in self.ref_rules):
                self._specialised += 1
                if self._specialised > MAX_DYNAMIC_SCOPES:
                    raise LimitError(f"the schema's $dynamicRefs need more than {MAX_DYNAMIC_SCOPES} references built "
                                     "again for another dynamic scope", limit_name="MAX_DYNAMIC_SCOPES",
                                     limit=MAX_DYNAMIC_SCOPES, reached=self._specialised, pointer=ptr)
            target = self.resolve_pointer(target_ptr, ptr)
            self._check_metaschema(target, target_ptr)
            base = re.sub(r"[^a-z0-9_]", "_", (target_ptr.rsplit("/", 1)[-1] or "root").lower()) or "def"
            name = f"def_{base}"
            k = 2
            while name in self.rules or name in self.ref_rules.values():
                name, k = f"def_{base}_{k}", k + 1
            self.ref_rules[key] = name
            self.origins[name] = target_ptr
            self.rules[name] = NOTHING  # placeholder until the body is built (recursion)
            # a $ref that only leads to another $ref makes no progress: track the chain
            self._resolving.append(target_ptr)
            outer_scope, self.scope = self.scope, scope
            try:
                if isinstance(target, dict) and ("$ref" in target or "$dynamicRef" in target) and (
                        self.legacy_ref or not set(target) - ANNOTATION_KEYWORDS - {"$ref", "$dynamicRef"}):
                    body = self.node(target, target_ptr)
                else:
                    saved, self._resolving = self._resolving, []
                    try:
                        body = self.node(target, target_ptr)
                    finally:
                        self._resolving = saved
            finally:
                self._resolving.pop()
                self.scope = outer_scope
            self.rules[name] = body
        return Ref(self.ref_rules[key])

    def resolve_pointer(self, pointer: str, ptr: str) -> Any:
        return self.doc.resolve_pointer(pointer, ptr)

def _checked_maps(cls: type) -> tuple[str, ...]:
    """The pointers (``/definitions``, ``/$defs``) whose every value a dialect's metaschema
    checks as a schema when it checks the root: a reference to one of them was checked with
    the document. ``definitions`` where the metaschema itself lists it (draft-04 up, kept
    since 2019-09), ``$defs`` in 2019-09 and 2020-12 (their core vocabulary)."""
    props = cls.META_SCHEMA.get("properties", {}) if isinstance(cls.META_SCHEMA, dict) else {}
    maps = ("/definitions",) if isinstance(props.get("definitions"), dict) \
        and "additionalProperties" in props["definitions"] else ()
    if cls in (jsonschema.Draft201909Validator, jsonschema.Draft202012Validator):
        maps += ("/$defs",)
    return maps


_SCALARS = {"null": type(None), "boolean": bool, "string": str}


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




_REWRITTEN = frozenset({"oneOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                        "dependencies", "uniqueItems"})
"""The keywords :meth:`_Converter.rewrite` reads: a schema without them is left as it is."""

_COUNT, _MAP, _VALUE, _LIST = 1, 2, 4, 8
_NORMALISED: dict[str, int] = {kw: _COUNT for kw in _COUNT_KEYWORDS}
for _kw in _SCHEMA_MAPS:
    _NORMALISED[_kw] = _MAP
for _kw in _SCHEMA_VALUES:
    _NORMALISED[_kw] = _VALUE
for _kw in _SCHEMA_LISTS:
    _NORMALISED[_kw] = _NORMALISED.get(_kw, 0) | _LIST  # ("items": a schema or a list of them)
"""What :func:`_normalise` does with a keyword's value: integral counts, schemas below."""


_ROOT_PATH = ("#",)  # (_normalise's path to the root: followed, and true, unlike None)


def _normalise(schema: Any, foreign: frozenset[str] = frozenset(), dropped: list[tuple[str, str]] | None = None,
               at: tuple | None = None) -> Any:
    """Copy of a schema with type aliases resolved, integral floats in count keywords, and the
    keywords in ``foreign`` (of other drafts than the document's) left out.

    ``{"type": "dict"}`` → ``{"type": "object"}`` (see TYPE_ALIASES; ``"any"`` drops the type),
    ``{"maxItems": 2.0}`` → ``2``. Only schema positions are visited, never ``enum``/``const``
    values or property names. Each keyword left out is appended to ``dropped`` with its pointer
    (``at``: the path to ``schema``, as nested ``(parent, key)`` pairs below ``_ROOT_PATH``,
    spelled out only then; None: not followed, every pointer ``""``; the converter walks
    again with it only when something was left out).
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if not foreign.isdisjoint(schema):
        for kw in [k for k in schema if k in foreign]:
            del out[kw]
            if dropped is not None:
                keys = [kw]
                node = at
                while node is not _ROOT_PATH and node is not None:
                    node, key = node
                    keys.append(key)
                dropped.append((_ptr("", *reversed(keys)), kw))
        schema = out  # (the loop below reads the copy: a schema keyword left out is not put back)
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
    # one pass over the schema's own keywords (looking up every keyword of each family was
    # about a tenth of a median schema's conversion in a profile)
    for kw, v in schema.items():
        kind = _NORMALISED.get(kw)
        if kind is None:
            continue
        if kind == _COUNT:
            if isinstance(v, float) and v.is_integer():
                out[kw] = int(v)
        elif isinstance(v, dict):
            if kind == _MAP:
                out[kw] = {k: _normalise(x, foreign, dropped, at and ((at, kw), k)) for k, x in v.items()}
            elif kind & _VALUE:
                out[kw] = _normalise(v, foreign, dropped, at and (at, kw))
        elif isinstance(v, list) and kind & _LIST:
            out[kw] = [_normalise(x, foreign, dropped, at and ((at, kw), i)) for i, x in enumerate(v)]
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
    check_schema_depth(schema)
    return convert_schema(schema, strict=strict, whitespace=whitespace, max_whitespace=max_whitespace,
                          refuse_empty_subschemas=refuse_empty_subschemas)


def prepare_default_check() -> None:
    """Compile the default dialect's metaschema check (2020-12) now, once per process: it reads
    the metaschema documents and turns them into closures (about 5 ms), which the first schema
    compiled would otherwise pay. Other dialects are compiled on first use."""
    fast_check({}, jsonschema.Draft202012Validator.META_SCHEMA)


def convert_schema(schema: Any, *, strict: bool, whitespace: Literal["compact", "flexible"], max_whitespace: int,
                   refuse_empty_subschemas: bool = False) -> Grammar:
    """:func:`schema_to_grammar` for a caller that has checked the schema's depth already
    (the compiler does, before it makes its cache key)."""
    if whitespace not in ("compact", "flexible"):
        raise ValueError(f"whitespace must be 'compact' or 'flexible', not {whitespace!r}")
    if max_whitespace < 0:
        raise ValueError("max_whitespace must be >= 0")
    # deeply nested schemas recurse in jsonschema and here; the limit is raised once for all
    # threads compiling at the same time (see structgen.guards.deep_recursion)
    with _deep_recursion():
        try:
            converter = _Converter(schema, strict=strict, whitespace=whitespace, max_whitespace=max_whitespace)
            converter.refuse_empty = refuse_empty_subschemas
            return converter.convert()
        except RecursionError:
            raise SchemaError("the schema nests too deeply to compile", pointer="") from None
