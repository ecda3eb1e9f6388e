"""JSON Schema → grammar: the combinators. ``allOf`` (and ``$ref`` with siblings) by merging
schemas, ``oneOf`` where branches are provably disjoint or negatable, ``not`` and ``if`` by
negation, ``unevaluatedProperties``/``unevaluatedItems`` by expanding the applicators in place;
with the negation and disjointness helpers those rewrites rest on."""
from __future__ import annotations

import json
from typing import Any

from ..errors import LimitError, SchemaError, StructgenError, UnsupportedSchemaError
from ..grammar import NOTHING, Expr
from ..regex.regular import intersect
from .base import ALL_TYPES, ANNOTATION_KEYWORDS, FRACTION, NOT_PATTERNS, NOT_STRINGS, ConverterBase, _existing_prefix, _ptr
from .document import dialect_of
from .json_values import json_equal
from .merge import CONTAINS_ALL, MergeConflict, merge, merge_lenient
from .unevaluated import expand_unevaluated

# keywords that constrain only one family of types (numbers: integers too)
_FAMILY_KEYWORDS = {
    "null": frozenset(),
    "boolean": frozenset(),
    "object": frozenset({"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                         "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
                         "unevaluatedProperties"}),
    "array": frozenset({"items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
                        "minItems", "maxItems", "uniqueItems", "unevaluatedItems", CONTAINS_ALL}),
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
}
_OTHER_FAMILY_KEYWORDS = {f: frozenset().union(*(k for g, k in _FAMILY_KEYWORDS.items() if g != f))
                          for f in _FAMILY_KEYWORDS}


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


def _tags_apart(a: dict[str, frozenset] | None, b: dict[str, frozenset] | None) -> bool:
    """Whether two branches' discriminators (``_string_tags``) prove them disjoint: a property
    both require, with no value in common."""
    return a is not None and b is not None and any(name in b and not (values & b[name]) for name, values in a.items())


def _literal_values(s: Any) -> list | None:
    """The values of a schema that is only ``const`` or ``enum`` (and annotations), else None."""
    if not isinstance(s, dict) or set(s) - ANNOTATION_KEYWORDS not in ({"const"}, {"enum"}):
        return None
    return [s["const"]] if "const" in s else (list(s["enum"]) if isinstance(s["enum"], list) else None)


def _asserts_nothing(key: str, value: Any) -> bool:
    """Whether a keyword holds for every instance: applicators of ``true`` only."""
    if key in ("additionalProperties", "items", "unevaluatedProperties", "unevaluatedItems", "propertyNames"):
        return value is True or value == {}
    if key in ("properties", "patternProperties") and isinstance(value, dict):
        return all(v is True or v == {} for v in value.values())
    return False


def _without_vacuous(s: dict) -> dict:
    """``s`` without the keywords that assert nothing, unless a keyword whose meaning depends
    on what the others evaluate (``additionalProperties``, ``unevaluated*``) is there too."""
    if any(k in s and s[k] is not True and s[k] != {} for k in ("additionalProperties", "additionalItems",
                                                               "unevaluatedProperties", "unevaluatedItems")):
        return s
    return {k: v for k, v in s.items() if not _asserts_nothing(k, v)}


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
    if keys in ({"contains"}, {"contains", "type"}) and s.get("type") in (None, "array"):
        # not (array with an item satisfying C): non-arrays, or arrays whose items all fail C
        neg = _negate(s["contains"])
        if neg is None:
            return None
        options = [{"type": [t for t in ALL_TYPES if t not in ("array", "integer")]}] if s.get("type") == "array" else []
        return {"anyOf": [*options, {"type": "array", "items": neg}]} if neg is not True or options else {"type": "array"}
    if keys == {"required"} and len(s["required"]) >= 1:
        # not-required holds for objects only (any non-object satisfies "required")
        return {"anyOf": [{"type": "object", "properties": {name: False}} for name in s["required"]]}
    return None


class CombinatorsMixin(ConverterBase):
    """The converter's allOf/oneOf/not/if rewrites, merged schemas, unevaluated*."""

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
        tags = [self._string_tags(b) for b in resolved]
        return next(((i, j) for i in range(len(resolved)) for j in range(i + 1, len(resolved))
                     if not _tags_apart(tags[i], tags[j]) and not self.disjoint(resolved[i], resolved[j], ptr)), None)

    def _string_tags(self, branch: Any) -> dict[str, frozenset] | None:
        """A branch's discriminators: per property it requires whose schema lists its values
        (``const`` or ``enum``, strings only), those values; None where the branch is not
        an object-only schema (then no property tells it apart from another branch).

        Two object-only branches that require one property with no value in common are
        disjoint (the first rule of :func:`_disjoint`): checked on these sets, the pairs of
        a discriminated union (dozens of branches, hundreds of pairs) cost a set
        intersection each instead of a walk of both schemas (6 of 32 ms converting an Azure
        Data Factory schema)."""
        if not isinstance(branch, dict) or (self.legacy_ref and "$ref" in branch) or _types_of(branch) != {"object"}:
            return None
        props, required = branch.get("properties"), branch.get("required")
        if not isinstance(props, dict) or not isinstance(required, list):
            return None
        tags: dict[str, frozenset] = {}
        for name in required:
            sub = props.get(name) if isinstance(name, str) else None
            if not isinstance(sub, dict) or (self.legacy_ref and "$ref" in sub):
                continue
            values = [sub["const"]] if "const" in sub else sub.get("enum")
            if isinstance(values, list) and values and all(type(v) is str for v in values):
                tags[name] = frozenset(values)
        return tags

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
        negated = [self.negation(b, ptr) for b in branches]
        return None if any(n is None for n in negated) else negated

    def negation(self, schema: Any, ptr: str, depth: int = 0) -> Any:
        """``not schema`` where decidable, else None: :func:`_negate`, and where it gives up,
        the same after following ``$ref``s and dropping keywords that assert nothing
        (``properties`` of ``true``, ``unevaluatedProperties: true``...), through ``anyOf``/
        ``allOf`` (De Morgan) and ``oneOf``: not exactly one branch = none, or two at once."""
        schema = self.resolve_shallow(schema, ptr)
        negated = _negate(schema)
        if negated is not None or depth > 4 or not isinstance(schema, dict) or not self._single_resource():
            return negated  # several resources: a branch copied below could change what its $refs mean
        plain = _without_vacuous(schema)
        keys = set(plain) - ANNOTATION_KEYWORDS
        if not keys:
            return False  # annotations only: every value matches
        if keys in ({"additionalProperties"}, {"additionalProperties", "properties"}) \
                and plain["additionalProperties"] is False and len(plain.get("properties", {})) <= 4:
            # not (objects of the declared names only): objects with another name, i.e. with
            # more members than the declared ones present (one option per set of those)
            names = list(plain.get("properties", {}))
            negs = [_negate(plain["properties"][n]) for n in names]
            if any(n is None for n in negs):
                return None
            options: list[Any] = []
            for mask in range(1 << len(names)):
                present = [n for i, n in enumerate(names) if mask >> i & 1]
                options.append({"type": "object", "required": present, "minProperties": len(present) + 1,
                                "properties": {n: False for n in names if n not in present}})
            # or a declared member failing its schema
            options += [{"type": "object", "required": [n], "properties": {n: neg}}
                        for n, neg in zip(names, negs) if neg is not False]
            return {"anyOf": options}
        if len(keys) != 1 or keys.isdisjoint({"anyOf", "allOf", "oneOf"}):
            return _negate(plain) if plain != schema else None
        key = next(iter(keys))
        members = plain[key]
        if not isinstance(members, list) or not members or len(members) > 4:
            return None
        negs = [self.negation(m, ptr, depth + 1) for m in members]
        if any(n is None for n in negs):
            return None
        if key == "anyOf":
            return {"allOf": negs}
        if key == "allOf":
            return {"anyOf": negs}
        # the branches themselves, without what asserts nothing (patternProperties of true
        # would block merging beside additionalProperties)
        plain = [self.resolve_shallow(m, ptr) for m in members]
        plain = [_without_vacuous(m) if isinstance(m, dict) else m for m in plain]
        pairs = [{"allOf": [plain[i], plain[j]]} for i in range(len(plain)) for j in range(i + 1, len(plain))]
        return {"anyOf": [{"allOf": negs}, *pairs]}

    # unevaluated*: expanded into the in-place applicators (allOf/anyOf/oneOf/if/$ref) around
    # them, so they live with those
    def has_unevaluated(self, schema: Any, ptr: str) -> bool:
        """Whether an unevaluated* keyword applies to ``schema``'s instance in place: in it, or
        in its allOf/anyOf/oneOf/if/then/else/dependentSchemas members, following $refs."""
        if not self.any_unevaluated():  # (a walk per allOf part and base was 4% of converting
            return False                # a large schema that has none anywhere)
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

        try:
            return walk(schema, ptr)
        finally:
            # the closure refers to itself: a reference cycle through `self`, which held the
            # whole converter until a garbage collection (which compiles then triggered)
            del walk

    def unevaluated(self, schema: dict, ptr: str) -> Any:
        """``schema`` with its unevaluated* keywords turned into plain ones (see :mod:`.unevaluated`)."""
        def resolve_ref(ref: str, at: str) -> tuple[Any, str]:
            target = self.to_pointer(ref, at)
            if not self.doc.dynamic_names:
                return self.resolve_pointer(target, at), target
            try:
                return self.inlined(ref, at), target
            except MergeConflict as exc:
                raise UnsupportedSchemaError(exc.why, pointer=at, keyword=exc.keyword) from None

        def unsupported(keyword: str, at: str, why: str) -> None:
            self.unsupported(keyword, at, why)

        return expand_unevaluated(schema, ptr, resolve_ref=resolve_ref, oneof_overlap=self.oneof_overlap,
                                  negations=self.oneof_negations,
                                  unsupported=unsupported, rebase=self.rebased, legacy_items=self.legacy_ref,
                                  contains_annotates=dialect_of(self.root)[1] == "2020-12")

    def combined(self, base: dict, parts: list, ptr: str, keyword: str) -> Expr:
        """The intersection of ``base`` and every schema of ``parts`` (allOf semantics)."""
        def resolve(ref: str) -> Any:
            return self.inlined(ref, _ptr(ptr, keyword))

        # a part's unevaluated* keywords see only that part's annotations: made plain before
        # merging, which would otherwise let them see the other parts' properties
        parts = [self.unevaluated(p, _ptr(ptr, keyword)) if self.has_unevaluated(p, _ptr(ptr, keyword)) else p
                 for p in parts]
        if self.doc.dynamic_names:
            # combined, a part's embedded resources are no longer entered on the way down: its
            # references keep the scope they are written in
            base = self.pinned(base, ptr, self.scope, self.doc.base_at(ptr.rpartition("/")[0]))
            parts = [self.pinned(p, _ptr(ptr, keyword), self.scope, self.doc.base_at(ptr)) for p in parts]
        if self.has_unevaluated(base, ptr):
            base = self.unevaluated(base, ptr)
        # so do those of a subschema at a member or item location (an uncle's annotations
        # for the same location do not count): plain there too, as merging needs
        parts = [self.plain_below(p, _ptr(ptr, keyword)) for p in parts]
        base = self.plain_below(base, ptr)
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

    def any_unevaluated(self) -> bool:
        """Whether the word "unevaluated" occurs anywhere in the document (its referenced
        resources are embedded in it): where it does not, no unevaluated* keyword applies
        anywhere, nor appears in a schema derived from the document's. One look, kept."""
        if not hasattr(self, "_any_unevaluated"):
            self._any_unevaluated = "unevaluated" in json.dumps(self.root, default=str)
        return self._any_unevaluated

    def plain_below(self, schema: Any, ptr: str, depth: int = 0) -> Any:
        """``schema`` with each subschema for a member or item (``properties``, ``items``...)
        that has unevaluated* keywords replaced by its plain form (:meth:`unevaluated`):
        exact, as nothing outside that subschema annotates its instance for it."""
        if not self.any_unevaluated() or not isinstance(schema, dict) or depth > 32 \
                or "unevaluated" not in json.dumps(schema, default=str):
            return schema
        out = dict(schema)

        def plain(sub: Any, at: str) -> Any:
            if isinstance(sub, dict) and ("unevaluatedProperties" in sub or "unevaluatedItems" in sub):
                sub = self.unevaluated(sub, at)
            return self.plain_below(sub, at, depth + 1)

        for key, value in schema.items():
            if key in ("properties", "patternProperties") and isinstance(value, dict):
                out[key] = {n: plain(v, _ptr(ptr, key, n)) for n, v in value.items()}
            elif key in ("items", "additionalItems", "additionalProperties", "contains", "propertyNames") \
                    and isinstance(value, dict):
                out[key] = plain(value, _ptr(ptr, key))
            elif key in ("prefixItems", "items") and isinstance(value, list):
                out[key] = [plain(v, _ptr(ptr, key, i)) for i, v in enumerate(value)]
            elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                # in place: not replaced (an enclosing unevaluated* was expanded above), only searched
                out[key] = [self.plain_below(v, _ptr(ptr, key, i), depth + 1) for i, v in enumerate(value)]
            elif key in ("not", "if", "then", "else") and isinstance(value, dict):
                out[key] = self.plain_below(value, _ptr(ptr, key), depth + 1)
        return out

    def merged(self, a: Any, b: Any, ptr: str) -> Any:
        def resolve(ref: str) -> Any:
            return self.inlined(ref, ptr)

        try:
            return merge(a, b, resolve, ref_alone=self.legacy_ref)
        except MergeConflict as exc:
            self.unsupported(exc.keyword, ptr, exc.why)
            return a

