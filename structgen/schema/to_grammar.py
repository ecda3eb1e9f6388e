"""JSON Schema → :class:`~structgen.grammar.Grammar`, one function per keyword family.

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

import itertools
import json
import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema
from jsonschema.exceptions import ValidationError

from ..errors import AutomatonSizeError, LimitError, RegexError, SchemaError, StructgenError, UnsupportedSchemaError
from ..grammar import (
    EMPTY,
    NOTHING,
    Alt,
    CharSet,
    Dfa,
    Expr,
    Grammar,
    Lit,
    Ref,
    Regex,
    Repeat,
    Seq,
    alt,
    expr_size,
    opt,
    seq,
)
from ..guards import deep_recursion as _deep_recursion, warn
from ..regex.formats import FORMAT_PATTERNS
from ..regex.parser import ANY_CHAR, parse_regex, search_expr
from ..regex.regular import automaton_lengths, bound_length, difference, intersect, intersect_automaton, map_automaton
from .json_values import dumps_compact, json_equal
from .merge import MergeConflict, merge, merge_lenient
from .metaschema import fast_check
from .numeric import MAX_MODULUS, int_range_expr, multiples_expr, number_range_expr
from .pointer import child, unescape
from .text import check_schema_depth
from .unevaluated import expand_unevaluated

__all__ = ["schema_to_grammar", "SUPPORTED_KEYWORDS", "ANNOTATION_KEYWORDS"]

ANNOTATION_KEYWORDS = frozenset({
    "title", "description", "examples", "default", "$comment", "$schema", "$id", "id",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
    "contentEncoding", "contentMediaType", "contentSchema",  # annotations only since 2019-09
})
SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength",
    "pattern", "anyOf", "allOf", "oneOf", "not", "dependentRequired", "dependencies", "dependentSchemas",
    "uniqueItems", "patternProperties", "propertyNames", "if", "then", "else", "contains", "minContains", "maxContains",
    "$ref", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format",
    "minProperties", "maxProperties", "multipleOf", "$anchor", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$dynamicAnchor",
    "x-structgen-not-strings", "x-structgen-fraction", "x-structgen-not-patterns",  # written by the converter
}) | ANNOTATION_KEYWORDS

VALIDATION_KEYWORDS = frozenset({
    # every assertion or applicator keyword of drafts 3 to 2020-12: these are enforced or refused
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired", "dependencies", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "items", "prefixItems", "additionalItems",
    "contains", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "unevaluatedItems",
    "unevaluatedProperties", "$ref", "$dynamicRef", "$recursiveRef", "format", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$vocabulary", "disallow", "extends", "divisibleBy",
})
"""Keywords that can reject an instance; any other key is an annotation to validators."""

ALL_TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")

# keywords that constrain only one family of types (numbers: integers too)
_FAMILY_KEYWORDS = {
    "null": frozenset(),
    "boolean": frozenset(),
    "object": frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                         "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
                         "unevaluatedProperties"}),
    "array": frozenset({"items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
                        "minItems", "maxItems", "uniqueItems", "unevaluatedItems"}),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
}
_OTHER_FAMILY_KEYWORDS = {f: frozenset().union(*(k for g, k in _FAMILY_KEYWORDS.items() if g != f))
                          for f in _FAMILY_KEYWORDS}

# propertyNames: keywords that string_language enforces on a name...
_NAME_KEYWORDS = frozenset({"type", "pattern", "minLength", "maxLength", "format", "enum", "const", "$ref",
                            "allOf", "anyOf", "oneOf", "not"})
# ...and those that constrain other types only, so every name satisfies them
_NON_STRING_KEYWORDS = frozenset({
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "contains", "items", "prefixItems", "additionalItems",
    "unevaluatedItems", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "dependentSchemas",
    "unevaluatedProperties", "$anchor", "$dynamicAnchor"})

# One JSON string character (one code point), as json.dumps(ensure_ascii=False) writes it
# and as any JSON text may write it. Surrogate \u escapes are excluded so that one grammar
# unit is always one code point (lengths count code points).
_RAW_CHAR = ANY_CHAR.minus(CharSet.of([(0x22, 0x22), (0x5C, 0x5C), (0x00, 0x1F)]))
_HEX = CharSet.of([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])
_HEX_NO_D = CharSet.of([(0x30, 0x39), (0x41, 0x43), (0x45, 0x46), (0x61, 0x63), (0x65, 0x66)])
_U_ESCAPE = seq(
    Lit("\\u"),
    alt(seq(_HEX_NO_D, _HEX, _HEX, _HEX), seq(CharSet.of([(0x44, 0x44), (0x64, 0x64)]), CharSet.of([(0x30, 0x37)]), _HEX, _HEX)),
)
_STRING_CHAR = alt(_RAW_CHAR, seq(Lit("\\"), CharSet.of([(ord(c), ord(c)) for c in '"\\/bfnrt'])), _U_ESCAPE)
_SHORT_ESCAPES = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}

_INTEGER = Regex(r"-?(0|[1-9][0-9]*)")
_NUMBER = Regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WS_CHARS = CharSet.of([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


def _ptr(base: str, *parts: Any) -> str:
    return child(base, *parts)


@lru_cache(maxsize=4096)  # the same few classes (any string character, \\w, ...) recur in every schema
def _encode_json_charset(cs: CharSet) -> Expr:
    """Characters of a decoded string → their JSON-string encodings (raw or escaped), compactly:
    control characters without a short escape share one ``\\u00XX`` branch per high digit."""
    raw = cs.minus(CharSet.of([(0x22, 0x22), (0x5C, 0x5C), (0x00, 0x1F)]))
    options: list[Expr] = [raw] if raw.ranges else []
    by_high: dict[int, list[int]] = {}
    for a, b in cs.ranges:
        for cp in range(a, min(b, 0x5C) + 1):
            if cp in _SHORT_ESCAPES:
                options.append(Lit(_SHORT_ESCAPES[cp]))
            elif cp < 0x20:
                by_high.setdefault(cp >> 4, []).append(cp & 0xF)
    if by_high:
        hex_digit = lambda d: ord(f"{d:x}")  # noqa: E731 - json.dumps writes lowercase hex
        options.append(seq(Lit("\\u00"), alt(*(
            seq(Lit(str(hi)), CharSet.of([(hex_digit(d), hex_digit(d)) for d in lows]))
            for hi, lows in sorted(by_high.items())))))
    return alt(*options)


def _json_encode_expr(e: Expr) -> Expr:
    """Map a regex over decoded characters to one over the JSON-encoded text."""
    if isinstance(e, CharSet):
        return _encode_json_charset(e)
    if isinstance(e, Lit):
        return Lit(json.dumps(e.text, ensure_ascii=False)[1:-1])
    if isinstance(e, Seq):
        return seq(*(_json_encode_expr(x) for x in e.items))
    if isinstance(e, Alt):
        return alt(*(_json_encode_expr(x) for x in e.options))
    if isinstance(e, Repeat):
        return Repeat(_json_encode_expr(e.item), e.min, e.max)
    if isinstance(e, Dfa):
        return map_automaton(e, _encode_json_charset)
    raise TypeError(f"unexpected regex node {e!r}")


def _length_range(e: Expr) -> tuple[int, float]:
    """Minimum and maximum number of characters an expression matches."""
    if isinstance(e, Lit):
        return len(e.text), len(e.text)
    if isinstance(e, CharSet):
        return 1, 1
    if isinstance(e, Seq):
        lo, hi = 0, 0.0
        for x in e.items:
            a, b = _length_range(x)
            lo, hi = lo + a, hi + b
        return lo, hi
    if isinstance(e, Alt):
        rs = [_length_range(x) for x in e.options] or [(0, 0)]
        return min(r[0] for r in rs), max(r[1] for r in rs)
    if isinstance(e, Repeat):
        a, b = _length_range(e.item)
        return a * e.min, (float("inf") if e.max is None and b > 0 else b * (e.max or 0))
    if isinstance(e, Dfa):
        return automaton_lengths(e)
    raise TypeError(e)


def _not_in_set(words: list[str]) -> Expr:
    """Strings of raw JSON-string characters (no escapes) that are not in ``words``."""
    words = [w for w in words if all(cp in _RAW_CHAR for cp in map(ord, w))]
    if not words:
        return Repeat(_RAW_CHAR, 0, None)
    options: list[Expr] = []
    if "" not in words:
        options.append(EMPTY)
    firsts = sorted({w[0] for w in words if w})
    for c in firsts:
        options.append(seq(Lit(c), _not_in_set([w[1:] for w in words if w and w[0] == c])))
    other = _RAW_CHAR.minus(CharSet.of([(ord(c), ord(c)) for c in firsts]))
    options.append(seq(other, Repeat(_RAW_CHAR, 0, None)))
    return alt(*options)


MAX_GRAMMAR_RULES = 20_000
"""Rules one schema may generate (a schema of 200 properties needs about 400; the rules of an
object counted with ``minProperties``/``maxProperties`` grow with properties x counts)."""


MAX_TUPLE_ITEMS = 1_000
"""Positional item schemas (``prefixItems``, draft-07 ``items`` arrays) of one array."""


class _Rules(dict):
    """The converter's rules, refused past :data:`MAX_GRAMMAR_RULES` as they are added, with
    the pointer of the schema node being converted."""

    __slots__ = ("owner",)

    def __setitem__(self, name: str, value: Expr) -> None:
        if len(self) >= MAX_GRAMMAR_RULES and name not in self:
            raise LimitError(f"the schema generates more than {MAX_GRAMMAR_RULES} grammar rules",
                             limit_name="MAX_GRAMMAR_RULES", limit=MAX_GRAMMAR_RULES, reached=len(self) + 1,
                             pointer=self.owner.where)
        self.owner.origins.setdefault(name, self.owner.where)
        super().__setitem__(name, value)


class _Converter:
    def __init__(self, root: Any, *, strict: bool, whitespace: str, max_whitespace: int) -> None:
        self.root = root
        self.strict = strict
        self.ws: Expr = EMPTY if whitespace == "compact" else Repeat(_WS_CHARS, 0, max_whitespace)
        self.where = ""  # pointer of the schema node being converted (for limit errors)
        self.origins: dict[str, str] = {}  # rule name -> pointer of the node it was made for
        self.constructs: dict[str, Expr] = {}  # pointer -> expression of that node
        self.rules: dict[str, Expr] = _Rules()
        self.rules.owner = self
        self.ref_rules: dict[str, str] = {}
        self.warnings: list[str] = []
        self.notes: list[str] = []  # unknown keywords ignored as annotations
        self._resolving: list[str] = []
        self._validator = None
        self._objects = 0
        self._shared = 0
        self._merging = 0  # > 0 while building a schema combined from several (allOf, ...)
        # why subschemas turned out empty, first first: an empty branch just drops out of its
        # anyOf, and only a whole schema that is empty is refused, with the first reason
        self.empty_reasons: list[SchemaError] = []
        self.free_names = False  # some object takes names the grammar does not fix
        self.refuse_empty = False
        dialect = root.get("$schema", "") if isinstance(root, dict) else ""
        self.legacy_ref = any(d in str(dialect) for d in ("draft-07", "draft-06", "draft-04", "draft-03"))

    # -- helpers ------------------------------------------------------------------

    def empty(self, message: str, ptr: str, keyword: str) -> Expr:
        """A subschema that no value satisfies: NOTHING, with the reason kept for the error
        raised if the whole schema ends up empty (a branch of anyOf may be empty)."""
        # inside a merged schema (allOf, $ref with siblings) ptr may name no place in the
        # user's schema: the nearest one that exists
        reason = SchemaError(message, pointer=_existing_prefix(self.root, ptr), keyword=keyword)
        if self.refuse_empty and not (keyword in ("enum", "const") and self._merging):
            raise reason  # tool definitions: a contradiction anywhere is a definition error
        self.empty_reasons.append(reason)
        return NOTHING

    def unsupported(self, keyword: str, ptr: str, why: str = "") -> None:
        msg = f"keyword {keyword!r} is not supported{': ' + why if why else ''}"
        if self.strict:
            raise UnsupportedSchemaError(msg, pointer=ptr, keyword=keyword)
        text = f"{ptr or '#'}: {msg} (not enforced)"
        self.warnings.append(text)
        warn(text, stacklevel=4)

    def validator(self, subschema: Any):
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.root) if isinstance(self.root, dict) else jsonschema.Draft202012Validator
            # the internal keywords negations write (merged into schemas whose literals are
            # then checked by jsonschema) must be enforced there too
            cls = jsonschema.validators.extend(cls, {FRACTION: _check_fraction, NOT_STRINGS: _check_not_strings,
                                                     NOT_PATTERNS: _check_not_patterns})
            self._validator = cls(self.root)
        if isinstance(subschema, dict) and "$schema" in subschema:
            # a $schema would make jsonschema switch to its own class of that dialect, which
            # does not know the internal keywords above
            subschema = {k: v for k, v in subschema.items() if k != "$schema"}
        return self._validator.evolve(schema=subschema)

    def checker(self, subschema: Any, ptr: str):
        """``value -> bool`` by jsonschema; a pattern Python's ``re`` cannot compile (which
        jsonschema meets only now) raises ``RegexError`` located at ``ptr``'s pattern."""
        is_valid = self.validator(subschema).is_valid

        def check(value: Any) -> bool:
            try:
                return is_valid(value)
            except re.error as exc:
                pattern = exc.pattern if isinstance(exc.pattern, str) else str(subschema)
                at = _ptr(ptr, "pattern") if isinstance(subschema, dict) and subschema.get("pattern") == pattern else ptr
                raise RegexError(f"invalid regular expression: {exc.msg}", pattern=pattern, position=exc.pos or 0,
                                 pointer=at) from None

        return check

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
        self.origins["start"] = ""
        return Grammar(self.rules, "start", tuple(self.warnings) + tuple(dict.fromkeys(self.notes)),
                       free_names=self.free_names, origins=self.origins, constructs=self.constructs)

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
            e = self._node(schema, ptr)
            self.constructs.setdefault(ptr, e)
            return e
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
            negated = _negate(self.resolve_shallow(rest.pop("not"), ptr))
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

    def oneof_overlap(self, branches: list, ptr: str, context: dict | None = None) -> tuple[int, int] | None:
        """Two ``oneOf`` branches that may both match (not provably disjoint), or None.

        ``context``: the keywords beside ``oneOf``. Only instances satisfying them matter,
        so its ``required`` (and its ``type``, for a branch without one) may be added to
        every branch for the check: a discriminator property that the parent requires."""
        resolved = [self.resolve_shallow(b, ptr) for b in branches]
        if context and not (self.legacy_ref and "$ref" in context):
            req = context.get("required") if isinstance(context.get("required"), list) else []
            typ = context.get("type")
            resolved = [{**b, **({"required": sorted({*b.get("required", []), *req})} if req else {}),
                         **({"type": typ} if typ is not None and "type" not in b else {})}
                        if isinstance(b, dict) and isinstance(b.get("required", []), list) else b
                        for b in resolved]
        return next(((i, j) for i in range(len(resolved)) for j in range(i + 1, len(resolved))
                     if not self.disjoint(resolved[i], resolved[j], ptr)), None)

    def disjoint(self, x: Any, y: Any, ptr: str, depth: int = 0) -> bool:
        """True only when no instance can match both schemas (a sufficient check, exact in
        each step): :func:`_disjoint`, and, following ``$ref``s, a member of ``allOf`` (or
        the target of a ``$ref`` with siblings) disjoint from the other schema, literals of
        one side that the other refuses (by jsonschema), string patterns with an empty
        regular intersection, and objects told apart by a property one of them requires."""
        x, y = self.resolve_shallow(x, ptr), self.resolve_shallow(y, ptr)
        if _disjoint(x, y) if not (self.legacy_ref and _has_ref(x, y)) else False:
            return True
        if depth > 4 or not isinstance(x, dict) or not isinstance(y, dict):
            return False
        for a, b in ((x, y), (y, x)):
            # every instance of a matches each allOf member (and its $ref's target)
            members = list(a["allOf"]) if isinstance(a.get("allOf"), list) else []
            if isinstance(a.get("$ref"), str):
                members.append({"$ref": a["$ref"]})
            if any(self.disjoint(m, b, ptr, depth + 1) for m in members):
                return True
        if self.legacy_ref and _has_ref(x, y):
            return False  # draft-07: keywords beside $ref are ignored; only its target counts
        for a, b in ((x, y), (y, x)):
            values = [a["const"]] if "const" in a else a.get("enum")
            if isinstance(values, list) and len(values) <= 256 and self._single_resource():
                try:
                    accepts = self.checker(b, ptr)
                    if not any(accepts(v) for v in values):
                        return True
                except Exception:  # a schema jsonschema cannot evaluate: not proven
                    pass
        common = _types_of(x) & _types_of(y)
        if common <= {"string"} and isinstance(x.get("pattern"), str) and isinstance(y.get("pattern"), str):
            return self.patterns_disjoint({**x, "type": ["string"]}, {**y, "type": ["string"]}, ptr)
        if common == {"object"}:
            px, py = x.get("properties", {}), y.get("properties", {})
            if isinstance(px, dict) and isinstance(py, dict):
                # a name one side requires is present, so the other side's properties
                # schema for it applies too
                either = set(x.get("required", [])) | set(y.get("required", []))
                return any(name in px and name in py and self.disjoint(px[name], py[name], ptr, depth + 1)
                           for name in sorted(either))
        return False

    def _single_resource(self) -> bool:
        """Whether the document has no embedded resource (then a subschema found anywhere in
        it can be checked by jsonschema against the root's base URI)."""
        if not hasattr(self, "_resources"):
            self._index_resources()
        return len(self._resources) <= 1

    def oneof_exact(self, branches: list, ptr: str) -> Any:
        """``oneOf`` as ``anyOf`` of "branch i and no other branch", when every branch has a
        decidable negation (and there are few); else None."""
        negated = self.oneof_negations(branches, ptr)
        if negated is None:
            return None
        return {"anyOf": [{"allOf": [b, *(n for j, n in enumerate(negated) if j != i)]}
                          for i, b in enumerate(branches)]}

    def oneof_by_type(self, branches: list, ptr: str) -> Any:
        """``oneOf`` split by JSON type, or None: per type, the branches that admit it must be
        disjoint there, or all but one must be negatable and the one left unconstrained for
        that type (a branch of only object keywords matches every array: with an array
        branch beside it, exactly one matches the arrays the array branch refuses).
        """
        resolved = [self.resolve_shallow(b, ptr) for b in branches]
        if any(not isinstance(b, (dict, bool)) for b in resolved):
            return None
        parts: list[Any] = []
        for family, keywords in _FAMILY_KEYWORDS.items():
            family_types = {"number", "integer"} if family == "number" else {family}
            admit: list[int] = []
            vacuous: list[int] = []
            for i, b in enumerate(resolved):
                if b is False:
                    continue
                if b is True:
                    admit.append(i), vacuous.append(i)
                    continue
                types = _types_of(b)
                if not types & family_types:
                    continue
                admit.append(i)
                constraining = set(b) - ANNOTATION_KEYWORDS - {"type"} - _OTHER_FAMILY_KEYWORDS[family]
                if not constraining and (family != "number" or "number" in types):
                    vacuous.append(i)
            restrict = {"type": "number" if family == "number" else family}
            if not admit or len(vacuous) >= 2:  # none, or every value of the type matches two
                continue
            if len(admit) == 1:
                parts.append({"allOf": [branches[admit[0]], restrict]})
            elif vacuous:  # the values of the type that no constrained branch matches
                negs = [_negate(resolved[j]) for j in admit if j not in vacuous]
                if any(n is None for n in negs):
                    return None
                parts.append({"allOf": [restrict, *negs]})
            else:
                # for this type only: keywords of other types (required...) prove nothing here
                narrowed = [{**{k: v for k, v in resolved[j].items() if k not in _OTHER_FAMILY_KEYWORDS[family]},
                             "type": sorted(_types_of(resolved[j]) & family_types)} for j in admit]
                if any(not (_disjoint(x, y) or self.patterns_disjoint(x, y, ptr))
                       for k, x in enumerate(narrowed) for y in narrowed[k + 1:]):
                    return None
                parts.extend({"allOf": [branches[j], restrict]} for j in admit)
        return {"anyOf": parts} if parts else False

    def patterns_disjoint(self, x: dict, y: dict, ptr: str) -> bool:
        """Whether two string schemas' patterns match no common string (exact, by regular
        intersection; False when it cannot be decided cheaply)."""
        px, py = x.get("pattern"), y.get("pattern")
        if not (isinstance(px, str) and isinstance(py, str)) or {"string"} != set(x["type"]) or {"string"} != set(y["type"]):
            return False
        try:
            return intersect(self.pattern_expr(px, ptr), self.pattern_expr(py, ptr)) == NOTHING
        except StructgenError:
            return False

    def oneof_negations(self, branches: list, ptr: str) -> list | None:
        """``not branch`` for each branch when all are decidable (and there are few), else None."""
        if len(branches) > 4:
            return None
        negated = [_negate(self.resolve_shallow(b, ptr)) for b in branches]
        return None if any(n is None for n in negated) else negated

    def has_unevaluated(self, schema: Any, ptr: str) -> bool:
        """Whether an unevaluated* keyword applies to ``schema``'s instance in place: in it, or
        in its allOf/anyOf/oneOf/if/then/else/dependentSchemas members, following $refs."""
        seen: set[int] = set()

        def walk(s: Any, at: str) -> bool:
            if not isinstance(s, dict) or id(s) in seen:
                return False
            seen.add(id(s))
            if "unevaluatedProperties" in s or "unevaluatedItems" in s:
                return True
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(s.get(key), list) and any(walk(x, _ptr(at, key, i)) for i, x in enumerate(s[key])):
                    return True
            for key in ("if", "then", "else"):
                if walk(s.get(key), _ptr(at, key)):
                    return True
            if isinstance(s.get("dependentSchemas"), dict) and any(
                    walk(x, _ptr(at, "dependentSchemas", n)) for n, x in s["dependentSchemas"].items()):
                return True
            for key in ("$ref", "$dynamicRef"):
                if isinstance(s.get(key), str):
                    try:
                        target = self.to_pointer(s[key], _ptr(at, key))
                        if walk(self.resolve_pointer(target, at), target):
                            return True
                    except StructgenError:
                        pass  # reported where the reference is compiled
            return False

        return walk(schema, ptr)

    def unevaluated(self, schema: dict, ptr: str) -> Any:
        """``schema`` with its unevaluated* keywords turned into plain ones (see :mod:`.unevaluated`)."""
        def resolve_ref(ref: str, at: str) -> tuple[Any, str]:
            target = self.to_pointer(ref, at)
            return self.resolve_pointer(target, at), target

        def unsupported(keyword: str, at: str, why: str) -> None:
            self.unsupported(keyword, at, why)

        return expand_unevaluated(schema, ptr, resolve_ref=resolve_ref, oneof_overlap=self.oneof_overlap,
                                  negations=self.oneof_negations,
                                  unsupported=unsupported, rebase=self.rebased, legacy_items=self.legacy_ref)

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

    def combined(self, base: dict, parts: list, ptr: str, keyword: str) -> Expr:
        """The intersection of ``base`` and every schema of ``parts`` (allOf semantics)."""
        def resolve(ref: str) -> Any:
            try:
                target = self.to_pointer(ref, _ptr(ptr, keyword))
                return self.absolutised(self.resolve_pointer(target, _ptr(ptr, keyword)), target)
            except UnsupportedSchemaError as exc:
                raise MergeConflict("$ref", str(exc)) from exc

        # a part's unevaluated* keywords see only that part's annotations: made plain before
        # merging, which would otherwise let them see the other parts' properties
        parts = [self.unevaluated(p, _ptr(ptr, keyword)) if self.has_unevaluated(p, _ptr(ptr, keyword)) else p
                 for p in parts]
        if self.has_unevaluated(base, ptr):
            base = self.unevaluated(base, ptr)
        merged: Any = base
        # the parts may come from a rewrite (not, if/then/else, oneOf become allOf parts):
        # errors name the nearest location the user wrote
        here = _existing_prefix(self.root, _ptr(ptr, keyword))
        try:
            for part in parts:
                merged = merge(merged, part, resolve, ref_alone=self.legacy_ref)
        except LimitError as exc:
            raise exc.at(here) from None
        except MergeConflict as exc:
            self.unsupported(exc.keyword, here, exc.why)  # raises unless lenient
            merged = base
            for part in parts:  # lenient: the first schema's value wins each conflict (recorded)
                try:
                    merged, conflicts = merge_lenient(merged, part, resolve, ref_alone=self.legacy_ref)
                except MergeConflict as again:  # not combinable at all: this part is dropped
                    conflicts = [(again.keyword, again.why + "; that allOf member is not enforced")]
                for kw, why in conflicts:
                    self.unsupported(kw, here, why)
        self._merging += 1
        # the merged schema's keywords come from several places: anyOf's siblings and
        # branches keep their own locations (ptr/kw, ptr/anyOf/i); for allOf and $ref an
        # error is pointed at the nearest location that exists in the user's schema
        at = ptr if keyword == "anyOf" else _ptr(ptr, keyword)

        def relocated(exc: SchemaError) -> SchemaError:
            where = _existing_prefix(self.root, exc.pointer)
            if isinstance(base, dict) and exc.keyword in base and not where.endswith("/" + str(exc.keyword)):
                where = _ptr(ptr, exc.keyword)  # a sibling keyword copied into each branch
            if where == exc.pointer:
                return exc
            if isinstance(exc, LimitError):
                return exc.at(where)
            return type(exc)(exc.message, pointer=where, keyword=exc.keyword)

        reasons = len(self.empty_reasons)
        try:
            return self.node(merged, at)
        except SchemaError as exc:
            moved = relocated(exc)
            if moved is exc:
                raise
            raise moved from None
        finally:
            self._merging -= 1
            # the reasons found empty inside, located as errors are
            self.empty_reasons[reasons:] = [relocated(e) for e in self.empty_reasons[reasons:]]

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
            self.origins[name] = target_ptr
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

    def literals(self, schema: dict, ptr: str) -> Expr:
        if "const" in schema:
            values = [schema["const"]]
            if "enum" in schema:
                values = [v for v in values if any(json_equal(v, e) for e in schema["enum"])]
        else:
            values = list(schema["enum"])
            if not values:
                return self.empty("enum is empty: no value can be valid", _ptr(ptr, "enum"), "enum")
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        check = self.checker(rest, ptr)
        kept = [v for v in values if check(v)]
        if not kept:
            kw = "const" if "const" in schema else "enum"
            return self.empty(f"no {kw} value satisfies the other keywords of this schema", _ptr(ptr, kw), kw)
        return alt(*(Lit(dumps_compact(v)) for v in kept))

    def integer(self, schema: dict, ptr: str) -> Expr:
        if schema.get(FRACTION):
            return NOTHING  # an integer never has a fraction
        lo, hi = _int_bounds(schema, ptr)
        if lo is not None and hi is not None and lo > hi:
            return self.empty(f"no integer lies between the bounds ({lo} > {hi})", ptr, "minimum")
        k = self.modulus(schema, ptr)
        if k is not None:
            # integers written without fraction or exponent, so jsonschema checks them exactly
            try:
                return multiples_expr(k, lo, hi)
            except AutomatonSizeError as exc:
                self.unsupported("multipleOf", _ptr(ptr, "multipleOf"), str(exc))
        if lo is None and hi is None:
            return _INTEGER
        return int_range_expr(lo, hi)

    def modulus(self, schema: dict, ptr: str) -> int | None:
        """The integer ``multipleOf`` to enforce, or None (absent or refused).

        Only integers: jsonschema divides floats (``0.07 / 0.01`` is not integral there), so a
        decimal multipleOf has no exact grammar; refused in strict mode."""
        k = schema.get("multipleOf")
        if k is None:
            return None
        if isinstance(k, float) and k.is_integer():
            k = int(k)  # n / 2.0 is integral exactly when n is even, at any size
        if isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= MAX_MODULUS:
            self.unsupported("multipleOf", _ptr(ptr, "multipleOf"),
                             f"only integer divisors 1..{MAX_MODULUS} are enforced (jsonschema divides floats inexactly)")
            return None
        return k

    def number(self, schema: dict, ptr: str) -> Expr:
        if "multipleOf" in schema:
            if self.modulus(schema, ptr) is not None:
                # a multiple of an integer is an integer: write it as one (exact, see modulus)
                return self.integer(schema, ptr)
        lo, lo_strict, hi, hi_strict = _decimal_bounds(schema)
        if schema.get(FRACTION):  # from a negated integer type: numbers with a fraction only
            if lo is None and hi is None:
                return Regex(_FRACTION_TEXT)
            return intersect_automaton(number_range_expr(lo, lo_strict, hi, hi_strict), parse_regex(_FRACTION_TEXT),
                                       f"non-integral numbers of at most 15 digits in {lo}{'<' if lo_strict else '<='}"
                                       f"x{'<' if hi_strict else '<='}{hi}")
        if lo is None and hi is None:
            return _NUMBER
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_strict or hi_strict))):
            return self.empty(f"no number lies between the bounds ({lo}, {hi})", ptr, "minimum")
        # bounded numbers are written without exponent: exact digit-level comparison
        return number_range_expr(lo, lo_strict, hi, hi_strict)

    def string(self, schema: dict, ptr: str) -> Expr:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        if hi is not None and lo > hi:
            return self.empty(f"minLength {lo} > maxLength {hi}", _ptr(ptr, "minLength"), "minLength")
        pexpr: Expr | None = None
        if "format" in schema:
            fmt = schema["format"]
            if fmt not in FORMAT_PATTERNS:
                self.unsupported("format", _ptr(ptr, "format"), f"format {fmt!r} is not enforced")
            elif "pattern" in schema:
                # both hold: the regular intersection of the two languages (exact)
                try:
                    pexpr = intersect(parse_regex(FORMAT_PATTERNS[fmt]),
                                      self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern")))
                except AutomatonSizeError as exc:
                    self.unsupported("format", _ptr(ptr, "format"), f"format together with this pattern: {exc}")
            else:
                pexpr = parse_regex(FORMAT_PATTERNS[fmt])
        if pexpr is None and "pattern" in schema:
            pexpr = self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern"))
        if NOT_STRINGS in schema:  # from a negated const/enum: the other strings
            excluded = alt(*(Lit(w) for w in schema[NOT_STRINGS]))
            pexpr = difference(Repeat(ANY_CHAR, 0, None) if pexpr is None else pexpr, excluded)
        if NOT_PATTERNS in schema:  # from a negated pattern: strings none of them matches
            try:
                excluded = alt(*(self.pattern_expr(p, _ptr(ptr, "not", "pattern")) for p in schema[NOT_PATTERNS]))
                pexpr = difference(Repeat(ANY_CHAR, 0, None) if pexpr is None else pexpr, excluded)
            except AutomatonSizeError as exc:
                self.unsupported("not", _ptr(ptr, "not"), f"the complement of this pattern is too large: {exc}")
        if pexpr is not None:
            return self._string_pattern(pexpr, lo, hi, ptr)
        return seq(Lit('"'), Repeat(_STRING_CHAR, lo, hi), Lit('"'))

    def _string_pattern(self, pexpr: Expr, lo: int, hi: int | None, ptr: str) -> Expr:
        plo, phi = _length_range(pexpr)
        if lo > plo or (hi is not None and hi < phi):  # the lengths constrain the pattern further
            if _universal(pexpr):  # a pattern every string matches ("(x+)?" unanchored): counted
                return seq(Lit('"'), Repeat(_STRING_CHAR, lo, hi), Lit('"'))
            try:
                pexpr = bound_length(pexpr, lo, hi)
            except AutomatonSizeError as exc:
                kw = "minLength" if lo > plo else "maxLength"
                self.unsupported(kw, _ptr(ptr, kw), f"length bounds with this pattern: {exc}")
        return seq(Lit('"'), _json_encode_expr(pexpr), Lit('"'))

    def finite_items(self, schema: dict, ptr: str) -> list | None:
        """The distinct values an array's items can take, when few and the array has no prefix."""
        if "prefixItems" in schema or isinstance(schema.get("items"), list) or "contains" in schema:
            return None
        items = self.resolve_shallow(schema.get("items", True), ptr)
        if not isinstance(items, dict) or "$ref" in items:
            return None
        if "enum" in items or "const" in items:
            values = [items["const"]] if "const" in items else list(items["enum"])
            if "const" in items and "enum" in items:
                values = [v for v in values if any(json_equal(v, e) for e in items["enum"])]
        elif items.get("type") in ("boolean", "null") or (isinstance(items.get("type"), list) and set(items["type"]) <= {"boolean", "null"}):
            types = {items["type"]} if isinstance(items["type"], str) else set(items["type"])
            values = ([True, False] if "boolean" in types else []) + ([None] if "null" in types else [])
        else:
            return None
        check = self.validator({k: v for k, v in items.items() if k not in ("enum", "const")})
        distinct: list = []
        for v in values:
            if check.is_valid(v) and not any(json_equal(v, d) for d in distinct):
                distinct.append(v)
        return distinct if len(distinct) <= MAX_UNIQUE_VALUES else None

    def finite_arrays(self, schema: dict, ptr: str, limit: int = 256) -> list | None:
        """Every array ``schema`` accepts, when it only accepts a tuple prefix (no further
        items) of finitely many values per position and there are at most ``limit``; else None."""
        if self.legacy_ref:
            prefix, tail = schema.get("items"), schema.get("additionalItems", True)
            if not isinstance(prefix, list):
                return None
        else:
            prefix, tail = schema.get("prefixItems"), schema.get("items", True)
        if not isinstance(prefix, list) or "contains" in schema:
            return None
        hi = len(prefix) if tail is False else schema.get("maxItems")
        if not isinstance(hi, int) or hi > len(prefix):
            return None
        lo = schema.get("minItems", 0)
        choices = []
        for i in range(hi):
            values = self.finite_items({"items": prefix[i]}, _ptr(ptr, "prefixItems", i))
            if values is None:
                return None
            choices.append(values)
        total = sum(math.prod(len(c) for c in choices[:n]) for n in range(lo, hi + 1))
        if total > limit:
            return None
        check = self.validator(schema)
        return [list(arr) for n in range(lo, hi + 1) for arr in itertools.product(*choices[:n])
                if check.is_valid(list(arr))]

    def unique_array(self, schema: dict, ptr: str) -> Expr:
        """uniqueItems over finitely many item values: one rule per set of values used so far.

        ``k`` values need up to ``2**k`` rules (capped by maxItems), each offering the values
        not used yet: exact, and refused above MAX_UNIQUE_VALUES values."""
        values = self.finite_items(schema, ptr)
        lits = [Lit(dumps_compact(v)) for v in values]
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        hi = len(lits) if hi is None else min(hi, len(lits))
        if lo > hi:
            return NOTHING
        self._objects += 1
        base = f"uniq{self._objects}"
        sep = self.sep
        memo: dict[int, Expr] = {}

        def after(used: int, count: int) -> Expr:  # elements after `count` distinct ones
            if used not in memo:
                options: list[Expr] = [EMPTY] if count >= lo else []
                if count < hi:
                    options += [seq(sep, lit, after(used | 1 << i, count + 1)) for i, lit in enumerate(lits) if not used >> i & 1]
                self.rules[f"{base}_{used}"] = alt(*options)
                memo[used] = Ref(f"{base}_{used}")
            return memo[used]

        first = alt(*(seq(lit, after(1 << i, 1)) for i, lit in enumerate(lits))) if hi >= 1 else NOTHING
        return self.container("[", first, lo == 0, "]")

    def array(self, schema: dict, ptr: str) -> Expr:
        ws = self.ws
        if schema.get("uniqueItems") is True:
            return self.unique_array(schema, ptr)
        if "prefixItems" in schema and self.legacy_ref:
            self.unsupported("prefixItems", _ptr(ptr, "prefixItems"), "prefixItems is not a keyword of this draft")
        prefix = schema.get("prefixItems") if not self.legacy_ref else None
        items = schema.get("items", True)
        rest_ptr = _ptr(ptr, "items")
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items, rest_ptr = items, schema.get("additionalItems", True), _ptr(ptr, "additionalItems")
            prefix_ptr = _ptr(ptr, "items")
        else:
            prefix_ptr = _ptr(ptr, "prefixItems")
        prefix = prefix or []
        if len(prefix) > MAX_TUPLE_ITEMS:  # each position nests the expression one level deeper
            raise LimitError(f"{len(prefix)} positional item schemas", limit_name="MAX_TUPLE_ITEMS",
                             limit=MAX_TUPLE_ITEMS, reached=len(prefix), pointer=prefix_ptr)
        if "contains" in schema:
            return self.array_contains(schema, prefix, items, ptr)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        if hi is not None and lo > hi:
            return self.empty(f"minItems {lo} > maxItems {hi}", _ptr(ptr, "minItems"), "minItems")
        elems = [self.share(self.node(s, _ptr(prefix_ptr, i))) for i, s in enumerate(prefix)]
        rest = self.share(self.node(items, rest_ptr))
        if rest == NOTHING:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            return NOTHING
        sep = seq(ws, Lit(","), ws)

        def at(i: int) -> Expr:
            return elems[i] if i < len(elems) else rest

        def body(i: int) -> Expr:
            # the elements from position i on; element i carries its comma when i > 0
            if hi is not None and i >= hi:
                return EMPTY
            if i >= len(elems):  # only `rest` elements remain: one counted repeat, not i..hi
                # nested expressions (minItems/maxItems of 10**12 once recursed and looped that
                # often before the automaton's size limit could refuse them)
                if rest == NOTHING:
                    return EMPTY if i >= lo else NOTHING
                if i > 0:
                    return Repeat(seq(sep, rest), max(lo - i, 0), None if hi is None else hi - i)
                first = seq(rest, Repeat(seq(sep, rest), max(lo - 1, 0), None if hi is None else hi - 1))
                return first if lo > 0 else opt(first)
            item = at(i) if i == 0 else seq(sep, at(i))
            following = seq(item, body(i + 1))
            return following if i < lo else opt(following)

        body_expr = body(0)
        if body_expr == NOTHING:
            return NOTHING
        if body_expr == EMPTY:
            return self.container("[", NOTHING, True, "]")
        if isinstance(body_expr, Repeat) and (body_expr.min, body_expr.max) == (0, 1):
            return self.container("[", body_expr.item, True, "]")
        return self.container("[", body_expr, False, "]")

    def array_contains(self, schema: dict, prefix: list, items: Any, ptr: str) -> Expr:
        """``contains`` with ``minContains`` m and ``maxContains`` M.

        When ``contains`` has a decidable negation, every item is either C = items ∧ contains
        or N = items ∧ not contains (disjoint), and the language is exact and unambiguous:
        ``(N,)* C ((,N)* ,C){m-1..M-1} (,N)*``. Otherwise (no maxContains allowed then)
        ``I* C (I* C){m-1} I*``: ambiguous as a grammar but exact as a language.
        Refused with prefixItems, or with item counts the match count does not imply."""
        m, big_m = schema.get("minContains", 1), schema.get("maxContains")
        for kw in ("minItems", "maxItems"):
            if kw in schema and not (kw == "minItems" and schema[kw] <= m):  # m matches imply m items
                self.unsupported(kw, _ptr(ptr, kw), "together with contains")
        if prefix:
            self.unsupported("contains", _ptr(ptr, "contains"), "together with prefixItems")
        if big_m is not None and big_m < m:
            return NOTHING  # no array can match (other types still can)
        item = self.node(items, _ptr(ptr, "items"))
        if m == 0 and big_m is None:  # nothing to find
            return self.container("[", seq(item, Repeat(seq(self.sep, item), 0, None)), True, "]")
        contains = self.resolve_shallow(schema["contains"], _ptr(ptr, "contains"))
        negated = _negate(contains)
        sep = self.sep
        if negated is None:
            if big_m is not None:
                self.unsupported("maxContains", _ptr(ptr, "maxContains"), "the contains schema has no decidable "
                                 "negation (needed to count the items that do not match)")
            match = self.node(self.merged(items, schema["contains"], _ptr(ptr, "contains")), _ptr(ptr, "contains"))
            if match == NOTHING:
                return NOTHING
            before = Repeat(seq(item, sep), 0, None)
            more = Repeat(seq(sep, before, match), m - 1, m - 1) if m > 1 else EMPTY
            body = seq(before, match, more, Repeat(seq(sep, item), 0, None))
            return self.container("[", body, False, "]")
        match = self.share(self.node(self.merged(items, schema["contains"], _ptr(ptr, "contains")), _ptr(ptr, "contains")))
        other = self.share(self.node(self.merged(items, negated, _ptr(ptr, "contains")), _ptr(ptr, "contains")))
        others_only = seq(other, Repeat(seq(sep, other), 0, None)) if other != NOTHING else NOTHING
        if big_m == 0 or match == NOTHING:
            return self.container("[", others_only, True, "]") if m == 0 else NOTHING
        lo = max(m, 1)
        hi = None if big_m is None else big_m
        body = seq(Repeat(seq(other, sep), 0, None), match,
                   Repeat(seq(Repeat(seq(sep, other), 0, None), sep, match), lo - 1, None if hi is None else hi - 1),
                   Repeat(seq(sep, other), 0, None))
        if m == 0:
            body = alt(others_only, body)
        return self.container("[", body, m == 0, "]")

    def share(self, e: Expr) -> Expr:
        """A large expression used in several places of one construct becomes a named rule,
        so nesting does not copy it (nested arrays would otherwise double per level); the
        automaton inlines it again when that is cheap."""
        if expr_size(e, 64) < 64:
            return e
        self._shared += 1
        name = f"part{self._shared}"
        self.rules[name] = e
        return Ref(name)

    @property
    def sep(self) -> Expr:
        return seq(self.ws, Lit(","), self.ws)

    def container(self, open_: str, body: Expr, nullable: bool, close: str) -> Expr:
        """``open body close`` with whitespace around a non-empty body; an empty container
        gets one whitespace run, not two (whitespace stays bounded by max_whitespace)."""
        ws = self.ws
        full = seq(Lit(open_), ws, body, ws, Lit(close)) if body != NOTHING else NOTHING
        return alt(seq(Lit(open_), ws, Lit(close)), full) if nullable else full

    def object(self, schema: dict, ptr: str) -> Expr:
        ws = self.ws
        props: dict[str, Any] = dict(schema.get("properties", {}))
        required = list(dict.fromkeys(schema.get("required", [])))
        additional = schema.get("additionalProperties", True)
        patterns: dict[str, Any] = dict(schema.get("patternProperties", {}))
        names_schema = schema.get("propertyNames", True)
        if len(patterns) > MAX_NAME_PATTERNS:
            self.unsupported("patternProperties", _ptr(ptr, "patternProperties"),
                             f"more than {MAX_NAME_PATTERNS} patterns")
            patterns = {}
        for pat in patterns:  # before re.search meets them: refused with their location
            self.pattern_expr(pat, _ptr(ptr, "patternProperties", pat))
        name_ok = self.checker(names_schema, _ptr(ptr, "propertyNames")) if names_schema is not True else (lambda _: True)

        def value_schema(name: str) -> Any:
            # properties, then every matching patternProperties; additionalProperties only if neither
            matching = [pat for pat in patterns if re.search(pat, name)]
            sub = props.get(name, True if matching else additional)
            for pat in matching:
                sub = self.merged(sub, patterns[pat], _ptr(ptr, "patternProperties", pat))
            return sub if name_ok(name) else False

        entries: list[tuple[str, Expr, bool]] = []
        declared = list(dict.fromkeys([*props, *required]))
        for name in declared:
            where = (_ptr(ptr, "properties", name) if name in props
                     else next((_ptr(ptr, "patternProperties", pat) for pat in patterns if re.search(pat, name)), None)
                     or (_ptr(ptr, "additionalProperties") if "additionalProperties" in schema else _ptr(ptr, "required")))
            value = self.share(self.node(value_schema(name), where))
            if value == NOTHING:
                if name in required:
                    return NOTHING
                continue
            entries.append((name, value, name in required))

        def member(name: str, value: Expr) -> Expr:
            return seq(Lit(dumps_compact(name)), ws, Lit(":"), ws, value)

        sep = seq(ws, Lit(","), ws)
        extra_member = self.extra_members(ptr, declared, additional, patterns, names_schema)
        if extra_member is not None:
            extra_member = alt(*(seq(k, ws, Lit(":"), ws, v) for k, v in extra_member)) or None
            if extra_member == NOTHING:
                extra_member = None
            else:  # it recurs after every declared member: one rule, not a copy per gap
                extra_member = self.share(extra_member)

        def tail_after(i: int) -> Expr:
            # members i.. each preceded by a comma, then additional members
            parts: list[Expr] = []
            for name, value, req in entries[i:]:
                m = seq(sep, member(name, value))
                parts.append(m if req else opt(m))
            if extra_member is not None:
                parts.append(Repeat(seq(sep, extra_member), 0, None))
            return seq(*parts)

        leading_optional = next((k for k, e in enumerate(entries) if e[2]), len(entries))
        min_props, max_props = schema.get("minProperties", 0), schema.get("maxProperties")
        if max_props is not None and max_props < min_props:
            return NOTHING
        counted = min_props > sum(e[2] for e in entries) or (max_props is not None and (
            extra_member is not None or max_props < len(entries)))
        # no required member (and no minimum): "{}" is valid
        nullable = leading_optional == len(entries) and min_props == 0
        if counted:
            body = self._object_body_rules(entries, member, sep, extra_member, (min_props, max_props))
            return self.container("{", body, nullable, "}")
        if leading_optional > 2:
            body = self._object_body_rules(entries, member, sep, extra_member)
            return self.container("{", body, nullable, "}")
        options: list[Expr] = []
        for k, (name, value, req) in enumerate(entries):
            options.append(seq(member(name, value), tail_after(k + 1)))
            if req:
                break
        else:  # every declared member optional: they may all be absent
            if extra_member is not None:
                options.append(seq(extra_member, Repeat(seq(sep, extra_member), 0, None)))
        return self.container("{", alt(*options) if options else NOTHING, nullable, "}")


    def pattern_expr(self, pattern: Any, ptr: str) -> Expr:
        """A schema pattern as a search expression; a pattern structgen cannot compile raises
        ``RegexError`` carrying ``ptr``."""
        try:
            return search_expr(pattern)
        except RegexError as exc:
            raise RegexError(exc.message, pattern=exc.pattern, position=exc.position, pointer=ptr) from None

    def merged(self, a: Any, b: Any, ptr: str) -> Any:
        def resolve(ref: str) -> Any:
            try:
                target = self.to_pointer(ref, ptr)
                return self.absolutised(self.resolve_pointer(target, ptr), target)
            except UnsupportedSchemaError as exc:
                raise MergeConflict("$ref", str(exc)) from exc

        try:
            return merge(a, b, resolve, ref_alone=self.legacy_ref)
        except MergeConflict as exc:
            self.unsupported(exc.keyword, ptr, exc.why)
            return a

    def extra_members(self, ptr: str, declared: list[str], additional: Any, patterns: dict, names_schema: Any):
        """(key Expr, value Expr) pairs for members whose names are not declared.

        Names are split by which patternProperties they match (each class gets the merged
        schema of its patterns, the class matching none gets additionalProperties), minus the
        declared names, within propertyNames. With patterns, names are limited to printable
        ASCII, where ECMA-262 and Python regexes agree on what matches.
        """
        any_name: Expr = Repeat(ANY_CHAR, 0, None)
        if patterns:
            any_name = Repeat(CharSet.of([(0x20, 0x7E)]), 0, None)
        if names_schema is not True:
            lang = self.string_language(names_schema, _ptr(ptr, "propertyNames"))
            if lang is None:
                return None
            any_name = intersect(any_name, lang)
        if declared:
            any_name = difference(any_name, alt(*(Lit(n) for n in declared)))
        pats = list(patterns)
        langs = {p: self.pattern_expr(p, _ptr(ptr, "patternProperties", p)) for p in pats}
        # the names matching exactly the chosen patterns, split one pattern at a time; empty
        # regions are dropped as they appear (patterns with distinct literal names leave
        # one region per pattern, not 2**k)
        regions: list[tuple[Expr, list[str]]] = [(any_name, [])]
        try:
            for p in pats:
                split: list[tuple[Expr, list[str]]] = []
                for names, chosen in regions:
                    inside, outside = intersect(names, langs[p]), difference(names, langs[p])
                    split += [(inside, [*chosen, p])] if inside != NOTHING else []
                    split += [(outside, chosen)] if outside != NOTHING else []
                if len(split) > MAX_NAME_REGIONS:
                    self.unsupported("patternProperties", _ptr(ptr, "patternProperties"),
                                     f"the patterns split names into more than {MAX_NAME_REGIONS} classes")
                    return None
                regions = split
        except AutomatonSizeError as exc:
            self.unsupported("patternProperties", _ptr(ptr, "patternProperties"), str(exc))
            return None
        out = []
        for names, chosen in regions:
            value: Any = additional if not chosen else True
            for p in chosen:
                value = self.merged(value, patterns[p], _ptr(ptr, "patternProperties", p))
            v = self.node(value, _ptr(ptr, "patternProperties", chosen[0]) if chosen else _ptr(ptr, "additionalProperties"))
            if v == NOTHING:
                continue
            out.append((seq(Lit('"'), _json_encode_expr(names), Lit('"')), v))
        if out:
            self.free_names = True
        return out or None

    def string_language(self, schema: Any, ptr: str) -> Expr | None:
        """The decoded strings that ``schema`` accepts as a string instance (propertyNames
        applies its subschema to each name), or None (unsupported, recorded as such).

        A schema that cannot match a string (a ``type`` without "string", ``false``, an enum
        without strings) gives NOTHING: no property may exist. Keywords of other types
        (``minimum``, ``items``, ``required``...) hold for every string.
        """
        if schema is False:
            return NOTHING
        if schema is True:
            return Repeat(ANY_CHAR, 0, None)
        schema = self.resolve_shallow(schema, ptr)
        if not isinstance(schema, dict):
            return NOTHING if schema is False else Repeat(ANY_CHAR, 0, None)
        keys = {k for k in schema if k in VALIDATION_KEYWORDS or k in SUPPORTED_KEYWORDS} - ANNOTATION_KEYWORDS
        unhandled = keys - _NAME_KEYWORDS - _NON_STRING_KEYWORDS
        if unhandled:
            kw = sorted(unhandled)[0]
            self.unsupported(kw, _ptr(ptr, kw), "this keyword is not supported in propertyNames")
            return None
        types = schema.get("type", "string")
        if "string" not in ([types] if isinstance(types, str) else types):
            return NOTHING
        if "enum" in schema or "const" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            check = self.validator(schema)
            return alt(*(Lit(v) for v in values if isinstance(v, str) and check.is_valid(v)))
        lang: Expr = Repeat(ANY_CHAR, schema.get("minLength", 0), schema.get("maxLength"))
        parts: list[Expr] = []
        if "format" in schema:
            if schema["format"] not in FORMAT_PATTERNS:
                self.unsupported("format", _ptr(ptr, "format"), f"format {schema['format']!r} is not enforced")
                return None
            parts.append(parse_regex(FORMAT_PATTERNS[schema["format"]]))
        if "pattern" in schema:
            parts.append(self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern")))
        if "$ref" in schema:
            target = self.to_pointer(schema["$ref"], _ptr(ptr, "$ref"))
            parts.append(self.string_language(self.resolve_pointer(target, _ptr(ptr, "$ref")), target))
        for i, sub in enumerate(schema.get("allOf", [])):
            parts.append(self.string_language(sub, _ptr(ptr, "allOf", i)))
        if "anyOf" in schema:
            options = [self.string_language(sub, _ptr(ptr, "anyOf", i)) for i, sub in enumerate(schema["anyOf"])]
            parts.append(None if any(o is None for o in options) else alt(*options))
        if any(p is None for p in parts):
            return None
        try:
            if "oneOf" in schema:  # exactly one branch: each branch minus all the others
                options = [self.string_language(sub, _ptr(ptr, "oneOf", i)) for i, sub in enumerate(schema["oneOf"])]
                if any(o is None for o in options):
                    return None
                parts.append(alt(*(difference(o, alt(*(p for j, p in enumerate(options) if j != i)))
                                   for i, o in enumerate(options))))
            if "not" in schema:
                negated = self.string_language(schema["not"], _ptr(ptr, "not"))
                if negated is None:
                    return None
                parts.append(difference(Repeat(ANY_CHAR, 0, None), negated))
            for p in parts:
                lang = intersect(lang, p)
        except AutomatonSizeError as exc:
            self.unsupported("propertyNames", ptr, f"the language of these names is too large: {exc}")
            return None
        return lang

    def _object_body_rules(self, entries, member, sep, extra_member, counts: tuple[int, int | None] | None = None) -> Expr:
        """Members in order, optional ones skippable, commas only between present ones.

        Written with one helper rule per position so that its size stays linear in the
        number of properties: ``rest_k`` follows an emitted member, ``first_k`` is where
        nothing has been emitted yet. (Inlined alternatives would copy every suffix.)

        With ``counts`` (minProperties, maxProperties), ``rest_k_c`` also knows that ``c``
        members were emitted (counted up to the maximum, or up to the minimum when there is
        no maximum: past it the count no longer matters), and undeclared members fill the
        remaining minimum or stop at the maximum: rules grow with properties x counts.
        """
        self._objects += 1
        base = f"obj{self._objects}"
        n = len(entries)
        lo, hi = counts if counts is not None else (0, None)
        cap = hi if hi is not None else lo

        def c_of(c: int) -> int:
            return c if hi is not None else min(c, cap)

        def extras_from(c: int) -> Expr:  # undeclared members after c counted ones
            need, room = max(0, lo - c), (None if hi is None else hi - c)
            if room is not None and room < need:
                return NOTHING
            if extra_member is None:
                return EMPTY if need == 0 else NOTHING
            return Repeat(seq(sep, extra_member), need, room)

        def rest(k: int, c: int) -> Expr:
            return Ref(f"{base}_rest{k}_{c_of(c)}") if hi is None or c <= hi else NOTHING

        # after k declared positions at most k members were emitted: the counts beyond are
        # only ever met by undeclared members, which a counted repeat covers (extras_from),
        # so the rules grow with properties x min(properties, bound), never with the bound
        for c in range(min(n, cap) + 1):
            self.rules[f"{base}_rest{n}_{c}"] = extras_from(c)
        if extra_member is not None and (hi is None or hi >= 1):
            self.rules[f"{base}_first{n}"] = seq(extra_member, extras_from(1))
        else:  # non-empty bodies only: the empty object is the container's own alternative
            self.rules[f"{base}_first{n}"] = NOTHING
        for k in reversed(range(n)):
            name, value, req = entries[k]
            m = member(name, value)
            for c in range(min(k, cap) + 1):
                emitted = seq(sep, m, rest(k + 1, c + 1))
                self.rules[f"{base}_rest{k}_{c}"] = emitted if req else alt(emitted, rest(k + 1, c))
            first = seq(m, rest(k + 1, 1))
            self.rules[f"{base}_first{k}"] = first if req else alt(first, Ref(f"{base}_first{k + 1}"))
        return Ref(f"{base}_first0")


_SCALARS = {"null": type(None), "boolean": bool, "string": str}
_DEFAULT_BASE = "https://structgen.invalid/root.json"  # base URI of a document without $id
MAX_UNIQUE_VALUES = 8


# keyword -> (the type it constrains, the keyword and value of its violation)
_NEGATABLE_BOUNDS: dict[str, tuple[str, Any]] = {
    "minimum": ("number", lambda v: {"exclusiveMaximum": v}),
    "maximum": ("number", lambda v: {"exclusiveMinimum": v}),
    "exclusiveMinimum": ("number", lambda v: {"maximum": v}),
    "exclusiveMaximum": ("number", lambda v: {"minimum": v}),
    "minLength": ("string", lambda v: {"maxLength": v - 1} if v > 0 else None),
    "maxLength": ("string", lambda v: {"minLength": v + 1}),
    "minItems": ("array", lambda v: {"maxItems": v - 1} if v > 0 else None),
    "maxItems": ("array", lambda v: {"minItems": v + 1}),
    "minProperties": ("object", lambda v: {"maxProperties": v - 1} if v > 0 else None),
    "maxProperties": ("object", lambda v: {"minProperties": v + 1}),
    "pattern": ("string", lambda v: {NOT_PATTERNS: [v]}),
}


def _negate_bounds(s: dict, keys: set[str]) -> Any:
    """``not s`` for a schema of bounds (and a type): the excluded types, and for each type
    that ``s`` allows, one option per bound violated. None when not expressible."""
    if "type" in s and not isinstance(s["type"], (str, list)):
        return None
    types = _types_of({"type": s["type"]} if "type" in s else {})
    options: list[Any] = []
    integers_only = "integer" in types and "number" not in types
    # "number" covers the integers: with integers allowed, the other numbers are added below
    others = [t for t in ALL_TYPES if t != "integer" and t not in types and not (t == "number" and integers_only)]
    if others:
        options.append({"type": others})
    if integers_only:
        options.append({"type": "number", FRACTION: True})  # the numbers s excludes by type
    for kw in sorted(keys - {"type"}):
        family, violation = _NEGATABLE_BOUNDS[kw]
        value = s[kw]
        if family == "number" and integers_only:
            family = "integer"
        elif family not in types:
            continue  # the bound never applies: that type is excluded above
        if kw == "pattern" and not isinstance(value, str):
            return None
        if kw != "pattern" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return None  # draft-04 boolean exclusive flags
        v = violation(value)
        if v is not None:
            options.append({"type": family, **v})
    return {"anyOf": options} if options else False


FRACTION = "x-structgen-fraction"
"""Internal keyword: numbers that are not integers (what ``not: {type: integer}`` leaves)."""
# A number with a fraction that jsonschema (draft 6+: ``float.is_integer()`` after
# ``json.loads``) does not read as an integer. A decimal with at most 15 significant digits
# (DBL_DIG) survives the round trip through a double, so its double is not a whole number
# either; longer ones may round to one (1.0000000000000001 is 1.0, and every double of
# 2**53 or more is whole), and very small ones may underflow to 0.0: neither is written.
_FRACTION_TEXT = "-?(" + "|".join(
    [r"0\.0{0,30}([1-9][0-9]{0,13})?[1-9]"]
    + [rf"[1-9][0-9]{{{i - 1}}}\.[0-9]{{0,{14 - i}}}[1-9]" for i in range(1, 15)]) + ")"



def _check_fraction(validator: Any, flag: Any, instance: Any, schema: dict):
    if flag and validator.is_type(instance, "number") and (validator.is_type(instance, "integer") or instance != instance):
        yield _jsonschema_error(f"{instance!r} is an integer")


def _check_not_strings(validator: Any, words: list, instance: Any, schema: dict):
    if isinstance(instance, str) and instance in words:
        yield _jsonschema_error(f"{instance!r} is excluded")


def _jsonschema_error(message: str) -> Any:
    return ValidationError(message)


NOT_PATTERNS = "x-structgen-not-patterns"
"""Internal keyword: strings that match none of the listed patterns (``not: {pattern: p}``)."""


def _check_not_patterns(validator: Any, patterns: list, instance: Any, schema: dict):
    if isinstance(instance, str) and any(re.search(p, instance) for p in patterns):
        yield _jsonschema_error(f"{instance!r} matches an excluded pattern")


NOT_STRINGS = "x-structgen-not-strings"
"""Internal keyword: strings other than those listed (what ``not: {const: "s"}`` leaves)."""


def _negate_literals(values: list) -> Any:
    """``not {enum: values}`` for scalar values, else None: the other types, the other
    boolean, numbers in the open intervals between the excluded ones, other strings."""
    if any(isinstance(v, (dict, list)) for v in values):
        return None
    options: list[Any] = [{"type": ["object", "array"]}]
    if not any(v is None for v in values):
        options.append({"type": "null"})
    bools = [v for v in values if isinstance(v, bool)]
    options += [{"const": b} for b in (True, False) if b not in bools]
    numbers = sorted({v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)})
    if not numbers:
        options.append({"type": "number"})
    else:
        options.append({"type": "number", "exclusiveMaximum": numbers[0]})
        options += [{"type": "number", "exclusiveMinimum": lo, "exclusiveMaximum": hi} for lo, hi in zip(numbers, numbers[1:])]
        options.append({"type": "number", "exclusiveMinimum": numbers[-1]})
    strings = sorted({v for v in values if isinstance(v, str)})
    options.append({"type": "string", NOT_STRINGS: strings} if strings else {"type": "string"})
    return {"anyOf": options}


def _types_of(s: dict) -> set[str]:
    t = s.get("type")
    types = set(ALL_TYPES) if t is None else ({t} if isinstance(t, str) else set(t))
    if "number" in types:
        types.add("integer")
    lits = [s["const"]] if "const" in s else s.get("enum")
    if lits is not None:
        types &= {_json_type(v) for v in lits} | ({"number"} if any(_json_type(v) == "integer" for v in lits) else set())
    return types


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or isinstance(v, float) and v.is_integer():
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(v)]


def _universal(e: Expr) -> bool:
    """Whether ``e`` matches every string (decided exactly when its complement is small)."""
    if e == Repeat(ANY_CHAR, 0, None):
        return True
    try:
        return difference(Repeat(ANY_CHAR, 0, None), e) == NOTHING
    except AutomatonSizeError:
        return False


def _has_ref(*schemas: Any) -> bool:
    return any(isinstance(s, dict) and "$ref" in s for s in schemas)


def _disjoint(x: Any, y: Any, depth: int = 0) -> bool:
    """True only when no instance can match both schemas (a sufficient check)."""
    if x is False or y is False:
        return True
    if not isinstance(x, dict) or not isinstance(y, dict) or depth > 4:
        return False
    common = _types_of(x) & _types_of(y)
    if not common:
        return True
    lx = [x["const"]] if "const" in x else x.get("enum")
    ly = [y["const"]] if "const" in y else y.get("enum")
    if lx is not None and ly is not None and not any(json_equal(a, b) for a in lx for b in ly):
        return True
    if common != {"object"}:
        return False  # the property rules below hold for objects only: other values may match both
    px, py = x.get("properties", {}), y.get("properties", {})
    rx, ry = set(x.get("required", [])), set(y.get("required", []))
    for name in rx & ry:
        if name in px and name in py and _disjoint(px[name], py[name], depth + 1):
            return True
    for req, other in ((rx, y), (ry, x)):  # required on one side, forbidden on the other
        for name in req:
            props = other.get("properties", {})
            if props.get(name) is False or (name not in props and other.get("additionalProperties") is False
                                            and not other.get("patternProperties")):
                return True
    return False


def _literal_values(s: Any) -> list | None:
    """The values of a schema that is only ``const`` or ``enum`` (and annotations), else None."""
    if not isinstance(s, dict) or set(s) - ANNOTATION_KEYWORDS not in ({"const"}, {"enum"}):
        return None
    return [s["const"]] if "const" in s else (list(s["enum"]) if isinstance(s["enum"], list) else None)


def _negate(s: Any) -> Any:
    """A schema for ``not s`` in the decidable cases, else None."""
    if s is True or s == {}:
        return False
    if s is False:
        return True
    if not isinstance(s, dict):
        return None
    keys = set(s) - ANNOTATION_KEYWORDS
    if keys == {"not"}:
        return s["not"]  # double negation
    if len(keys) > 1 and keys & {"not", "allOf", "anyOf"}:
        # not (R and not B and allOf[C...] and anyOf[D...]) = not R or B or not C... or all of not D...
        rest = {k: v for k, v in s.items() if k not in ("not", "allOf", "anyOf")}
        options: list[Any] = [_negate(rest)]
        if "not" in s:
            options.append(s["not"])
        if isinstance(s.get("allOf"), list):
            options += [_negate(x) for x in s["allOf"]]
        if isinstance(s.get("anyOf"), list):
            negs = [_negate(x) for x in s["anyOf"]]
            options.append(None if any(n is None for n in negs) else {"allOf": negs})
        if any(o is None for o in options):
            return None
        options = [o for o in options if o is not False]
        return {"anyOf": options} if options else False
    if keys in ({"anyOf"}, {"allOf"}) and isinstance(s[next(iter(keys))], list) and s[next(iter(keys))]:
        # De Morgan: not (A or B) = not A and not B; not (A and B) = not A or not B
        members = s[next(iter(keys))]
        if keys == {"anyOf"} and len(members) > 1 and all(_literal_values(x) is not None for x in members):
            # not (const a or const b or enum [c, d]) = not enum [a, b, c, d]: one negation,
            # not an allOf of negations whose merge multiplies their alternatives
            return _negate({"enum": [v for x in members for v in _literal_values(x)]})
        negs = [_negate(x) for x in members]
        if any(n is None for n in negs):
            return None
        return {"allOf": negs} if keys == {"anyOf"} else {"anyOf": negs}
    if keys and keys <= _NEGATABLE_BOUNDS.keys() | {"type"}:
        return _negate_bounds(s, keys)
    if keys in ({"const"}, {"enum"}):
        return _negate_literals([s["const"]] if "const" in s else list(s["enum"]))
    if keys <= {"properties", "required", "type"} and "properties" in keys and s.get("type") in (None, "object"):
        # not (object with each p satisfying S_p, required R): non-objects, a required name
        # absent, or some present p failing S_p
        props, req = s["properties"], list(s.get("required", []))
        # non-objects satisfy s unless s says "type": "object": only then does not-s admit them
        options: list[Any] = ([{"type": [t for t in ALL_TYPES if t not in ("object", "integer")]}]
                              if s.get("type") == "object" else [])
        options += [{"type": "object", "properties": {name: False}} for name in req]
        for name, sub in props.items():
            neg = _negate(sub)
            if neg is None:
                return None
            if neg is not False:
                options.append({"type": "object", "required": [name], "properties": {name: neg}})
        return {"anyOf": options} if options else False
    if keys <= {"type", "prefixItems", "items"} and keys & {"prefixItems", "items"} and s.get("type") in (None, "array") \
            and isinstance(s.get("prefixItems", []), list) and not isinstance(s.get("items"), list) \
            and not ("prefixItems" in s and "items" in s):
        # not (array whose item i satisfies P_i / whose items satisfy I): non-arrays, or an
        # array with an item i that fails P_i / some item failing I
        options = [{"type": [t for t in ALL_TYPES if t not in ("array", "integer")]}] if s.get("type") == "array" else []
        for i, sub in enumerate(s.get("prefixItems", [])):
            neg = _negate(sub)
            if neg is None:
                return None
            if neg is not False:
                options.append({"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [neg]})
        if "items" in s:
            neg = _negate(s["items"])
            if neg is None:
                return None
            if neg is not False:
                options.append({"type": "array", "contains": neg})
        return {"anyOf": options} if options else False
    if keys == {"required"} and len(s["required"]) >= 1:
        # not-required holds for objects only (any non-object satisfies "required")
        return {"anyOf": [{"type": "object", "properties": {name: False}} for name in s["required"]]}
    return None




MAX_NAME_PATTERNS = 16
"""patternProperties patterns per object (names are split into classes by the patterns they match)."""
MAX_NAME_REGIONS = 32
"""Non-empty classes of names those patterns may split names into."""


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


def _existing_prefix(root: Any, pointer: str) -> str:
    """The longest prefix of ``pointer`` (whole segments) that names a location in ``root``."""
    node, good = root, ""
    for raw in pointer.split("/")[1:]:
        node = _child(node, raw)
        if node is _MISSING:
            break
        good += "/" + raw
    return good


_MISSING = object()


def _child(node: Any, raw: str) -> Any:
    """The member a JSON-pointer segment (escaped) names in ``node``, or ``_MISSING``."""
    part = unescape(raw)
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return _MISSING


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


def _decimal_bounds(schema: dict):
    """(lo, lo_strict, hi, hi_strict) as exact decimals, the tightest of all bound keywords."""
    def dec(v) -> Decimal:
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)

    lo = hi = None
    lo_strict = hi_strict = False
    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    cands_lo = []
    cands_hi = []
    if "minimum" in schema:
        cands_lo.append((dec(schema["minimum"]), ex_lo is True))
    if "maximum" in schema:
        cands_hi.append((dec(schema["maximum"]), ex_hi is True))
    if isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool):
        cands_lo.append((dec(ex_lo), True))
    if isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool):
        cands_hi.append((dec(ex_hi), True))
    for v, strict in cands_lo:
        if lo is None or v > lo or (v == lo and strict):
            lo, lo_strict = v, strict
    for v, strict in cands_hi:
        if hi is None or v < hi or (v == hi and strict):
            hi, hi_strict = v, strict
    return lo, lo_strict, hi, hi_strict


def _int_bounds(schema: dict, ptr: str) -> tuple[int | None, int | None]:
    lo = hi = None

    def tighten_lo(v: float, exclusive: bool) -> None:
        nonlocal lo
        c = math.floor(v) + 1 if exclusive else math.ceil(v)
        lo = c if lo is None else max(lo, c)

    def tighten_hi(v: float, exclusive: bool) -> None:
        nonlocal hi
        c = math.ceil(v) - 1 if exclusive else math.floor(v)
        hi = c if hi is None else min(hi, c)

    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if "minimum" in schema:
        tighten_lo(schema["minimum"], ex_lo is True)  # draft-04 boolean form
    if "maximum" in schema:
        tighten_hi(schema["maximum"], ex_hi is True)
    if isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool):
        tighten_lo(ex_lo, True)
    if isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool):
        tighten_hi(ex_hi, True)
    return lo, hi


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
