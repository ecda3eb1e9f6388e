"""The converter's shared core: its state, the helpers every keyword family uses (errors,
rule sharing, separators, jsonschema checks), the JSON text constants, and the methods one
family calls in another, declared abstract so that each family module type-checks alone.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from referencing.exceptions import Unresolvable

from ..errors import LimitError, RegexError, SchemaError, UnsupportedSchemaError
from ..grammar import EMPTY, NOTHING, CharSet, Expr, Lit, Ref, Regex, Repeat, alt, expr_size, seq
from ..guards import warn
from ..regex.parser import ANY_CHAR
from .document import ANNOTATION_KEYWORDS, SchemaDocument, legacy_dialect
from .document import existing_prefix as _existing_prefix
from .merge import CONTAINS_ALL
from .pointer import child
from .validation import PATTERN_CHECKS, search

SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "additionalItems", "minItems", "maxItems", "minLength", "maxLength",
    "pattern", "anyOf", "allOf", "oneOf", "not", "dependentRequired", "dependencies", "dependentSchemas",
    "uniqueItems", "patternProperties", "propertyNames", "if", "then", "else", "contains", "minContains", "maxContains",
    "$ref", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format",
    "minProperties", "maxProperties", "multipleOf", "$anchor", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$dynamicAnchor",
    "x-structgen-not-strings", "x-structgen-fraction", "x-structgen-not-patterns",  # written by the converter
    CONTAINS_ALL,
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

_INTEGER = Regex(r"-?(0|[1-9][0-9]*)")
_NUMBER = Regex(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WS_CHARS = CharSet.of([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


def _ptr(base: str, *parts: Any) -> str:
    return child(base, *parts)


MAX_GRAMMAR_RULES = 20_000
"""Rules one schema may generate (a schema of 200 properties needs about 400; the rules of an
object counted with ``minProperties``/``maxProperties`` grow with properties x counts)."""


@lru_cache(maxsize=None)  # one per dialect: jsonschema builds a new class (attrs) at each extend
def _extended_validator(cls: type) -> type:
    """``cls`` (a jsonschema validator class) that also enforces the internal keywords
    negations write (merged into schemas whose literals are then checked by jsonschema)."""
    return jsonschema.validators.extend(cls, {**PATTERN_CHECKS, FRACTION: _check_fraction,
                                              NOT_STRINGS: _check_not_strings, NOT_PATTERNS: _check_not_patterns,
                                              CONTAINS_ALL: _check_contains_all})


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


# the internal keywords negations write: here, not in combinators, because validator() below
# registers their checks with jsonschema
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


def _check_contains_all(validator: Any, schemas: list, instance: Any, schema: dict):
    if isinstance(instance, list) and not all(any(validator.evolve(schema=c).is_valid(x) for x in instance)
                                              for c in schemas):
        yield _jsonschema_error(f"{instance!r} lacks an item one of the contains schemas requires")


def _check_not_strings(validator: Any, words: list, instance: Any, schema: dict):
    if isinstance(instance, str) and instance in words:
        yield _jsonschema_error(f"{instance!r} is excluded")


def _jsonschema_error(message: str) -> Any:
    return ValidationError(message)


NOT_PATTERNS = "x-structgen-not-patterns"
"""Internal keyword: strings that match none of the listed patterns (``not: {pattern: p}``)."""


def _check_not_patterns(validator: Any, patterns: list, instance: Any, schema: dict):
    if isinstance(instance, str) and any(search(p, instance) for p in patterns):
        yield _jsonschema_error(f"{instance!r} matches an excluded pattern")


NOT_STRINGS = "x-structgen-not-strings"
"""Internal keyword: strings other than those listed (what ``not: {const: "s"}`` leaves)."""


class ConverterBase(ABC):
    """What every part of the converter shares. The keyword families are mixins over this
    class, composed into ``to_grammar._Converter``: a family calls another's method through
    the abstract declaration below, so mypy checks each cross-family call without a cycle
    of imports (families import only this module and the helpers under them)."""

    def __init__(self, root: Any, *, strict: bool, whitespace: str, max_whitespace: int) -> None:
        self.root = root
        self.strict = strict
        self.ws: Expr = EMPTY if whitespace == "compact" else Repeat(_WS_CHARS, 0, max_whitespace)
        self.where = ""  # pointer of the schema node being converted (for limit errors)
        self.origins: dict[str, str] = {}  # rule name -> pointer of the node it was made for
        self.constructs: dict[str, Expr] = {}  # pointer -> expression of that node
        self.rules: dict[str, Expr] = _Rules()
        self.rules.owner = self
        self.ref_rules: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}  # (target, scope) -> rule
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
        self.names_can_trap = False  # ... and limits them beyond its declared ones (Grammar.names_can_trap)
        self.refuse_empty = False
        self.legacy_ref = legacy_dialect(root)
        self._doc: SchemaDocument | None = None
        # the dynamic scope (draft 2020-12): for each dynamic $dynamicAnchor name, the anchor of
        # the outermost resource entered so far that declares it (see enter())
        self.scope: tuple[tuple[str, str], ...] = ()
        self._specialised = 0  # references built again for another dynamic scope
        # references pinned to the dynamic scope where they were written (see pinned())
        self._pins: list[tuple[tuple[tuple[str, str], ...], str, str]] = []
        self._pin_index: dict[tuple[tuple[tuple[str, str], ...], str, str], int] = {}

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

    def _root_validator(self):
        """The document's jsonschema validator (its dialect, the internal keywords), made once."""
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.root) if isinstance(self.root, dict) else jsonschema.Draft202012Validator
            # with the dialect's format checker: the literals these checks keep (an enum's members
            # beside a `format`, declared names under propertyNames' `format`) are outputs, and
            # an output must validate where formats are asserted
            self._validator = _extended_validator(cls)(self.root, format_checker=cls.FORMAT_CHECKER)
        return self._validator

    def validator(self, subschema: Any):
        if isinstance(subschema, dict) and "$schema" in subschema:
            # a $schema would make jsonschema switch to its own class of that dialect, which
            # does not know the internal keywords above
            subschema = {k: v for k, v in subschema.items() if k != "$schema"}
        return self._root_validator().evolve(schema=subschema)

    def checker(self, subschema: Any, ptr: str):
        """``value -> bool`` by jsonschema; a pattern Python's ``re`` cannot compile (which
        jsonschema meets only now) raises ``RegexError`` located at ``ptr``'s pattern."""
        if isinstance(subschema, dict):
            # Most checked subschemas are an enum's siblings: a type, annotations, keywords of
            # no dialect. jsonschema's own answer for those is its type check alone (every
            # other key is one its validator ignores), without a validator evolved for the
            # subschema and a walk of its keywords (a tenth of converting a median schema).
            base = self._root_validator()
            constraining = [k for k in subschema if k in base.VALIDATORS]
            if not constraining:
                return lambda value: True
            types = subschema.get("type")
            if constraining == ["type"] and (isinstance(types, str) or (
                    isinstance(types, list) and all(isinstance(t, str) for t in types))):
                is_type = base.is_type
                if isinstance(types, str):
                    return lambda value: is_type(value, types)
                return lambda value: any(is_type(value, t) for t in types)
        is_valid = self.validator(subschema).is_valid

        def check(value: Any) -> bool:
            try:
                return is_valid(value)
            except Unresolvable as exc:  # (a reference the checker meets before the converter)
                refs = [k for k in ("$dynamicRef", "$recursiveRef", "$ref") if isinstance(subschema, dict) and k in subschema]
                kw = refs[0] if refs else None
                raise SchemaError(f"unresolvable reference: {exc}", pointer=_ptr(ptr, kw) if kw else ptr,
                                  keyword=kw) from None
            except (re.error, RegexError) as exc:  # (a pattern neither re nor structgen reads)
                if isinstance(exc, re.error):
                    pattern = exc.pattern if isinstance(exc.pattern, str) else str(subschema)
                    message, position = f"invalid regular expression: {exc.msg}", exc.pos or 0
                else:
                    pattern, message, position = exc.pattern, exc.message, exc.position
                at = _ptr(ptr, "pattern") if isinstance(subschema, dict) and subschema.get("pattern") == pattern else ptr
                raise RegexError(message, pattern=pattern, position=position, pointer=at) from None

        return check

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

    @property
    def doc(self) -> SchemaDocument:
        """The document's resources and anchors, indexed once (after normalisation)."""
        if self._doc is None or self._doc.root is not self.root:
            self._doc = SchemaDocument(self.root)
        return self._doc

    # -- defined by a family mixin or by to_grammar._Converter ------------------------
    # (declared here because a family calls them on ``self``: the composed converter
    # provides each; ABC makes a converter that lacks one fail at construction)

    @abstractmethod
    def node(self, schema: Any, ptr: str) -> Expr: ...

    @abstractmethod
    def resolve_shallow(self, sub: Any, ptr: str) -> Any: ...

    @abstractmethod
    def rebased(self, schema: Any, at: str) -> Any: ...

    @abstractmethod
    def absolutised(self, schema: Any, at: str) -> Any: ...

    @abstractmethod
    def to_pointer(self, ref: str, ptr: str) -> str: ...

    @abstractmethod
    def inlined(self, ref: str, at: str) -> Any: ...

    @abstractmethod
    def pinned(self, schema: Any, at: str, scope: tuple[tuple[str, str], ...], base: str) -> Any: ...

    @abstractmethod
    def resolve_pointer(self, pointer: str, ptr: str) -> Any: ...

    @abstractmethod
    def _single_resource(self) -> bool: ...

    @abstractmethod
    def merged(self, a: Any, b: Any, ptr: str) -> Any: ...

    @abstractmethod
    def pattern_expr(self, pattern: Any, ptr: str) -> Expr: ...
